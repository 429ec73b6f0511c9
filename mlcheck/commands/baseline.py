"""Record a good run as the performance references: the median of its repetitions, per partition,
image and node count, in ReFrame's external references (config/references/<system>.yaml).

    python -m mlcheck.commands.baseline SELECTION [-C CONFIG] [--db FILE] [--references-dir DIR]

SELECTION is a session UUID, a period START:END, 'latest', or a perf log with an optional
@START:END (see --help). Entries of other tests, partitions, images and
node counts stay as they are, and so do the bounds of an entry already there; a new entry gets
--tolerance on its worse side. The file is replaced in one step (a private file written beside
it, synced, given the old file's mode less set-id, execute and other-write bits, then renamed),
under a lock that a concurrent baseline of the same system waits for.
"""

import contextlib
import dataclasses
import os
import re
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import yaml

from mlcheck import locks
from mlcheck.ab import rounds
from mlcheck.commands.common import (add_source_arguments, argument_parser, config_file, one_line_errors,
                                    open_database, parse_fraction, text_table)
from mlcheck.errors import InputError
from mlcheck.figures.directions import HIGHER, LOWER, better
from mlcheck.history import hostlist
from mlcheck.history.database import system_names
from mlcheck.files import Directory
from mlcheck.history.recorded_defaults import RECORDED_DEFAULTS
from mlcheck.history.samples import NOT_RECORDED, group
from mlcheck.history.selection import load, parse_selection
from mlcheck.harness.config import references_dir
from mlcheck.judging.references import MACHINE_SPEED, at_recorded_speed, linked_file, read_file
from mlcheck.visible import visible

INDEX = ['$partition', 'image', 'num_nodes']
# Totals over the run, which grow with its length (-S epochs): recorded only when named. Every
# other variable (rates, per-call times such as the interconnect's latency, fractions and
# percentages) is a figure of the software and hardware alone, recorded by default.
RUN_LENGTH_TOTALS = frozenset({'train_time'})
PROVENANCE = '# baseline: '


def parse_args(argv):
    parser = argument_parser('python -m mlcheck.commands.baseline', __doc__.split('\n\n')[0])
    parser.add_argument('selection', help="the good run: session UUID, START:END, 'latest' or perf log")
    add_source_arguments(parser)
    parser.add_argument('--references-dir', default=None,
                        help='where <system>.yaml is written (default: $MLCHECK_REFERENCES_DIR, '
                             'else config/references)')
    parser.add_argument('--tolerance', default='10%',
                        help='bound of a new entry, relative to its value: 10%% or 0.1 '
                             '(default: %(default)s)')
    parser.add_argument('-n', '--name', default='', help='only tests whose name contains this text')
    parser.add_argument('--var', action='append', default=[],
                        help='performance variable to record besides the default ones '
                             '(repeatable; default: every variable but the run-length totals, '
                             f'{", ".join(sorted(RUN_LENGTH_TOTALS))}, which grow with -S epochs)')
    parser.add_argument('--dry-run', action='store_true', help='print the file instead of writing it')
    parser.add_argument('--allow-failed', action='store_true',
                        help='record the runs that passed of a selection where some failed (without '
                             'it such a selection is refused: a failure must not become the normal)')
    return parser.parse_args(argv)


def medians(samples):
    """{(system, check, partition, image, num_nodes, var): (median, unit, values, settings)}.
    A reference holds one figure, so runs of one entry must share their settings."""
    found = {}
    for key, runs in group(samples, lambda s: (s.system, s.check, s.partition, s.image,
                                               s.num_nodes, s.var)).items():
        settings = sorted({s.settings for s in runs})
        if len(settings) > 1:   # values without recorded settings may be of any of them
            raise InputError(f'{key[1]} {key[3]} {key[4]} node(s) on {key[2]} ran with '
                             f'{len(settings)} settings '
                             f'({" | ".join(s or NOT_RECORDED for s in settings)}): '
                             'select runs of one (a narrower period, -n, or one session)')
        values = [s.value for s in runs]
        found[key] = (float(f'{statistics.median(values):.4g}'), runs[0].unit, values, settings[0])
    return found


# a system's name as a file name: no path, nothing hidden (the data names it, so it is checked)
SYSTEM_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]*')


