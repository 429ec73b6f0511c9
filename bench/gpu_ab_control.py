#!/usr/bin/env python3
"""An A=A control of the paired A/B rule on one device: how much do two runs of the same program
differ, and what threshold does that noise support?

The same CIFAR-100 program (src/pytorch/cifar/train_cifar100.py --mode single --data device
--solo-steps 0) is run as "A" and as "B" in rounds of alternating order (A B, B A, ...: the order
of mlcheck.ab.rounds), each run a fresh process, each run's images/s read from its `MLCHECK
{json}` result line (`samples_per_s`: images/s over the epochs after the first). Then, as the A/B
check does with the same image on both sides (mlcheck/harness/ab_rounds.py): the ratios B/A per
round, the verdict of mlcheck.ab.rule.judge at --threshold (at most --ceiling) over --rounds
(the most; the looks as the job's), and the threshold the spread supports with that many rounds
(mlcheck.ab.rule.control_line). A=A should judge `same` or `not slower`; `inconclusive` says the
noise is wider than the threshold at these rounds.

    python bench/gpu_ab_control.py --data-dir DATA --out DIR             # on a GPU: ResNet-50, batch 256
    python bench/gpu_ab_control.py --data-dir DATA --out DIR --device cpu --model resnet18 \\
        --batch-size 8 --steps 3 --warmup-steps 1                         # the plumbing, on a CPU

Prints one line per run as it ends ("round 1 A: 2901.3 images/s in 12.3 s, exit 0"), then the
ratios, the control threshold and the verdict in words, then one JSON line {"event":
"ab_control", ...} with every figure; --out gets
each run's output (rNN-A.out/.err/.status, as the A/B job names them) and ab_control.json.
--deadline stops starting rounds that would not end in time: the rounds completed are judged
(fewer than 5 give `inconclusive`, as the rule says).
"""

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'src', 'pytorch', 'cifar', 'train_cifar100.py')
sys.path.insert(0, REPO)
from mlcheck.ab import rounds, rule  # noqa: E402
from mlcheck.judging import output  # noqa: E402


def program_command(args):
    pinned = ['taskset', '-c', args.taskset] if args.taskset else []
    return [*pinned, args.python or sys.executable, '-u', PROGRAM, '--mode', 'single', '--data', 'device',
            '--device', args.device, '--data-dir', args.data_dir, '--model', args.model,
            '--batch-size', str(args.batch_size), '--epochs', str(args.epochs), '--steps', str(args.steps),
            '--warmup-steps', str(args.warmup_steps), '--solo-steps', '0',
            '--loader-steps', str(args.loader_steps)]


