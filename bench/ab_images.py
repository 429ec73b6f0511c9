#!/usr/bin/env python3
"""How often does the A/B verdict (-S compare_with, docs/ab-images.md) call a real slowdown of an
image `slower`, and an image against itself? Beside it, the session comparison: mlcheck-report of
the same image's plain runs in one session against the slowed image's in the next.

The slowdown is inside the image's launch, where no judge reads it: a second path to the image
(a symlink, so a config entry of its own) whose rank prelude holds each rank's process to a
duty cycle, stopped (SIGSTOP) for SHARE of every second, all ranks at once: the entry point
under a CPU quota of 1 - SHARE. Each case and repetition is one 1-node MNIST A/B session, and
two plain sessions (the image, then the image under the duty cycle) of about the A/B job's time
in all. Needs
root and the cluster (bin/simslurm up). A job runs up to --rounds rounds and stops at the look
that finds B slower: on the loaded 2-core machine an A=A job of 30 rounds took 408-413 s, a 5 %
loss 182-445 s, a 10 % one 91-183 s, a repetition of the three 13-17 minutes (docs/ab-images.md
has the tables; --keep keeps every job's rounds for bench/ab_resample.py).

    .venv/bin/python bench/ab_images.py [--repeat 10] [--rounds 30] [--keep DIR]
"""

import argparse
import collections
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests')]
from mlcheck.data import images  # noqa: E402
from reframe_runner import job_file, report_cases, run_reframe, simulated_config_with  # noqa: E402

IMAGE = 'torch-2.14.1'
SHARES = (0.0, 0.03, 0.05, 0.10)     # 0: the A=A control (the image against itself)
# each plain session: about half the A/B job's time (6 rounds of 2 steps), in 3 repetitions
PLAIN = ['-S', 'epochs=4', '--repeat', '3']


def duty_cycle(share):
    """Shell code for the rank prelude: the rank ($$ becomes its Python at exec) stopped for
    `share` of every second, from each whole second of the clock, by a loop that outlives the
    exec. Every rank stops at the same moments, as a CPU quota on the image's cgroup throttles
    all its processes at once: the job loses `share` of its time (ranks stopped at independent
    moments would each wait for the other, about twice the share)."""
    to_next_second = 'n=$(date +%N); sleep 0.$(printf %09d $((1999999999 - 1$n)))'
    return (f'( while kill -0 $$ 2>/dev/null; do {to_next_second}; kill -STOP $$; sleep {share:.3f}; '
            f'kill -CONT $$; done ) >/dev/null 2>&1 &')


def slowed_config(scratch, share, cleanup):
    """(config, image path to run): the simulated config with a second path to IMAGE under the
    duty cycle of `share` (IMAGE itself for 0); `cleanup` (an ExitStack) removes the path."""
    path = images.image_path(IMAGE)
    scratch.mkdir(parents=True, exist_ok=True)
    if not share:
        return simulated_config_with(scratch, images=['host', path]), path
    link = f'{path}-quota{round(100 * (1 - share))}'
    if not os.path.islink(link):
        os.symlink(os.path.basename(path), link)
        cleanup.callback(os.unlink, link)
    entries = ['host', path, {'path': link, 'rank_prelude': duty_cycle(share)}]
    return simulated_config_with(scratch, images=entries), link


def ab_verdict(scratch, config, image, rounds):
    done = run_reframe(config, scratch, '-r', '-n', 'MNIST', '-P', 'num_nodes=1', '-P', f'image={image}',
                       '-S', f'compare_with={IMAGE}', '-S', f'ab_rounds={rounds}', timeout=3600)
    case, = report_cases(scratch)
    try:
        return Path(job_file(case, 'ab/verdict.txt')).read_text().splitlines()[0]
    except OSError:
        return f'no verdict: {case["fail_phase"]}: {case["fail_reason"]}'.splitlines()[0] + f' (exit {done.returncode})'


def session_verdict(scratch, share):
    """mlcheck-report's exit status (1: a regression) and samples/s line: IMAGE's plain runs in
    one session against its runs under the duty cycle (its own entry's prelude) in the next."""
    path, logs = images.image_path(IMAGE), []
    for name, prelude in (('before', None), ('after', duty_cycle(share) if share else None)):
        entry = {'path': path, 'rank_prelude': prelude} if prelude else path
        (scratch / name).mkdir(parents=True, exist_ok=True)
        config = simulated_config_with(scratch / name, images=['host', entry])
        run_reframe(config, scratch / name, '-r', '-n', 'MNIST', '-P', 'num_nodes=1', '-P', f'image={path}',
                    *PLAIN, perflogdir=scratch / name / 'perflogs', timeout=3600)
        logs.append(str(next((scratch / name / 'perflogs').rglob('MNISTDistributedCheck.log'))))
    report = subprocess.run([sys.executable, '-m', 'mlcheck.commands.report', '-C',
                             os.path.join(ROOT, 'config', 'simulated.py'), *logs],
                            capture_output=True, text=True, cwd=ROOT)
    table = [line for line in report.stdout.splitlines() if 'samples_per_s ' in line or 'samples_per_s|' in line]
    return report.returncode, (table or [report.stderr.strip() or report.stdout.strip()[-200:]])[0]


def verdict_word(line):
    found = re.search(r': (not slower|slower|same|faster|inconclusive)\b', line)     # the rule's reason names it
    return found.group(1) if found else 'no verdict'


def machine_speed():
    done = subprocess.run([sys.executable, '-m', 'mlcheck.simulated.speed'], capture_output=True,
                          text=True, cwd=ROOT)
    return done.stdout.strip() or done.stderr.strip()[-200:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeat', type=int, default=10)
    parser.add_argument('--rounds', type=int, default=30, help='the most rounds of a job (-S ab_rounds)')
    parser.add_argument('--shares', type=float, nargs='*', default=SHARES)
    parser.add_argument('--session-shares', type=float, nargs='*',
                        help='the shares whose plain sessions run too (default: every share)')
    parser.add_argument('--keep', help='run in this directory and keep it (default: a temporary one)')
    args = parser.parse_args()
    print(f'speed workload at the start: {machine_speed()} steps/s', flush=True)
    tally = collections.defaultdict(collections.Counter)
    with contextlib.ExitStack() as stack:
        scratch = Path(args.keep or stack.enter_context(tempfile.TemporaryDirectory()))
        configs = {share: slowed_config(scratch / f'config-{share}', share, stack) for share in args.shares}
        # repetition by repetition, every case in each: a drift over the bench's hour falls on all
        for rep in range(args.repeat):
            for share, (config, image) in configs.items():
                where = scratch / f'share-{share}' / f'rep-{rep}'
                started = time.monotonic()
                ab = ab_verdict(where / 'ab', config, image, args.rounds)
                ab_s = time.monotonic() - started
                tally[share][f'A/B {verdict_word(ab)}'] += 1
                said = f'quota {1 - share:.2f} rep {rep}: A/B ({ab_s:.0f} s): {ab}'
                if args.session_shares is None or share in args.session_shares:
                    started = time.monotonic()
                    code, table = session_verdict(where, share)
                    tally[share]['sessions regression' if code == 1 else 'sessions no regression'] += 1
                    said += f' | sessions ({time.monotonic() - started:.0f} s): report exit {code}: {table}'
                print(said, flush=True)
    for share, counts in tally.items():
        print(f'quota {1 - share:.2f}: ' + ', '.join(f'{name} {n}' for name, n in sorted(counts.items())))
    print(f'speed workload at the end: {machine_speed()} steps/s', flush=True)


if __name__ == '__main__':
    main()