def references_path(directory, system):
    """<directory>/<system>.yaml; an InputError for a system that is no plain name
    (a perf log whose partition is '/some/path/x:cluster' must not write /some/path/x.yaml)."""
    if not SYSTEM_NAME.fullmatch(system):
        raise InputError(f'system {system!r} of the selection is not a plain name: '
                         'no references written')
    return os.path.join(directory, f'{system}.yaml')


# how long a baseline waits for a concurrent one of the same system (a baseline takes seconds)
LOCK_WAIT_S = 120


@contextlib.contextmanager
def locked(refs, name):
    """Hold the lock of the references file `name` of `refs` (.<name>.lock beside it, 0660: the
    group that writes the references, and no one else, can hold it): a second baseline of the
    same system reads the file only after the first one has replaced it, and says so after
    LOCK_WAIT_S; a lock file that is a link is refused in one line."""
    try:
        fd = locks.hold(f'.{name}.lock', LOCK_WAIT_S, 0o660, 'the references lock', dir_fd=refs.fd,
                        shown=refs.shown(f'.{name}.lock'))
    except locks.LockBusy as err:
        raise InputError(str(err)) from None
    try:
        yield
    finally:
        os.close(fd)


# a top-level key of a references file (a check's name) at the start of its line
TOP_KEY = re.compile(r"""^(?!#)([^\s'"][^:]*|'[^']*'|"[^"]*"):""")


@dataclass
class ReferencesFile:
    """A references file as text blocks, so that what is not rewritten keeps its text and every
    comment: `head`, the lines above the first check (the provenance lines among them), and each
    check's block, from its key to the next check's (comments below it included)."""
    head: list = field(default_factory=list)
    blocks: list = field(default_factory=list)     # [(check, lines)]
    original: dict = field(default_factory=dict)   # the data as read
    # {(check, partition): [(anchor, [entries])]}: the entries that shared their values through an
    # anchor (`host: &mnist`, `torch-2.9.1: *mnist`), written shared again while still equal
    anchors: dict = field(default_factory=dict)


def split_blocks(text):
    head, blocks = [], []
    for line in text.splitlines():
        match = TOP_KEY.match(line)
        if match:
            blocks.append((match.group(1).strip('\'"'), [line]))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            head.append(line)
    return head, blocks


def render(references, data):
    """The file's text for `data`: checks whose data did not change keep their text; a changed
    one is written again, its comments kept above it (inside it) or below it (after its data)."""
    out = list(references.head)
    for check, lines in references.blocks:
        if data.get(check) == references.original.get(check):
            out += lines
            continue
        last = max(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith('#'))
        out += [line.strip() for line in lines[1:last] if line.lstrip().startswith('#')]
        shared, names = shared_again(data[check], references.anchors, check)
        out += dump({check: shared}, names).splitlines() + lines[last + 1:]
    for check in (c for c in data if c not in dict(references.blocks)):
        out += ([''] if out and out[-1] else []) + dump({check: data[check]}).splitlines()
    return '\n'.join(out) + '\n'


def dump(data, names=()):
    """YAML text of `data`; entries that are one object are written once, with an anchor, named
    `names` in the order the writer numbers them (id001, id002, ...), as the file named them."""
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    for number, name in enumerate(names, 1):
        text = re.sub(rf'([&*])id{number:03d}\b', rf'\g<1>{name}', text)
    return text


def anchor_groups(raw, blocks):
    """{(check, partition): [(anchor, [entries])]} of a references file's loaded data `raw` (not
    unshared: an alias is the anchored object itself) and its check blocks (the anchors' names)."""
    found = {}
    for check, lines in blocks:
        partitions = raw.get(check)
        names = dict(re.findall(r'^\s*([^\s#:][^:]*):\s*&(\S+)\s*$', '\n'.join(lines), re.M))
        for partition, entries in (partitions.items() if isinstance(partitions, dict) else ()):
            if not isinstance(entries, dict):
                continue
            by_object = {}
            for entry, value in entries.items():
                if isinstance(value, dict):
                    by_object.setdefault(id(value), []).append(str(entry))
            groups = [(names.get(members[0].strip('\'"')), members)
                      for members in by_object.values() if len(members) > 1]
            found[(check, partition)] = [(a, m) for a, m in groups if a]
    return found


