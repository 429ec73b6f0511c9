#!/usr/bin/env python3
"""Collective bandwidth and latency of torch.distributed, with every received value checked.

Runs one process per GPU (or per CPU slot) under srun, or alone (`python collectives.py`: one
rank, the GPU and NCCL/RCCL when torch sees one, else gloo). Rank layout, rendezvous, bounded
waits and --fault as in ../ddp_common.py. Three phases:

  all_reduce   sum over a sweep of message sizes (--min-bytes .. --max-bytes, x --factor)
  all_gather   the same sweep (the size is the gathered buffer, as nccl-tests count it)
  p2p          the nodes in rounds of disjoint pairs, each round new partners (a round-robin
               schedule, until each node met --pair-partners: two nodes make one pair, four
               every pair in three rounds); the pairs of a round exchange at once, so a
               sweep's time grows with its rounds, not its nodes. In each pair every rank of
               one node (or its first --pair-ranks) exchanges with the rank of the same local
               id on the other, both ways; a pair's time is its own slowest rank's

Timing: untimed warm-up iterations first (the first of them is checked, see below), then
--blocks timed blocks: before each, the device is synchronised and all ranks meet at a barrier;
the clock stops after the device is synchronised again. A block's time is the slowest rank's
mean per iteration; a size's time is the median block.
Bandwidths follow nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time, busbw = algbw x
BUS_FACTOR, comparable across collectives and rank counts with the hardware's link bandwidth.

Checked values: every rank fills its buffer with a pattern that depends on its rank and on the
element index, and compares what it received with what the collective must produce, element by
element (nccl-tests' "#wrong" column). Wrong values are reported, not raised, so that every
rank, size and collective is judged. The pattern's values are whole numbers 1..PATTERN_PERIOD, so
a sum over n ranks never exceeds n * PATTERN_PERIOD: every partial sum, in whatever order the
library adds the ranks' buffers, is a whole number float32 holds exactly while that is at most
2**24 (MAX_WORLD_SIZE ranks; a larger world is refused at the start).

Facts, each one line `MLCHECK {json}`:
  rendezvous, rank  each rank (../ddp_common.py)
  settings  rank 0: the value of each knob it runs (../program_knobs.py INTERCONNECT)
  size      rank 0, per collective and size: bytes, iterations, seconds, algbw, busbw (GB/s)
  pair      rank 0, per node pair: both nodes, its round, GB/s each way over the pair's ranks
  values    each rank: how many buffers of the collectives it checked (the same on every
            rank), how many of the node pairs (those its node and local id took part in), and
            the wrong values it found (op, bytes, index, got, expected), at most a few per buffer
  result    rank 0: busbw at the largest all_reduce size, small-message latency (us), the
            slowest pair
  done      each rank, last
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ddp_common import add_wait_arguments, emit, finish, init_distributed, synchronize  # noqa: E402
from program_knobs import INTERCONNECT, add_arguments, stated  # noqa: E402

# nccl-tests' bus bandwidth factors (doc/PERFORMANCE.md) for n ranks: how much of the message
# each rank's busiest link carries, so that busbw can be compared with the link's speed
BUS_FACTOR = {
    'all_reduce': lambda n: 2 * (n - 1) / n,
    'all_gather': lambda n: (n - 1) / n,
    'reduce_scatter': lambda n: (n - 1) / n,
    'p2p': lambda n: 1.0,
}
ELEMENT = torch.float32
ELEMENT_BYTES = 4
# element i of rank r holds 1 + (i + r) % PATTERN_PERIOD; a prime period, so that ranks and
# elements rarely share a value, small enough that the sums of MAX_WORLD_SIZE ranks stay exact
PATTERN_PERIOD = 127
EXACT_FLOAT32_INTEGERS = 2 ** 24    # every whole number up to it is a float32
MAX_WORLD_SIZE = EXACT_FLOAT32_INTEGERS // PATTERN_PERIOD    # 132104 ranks
MAX_REPORTED_WRONG = 3
# torch 2.14 renamed all_gather_into_tensor (same arguments); older images have only the old name
ALL_GATHER = getattr(dist, 'all_gather_single', None) or dist.all_gather_into_tensor


def algbw(nbytes, seconds):
    """Algorithm bandwidth in GB/s (1e9 bytes) of a message of `nbytes` taking `seconds`."""
    return nbytes / seconds / 1e9


def busbw(op, nbytes, seconds, world_size):
    return algbw(nbytes, seconds) * BUS_FACTOR[op](world_size)


def size_sweep(min_bytes, max_bytes, factor):
    """Message sizes from min_bytes to max_bytes (included), multiplied by `factor`, in whole
    elements of 4 bytes."""
    if not 0 < min_bytes <= max_bytes or factor < 2:
        raise ValueError(f'sizes {min_bytes}..{max_bytes} x {factor}: need 0 < min <= max, factor >= 2')
    sizes, size = [], min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= factor
    sizes.append(max_bytes)
    return sorted({whole_elements(s) for s in sizes})


def whole_elements(nbytes):
    """`nbytes` rounded down to whole elements, and at least one: the message sent."""
    return max(ELEMENT_BYTES, nbytes // ELEMENT_BYTES * ELEMENT_BYTES)


def sweep_with_latency(min_bytes, latency_bytes, max_bytes, factor):
    """The sweep's sizes, and the size whose all_reduce time is the latency, both in whole
    elements (an empty message would time no transfer)."""
    latency = whole_elements(latency_bytes)
    return sorted({*size_sweep(min(min_bytes, latency), max_bytes, factor), latency}), latency


def iterations(nbytes, budget_bytes, min_iters, max_iters):
    """Timed iterations for a size: about `budget_bytes` in all, within [min_iters, max_iters]."""
    return max(min_iters, min(max_iters, budget_bytes // max(nbytes, 1)))


def pattern(count, rank, device):
    """The values rank `rank` sends: 1 + (i + rank) % PATTERN_PERIOD for element i."""
    index = torch.arange(count, dtype=torch.int64, device=device)
    return (1 + (index + rank) % PATTERN_PERIOD).to(ELEMENT)


def all_reduce_expected(count, world_size, device):
    """The sum of every rank's pattern, counted in whole numbers: element i gets
    1 + (i + r) % PATTERN_PERIOD from every rank r, and ranks with equal r % PATTERN_PERIOD
    send the same values."""
    residue = torch.arange(PATTERN_PERIOD, dtype=torch.int64)
    full, rest = divmod(world_size, PATTERN_PERIOD)
    ranks_with_residue = full + (residue < rest).to(torch.int64)
    values = 1 + (residue[:, None] + residue[None, :]) % PATTERN_PERIOD     # [i % P, r % P]
    sums = (values * ranks_with_residue[None, :]).sum(dim=1)
    index = torch.arange(count, dtype=torch.int64) % PATTERN_PERIOD
    return sums[index].to(ELEMENT).to(device)


def unverifiable_world(world_size):
    """Why the values of `world_size` ranks cannot be checked exactly, or None."""
    if world_size > MAX_WORLD_SIZE:
        return (f'{world_size} ranks: the all_reduce values can be checked exactly in float32 for '
                f'at most {MAX_WORLD_SIZE} ranks')
    return None


def all_gather_expected(count, world_size, device):
    per_rank = count // world_size
    return torch.cat([pattern(per_rank, r, device) for r in range(world_size)])


def wrong_values(op, nbytes, got, expected):
    """Up to MAX_REPORTED_WRONG mismatches, and how many there were, as dicts for the facts."""
    bad = (got != expected).nonzero().flatten()
    return [{'op': op, 'bytes': nbytes, 'wrong': int(bad.numel()), 'index': int(i),
             'got': got[i].item(), 'expected': expected[i].item()}
            for i in bad[:MAX_REPORTED_WRONG].tolist()]


def block_times(run, iters, warmup, device, blocks=1, slowdown=0.0):
    """This rank's seconds per call of `run()` in each of `blocks` blocks of `iters` calls, after
    `warmup` untimed calls. Each block's clock starts when the device is idle and all ranks are
    at the barrier; all ranks must call it. With `slowdown` F, rank 0 idles at the end of each
    block until the block has lasted 1/(1-F) times as long: a known loss."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(blocks):
        synchronize(device)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            run()
        synchronize(device)
        if slowdown and dist.get_rank() == 0:
            time.sleep((time.perf_counter() - start) * slowdown / (1 - slowdown))
        times.append((time.perf_counter() - start) / iters)
    return times


