#!/usr/bin/env python3
"""What the GPU waits on, from a torch.profiler Chrome trace (the training programs'
--profile-steps, -S profile_steps): per profiled step, how long the GPU ran kernels and how long
it sat idle between them, and where the host spent the step.

    python bench/gpu_trace.py TRACE.json.gz [--top 8]

Prints one JSON object: the steps (host-side ProfilerStep#N spans), the GPU's window (first kernel
to last kernel of the profiled steps), its busy share (the union of kernel, copy and set
intervals over the window), kernels per step, the median kernel and the median idle gap between
kernels, the largest gaps, the kernels that took most time, the host's CUDA runtime calls by total
time (cudaLaunchKernel at hundreds per step says the host launches tiny kernels one by one; a long
cudaStreamSynchronize says it waits for the GPU), and the host's outermost operators per step, per
thread (autograd's backward runs on a thread of its own). Standard library only.
"""

import argparse
import collections
import gzip
import json
import statistics
import sys

GPU_CATEGORIES = ('kernel', 'gpu_memcpy', 'gpu_memset')


def load(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as stream:
        return json.load(stream)['traceEvents']


def union_length(intervals):
    """Total length covered by (start, end) intervals."""
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def summarise(events, top=8):
    """The figures of a trace's events (microseconds in the trace, milliseconds out)."""
    spans = [e for e in events if e.get('ph') == 'X' and 'dur' in e]
    steps = sorted((e for e in spans if e.get('name', '').startswith('ProfilerStep#')
                    and e.get('cat') == 'user_annotation'), key=lambda e: e['ts'])
    if not steps:
        return {'error': 'no ProfilerStep# spans on the host: not a trace of --profile-steps'}
    gpu = sorted((e for e in spans if e.get('cat') in GPU_CATEGORIES), key=lambda e: e['ts'])
    # the GPU work launched from the profiled steps (it runs after its launch, so it may end
    # after the last host-side step does)
    first_launch = steps[0]['ts']
    gpu = [e for e in gpu if e['ts'] >= first_launch]
    if not gpu:
        return {'error': 'no kernels in the trace: was CUDA profiled?', 'steps': len(steps)}
    window_start, window_end = gpu[0]['ts'], max(e['ts'] + e['dur'] for e in gpu)
    window = window_end - window_start
    busy = union_length([(e['ts'], e['ts'] + e['dur']) for e in gpu])
    kernels = [e for e in gpu if e.get('cat') == 'kernel']
    gaps = []
    reach = gpu[0]['ts'] + gpu[0]['dur']
    for e in gpu[1:]:
        if e['ts'] > reach:
            gaps.append(e['ts'] - reach)
        reach = max(reach, e['ts'] + e['dur'])
    by_kernel = collections.Counter()
    for e in kernels:
        by_kernel[e['name'][:90]] += e['dur']
    runtime = collections.Counter()
    runtime_calls = collections.Counter()
    for e in spans:
        if e.get('cat') in ('cuda_runtime', 'cuda_driver') and first_launch <= e['ts'] <= steps[-1]['ts'] + steps[-1]['dur']:
            runtime[e['name']] += e['dur']
            runtime_calls[e['name']] += 1
    step_ms = [e['dur'] / 1e3 for e in steps]
    # the host's outermost operators in the steps, per thread (autograd runs the backward on a
    # thread of its own): where the host spent the time the GPU waited
    host = collections.Counter()
    start, end = steps[0]['ts'], steps[-1]['ts'] + steps[-1]['dur']
    by_thread = collections.defaultdict(list)
    for e in spans:
        if e.get('cat') == 'cpu_op' and start <= e['ts'] <= end:
            by_thread[(e.get('pid'), e.get('tid'))].append(e)
    for ops in by_thread.values():
        reach = None
        for e in sorted(ops, key=lambda e: (e['ts'], -e['dur'])):
            if reach is None or e['ts'] >= reach:
                host[e['name']] += e['dur']
                reach = e['ts'] + e['dur']
    return {
        'steps': len(steps),
        'step_ms': [round(x, 2) for x in step_ms],
        'gpu_window_ms': round(window / 1e3, 2),
        'gpu_busy_ms': round(busy / 1e3, 2),
        'gpu_busy_share': round(busy / window, 4) if window else None,
        'kernels_per_step': round(len(kernels) / len(steps), 1),
        'median_kernel_us': round(statistics.median(e['dur'] for e in kernels), 2) if kernels else None,
        'gaps': len(gaps),
        'median_gap_us': round(statistics.median(gaps), 2) if gaps else None,
        'idle_ms': round((window - busy) / 1e3, 2),
        'largest_gaps_us': [round(g, 1) for g in sorted(gaps, reverse=True)[:5]],
        'top_kernels_ms': {name: round(t / 1e3, 2) for name, t in by_kernel.most_common(top)},
        'runtime_calls_ms': {name: {'ms': round(t / 1e3, 2), 'calls': runtime_calls[name]}
                             for name, t in runtime.most_common(top)},
        'host_ops_ms_per_step': {name: round(t / 1e3 / len(steps), 2) for name, t in host.most_common(top)},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('trace', help='a Chrome trace, .json or .json.gz')
    parser.add_argument('--top', type=int, default=8, help='kernels and runtime calls listed')
    args = parser.parse_args(argv)
    try:
        events = load(args.trace)
    except (OSError, ValueError, KeyError) as err:
        print(f'gpu_trace.py: {args.trace}: not a readable Chrome trace: {err}', file=sys.stderr)
        return 2
    print(json.dumps(summarise(events, args.top)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
