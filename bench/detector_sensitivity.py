#!/usr/bin/env python3
"""How small a slowdown does each candidate regression rule flag, and how often does it raise a
false alarm? Measured on the real repetitions of tests/data/perflogs (docs/performance-history.md).

Each trial takes two different sessions of a campaign that ran unchanged (the baseline and the
unchanged ones), resamples each one's five repetitions with replacement, makes the second one
slower by a known fraction S (its samples/s times 1 - S) and asks each rule whether it is a
regression. Session against session keeps the real day-to-day drift between sessions, which a
rule must not mistake for a regression; S = 0 measures the false alarms.

    .venv/bin/python bench/detector_sensitivity.py [--trials 1000] [--seed 1]
"""

import argparse
import itertools
import json
import os
import random
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, ROOT)
from mlcheck.history import compare  # noqa: E402
from mlcheck.history.selection import load, parse_selection  # noqa: E402

PERFLOGS = os.path.join(ROOT, 'tests', 'data', 'perflogs')
# sessions whose repetitions were disturbed by something else on the machine (see the docs)
DISTURBED = {'d8e1a1f9'}
SLOWDOWNS = (0.0, 0.03, 0.05, 0.1, 0.2)
VAR = 'samples_per_s'


def unchanged_sessions(campaign):
    """{uuid: [samples/s of its repetitions]} of the campaign's unslowed sessions."""
    with open(os.path.join(PERFLOGS, f'{campaign}.sessions.json')) as stream:
        sessions = json.load(stream)
    found = {}
    for s in sessions:
        if s['throttle'] == 0 and s['uuid'][:8] not in DISTURBED:
            spec = f"{PERFLOGS}/{campaign}.log@{s['start']}:{s['end']}"
            found[s['uuid'][:8]] = [x.value for x in load(parse_selection(spec))
                                    if x.var == VAR]
    return found


def rank_p(before, after):
    """One-sided p-value of the Mann-Whitney rank test that `after` is lower: the share of all
    splits of the pooled values into groups of these sizes whose count of (before > after)
    pairs is at least this one's. Exact; ties count half."""
    pairs = lambda first, second: sum((b > a) + 0.5 * (a == b) for a in second for b in first)
    pooled, observed = before + after, pairs(before, after)
    splits = list(itertools.combinations(range(len(pooled)), len(before)))
    extreme = 0
    for chosen in map(set, splits):
        first = [v for i, v in enumerate(pooled) if i in chosen]
        second = [v for i, v in enumerate(pooled) if i not in chosen]
        extreme += pairs(first, second) >= observed
    return extreme / len(splits)


def bootstrap_upper(before, after, alpha, rng, resamples=1000):
    """The one-sided (1 - alpha) upper bound of the relative change of the mean, by resampling
    each side with replacement."""
    changes = sorted(statistics.fmean(rng.choices(after, k=len(after)))
                     / statistics.fmean(rng.choices(before, k=len(before))) - 1
                     for _ in range(resamples))
    return changes[int((1 - alpha) * resamples) - 1]


def rules():
    """{name: flagged(before, after)} for samples/s (higher is better), the current rule first."""
    def current(threshold):
        def flagged(before, after):
            c = compare.Comparison(('p', 't', VAR, ''), 'samples/s', 'i', 1, before, after)
            return compare.judge(c, compare.Rule(threshold=threshold)).verdict == compare.REGRESSION
        return flagged

    change = lambda before, after: statistics.fmean(after) / statistics.fmean(before) - 1
    rng = random.Random(2)
    return {
        'mean, >5% and >2 x noise (current)': current(0.05),
        'mean, >3% and >2 x noise': current(0.03),
        'rank test p<0.01, >3%': lambda b, a: change(b, a) < -0.03 and rank_p(b, a) < 0.01,
        'rank test p<0.05, >3%': lambda b, a: change(b, a) < -0.03 and rank_p(b, a) < 0.05,
        'bootstrap 99% bound, >3%': lambda b, a: (change(b, a) < -0.03
                                                  and bootstrap_upper(b, a, 0.01, rng) < 0),
    }


def trials(sessions, design, count, rng):
    """(before, after) pairs of repetitions: every ordered pair of two sessions as recorded
    ('pairs'), or `count` pairs of two random sessions each resampled ('resampled')."""
    if design == 'pairs':
        return [(sessions[a], sessions[b]) for a, b in itertools.permutations(sorted(sessions), 2)]
    picked = []
    for _ in range(count):
        first, second = rng.sample(sorted(sessions), 2)
        picked.append((rng.choices(sessions[first], k=len(sessions[first])),
                       rng.choices(sessions[second], k=len(sessions[second]))))
    return picked


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--trials', type=int, default=1000)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()
    candidates = rules()
    for campaign in ('quiet', 'shared-load'):
        sessions = unchanged_sessions(campaign)
        for design in ('pairs', 'resampled'):
            cases = trials(sessions, design, args.trials, random.Random(args.seed))
            print(f'## {campaign}, {design}: {len(cases)} trials from sessions {", ".join(sessions)}')
            print('share flagged as a regression, after made slower by S\n')
            print('| rule | ' + ' | '.join(f'S = {100 * s:g}%' for s in SLOWDOWNS) + ' |')
            print('|---|' + '---|' * len(SLOWDOWNS))
            for name, flagged in candidates.items():
                cells = [sum(flagged(before, [v * (1 - slowdown) for v in after])
                             for before, after in cases) / len(cases) for slowdown in SLOWDOWNS]
                print(f'| {name} | ' + ' | '.join(f'{100 * c:.1f}%' for c in cells) + ' |')
            print()


if __name__ == '__main__':
    main()