def timed(run, iters, warmup, device, blocks=1, slowdown=0.0):
    """Seconds per call of `run()`: the median over the blocks (block_times) of the slowest
    rank's mean. The median keeps a burst of other work on a shared node from moving the
    figure; all ranks must call it."""
    times = every_rank(block_times(run, iters, warmup, device, blocks, slowdown), device)
    return statistics.median(max(block) for block in zip(*times))


def every_rank(values, device):
    """Every rank's list of `values` (floats, as many on every rank), in rank order; all ranks
    must call it."""
    mine = torch.tensor(values, dtype=torch.float64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    return [t.tolist() for t in gathered]


def pair_rounds(names, partners):
    """Rounds of disjoint pairs of `names`, each node with a new partner in each round (the
    circle method of a round-robin schedule: one node stays, the others turn), until every node
    met `partners` others (or all of them). With an odd count one node sits each round out, once
    in len(names) rounds, so that count takes one round more. A node slow with each of its 3
    partners is the node; a pair slow with each of its nodes fine elsewhere is their link."""
    if len(names) < 2:
        return []
    order = list(names) + ([None] if len(names) % 2 else [])
    schedule = []
    for _ in range(min(partners + len(names) % 2, len(order) - 1)):
        half = len(order) // 2
        schedule.append([tuple(sorted((a, b), key=names.index))
                         for a, b in zip(order[:half], reversed(order[half:]))
                         if a is not None and b is not None])
        order = [order[0], order[-1], *order[1:-1]]
    return schedule


class Sweep:
    """One rank's share of the measurements: what it checked and what rank 0 reports."""

    def __init__(self, args, rank, world_size, device):
        self.args, self.rank, self.world_size, self.device = args, rank, world_size, device
        self.checked, self.pairs_checked, self.wrong, self.sizes = 0, 0, [], []

    def check(self, op, nbytes, got, expected):
        self.checked += 1
        self.wrong += wrong_values(op, nbytes, got, expected)   # compared on the device

    def measure(self, op, nbytes, run):
        args = self.args
        iters = iterations(nbytes, args.bytes_per_size, args.min_iters, args.max_iters)
        seconds = timed(run, iters, args.warmup_iters, self.device, args.blocks, args.slowdown)
        figures = {'op': op, 'bytes': nbytes, 'iters': iters, 'seconds': seconds,
                   'algbw': algbw(nbytes, seconds),
                   'busbw': busbw(op, nbytes, seconds, self.world_size)}
        self.sizes.append(figures)
        if self.rank == 0:
            emit('size', world_size=self.world_size, **figures)

    def all_reduce(self, nbytes):
        count = nbytes // ELEMENT_BYTES
        buffer = pattern(count, self.rank, self.device)
        dist.all_reduce(buffer)      # checked, and the first warm-up call
        self.check('all_reduce', nbytes, buffer,
                   all_reduce_expected(count, self.world_size, self.device))
        # timed calls reduce the same buffer again: the values no longer matter, only the bytes
        self.measure('all_reduce', nbytes, lambda: dist.all_reduce(buffer))

    def all_gather(self, nbytes):
        count = max(1, nbytes // ELEMENT_BYTES // self.world_size) * self.world_size
        nbytes = count * ELEMENT_BYTES
        mine = pattern(count // self.world_size, self.rank, self.device)
        gathered = torch.empty(mine.numel() * self.world_size, dtype=ELEMENT, device=self.device)
        ALL_GATHER(gathered, mine)
        self.check('all_gather', nbytes, gathered,
                   all_gather_expected(count, self.world_size, self.device))
        self.measure('all_gather', nbytes, lambda: ALL_GATHER(gathered, mine))

    def pairs(self, nodes):
        """The node pairs in rounds (pair_rounds), the pairs of a round at once; rank 0 emits a
        'pair' fact per pair. `nodes`: every rank's node, in rank order."""
        names = list(dict.fromkeys(nodes))
        local = [nodes[:r].count(nodes[r]) for r in range(len(nodes))]   # local id of each rank
        taking_part = self.args.pair_ranks or max(local, default=0) + 1
        count = self.args.p2p_bytes // ELEMENT_BYTES
        nbytes = count * ELEMENT_BYTES
        iters = iterations(nbytes, self.args.bytes_per_size, self.args.min_iters, self.args.max_iters)
        send = pattern(count, self.rank, self.device)
        recv = torch.empty_like(send)
        results = []
        for round_no, pairs in enumerate(pair_rounds(names, self.args.pair_partners), start=1):
            partner_node = {a: b for pair in pairs for a, b in (pair, pair[::-1])}
            other = partner_node.get(nodes[self.rank])
            partner = next((r for r in range(len(nodes)) if nodes[r] == other
                            and local[r] == local[self.rank] < taking_part), None)

            def exchange():
                if partner is not None:
                    for request in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, partner),
                                                           dist.P2POp(dist.irecv, recv, partner)]):
                        request.wait()

            exchange()
            if partner is not None:
                a, b = sorted((nodes[self.rank], other), key=names.index)
                self.pairs_checked += 1
                self.wrong += wrong_values(f'p2p {a}<->{b}', nbytes, recv,
                                           pattern(count, partner, self.device))
            times = every_rank(block_times(exchange, iters, self.args.warmup_iters, self.device,
                                           self.args.blocks, self.args.slowdown), self.device)
            for a, b in pairs:
                per_node = min(taking_part, nodes.count(a), nodes.count(b))
                ranks = [r for r in range(len(nodes)) if nodes[r] in (a, b) and local[r] < per_node]
                seconds = statistics.median(max(times[r][i] for r in ranks)
                                            for i in range(self.args.blocks))
                pair = {'nodes': [a, b], 'round': round_no, 'bytes': nbytes, 'ranks': per_node,
                        'iters': iters, 'seconds': seconds}
                # each direction: every rank pair of the node pair moved nbytes in `seconds`
                pair['GBps'] = algbw(nbytes * pair['ranks'], seconds)
                results.append(pair)
                if self.rank == 0:
                    emit('pair', **pair)
        return results


