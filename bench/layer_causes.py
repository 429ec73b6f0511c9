#!/usr/bin/env python3
"""The upgrade report's likely cause (mlcheck.history.causes) on the bank of scenarios written from
the partition's physics (tests/scenario_bank.py: MNIST, CIFAR-100 and the interconnect check x 3
images x 1, 2 and 4 nodes, placed as Slurm does or spread, 1-5 % noise, 1-5 repetitions, a fault
at one layer or two): per family, how many are named exactly, cannot tell (listing the truth),
wrong; and the time the report's judging and diagnosis take (the scenarios drawn beforehand).

    .venv/bin/python bench/layer_causes.py [--scenarios 2000] [--seed 35]
    .venv/bin/python bench/layer_causes.py --physics --scenarios 600 --seed 49

--physics draws issue 49's families instead (scenario_bank.PHYSICS: a site with one image, a
network plugin lost in one image, a node whose every run fails, a NIC at half speed on a busy
partition of 16 under --repeat 5, one transient failure among passes).
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--scenarios', type=int, default=2000)
    parser.add_argument('--seed', type=int, default=35)
    parser.add_argument('--physics', action='store_true', help="issue 49's families")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    drawn = [scenario_bank.draw(rng, rng.choice(scenario_bank.PHYSICS) if args.physics else None)
             for _ in range(args.scenarios)]
    start, cpu = time.perf_counter(), time.process_time()
    found = [EvidenceTable.of(before, after) for _, _, before, after in drawn]
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    table = collections.defaultdict(collections.Counter)
    for (family, truth, _, _), evidence in zip(drawn, found):
        gate = bool(evidence.failing() or evidence.failed('after'))
        table[family][scenario_bank.outcome(evidence.verdicts, truth, gate)] += 1
    print('| family | scenarios | named exactly | cannot tell | wrong | not seen |')
    print('|---|---|---|---|---|---|')
    for family, counts in sorted(table.items()):
        n = sum(counts.values())
        print(f'| {family} | {n} | {counts["right"]} ({100 * counts["right"] / n:.0f} %) | '
              f'{counts["cannot tell"]} | {counts["wrong"] + counts["missed"]} | {counts["not seen"]} |')
    print(f'\n{args.scenarios} scenarios judged and diagnosed in {took:.1f} s ({cpu:.1f} s of CPU: '
          'the wall time of a shared machine is longer)')


if __name__ == '__main__':
    main()
