#!/usr/bin/env python3
"""CIFAR-100 ResNet training benchmark: images/s of a torchvision ResNet, measured honestly.

Modes, as in the LUMI AI course: `ddp` (one process per device under srun, the default),
`single` (one process, one device) and `dp` (one process, DataParallel over the visible GPUs).
The data is read by torchvision's CIFAR100 reader from --data-dir (the directory holding
cifar-100-python/), or made in memory with --synthetic for a pure compute measurement. Two data
paths (cifar_data.py): --data loader augments in a DataLoader's worker processes, --data device
keeps the decoded set on the device and augments there, so the GPU, not the loader, sets the pace.
Either way the loader is also timed alone, no model, for --loader-steps batches before training
(a `loader` fact per rank): a slower filesystem or fewer cores show there.

Timing: --warmup-steps untimed steps come before epoch 1 and belong to no epoch; every epoch then
times the same number of steps per rank, whatever the number of ranks: --steps, or by default
the steps that one pass over the data takes on one node (--ranks-per-node ranks). A rank whose
share of the data runs out starts another pass (a new shuffle), so adding nodes never shrinks
the timed work; a share smaller than one batch (many nodes) cycles through the data to make one
(../epochs.py RankShare). The device is synchronised before every clock read; the first epoch is reported
apart from the steady state (epochs 2 and later), since it pays for allocator growth, kernel
selection and caches.

Facts, one `MLCHECK {json}` line each (see ../ddp_common.py): `rendezvous` and `rank` per rank
(arriving at, and having joined, the process group); `settings` from rank 0 (the value of each
knob it runs, ../program_knobs.py CIFAR100); `solo` per rank (its images/s training
alone, beside the timed epochs, see ../solo_phase.py SoloPhase); `loader` per rank (the loader
alone); `epoch` per rank and epoch; `summary` per epoch from rank 0 (all ranks' samples, the
slowest rank's seconds); `result` from rank 0 (steady-state and first-epoch samples/s, per
device, step time, model FLOPs per sample and achieved FLOP/s); `done` per rank.
"""

import argparse
import copy
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torchvision.models import resnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]     # cifar_data beside it; ddp_common one up
from ddp_common import (add_wait_arguments, emit, finish, init_distributed, pick_device,  # noqa: E402
                        report_rank, synchronize)
from epochs import (RankShare, add_epoch_arguments, endless_batches, epoch_summary,  # noqa: E402
                    steady_state, steps_per_epoch)
from solo_phase import SoloPhase, Throttle, add_rank_speed_arguments, private_batches  # noqa: E402
import speed_workload  # noqa: E402
import telemetry  # noqa: E402
from cifar_data import (NUM_CLASSES, DeviceImages, private_stream,  # noqa: E402
                        time_loader, training_set)
from program_knobs import CIFAR100, add_arguments, stated  # noqa: E402

MODELS = CIFAR100['model'].choices


def get_args_parser():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data-dir', help='directory holding cifar-100-python/ (not with --synthetic)')
    parser.add_argument('--synthetic', action='store_true', help='random in-memory images: compute only')
    # the knobs of the check, with its defaults (../program_knobs.py); a `settings` fact states them
    add_arguments(parser, CIFAR100)
    parser.add_argument('--loader-steps', type=int, default=20,
                        help='batches of the loader timed alone before training (0: not timed)')
    parser.add_argument('--speed-seconds', type=float, default=0,
                        help='seconds of the fixed speed workload (../speed_workload.py) each rank '
                             'runs right after timing its loader, a `speed` fact (0: none)')
    # 0.05 diverged from scratch (ResNet-152 at batch 128 on an H100, ResNet-18 at batch 16 on the
    # simulated partition: the loss rose over 3 epochs); 0.01 fell in every run (docs/cifar-benchmark.md)
    parser.add_argument('--lr', type=float, default=0.01, help='SGD learning rate')
    parser.add_argument('--seed', type=int, default=1, help='seed of the model, the shuffle and the augmentation')
    parser.add_argument('--device', choices=['auto', 'gpu', 'cpu'], default='auto',
                        help='auto: a GPU where torch sees one, else the CPU')
    add_rank_speed_arguments(parser, solo_warmup_steps=2)
    telemetry.add_arguments(parser)
    return add_epoch_arguments(add_wait_arguments(parser))


def flops_per_sample(model, batch, criterion, autocast):
    """Model FLOPs of one forward and backward pass per sample, counted by torch."""
    from torch.utils.flop_counter import FlopCounterMode
    images, labels = batch
    probe = copy.deepcopy(model)
    with FlopCounterMode(display=False) as counter:
        with autocast():
            loss = criterion(probe(images), labels)
        loss.backward()
    return counter.get_total_flops() / len(labels)


def train_step(model, optimizer, criterion, images, labels, device, args, autocast):
    """One optimizer step; returns the loss, on the device."""
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    images = images.to(device, non_blocking=True).contiguous(memory_format=memory_format)
    labels = labels.to(device, non_blocking=True)
    optimizer.zero_grad(set_to_none=True)
    with autocast():
        loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss


def train_steps(model, stream, count, optimizer, criterion, device, args, autocast, throttle=None):
    """Train `count` steps from `stream`, timed from the first; a Throttle of this rank may slow
    them on purpose. Returns their figures."""
    model.train()
    samples = 0
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)   # on the device: no sync per step
    synchronize(device)
    start = time.perf_counter()
    for _ in range(count):
        images, labels = next(stream)
        step_start = time.perf_counter()
        loss = train_step(model, optimizer, criterion, images, labels, device, args, autocast)
        if throttle:
            throttle.after_step(step_start, device)
        samples += len(labels)
        loss_sum += loss.detach() * len(labels)
    synchronize(device)
    return {'samples': samples, 'steps': count, 'seconds': time.perf_counter() - start,
            'loss': loss_sum.item() / samples if samples else math.nan}


