"""Bad site configuration or input: errors whose message is one line naming what and where."""


class ConfigError(Exception):
    pass


class InputError(Exception):
    """A selection, perf log, results database or references file that cannot be used."""
