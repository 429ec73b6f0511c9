#!/usr/bin/env python3
"""How often the upgrade report's likely cause (mlcheck.history.causes) names the right layer,
says `cannot tell`, or names a wrong one, on generated matrices (MNIST, CIFAR-100 and the
interconnect check x 3 images x 1, 2 and 4 nodes x 3-5 repetitions) with one injected cause of
known truth (host stack, fabric, one image, one node, the data path), a random effect of 0-50 %
and noise of 1-10 %; a third of the cases carry a per-node sweep (every node case does).

    .venv/bin/python bench/layer_causes.py [--cases 10000] [--seed 1]
"""

import argparse
import os
import random
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests')]
from layer_matrices import draw_case, matrix, outcome  # noqa: E402
from mlcheck.history import causes, compare  # noqa: E402

EFFECTS = ((0, 0.05), (0.05, 0.10), (0.10, 0.20), (0.20, 0.50))
NOISES = ((0.01, 0.03), (0.03, 0.06), (0.06, 0.10))


def run(cases, seed):
    """{(effect bucket, noise bucket): Counter of outcomes}, and the wrong cases."""
    rng = random.Random(seed)
    table, wrong = {}, []
    for _ in range(cases):
        case = draw_case(rng)
        before, after = matrix(rng, **case)
        found = causes.likely_causes(compare.compare(before, after), before, after)
        result = outcome(found, case['cause'], case['target'])
        bucket = (next(e for e in EFFECTS if e[0] <= case['effect'] <= e[1]),
                  next(n for n in NOISES if n[0] <= case['noise'] <= n[1]))
        table.setdefault(bucket, Counter())[result] += 1
        if result == 'wrong':
            wrong.append((case, [c.line() for c in found]))
    return table, wrong


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cases', type=int, default=10000)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()
    table, wrong = run(args.cases, args.seed)
    print('| effect | noise | cases | right | cannot tell | wrong |')
    print('|---|---|---|---|---|---|')
    for effect in EFFECTS:
        for noise in NOISES:
            count = table.get((effect, noise), Counter())
            n = sum(count.values())
            share = lambda k: f'{100 * count[k] / n:.1f} %' if n else '-'
            print(f'| {100 * effect[0]:g}-{100 * effect[1]:g} % | {100 * noise[0]:g}-{100 * noise[1]:g} % '
                  f'| {n} | {share("right")} | {share("cannot tell")} | {share("wrong")} |')
    total = Counter()
    for count in table.values():
        total.update(count)
    print(f'\n{args.cases} cases: {total["right"]} right, {total["cannot tell"]} cannot tell, '
          f'{total["wrong"]} wrong')
    for case, lines in wrong[:10]:
        print('wrong:', case, lines)


if __name__ == '__main__':
    main()
