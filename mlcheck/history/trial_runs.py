"""Runs of the new software stack inside the "before" selection. An engineer tries the new stack
the week before an upgrade (an image tag pulled again, the site's NCCL upgraded in place), and
that trial run lands in the baseline's period: pooled with the old stack's runs it pulls before's
mean towards after's and hides the regression (issue 30: a -23 % loss read "within noise").
Before's runs of a test that ran on the stack after ran are left out of before, where before
also ran on another stack, they are fewer than the others and the latest (issue 35: a majority,
or runs older than the others, are the baseline), and the report says so in one line.
"""

from mlcheck.figures import stack
from mlcheck.history.samples import group, test_of_sample


def without_trial_runs(before, after):
    """(before without its trial runs, [(test, runs left out, their stack)])."""
    after_stacks = {test: {s.stack for s in runs if s.stack}
                    for test, runs in group(after, test_of_sample).items()}
    kept, left_out = [], []
    for test, runs in group(before, test_of_sample).items():
        stacks = {s.stack for s in runs if s.stack}
        trial = stacks & after_stacks.get(test, set())
        on_trial = [s for s in runs if s.stack in trial]
        others = [s for s in runs if s.stack not in trial]
        if len(stacks) < 2 or not trial or stacks <= trial or not _a_trial(on_trial, others):
            kept += runs
            continue
        kept += others
        trials = {s.jobid or s.time for s in on_trial}
        left_out.append((test, len(trials), sorted(trial)[0]))
    order = {id(s): i for i, s in enumerate(before)}
    return sorted(kept, key=lambda s: order[id(s)]), left_out


def _a_trial(on_trial, others):
    """A trial is a minority of before's runs, and its latest: otherwise before's runs on after's
    stack are the baseline (an upgrade that changed what the stack does not record, firmware)."""
    runs = lambda samples: {s.jobid or s.time for s in samples}
    return len(runs(on_trial)) < len(runs(others)) and \
        min(s.time for s in on_trial) > max(s.time for s in others)


def left_out_lines(left_out):
    """One line per test whose trial runs were left out of before."""
    return [f'left out of before: {runs} run(s) of {name} [{settings or "no settings"}] on after\'s '
            f'stack ({_short(text)}), beside runs on another: a trial of the new stack, not the '
            f'baseline' for (_, name, settings), runs, text in left_out]


def _short(text):
    facts = stack.decode(text)
    return ', '.join(f'{stack.FACTS.get(n, n)} {v}' for n, v in facts.items() if n in ('torch', 'nccl', 'image')) \
        or text[:80]
