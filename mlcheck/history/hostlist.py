"""Slurm host lists, as `scontrol show hostnames` expands them: nid[001-003,007],gpu[1-2]x."""

import re

from mlcheck.errors import InputError

_BRACKET = re.compile(r'\[([^\[\]]*)\]')


def expand(text):
    """The host names of a Slurm host list, in its order, duplicates dropped; an InputError
    naming the bad part. Ranges keep their zero padding (nid[008-010]: nid008 nid009 nid010)."""
    names = []
    for part in _split_top_level(text.strip()):
        for name in _expand_one(part, text):
            if name not in names:
                names.append(name)
    if not names:
        raise InputError(f'host list {text!r} names no host')
    return names


def _split_top_level(text):
    """The comma-separated parts of a host list, commas inside brackets kept."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {'[': 1, ']': -1}.get(char, 0)
        if depth not in (0, 1):
            raise InputError(f'host list {text!r}: unbalanced brackets')
        if char == ',' and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise InputError(f'host list {text!r}: unbalanced brackets')
    return [p.strip() for p in parts + [text[start:]] if p.strip()]


def _expand_one(part, whole):
    match = _BRACKET.search(part)
    if not match:
        if '[' in part or ']' in part or not re.fullmatch(r'[\w.-]+', part):
            raise InputError(f'host list {whole!r}: bad host name {part!r}')
        return [part]
    head, tail = part[:match.start()], part[match.end():]
    return [name for number in _numbers(match.group(1), whole)
            for name in _expand_one(head + number + tail, whole)]


def _numbers(ranges, whole):
    found = []
    for item in ranges.split(','):
        low, _, high = item.strip().partition('-')
        if not low.isdigit() or (high and not high.isdigit()):
            raise InputError(f'host list {whole!r}: bad range {item.strip()!r} (expected N or N-M)')
        high = high or low
        if int(high) < int(low):
            raise InputError(f'host list {whole!r}: range {item.strip()!r} runs backwards')
        width = len(low) if low.startswith('0') else 0
        found += [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
    return found
