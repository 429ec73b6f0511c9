#!/usr/bin/env python3
"""The report's rule when one side has a single repetition (reframe -r without --repeat): how often
does it flag an unchanged run, and a 20 % or 50 % loss? Simulated normal noise of a known relative
standard deviation, judged by mlcheck.history.compare.judge with the default rule.

    .venv/bin/python bench/one_sided_rule.py [--trials 20000] [--seed 1]
"""

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mlcheck.history import compare   # noqa: E402


def flagged(before_runs, loss, noise, trials, rng):
    """Share of trials judged a regression: `before_runs` values before, one after."""
    hits = 0
    for _ in range(trials):
        before = [rng.gauss(1, noise) for _ in range(before_runs)]
        after = [rng.gauss(1 - loss, noise)]
        c = compare.Comparison(('p', 'test', 'rate', ''), 'samples/s', 'host', 1, before, after)
        hits += compare.judge(c, compare.Rule()).verdict == compare.REGRESSION
    return hits / trials


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--trials', type=int, default=20000)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print('| noise | runs before | unchanged flagged | 20 % loss flagged | 50 % loss flagged |')
    print('|---|---|---|---|---|')
    for noise in (0.03, 0.10):
        for runs in (3, 5):
            shares = [flagged(runs, loss, noise, args.trials, rng) for loss in (0, 0.2, 0.5)]
            print(f'| {100 * noise:.0f} % | {runs} | ' + ' | '.join(f'{100 * s:.1f} %' for s in shares) + ' |')


if __name__ == '__main__':
    main()