def run_once(args, command, round_, side, limit):
    """(exit status or None if it timed out, images/s or None, seconds); the run's output kept
    under --out as rNN-SIDE.out/.err/.status."""
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit, cwd=REPO)
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as err:
        def text(b):
            return b.decode(errors='replace') if isinstance(b, bytes) else (b or '')
        status, stdout, stderr = None, text(err.stdout), text(err.stderr) + f'\ntimed out after {limit:.0f} s\n'
    seconds = time.monotonic() - start
    stem = os.path.join(args.out, os.path.basename(rounds.stem(round_, side)))
    with open(stem + '.out', 'w') as f:
        f.write(stdout)
    with open(stem + '.err', 'w') as f:
        f.write(stderr)
    with open(stem + '.status', 'w') as f:
        f.write('' if status is None else f'{status}\n')
    result = output.parse(stdout, labelled=False).result() if status == 0 else None
    rate = result.get('samples_per_s') if result else None
    return status, rate, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data-dir', required=True, help='directory holding cifar-100-python/')
    parser.add_argument('--out', required=True, help='directory for each run output and ab_control.json')
    parser.add_argument('--device', choices=['auto', 'gpu', 'cpu'], default='gpu')
    parser.add_argument('--model', default='resnet50')
    parser.add_argument('--batch-size', type=int, default=256)
    parser.add_argument('--epochs', type=int, default=2, help='epochs per run; the first is not in images/s')
    parser.add_argument('--steps', type=int, default=30, help='timed steps per epoch')
    parser.add_argument('--warmup-steps', type=int, default=10)
    parser.add_argument('--loader-steps', type=int, default=0,
                        help="the program's loader timed alone (0: not; the device path trains without it)")
    parser.add_argument('--rounds', type=int, default=rule.MIN_ROUNDS)
    parser.add_argument('--ceiling', type=float, default=0.1, help='the largest threshold allowed')
    parser.add_argument('--threshold', type=float, default=0.05, help='the threshold judged at')
    parser.add_argument('--run-timeout', type=float, default=180, help='seconds one run may take')
    parser.add_argument('--deadline', type=float, default=0,
                        help='seconds from start after which no run may still be going (0: none)')
    parser.add_argument('--python', help='the interpreter of the runs (default: this one)')
    parser.add_argument('--taskset', metavar='CPUS',
                        help='run each program on these cores (taskset -c CPUS), as srun binds a rank')
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    command = program_command(args)
    print('command:', ' '.join(command), flush=True)

    start = time.monotonic()
    rates, failed, longest, stopped = {}, [], 0.0, None
    plan = rounds.order(args.rounds)
    for index, (round_, side) in enumerate(plan):
        first_of_round = index % 2 == 0
        limit = args.run_timeout
        if args.deadline:
            left = args.deadline - (time.monotonic() - start)
            # a round is started only if both its runs fit, as long as the longest run so far
            needed = longest * (2 if first_of_round else 1) * 1.2 + 2
            if left < needed or left < 5:
                stopped = f'stopped before round {round_} {side}: {left:.0f} s left, about {needed:.0f} s needed'
                print(stopped, flush=True)
                break
            limit = min(limit, left)
        status, rate, seconds = run_once(args, command, round_, side, limit)
        longest = max(longest, seconds)
        rates[round_, side] = rate
        print(f'round {round_} {side}: ' + ('no images/s' if rate is None else f'{rate:.1f} images/s')
              + f' in {seconds:.1f} s, ' + ('timed out' if status is None else f'exit {status}'), flush=True)
        if rate is None:
            failed.append(f'round {round_} {side}: ' + ('timed out' if status is None else
                                                         f'exit status {status}' if status else
                                                         'no result line'))

    complete = [r for r in range(1, args.rounds + 1)
                if rates.get((r, rounds.A)) is not None and rates.get((r, rounds.B)) is not None]
    a_rates = [rates[r, rounds.A] for r in complete]
    b_rates = [rates[r, rounds.B] for r in complete]
    ratios = [b / a for a, b in zip(a_rates, b_rates)]
    threshold = min(args.threshold, args.ceiling)
    verdict = rule.judge(a_rates, b_rates, threshold, names=('A', 'B (=A)'), failed=failed, most=args.rounds)
    control = rule.control_line(verdict, args.rounds, args.ceiling) if verdict.sd is not None else None

    print('ratios B/A: ' + (', '.join(f'round {r} {x:.4f}' for r, x in zip(complete, ratios)) or 'none'))
    if control is not None:
        print(control)
    print(f'verdict at threshold {threshold:g}: {verdict.verdict}: {verdict.reason}')
    summary = {'event': 'ab_control', 'model': args.model, 'batch_size': args.batch_size,
               'epochs': args.epochs, 'steps': args.steps, 'device': args.device,
               'rounds_planned': args.rounds, 'rounds': complete, 'a_rates': a_rates, 'b_rates': b_rates,
               'ratios': ratios, 'ceiling': args.ceiling, 'threshold': threshold,
               'control': control, 'verdict': verdict.verdict, 'reason': verdict.reason,
               'ratio': verdict.ratio, 'low': verdict.low, 'high': verdict.high, 'sd': verdict.sd,
               'failed': failed, 'stopped': stopped, 'seconds': round(time.monotonic() - start, 1)}
    print(json.dumps(summary), flush=True)
    with open(os.path.join(args.out, 'ab_control.json'), 'w') as f:
        json.dump(summary, f, indent=1)
    return 0 if complete else 1


if __name__ == '__main__':
    sys.exit(main())
