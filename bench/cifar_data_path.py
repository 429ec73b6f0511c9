#!/usr/bin/env python3
"""Does the CIFAR-100 check measure the GPU or its data loader? The two data paths against a bare
loop, on one GPU, side by side: the table of docs/cifar-benchmark.md.

For each model and precision (fp32; bf16 autocast with channels_last), three rows:
- device: the training program, one process (--mode single --data device --augment): the decoded
  set on the GPU, cropped, flipped and normalised there;
- loader: the same with --data loader: torchvision's DataLoader with --workers processes;
- bare: the least a training step can do, on batches made on the GPU beforehand, no augmentation.
Each row gives images/s, mean GPU utilization over the timed steps (src/pytorch/telemetry.py)
and images/s as a share of the bare loop's; the program rows also give the loader alone.

    python bench/cifar_data_path.py --data-dir DATA              # on a GPU: ResNet-152 and -50
    python bench/cifar_data_path.py --data-dir DATA --device cpu --models resnet18 \
        --batch-size 8 --epochs 2 --steps 3 --bare-steps 3       # the plumbing, on a CPU
"""

import argparse
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torchvision

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, 'src', 'pytorch')
PROGRAM = os.path.join(SRC, 'cifar', 'train_cifar100.py')
sys.path[:0] = [SRC, REPO]
import telemetry  # noqa: E402
from ddp_common import device_name, pick_device, synchronize  # noqa: E402
from mlcheck.judging import output  # noqa: E402

PRECISIONS = {'fp32': [], 'bf16+channels_last': ['--amp', '--channels-last']}


def program_row(args, model, precision, data):
    """The training program on one device: its steady images/s, GPU utilization, loader alone."""
    command = [sys.executable, PROGRAM, '--mode', 'single', '--device', args.device, '--data', data,
               '--augment', '--data-dir', args.data_dir, '--model', model, '--batch-size',
               str(args.batch_size), '--epochs', str(args.epochs), '--steps', str(args.steps),
               '--workers', str(args.workers), '--telemetry-interval', str(args.interval),
               '--solo-steps', '0', *PRECISIONS[precision]]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f'{model} {precision} {data}: the program failed:\n{done.stderr[-2000:]}')
    run = output.parse(done.stdout, labelled=False)
    return {'images_per_s': run.result()['samples_per_s'],
            'utilization': run.by_rank('telemetry').get(0, {}).get('utilization'),
            'loader_images_per_s': run.by_rank('loader').get(0, {}).get('images_per_s')}


def bare_row(args, model_name, precision, device):
    """A bare loop on batches already on the device: zero_grad, forward, loss, backward, step."""
    torch.manual_seed(0)
    amp = precision != 'fp32'
    memory_format = torch.channels_last if amp else torch.contiguous_format
    model = getattr(torchvision.models, model_name)(num_classes=100).to(device, memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    batches = [(torch.randn(args.batch_size, 3, 32, 32, device=device).contiguous(memory_format=memory_format),
                torch.randint(0, 100, (args.batch_size,), device=device)) for _ in range(8)]

    def steps(count):
        for step in range(count):
            images, labels = batches[step % len(batches)]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        synchronize(device)

    steps(10)       # warm-up: allocator, kernel selection
    sampler = telemetry.Sampler(device, args.interval).start()
    start = time.perf_counter()
    steps(args.bare_steps)
    seconds = time.perf_counter() - start
    return {'images_per_s': args.bare_steps * args.batch_size / seconds,
            'utilization': sampler.stop().fields().get('utilization'), 'loader_images_per_s': None}


def cell(value, digits=0):
    return '' if value is None else f'{value:,.{digits}f}'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data-dir', required=True, help='directory holding cifar-100-python/')
    parser.add_argument('--models', nargs='+', default=['resnet152', 'resnet50'])
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--steps', type=int, default=0, help="the program's steps per epoch (0: one pass)")
    parser.add_argument('--bare-steps', type=int, default=300, help='timed steps of the bare loop')
    parser.add_argument('--workers', type=int, default=4, help="the loader path's worker processes")
    parser.add_argument('--interval', type=float, default=0.5, help='seconds between GPU samples')
    parser.add_argument('--device', choices=['auto', 'gpu', 'cpu'], default='auto')
    args = parser.parse_args()
    device = pick_device(args.device)

    print(f'{device_name(device)}, torch {torch.__version__}, batch {args.batch_size}, '
          f'{args.workers} loader workers, {os.cpu_count()} cores\n')
    print('| model | precision | path | images/s | GPU busy % | of bare | loader alone, images/s |')
    print('|---|---|---|---|---|---|---|')
    for model in args.models:
        for precision in PRECISIONS:
            rows = {'bare': bare_row(args, model, precision, device)}
            for data in ('device', 'loader'):
                rows[data] = program_row(args, model, precision, data)
            bare = rows['bare']['images_per_s']
            for path in ('device', 'loader', 'bare'):
                row = rows[path]
                print(f"| {model} | {precision} | {path} | {cell(row['images_per_s'])} | "
                      f"{cell(row['utilization'])} | {row['images_per_s'] / bare:.2f} | "
                      f"{cell(row['loader_images_per_s'])} |", flush=True)


if __name__ == '__main__':
    main()
