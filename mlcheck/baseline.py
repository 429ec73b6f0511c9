"""Record a good run as the performance references: the median of its repetitions, per partition,
image and node count, in ReFrame's external references (config/references/<system>.yaml).

    python -m mlcheck.baseline SELECTION [-C CONFIG] [--db FILE] [--references-dir DIR]

SELECTION is a session UUID, a period START:END, 'latest', or a perf log with an optional
@START:END (see --help). Entries of other tests, partitions, images and
node counts stay as they are, and so do the bounds of an entry already there; a new entry gets
--tolerance on its worse side. The file is replaced in one step (written beside it, then renamed).
"""

import argparse
import os
import statistics
import sys
from datetime import datetime

import yaml

from mlcheck.perf import history
from mlcheck.errors import InputError
from mlcheck.report import add_source_arguments, one_line_errors, open_database, text_table
from mlcheck.rfm_config import references_dir

INDEX = ['$partition', 'image', 'num_nodes']
PROVENANCE = '# baseline: '


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='python -m mlcheck.baseline',
                                     description=__doc__.split('\n\n')[0],
                                     epilog='selections:\n' + history.SELECTION_FORMS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('selection', help="the good run: session UUID, START:END, 'latest' or perf log")
    add_source_arguments(parser)
    parser.add_argument('--references-dir', default=None,
                        help='where <system>.yaml is written (default: $MLCHECK_REFERENCES_DIR, '
                             'else config/references)')
    parser.add_argument('--tolerance', default='10%',
                        help='bound of a new entry, relative to its value: 10%% or 0.1 '
                             '(default: %(default)s)')
    parser.add_argument('-n', '--name', default='', help='only tests whose name contains this text')
    parser.add_argument('--var', action='append', default=None,
                        help='performance variable to record (repeatable; default: every rate, '
                             'i.e. unit per second: a total time depends on the run length, '
                             'e.g. -S epochs, so it is recorded only when named)')
    parser.add_argument('--dry-run', action='store_true', help='print the file instead of writing it')
    return parser.parse_args(argv)


def medians(samples):
    """{(system, check, partition, image, num_nodes, var): (median, unit, values, settings)}.
    A reference holds one figure, so runs of one entry must share their settings."""
    found = {}
    for key, group in history.group(samples, lambda s: (s.system, s.check, s.partition, s.image,
                                                         s.num_nodes, s.var)).items():
        settings = sorted({s.settings for s in group})
        if len(settings) > 1:   # values without recorded settings may be of any of them
            raise InputError(f'{key[1]} {key[3]} {key[4]} node(s) on {key[2]} ran with '
                             f'{len(settings)} settings '
                             f'({" | ".join(s or history.NOT_RECORDED for s in settings)}): '
                             'select runs of one (a narrower period, -n, or one session)')
        values = [s.value for s in group]
        found[key] = (float(f'{statistics.median(values):.4g}'), group[0].unit, values, settings[0])
    return found


def read_references(path):
    """(leading comment lines, data) of a references file; nothing if there is none yet."""
    if not os.path.exists(path):
        return [], {}
    try:
        with open(path) as stream:
            text = stream.read()
        data = unshared(yaml.safe_load(text) or {})
    except (OSError, yaml.YAMLError) as err:
        raise InputError(f'references file {path} cannot be read: {str(err).splitlines()[0]}') from None
    if not isinstance(data, dict):
        raise InputError(f'references file {path}: expected a mapping of checks at the top')
    comments = []
    for line in text.splitlines():
        if not line.startswith('#'):
            break
        comments.append(line)
    return comments, data


def unshared(node):
    """A copy of loaded YAML in which no two places are one object: entries that share their
    values through an anchor (`torch-2.9.1: *mnist`) must change one at a time."""
    if isinstance(node, dict):
        return {key: unshared(value) for key, value in node.items()}
    if isinstance(node, list):
        return [unshared(value) for value in node]
    return node


def update(data, comments, found, selection, tolerance):
    """Put the medians into `data`; returns the table rows of what changed."""
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
        if isinstance(old, list) and len(old) >= 3:
            lower, upper = old[1], old[2]
        elif history.higher_is_better(unit):
            lower, upper = -tolerance, None
        else:
            lower, upper = None, tolerance
        per_var[var] = [value, lower, upper, unit]
        noise = (f'{100 * statistics.stdev(values) / statistics.median(values):.1f}%'
                 if len(values) > 1 else 'unknown')
        table.append((partition, f'{check} {image} {nodes}N', var, str(len(values)),
                      f'{old[0]:.4g}' if isinstance(old, list) and old else 'new',
                      f'{value:.4g} {unit}', noise))
        label = f'{PROVENANCE}{partition} {check} {image} {nodes} node(s):'
        comments[:] = [c for c in comments if not c.startswith(label)]
        comments.append(f'{label} median of {len(values)} run(s) of {selection} ({today})'
                        + (f' with {settings}' if settings else ''))
    return table


def write(path, comments, data):
    text = '\n'.join(comments) + '\n' if comments else ''
    text += yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    scratch = f'{path}.new'
    with open(scratch, 'w') as stream:
        stream.write(text)
    os.replace(scratch, path)
    return text


def main(argv=None):
    args = parse_args(argv)
    return one_line_errors('mlcheck.baseline', lambda: record(args))


def record(args):
    directory = args.references_dir or references_dir()
    tolerance = history.parse_fraction(args.tolerance, '--tolerance')
    selection = history.parse_selection(args.selection)
    samples = history.load(selection, open_database(args, [selection]))
    wanted = (lambda s: s.var in args.var) if args.var else (lambda s: s.unit.endswith('/s'))
    samples = [s for s in samples if args.name in s.name and wanted(s)]
    if not samples:
        raise InputError(f'selection {args.selection!r} holds no value of '
                         f'{", ".join(args.var) if args.var else "a rate (unit per second)"}'
                         + (f' for a test named like {args.name!r}' if args.name else ''))
    if selection.kind == 'latest':
        described = f'session {samples[0].source}'
    else:
        described = args.selection
    found = medians(samples)
    for system in sorted({key[0] for key in found}):
        path = os.path.join(directory, f'{system}.yaml')
        comments, data = read_references(path)
        mine = {k: v for k, v in found.items() if k[0] == system}
        table = update(data, comments, mine, described, tolerance)
        print(text_table(('partition', 'test', 'variable', 'runs', 'was', 'now', 'noise'), table))
        if args.dry_run:
            print(f'\n# {path} would be:')
            print('\n'.join(comments))
            print(yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100))
        else:
            write(path, comments, data)
            print(f'references written: {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
