"""A check's knobs: settings a site gives per partition (extras.mlcheck.checks.<key>) and a user
overrides with -S, all checked when the test is set up, before any job is submitted.

ReFrame converts a -S value while it loads the checks, so `-S epochs=abc` on an `int` variable
ends the session with a traceback. A knob's variable therefore takes any text; the Knob parses it
at setup into the default's type and reports a bad value in one line, naming what it accepts.
A knob may also name another it must not be below (`at_least`): both are checked together, once
every knob has its value, so `-S min_bytes=4096 -S max_bytes=1024` fails at setup, not in the job.

A knob is written once: a program's flag in its program's table (src/pytorch/program_knobs.py,
which makes the program's argument too), a knob only judging reads in its check's `knobs`.
declare_knobs() makes its variables and knob_arguments() the program's flags from it;
`python -m mlcheck.harness.knob_table --write` puts the tables of docs/checks.md together from
the same dicts.
"""

import sys

import reframe as rfm
from reframe.core.builtins import run_before, variable

from mlcheck.contract import program_module
from mlcheck.errors import ConfigError
from mlcheck.harness.reframe_api import ShownInJSON, command_line_variables, stop_session, variable_names

# the programs' knob tables and the Knob itself, one copy with the programs (src/pytorch/program_knobs.py)
program_knobs = program_module('program_knobs')
Knob, TRUE = program_knobs.Knob, program_knobs.TRUE


class Unset(ShownInJSON):
    """The value of a knob's variable that -S did not set: its default, as ReFrame's --describe
    shows it, kept apart from any value -S gives."""

    def __init__(self, default):
        self.default = default

    def shown_in_json(self):
        return self.default

    def __repr__(self):
        return f'{self.default!r} (default)'


def knob_variable(knob=None):
    """The ReFrame variable of a knob: Unset (showing the knob's default; None for a knob whose
    default is the partition's) until -S sets it, to any text or value."""
    return variable(str, int, float, bool, type(None), Unset,
                    value=Unset(knob.default) if knob else None)


def declare_knobs(namespace, knobs, partition_wide=False):
    """Declare the variable of each knob in a class body: `declare_knobs(locals(), knobs)`
    (`partition_wide`: knobs whose default is the partition's, unknown until setup).

    ReFrame registers a variable when it is assigned in the class namespace (its metaclass's
    __setitem__), so the assignment happens here, item by item, and not after the class exists.
    """
    for name, knob in knobs.items():
        namespace[name] = knob_variable(None if partition_wide else knob)


def is_given(value):
    """Whether a knob's variable holds a value given with -S (not None, not Unset)."""
    return value is not None and not isinstance(value, Unset)


def knob_arguments(knobs, values):
    """The program's arguments of `knobs` (in their order) for their `values` (a check)."""
    return [word for name, knob in knobs.items() for word in knob.arguments(name, getattr(values, name))]


def flag_values(knobs, values):
    """{name: value} of the knobs passed to the program as flags, for their `values` (a check):
    what the program must state it ran (its `settings` fact)."""
    return {name: getattr(values, name) for name, knob in knobs.items() if knob.flags(name)}


def knob_values(knobs, given, configured, where_configured):
    """{name: value} of every knob: as given with -S (`given[name]` is_given), else as
    configured for the partition, else its default. Unknown configured names are an error."""
    unknown = sorted(set(configured) - set(knobs))
    if unknown:
        raise ConfigError(f'{where_configured}: unknown key(s) {", ".join(unknown)}; '
                          f'allowed: {", ".join(sorted(knobs))}')
    values, where = {}, {}
    for name, knob in knobs.items():
        try:
            if is_given(given.get(name)):
                where[name] = f'-S {name}'
                values[name] = knob.parse(given[name], where[name], from_text=True)
            elif name in configured:
                where[name] = f'{where_configured}.{name}'
                values[name] = knob.parse(configured[name], where[name])
            else:
                where[name] = f'{name} (default)'
                values[name] = knob.default
        except ValueError as err:       # the knob's own one line
            raise ConfigError(str(err)) from None
    for name, knob in knobs.items():
        low = knob.at_least
        if low is not None and low not in values:
            raise ValueError(f'knob {name}: at_least names no knob of the check, {low!r}')
        if low is not None and values[name] < values[low]:
            raise ConfigError(f'{where[name]}={values[name]!r} is below {where[low]}={values[low]!r}: '
                              f'expected {name} >= {low}')
    return values


def checks_of(base):
    """The check classes loaded so far that derive from `base` (those with a checks_key)."""
    found = [sub for direct in base.__subclasses__() for sub in (direct, *checks_of(direct))]
    return [cls for cls in dict.fromkeys(found) if getattr(cls, 'checks_key', '')]


def refuse_unknown_variables(assignments, base, variables_of):
    """A ConfigError for the first -S assignment ((test or None, name, text)) that no loaded check
    of `base` (each with its `variables_of(cls)` names) knows: ReFrame would only warn and run
    every test at its defaults (`-S epoch=2` ran all 18 cases at epochs=3)."""
    checks = checks_of(base)
    for test, name, text in assignments:
        aimed = [cls for cls in checks if test in (None, cls.__name__)]
        if not any(name in variables_of(cls) for cls in aimed):
            knobs = sorted({knob for cls in aimed
                            for knob in {**cls.common_knobs, **cls.partition_wide_knobs, **cls.knobs}})
            said = f'{test}.{name}' if test else name
            raise ConfigError(f'-S {said}={text}: no check of this run knows {name!r}; '
                              f'their knobs: {", ".join(knobs) or "none"}')


class KnownSettingsOnly(rfm.RegressionTestPlugin):
    """A check whose set-up ends the ReFrame session in one line at a -S name on its command line
    that no loaded check of this kind knows: a typo, which ReFrame alone only warns about, running
    every test at its defaults. The first test's set-up comes before any job."""

    @run_before('setup')
    def stop_at_an_unknown_S_name(self):
        try:
            refuse_unknown_variables(command_line_variables(sys.argv), KnownSettingsOnly, variable_names)
        except ConfigError as err:
            stop_session(f'mlcheck: config error: {err}')
