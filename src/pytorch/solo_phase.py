"""Each rank's speed, by name: before each timed epoch, SoloPhase times every rank alone (a `solo`
fact each, after the last), so that a slow GPU or node shows by name; --throttle F
--throttle-rank R slows rank R on purpose in both phases, to test that it is named (see
docs/per-rank.md). Imported as ddp_common is: standard library and torch only.
"""

import argparse
import copy
import time

import torch
import torch.distributed as dist

from ddp_common import emit, synchronize
from epochs import endless_batches, timed_epoch


def add_rank_speed_arguments(parser, solo_warmup_steps):
    """--solo-warmup-steps of the solo phase (its --solo-steps is a knob of the program's table,
    ../program_knobs.py), --throttle and --throttle-rank."""
    parser.add_argument('--solo-warmup-steps', type=int, default=solo_warmup_steps,
                        help='untimed steps before the first of them')
    parser.add_argument('--throttle', type=throttle_fraction, default=0.0,
                        help='fraction of throughput to give up on purpose, 0 <= F < 1: the throttled '
                             'rank idles after every step for F/(1-F) of the time its step took')
    parser.add_argument('--throttle-rank', type=int, default=0, help='the rank --throttle slows')
    return parser


def throttle_fraction(text):
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f'{text}: must be at least 0 and less than 1')
    return value


class Throttle:
    """A rank made slower on purpose, as by a slower GPU: each of its steps lasts 1/(1-F) times
    as long. Only one rank idles: a rank that waited for an idling partner would count that wait
    as its own step and idle longer in turn, so with all ranks idling the delays feed each other."""

    def __init__(self, args, rank):
        fraction = args.throttle if rank == args.throttle_rank else 0.0
        self.idle_per_busy = fraction / (1 - fraction)

    def after_step(self, started, device):
        """Idle in proportion to the step begun at perf_counter() time `started`."""
        if self.idle_per_busy:
            synchronize(device)     # the step's kernels count too, not only their launch
            time.sleep((time.perf_counter() - started) * self.idle_per_busy)


class SoloPhase:
    """Each rank's throughput training alone, measured beside the distributed phase it is compared
    with. A copy of `model` (before DDP wraps it) trains with no communication: right before each
    timed epoch, begun by all ranks at once (a barrier before the clock starts), its share of
    --solo-steps (spread evenly over the timed epochs, so a short run times as many as a long one),
    the first time after --solo-warmup-steps untimed ones. So the solo steps are the epochs' steps,
    on the same data path, warm-up excluded as the first epoch is, and timed in the same minutes
    under the same load: timed as one block before the distributed phase, they ran under a
    different load than the epochs they were compared with (docs/per-rank.md). They read their own
    stream of batches (private_batches) and run with the random state forked, so the distributed
    model sees the batches and random numbers it would see without them: what it learns is the
    same. After the last timed epoch's steps it emits this rank's `solo` fact.
    `train_step(model, optimizer, batch)` returns the batch's sample count; `make_optimizer(model)`
    a fresh optimizer."""

    def __init__(self, model, make_optimizer, train_step, device, rank, args, distributed=True):
        self.enabled = args.solo_steps > 0
        if not self.enabled:
            return
        self.model = copy.deepcopy(model)
        self.optimizer = make_optimizer(self.model)
        self.train_step, self.device, self.rank, self.args = train_step, device, rank, args
        self.distributed = distributed
        self.throttle = Throttle(args, rank)
        self.warm = False
        self.steps, self.samples, self.seconds = 0, 0, 0.0
        self.step_rates = []     # samples/s of each timed step, for the rank's median step

    def before_epoch(self, epoch, epochs, batches):
        """Train alone on `batches` (the solo phase's own stream) before `epoch` of `epochs` if it
        is timed; every rank must call it."""
        if not self.enabled or not timed_epoch(epoch, epochs):
            return
        timed_epochs = sum(timed_epoch(e, epochs) for e in range(1, epochs + 1))
        devices = [self.device] if self.device.type == 'cuda' else []
        with torch.random.fork_rng(devices=devices):
            self._train_alone(batches, -(-self.args.solo_steps // timed_epochs))
        if epoch == epochs:
            emit('solo', rank=self.rank, steps=self.steps, samples=self.samples, seconds=self.seconds,
                 samples_per_s=self.samples / self.seconds if self.seconds > 0 else 0.0,
                 step_samples_per_s=[float(f'{rate:.4g}') for rate in self.step_rates])

    def _train_alone(self, batches, count):
        if not self.warm:
            for _ in range(self.args.solo_warmup_steps):
                self.train_step(self.model, self.optimizer, next(batches))
            self.warm = True
        synchronize(self.device)
        if self.distributed:
            dist.barrier()
        start = time.perf_counter()
        for _ in range(count):
            batch = next(batches)
            step_start = time.perf_counter()
            samples = self.train_step(self.model, self.optimizer, batch)
            self.throttle.after_step(step_start, self.device)
            synchronize(self.device)    # the step's own time: its kernels, not only their launch
            seconds = time.perf_counter() - step_start
            self.samples += samples
            self.step_rates.append(samples / seconds if seconds > 0 else 0.0)
        synchronize(self.device)
        self.seconds += time.perf_counter() - start
        self.steps += count


def private_batches(loader):
    """An endless stream of batches on `loader`'s data path (dataset, batch size, transforms,
    workers) with a copy of its sampler: reading it leaves `loader`'s own order untouched."""
    sampler = copy.copy(loader.sampler)
    return endless_batches(torch.utils.data.DataLoader(
        loader.dataset, batch_size=loader.batch_size, sampler=sampler, drop_last=loader.drop_last,
        num_workers=loader.num_workers, pin_memory=loader.pin_memory), sampler)
