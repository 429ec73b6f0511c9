#!/usr/bin/env python3
"""How judging a training job's output grows with its rank count: parse and sanity seconds.

Writes LUMI-G-like outputs (8 ranks per node, srun --label, the facts both training programs
print, ~40 RCCL INFO lines per rank with the aws-ofi-rccl plugin's) at 128, 1,024 and 8,192
ranks: a good run, and one of each kind of failure. For each it prints the seconds to parse
(mlcheck.judging.output), to judge (mlcheck.judging.sanity.problems) and both, the CPU seconds
of both (on a shared machine, steadier than the wall clock), the first problem found, and the
growth of parse and judge from one size to the next as a ratio (linear: ratio ~ rank ratio).

    PYTHONPATH=. .venv/bin/python bench/judging_scale.py [--ranks 128 1024 8192] [--profile]
"""

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mlcheck.contract import format_fact as fact  # noqa: E402
from mlcheck.judging import output, sanity  # noqa: E402
from mlcheck.placement.launch import Layout  # noqa: E402
from tests.conftest import settings_of  # noqa: E402

TASKS_PER_NODE = 8
EPOCHS = 5
NCCL_LINES = 40
CASES = ('good', 'slow-rank', 'slow-node', 'missing-solo', 'crash', 'hang-rendezvous',
         'wrong-binding', 'socket-fallback')


def nccl_lines(rank, node, world, fallback=False):
    """About NCCL_LINES lines in RCCL's INFO format for one rank."""
    pid = 48000 + rank % TASKS_PER_NODE
    head = f'{node}:{pid}:{pid} [{rank % TASKS_PER_NODE}] NCCL INFO'
    lines = [f'{head} Bootstrap : Using hsn0:10.253.{rank // 256}.{rank % 256}<0>',
             f'{head} NCCL version 2.20.5+hip6.2 HEAD:c4ef4d1+',
             f'{head} NET/OFI Using aws-ofi-rccl 1.4.0',
             f'{head} NET/OFI Selected Provider is cxi',
             f'{head} Using network {"Socket" if fallback else "AWS Libfabric"}',
             f'{head} comm 0x7a8c2e0 rank {rank} nranks {world} cudaDev {rank % 8} busId c1000 - Init START']
    for channel in range(NCCL_LINES - len(lines) - 1):
        lines.append(f'{head} Channel {channel:02d}/32 : {rank} {(rank + 1) % world} via P2P/IPC/read')
    lines.append(f'{head} comm 0x7a8c2e0 rank {rank} nranks {world} cudaDev {rank % 8} - Init COMPLETE')
    return lines


