#!/usr/bin/env python3
"""What the GPU does when the host does not set the pace: the bare training step of
bench/cifar_data_path.py (zero_grad, forward, loss, backward, SGD step, batches already on the GPU)
launched eagerly, against the same step captured whole as one CUDA graph and replayed (PyTorch's
"whole network capture": torch.cuda.graph, warmed up on a side stream, autocast with
cache_enabled=False). On 32x32 images the eager step is as long as the host takes to launch its
~850 kernels (docs/cifar-benchmark.md, the H200's trace); a replay is one launch, so the graph's
images/s is what the GPU itself can do, and 1 - eager / graph is what the launches cost.

Each row: images/s, GPU utilization from the project's sampler (src/pytorch/telemetry.py, every
--interval s over the timed steps), the model's TFLOP/s (the program's FLOP count, torch's
FlopCounterMode over one forward and backward pass) and its share of the peaks of
bench/cifar_data_path.py. One row failing (a capture error) is printed as such and the rest go on.

    python bench/cuda_graph_step.py --device gpu --json rows.jsonl          # on a GPU
    python bench/cuda_graph_step.py --device cpu --models resnet18 --batch-size 4 --seconds 0.3
        # the eager rows on a CPU; the graph rows say why they are skipped
"""

import argparse
import gc
import json
import math
import os
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cifar_data_path as paths  # noqa: E402  (also puts src/pytorch on sys.path)
import telemetry  # noqa: E402
from ddp_common import device_name, pick_device, synchronize  # noqa: E402

WARMUP_STEPS = paths.WARMUP_STEPS


def timed(run, device, interval, seconds, batch):
    """Warm-up, then about `seconds` of `run(count)` under the sampler: the row's figures."""
    warm = run(WARMUP_STEPS)
    count = paths.steps_for(seconds, WARMUP_STEPS * batch / warm, batch, least=8)
    sampler = telemetry.Sampler(device, interval).start()
    took = run(count)
    fact = sampler.stop().fields()
    return {'images_per_s': count * batch / took, 'utilization': fact.get('utilization'),
            'gpu_samples': fact.get('gpu_samples'), 'power_w': fact.get('power_w'),
            'clock_mhz': fact.get('clock_mhz'), 'steps': count, 'seconds': took,
            'step_ms': 1e3 * took / count}


def eager_row(args, model_name, precision, device):
    model, optimizer, criterion, batches, amp = paths.bare_setup(model_name, precision, device, args.batch_size)
    flops = paths.program.flops_per_sample(
        model, batches[0], criterion, lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp))
    run = paths.bare_steps(model, optimizer, criterion, batches, amp, device)
    row = timed(run, device, args.interval, args.seconds, args.batch_size)
    row['flops_per_image'] = flops
    return row


def graph_row(args, model_name, precision, device):
    """The same step captured whole (torch.cuda.graph) and replayed; each replay's batch copied
    into the graph's input tensors first, as a training loop would feed it."""
    if device.type != 'cuda':
        return {'skipped': f'CUDA graphs need a CUDA device; this run is on {device.type}'}
    model, optimizer, criterion, batches, amp = paths.bare_setup(model_name, precision, device, args.batch_size)
    static_images, static_labels = (t.clone() for t in batches[0])

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast('cuda', dtype=torch.bfloat16, enabled=amp, cache_enabled=False):
            loss = criterion(model(static_images), static_labels)
        loss.backward()
        optimizer.step()
        return loss

    side = torch.cuda.Stream()        # warm-up on a side stream: the docs' recipe before capture
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)   # the gradients are then the graph's own memory
    began = time.perf_counter()
    with torch.cuda.graph(graph):
        static_loss = step()
    capture_s = time.perf_counter() - began

    def run(count):
        synchronize(device)
        start = time.perf_counter()
        for n in range(count):
            images, labels = batches[n % len(batches)]
            static_images.copy_(images)
            static_labels.copy_(labels)
            graph.replay()
        synchronize(device)
        return time.perf_counter() - start

    row = timed(run, device, args.interval, args.seconds, args.batch_size)
    loss = static_loss.item()
    row.update(capture_seconds=capture_s, last_loss=loss, loss_finite=math.isfinite(loss))
    del graph
    return row


