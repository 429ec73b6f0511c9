#!/usr/bin/env python3
"""The interconnect program against its limits, measured side by side on this machine.

  limit    a bare TCP stream over loopback between two processes: the most any byte stream
           between two ranks can move here, the simulated partition's "fabric" (gloo's transport)
  harness  in one world of --ranks gloo ranks (processes on this machine), alternate rounds of
           the program's own timed all_reduce (src/pytorch/comm/collectives.py: Sweep.measure)
           and a bare loop of the same dist.all_reduce on the same buffer; print the bandwidth of
           both and their ratio (target >= 0.97: the harness must not be what is measured)
  sessions a baseline, an unchanged and a --slowdown session of --repeat runs each of the program
           itself (--ranks local gloo ranks, no Slurm), judged by mlcheck.commands.report's rule, for a
           machine where the simulated partition cannot run (no Slurm), e.g. one with more cores

    .venv/bin/python bench/interconnect.py limit
    .venv/bin/python bench/interconnect.py harness --ranks 4 --bytes 4194304 --rounds 5
    .venv/bin/python bench/interconnect.py sessions --ranks 4 --repeat 3 --slowdown 0.2
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src', 'pytorch')
sys.path.insert(0, SRC)
from ddp_common import free_port, load_program  # noqa: E402


def tcp_receiver(port, total, chunk):
    with socket.create_server(('127.0.0.1', port)) as server:
        conn, _ = server.accept()
        with conn:
            buffer, left = bytearray(chunk), total
            view = memoryview(buffer)
            while left:
                left -= conn.recv_into(view, min(chunk, left))
            conn.sendall(b'k')


def limit(args):
    """GB/s of one TCP stream over loopback (send `total` bytes, wait for the receiver's ack)."""
    port, chunk = free_port(), args.chunk
    total = args.total // chunk * chunk
    results = []
    for _ in range(args.rounds):
        receiver = mp.get_context('fork').Process(target=tcp_receiver, args=(port, total, chunk))
        receiver.start()
        for _ in range(600):
            try:
                sock = socket.create_connection(('127.0.0.1', port))
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        else:
            sys.exit('limit: the receiving process did not listen within 60 s')
        data = bytes(chunk)
        with sock:
            start = time.perf_counter()
            for _ in range(total // chunk):
                sock.sendall(data)
            sock.recv(1)
            results.append(total / (time.perf_counter() - start) / 1e9)
        receiver.join()
    print(f'loopback TCP, one stream, {chunk} B writes, {total} B per round: '
          f'{" ".join(f"{r:.2f}" for r in results)} GB/s; median {statistics.median(results):.2f}')


def harness_rank(rank, args, port):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=args.ranks)
    program = load_program('comm/collectives.py')
    device = torch.device('cpu')
    options = SimpleNamespace(slowdown=0.0, bytes_per_size=args.iters * args.bytes, min_iters=args.iters,
                              max_iters=args.iters, warmup_iters=args.warmup, blocks=1)
    sweep = program.Sweep(options, rank, args.ranks, device)
    count = args.bytes // program.ELEMENT_BYTES
    bare, harness = [], []
    for _ in range(args.rounds):
        sweep.sizes.clear()
        sweep.all_reduce(args.bytes)           # the program: checked call, warm-up, timed loop
        harness.append(sweep.sizes[-1]['algbw'])
        buffer = program.pattern(count, rank, device)
        for _ in range(args.warmup):
            dist.all_reduce(buffer)
        dist.barrier()
        start = time.perf_counter()            # the bare loop: same calls, nothing around them
        for _ in range(args.iters):
            dist.all_reduce(buffer)
        seconds = max(t for [t] in program.every_rank([(time.perf_counter() - start) / args.iters], device))
        bare.append(program.algbw(args.bytes, seconds))
    if rank == 0:
        ratios = [h / b for h, b in zip(harness, bare)]
        print(f'{args.ranks} gloo ranks, all_reduce of {args.bytes} B, {args.iters} iterations, '
              f'{args.rounds} rounds (algbw GB/s)')
        print(f'  program: {" ".join(f"{v:.3f}" for v in harness)}')
        print(f'  bare:    {" ".join(f"{v:.3f}" for v in bare)}')
        print(f'  ratio program/bare: median {statistics.median(ratios):.3f} '
              f'(rounds {" ".join(f"{r:.3f}" for r in ratios)})')
    dist.destroy_process_group()


def harness(args):
    mp.spawn(harness_rank, args=(args, free_port()), nprocs=args.ranks)


def program_run(args, slowdown):
    """Rank 0's output of one run of the program by --ranks local processes."""
    port, script = free_port(), os.path.join(SRC, 'comm', 'collectives.py')
    ranks = [subprocess.Popen([sys.executable, '-u', script, '--device', 'cpu',
                               '--max-bytes', str(args.bytes), '--factor', '8',
                               '--slowdown', str(slowdown)],
                              env={**os.environ, 'RANK': str(r), 'WORLD_SIZE': str(args.ranks),
                                   'LOCAL_RANK': str(r), 'MASTER_ADDR': '127.0.0.1',
                                   'MASTER_PORT': str(port), 'OMP_NUM_THREADS': '1'},
                              stdout=subprocess.PIPE, text=True) for r in range(args.ranks)]
    return [rank.communicate()[0] for rank in ranks][0]


def sessions(args):
    sys.path.insert(0, os.path.join(SRC, '..', '..'))
    from mlcheck.judging import output
    from mlcheck.history import compare
    runs = {name: [output.parse(program_run(args, slowdown), labelled=False).result()
                   for _ in range(args.repeat)]
            for name, slowdown in (('baseline', 0.0), ('unchanged', 0.0), ('slowdown', args.slowdown))}
    print(f'{args.ranks} local gloo ranks, {args.repeat} runs per session, all_reduce up to '
          f'{args.bytes} B; rule: {compare.Rule()}')
    for var, unit, key in (('busbw', 'GB/s', 'busbw'), ('latency', 'us', 'latency_us')):
        for name in ('baseline', 'unchanged', 'slowdown'):
            print(f'  {var} {name}: {" ".join(f"{r[key]:.4g}" for r in runs[name])} {unit}')
        for name in ('unchanged', 'slowdown'):
            c = compare.judge(compare.Comparison((var,), unit, 'host', 1,
                                                 [r[key] for r in runs['baseline']],
                                                 [r[key] for r in runs[name]]), compare.Rule())
            print(f'  {var} {name} against baseline: {100 * c.change:+.1f} %, '
                  f'noise {100 * c.noise:.1f} %: {c.verdict}')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = parser.add_subparsers(dest='what', required=True)
    tcp = sub.add_parser('limit')
    tcp.add_argument('--chunk', type=int, default=4 << 20)
    tcp.add_argument('--total', type=int, default=2 << 30)
    tcp.add_argument('--rounds', type=int, default=3)
    loop = sub.add_parser('harness')
    loop.add_argument('--ranks', type=int, default=4)
    loop.add_argument('--bytes', type=int, default=4 << 20)
    loop.add_argument('--iters', type=int, default=20)
    loop.add_argument('--warmup', type=int, default=3)
    loop.add_argument('--rounds', type=int, default=5)
    both = sub.add_parser('sessions')
    both.add_argument('--ranks', type=int, default=4)
    both.add_argument('--bytes', type=int, default=4 << 20)
    both.add_argument('--repeat', type=int, default=3)
    both.add_argument('--slowdown', type=float, default=0.2)
    args = parser.parse_args()
    {'limit': limit, 'harness': harness, 'sessions': sessions}[args.what](args)


if __name__ == '__main__':
    main()
