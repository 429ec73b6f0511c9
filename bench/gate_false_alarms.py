#!/usr/bin/env python3
"""The report's gate on unchanged sessions, whole matrix: how many of them exit 1 (a false
alarm: a regression row, or a likely cause, where nothing changed), at `--repeat` 2, 3 and 5 a
side, at the repetitions' noise measured on the simulated partition (3 %: the quiet machine; 8 %:
shared), jobs placed as Slurm does on an idle partition or wherever nodes are free on a busy one.

Generated noise, not resampled sessions: each run's figures share one normal draw of the noise
(tests/scenario_bank.py), and a share `--tails` of the runs (interference: a job beside another
on its nodes' cores or links) is 2-4 spreads slower besides; 24 tests (MNIST, CIFAR-100 and the interconnect check x 2 images x 1,
2, 4 and 8 nodes) on 16 nodes, before and after drawn alike.

    .venv/bin/python bench/gate_false_alarms.py [--sessions 100] [--seed 49] [--repeats 2,3,5]
        [--noises 3,8] [--tails 0,6]
"""

import argparse
import collections
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests')]
import scenario_bank  # noqa: E402
from mlcheck.history.evidence import EvidenceTable  # noqa: E402

SHAPE = dict(before_images=scenario_bank.IMAGES[:2], after_images=scenario_bank.IMAGES[:2],
             before_counts=(1, 2, 4, 8), after_counts=(1, 2, 4, 8), nodes=scenario_bank.partition(16))


def alarms(rng, sessions, repeat, noise, mode, tail=0.0):
    """(sessions that exit 1, of which by a row, of which by the cause line alone)."""
    found = collections.Counter()
    for _ in range(sessions):
        before, after = scenario_bank.build(rng, [], mode=mode, noise=noise, repetitions=(repeat, repeat),
                                            tail=tail, **SHAPE)
        table = EvidenceTable.of(before, after)
        if table.exit_status():
            found['exit 1'] += 1
            found['by a row' if table.failing() else 'by the cause line alone'] += 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sessions', type=int, default=100)
    parser.add_argument('--seed', type=int, default=49)
    parser.add_argument('--repeats', default='2,3,5')
    parser.add_argument('--noises', default='3,8', help='the repetitions\' spreads, in %%')
    parser.add_argument('--tails', default='0,6', help='the shares of interfered runs, in %%')
    args = parser.parse_args()
    rng = random.Random(args.seed)
    start = time.perf_counter()
    print('| --repeat | noise | interfered runs | placement | sessions exiting 1 | per 12 | by a row | '
          'by the cause line alone |')
    print('|---|---|---|---|---|---|---|---|')
    for repeat in map(int, args.repeats.split(',')):
        for noise in (float(n) / 100 for n in args.noises.split(',')):
            for tail in (float(t) / 100 for t in args.tails.split(',')):
                for mode in ('slurm', 'busy'):
                    found = alarms(rng, args.sessions, repeat, noise, mode, tail)
                    rate = found['exit 1'] / args.sessions
                    print(f'| {repeat} | {100 * noise:.0f} % | {100 * tail:.0f} % | '
                          f'{"idle" if mode == "slurm" else "busy"} | '
                          f'{found["exit 1"]} of {args.sessions} ({100 * rate:.0f} %) | {12 * rate:.1f} | '
                          f'{found["by a row"]} | {found["by the cause line alone"]} |', flush=True)
    print(f'\n{time.perf_counter() - start:.0f} s')


if __name__ == '__main__':
    main()
