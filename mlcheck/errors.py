"""Bad site configuration or input: errors whose message is one line naming what and where."""


class ConfigError(Exception):
    pass


class InputError(Exception):
    """A selection, perf log, results database or references file that cannot be used."""


def expect_mapping(entry, where, required=(), optional=()):
    """`entry` as a dict with only known keys and all required ones, else a ConfigError."""
    if not isinstance(entry, dict):
        raise ConfigError(f'{where}: expected a mapping, got {type(entry).__name__}')
    allowed = set(required) | set(optional)
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(f'{where}: unknown key(s) {", ".join(unknown)}; '
                          f'allowed: {", ".join(sorted(allowed))}')
    missing = sorted(set(required) - set(entry))
    if missing:
        raise ConfigError(f'{where}: missing required key(s) {", ".join(missing)}')
    return entry


def expect_type(value, kind, where):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        expected = ' or '.join(k.__name__ for k in kinds)
        raise ConfigError(f'{where}: expected {expected}, got {type(value).__name__} {value!r}')
    return value


def expect_int_list(value, where, minimum=None):
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(v, int) and not isinstance(v, bool) and (minimum is None or v >= minimum)
        for v in value)
    if not ok:
        bound = f' >= {minimum}' if minimum is not None else ''
        raise ConfigError(f'{where}: expected a list of integers{bound}, got {value!r}')
    return tuple(value)