def of_peak(row, precision):
    rate = (row.get('flops_per_image') or 0) * row['images_per_s']
    return rate, ', '.join(f'{100 * rate / (peak * 1e12):.2f} % of {name}'
                           for name, peak in paths.PEAKS[precision].items()) if rate else ''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--models', nargs='+', default=['resnet50', 'resnet152'])
    parser.add_argument('--precisions', nargs='+', default=list(paths.PRECISIONS), choices=list(paths.PRECISIONS))
    parser.add_argument('--batch-size', type=int, default=256)
    parser.add_argument('--seconds', type=float, default=1.5, help='about how long each timed row lasts')
    parser.add_argument('--interval', type=float, default=0.25, help='seconds between GPU samples')
    parser.add_argument('--device', choices=['auto', 'gpu', 'cpu'], default='auto')
    parser.add_argument('--deadline', type=float, default=0, help='seconds from start to end by (0: none)')
    parser.add_argument('--json', help='each row as one JSON line, to this file')
    args = parser.parse_args()
    device = pick_device(args.device)
    start = time.monotonic()
    out = open(args.json, 'a') if args.json else None
    print(f'{device_name(device)}, torch {torch.__version__}, torchvision {torchvision.__version__}, '
          f'batch {args.batch_size}, timed rows of about {args.seconds} s, GPU sampled every {args.interval} s')
    print('\n| model | precision | step | images/s | ms/step | GPU busy % (samples) | power W | model TFLOP/s '
          '| of peak | graph / eager |')
    print('|---|---|---|---|---|---|---|---|---|---|', flush=True)
    longest = 0.0
    for model_name in args.models:
        for precision in args.precisions:
            left = args.deadline - (time.monotonic() - start) if args.deadline else math.inf
            if left < 1.3 * longest + 2:
                print(f'| {model_name} | {precision} | not measured: {left:.0f} s of the deadline left |||||||')
                continue
            began = time.monotonic()
            rows = {}
            for kind, measure in (('eager', eager_row), ('graph', graph_row)):
                try:
                    rows[kind] = measure(args, model_name, precision, device)
                except Exception as err:     # one failed row is reported, the rest go on
                    rows[kind] = {'error': f'{type(err).__name__}: {str(err)[:300]}'}
                gc.collect()
                if device.type == 'cuda':
                    torch.cuda.empty_cache()
            if 'flops_per_image' in rows['eager'] and 'images_per_s' in rows['graph']:
                rows['graph']['flops_per_image'] = rows['eager']['flops_per_image']
            for kind, row in rows.items():
                if 'images_per_s' not in row:
                    print(f'| {model_name} | {precision} | {kind} | {row.get("skipped") or "failed: " + row["error"]} |||||||',
                          flush=True)
                else:
                    rate, share = of_peak(row, precision)
                    ratio = (f'{row["images_per_s"] / rows["eager"]["images_per_s"]:.2f}'
                             if kind == 'graph' and 'images_per_s' in rows['eager'] else '')
                    busy = '' if row['utilization'] is None else f'{row["utilization"]:.0f}'
                    power = '' if row['power_w'] is None else f'{row["power_w"]:.0f}'
                    print(f'| {model_name} | {precision} | {kind} | {row["images_per_s"]:,.0f} | '
                          f'{row["step_ms"]:.2f} | {busy} ({row["gpu_samples"]}) | {power} | '
                          f'{rate / 1e12:.1f} | {share} | {ratio} |', flush=True)
                if out:
                    out.write(json.dumps({'model': model_name, 'precision': precision, 'step': kind,
                                          'batch': args.batch_size, **row}) + '\n')
                    out.flush()
            longest = max(longest, time.monotonic() - began)
    print(f'\n{time.monotonic() - start:.0f} s in all')


if __name__ == '__main__':
    main()
