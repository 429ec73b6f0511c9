"""The settings a program says it ran (rank 0's `settings` fact: the value of each knob of its
table, src/pytorch/program_knobs.py) against those its check asked: a program that ran others (a
flag it dropped, a default of its own) measured something else than its figures are kept as."""

_ABSENT = object()


def problems(run, asked):
    """One-line problems of `run` (a RunOutput) whose program was asked `asked` ({knob: value})."""
    stated = run.events('settings')
    if not stated:
        return ['the program stated no settings (no `settings` fact): what it ran is unknown']
    ran = stated[-1]
    wrong = [f'{name}={ran[name]!r} where {value!r} was asked' if name in ran else f'no {name} (asked {value!r})'
             for name, value in asked.items() if ran.get(name, _ABSENT) != value]
    return [f'the program ran other settings than asked: {"; ".join(wrong)}'] if wrong else []
