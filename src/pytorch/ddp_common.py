"""What the training programs share: rank layout, process group, device, and fact lines.

Imported by the programs in the sibling directories (they add this directory to sys.path),
so it runs inside the container images: standard library and torch only.

Waits are bounded (add_wait_arguments): --rendezvous-timeout for all ranks to join,
--timeout for each collective (gloo honours it; for NCCL the watchdog aborts on it, with
TORCH_NCCL_ASYNC_ERROR_HANDLING=1 from the launcher). Their defaults, and --fault, come from
MLCHECK_RENDEZVOUS_TIMEOUT, MLCHECK_COLLECTIVE_TIMEOUT and MLCHECK_FAULT when set. A rank that
fails raises, so its exception ends in stderr; under `srun --kill-on-bad-exit` that ends the step.

--fault injects one failure, to test how it is reported (see docs/faults.md):
  crash:RANK:EPOCH            RANK raises an exception at the start of EPOCH
  hang-rendezvous:RANK        RANK never arrives at the rendezvous
  hang-collective:RANK:EPOCH  RANK stops before the first collective of EPOCH

Before each timed epoch, SoloPhase times every rank alone (a `solo` fact each, after the last), so
that a slow GPU or node shows by name; --throttle F --throttle-rank R slows rank R on purpose in both
phases, to test that it is named (see docs/per-rank.md).
"""

import argparse
import importlib.util
import itertools
import copy
import os
import platform
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import gpu_locality
from mlcheck_contract import (COLLECTIVE_TIMEOUT, COLLECTIVE_TIMEOUT_VAR, FAULT_FORMS, FAULT_VAR,
                              RENDEZVOUS_TIMEOUT, RENDEZVOUS_TIMEOUT_VAR, FaultError, format_fact,
                              parse_fault)


def emit(event, **fields):
    """One machine-readable fact: `MLCHECK {json}` on a line of its own."""
    print(format_fact(event, **fields), flush=True)


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


def rank_layout():
    """(rank, world_size, local_rank) from the torch variables, else from Slurm."""
    def first(*names, default):
        for name in names:
            if os.environ.get(name, '') != '':
                return int(os.environ[name])
        return default

    return (first('RANK', 'SLURM_PROCID', default=0),
            first('WORLD_SIZE', 'SLURM_NTASKS', default=1),
            first('LOCAL_RANK', 'SLURM_LOCALID', default=0))


def pick_device(choice, local_rank=0):
    """'auto', 'gpu' or 'cpu' -> torch.device; with several GPUs visible, the local rank's."""
    use_gpu = choice == 'gpu' or (choice == 'auto' and torch.cuda.is_available())
    if use_gpu and not torch.cuda.is_available():
        sys.exit('--device gpu asked, but torch sees no GPU')
    if not use_gpu:
        return torch.device('cpu')
    device = torch.device('cuda', local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def synchronize(device):
    """Wait for the device, so that a clock read after it measures finished work."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def add_wait_arguments(parser):
    """--rendezvous-timeout, --timeout and --fault, with defaults from the launcher's MLCHECK_*."""
    env = os.environ.get
    parser.add_argument('--rendezvous-timeout', type=float,
                        default=env(RENDEZVOUS_TIMEOUT_VAR, str(RENDEZVOUS_TIMEOUT)),
                        help='seconds to wait for all ranks to join the process group')
    parser.add_argument('--timeout', type=float, default=env(COLLECTIVE_TIMEOUT_VAR, str(COLLECTIVE_TIMEOUT)),
                        help='seconds a collective may wait for the other ranks')
    parser.add_argument('--fault', type=Fault.parse, default=env(FAULT_VAR) or None,
                        help=f'inject a failure: {FAULT_FORMS}')
    return parser


class Fault:
    """A failure to inject in one rank (--fault), for testing how failures are reported."""

    def __init__(self, kind, rank, epoch=None):
        self.kind, self.rank, self.epoch = kind, rank, epoch

    @classmethod
    def parse(cls, spec):
        try:
            return cls(*parse_fault(spec))
        except FaultError as err:       # argparse shows the message of this type only
            raise argparse.ArgumentTypeError(str(err)) from None

    def at_rendezvous(self, rank):
        if self.kind == 'hang-rendezvous' and self.rank == rank:
            self.inject(rank)

    def at_epoch(self, rank, epoch):
        """Called by every rank at the start of every epoch, before its first collective."""
        if self.kind in ('crash', 'hang-collective') and (self.rank, self.epoch) == (rank, epoch):
            self.inject(rank)

    def inject(self, rank):
        emit('fault', rank=rank, kind=self.kind, epoch=self.epoch)
        if self.kind == 'crash':
            raise RuntimeError(f'injected fault: rank {rank} crashed in epoch {self.epoch}')
        while True:     # a hang: only a timeout elsewhere, or the launcher, ends it
            time.sleep(3600)


def add_rank_speed_arguments(parser, solo_steps, solo_warmup_steps):
    """--solo-steps and --solo-warmup-steps of the solo phase, --throttle and --throttle-rank."""
    parser.add_argument('--solo-steps', type=int, default=solo_steps,
                        help='timed steps of the solo phase before each timed epoch, at most the '
                             "epoch's steps, each rank alone (0: no solo phase)")
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


def timed_epoch(epoch, epochs):
    """Whether `epoch` (from 1) counts in the steady-state throughput (steady_state): every epoch
    after the first, or the first if it is the only one."""
    return epoch > 1 or epochs == 1


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
                 samples_per_s=self.samples / self.seconds if self.seconds > 0 else 0.0)

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
            self.samples += self.train_step(self.model, self.optimizer, batch)
            self.throttle.after_step(step_start, self.device)
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


