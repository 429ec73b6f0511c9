"""Slurm host lists, as `scontrol show hostnames` expands them: nid[001-003,007],gpu[1-2]x, and
as `scontrol show hostlist` compresses them; host names as the one shape a node may have."""

import re

from mlcheck.errors import InputError

_BRACKET = re.compile(r'\[([^\[\]]*)\]')
# A node's name: ASCII letters, digits, '.', '-' and '_', a letter or digit first. Names come from
# perf logs and databases that others write, and end up in printed scontrol lines: nothing a shell
# or Slurm reads as syntax gets through.
HOST_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,63}')
_NUMBERED = re.compile(r'(.*?)(\d+)(\D*)')
_DIGITS = re.compile(r'[0-9]{1,9}')      # ASCII digits: int() also reads '²' or '٣'
# the most hosts a list may name: the largest machines have about 10,000 nodes; a list from data
# naming nid[0-999999999] would take minutes and gigabytes to expand (issue 48)
MAX_HOSTS = 100_000
# every distinct node list of a selection together: past it the longest lists are left out (named).
# 300,000 (30 distinct full-machine lists of a 10,000-node system): at it mlcheck-report takes
# about 2 s of CPU and 90 MB (1,000,000 took 9.6 s and 250 MB: the third security pass)
TOTAL_HOSTS = 300_000


def checked(name, where):
    """`name` when it is a host name; else an InputError saying `where` it came from."""
    if not isinstance(name, str) or not HOST_NAME.fullmatch(name):
        raise InputError(f'{where}: {str(name)[:80]!r} is not a host name (letters, digits, ".", "-", "_")')
    return name


def compress(names):
    """A Slurm host list of `names` that expand() gives back: nid[001-003,007],login1 (sorted;
    the numbers of one prefix, suffix and digit count share brackets)."""
    groups, plain = {}, []
    for name in sorted(set(names)):
        match = _NUMBERED.fullmatch(name)
        if match:
            head, digits, tail = match.groups()
            groups.setdefault((head, tail, len(digits)), []).append(int(digits))
        else:
            plain.append(name)
    parts = []
    for (head, tail, width), numbers in sorted(groups.items()):
        spans = []
        for n in sorted(numbers):
            if spans and spans[-1][1] == n - 1:
                spans[-1][1] = n
            else:
                spans.append([n, n])
        inside = ','.join(f'{a:0{width}d}' + (f'-{b:0{width}d}' if b > a else '') for a, b in spans)
        parts.append(f'{head}{inside}{tail}' if len(numbers) == 1 else f'{head}[{inside}]{tail}')
    return ','.join(parts + plain)


def expand(text, limit=MAX_HOSTS, whose=''):
    """The host names of a Slurm host list, in its order, duplicates dropped; an InputError
    naming the bad part, or saying it names more than `limit` hosts (MAX_HOSTS, or a job's own
    node count, `whose`: a record's list is never longer than its job, and 270 records of
    100,000 names each took minutes and gigabytes: issue 48's security red-team, U2). Ranges
    keep their zero padding (nid[008-010]: nid008 nid009 nid010)."""
    names = {}
    limit = min(limit, MAX_HOSTS)
    for part in _split_top_level(text.strip()):
        if _count(part, text) + len(names) > limit:
            raise InputError(f'host list {text[:80]!r}: names more than {limit} hosts{whose}')
        names.update(dict.fromkeys(_expand_one(part, text)))
    if not names:
        raise InputError(f'host list {text[:80]!r} names no host')
    return list(names)


def past_budget(nodelists, known=frozenset()):
    """The distinct node lists of a selection's records to leave out so that those left name at
    most TOTAL_HOSTS hosts together, counted without expanding them (each list alone is bounded by
    MAX_HOSTS and its job's num_nodes; 20 records of a different 100,000 nodes each, num_nodes
    claiming so, ran mlcheck-report out of memory: issue 48's security re-check, R2). Leaving them
    out, not the selection, keeps every other record's verdict (11 such records in a shared perf
    log stopped every report and DRAIN line: the third security pass). Which go first is not the
    longest alone, which a planted list a little shorter than a real job's undercuts (the fourth
    pass, G1): the lists naming a host outside `known` (the partition's nodes, or those the other
    selection names) go first, then the longest, ties by text."""
    sizes = {}
    for text in set(nodelists):
        try:
            sizes[text] = sum(_count(part, text) for part in _split_top_level(_listed(text).strip()))
        except InputError:
            continue            # unreadable: named and left out where it is read
    total = sum(sizes.values())
    if total <= TOTAL_HOSTS:
        return {}
    inside = _within(sizes, known)
    past = set()
    for text in sorted(sizes, key=lambda t: (t in inside, -sizes[t], t)):
        if total <= TOTAL_HOSTS:
            break
        past.add(text)
        total -= sizes[text]
    return {text: sizes[text] for text in past}