def job_output(world, case, masks_cores):
    """(stdout, stderr) of a `world`-rank MNIST job on LUMI-G, broken as `case` says."""
    width = len(str(world - 1))
    out, err = [], []
    slow = {'slow-rank': {world // 2 + 3}, 'slow-node': set(range(16, 24))}.get(case, set())
    for rank in range(world):
        node, local = f'nid{5001 + rank // TASKS_PER_NODE:06d}', rank % TASKS_PER_NODE
        label = f'{rank:>{width}}: '
        lines = [fact('rendezvous', rank=rank, world_size=world, master='nid005001:29500', node=node,
                      timeout=180)]
        if case == 'hang-rendezvous' and rank == world - 1:
            out.append(label + fact('fault', rank=rank, kind='hang-rendezvous', epoch=None))
            continue
        if case == 'hang-rendezvous':   # the others give up waiting for it
            err += [label + 'Traceback (most recent call last):',
                    label + 'torch.distributed.DistStoreError: wait timeout after 180000ms, keys: /0//cpu//0/0']
            out += [label + line for line in lines]
            continue
        cores = masks_cores[local]
        if case == 'wrong-binding' and node == 'nid005002':
            cores = masks_cores[(local + 1) % TASKS_PER_NODE]
        lines.append(fact('rank', rank=rank, world_size=world, local_rank=local, host=node, node=node,
                          affinity=cores, threads=7, device=f'cuda:{0}', device_name='AMD Instinct MI250X',
                          visible_devices=1, backend='nccl', torch='2.6.0+rocm6.2.4',
                          torchvision='0.21.0+rocm6.2.4'))
        lines += nccl_lines(rank, node, world, fallback=case == 'socket-fallback' and rank == 5)
        if not (case == 'missing-solo' and rank == 7):
            speed = 2000.0 * (0.6 if rank in slow else 1 + 0.01 * (rank % 5))
            lines.append(fact('solo', rank=rank, steps=30, samples=1920, seconds=1920 / speed,
                              samples_per_s=speed))
        for epoch in range(1, EPOCHS + 1):
            if case == 'crash' and epoch == 3:
                break
            lines.append(fact('epoch', rank=rank, epoch=epoch, samples=60000 // world, seconds=0.84,
                              loss=0.35 / epoch))
            if rank == 0:
                lines.append(fact('summary', epoch=epoch, samples=60000, seconds=0.84, loss=0.35 / epoch,
                                  samples_per_s=60000 / 0.84, world_size=world))
        if case == 'crash':
            error = ('RuntimeError: injected fault: rank 9 crashed in epoch 3' if rank == 9 else
                     'torch.distributed.DistBackendError: NCCL communicator was aborted')
            err += [label + 'Traceback (most recent call last):', label + '  File "mnist_DDP.py", line 1',
                    label + error]
        else:
            if rank == 0:
                lines.append(fact('result', test_accuracy=0.989, test_samples=10000, train_seconds=6.27,
                                  epochs=EPOCHS, world_size=world, samples_per_s=71428.0,
                                  samples_per_s_per_device=71428.0 / world))
            lines.append(fact('done', rank=rank))
        out += [label + line for line in lines]
    if case == 'crash':
        err.append(f'srun: error: nid{5001 + 9 // TASKS_PER_NODE:06d}: task 9: Exited with exit code 1')
    return '\n'.join(out) + '\n', '\n'.join(err) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--ranks', type=int, nargs='+', default=[128, 1024, 8192])
    parser.add_argument('--cases', nargs='+', choices=CASES, default=list(CASES))
    parser.add_argument('--profile', action='store_true',
                        help='profile parsing and judging at the largest size')
    args = parser.parse_args(argv)

    lumi = settings_of('lumi', 'lumi:standard-g')
    from mlcheck.placement.topology import mask_to_cores
    print(f'{"case":<16} {"ranks":>6} {"lines":>8} {"parse s":>8} {"judge s":>8} {"total s":>8} {"cpu s":>6} {"parse x":>8} '
          f'{"judge x":>8}  first problem')
    for case in args.cases:
        previous = None     # (parse s, judge s) at the size before
        for world in args.ranks:
            layout = Layout.for_nodes(lumi.topology, world // TASKS_PER_NODE)
            masks = [mask_to_cores(m) for m in layout.masks]
            stdout, stderr = job_output(world, case, masks)
            expect = sanity.Expectations.for_run(lumi, layout, min_accuracy=0.9, epochs=EPOCHS,
                                                 slow_rank_fraction=0.8)
            run = found = None      # the last size's output is freed here, not in the timing
            start, cpu_start = time.perf_counter(), time.process_time()
            run = output.parse(stdout, stderr=stderr)
            parsed = time.perf_counter()
            found = sanity.problems(run, expect)
            judged, cpu = time.perf_counter(), time.process_time() - cpu_start
            seconds = (parsed - start, judged - parsed)
            growth = (' '.join(f'{now / before:8.1f}' for now, before in zip(seconds, previous))
                      if previous else f'{"":17}')
            previous = seconds
            first = (found[0] if found else 'sane')[:90]
            print(f'{case:<16} {world:>6} {stdout.count(chr(10)):>8} {seconds[0]:8.2f} '
                  f'{seconds[1]:8.2f} {sum(seconds):8.2f} {cpu:6.2f} {growth}  {first}', flush=True)
            if args.profile and world == max(args.ranks):
                profiler = cProfile.Profile()
                run = profiler.runcall(output.parse, stdout, stderr=stderr)
                profiler.runcall(sanity.problems, run, expect)
                pstats.Stats(profiler).sort_stats('tottime').print_stats(12)


if __name__ == '__main__':
    main()