def shared_again(check_data, anchors, check):
    """(`check_data` with the entries of each anchor group that are still equal made one object
    again, the anchors' names in the order they will be written). A group whose entries now differ
    keeps an anchor for each set of equal ones (the file's name, then name_2, ...), so that a later
    hand edit of entries that are still the same is made once."""
    out, names = dict(check_data), []
    for partition, entries in check_data.items():
        groups = anchors.get((check, partition), [])
        if not isinstance(entries, dict) or not groups:
            continue
        entries, order, kept = dict(entries), [str(e) for e in entries], []
        for anchor, members in groups:
            equal = []            # [[members with one value]], in the file's order
            for m in (m for m in members if m in entries):
                same = next((s for s in equal if entries[s[0]] == entries[m]), None)
                same.append(m) if same else equal.append([m])
            for i, same in enumerate(s for s in equal if len(s) > 1):
                for m in same[1:]:
                    entries[m] = entries[same[0]]
                kept.append((order.index(same[0]), anchor if i == 0 else f'{anchor}_{i + 1}'))
        out[partition] = entries
        names += [name for _, name in sorted(kept)]
    return out, names


# a references file larger than this is not one (the simulated partition's is 10 kB)
def read_references(refs, name):
    """The ReferencesFile and the data of the references file `name` of `refs`, read as
    mlcheck.judging.references.read_file reads it; nothing if there is none yet."""
    found = read_file(refs, name)
    if found is None:
        return ReferencesFile(), {}
    text, raw = found
    data = unshared(raw)
    head, blocks = split_blocks(text)
    return ReferencesFile(head, blocks, unshared(data), anchor_groups(raw, blocks)), data


def unshared(node):
    """A copy of loaded YAML in which no two places are one object: entries that share their
    values through an anchor (`torch-2.9.1: *mnist`) must change one at a time."""
    if isinstance(node, dict):
        return {key: unshared(value) for key, value in node.items()}
    if isinstance(node, list):
        return [unshared(value) for value in node]
    return node


def at_the_files_speed(samples, data):
    """The samples as measured at the machine speed the references file records
    (`$machine_speed`, the simulated partition), from the speed each run recorded: a rate of a
    run on a machine twice as fast is written at half. A file without one takes them as measured.
    Also how many values of figures that follow the speed had no recorded speed (kept as measured)."""
    recorded = data.get(MACHINE_SPEED)
    if not isinstance(recorded, dict) or not recorded.get('steps_per_s'):
        return samples, 0
    brought, unknown = [], 0
    for s in samples:
        if s.machine_speed:
            s = dataclasses.replace(s, value=at_recorded_speed(s.value, s.var, s.unit, s.machine_speed, recorded))
        elif s.var in recorded.get('follow', []):
            unknown += 1
        brought.append(s)
    return brought, unknown


def refuse_failed(samples, args):
    """A selection with failed runs is refused (an InputError naming them) unless
    --allow-failed: its passing repetitions alone would make the failure the new normal."""
    failed = sorted({s.name for s in samples if s.value is None})
    if failed and not args.allow_failed:
        runs = len({(s.name, s.jobid, s.time) for s in samples if s.value is None})
        raise InputError(f'selection {args.selection!r} holds {runs} failed run(s) of {len(failed)} '
                         f'test(s) ({", ".join(failed[:3])}{" and more" if len(failed) > 3 else ""}): '
                         'rerun them, or pass --allow-failed to record the runs that passed')


def moved(old, value, values, tolerance):
    """A warning where a reference moves by more than its noise allows (twice the spread of
    the runs recorded, or the tolerance where one run gives no spread), else ''."""
    if not isinstance(old, list) or not old or not old[0]:
        return ''
    change = value / old[0] - 1
    spread = statistics.stdev(values) / abs(statistics.median(values)) if len(values) > 1 and \
        statistics.median(values) else None
    allowed = 2 * spread if spread is not None else tolerance
    if abs(change) <= allowed:
        return ''
    return (f'{old[0]:.4g} -> {value:.4g} ({100 * change:+.0f} %), more than '
            + (f'2 x its noise ({100 * spread:.1f} %)' if spread is not None else
               f'the tolerance ({100 * tolerance:g} %: one run has no spread)'))


