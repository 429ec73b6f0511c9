#!/usr/bin/env python3
"""What mlcheck-nodes costs and how often it is wrong.

Scale: perf logs of N one-node runs of 3 checks (2 figures each, a rate and a time) at 1,024,
2,048 and 4,096 nodes (--sweeps K: K such sweeps appended, two days apart, the latest judged); the seconds to read and judge them (mlcheck.history.nodes.judge, as the
command does, with its printed report, without plots), and to write the plots, the median of --runs runs.

False alarms: healthy partitions of n nodes whose figure is normal with a relative standard
deviation of 1-5 %: the share of healthy nodes named, and of sweeps naming at least one, by the
default rule (15 % below the peers' upper quartile and 3 of their standard deviations) and by the
published median/MAD score (0.6745 (x - median) / MAD < -2, at least 10 nodes) and by the rule at 10 %. Detection: the
share of sweeps in which one node 20 % slower is named.

Stability (issue 36, item 6): two independent draws of one partition of 16-4,096 nodes
(tests/node_sessions.py: the steps' times, 1-5 % noise, 1-3 nodes 25 % slow), judged by
mlcheck-nodes: the share of healthy nodes named in one draw and not the other, and of slow nodes
named in both.

Repetitions (the red-team of issue 47, finding 10): healthy partitions with --repeat 3, the
share of healthy nodes drained or not judged for one slow repetition, and a node 40 % or 20 %
slow in one run of three: how often drained, and never healthy.

    PYTHONPATH=. .venv/bin/python bench/node_sweep.py [--runs 5] [--trials 400] [--sweeps 1]
    PYTHONPATH=. .venv/bin/python bench/node_sweep.py --only repetitions --trials 400
"""

import argparse
import dataclasses
import functools
from dataclasses import astuple
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tests'))
from mlcheck.commands import nodes as command  # noqa: E402
from mlcheck.history import node_plots, nodes, slurm_states  # noqa: E402
from mlcheck.history.samples import Sample  # noqa: E402
from mlcheck.history.selection import load, parse_selection  # noqa: E402
from mlcheck.judging.peers import below_peers  # noqa: E402
from node_sessions import Stability, draw_pairs  # noqa: E402
from perflogs import write_perflog  # noqa: E402

CHECKS = ('MNISTDistributedCheck', 'CifarCheck', 'InterconnectCheck')


def records(n, rng, sweeps=1):
    """The records of `sweeps` sweeps of n nodes appended to one perf log, two days apart."""
    return [dataclasses.replace(s, time=s.time - 2 * 86400 * (sweeps - 1 - k))
            for k in range(sweeps) for s in one_sweep(n, rng)]


def one_sweep(n, rng):
    found = []
    for c, check in enumerate(CHECKS):
        name = f'{check} %image=host %num_nodes=1'
        for i in range(n):
            node = f'nid{i:05d}'
            found += [Sample('lumi:gpu', name, 'host', 1, 'samples_per_s', 1000 * rng.gauss(1, .02),
                             'samples/s', 1.79e9 + i, jobid=str(i), nodelist=node),
                      Sample('lumi:gpu', name, 'host', 1, 'epoch_time', 10 * rng.gauss(1, .02), 's',
                             1.79e9 + i, jobid=str(i), nodelist=node)]
    return found


def scale(runs, sweeps=1):
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as scratch:
        print(f'{sweeps} sweep(s) in the perf log, the latest judged')
        print('nodes  records  read+judge s (median)  judge+report s  plots s  read+judge CPU s')
        for n in (1024, 2048, 4096):
            log = write_perflog(Path(scratch) / f'{n}.log', records(n, rng, sweeps))
            both, judged, plotted, cpu = [], [], [], []
            for _ in range(runs):
                start, cpu_start = time.perf_counter(), time.process_time()
                found = load(parse_selection(log), with_failed=True)
                middle = time.perf_counter()
                sweep = nodes.judge(found)
                plan = slurm_states.resume_plan(sweep.healthy, None, 'not read')
                command.report_lines(sweep, nodes.Rule(), plan)     # the verdict as printed
                end = time.perf_counter()
                cpu.append(time.process_time() - cpu_start)    # steadier on a shared machine
                both.append(end - start)
                judged.append(end - middle)
            start = time.perf_counter()
            node_plots.plot_all(scratch, sweep.figures)
            plotted.append(time.perf_counter() - start)
            print(f'{n:5d}  {len(found):7d}  {statistics.median(both):21.2f}  '
                  f'{statistics.median(judged):7.2f}  {plotted[0]:7.2f}  '
                  f'{statistics.median(cpu):7.2f}')


def mad_named(values):
    """The published score: 0.6745 (x - median) / MAD below -2, with at least 10 nodes."""
    if len(values) < 10:
        return set()
    centre = statistics.median(values.values())
    mad = statistics.median(abs(v - centre) for v in values.values())
    return {m for m, v in values.items() if mad and 0.6745 * (v - centre) / mad < -2}


def rule_named(values, rule=nodes.Rule(), factor=None):
    """The nodes the command drains (its spread, nodes.healthy_spread; `factor` 0: its band
    of the threshold alone, before the eighth red-team of issue 47)."""
    spread_of = functools.partial(nodes.healthy_spread, threshold=rule.threshold,
                                  factor=rule.spread_factor if factor is None else factor)
    return {m for m, _ in below_peers(values, rule.threshold, rule.spread_factor, spread_of).named}


