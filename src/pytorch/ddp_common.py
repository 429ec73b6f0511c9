"""What the training programs share: rank layout, process group, device, and fact lines.

Imported by the programs in the sibling directories (they add this directory to sys.path),
so it runs inside the container images: standard library and torch only.
"""

import json
import os
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

FACT_PREFIX = 'MLCHECK '


def emit(event, **fields):
    """One machine-readable fact: `MLCHECK {json}` on a line of its own."""
    print(FACT_PREFIX + json.dumps({'event': event, **fields}, sort_keys=True), flush=True)


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


def init_distributed(device_choice, timeout_seconds):
    """Join the process group (nccl on GPUs, gloo otherwise) and report this rank."""
    rank, world_size, local_rank = rank_layout()
    device = pick_device(device_choice, local_rank)
    backend = 'nccl' if device.type == 'cuda' else 'gloo'
    if world_size > 1:
        for name in ('MASTER_ADDR', 'MASTER_PORT'):
            if not os.environ.get(name):
                sys.exit(f'rank {rank}: {name} is not set; it is needed for {world_size} ranks')
    else:
        os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
        os.environ.setdefault('MASTER_PORT', str(free_port()))

    dist.init_process_group(backend, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout_seconds))
    report_rank(rank, world_size, local_rank, device, backend)
    return rank, world_size, device


def report_rank(rank, world_size, local_rank, device, backend):
    import torchvision
    emit('rank', rank=rank, world_size=world_size, local_rank=local_rank,
         host=socket.gethostname(), node=os.environ.get('SLURMD_NODENAME', socket.gethostname()),
         affinity=sorted(os.sched_getaffinity(0)), threads=torch.get_num_threads(),
         device=str(device), device_name=device_name(device),
         visible_devices=torch.cuda.device_count() if device.type == 'cuda' else 0,
         backend=backend, torch=torch.__version__, torchvision=torchvision.__version__)


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def device_name(device):
    return torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'
