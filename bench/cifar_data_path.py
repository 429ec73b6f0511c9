#!/usr/bin/env python3
"""Does the CIFAR-100 check measure the GPU or its data loader? The two data paths against a bare
loop, on one GPU, side by side: the table of docs/cifar-benchmark.md.

For each batch size, model and precision (fp32; bf16 autocast with channels_last), three rows:
- bare: the least a training step can do, on batches made on the GPU beforehand, no augmentation;
- device: the training program (src/pytorch/cifar/train_cifar100.py --mode single --data device
  --augment): the decoded set on the GPU, cropped, flipped and normalised there;
- loader: the same with --data loader: torchvision's DataLoader with --workers processes, and the
  loader timed alone (its `loader` fact).
Each row gives images/s, mean GPU utilization over the timed steps from the program's own sampler
(src/pytorch/telemetry.py, every --interval s) and the samples it took, images/s as a share of the
bare loop's, the model's FLOP/s (the program's count: torch's FlopCounterMode over one forward and
backward, per image, times images/s) as a share of a peak, and the sampler's own time as a share
of the timed seconds.

The program's main() is called in this one process for every row, its `finish` (which ends the
process) replaced by a return: 24 rows would otherwise pay 24 interpreter starts, CUDA contexts and
torch imports. Each row still builds its model, optimizer, data and sampler anew and times only
after its own warm-up steps; the A=A control (bench/gpu_ab_control.py) runs the program as fresh
processes. Each timed epoch lasts about --epoch-seconds: the steps are sized from the bare loop's
rate (device rows) or the last loader-alone rate (loader rows). Configurations run most important
first (--models at each --batch-sizes in turn, then --later-models); --deadline stops starting
one that would not end in time, and the rows not measured are listed as such. --trace-dir: at
the end, if it fits, the device row that kept the GPU least busy runs again with --profile-steps
and bench/gpu_trace.py's summary of its trace is printed.

    python bench/cifar_data_path.py --data-dir DATA --json rows.jsonl          # on a GPU
    python bench/cifar_data_path.py --data-dir DATA --device cpu --models resnet18 --batch-sizes 4 \\
        --later-models --epoch-seconds 0.3 --workers 1                        # the plumbing, on a CPU
"""

import argparse
import contextlib
import gc
import io
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torchvision

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, 'src', 'pytorch')
sys.path[:0] = [SRC, REPO, os.path.dirname(os.path.abspath(__file__))]
import telemetry  # noqa: E402
import gpu_trace  # noqa: E402
from ddp_common import device_name, emit, load_program, pick_device, synchronize  # noqa: E402
from mlcheck.judging import output  # noqa: E402

PRECISIONS = {'fp32': [], 'bf16+channels_last': ['--amp', '--channels-last']}
# dense peaks of one H100/H200 SXM (NVIDIA's datasheet; the H200's compute is the H100's), TFLOP/s:
# fp32 rows against plain FP32 and against TF32 (cuDNN runs fp32 convolutions as TF32 in torch by
# default; config/dgx.py declares that one), bf16 rows against BF16
PEAKS = {'fp32': {'FP32 67': 67.0, 'TF32 494.5': 494.5}, 'bf16+channels_last': {'BF16 989.5': 989.5}}
WARMUP_STEPS = 10
LOADER_GUESS = 2000.0     # images/s of the loader path before the first loader row measured it
TRACE_RESERVE = 15        # seconds kept before the deadline for the profiled row (--trace-dir)

program = load_program('cifar/train_cifar100.py')


def _return_instead_of_exit(rank, distributed=True):
    emit('done', rank=rank)


program.finish = _return_instead_of_exit