def init_distributed(args):
    """Join the process group (nccl on GPUs, gloo otherwise) on args.device, within
    args.rendezvous_timeout, with args.timeout for every collective; report this rank."""
    rank, world_size, local_rank = rank_layout()
    if args.fault:
        args.fault.at_rendezvous(rank)
    device = pick_device(args.device, local_rank)
    backend = 'nccl' if device.type == 'cuda' else 'gloo'
    if world_size > 1:
        for name in ('MASTER_ADDR', 'MASTER_PORT'):
            if not os.environ.get(name):
                sys.exit(f'rank {rank}: {name} is not set; it is needed for {world_size} ranks')
    else:
        os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
        os.environ.setdefault('MASTER_PORT', str(free_port()))

    host, port = os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT'])
    emit('rendezvous', rank=rank, world_size=world_size, master=f'{host}:{port}',
         node=os.environ.get('SLURMD_NODENAME', socket.gethostname()), timeout=args.rendezvous_timeout)
    # the store bounds the rendezvous; the process group bounds every collective
    store = dist.TCPStore(host, port, world_size, is_master=rank == 0,
                          timeout=timedelta(seconds=args.rendezvous_timeout), wait_for_workers=True)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=args.timeout))
    report_rank(rank, world_size, local_rank, device, backend)
    return rank, world_size, device


def finish(rank, distributed=True):
    """Report this rank done, once every rank is (a barrier), and end the process: it does not
    return. It leaves without running destructors: freeing the objects that hold the process
    group's store once made rank 0 hang with torch 2.9.1 (joining the TCPStore server's thread,
    after 'done', until the job's time limit; one of about a dozen such jobs on the simulated
    partition), and by now everything has been reported."""
    if distributed:
        dist.barrier()
    emit('done', rank=rank)
    if distributed:
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def report_rank(rank, world_size, local_rank, device, backend):
    try:
        import torchvision      # the training programs need it; the interconnect program does not
    except ImportError:
        torchvision = None
    emit('rank', rank=rank, world_size=world_size, local_rank=local_rank,
         host=socket.gethostname(), node=os.environ.get('SLURMD_NODENAME', socket.gethostname()),
         affinity=sorted(os.sched_getaffinity(0)), threads=torch.get_num_threads(),
         device=str(device), device_name=device_name(device),
         visible_devices=torch.cuda.device_count() if device.type == 'cuda' else 0,
         backend=backend, torch=torch.__version__,
         torchvision=torchvision.__version__ if torchvision else None,
         **stack_facts(), **gpu_locality.rank_fields(device), **gpu_locality.gpu_selection())


def stack_facts():
    """What this rank runs on, for telling what changed when a figure moved: the GPU runtime
    torch was built for, the collective library it links, the kernel and the GPU driver."""
    facts = {'cuda': torch.version.cuda or '', 'rocm': getattr(torch.version, 'hip', None) or '',
             'kernel': platform.release(), 'gpu_driver': gpu_driver()}
    try:
        facts['nccl'] = '.'.join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else ''
    except (RuntimeError, AttributeError, TypeError):   # a build without NCCL/RCCL
        facts['nccl'] = ''
    return facts


def gpu_driver():
    """The kernel driver's version: amdgpu's module version, or NVIDIA's; '' when neither."""
    for path in ('/sys/module/amdgpu/version', '/sys/module/nvidia/version'):
        try:
            with open(path) as stream:
                return f'{os.path.basename(os.path.dirname(path))} {stream.read().strip()}'
        except OSError:
            continue
    return ''


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def load_program(relative_path):
    """The program at `relative_path` under this directory (e.g. 'comm/collectives.py') as a
    module, for the benchmarks and tests that call its functions: programs are scripts, not a
    package. Loading it runs its top level, which puts this directory on sys.path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), relative_path)
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def device_name(device):
    return torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'


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
    """--steps and --ranks-per-node: how many steps an epoch has (see steps_per_epoch)."""
    parser.add_argument('--steps', type=int, default=0,
                        help='steps per rank and epoch (0: one pass over the data on one node)')
    parser.add_argument('--ranks-per-node', type=int, default=1,
                        help='ranks that share one pass over the data when --steps is 0')
    return parser
