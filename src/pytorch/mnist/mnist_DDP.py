#!/usr/bin/env python3
"""Distributed data-parallel MNIST training: a health check for a PyTorch installation.

Runs one process per GPU (or per CPU slot) under srun, or alone. The rank layout comes from
the torch variables (RANK, WORLD_SIZE, LOCAL_RANK), else from Slurm (SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID). MASTER_ADDR/MASTER_PORT must be set for more than one rank.

The data is read from --data-dir (the directory that holds MNIST/raw/, as torchvision's MNIST
loader finds it), the IDX files directly (MNISTImages: the same tensors as torchvision's MNIST
with ToTensor and Normalize, tests/test_mnist_data.py compares them), so that no rank pays for
importing torchvision (2-5 s on the simulated partition's shared cores); it is never downloaded
here, so ranks do not hammer a web server.

The learning problem is the same at every node count: each epoch has the same number of
optimizer steps (--steps, or by default one pass over the data on one node of --ranks-per-node
ranks), each rank --batch-size samples per step; a rank whose share of the data runs out starts
another pass, and a share smaller than one batch (many nodes) cycles through the data to make
one (../epochs.py RankShare). So the test accuracy a healthy run reaches depends on the epochs, not on the
number of nodes.

Every fact is printed as one line `MLCHECK {json}` with an "event" key:
  rendezvous  each rank, before it joins the process group: where it waits and how long
  rank     each rank, once it joined: layout, host, Slurm node, CPU affinity, device, versions
  settings rank 0, once it joined: the value of each knob it runs (../program_knobs.py MNIST)
  solo     each rank, after its solo steps before the last timed epoch: its samples/s training alone
  epoch    each rank, each epoch: samples it trained, seconds, mean loss
  summary  rank 0, each epoch: samples over all ranks, slowest rank's seconds, mean loss, samples/s
  result   rank 0: test accuracy over the whole test set, total training seconds, and the
           steady-state samples/s (epochs after the first) in total and per device
  done     each rank, last
  fault    a rank about to inject the fault asked for with --fault (never in normal runs)

Waits are bounded, and a fault can be injected (--fault), as ../ddp_common.py describes.
Only the standard library, torch and ../ddp_common.py, ../epochs.py, ../solo_phase.py and
../program_knobs.py are used.
"""

import argparse
import math
import os
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ddp_common import add_wait_arguments, emit, finish, init_distributed  # noqa: E402
from epochs import (RankShare, add_epoch_arguments, endless_batches, epoch_summary,  # noqa: E402
                    steady_state, steps_per_epoch)
from solo_phase import SoloPhase, Throttle, add_rank_speed_arguments, private_batches  # noqa: E402
from program_knobs import MNIST, add_arguments, stated  # noqa: E402
import telemetry  # noqa: E402
from regular_file import NotRegular, read_regular  # noqa: E402

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
# the published files' sizes (yann.lecun.com/exdb/mnist): no file of the set is read past its own,
# another name past the largest
MAX_BYTES = {'train-images-idx3-ubyte': 47_040_016, 'train-labels-idx1-ubyte': 60_008,
             't10k-images-idx3-ubyte': 7_840_016, 't10k-labels-idx1-ubyte': 10_008}


def get_args_parser():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data-dir', required=True,
                        help='directory holding MNIST/raw/ in the IDX format')
    # the knobs of the check, with its defaults (../program_knobs.py); a `settings` fact states them
    add_arguments(parser, MNIST)
    parser.add_argument('--lr', type=float, default=1.0, help='Adadelta learning rate')
    parser.add_argument('--gamma', type=float, default=0.7, help='learning rate decay per epoch')
    parser.add_argument('--seed', type=int, default=1, help='seed of the model and the shuffle')
    parser.add_argument('--workers', type=int, default=0, help='data-loader workers per rank')
    parser.add_argument('--device', choices=['auto', 'gpu', 'cpu'], default='auto',
                        help='auto: a GPU where torch sees one, else the CPU')
    add_rank_speed_arguments(parser, solo_warmup_steps=5)
    telemetry.add_arguments(parser)
    return add_epoch_arguments(add_wait_arguments(parser))