def names_of(nodelists, most=None):
    """The host names of the distinct `nodelists`, the shortest lists first, at most `most` of
    them (bounded memory); unreadable lists skipped."""
    names, most = set(), most or TOTAL_HOSTS
    for text in sorted(set(nodelists), key=lambda t: (len(t), t)):
        try:
            found = expand(_listed(text), limit=most - len(names))
        except InputError:
            continue
        names.update(found)
        if len(names) >= most:
            break
    return names


def _listed(text):
    """A host list of `text`, which may be a list as Python prints it ('['a', 'b']', as the node
    reader takes it)."""
    if text[:2] in ("['", '["'):
        return ','.join(name.strip("'\" ") for name in text[1:-1].split(','))
    return text


def _within(sizes, known):
    """The lists of `sizes` whose every host is in `known`, checked the shortest first, each
    stopping at its first host outside; past `most` names read, the rest count as outside (time
    bounded: a list naming hosts outside costs a part, one inside its length; TOTAL_HOSTS read late)."""
    inside, read, most = set(), 0, 3 * TOTAL_HOSTS
    if not known:
        return inside
    for text in sorted(sizes, key=lambda t: (sizes[t], t)):
        if sizes[text] > len(known) or read + sizes[text] > most:
            continue            # more hosts than are known: one is outside
        listed = _listed(text)
        try:
            for part in _split_top_level(listed.strip()):
                names = _expand_one(part, listed)
                read += len(names)
                if not known.issuperset(names):
                    break
            else:
                inside.add(text)
        except InputError:
            continue
    return inside


def _count(part, whole):
    """How many names `part` expands to, counted without expanding it."""
    count = 1
    for ranges in _BRACKET.findall(part):
        count *= sum(high - low + 1 for low, high, _ in _ranges(ranges, whole))
    return count


def _split_top_level(text):
    """The comma-separated parts of a host list, commas inside brackets kept."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {'[': 1, ']': -1}.get(char, 0)
        if depth not in (0, 1):
            raise InputError(f'host list {text[:80]!r}: unbalanced brackets')
        if char == ',' and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise InputError(f'host list {text[:80]!r}: unbalanced brackets')
    return [p.strip() for p in parts + [text[start:]] if p.strip()]


def _expand_one(part, whole):
    """The names of one part, its brackets expanded left to right (in a loop: a part of 20,000
    brackets, `n[1][1]...`, exceeded Python's recursion limit, issue 48)."""
    names, rest = [''], part
    while (match := _BRACKET.search(rest)):
        numbers = _numbers(match.group(1), whole)
        names = [name + rest[:match.start()] + number for name in names for number in numbers]
        rest = rest[match.end():]
    names = [name + rest for name in names]
    for name in names:
        if '[' in name or ']' in name or not HOST_NAME.fullmatch(name):
            raise InputError(f'host list {whole[:80]!r}: bad host name {name[:80]!r}')
    return names


def _ranges(ranges, whole):
    """[(low, high, zero-padded width)] of a bracket's N and N-M items."""
    found = []
    for item in ranges.split(','):
        low, _, high = item.strip().partition('-')
        if not _DIGITS.fullmatch(low) or (high and not _DIGITS.fullmatch(high)):
            raise InputError(f'host list {whole[:80]!r}: bad range {item.strip()!r} (expected N or N-M)')
        high = high or low
        if int(high) < int(low):
            raise InputError(f'host list {whole[:80]!r}: range {item.strip()!r} runs backwards')
        found.append((int(low), int(high), len(low) if low.startswith('0') else 0))
    return found


def _numbers(ranges, whole):
    return [str(n).zfill(width) for low, high, width in _ranges(ranges, whole) for n in range(low, high + 1)]
