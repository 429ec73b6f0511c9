"""What the training programs share: rank layout, process group, device, and fact lines.

Imported by the programs in the sibling directories (they add this directory to sys.path),
so it runs inside the container images: standard library and torch only. Beside it, for the
training programs: epochs.py (steps per epoch, each rank's share of the data, epoch figures)
and solo_phase.py (each rank timed alone, a rank slowed on purpose).

Waits are bounded (add_wait_arguments): --rendezvous-timeout for all ranks to join,
--timeout for each collective (gloo honours it; for NCCL the watchdog aborts on it, with
TORCH_NCCL_ASYNC_ERROR_HANDLING=1 from the launcher). Their defaults, and --fault, come from
MLCHECK_RENDEZVOUS_TIMEOUT, MLCHECK_COLLECTIVE_TIMEOUT and MLCHECK_FAULT when set. A rank that
fails raises, so its exception ends in stderr; under `srun --kill-on-bad-exit` that ends the step.

--fault injects one failure, to test how it is reported (see docs/faults.md):
  crash:RANK:EPOCH            RANK raises an exception at the start of EPOCH
  hang-rendezvous:RANK        RANK never arrives at the rendezvous
  hang-collective:RANK:EPOCH  RANK stops before the first collective of EPOCH
"""

import argparse
import importlib.util
import os
import platform
import re
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


def torchvision_version():
    """torchvision.__version__ without importing torchvision where the program did not (2-5 s a
    rank on the simulated partition): the `__version__ = '...'` line of its version.py (the
    package metadata's version lacks the build's local part, +cu130), else None."""
    if 'torchvision' in sys.modules:
        return sys.modules['torchvision'].__version__
    spec = importlib.util.find_spec('torchvision')
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        try:
            with open(os.path.join(location, 'version.py')) as f:
                found = re.search(r"^__version__ = '([^']+)'", f.read(), re.M)
        except OSError:
            continue
        if found:
            return found.group(1)
    return None


def report_rank(rank, world_size, local_rank, device, backend):
    emit('rank', rank=rank, world_size=world_size, local_rank=local_rank,
         host=socket.gethostname(), node=os.environ.get('SLURMD_NODENAME', socket.gethostname()),
         affinity=sorted(os.sched_getaffinity(0)), threads=torch.get_num_threads(),
         device=str(device), device_name=device_name(device),
         visible_devices=torch.cuda.device_count() if device.type == 'cuda' else 0,
         backend=backend, torch=torch.__version__,
         torchvision=torchvision_version(),
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
