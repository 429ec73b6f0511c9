#!/usr/bin/env python3
"""How many A/B rounds, at which threshold, does a device whose program runs scatter this much
need? The A/B rule (mlcheck.ab.rule.judge) on modelled A=A controls: every program run keeps a
level of its own, log-normal with the spread given or measured, and each round is one run of A
and one of B. Prints, per threshold and number of rounds, how often the rule says `same` (what an
A=A control should say) and how often `slower` (a false alarm).

    python bench/ab_rounds_needed.py --from tests/data/gpu/h200_ab_control.json
    python bench/ab_rounds_needed.py --sigma 0.04 --thresholds 0.05 0.1

--from takes bench/gpu_ab_control.py's ab_control.json: the spread is the standard deviation of
the log of all its runs' images/s (A's and B's together: they are one program).
"""

import argparse
import json
import math
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mlcheck.ab import rule  # noqa: E402


def measured_spread(path):
    """The sd of the log of every run's images/s in a recorded A=A control, and how many runs."""
    try:
        with open(path) as f:
            recorded = json.load(f)
        levels = [x for x in recorded['a_rates'] + recorded['b_rates'] if x]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f'{path}: not an ab_control.json of bench/gpu_ab_control.py: {err}') from None
    if len(levels) < 3:
        raise ValueError(f'{path}: {len(levels)} runs with a rate; 3 at least are needed')
    return statistics.stdev(math.log(x) for x in levels), len(levels)


def rates(sigma, rounds, threshold, trials, rng):
    """(share judged same, share judged slower) of `trials` modelled A=A controls."""
    same = slower = 0
    for _ in range(trials):
        a = [math.exp(rng.gauss(0, sigma)) for _ in range(rounds)]
        b = [math.exp(rng.gauss(0, sigma)) for _ in range(rounds)]
        verdict = rule.judge(a, b, threshold).verdict
        same += verdict == 'same'
        slower += verdict == 'slower'
    return same / trials, slower / trials


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--sigma', type=float, help='sd of the log of a run level (0.04: 4 %%)')
    source.add_argument('--from', dest='recorded', help="an ab_control.json whose runs' spread to use")
    parser.add_argument('--thresholds', type=float, nargs='+', default=[0.05, 0.1])
    parser.add_argument('--rounds', type=int, nargs='+', default=[5, 8, 12, 16, 24, 32])
    parser.add_argument('--trials', type=int, default=2000)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args(argv)
    if args.recorded:
        try:
            sigma, runs = measured_spread(args.recorded)
        except ValueError as err:
            print(f'ab_rounds_needed.py: {err}', file=sys.stderr)
            return 2
        print(f'{args.recorded}: {runs} runs, their levels spread {100 * sigma:.1f} % (sd of the log)')
    else:
        sigma = args.sigma
    rng = random.Random(args.seed)
    print(f'A=A with run levels spread {100 * sigma:.1f} %, {args.trials} modelled controls per cell: '
          'share judged same (share judged slower)')
    print('| threshold | ' + ' | '.join(f'{n} rounds' for n in args.rounds) + ' |')
    print('|---|' + '---|' * len(args.rounds))
    for threshold in args.thresholds:
        cells = [rates(sigma, n, threshold, args.trials, rng) for n in args.rounds]
        print(f'| {threshold:g} | ' + ' | '.join(f'{same:.2f} ({slower:.3f})' for same, slower in cells) + ' |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
