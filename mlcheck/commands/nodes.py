"""Vet every node of a partition: each figure of each one-node check against its partition's
peers, the failed runs and the nodes that never ran, as one verdict per node.

    mlcheck-nodes SELECTION [--expect HOSTLIST] [--resume-reason PATTERN] [--slurm-states FILE]
                  [--slurm-tz ZONE] [--sweep-gap AGE] [-C CONFIG] [--db FILE] [-o DIR]

SELECTION is a session UUID, a period START:END, 'latest', or a perf log file or directory with
an optional @START:END (as for mlcheck-report), of one-node runs such as
`reframe -c checks/ -r -P num_nodes=1 --distribute=all`, and of the node-pair sweep (the
interconnect check over the nodes). Only the latest sweep of each test (a check, image and
settings on a partition: runs whose ends leave no gap longer than --sweep-gap) is judged;
earlier ones are history. Where Slurm can be read, a node is vetted only by runs that ended
after Slurm drained it; where neither Slurm nor --expect gives the nodes, no scontrol line is
printed. A node is drained
when a figure is worse than its peers' better quartile (upper for a rate, lower for a time) by
more than --threshold and --spread-factor times their spread (or one repetition by far), when
any repetition of a check failed, or when its every node pair was slow;
not judged when the evidence cannot say (too few peers, a figure too noisy to tell nodes apart,
past the threshold but within the peers' noise, only some of its partition's tests, a failed
multi-node run over it, a failure shared by most nodes); healthy otherwise; not vetted when
not in the latest sweep. The verdict comes first, with the scontrol lines to drain and then to
resume, printed (shell-quoted), never run: the RESUME line names only healthy nodes that Slurm
shows drained or down for mlcheck's reason or --resume-reason (the whole reason), responding,
and not set aside; a pair slow only together is listed as a slow link.

Exit status: 0 every expected node judged healthy; 1 a node drained, not judged, not vetted or
left alone, a record left out, a link named, a multi-node run or a test on most nodes failed;
2 bad input (one line: a node named ALL or like a partition too); 3 internal error.
"""

import contextlib
import dataclasses
import io
import math
import re
import shlex
import sys
import time
from datetime import datetime

from mlcheck.commands.common import (EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_REGRESSION,  # noqa: F401
                                     add_source_arguments, argument_parser,
                                     one_line_errors, open_database, parse_fraction, slurm_partitions,
                                     text_table)