def get_args_parser():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--device', choices=['auto', 'gpu', 'cpu'], default='auto',
                        help='auto: a GPU where torch sees one, else the CPU')
    # the knobs of the check, with its defaults (../program_knobs.py); a `settings` fact states them
    add_arguments(parser, INTERCONNECT)
    parser.add_argument('--latency-bytes', type=int, default=INTERCONNECT['min_bytes'].default,
                        help='the small message whose all_reduce time is the latency (whole '
                             'elements of 4 bytes, at least one: the result says the size timed)')
    parser.add_argument('--bytes-per-size', type=int, default=None,
                        help='timed bytes per size (default: 8 x --max-bytes); sets the iterations')
    parser.add_argument('--min-iters', type=int, default=5,
                        help='timed iterations per size at least, however large the message')
    return add_wait_arguments(parser)


def main(argv=None):
    args = get_args_parser().parse_args(argv)
    rank, world_size, device = init_distributed(args)
    if unverifiable_world(world_size):
        sys.exit(f'collectives.py: error: {unverifiable_world(world_size)}')
    if rank == 0:
        emit('settings', **stated(args, INTERCONNECT))
    args.bytes_per_size = args.bytes_per_size or 8 * args.max_bytes
    try:
        sizes, args.latency_bytes = sweep_with_latency(args.min_bytes, args.latency_bytes,
                                                       args.max_bytes, args.factor)
    except ValueError as err:
        sys.exit(f'collectives.py: error: {err}')

    nodes = [None] * world_size
    dist.all_gather_object(nodes, os.environ.get('SLURMD_NODENAME', os.uname().nodename))

    sweep = Sweep(args, rank, world_size, device)
    # --fault's EPOCH is the phase here: 1 all_reduce, 2 all_gather, 3 the node pairs
    for phase, op in enumerate((sweep.all_reduce, sweep.all_gather), start=1):
        if args.fault:
            args.fault.at_epoch(rank, phase)
        for nbytes in sizes:
            op(nbytes)
    if args.fault:
        args.fault.at_epoch(rank, 3)
    pairs = sweep.pairs(nodes)

    emit('values', rank=rank, node=nodes[rank], checked=sweep.checked,
         pairs_checked=sweep.pairs_checked, wrong=sweep.wrong)
    if rank == 0:
        reduce_sizes = [s for s in sweep.sizes if s['op'] == 'all_reduce']
        largest = reduce_sizes[-1]
        latency = next(s for s in reduce_sizes if s['bytes'] == args.latency_bytes)
        result = {'world_size': world_size, 'nodes': len(set(nodes)),
                  'largest_bytes': largest['bytes'], 'busbw': largest['busbw'],
                  'algbw': largest['algbw'], 'latency_bytes': latency['bytes'],
                  'latency_us': latency['seconds'] * 1e6, 'slowdown': args.slowdown,
                  'checked_per_rank': sweep.checked}
        if pairs:
            worst = min(pairs, key=lambda p: p['GBps'])
            result.update(slowest_pair=worst['nodes'], slowest_pair_GBps=worst['GBps'])
        emit('result', **result)
    finish(rank, distributed=True)


if __name__ == '__main__':
    main()