def update(data, comments, found, selection, tolerance, warnings=None):
    """Put the medians into `data`; returns the table rows of what changed (and appends to
    `warnings` each reference that moved by more than its noise allows)."""
    table, today = [], datetime.now().astimezone().strftime('%Y-%m-%d')
    for key, (value, unit, values, settings) in sorted(found.items()):
        system, check, partition, image, nodes, var = key
        entry = data.setdefault(check, {'$index': list(INDEX)})
        if not isinstance(entry, dict) or entry.get('$index', INDEX) != INDEX:
            raise InputError(f'references of {check} are not indexed by {INDEX}; '
                             'this command writes only that layout')
        entry.setdefault('$index', list(INDEX))
        level = entry
        for key in (partition, image):
            level = level.setdefault(key, {})
        per_var = level.setdefault(nodes, {})
        old = per_var.get(var)
        warning = moved(old, value, values, tolerance)
        if warning and warnings is not None:
            warnings.append(f'warning: the reference of {check} {image} {nodes} node(s) {var} moves '
                            f'{warning}: check the runs before relying on it')
        if isinstance(old, list) and len(old) >= 3:
            lower, upper = old[1], old[2]
        else:   # worse beyond the tolerance fails; an informational figure has no bound
            lower = -tolerance if better(var, unit) == HIGHER else None
            upper = tolerance if better(var, unit) == LOWER else None
        per_var[var] = [value, lower, upper, unit]
        noise = (f'{100 * statistics.stdev(values) / statistics.median(values):.1f}%'
                 if len(values) > 1 and statistics.median(values) else 'unknown')
        table.append((partition, f'{check} {image} {nodes}N', var, str(len(values)),
                      f'{old[0]:.4g}' if isinstance(old, list) and old else 'new',
                      f'{value:.4g} {unit}', noise))
        label = f'{PROVENANCE}{partition} {check} {image} {nodes} node(s):'
        comments[:] = [c for c in comments if not c.startswith(label)]
        comments.append(f'{label} median of {len(values)} run(s) of {selection} ({today})'
                        + (f' with {settings}' if settings else ''))
    return table


def write(refs, name, references, data):
    text = render(references, data)
    try:
        same = yaml.safe_load(text) == data
    except yaml.YAMLError:     # a head the blocks cannot follow (a file of `{}` alone)
        same = False
    if not same:    # a layout the blocks do not follow: leave the file alone
        raise InputError(f'references file {refs.shown(name)}: cannot rewrite it keeping its text and '
                         'comments (an anchor shared between checks?); edit it by hand')
    replace_file(refs, name, text)
    return text


# of the old references file's mode, what a rewrite keeps: read and write for its owner and
# group, read for others; never a set-id, an execute or an other-write bit
REFERENCES_MODE_KEPT = 0o664


def replace_file(refs, name, text):
    """Replace the references file `name` of `refs` with `text` in one step (mlcheck.files: a
    private scratch file in its directory, synced, renamed over; never through a link), its mode
    that of the old file less any set-id, execute or other-write bit (a co-writer's 4777 is not
    kept; new files: as open() makes them). A link to a file
    inside the references directory keeps pointing at it, now new; any other link is refused
    (linked_file, checked again at the write: a co-writer may swap the link)."""
    place, name = linked_file(refs, name)
    try:
        mode = os.stat(name, dir_fd=place.fd, follow_symlinks=False).st_mode & REFERENCES_MODE_KEPT
    except FileNotFoundError:
        mode = None
    place.replace(name, text.encode(), mode)


def main(argv=None):
    args = parse_args(argv)
    return one_line_errors('mlcheck.commands.baseline', lambda: record(args))