from mlcheck.errors import InputError
from mlcheck.files import Directory
from mlcheck.visible import write_escaped
from mlcheck.history import hostlist, node_records, nodes, slurm_states
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
    parser.add_argument('-n', '--name', default='',
                        help="judge only the figures of tests whose name contains this text "
                             "(another test's failure still counts)")
    parser.add_argument('--var', action='append', default=[], metavar='VARIABLE',
                        help='judge only this performance variable (repeatable; default: all; '
                             'a failed run still counts)')
    parser.add_argument('--max-age', metavar='AGE',
                        help='leave out runs that ended more than AGE ago (30m, 12h, 7d), '
                             'saying how many')
    parser.add_argument('--sweep-gap', metavar='AGE', default=f'{nodes.SWEEP_GAP // 3600}h',
                        help='a gap this long between two runs\' ends starts a new sweep of a '
                             'test; only the latest sweep of each test is judged (default: '
                             '%(default)s: maintenances are days apart, and a scheduler\'s '
                             'pause of hours is within one sweep)')
    parser.add_argument('--resume-reason', metavar='PATTERN',
                        help="resume also nodes drained with a reason this regular expression "
                             "matches whole (the maintenance's: 'upgrade 2026-11', or "
                             "'upgrade 2026-11.*' for any text after it); default: only "
                             "mlcheck's own reasons")
    parser.add_argument('--slurm-states', metavar='FILE',
                        help='saved output of `scontrol show node --oneliner` to check the '
                             'RESUME line against (default: run scontrol here, if there is one)')
    parser.add_argument('--slurm-tz', metavar='ZONE',
                        help="the time zone of Slurm's drain times, which it writes without one "
                             '(UTC, Europe/Helsinki; default: the local one when Slurm is read '
                             'here; with --slurm-states and no zone, a drain time within 14 h of '
                             'a run proves no order)')
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
    gap = parse_age(args.sweep_gap, '--sweep-gap')
    resume_reason = compiled(args.resume_reason)
    tz = slurm_states.zone(args.slurm_tz) if args.slurm_tz else None
    states, why_unread = slurm_states.read(args.slurm_states, tz)
    known = set(states) if states is not None else set(expected) if expected else None
    members = {}     # {Slurm partition: its nodes}
    for node, state in (states or {}).items():
        for partition in state.partitions:
            members.setdefault(partition, set()).add(node)
    partitions = set(members)
    selection = parse_selection(args.selection)
    unreadable = []     # perf log lines that cannot be read: their nodes are judged not
    # the node-list budget keeps the partition's nodes' records before any other's (the fourth
    # security pass, G1: 300,001 planted one-name records made every real node's the ones to go)
    partition_nodes = frozenset(expected) or frozenset(known or ())
    found, unlisted = node_records.readable(load(selection, open_database(args, [selection]), with_failed=True,
                                                 left_out=unreadable, budget=partition_nodes))
    if selection.kind == 'perflog' and selection.period:
        # the runs before @START, read again (quietly: their unreadable lines were not selected),
        # may be of the sweep it cuts (split_sweep)
        with contextlib.redirect_stderr(io.StringIO()):
            whole = node_records.readable(load(dataclasses.replace(selection, period=None), with_failed=True,
                                               budget=partition_nodes))[0]
        split_sweep(whole, *selection.period, gap, f"{args.selection}'s @START:END")
    notes = [f'{unlisted} record(s) left out: their node lists cannot be read (named on stderr); '
             'their nodes are unknown, so no node is resumed and the exit status is not 0'] if unlisted else []
    if max_age is not None:
        since = time.time() - max_age
        old = sum(s.time < since for s in found)
        split_sweep(found, since, math.inf, gap, f'--max-age {args.max_age}')
        found = [s for s in found if s.time >= since]
        notes.append(f'--max-age {args.max_age}: {old} record(s) of runs that ended before '
                     f'{node_records.stamp(since)} left out')
        if not found:
            raise InputError(f'no record of {args.selection} is newer than {args.max_age}')
    if args.name and not any(args.name in s.name for s in found):
        raise InputError(f'no test named like {args.name!r} in {args.selection}')
    if args.var and not any(s.var in args.var for s in found):
        raise InputError(f'no variable {", ".join(args.var)} in {args.selection}')
    notes += figures_left_out(found, args.var, args.name)
    # the nodes a RESUME line could name: their evidence must be newer than their drain (the
    # others are left alone by resume_plan, each with why)
    drained_since = {node: (state.since, state.reason) for node, state in (states or {}).items()
                     if state.since is not None and slurm_states.resumable(state, resume_reason)}
    margin = 0.0
    if states is not None:
        local = time.strftime('%Z')
        if args.slurm_tz:
            notes.append(f"Slurm's drain times read in {args.slurm_tz} (--slurm-tz)")
        elif args.slurm_states:
            margin = slurm_states.ZONE_UNCERTAINTY
            notes.append(f"Slurm's drain times of {args.slurm_states} are in no known time zone "
                         f'(read in {local} here): one within 14 h of a run proves no order; give '
                         '--slurm-tz ZONE, the cluster\'s')
        else:
            notes.append(f"Slurm's drain times read in the local time zone ({local})")
    unmapped = False
    if not expected and members:
        expected, said, unmapped = listed_in_slurm(found, members, slurm_partitions(args),
                                                   {node: state.features for node, state in states.items()})
        notes += said
    sweep = nodes.judge(found, rule, expected, args.var, gap, known, partitions, args.name,
                        drained_since, unreadable, members, margin)
    # a node an admin drained for another reason (a ticket) gets no DRAIN line over its reason
    sweep.already_drained = {node: why for node in sweep.drain if states and node in states
                             for why in [slurm_states.drained_by_another(states[node],
                                                                         resume_reason)] if why}
    if sweep.unknown_nodes:
        notes.append(f'{sweep.unknown_nodes} record(s) left out: they name no node of the partition '
                     '(ALL, a partition\'s or NodeSet\'s name, or one outside it; named below): their '
                     'nodes are unknown, so no node is resumed and the exit status is not 0')
    # an unreadable record whose node is unknown (a garbled line, a failed pair run) may be any
    # node's failure: no node is resumed (issue 48's security re-check, N2: its nodes were)
    unknown = unlisted or sweep.unknown_nodes or any(
        u[1] is None for u in unreadable if tuple(u) + (None,) * (4 - len(u)) not in sweep.unreadable_history)
    if sweep.unreadable_history:
        notes.append(f'{len(sweep.unreadable_history)} unreadable record(s) of an earlier sweep (they ended '
                     'before the latest sweeps began, by more than --sweep-gap) read as history only: '
                     'they withhold no RESUME line (' + '; '.join(f'{at}: {why}' for at, _, why, _ in
                                                                sweep.unreadable_history[:3])
                     + (', ...' if len(sweep.unreadable_history) > 3 else '') + ')')
    plan = slurm_states.resume_plan([] if unknown else sweep.healthy, states, why_unread, resume_reason)
    if known is None:     # no node list to check names against: no line Slurm reads
        plan.resume, plan.no_lines = [], (f'Slurm cannot be read here ({why_unread}) and no '
                                          '--expect names the nodes')
    # the files first: a reader that stops reading (| head) must not cost them
    summary = write_summary(args.output, args, sweep, rule, plan, notes) if args.output else None
    print('\n'.join(report_lines(sweep, rule, plan, notes)))
    if summary:
        print(f'summary: {summary}')
    return EXIT_REGRESSION if unlisted or unmapped or not all_healthy(sweep, plan) else 0


