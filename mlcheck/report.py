"""Compare the performance of two selections, tell regressions from noise, and report.

    python -m mlcheck.report BEFORE AFTER [-C CONFIG] [--db FILE] [-o DIR]

BEFORE and AFTER are each a session UUID, a period START:END (ReFrame's syntax, e.g.
now-1d:now), 'latest', or a perf log file or directory with an optional @START:END. Every test
and performance variable is compared by the mean of its repetitions (reframe --repeat N). A
change is a regression only when it is worse than both --threshold and --noise-factor times the
noise: the standard deviation of the repetitions, pooled over both sides. With -o DIR it writes
DIR/report.md and PNG plots.

Exit status: 0 no regression, 1 regression found (or a test with no result after), 2 bad
input, 3 internal error (one line on stderr for either).
"""

import argparse
import os
import sys
from datetime import datetime

from mlcheck.perf import history
from mlcheck.errors import InputError
from mlcheck.perf.history import Rule

DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              'config', 'simulated.py')
COLUMNS = ('partition', 'test', 'variable', 'n before', 'n after', 'mean before', 'mean after',
           'change', 'noise', 'verdict')


def add_source_arguments(parser):
    parser.add_argument('-C', '--config', default=None,
                        help='ReFrame config of the site, whose results database is read '
                             '(default: $RFM_CONFIG_FILES, else config/simulated.py)')
    parser.add_argument('--db', default=None,
                        help='results database file (default: $RFM_SQLITE_DB_FILE, else the '
                             "config's storage)")


def open_database(args, selections):
    """The results database, if any selection needs it."""
    if not any(s.stored for s in selections):
        return None
    config = args.config or (os.environ.get('RFM_CONFIG_FILES', '').split(':')[0]) or DEFAULT_CONFIG
    if not os.path.isfile(config):
        raise InputError(f'config file not found: {config}')
    return history.ResultsDatabase(args.db or database_of(config), config)


def database_of(config):
    """The results database a site config names (RFM_SQLITE_DB_FILE first, as in ReFrame)."""
    if os.environ.get('RFM_SQLITE_DB_FILE'):
        return os.path.expandvars(os.environ['RFM_SQLITE_DB_FILE'])
    import runpy
    try:
        site = runpy.run_path(config)['site_configuration']
        return os.path.expandvars(site['storage'][0]['sqlite_db_file'])
    except (KeyError, IndexError, TypeError):
        raise InputError(f'config {config} enables no results database (storage)') from None
    except Exception as err:
        raise InputError(f'config {config} does not load: {err}') from None


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='python -m mlcheck.report', description=__doc__.split('\n')[0],
                                     epilog='selections:\n' + history.SELECTION_FORMS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('before', help='the selection to compare against (e.g. the baseline)')
    parser.add_argument('after', help='the selection under test (e.g. after the upgrade)')
    add_source_arguments(parser)
    parser.add_argument('--threshold', default=f'{100 * Rule.threshold:g}%',
                        help='relative change that matters: 5%% or 0.05 (default: %(default)s)')
    parser.add_argument('--noise-factor', type=float, default=Rule.noise_factor,
                        help='a change must also exceed this many times the noise (default: %(default)s)')
    parser.add_argument('--min-repeats', type=int, default=Rule.min_repeats,
                        help='repetitions each side needs to estimate noise (default: %(default)s)')
    parser.add_argument('-n', '--name', default='',
                        help='only tests whose name contains this text')
    parser.add_argument('-o', '--output', metavar='DIR',
                        help='write DIR/report.md and PNG plots')
    parser.add_argument('--plot-var', default=None,
                        help="performance variable to plot (default: each check's first rate, "
                             'by name: a unit per second, e.g. samples_per_s)')
    return parser.parse_args(argv)


def percent(value):
    return '' if value is None else f'{100 * value:+.1f}%'


def rows(comparisons):
    out = []
    for c in comparisons:
        partition, name, var = c.key
        noise = '' if c.noise is None else f'{100 * c.noise:.1f}%'
        out.append((partition, name, var, str(len(c.before)), str(len(c.after)),
                    _figure(c.mean_before, c.unit), _figure(c.mean_after, c.unit),
                    percent(c.change), noise, c.verdict))
    return out


def _figure(value, unit):
    return '' if value is None else f'{value:.4g} {unit}'


def text_table(header, body):
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    line = lambda r: '  '.join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
    return '\n'.join([line(header), line(['-' * w for w in widths]), *map(line, body)])


def markdown_table(header, body):
    escape = lambda cell: cell.replace('|', '\\|')
    return '\n'.join(['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header),
                      *('| ' + ' | '.join(map(escape, r)) + ' |' for r in body)])


