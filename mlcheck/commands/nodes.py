"""Vet every node of a partition: each figure of each one-node check against its partition's
peers, the failed runs and the nodes that never ran, as one verdict per node.

    mlcheck-nodes SELECTION [--expect HOSTLIST] [--max-age AGE] [-C CONFIG] [--db FILE] [-o DIR]

SELECTION is a session UUID, a period START:END, 'latest', or a perf log file or directory with
an optional @START:END (as for mlcheck-report), of one-node runs such as
`reframe -c checks/ -r -P num_nodes=1 --distribute=all`, and of the node-pair sweep (the
interconnect check over the nodes). A node is drained when a figure is worse than its peers'
better quartile (upper for a rate, lower for a time) by more than --threshold and --spread-factor
times their spread, when its latest run of a check failed, or when its every node pair was slow;
not judged when the evidence cannot say (too few peers, a figure too noisy to tell nodes apart,
past the threshold but within the peers' noise, only some of its partition's tests, a failed
multi-node run over it); healthy otherwise. The verdict comes first, with the scontrol lines to
drain and to resume, printed (shell-quoted), never run; a pair slow only together is listed as a
slow link.

Exit status: 0 every expected node judged healthy; 1 a node drained, not judged or not vetted,
a link named or a multi-node run failed; 2 bad input (one line); 3 internal error.
"""

import os
import re
import shlex
import sys
import time
from datetime import datetime

from mlcheck.commands.common import (EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_REGRESSION,  # noqa: F401
                                     add_source_arguments, argument_parser, one_line_errors,
                                     open_database, parse_fraction, text_table)
from mlcheck.errors import InputError
from mlcheck.visible import write_escaped
from mlcheck.history import hostlist, node_records, nodes
from mlcheck.history.selection import load, parse_selection
from mlcheck.judging.peers import MIN_FOR_SPREAD

REASON_LENGTH = 200   # keep a Slurm Reason readable in sinfo -R
AGE = re.compile(r'(\d+(?:\.\d+)?)([smhd])')
SECONDS = {'s': 1, 'm': 60, 'h': 3600, 'd': 86400}


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
    parser.add_argument('--max-age', metavar='AGE',
                        help='leave out runs that ended more than AGE ago (30m, 12h, 7d), '
                             'saying how many')
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
    max_age = parse_age(args.max_age) if args.max_age else None
    selection = parse_selection(args.selection)
    found = load(selection, open_database(args, [selection]), with_failed=True)
    notes = []
    if max_age is not None:
        since = time.time() - max_age
        old = sum(s.time < since for s in found)
        found = [s for s in found if s.time >= since]
        notes.append(f'--max-age {args.max_age}: {old} record(s) of runs that ended before '
                     f'{node_records.stamp(since)} left out')
        if not found:
            raise InputError(f'no record of {args.selection} is newer than {args.max_age}')
    if args.name:
        found = [s for s in found if args.name in s.name]
        if not found:
            raise InputError(f'no test named like {args.name!r} in {args.selection}')
    if args.var:
        # multi-node records stay: no figure of theirs is judged, only their node-pair verdicts
        found = [s for s in found if s.var in args.var or node_records.node_of(s) is None]
        if not any(s.var in args.var for s in found):
            raise InputError(f'no variable {", ".join(args.var)} in {args.selection}')
    sweep = nodes.judge(found, rule, expected)
    print('\n'.join(report_lines(sweep, rule, notes)))
    if args.output:
        print(f'summary: {write_summary(args.output, args, sweep, rule, notes)}')
    return EXIT_REGRESSION if not all_healthy(sweep) else 0


def all_healthy(sweep):
    """Every expected node judged healthy, and nothing else named."""
    return not (sweep.drain or sweep.not_judged or sweep.not_vetted or sweep.slow_links
                or sweep.multi_node_failed)