def figures_left_out(found, variables, name):
    """A note per test whose figures --var or -n leave unjudged: a node slow in them is not seen
    (the sixth red-team's c07b: --var images_per_s, a node 40 % slow in MNIST alone, healthy
    unsaid)."""
    left = {}
    for s in found:
        if s.var not in nodes.SAME_AT_ONE_NODE and (variables and s.var not in variables
                                                    or name and name not in s.name):
            left.setdefault((s.partition, node_records.test_name(s.name)), set()).add(s.var)
    chosen = ' '.join([*(f'--var {v}' for v in variables or ()), *([f'-n {name}'] if name else [])])
    return [f'{chosen}: the figures of {node_records.short(test)} on {partition} not judged '
            f'({", ".join(sorted(vs))}): a node slow in them is not seen here (its failures count)'
            for (partition, test), vs in sorted(left.items())]


def split_sweep(found, since, until, gap, cut):
    """An InputError where a `cut` keeping the runs from `since` to `until` (--max-age, a perf
    log's @START:END) would cut a sweep: a run it leaves out ended within --sweep-gap of the
    runs it keeps of the same test (a failed repetition before or after a stall would vanish: the
    fifth red-team's c12, the sixth's c06, the eighth's m02), or of the same partition where it
    leaves out every run of a test swept there on 2 nodes or more (CIFAR-100 swept on the idle
    nodes 14-18 h before MNIST in one maintenance, failing on a node, would vanish: the sixth's
    c06b, the eighth's m01; a one-node debug run may be left out), or of any partition where it
    leaves out every run of one (the ninth's n09)."""
    kept, left = {}, {}
    for s in found:
        for key in (node_records.run_of(s), s.partition, '*'):
            side = 'kept' if since <= s.time <= until else 'before' if s.time < since else 'after'
            (kept if side == 'kept' else left.setdefault(side, {})).setdefault(key, []).append(s)
    for side, tests in sorted(left.items()):
        for test in sorted(k for k in tests if isinstance(k, tuple)):
            # the test's runs kept, else its partition's, else any (a partition swept 14 h before
            # the others in one maintenance, left out whole: the ninth red-team's n09)
            ran = kept.get(test) or kept.get(test[0]) or kept.get('*')
            if not ran:
                continue
            edge = min(s.time for s in ran) if side == 'before' else max(s.time for s in ran)
            near = [s for s in tests[test] if abs(edge - s.time) <= gap]
            if near and (test in kept or len({s.nodelist for s in near}) >= 2):
                what = 'cuts the sweep of' if test in kept else 'leaves out every run of'
                raise InputError(
                    f'{cut} {what} {node_records.short(test[1])} on {test[0]}: a run it leaves out '
                    f'ended at {node_records.stamp((max if side == "before" else min)(s.time for s in near))}, '
                    f'within --sweep-gap of the {"first" if side == "before" else "last"} it '
                    f'keeps{f" on {test[0]}" if test[0] in kept else ""} ({node_records.stamp(edge)}), '
                    'so of the same maintenance; '
                    'select the whole sweep, or give a --sweep-gap shorter than that pause if it is not')


