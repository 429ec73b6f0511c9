"""A check's knobs: settings a site gives per partition (extras.mlcheck.checks.<key>) and a user
overrides with -S, all checked when the test is set up, before any job is submitted.

ReFrame converts a -S value while it loads the checks, so `-S epochs=abc` on an `int` variable
ends the session with a traceback. A knob's variable therefore takes any text; the Knob parses it
at setup into the default's type and reports a bad value in one line, naming what it accepts.
A knob may also name another it must not be below (`at_least`): both are checked together, once
every knob has its value, so `-S min_bytes=4096 -S max_bytes=1024` fails at setup, not in the job.

A knob is written once, in its check's `knobs` dict: declare_knobs() makes its variables and
knob_arguments() the program's flags from it; `python -m mlcheck.harness.knobs --write` puts the tables of
docs/checks.md (mlcheck.harness.knob_table) together from the same dicts.
"""

import math
from dataclasses import dataclass

from reframe.core.builtins import variable

from mlcheck.errors import ConfigError
from mlcheck.harness.reframe_api import ShownInJSON

TRUE, FALSE = ('true', 'yes', 'on', '1'), ('false', 'no', 'off', '0')


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


DERIVED = 'derived'     # Knob.flag: the program's flag is the knob's name, `--batch-size` for batch_size


@dataclass(frozen=True)
class Knob:
    default: object                 # its type is the knob's type: bool, int, float or str
    help: str = ''
    choices: tuple = ()
    minimum: float = None
    maximum: float = None
    below: float = None             # values must be smaller than this
    at_least: str = None            # the name of a knob of the same check this one is never below
    # the program's flag(s) in the check's script_arguments(): DERIVED, a flag, a tuple of flags
    # (each given the value) or None: not passed to the program (a limit used by judging, a
    # setting the base classes pass their own way). A bool knob is its flag alone when true.
    flag: object = DERIVED
    omit_default: bool = False      # the default is not passed (it is the program's own default too)
    # what a run ran before this knob existed, where that is not its default (a run recorded then
    # lacks the knob: mlcheck.history.settings compares it as this value); None: the default
    before_it_existed: object = None

    @property
    def kind(self):
        return type(self.default)

    def flags(self, name):
        """The program's flags of the knob called `name` (a tuple, empty when not passed)."""
        if self.flag == DERIVED:
            return ('--' + name.replace('_', '-'),)
        if self.flag is None:
            return ()
        return (self.flag,) if isinstance(self.flag, str) else tuple(self.flag)

    def arguments(self, name, value):
        """The program's arguments for `value` of the knob called `name`."""
        if self.kind is bool:
            return list(self.flags(name)) if value else []
        if self.omit_default and value == self.default:
            return []
        return [word for flag in self.flags(name) for word in (flag, str(value))]

    def accepts(self):
        """What the knob accepts, in words."""
        if self.choices:
            return 'one of ' + ', '.join(map(str, self.choices))
        words = {bool: 'true or false', int: 'an integer', float: 'a number', str: 'text'}[self.kind]
        bounds = ' and '.join(f'{sign} {bound}' for sign, bound in (
            ('>=', self.minimum), ('<=', self.maximum), ('<', self.below)) if bound is not None)
        return f'{words} {bounds}' if bounds else words

    def parse(self, value, where, from_text=False):
        """`value` as the knob's type, converted from text if `from_text` (-S), else as it is in
        config; a ConfigError naming `where` (e.g. '-S epochs') and what the knob accepts."""
        try:
            parsed = self._convert(value, from_text)
        except ValueError:
            parsed = None
        if parsed is None or (isinstance(parsed, float) and not math.isfinite(parsed)) or \
                (self.choices and parsed not in self.choices) or \
                (self.minimum is not None and parsed < self.minimum) or \
                (self.maximum is not None and parsed > self.maximum) or \
                (self.below is not None and parsed >= self.below):
            raise ConfigError(f'{where}={value!r}: expected {self.accepts()}')
        return parsed

    def _convert(self, value, from_text):
        kind = self.kind
        if from_text and isinstance(value, str) and kind is not str:
            if kind is bool:
                word = value.strip().lower()
                return True if word in TRUE else False if word in FALSE else None
            return kind(value)
        if isinstance(value, bool) != (kind is bool):
            return None
        if kind is float and isinstance(value, int):
            return float(value)
        return value if isinstance(value, kind) else None


def knob_arguments(knobs, values):
    """The program's arguments of `knobs` (in their order) for their `values` (a check)."""
    return [word for name, knob in knobs.items() for word in knob.arguments(name, getattr(values, name))]


def knob_values(knobs, given, configured, where_configured):
    """{name: value} of every knob: as given with -S (`given[name]` is_given), else as
    configured for the partition, else its default. Unknown configured names are an error."""
    unknown = sorted(set(configured) - set(knobs))
    if unknown:
        raise ConfigError(f'{where_configured}: unknown key(s) {", ".join(unknown)}; '
                          f'allowed: {", ".join(sorted(knobs))}')
    values, where = {}, {}
    for name, knob in knobs.items():
        if is_given(given.get(name)):
            where[name] = f'-S {name}'
            values[name] = knob.parse(given[name], where[name], from_text=True)
        elif name in configured:
            where[name] = f'{where_configured}.{name}'
            values[name] = knob.parse(configured[name], where[name])
        else:
            where[name] = f'{name} (default)'
            values[name] = knob.default
    for name, knob in knobs.items():
        low = knob.at_least
        if low is not None and low not in values:
            raise ValueError(f'knob {name}: at_least names no knob of the check, {low!r}')
        if low is not None and values[name] < values[low]:
            raise ConfigError(f'{where[name]}={values[name]!r} is below {where[low]}={values[low]!r}: '
                              f'expected {name} >= {low}')
    return values
