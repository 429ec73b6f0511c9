"""The training programs' epochs: how many steps each has, each rank's share of the data, and
the figures of an epoch and of the steady state. Imported as ddp_common is (this directory is
on the programs' sys.path): standard library and torch only.
"""

import itertools
import sys

import torch
import torch.distributed as dist

from program_knobs import STEPS, add_arguments


def epoch_summary(figures, epoch, world_size, device, distributed=True):
    """One epoch over all ranks: their samples and mean loss, in the slowest rank's seconds
    (the epoch lasts as long as its slowest rank). `figures` are this rank's: samples,
    seconds, mean loss and whatever else it counted. Every rank must call it."""
    summary = {**figures, 'epoch': epoch, 'world_size': world_size}
    if distributed:
        totals = torch.tensor([figures['samples'], figures['loss'] * figures['samples']],
                              dtype=torch.float64, device=device)
        slowest = torch.tensor([figures['seconds']], dtype=torch.float64, device=device)
        dist.all_reduce(totals)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        summary.update(samples=int(totals[0].item()), seconds=slowest.item(),
                       loss=totals[1].item() / max(totals[0].item(), 1))
    summary['samples_per_s'] = summary['samples'] / summary['seconds'] if summary['seconds'] else 0.0
    return summary


def steady_state(summaries, devices):
    """Throughput over the epochs after the first (warm-up: allocation, kernel caches), or over
    the first if it is the only one: samples/s in total and per device, and seconds per step
    where the epochs counted their steps."""
    steady = [s for epoch, s in enumerate(summaries, 1) if timed_epoch(epoch, len(summaries))]
    seconds = sum(s['seconds'] for s in steady)
    samples_per_s = sum(s['samples'] for s in steady) / seconds if seconds > 0 else 0.0
    figures = {'samples_per_s': samples_per_s, 'samples_per_s_per_device': samples_per_s / devices}
    steps = sum(s.get('steps', 0) for s in steady)
    if steps:
        figures['step_time'] = seconds / steps
    return figures


def timed_epoch(epoch, epochs):
    """Whether `epoch` (from 1) counts in the steady-state throughput (steady_state): every epoch
    after the first, or the first if it is the only one."""
    return epoch > 1 or epochs == 1


def steps_per_epoch(steps, dataset_size, batch, ranks_per_node):
    """Steps of each epoch, the same at every node count: `steps`, or if 0 the steps that one
    pass over the data takes on one node (`ranks_per_node` ranks of `batch` samples each). More
    nodes then give each rank the same work (more passes over the data), not less."""
    steps = steps or dataset_size // (batch * ranks_per_node)
    if steps < 1:
        sys.exit(f'{dataset_size} samples make no step of {batch} on each of {ranks_per_node} '
                 f'ranks per node: give --steps')
    return steps


class RankShare(torch.utils.data.Sampler):
    """This rank's share of each pass over `size` samples, and never less than `batch`.

    As torch's DistributedSampler (drop_last=False), and with the same indices where the share
    holds a batch: a pass shuffled by seed + pass, padded from its start to equal shares, every
    world_size-th index from `rank`. Where the shares are smaller than one batch (many nodes:
    CIFAR-100's 50,000 images at 128 per GCD from 50 LUMI nodes), the pass cycles through the
    data until each rank has a full batch, so that a loader dropping short batches still yields
    one: a rank's share then holds samples twice, and the other ranks' too."""

    def __init__(self, size, world_size, rank, batch, seed=0, shuffle=True):
        if size < 1:
            sys.exit('the training set is empty: no batch to train on')
        self.size, self.world_size, self.rank, self.seed, self.shuffle = size, world_size, rank, seed, shuffle
        self.per_rank = max(-(-size // world_size), batch)
        self.data_pass = 0

    def set_epoch(self, data_pass):
        self.data_pass = data_pass

    def __len__(self):
        return self.per_rank

    def __iter__(self):
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.data_pass)
            order = torch.randperm(self.size, generator=generator)
        else:
            order = torch.arange(self.size)
        total = self.per_rank * self.world_size
        cycled = order.repeat(-(-total // self.size))[:total]
        return iter(cycled[self.rank::self.world_size].tolist())


def endless_batches(loader, sampler=None):
    """The loader's batches without end: a new pass, shuffled anew, when one runs out. A
    loader that yields nothing ends the program in one line (it would spin forever)."""
    for data_pass in itertools.count():
        if hasattr(sampler, 'set_epoch'):
            sampler.set_epoch(data_pass)
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            sys.exit(f'rank {dist.get_rank() if dist.is_initialized() else 0}: a pass over the '
                     f'data gave no batch of {loader.batch_size}')


def add_epoch_arguments(parser):
    """--steps (unless the program's knobs gave it) and --ranks-per-node: how many steps an epoch
    has (see steps_per_epoch)."""
    if parser.get_default('steps') is None:
        add_arguments(parser, {'steps': STEPS})
    parser.add_argument('--ranks-per-node', type=int, default=1,
                        help='ranks that share one pass over the data when --steps is 0')
    return parser