def listed_in_slurm(found, members, configured=None, features=None):
    """([node], [note], unknown): without --expect, the nodes a sweep must vet, each ReFrame
    partition's: of the Slurm partition that holds every node it ran on, the one its `access`
    names in the site config (`configured`) or else the one of its name, those with the features
    its --constraint requires (`features` {node: its features}; of every node Slurm lists where
    no partition is named: the seventh red-team's n11, Perlmutter's GPU nodes of a partition with
    CPU nodes too). A node held by users, or down, has no record, and is not vetted rather than
    unmentioned. `unknown` where a partition has none of these: the smallest that holds the
    nodes is a guess (debug holds the 4 nodes a busy sweep reached of 16: the seventh red-team's
    n11b), so none is taken and the exit status is not 0."""
    swept = {}
    for s in found:
        try:
            node = node_records.node_of(s)
        except InputError:
            continue            # judge() names it
        if node is not None:
            swept.setdefault(s.partition, set()).add(node)
    everyone = set().union(*members.values())
    expected, said, unknown = set(), [], False
    for partition, ran in sorted(swept.items()):
        holding = {name for name, of in members.items() if ran <= of}
        slurm_names, needs = (configured or {}).get(partition, ((), None))
        # access may name several (--partition=gpu,sim): a job runs on any of them
        listed = [name for name in slurm_names if name in members]
        named = ([','.join(listed)] if listed and ran <= set().union(*(members[n] for n in listed)) else
                 [name for name in (partition.rpartition(':')[2],) if name in holding])
        pool = set().union(*(members[n] for n in named[0].split(','))) if named else everyone if needs else set()
        chosen = {node for node in pool if not needs or needs <= (features or {}).get(node, set())}
        if ran <= chosen:
            expected |= chosen
            where = f"Slurm's partition {named[0]}" if named else 'Slurm\'s nodes'
            having = f' with feature {"&".join(sorted(needs))}' if needs else ''
            said.append(f'the nodes to vet of {partition}: {where}{having} ({len(chosen)} nodes; '
                        '--expect HOSTLIST names others)')
        elif holding:
            unknown = True
            said.append(f'the nodes to vet of {partition} are unknown: neither the site config\'s '
                        f'access nor its name names a Slurm partition, and {", ".join(sorted(holding))} '
                        'hold its nodes; give --expect HOSTLIST (the exit status is not 0 without it)')
    return sorted(expected), said, unknown


def compiled(pattern):
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as err:
        raise InputError(f'--resume-reason {pattern!r}: not a regular expression: {err}') from None


def all_healthy(sweep, plan=None):
    """Every expected node judged healthy and none left alone by the RESUME line, no record
    left out, and nothing else named."""
    return not (sweep.drain or sweep.not_judged or sweep.not_vetted or sweep.slow_links
                or sweep.multi_node_failed or sweep.partition_wide or sweep.unreadable
                or (plan is not None and plan.left_alone))


def parse_age(text, option='--max-age'):
    match = AGE.fullmatch(text.strip())
    if not match:
        raise InputError(f'{option} {text!r}: expected a number and s, m, h or d (12h, 7d)')
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
    for node, findings in to_drain(sweep).items():
        # the worst first: a failure, else the figure furthest below its peers
        worst = findings[0]
        more = f' (and {len(findings) - 1} more: nodes.md)' if len(findings) > 1 else ''
        unlike = f'; stack: {", ".join(sweep.stack[node])}' if node in sweep.stack else ''
        tail = f'{unlike}{more} [{worst.provenance}]'     # kept whole: the why and when
        said = slurm_states.OWN_REASON + worst.said
        room = REASON_LENGTH - len(tail)
        if len(said) > room:
            said = said[:max(room, 40) - 3] + '...'
        lines.append(scontrol(node, 'DRAIN', said + tail))
    return lines


def drain_text(sweep):
    """The nodes to drain with their worst reason, as text: where no node list checks the
    names, no scontrol line is printed."""
    return [f'  {node}: {findings[0]}' for node, findings in to_drain(sweep).items()]


def to_drain(sweep):
    """The nodes a DRAIN line names: not those drained already for another reason."""
    return {node: found for node, found in sweep.drain.items()
            if node not in sweep.already_drained}


def already_drained_lines(sweep):
    return [f'  left alone (already drained: {why!r}): {node}: {sweep.drain[node][0]}'
            for node, why in sweep.already_drained.items()]


