#!/usr/bin/env python3
"""The A/B rule's rates from real steps, cheaply: rounds of real A=A jobs on the simulated
partition, resampled with a known loss applied to B, judged by the sequential rule as a job of
`--most` rounds would be (docs/ab-images.md has the table).

    .venv/bin/python bench/ab_resample.py record OUT.json STAGE_OR_KEPT_DIR... [--speed 94.4 92.0]
    .venv/bin/python bench/ab_resample.py judge bench/data/ab-aa-rounds.json [--most 30] [--threshold 0.05]

`record` reads every A/B job's rounds under the directories (the stage directories ReFrame kept,
bench/ab_images.py --keep) into OUT.json: each job's (A, B) rate of every round, its order, and
the speed workload's reading beside them. `judge` draws each simulated job's rounds with
replacement from one recorded job at a time (a job's own level stays with its rounds), multiplies
B by 1 - loss (a steady loss, or 0.5 in a round with chance 1/4), and counts the verdicts and the
rounds the looks used.
"""

import argparse
import collections
import functools
import glob
import json
import math
import os
import random
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]
from mlcheck.ab import rounds, rule  # noqa: E402

# (name, loss of each round's B given a random.Random): steady, and half speed in one round of four
CASES = [('A=A', lambda rng: 0.0), ('steady 3 %', lambda rng: 0.03), ('steady 5 %', lambda rng: 0.05),
         ('steady 10 %', lambda rng: 0.10), ('50 % in one round of four', lambda rng: 0.5 if rng.random() < 0.25 else 0.0)]


def record(out, dirs, speed, fact='samples_per_s'):
    jobs = []
    for top in dirs:
        for first in sorted(glob.glob(os.path.join(top, '**', rounds.DIR, 'r01-A.out'), recursive=True)):
            # a stage directory, or ReFrame's copy of its kept files in output/ (a test that passed)
            stagedir = os.path.dirname(os.path.dirname(first))
            if '/output/' in stagedir and os.path.isdir(stagedir.replace('/output/', '/stage/')):
                continue
            steps = rounds.read_steps(stagedir, rounds.rounds_run(stagedir), {rounds.A: 'A', rounds.B: 'B'})
            a, b, failed = rounds.judged_rates(steps, fact)
            jobs.append({'stagedir': os.path.relpath(stagedir, ROOT), 'failed': failed,
                         'rounds': [[x, y] for x, y in zip(a, b)]})
    with open(out, 'w') as f:
        json.dump({'fact': fact, 'speed_workload': speed, 'jobs': jobs}, f, indent=1)
    print(f'{out}: {len(jobs)} jobs, {sum(len(j["rounds"]) for j in jobs)} rounds')


def describe(jobs):
    """The recorded rounds' spread and what might favour one side: B/A by job, by which side ran
    first in the round, and by round."""
    logs = [math.log(b / a) for job in jobs for a, b in job['rounds']]
    print(f'{len(logs)} rounds of {len(jobs)} jobs: mean log(B/A) {statistics.fmean(logs):+.4f} '
          f'(se {statistics.stdev(logs) / math.sqrt(len(logs)):.4f}), sd {statistics.stdev(logs):.4f}')
    for job in jobs:
        job_logs = [math.log(b / a) for a, b in job['rounds']]
        first_a = [x for i, x in enumerate(job_logs) if i % 2 == 0]     # rounds 1, 3, ...: A ran first
        first_b = [x for i, x in enumerate(job_logs) if i % 2 == 1]
        print(f'  {job["stagedir"]}: {len(job_logs)} rounds, mean {statistics.fmean(job_logs):+.4f} '
              f'sd {statistics.stdev(job_logs):.4f}; A first {statistics.fmean(first_a):+.4f}, '
              f'B first {statistics.fmean(first_b):+.4f}; below 1 in {sum(x < 0 for x in job_logs)}')
    firsts = [(i % 2 == 0, math.log(b / a)) for job in jobs for i, (a, b) in enumerate(job['rounds'])]
    # the second step of a round against the first, whichever image it was
    second_over_first = [x if a_first else -x for a_first, x in firsts]
    print(f'second step of a round against the first: mean log {statistics.fmean(second_over_first):+.4f} '
          f'(se {statistics.stdev(second_over_first) / math.sqrt(len(second_over_first)):.4f})')


def judge(jobs, most, threshold, runs, seed):
    t_quantile = functools.lru_cache(None)(rule.t_quantile)
    rule.t_quantile = t_quantile
    pools = [job['rounds'] for job in jobs if len(job['rounds']) >= 2]
    print(f'| loss applied to B | `slower` | `same` | `not slower` | `faster` | `inconclusive` | '
          f'rounds used (mean; decided by look {", ".join(map(str, rule.looks(most)))}) |')
    print('|---|---|---|---|---|---|---|')
    for name, loss_of in CASES:
        rng = random.Random(seed)
        verdicts, used, by_look = collections.Counter(), [], collections.Counter()
        for _ in range(runs):
            pool = rng.choice(pools)
            drawn = [rng.choice(pool) for _ in range(most)]
            a = [x for x, _ in drawn]
            b = [y * (1 - loss_of(rng)) for _, y in drawn]
            verdict = rule.judge(a, b, threshold, most=most)
            verdicts[verdict.verdict] += 1
            used.append(verdict.rounds)
            by_look[verdict.rounds] += 1
        share = {v: f'{100 * verdicts[v] / runs:.1f} %' for v in rule.VERDICTS}
        looks = ', '.join(f'{100 * by_look[n] / runs:.0f} %' for n in rule.looks(most))
        print(f'| {name} | {share["slower"]} | {share["same"]} | {share["not slower"]} | {share["faster"]} | '
              f'{share["inconclusive"]} | {statistics.fmean(used):.1f} ({looks}) |')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    rec = sub.add_parser('record')
    rec.add_argument('out')
    rec.add_argument('dirs', nargs='+')
    rec.add_argument('--speed', type=float, nargs='*', default=[], help='the speed workload beside them')
    jud = sub.add_parser('judge')
    jud.add_argument('records', nargs='+')
    jud.add_argument('--most', type=int, default=30)
    jud.add_argument('--threshold', type=float, default=0.05)
    jud.add_argument('--runs', type=int, default=2000)
    jud.add_argument('--seed', type=int, default=50)
    args = parser.parse_args()
    if args.command == 'record':
        record(args.out, args.dirs, args.speed)
        return
    jobs = [job for path in args.records for job in json.load(open(path))['jobs'] if not job['failed']]
    describe(jobs)
    judge(jobs, args.most, args.threshold, args.runs, args.seed)


if __name__ == '__main__':
    main()