def run_program(argv):
    """The program's facts for `argv` (main() in this process), or (None, why it failed)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            program.main(argv)
    except SystemExit as stop:
        return None, f'the program stopped: {stop.code}'
    except Exception as err:     # one failed row is reported, the table goes on
        return None, f'{type(err).__name__}: {str(err)[:300]}'
    finally:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return output.parse(captured.getvalue(), labelled=False), None


def steps_for(seconds, images_per_s, batch, least=4):
    return max(least, min(4000, math.ceil(seconds * images_per_s / batch)))


def program_row(args, model, precision, data, batch, steps, profile_steps=0):
    argv = ['--mode', 'single', '--device', args.device, '--data', data, '--augment',
            '--data-dir', args.data_dir, '--model', model, '--batch-size', str(batch),
            '--epochs', '2', '--steps', str(steps), '--warmup-steps', str(WARMUP_STEPS),
            '--workers', str(args.workers), '--telemetry-interval', str(args.interval),
            '--solo-steps', '0', '--loader-steps', str(args.loader_steps if data == 'loader' else 0),
            *PRECISIONS[precision]]
    if profile_steps:
        argv += ['--profile-steps', str(profile_steps), '--trace-dir', args.trace_dir]
    run, why = run_program(argv)
    if run is None:
        return {'error': why}
    result = run.result()
    if result is None:
        return {'error': 'no result fact'}
    fact = run.by_rank('telemetry').get(0, {})
    timed = sum(f['seconds'] for f in run.rank_events('epoch', 0))     # what the sampler spanned
    row = {'images_per_s': result['samples_per_s'], 'utilization': fact.get('utilization'),
           'gpu_samples': fact.get('gpu_samples'), 'power_w': fact.get('power_w'),
           'clock_mhz': fact.get('clock_mhz'), 'throttle': fact.get('throttle'),
           'gpu_memory_gb': fact.get('gpu_memory_gb'),
           'sampling_seconds': fact.get('sampling_seconds'), 'timed_seconds': timed,
           'flops_per_image': result.get('flops_per_sample'), 'model_flops_per_s': result.get('model_flops_per_s'),
           'step_time': result.get('step_time'), 'steps': steps,
           'loader_images_per_s': run.by_rank('loader').get(0, {}).get('images_per_s')}
    trace = run.by_rank('trace').get(0)
    if trace:
        row['trace'] = trace['path']
    return row


def bare_setup(model_name, precision, device, batch):
    """The bare loop's model, optimizer, loss, 8 batches already on the device, and whether it
    runs under bf16 autocast (with channels_last)."""
    torch.manual_seed(0)
    amp = precision != 'fp32'
    memory_format = torch.channels_last if amp else torch.contiguous_format
    model = getattr(torchvision.models, model_name)(num_classes=100).to(device, memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(torch.randn(batch, 3, 32, 32, device=device).contiguous(memory_format=memory_format),
                torch.randint(0, 100, (batch,), device=device)) for _ in range(8)]
    return model, optimizer, nn.CrossEntropyLoss(), batches, amp


def bare_steps(model, optimizer, criterion, batches, amp, device):
    """steps(count): `count` bare steps (zero_grad, forward, loss, backward, step) over `batches`
    in turn, timed between synchronisations; returns the seconds."""
    def steps(count):
        synchronize(device)
        start = time.perf_counter()
        for step in range(count):
            images, labels = batches[step % len(batches)]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        synchronize(device)
        return time.perf_counter() - start
    return steps


def bare_row(args, model_name, precision, device, batch):
    """A bare loop on batches already on the device: zero_grad, forward, loss, backward, step."""
    model, optimizer, criterion, batches, amp = bare_setup(model_name, precision, device, batch)
    steps = bare_steps(model, optimizer, criterion, batches, amp, device)
    warm = steps(WARMUP_STEPS)       # allocator, kernel selection; its rate sizes the timed steps
    count = steps_for(args.epoch_seconds, WARMUP_STEPS * batch / warm, batch, least=8)
    sampler = telemetry.Sampler(device, args.interval).start()
    seconds = steps(count)
    fact = sampler.stop().fields()
    del model, optimizer, batches
    gc.collect()
    if device.type == 'cuda':
        torch.cuda.empty_cache()
    return {'images_per_s': count * batch / seconds, 'utilization': fact.get('utilization'),
            'gpu_samples': fact.get('gpu_samples'), 'power_w': fact.get('power_w'),
            'clock_mhz': fact.get('clock_mhz'), 'sampling_seconds': fact.get('sampling_seconds'),
            'timed_seconds': seconds, 'steps': count}


def matmul_rates(device, size):
    """TFLOP/s of a square matrix product: fp32 (TF32 off, torch's default for matmul), TF32, bf16."""
    if device.type != 'cuda':
        return {}
    rates = {}
    before = torch.backends.cuda.matmul.allow_tf32
    for name, dtype, tf32 in (('fp32', torch.float32, False), ('tf32', torch.float32, True),
                              ('bf16', torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
        a @ b
        synchronize(device)
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        synchronize(device)
        rates[name] = 2 * size ** 3 * 10 / (time.perf_counter() - start) / 1e12
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = before
    torch.cuda.empty_cache()
    return rates


def cell(value, digits=0):
    return '' if value is None else f'{value:,.{digits}f}'


def percent(part, whole):
    return None if part is None or not whole else 100 * part / whole


def print_row(batch, model, precision, path, row, bare_rate):
    if 'error' in row:
        print(f'| {batch} | {model} | {precision} | {path} | failed: {row["error"][:200]} |||||||', flush=True)
        return
    peaks = PEAKS[precision]
    of_peak = ', '.join(f'{cell(percent(row.get("model_flops_per_s"), peak * 1e12), 2)} % of {name}'
                        for name, peak in peaks.items()) if row.get('model_flops_per_s') else ''
    print(f"| {batch} | {model} | {precision} | {path} | {cell(row['images_per_s'])} | "
          f"{cell(row['utilization'])} ({row.get('gpu_samples') or 0}) | "
          f"{row['images_per_s'] / bare_rate:.2f} | "
          f"{cell((row.get('model_flops_per_s') or 0) / 1e12 or None, 1)} | {of_peak} | "
          f"{cell(row.get('loader_images_per_s'))} | "
          f"{cell(percent(row.get('sampling_seconds'), row.get('timed_seconds')), 2)} | {row['steps']} |",
          flush=True)


def plan(args):
    """(batch, model, precision) in the order they are measured: most important first."""
    configs = [(b, m, p) for b in args.batch_sizes for m in args.models for p in PRECISIONS]
    return configs + [(b, m, p) for m in args.later_models for b in args.batch_sizes for p in PRECISIONS]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data-dir', required=True, help='directory holding cifar-100-python/')
    parser.add_argument('--models', nargs='+', default=['resnet152', 'resnet50'])
    parser.add_argument('--later-models', nargs='*', default=['resnet18'],
                        help='measured after --models at every batch size')
    parser.add_argument('--batch-sizes', nargs='+', type=int, default=[256, 128])
    parser.add_argument('--epoch-seconds', type=float, default=1.0, help='about how long each timed epoch lasts')
    parser.add_argument('--workers', type=int, default=4, help="the loader path's worker processes")
    parser.add_argument('--loader-steps', type=int, default=10, help="the loader path's loader timed alone")
    parser.add_argument('--interval', type=float, default=0.5, help='seconds between GPU samples')
    parser.add_argument('--device', choices=['auto', 'gpu', 'cpu'], default='auto')
    parser.add_argument('--deadline', type=float, default=0, help='seconds from start to end by (0: none)')
    parser.add_argument('--trace-dir', help='profile the least busy device row again, its trace here')
    parser.add_argument('--profile-steps', type=int, default=5)
    parser.add_argument('--matmul-size', type=int, default=8192)
    parser.add_argument('--json', help='each row as one JSON line, to this file')
    args = parser.parse_args()
    device = pick_device(args.device)
    args.device = 'gpu' if device.type == 'cuda' else 'cpu'
    start = time.monotonic()
    rows_out = open(args.json, 'a') if args.json else None

    def record(**row):
        if rows_out:
            rows_out.write(json.dumps(row) + '\n')
            rows_out.flush()

    rates = matmul_rates(device, args.matmul_size)
    record(event='matmul', size=args.matmul_size, tflops=rates)
    print(f'{device_name(device)}, torch {torch.__version__}, torchvision {torchvision.__version__}, '
          f'{args.workers} loader workers, {os.cpu_count()} cores, timed epochs of about '
          f'{args.epoch_seconds} s, GPU sampled every {args.interval} s')
    if rates:
        print('matrix product ' + f'{args.matmul_size}^2, TFLOP/s: '
              + ', '.join(f'{name} {rate:,.1f}' for name, rate in rates.items()))
    print()
    print('| batch | model | precision | path | images/s | GPU busy % (samples) | of bare | model TFLOP/s '
          '| of peak | loader alone, images/s | sampler % of time | steps/epoch |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
    loader_rate, longest, device_rows = LOADER_GUESS, 0.0, []
    configs = plan(args)
    trace_reserve = TRACE_RESERVE if args.trace_dir else 0
    for index, (batch, model, precision) in enumerate(configs):
        left = args.deadline - (time.monotonic() - start) if args.deadline else math.inf
        if left < 1.3 * longest + 2 + trace_reserve:
            for skipped in configs[index:]:
                print(f'| {skipped[0]} | {skipped[1]} | {skipped[2]} | all | not measured: '
                      f'{left:.0f} s of the deadline left, a configuration took up to {longest:.0f} s |||||||')
                record(event='not_measured', batch=skipped[0], model=skipped[1], precision=skipped[2],
                       seconds_left=round(left, 1))
            break
        began = time.monotonic()
        rows = {'bare': bare_row(args, model, precision, device, batch)}
        bare = rows['bare']['images_per_s']
        rows['device'] = program_row(args, model, precision, 'device', batch,
                                     steps_for(args.epoch_seconds, bare, batch))
        rows['loader'] = program_row(args, model, precision, 'loader', batch,
                                     steps_for(args.epoch_seconds, min(loader_rate, bare), batch))
        loader_rate = rows['loader'].get('loader_images_per_s') or loader_rate
        for path in ('device', 'loader', 'bare'):
            print_row(batch, model, precision, path, rows[path], bare)
            record(event='row', batch=batch, model=model, precision=precision, path=path, **rows[path])
        if 'error' not in rows['device']:
            device_rows.append((rows['device'].get('utilization') or 0, batch, model, precision,
                                rows['device']['steps']))
        longest = max(longest, time.monotonic() - began)

    if args.trace_dir and device_rows:
        busy, batch, model, precision, steps = min(device_rows)
        left = args.deadline - (time.monotonic() - start) if args.deadline else math.inf
        if left > TRACE_RESERVE / 2:
            row = program_row(args, model, precision, 'device', batch, max(4, steps // 4),
                              profile_steps=args.profile_steps)
            try:
                summary = gpu_trace.summarise(gpu_trace.load(row['trace'])) if 'trace' in row else row
            except Exception as err:        # the trace still comes back; read it elsewhere
                summary = {'error': f'{type(err).__name__}: {err}', 'trace': row.get('trace')}
            print(f'\ntrace of the least busy device row ({batch} {model} {precision}, {busy:.0f} % busy), '
                  f'{args.profile_steps} steps: {json.dumps(summary)}')
            record(event='trace', batch=batch, model=model, precision=precision, busy=busy, **summary)
        else:
            print(f'\nno trace: {left:.0f} s of the deadline left')
    print(f'\n{time.monotonic() - start:.0f} s in all')
    if rows_out:
        rows_out.close()


if __name__ == '__main__':
    main()