def resume_line(plan):
    return scontrol(hostlist.compress(plan.resume), 'RESUME') if plan.resume else ''


def resume_lines(sweep, plan):
    """The healthy nodes, the RESUME line of those Slurm shows drained for mlcheck's reason (or
    the maintenance's), and the healthy nodes it leaves out, each with why."""
    lines = ['', f'healthy ({len(sweep.healthy)}): {hostlist.compress(sweep.healthy)}']
    if plan.resume:
        lines += ['  to resume them (printed, never run; after the DRAIN lines):', resume_line(plan)]
    if plan.unchecked and not plan.no_lines:
        lines.append(f"  the RESUME line was not checked against Slurm's current reasons "
                     f'({plan.unchecked}): resume only nodes drained for the maintenance')
    if plan.in_reservation:
        lines.append(f'  in a maintenance reservation, not drained (nothing to resume; ending the '
                     f'reservation returns them to users): '
                     f'{hostlist.compress(plan.in_reservation)}')
    if plan.in_service:
        lines.append(f'  in service already (not drained, nothing to resume): '
                     f'{hostlist.compress(plan.in_service)}')
    lines += [f'  left alone ({why}): {node}' if not why.startswith('drained for another') else
              f"  left alone (drained for another reason): {node} {why.split(': ', 1)[1]}"
              for node, why in plan.left_alone.items()]
    return lines


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


def verdict_lines(sweep, rule, plan):
    """The verdict, first: the summary, the lines to paste (DRAIN before RESUME, so that a
    RESUME line that fails cannot stop them in a `set -e` script) and the healthy nodes."""
    lines = [summary_line(sweep, rule)]
    if sweep.partition_wide:
        lines += ['', f'partition-wide failures ({len(sweep.partition_wide)}): no DRAIN line, '
                      'fix the configuration, data or image:',
                  *(f'  {said}' for said in sweep.partition_wide)]
    if to_drain(sweep):
        lines += ['', f'drain ({len(to_drain(sweep))}):',
                  *(drain_lines(sweep) if not plan.no_lines else drain_text(sweep))]
    if sweep.already_drained:
        lines += ['', f'to drain, but drained already for another reason '
                      f'({len(sweep.already_drained)}): no DRAIN line, which would overwrite it; '
                      'what mlcheck found, for whoever holds it:', *already_drained_lines(sweep)]
    if sweep.healthy:
        lines += resume_lines(sweep, plan)
    if plan.no_lines:
        lines += ['', f'no scontrol line printed: {plan.no_lines}, so no name here is checked '
                      'against the partition\'s nodes (a NodeSet\'s or a partition\'s name '
                      'would pass): give --expect HOSTLIST, or --slurm-states FILE, or run '
                      'where Slurm can be read']
    if sweep.not_judged:
        lines += ['', f'not judged ({len(sweep.not_judged)}): the evidence cannot say, so '
                      'neither healthy nor drained:']
        lines += [f'  {node}: not judged: {"; ".join(why)}'
                  for node, why in sweep.not_judged.items()]
    if sweep.not_vetted:
        lines += ['', f'not vetted ({len(sweep.not_vetted)}): no evidence (no record in the '
                      'latest sweep, or none since Slurm drained it), so neither healthy nor '
                      'drained:']
        lines += [f'  {node}: {reason}' for node, reason in sweep.not_vetted.items()]
    if sweep.unreadable:
        lines += ['', f'left out, unreadable ({len(sweep.unreadable)}): records that vouch for '
                      'no node, and fail the sweep:', *(f'  {said}' for said in sweep.unreadable)]
    if sweep.slow_links:
        lines += ['', f'slow links ({len(sweep.slow_links)}): slow only together, each node fine '
                      'with its other partners; for the fabric team, not a node to drain:']
        lines += [f'  link {a} <-> {b}: {reason}' for (a, b), reason in sweep.slow_links.items()]
    return lines