def parse_age(text):
    match = AGE.fullmatch(text.strip())
    if not match:
        raise InputError(f'--max-age {text!r}: expected a number and s, m, h or d (12h, 7d)')
    return float(match.group(1)) * SECONDS[match.group(2)]


def scontrol(nodelist, state, reason=None):
    """A paste-ready scontrol command, every word shell-quoted: names and reasons come from data
    others wrote (the names are host names already, hostlist.checked)."""
    words = ['scontrol', 'update', f'NodeName={nodelist}', f'State={state}']
    return shlex.join(words + ([f'Reason={reason}'] if reason is not None else []))


def drain_lines(sweep):
    """One scontrol command per node to drain: its worst reason with where and when it was seen,
    and its stack where that differs from its peers' (printed, never run)."""
    lines = []
    for node, findings in sweep.drain.items():
        # the worst first: a failure, else the figure furthest below its peers
        worst = findings[0]
        more = f' (and {len(findings) - 1} more: nodes.md)' if len(findings) > 1 else ''
        unlike = f'; stack: {", ".join(sweep.stack[node])}' if node in sweep.stack else ''
        tail = f'{unlike}{more} [{worst.provenance}]'     # kept whole: the why and when
        said = 'mlcheck: ' + worst.said
        room = REASON_LENGTH - len(tail)
        if len(said) > room:
            said = said[:max(room, 40) - 3] + '...'
        lines.append(scontrol(node, 'DRAIN', said + tail))
    return lines


def resume_line(sweep):
    return scontrol(hostlist.compress(sweep.healthy), 'RESUME') if sweep.healthy else ''


def figure_rows(sweep):
    rows = []
    for v in sweep.figures:
        f = v.figure
        named = ', '.join(node for node, _, _ in v.named) or '-'
        rows.append((f.partition, f.test, f.var, str(len(v.values)), _value(v.reference, f.unit),
                     _value(v.limit, f.unit), 'higher' if v.higher_is_better else 'lower',
                     f'not judged: {v.not_judged}' if v.not_judged else named))
    return rows


FIGURE_COLUMNS = ('partition', 'test', 'variable', 'nodes', "peers' reference", 'named past',
                  'better', 'named')


def _value(x, unit):
    return '' if x is None else f'{x:.4g} {unit}'


def summary_line(sweep, rule):
    judged = len(sweep.healthy) + len(sweep.drain) + len(sweep.not_judged) + len(sweep.not_vetted)
    return (f'{judged} node(s): {len(sweep.healthy)} healthy, {len(sweep.drain)} drained, '
            f'{len(sweep.not_judged)} not judged, {len(sweep.not_vetted)} not vetted; '
            f'{len(sweep.slow_links)} slow link(s), {sweep.multi_node_failed} failed multi-node '
            f"run(s) (rule: worse than the partition's peers' better quartile by more than "
            f'{100 * rule.threshold:g}% and {rule.spread_factor:g} sd)')


def verdict_lines(sweep, rule):
    """The verdict, first: the summary, the healthy nodes and the lines to paste."""
    lines = [summary_line(sweep, rule)]
    if sweep.healthy:
        lines += ['', f'healthy ({len(sweep.healthy)}): {hostlist.compress(sweep.healthy)}',
                  '  to resume them (printed, never run):', resume_line(sweep)]
    if sweep.drain:
        lines += ['', f'drain ({len(sweep.drain)}):', *drain_lines(sweep)]
    if sweep.not_judged:
        lines += ['', f'not judged ({len(sweep.not_judged)}): the evidence cannot say, so '
                      'neither healthy nor drained:']
        lines += [f'  {node}: not judged: {"; ".join(why)}'
                  for node, why in sweep.not_judged.items()]
    if sweep.not_vetted:
        lines += ['', f'not vetted ({len(sweep.not_vetted)}): no record, so neither healthy '
                      'nor drained:']
        lines += [f'  {node}: {reason}' for node, reason in sweep.not_vetted.items()]
    if sweep.slow_links:
        lines += ['', f'slow links ({len(sweep.slow_links)}): slow only together, each node fine '
                      'with its other partners; for the fabric team, not a node to drain:']
        lines += [f'  link {a} <-> {b}: {reason}' for (a, b), reason in sweep.slow_links.items()]
    return lines