class Net(nn.Module):
    """The small CNN of PyTorch's MNIST example."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def read_idx(path, dims):
    """An IDX file of unsigned bytes with `dims` dimensions (MNIST's format: two zero bytes, the
    type 0x08, the number of dimensions, each dimension as a big-endian int32, then the bytes) ->
    a uint8 tensor of that shape; a file of another shape or size ends the program in one line."""
    # never through a link (to /dev/zero), never waiting on a FIFO, never past the published size
    try:
        data = read_regular(path, MAX_BYTES.get(os.path.basename(path), max(MAX_BYTES.values())))
    except (NotRegular, OSError) as err:
        sys.exit(f'{path}: not read ({getattr(err, "strerror", None) or err}; a link is not followed)')
    header = 4 + 4 * dims
    if len(data) < header or data[:4] != bytes([0, 0, 0x08, dims]):
        sys.exit(f'{path}: not an IDX file of {dims}-dimensional unsigned bytes')
    shape = struct.unpack(f'>{dims}I', data[4:header])
    if len(data) - header != math.prod(shape):
        sys.exit(f'{path}: {len(data) - header} bytes of data where its header says {math.prod(shape)}')
    return torch.frombuffer(bytearray(data[header:]), dtype=torch.uint8).view(*shape)


class MNISTImages(torch.utils.data.Dataset):
    """MNIST's IDX files in MNIST/raw/, each sample as torchvision's MNIST with ToTensor() and
    Normalize((MNIST_MEAN,), (MNIST_STD,)) gives it: a (1, 28, 28) float tensor and an int label."""

    def __init__(self, raw, train):
        prefix = 'train' if train else 't10k'
        self.data = read_idx(os.path.join(raw, f'{prefix}-images-idx3-ubyte'), 3)
        self.targets = read_idx(os.path.join(raw, f'{prefix}-labels-idx1-ubyte'), 1).long()
        if len(self.data) != len(self.targets):
            sys.exit(f'{raw}: {len(self.data)} {prefix} images but {len(self.targets)} labels')
        self.mean = torch.tensor(MNIST_MEAN).view(1, 1, 1)      # float32, as Normalize's
        self.std = torch.tensor(MNIST_STD).view(1, 1, 1)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        image = self.data[index].unsqueeze(0).float().div(255)     # ToTensor
        return image.sub_(self.mean).div_(self.std), int(self.targets[index])


def load_datasets(data_dir):
    raw = os.path.join(data_dir, 'MNIST', 'raw')
    if not os.path.isdir(raw):
        sys.exit(f'MNIST data not found: {raw} does not exist (stage the IDX files there)')
    return MNISTImages(raw, train=True), MNISTImages(raw, train=False)


def train_step(model, optimizer, batch, device):
    """One optimizer step on `batch`: (samples, loss)."""
    data, target = (t.to(device, non_blocking=True) for t in batch)
    optimizer.zero_grad()
    loss = F.nll_loss(model(data), target)
    loss.backward()
    optimizer.step()
    return len(target), loss.item()


def train_one_epoch(model, stream, steps, optimizer, device, throttle):
    """One epoch: `steps` batches of `stream`; a Throttle of this rank may slow it on purpose."""
    model.train()
    samples, loss_sum = 0, 0.0
    for _ in range(steps):
        batch = next(stream)
        start = time.perf_counter()
        count, loss = train_step(model, optimizer, batch, device)
        samples += count
        loss_sum += loss * count
        throttle.after_step(start, device)
    return samples, loss_sum


def evaluate(model, loader, device):
    """(correct, total) summed over every rank's shard of the test set."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.float64, device=device)
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            counts[0] += (model(data).argmax(dim=1) == target).sum()
            counts[1] += len(target)
    dist.all_reduce(counts)
    return counts.tolist()


def main(argv=None):
    args = get_args_parser().parse_args(argv)
    torch.manual_seed(args.seed)
    rank, world_size, device = init_distributed(args)
    if rank == 0:
        emit('settings', **stated(args, MNIST))
    train_set, test_set = load_datasets(args.data_dir)

    # this rank's share of each pass, never less than a batch (RankShare)
    train_sampler = RankShare(len(train_set), world_size, rank, args.batch_size, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(
        train_set, batch_size=args.batch_size, sampler=train_sampler, drop_last=True,   # equal steps
        num_workers=args.workers, pin_memory=device.type == 'cuda')
    # each rank tests a disjoint slice, so every test sample counts exactly once
    test_shard = torch.utils.data.Subset(test_set, range(rank, len(test_set), world_size))
    test_loader = torch.utils.data.DataLoader(test_shard, batch_size=1000)

    model = Net().to(device)
    solo = SoloPhase(model, lambda m: torch.optim.Adadelta(m.parameters(), lr=args.lr),
                     lambda m, o, batch: train_step(m, o, batch, device)[0], device, rank, args)
    model = nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == 'cuda' else None)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=args.gamma)

    steps = steps_per_epoch(args.steps, len(train_set), args.batch_size, args.ranks_per_node)
    stream = endless_batches(train_loader, train_sampler)
    solo_batches = private_batches(train_loader)
    throttle = Throttle(args, rank)
    summaries = []
    sampler = telemetry.Sampler(device, args.telemetry_interval).start()
    for epoch in range(1, args.epochs + 1):
        if args.fault:
            args.fault.at_epoch(rank, epoch)
        solo.before_epoch(epoch, args.epochs, solo_batches)
        dist.barrier()
        start = time.perf_counter()
        samples, loss_sum = train_one_epoch(model, stream, steps, optimizer, device, throttle)
        if device.type == 'cuda':
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        scheduler.step()
        figures = {'samples': samples, 'seconds': seconds, 'loss': loss_sum / max(samples, 1)}
        emit('epoch', rank=rank, epoch=epoch, **figures)
        summary = epoch_summary(figures, epoch, world_size, device)
        summaries.append(summary)
        if rank == 0:
            emit('summary', **summary)
    emit('telemetry', rank=rank, **sampler.stop().fields())
    if args.profile_steps:
        emit('trace', rank=rank, steps=args.profile_steps, path=telemetry.profile(
            lambda: train_step(model, optimizer, next(stream), device), args.profile_steps,
            args.trace_dir, rank))

    correct, total = evaluate(model, test_loader, device)
    if rank == 0:
        emit('result', test_accuracy=correct / max(total, 1), test_samples=int(total),
             train_seconds=sum(s['seconds'] for s in summaries), epochs=args.epochs, steps=steps,
             batch_size=args.batch_size, world_size=world_size, **steady_state(summaries, world_size))
    finish(rank)


if __name__ == '__main__':
    main()