def main(argv=None):
    args = get_args_parser().parse_args(argv)
    torch.manual_seed(args.seed)

    if args.mode == 'ddp':
        rank, world_size, device = init_distributed(args)
        devices = world_size
    else:
        rank, world_size = 0, 1
        device = pick_device(args.device)
        devices = torch.cuda.device_count() if args.mode == 'dp' and device.type == 'cuda' else 1
        report_rank(0, 1, 0, device, 'none')
    if rank == 0:
        emit('settings', **stated(args, CIFAR100))

    batch = args.batch_size * (devices if args.mode == 'dp' else 1)
    dataset = training_set(args, samples_needed=batch * min(args.steps or 50, 50), augment=args.augment)
    steps = steps_per_epoch(args.steps, len(dataset), batch, args.ranks_per_node)
    # this rank's share of each pass, never less than a batch (RankShare)
    sampler = RankShare(len(dataset), world_size, rank, batch, seed=args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, sampler=sampler, drop_last=True,
                                         num_workers=args.workers, pin_memory=device.type == 'cuda',
                                         persistent_workers=args.workers > 0 and args.data == 'loader')
    if args.loader_steps:
        emit('loader', rank=rank, batch_size=batch, workers=args.workers,
             **time_loader(private_batches(loader), args.loader_steps))
    if args.speed_seconds:
        # the machine's speed in this job, as the loader just met it (every rank at once, as the
        # loaders ran), outside every timed part: the simulated partition's loader reference
        # follows it (mlcheck.judging.references)
        emit('speed', rank=rank, steps_per_s=speed_workload.measure(repeats=3, seconds=args.speed_seconds / 4))
    on_device = DeviceImages(dataset, device, augment=args.augment) if args.data == 'device' else None

    torch.manual_seed(args.seed)    # the same initial model, whatever the loader's timing drew
    model = getattr(resnet, args.model)(num_classes=NUM_CLASSES).to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    criterion = nn.CrossEntropyLoss()
    autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp)  # noqa: E731
    make_optimizer = lambda m: torch.optim.SGD(m.parameters(), lr=args.lr, momentum=0.9,  # noqa: E731
                                               weight_decay=5e-4)
    # each stream of the device path augments with random numbers of its own, per rank
    seeds = {name: (args.seed << 24) + (rank << 2) + i for i, name in enumerate(('train', 'solo', 'probe'))}
    probe = private_stream(on_device, sampler, batch, seeds['probe']) if on_device else iter(loader)
    probe_batch = next(probe)
    flops = flops_per_sample(model, [t.to(device) for t in probe_batch], criterion, autocast)

    def solo_step(alone, alone_optimizer, batch):
        train_step(alone, alone_optimizer, criterion, *batch, device, args, autocast)
        return len(batch[1])

    solo = SoloPhase(model, make_optimizer, solo_step, device, rank, args) if args.mode == 'ddp' else None
    if args.mode == 'ddp':
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == 'cuda' else None)
    elif args.mode == 'dp' and devices > 1:
        model = nn.DataParallel(model)
    optimizer = make_optimizer(model)
    throttle = Throttle(args, rank)

    if on_device:
        stream = on_device.batches(sampler, batch, seeds['train'])
        solo_batches = private_stream(on_device, sampler, batch, seeds['solo']) if solo else None
    else:
        stream = endless_batches(loader, sampler)
        solo_batches = private_batches(loader) if solo else None
    train_steps(model, stream, args.warmup_steps, optimizer, criterion, device, args, autocast)
    summaries = []
    sampler = telemetry.Sampler(device, args.telemetry_interval).start()
    for epoch in range(1, args.epochs + 1):
        if args.mode == 'ddp':
            if args.fault:
                args.fault.at_epoch(rank, epoch)
            solo.before_epoch(epoch, args.epochs, solo_batches)
            dist.barrier()
        figures = train_steps(model, stream, steps, optimizer, criterion, device, args, autocast,
                              throttle)
        emit('epoch', rank=rank, epoch=epoch, **figures)
        summary = epoch_summary(figures, epoch, world_size, device, distributed=args.mode == 'ddp')
        summaries.append(summary)
        if rank == 0:
            emit('summary', **summary)
    emit('telemetry', rank=rank, **sampler.stop().fields())
    if args.profile_steps:
        emit('trace', rank=rank, steps=args.profile_steps, path=telemetry.profile(
            lambda: train_step(model, optimizer, criterion, *next(stream), device, args, autocast),
            args.profile_steps, args.trace_dir, rank))

    if rank == 0:
        steady = steady_state(summaries, devices)
        emit('result', **steady, first_epoch_samples_per_s=summaries[0]['samples_per_s'],
             flops_per_sample=flops, model_flops_per_s=flops * steady['samples_per_s'],
             devices=devices, world_size=world_size, mode=args.mode, model=args.model,
             batch_size=args.batch_size, epochs=args.epochs, steps=steps, warmup_steps=args.warmup_steps,
             amp=args.amp, channels_last=args.channels_last, synthetic=args.synthetic, data=args.data,
             augment=args.augment)
    finish(rank, distributed=args.mode == 'ddp')


if __name__ == '__main__':
    main()