def false_alarms(trials):
    rng = random.Random(2)
    print('nodes  noise  rule        healthy nodes named  sweeps naming any  20 % slow node named')
    for n in (16, 64, 512):
        for noise in (0.01, 0.02, 0.03, 0.05, 0.08, 0.10):
            for label, named_by in (('default', rule_named), ('MAD < -2', mad_named),
                                    ('band 15%', lambda v: rule_named(v, factor=0)),
                                    ('10%, 3 sd', lambda v: rule_named(v, nodes.Rule(0.10, 3)))):
                named = any_named = caught = 0
                for _ in range(trials):
                    values = {i: rng.gauss(1, noise) for i in range(n)}
                    wrong = named_by(values)
                    named += len(wrong)
                    any_named += bool(wrong)
                    values[0] *= 0.8
                    caught += 0 in named_by(values)
                print(f'{n:5d}  {100 * noise:4.0f}%  {label:10s}  {100 * named / trials / n:18.3f}%  '
                      f'{100 * any_named / trials:16.1f}%  {100 * caught / trials:19.1f}%')


def stability(trials, sizes=(16, 64, 512, 4096), noises=(0.01, 0.03, 0.05), repeats=1):
    print(f'runs per node: {repeats}')
    print('nodes  noise  healthy differing  healthy not judged  slow drained in both  '
          'slow never healthy  (slow nodes)')
    for n in sizes:
        for noise in noises:
            pairs = max(2, trials * 16 // n)
            total = Stability()
            for count in (1, 2, 3):
                found = draw_pairs(n, noise, count, pairs, seed=n + count, repeats=repeats)
                total = Stability(*(a + b for a, b in zip(astuple(total), astuple(found))))
            print(f'{n:5d}  {100 * noise:4.0f}%  {100 * total.differ / total.healthy:16.2f}%  '
                  f'{100 * total.unsure / total.healthy / 2:17.2f}%  '
                  f'{100 * total.both / total.slow:19.1f}%  {100 * total.kept / total.slow:17.1f}%  '
                  f'{total.slow:12d}')


def repetitions(trials, sizes=(64, 512), noises=(0.01, 0.03, 0.05), repeats=3):
    """The rule on single repetitions (nodes.slow_repetitions): healthy partitions of n nodes,
    `repeats` runs each (tests/node_sessions.py), the share of healthy nodes drained for one
    slow repetition and not judged for one; then one node slow by 40 % and by 20 % in one run of
    `repeats`: the share of sweeps draining it, and leaving it not healthy."""
    from node_sessions import node_name, session
    print(f'runs per node: {repeats}')
    print('nodes  noise  healthy drained (a run)  healthy not judged (a run)  '
          '40% in 1 run drained  not healthy  20% in 1 run drained  not healthy')
    for n in sizes:
        for noise in noises:
            rng = random.Random(n + int(1000 * noise))
            sweeps = max(2, trials * 16 // n)
            drained = unsure = 0
            caught = {0.4: [0, 0], 0.2: [0, 0]}
            for _ in range(sweeps):
                sweep = nodes.judge(session(n, noise, {}, rng, repeats=repeats))
                said = lambda reasons: any('repetitions' in str(r) for r in reasons)
                drained += sum(said(r) for r in sweep.drain.values())
                unsure += sum(said(r) for r in sweep.not_judged.values())
                for slow in caught:
                    bad = node_name(0)
                    sweep = nodes.judge(session(n, noise, {}, rng, repeats=repeats,
                                                slow_runs={(bad, 1): slow}))
                    caught[slow][0] += bad in sweep.drain
                    caught[slow][1] += bad not in sweep.healthy
            healthy = sweeps * n
            print(f'{n:5d}  {100 * noise:4.0f}%  {100 * drained / healthy:22.4f}%  '
                  f'{100 * unsure / healthy:25.3f}%  '
                  + '  '.join(f'{100 * c[0] / sweeps:19.1f}%  {100 * c[1] / sweeps:10.1f}%'
                              for c in caught.values()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--sweeps', type=int, default=1, help='scale: sweeps appended to the log')
    parser.add_argument('--trials', type=int, default=400)
    parser.add_argument('--only', choices=('scale', 'false-alarms', 'stability', 'repetitions'))
    parser.add_argument('--nodes', type=int, action='append', help='stability: these sizes only')
    parser.add_argument('--noise', type=float, action='append', help='stability: these noises only')
    parser.add_argument('--repeats', type=int, default=1, help='stability: runs per node')
    args = parser.parse_args()
    if args.only in (None, 'scale'):
        scale(args.runs, args.sweeps)
    if args.only in (None, 'false-alarms'):
        false_alarms(args.trials)
    if args.only in (None, 'stability'):
        stability(args.trials, args.nodes or (16, 64, 512, 4096),
                  args.noise or (0.01, 0.03, 0.05), args.repeats)
    if args.only in (None, 'repetitions'):
        repetitions(args.trials, args.nodes or (64, 512), args.noise or (0.01, 0.03, 0.05))


if __name__ == '__main__':
    main()
