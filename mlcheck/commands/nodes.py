"""Vet every node of a partition: each figure of each one-node check against its peers, the
failed runs and the nodes that never ran, as a drain list.

    mlcheck-nodes SELECTION [--expect HOSTLIST] [-C CONFIG] [--db FILE] [-o DIR]

SELECTION is a session UUID, a period START:END, 'latest', or a perf log file or directory with
an optional @START:END (as for mlcheck-report), of one-node runs such as
`reframe -c checks/ -r -P num_nodes=1 --distribute=all`, and of the node-pair sweep (the
interconnect check over the nodes). A node is named when a figure is worse than its peers' better
quartile (upper for a rate, lower for a time) by more than --threshold and --spread-factor times
their spread, when a check failed on it, or when its every node pair was slow. The drain list is
printed as scontrol commands, never run; a pair slow only together is listed as a slow link.

Exit status: 0 every node healthy and vetted; 1 a node or link named, or an expected node not
vetted; 2 bad input (one line); 3 internal error.
"""

import os
import sys
from datetime import datetime

from mlcheck.commands.common import (EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_REGRESSION,  # noqa: F401
                                     add_source_arguments, argument_parser, one_line_errors,
                                     open_database, parse_fraction, text_table)
from mlcheck.errors import InputError
from mlcheck.history import hostlist, nodes
from mlcheck.history.selection import load, parse_selection
from mlcheck.judging.peers import MIN_FOR_SPREAD

REASON_LENGTH = 200   # keep a Slurm Reason readable in sinfo -R


def parse_args(argv):
    parser = argument_parser('mlcheck-nodes', __doc__.split('\n')[0])
    parser.add_argument('selection', help='the sweep: one-node runs of the checks on every node')
    add_source_arguments(parser)
    parser.add_argument('--expect', metavar='HOSTLIST', default='',
                        help='the nodes that must have been vetted, as a Slurm host list '
                             '(nid[001-064]); those without a record are listed as not vetted')
    parser.add_argument('--threshold', default=f'{100 * nodes.Rule.threshold:g}%',
                        help='how far below its peers a node must be: 10%% or 0.1 '
                             '(default: %(default)s)')
    parser.add_argument('--spread-factor', type=float, default=nodes.Rule.spread_factor,
                        help="and by more than this many of the peers' standard deviations "
                             '(default: %(default)s)')
    parser.add_argument('-n', '--name', default='', help='only tests whose name contains this text')
    parser.add_argument('--var', action='append', default=[], metavar='VARIABLE',
                        help='judge only this performance variable (repeatable; default: all)')
    parser.add_argument('-o', '--output', metavar='DIR',
                        help='write DIR/nodes.md and one PNG per figure')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    return one_line_errors('mlcheck-nodes', lambda: vet(args))


def vet(args):
    if args.spread_factor < 0:
        raise InputError(f'--spread-factor {args.spread_factor:g}: must be 0 or more')
    rule = nodes.Rule(parse_fraction(args.threshold, '--threshold'), args.spread_factor)
    expected = hostlist.expand(args.expect) if args.expect else []
    selection = parse_selection(args.selection)
    found = load(selection, open_database(args, [selection]), with_failed=True)
    if args.name:
        found = [s for s in found if args.name in s.name]
        if not found:
            raise InputError(f'no test named like {args.name!r} in {args.selection}')
    if args.var:
        # multi-node records stay: no figure of theirs is judged, only their node-pair verdicts
        found = [s for s in found if s.var in args.var or nodes.node_of(s) is None]
        if not any(s.var in args.var for s in found):
            raise InputError(f'no variable {", ".join(args.var)} in {args.selection}')
    sweep = nodes.judge(found, rule, expected)
    print('\n'.join(report_lines(sweep, rule)))
    if args.output:
        print(f'summary: {write_summary(args.output, args, sweep, rule)}')
    return EXIT_REGRESSION if sweep.drain or sweep.not_vetted or sweep.slow_links else 0