def detail_lines(sweep):
    """What else was read: multi-node runs, re-runs, stacks, figures left out."""
    lines = ['', 'sweeps:', *(f'  {said}' for said in sweep.sweeps)] if sweep.sweeps else []
    if sweep.multi_node:
        lines += ['', 'multi-node runs:', *(f'  {said}' for said in sweep.multi_node)]
    if sweep.reruns:
        lines += ['', 'passed on re-run in the latest sweep (history: the latest sweep counts):']
        lines += [f'  {node}: {"; ".join(said)}' for node, said in sweep.reruns.items()]
    if sweep.stack:
        lines += ['', f'stack unlike the peers\' ({len(sweep.stack)}):']
        lines += [f'  {node}: {", ".join(said)}' for node, said in sweep.stack.items()]
    if sweep.left_out:
        lines += ['', 'left out, telling no node apart:', *(f'  {s}' for s in sweep.left_out)]
    return lines


def report_lines(sweep, rule, plan, notes=()):
    lines = verdict_lines(sweep, rule, plan) + detail_lines(sweep)
    return lines + ['', text_table(FIGURE_COLUMNS, figure_rows(sweep)), '', *caveats(sweep, notes)]


def caveats(sweep, notes=()):
    """What the terminal and nodes.md both say below the figures: the notes, the figures judged
    by the threshold alone, the multi-node records."""
    lines = list(notes)
    if sweep.outside:
        lines.append(f'{sweep.outside} node(s) outside --expect ran in the sweep: peers only, '
                     'named in no line')
    alone = sum(v.spread is None and not v.not_judged for v in sweep.figures)
    if alone:
        lines.append(f'{alone} figure(s) on fewer than {MIN_FOR_SPREAD} nodes: judged by the '
                     'threshold alone, without the peers\' spread')
    if sweep.unplaced:
        lines.append(f'{sweep.unplaced} record(s) of multi-node jobs: no figure of one node')
    return lines


def write_summary(directory, args, sweep, rule, plan, notes=()):
    """DIR/nodes.md with a plot per figure; returns its path."""
    from mlcheck.history import node_plots
    directory = Directory(directory, make=True, what='report folder')
    md = lambda row: '| ' + ' | '.join(c.replace('|', '\\|') for c in row) + ' |'
    text = [f'# Node sweep: {args.selection}', '',
            f'Written {datetime.now().astimezone():%Y-%m-%d %H:%M %Z} by `mlcheck-nodes`.', '',
            f'**{summary_line(sweep, rule)}**', '', *caveats(sweep, notes), '']
    if sweep.partition_wide:
        text += ['## Partition-wide failures', '', *(f'- {s}' for s in sweep.partition_wide), '']
    text += ['## Drain', '']
    text += [f'- **{node}**: ' + '; '.join(map(str, reasons))
             + (f' (left alone, already drained: {sweep.already_drained[node]!r})'
                if node in sweep.already_drained else '')
             for node, reasons in sweep.drain.items()] or ['None.']
    if to_drain(sweep) and not plan.no_lines:
        text += ['', '```sh', *drain_lines(sweep), '```']
    text += ['', '## Healthy', '']
    said = [line.strip() for line in resume_lines(sweep, plan) if line and
            not line.startswith('scontrol') and 'to resume them' not in line]
    text += [*said, *(['', '```sh', resume_line(plan), '```'] if plan.resume else [])] \
        if sweep.healthy else ['None.']
    if plan.no_lines:
        text += ['', f'No scontrol line: {plan.no_lines}.']
    text += ['', '## Not judged', '']
    text += [f'- **{node}**: not judged: ' + '; '.join(why)
             for node, why in sweep.not_judged.items()] or ['None.']
    text += ['', '## Not vetted', '']
    text += [f'- **{node}**: {reason}' for node, reason in sweep.not_vetted.items()] or ['None.']
    if sweep.unreadable:
        text += ['', '## Left out, unreadable', '', *(f'- {said}' for said in sweep.unreadable)]
    text += ['', '## Slow links', '']
    text += [f'- **{a} <-> {b}**: {reason}'
             for (a, b), reason in sweep.slow_links.items()] or ['None.']
    details = detail_lines(sweep)
    text += ['', '## Also read', *details] if details else []
    text += ['', '## Figures', '', md(FIGURE_COLUMNS), '|' + '---|' * len(FIGURE_COLUMNS),
             *map(md, figure_rows(sweep)), '']
    for verdict, name in node_plots.plot_all(directory, sweep.figures):
        text += [f'### {verdict.figure.label}', '', f'![{verdict.figure.label}]({name})', '']
    with directory:
        return write_escaped(directory, 'nodes.md', '\n'.join(text))


if __name__ == '__main__':
    sys.exit(main())