def record(args):
    directory = args.references_dir or references_dir()
    tolerance = parse_fraction(args.tolerance, '--tolerance')
    selection = parse_selection(args.selection)
    samples = [s for s in load(selection, open_database(args, [selection]), with_failed=True, budget=None)
               if args.name in s.name]
    # a reference from the records the node-list budget kept is one that planted records chose
    # (the fifth security pass's H1: the real job's three runs at 80 left out, 60 written from
    # its other two): a test that lost any record writes none
    past = hostlist.past_budget((s.nodelist for s in samples if s.nodelist), frozenset())
    if past:
        tests = Counter(s.name for s in samples)     # the test of most records first: a flood's
        tests = sorted(tests, key=lambda name: -tests[name])
        raise InputError(f'selection {visible(args.selection)!r}: the node lists of its records name more '
                         f'than {hostlist.TOTAL_HOSTS:,} hosts together ({len(samples):,} records, the most '
                         f'of {visible(tests[0][:80])!r}), so the node-list budget would leave some out: '
                         'no references written; select only the runs to record: -n, a period '
                         'START:END or a stored session\'s id')
    refuse_failed(samples, args)
    samples = [s for s in samples if s.value is not None]
    unknown = sorted(set(args.var) - {s.var for s in samples})
    if unknown:
        raise InputError(f'selection {args.selection!r} holds no value of {", ".join(unknown)}'
                         + (f' for a test named like {args.name!r}' if args.name else ''))
    samples = [s for s in samples if s.var not in RUN_LENGTH_TOTALS or s.var in args.var]
    # a reference is keyed by the image alone; an A/B ratio belongs to its pair, and its own job
    # judges it (docs/ab-images.md): none is written, whatever the run's settings
    ab_runs = [s for s in samples if rounds.is_ab(s.settings)]
    samples = [s for s in samples if not rounds.is_ab(s.settings)]
    if ab_runs and not samples:
        raise InputError(f'selection {args.selection!r} holds only A/B runs (-S compare_with, '
                         'compare_layers), whose ratios their own jobs judge: no references written')
    if ab_runs:
        print(f'{len(ab_runs)} value(s) of A/B runs ({", ".join(sorted({s.var for s in ab_runs}))}) '
              'not written: a reference is keyed by the image alone, an A/B ratio by its pair')
    if not samples:
        raise InputError(f'selection {args.selection!r} holds no value but the run-length totals '
                         f'({", ".join(sorted(RUN_LENGTH_TOTALS))}: name them with --var)'
                         + (f' for a test named like {args.name!r}' if args.name else ''))
    if selection.kind == 'latest':
        described = f'session {samples[0].source}'
    else:
        described = args.selection
    medians(samples)         # runs of two settings are refused before any file is touched
    # a check's name becomes a top-level key of the file: only the checks of checks/ write one
    strangers = sorted({s.check for s in samples} - set(RECORDED_DEFAULTS))
    if strangers:
        raise InputError(f'test {visible(strangers[0])!r} of the selection is not one of the checks '
                         f'({", ".join(sorted(RECORDED_DEFAULTS))}): no references written (name the '
                         'tests to record with -n)')
    systems = sorted({s.system for s in samples})
    paths = {system: references_path(directory, system) for system in systems}
    # references are read by a config's system: one the config lacks is a record from elsewhere
    config = config_file(args)
    known = system_names(config)
    for system in systems:
        if system not in known:
            raise InputError(f'system {system!r} of the selection is not a system of config {config} '
                             f'({", ".join(known)}): no references written')
    for system in systems:
        path = paths[system]
        name = os.path.basename(path)
        if args.dry_run and not os.path.isdir(directory):
            refs = None
        else:
            refs = Directory(directory, make=not args.dry_run, what='references directory')
            linked_file(refs, name)      # a link refused before anything (its lock) is made
        with contextlib.nullcontext() if args.dry_run else locked(refs, name):
            references, data = read_references(refs, name) if refs else (ReferencesFile(), {})
            mine, unknown = at_the_files_speed([s for s in samples if s.system == system], data)
            warnings = []
            table = update(data, references.head, medians(mine), described, tolerance, warnings)
            print(text_table(('partition', 'test', 'variable', 'runs', 'was', 'now', 'noise'), table))
            for warning in warnings:
                print(warning)
            speed = data.get(MACHINE_SPEED) or {}
            if speed:
                print(f"figures that follow the machine's speed written at the file's "
                      f"{speed.get('steps_per_s')} steps/s ({MACHINE_SPEED})"
                      + (f'; {unknown} value(s) had no recorded speed (runs from before it was '
                         'recorded): written as measured' if unknown else ''))
            if args.dry_run:
                print(f'\n# {path} would be:')
                print(render(references, data), end='')
            else:
                write(refs, name, references, data)
                print(f'references written: {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