def drain_lines(sweep):
    """One scontrol command per node to drain, its reasons joined (printed, never run)."""
    lines = []
    for node, reasons in sweep.drain.items():
        # the worst first: a failure, else the figure furthest below its peers
        reason = 'mlcheck: ' + reasons[0] + (f' (and {len(reasons) - 1} more: nodes.md)'
                                             if len(reasons) > 1 else '')
        if len(reason) > REASON_LENGTH:
            reason = reason[:REASON_LENGTH - 3] + '...'
        reason = reason.replace('"', "'")
        lines.append(f'scontrol update NodeName={node} State=DRAIN Reason="{reason}"')
    return lines


def figure_rows(sweep):
    rows = []
    for v in sweep.figures:
        f = v.figure
        rows.append((f.test, f.var, str(len(v.values)), _value(v.reference, f.unit),
                     _value(v.limit, f.unit), 'higher' if v.higher_is_better else 'lower',
                     ', '.join(node for node, _, _ in v.named) or '-'))
    return rows


FIGURE_COLUMNS = ('test', 'variable', 'nodes', "peers' reference", 'named past',
                  'better', 'named')


def _value(x, unit):
    return '' if x is None else f'{x:.4g} {unit}'


def summary_line(sweep, rule):
    return (f'{len(sweep.nodes)} node(s) with records, {len(sweep.figures)} figure(s): '
            f'{len(sweep.drain)} to drain, {len(sweep.slow_links)} slow link(s), '
            f'{len(sweep.not_vetted)} not vetted '
            f'(rule: worse than the peers\' better quartile by more than '
            f'{100 * rule.threshold:g}% and {rule.spread_factor:g} sd)')


def report_lines(sweep, rule):
    lines = [text_table(FIGURE_COLUMNS, figure_rows(sweep)), '', summary_line(sweep, rule)]
    alone = sum(v.spread is None for v in sweep.figures)
    if alone:
        lines.append(f'{alone} figure(s) on fewer than {MIN_FOR_SPREAD} nodes: judged by the '
                     'threshold alone, without the peers\' spread')
    if sweep.unplaced:
        lines.append(f'{sweep.unplaced} record(s) of multi-node jobs: no figure of one node; '
                     'only their node-pair verdicts read')
    if sweep.drain:
        lines += ['', f'drain ({len(sweep.drain)}):', *drain_lines(sweep)]
    if sweep.slow_links:
        lines += ['', f'slow links ({len(sweep.slow_links)}): slow only together, each node fine '
                      'with its other partners; for the fabric team, not a node to drain:']
        lines += [f'  link {a} <-> {b}: {reason}' for (a, b), reason in sweep.slow_links.items()]
    if sweep.not_vetted:
        lines += ['', f'not vetted ({len(sweep.not_vetted)}): no record, so neither healthy '
                      'nor drained:']
        lines += [f'  {node}: {reason}' for node, reason in sweep.not_vetted.items()]
    return lines


def write_summary(directory, args, sweep, rule):
    """DIR/nodes.md with a plot per figure; returns its path."""
    from mlcheck.history import node_plots
    os.makedirs(directory, exist_ok=True)
    md = lambda row: '| ' + ' | '.join(c.replace('|', '\\|') for c in row) + ' |'
    text = [f'# Node sweep: {args.selection}', '',
            f'Written {datetime.now().astimezone():%Y-%m-%d %H:%M %Z} by `mlcheck-nodes`.', '',
            f'**{summary_line(sweep, rule)}**', '', '## Drain', '']
    text += [f'- **{node}**: ' + '; '.join(reasons) for node, reasons in sweep.drain.items()] or ['None.']
    text += ['', '## Slow links', '']
    text += [f'- **{a} <-> {b}**: {reason}' for (a, b), reason in sweep.slow_links.items()] or ['None.']
    text += ['', '## Not vetted', '']
    text += [f'- **{node}**: {reason}' for node, reason in sweep.not_vetted.items()] or ['None.']
    text += ['', '## Figures', '', md(FIGURE_COLUMNS), '|' + '---|' * len(FIGURE_COLUMNS),
             *map(md, figure_rows(sweep)), '']
    for verdict, name in node_plots.plot_all(directory, sweep.figures):
        text += [f'### {verdict.figure.label}', '', f'![{verdict.figure.label}]({name})', '']
    path = os.path.join(directory, 'nodes.md')
    with open(path, 'w') as stream:
        stream.write('\n'.join(text))
    return path


if __name__ == '__main__':
    sys.exit(main())
