#!/usr/bin/env python3
"""Does the CIFAR-100 benchmark's training loop cost throughput? Measure it side by side.

In one process, on the same model, batches and device, alternate rounds of the benchmark's own
`train_steps` (src/pytorch/cifar/train_cifar100.py) and of a bare PyTorch loop (zero_grad,
forward, loss, backward, step), and print images/s of both and their ratio (target: >= 0.97).
Both are also set against the device's measured matrix-multiply rate, to show how far the model
is from the hardware's limit (model FLOP utilisation).

    .venv/bin/python bench/harness_overhead.py --model resnet18 --batch-size 32 --steps 20
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torchvision

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src', 'pytorch')
sys.path.insert(0, SRC)
from ddp_common import device_name, load_program, pick_device, synchronize  # noqa: E402


def bare_loop(model, batches, optimizer, criterion, device):
    """The least a training step can do."""
    model.train()
    synchronize(device)
    start = time.perf_counter()
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        criterion(model(images), labels).backward()
        optimizer.step()
    synchronize(device)
    return sum(len(labels) for _, labels in batches) / (time.perf_counter() - start)


def harness_loop(model, batches, optimizer, criterion, device, args):
    figures = program.train_steps(model, iter(batches), len(batches), optimizer, criterion, device,
                                  args, lambda: torch.autocast(device.type, enabled=False))
    return figures['samples'] / figures['seconds']


def matmul_flops(device, size, dtype=torch.float32, repeats=10):
    """FLOP/s of a square matrix multiply in `dtype`: the hardware's practical dense limit."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    a @ b
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * size ** 3 * repeats / (time.perf_counter() - start)


def measure(model_name, args, device):
    """The alternating rounds of one model: {'bare': [images/s], 'harness': [...]}, FLOPs per image."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, model_name)(num_classes=program.NUM_CLASSES).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(torch.randn(args.batch_size, 3, 32, 32, device=device),
                torch.randint(0, program.NUM_CLASSES, (args.batch_size,), device=device))
               for _ in range(args.steps)]
    flops = program.flops_per_sample(model, batches[0], criterion,
                                     lambda: torch.autocast(device.type, enabled=False))
    loop_args = argparse.Namespace(steps=0, channels_last=False)

    bare_loop(model, batches, optimizer, criterion, device)   # warm-up, untimed
    rates = {'bare': [], 'harness': []}
    for _ in range(args.rounds):   # alternate, so drifts of a noisy machine hit both alike
        rates['bare'].append(bare_loop(model, batches, optimizer, criterion, device))
        rates['harness'].append(harness_loop(model, batches, optimizer, criterion, device, loop_args))
    return rates, flops


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--model', nargs='+', default=['resnet18'], choices=program.MODELS,
                        help='one or more models, measured one after the other')
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--steps', type=int, default=20, help='steps per round')
    parser.add_argument('--rounds', type=int, default=5, help='alternating rounds of each loop')
    parser.add_argument('--matmul-size', type=int, default=2048)
    parser.add_argument('--device', choices=['auto', 'gpu', 'cpu'], default='auto')
    args = parser.parse_args()
    device = pick_device(args.device)

    peak = matmul_flops(device, args.matmul_size)
    # the limit of bf16 autocast (--amp) runs, for comparing their model FLOP/s
    peak_bf16 = matmul_flops(device, args.matmul_size, torch.bfloat16)
    print(f'device {device_name(device)}, torch {torch.__version__}, {torch.get_num_threads()} threads, '
          f'batch {args.batch_size}, {args.rounds} rounds of {args.steps} steps')
    print(f'matrix multiply ({args.matmul_size}^2): fp32 {peak / 1e9:.1f} GFLOP/s, '
          f'bf16 {peak_bf16 / 1e9:.1f} GFLOP/s', flush=True)
    for model_name in args.model:
        rates, flops = measure(model_name, args, device)
        print(f'{model_name}: {flops / 1e9:.3f} GFLOP per image (forward + backward)')
        for name, values in rates.items():
            median = statistics.median(values)
            print(f'{model_name} {name:8s} median {median:8.1f} images/s (min {min(values):.1f}, '
                  f'max {max(values):.1f}), {flops * median / 1e9:.1f} GFLOP/s = '
                  f'{100 * flops * median / peak:.1f}% of matmul')
        ratios = [h / b for h, b in zip(rates['harness'], rates['bare'])]
        print(f'{model_name} harness / bare: median {statistics.median(ratios):.3f} '
              f'(per round: {", ".join(f"{r:.3f}" for r in ratios)}); target >= 0.97', flush=True)


program = load_program('cifar/train_cifar100.py')

if __name__ == '__main__':
    main()
