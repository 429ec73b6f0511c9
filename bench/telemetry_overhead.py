#!/usr/bin/env python3
"""Does sampling telemetry cost training throughput? Measure it side by side.

In one process, on the same model and batches, alternate rounds of the MNIST program's own
`train_step` (src/pytorch/mnist/mnist_DDP.py) with the telemetry sampler off and on
(src/pytorch/telemetry.py, as the programs start it), the order flipped every round, and print
samples/s of both and the ratio of their medians (on / off). With --tool, the sampler reads a
stand-in vendor tool each time: a script that prints a recorded rocm-smi output
(tests/data/telemetry/), so that each sample pays a fork and exec and a JSON parse, as
`rocm-smi --json` would, without a GPU. See docs/telemetry.md.

    .venv/bin/python bench/telemetry_overhead.py --rounds 6 --steps 15 --interval 1
    .venv/bin/python bench/telemetry_overhead.py --rounds 6 --steps 15 --interval 0.1 --tool
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, os.path.join(REPO, 'src', 'pytorch'))
import telemetry  # noqa: E402
from ddp_common import load_program  # noqa: E402

RECORDED = os.path.join(REPO, 'tests', 'data', 'telemetry', 'rocm_smi_mi250_secondary_die.json')


def stand_in_rocm_smi(directory):
    """A `rocm-smi` that prints the recorded MI250 output, and a `which` that finds only it."""
    path = os.path.join(directory, 'rocm-smi')
    with open(path, 'w') as stream:
        stream.write(f'#!/bin/sh\ncat {RECORDED}\n')
    os.chmod(path, 0o755)
    return lambda name: path if name == 'rocm-smi' else None


def train_round(mnist, model, optimizer, batches, sampler):
    """samples/s of one round of `batches`, with `sampler` (or none) running over it."""
    if sampler:
        sampler.start()
    start = time.perf_counter()
    samples = sum(mnist.train_step(model, optimizer, batch, torch.device('cpu'))[0] for batch in batches)
    seconds = time.perf_counter() - start
    if sampler:
        sampler.stop()
    return samples / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=8, help='rounds of each, off and on (at least 1)')
    parser.add_argument('--steps', type=int, default=60, help='training steps per round')
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--interval', type=float, default=1.0, help='seconds between samples')
    parser.add_argument('--tool', action='store_true', help='read a stand-in rocm-smi every sample')
    args = parser.parse_args()

    mnist = load_program('mnist/mnist_DDP.py')
    torch.manual_seed(1)
    model = mnist.Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    batches = [(torch.randn(args.batch_size, 1, 28, 28), torch.randint(0, 10, (args.batch_size,)))
               for _ in range(args.steps)]
    with tempfile.TemporaryDirectory() as directory:
        if args.tool:
            which = stand_in_rocm_smi(directory)
            device = torch.device('cuda', 0)         # only names the GPU the tool is asked about
            os.environ['ROCR_VISIBLE_DEVICES'] = '0'
        else:
            which, device = (lambda name: None), torch.device('cpu')

        def sampler():
            made = telemetry.Sampler(device, args.interval, which=which)
            if args.tool:
                assert made.source is not None, made.unavailable
            return made

        probe = sampler()
        start = time.perf_counter()
        for _ in range(20):
            probe.sample()
        per_sample = (time.perf_counter() - start) / 20
        train_round(mnist, model, optimizer, batches[:5], None)     # warm-up
        speeds = {'off': [], 'on': []}
        samples_taken = []
        for round_ in range(args.rounds):
            for mode in (('off', 'on') if round_ % 2 == 0 else ('on', 'off')):
                running = sampler() if mode == 'on' else None
                speeds[mode].append(train_round(mnist, model, optimizer, batches, running))
                if running:
                    samples_taken.append(running.fields()['gpu_samples'] if args.tool else None)

    off, on = statistics.median(speeds['off']), statistics.median(speeds['on'])
    print(f'torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, '
          f'load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds of {args.steps} steps of '
          f'{args.batch_size}; interval {args.interval:g} s, source: '
          f'{"stand-in rocm-smi (recorded output)" if args.tool else "host memory only (no GPU)"}')
    print(f'one sample takes {per_sample * 1e3:.1f} ms (wall, mean of 20): '
          f'{per_sample / args.interval:.2%} of one core at this interval')
    if args.tool:
        print(f'GPU samples per round: {samples_taken}')
    for mode in ('off', 'on'):
        print(f'sampling {mode:3}: median {statistics.median(speeds[mode]):8.1f} samples/s '
              f'(rounds: {", ".join(f"{s:.0f}" for s in speeds[mode])})')
    print(f'ratio on/off of the medians: {on / off:.3f}')


if __name__ == '__main__':
    main()