def summary(comparisons, rule):
    count = lambda verdict: sum(c.verdict == verdict for c in comparisons)
    lines = [f'{count(history.REGRESSION)} regression(s), {count(history.IMPROVED)} improved, '
             f'{count(history.WITHIN_NOISE)} within noise, {count(history.UNCHANGED)} unchanged '
             f'of {len(comparisons)} compared '
             f'(rule: worse by more than {100 * rule.threshold:g}% and {rule.noise_factor:g} x noise)']
    few = count(history.TOO_FEW)
    if few:
        lines.append(f'{few} with too few repetitions to estimate noise (fewer than '
                     f'{rule.min_repeats} on a side): not judged; run them with --repeat '
                     f'{max(rule.min_repeats, 3)} or more')
    if count(history.NO_RESULT):
        lines.append(f'{count(history.NO_RESULT)} {history.NO_RESULT}: values before and none '
                     'after (failed or not run): fails like a regression')
    for verdict in (history.ONLY_BEFORE, history.ONLY_AFTER):
        if count(verdict):
            lines.append(f'{count(verdict)} {verdict} (no value on the other side: failed, '
                         'not run, or new)')
    return lines


def write_report(directory, args, before, after, comparisons, rule):
    """DIR/report.md and its plots; returns the report's path."""
    from mlcheck.perf import plots
    os.makedirs(directory, exist_ok=True)
    pictures = []
    plotted = {check: args.plot_var or min((s.var for s in ss if s.unit.endswith('/s')), default='')
               for check, ss in history.group(before + after, lambda s: s.check).items()}
    selected = lambda samples: [s for s in samples if s.var == plotted[s.check]]
    sides = {'before': selected(before), 'after': selected(after)}
    by_check = lambda s: (s.partition, s.check)
    for key in sorted(set(history.group(sides['before'] + sides['after'], by_check))):
        partition, check = key
        name = f'scaling-{history.slug(partition)}-{history.slug(check)}.png'
        plots.scaling({side: [s for s in ss if by_check(s) == key] for side, ss in sides.items()},
                      f'{check} on {partition}\n{plotted[check]} against node count',
                      os.path.join(directory, name))
        pictures.append((f'{check} on {partition}, against node count', name))
    for key in sorted(set(history.group(sides['before'] + sides['after'], lambda s: s.key))):
        partition, test, var = key
        name = f'time-{history.slug(partition)}-{history.slug(test)}.png'
        plots.over_time({side: [s for s in ss if s.key == key] for side, ss in sides.items()},
                        f'{test}\n{partition}: {var}', os.path.join(directory, name))
        pictures.append((f'{test} on {partition}, over time', name))

    text = [f'# Performance: {args.after} against {args.before}', '',
            f'Written {datetime.now().astimezone():%Y-%m-%d %H:%M %Z} by `python -m mlcheck.report`.',
            '', f'- before: `{args.before}` ({len(before)} values)',
            f'- after: `{args.after}` ({len(after)} values)', '',
            *(f'**{line}**' if i == 0 else line for i, line in enumerate(summary(comparisons, rule))),
            '', 'Change: of the mean of the repetitions. Noise: standard deviation of the '
            'repetitions about their mean, both sides pooled, relative to the before mean.', '',
            markdown_table(COLUMNS, rows(comparisons)), '']
    for title, name in pictures:
        text += [f'## {title}', '', f'![{title}]({name})', '']
    path = os.path.join(directory, 'report.md')
    with open(path, 'w') as stream:
        stream.write('\n'.join(text))
    return path


EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_INTERNAL = 1, 2, 3


def one_line_errors(command, run):
    """run() with its errors as one line on stderr and an exit code that is never the
    regression code: a crash must not read as a verdict."""
    try:
        return run()
    except InputError as err:
        print(f'{command}: error: {err}', file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:   # noqa: BLE001 - anything else is a bug, said in one line
        where = err.__traceback__
        while where.tb_next:
            where = where.tb_next
        print(f'{command}: internal error: {type(err).__name__}: {err} '
              f'({os.path.basename(where.tb_frame.f_code.co_filename)}:{where.tb_lineno})',
              file=sys.stderr)
        return EXIT_INTERNAL


def main(argv=None):
    args = parse_args(argv)
    return one_line_errors('mlcheck.report', lambda: compare_and_report(args))


def compare_and_report(args):
    rule = Rule(history.parse_fraction(args.threshold, '--threshold'), args.noise_factor,
                args.min_repeats)
    selections = [history.parse_selection(args.before), history.parse_selection(args.after)]
    database = open_database(args, selections)
    before, after = (history.load(s, database) for s in selections)
    if args.name:
        before, after = ([s for s in ss if args.name in s.name] for ss in (before, after))
        if not before or not after:
            raise InputError(f'no test named like {args.name!r} in '
                             f'{"before" if not before else "after"}')
    comparisons = history.compare(before, after, rule)
    print(text_table(COLUMNS, rows(comparisons)))
    print()
    print('\n'.join(summary(comparisons, rule)))
    if args.output:
        print(f'report: {write_report(args.output, args, before, after, comparisons, rule)}')
    return EXIT_REGRESSION if any(c.verdict in history.FAILING for c in comparisons) else 0


if __name__ == '__main__':
    sys.exit(main())