def detail_lines(sweep):
    """What else was read: multi-node runs, re-runs, stacks, figures left out."""
    lines = []
    if sweep.multi_node:
        lines += ['', 'multi-node runs:', *(f'  {said}' for said in sweep.multi_node)]
    if sweep.reruns:
        lines += ['', 'passed on re-run (the latest run of each test counts):']
        lines += [f'  {node}: {"; ".join(said)}' for node, said in sweep.reruns.items()]
    if sweep.stack:
        lines += ['', f'stack unlike the peers\' ({len(sweep.stack)}):']
        lines += [f'  {node}: {", ".join(said)}' for node, said in sweep.stack.items()]
    if sweep.left_out:
        lines += ['', 'left out, telling no node apart:', *(f'  {s}' for s in sweep.left_out)]
    return lines


def report_lines(sweep, rule, notes=()):
    lines = verdict_lines(sweep, rule) + detail_lines(sweep)
    lines += ['', text_table(FIGURE_COLUMNS, figure_rows(sweep)), '', *notes]
    alone = sum(v.spread is None and not v.not_judged for v in sweep.figures)
    if alone:
        lines.append(f'{alone} figure(s) on fewer than {MIN_FOR_SPREAD} nodes: judged by the '
                     'threshold alone, without the peers\' spread')
    if sweep.unplaced:
        lines.append(f'{sweep.unplaced} record(s) of multi-node jobs: no figure of one node')
    return lines


def write_summary(directory, args, sweep, rule, notes=()):
    """DIR/nodes.md with a plot per figure; returns its path."""
    from mlcheck.history import node_plots
    os.makedirs(directory, exist_ok=True)
    md = lambda row: '| ' + ' | '.join(c.replace('|', '\\|') for c in row) + ' |'
    text = [f'# Node sweep: {args.selection}', '',
            f'Written {datetime.now().astimezone():%Y-%m-%d %H:%M %Z} by `mlcheck-nodes`.', '',
            f'**{summary_line(sweep, rule)}**', '', *notes, '', '## Healthy', '']
    text += [f'healthy ({len(sweep.healthy)}): {hostlist.compress(sweep.healthy)}', '',
             '```sh', resume_line(sweep), '```'] if sweep.healthy else ['None.']
    text += ['', '## Drain', '']
    text += [f'- **{node}**: ' + '; '.join(map(str, reasons))
             for node, reasons in sweep.drain.items()] or ['None.']
    if sweep.drain:
        text += ['', '```sh', *drain_lines(sweep), '```']
    text += ['', '## Not judged', '']
    text += [f'- **{node}**: not judged: ' + '; '.join(why)
             for node, why in sweep.not_judged.items()] or ['None.']
    text += ['', '## Not vetted', '']
    text += [f'- **{node}**: {reason}' for node, reason in sweep.not_vetted.items()] or ['None.']
    text += ['', '## Slow links', '']
    text += [f'- **{a} <-> {b}**: {reason}'
             for (a, b), reason in sweep.slow_links.items()] or ['None.']
    text += ['', '## Also read', '', *detail_lines(sweep)]
    text += ['', '## Figures', '', md(FIGURE_COLUMNS), '|' + '---|' * len(FIGURE_COLUMNS),
             *map(md, figure_rows(sweep)), '']
    for verdict, name in node_plots.plot_all(directory, sweep.figures):
        text += [f'### {verdict.figure.label}', '', f'![{verdict.figure.label}]({name})', '']
    path = os.path.join(directory, 'nodes.md')
    write_escaped(path, '\n'.join(text))
    return path


if __name__ == '__main__':
    sys.exit(main())
