"""Every rank gets at least one batch at any node count (issue 18 item 8): the training
programs' sampler (epochs.RankShare), and the programs run by 2 gloo ranks whose share of
the data is smaller than one batch."""

import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings, strategies as st

from conftest import REPO
from ddp_common import free_port
from epochs import RankShare
from mlcheck.judging import output


def shares(size, world_size, batch, ranks, seed=3, data_pass=0):
    found = {}
    for rank in ranks:
        sampler = RankShare(size, world_size, rank, batch, seed=seed)
        sampler.set_epoch(data_pass)
        found[rank] = list(sampler)
        assert len(found[rank]) == len(sampler)
    return found


@settings(max_examples=50, deadline=None)
@given(size=st.integers(1, 60000), world_size=st.integers(1, 8192), batch=st.integers(1, 256),
       rank=st.integers(0, 8191))
def test_every_rank_gets_at_least_one_batch_of_real_samples(size, world_size, batch, rank):
    rank %= world_size
    share = shares(size, world_size, batch, [rank, world_size - 1])
    for indices in share.values():
        assert len(indices) >= batch and len(indices) == len(share[world_size - 1])
        assert all(0 <= i < size for i in indices)


@settings(max_examples=50, deadline=None)
@given(size=st.integers(1, 3000), world_size=st.integers(1, 64), batch=st.integers(1, 128),
       data_pass=st.integers(0, 3))
def test_the_shares_cover_the_pass_and_are_torchs_where_a_batch_fits(size, world_size, batch,
                                                                      data_pass):
    share = shares(size, world_size, batch, range(world_size), data_pass=data_pass)
    assert set().union(*share.values()) == set(range(size))
    if -(-size // world_size) >= batch:
        # the indices torch's DistributedSampler gives: the programs train as before
        for rank, indices in share.items():
            torch_sampler = torch.utils.data.distributed.DistributedSampler(
                range(size), world_size, rank, shuffle=True, seed=3)
            torch_sampler.set_epoch(data_pass)
            assert indices == list(torch_sampler)


def test_the_issues_node_counts_give_every_rank_a_batch():
    """CIFAR-100 (50,000 images, 128 per GCD) had no batch per rank from 50 LUMI nodes; MNIST
    (60,000, 64) from 120; LUMI's max_nodes is 1024."""
    for size, batch, nodes in ((50000, 128, 50), (50000, 128, 1024), (60000, 64, 120), (60000, 64, 1024)):
        loader = torch.utils.data.DataLoader(range(size), batch_size=batch, drop_last=True,
                                             sampler=RankShare(size, 8 * nodes, 8 * nodes - 1, batch))
        assert len(loader) >= 1 and len(next(iter(loader))) == batch


def run_ranks(program, *args, world_size=2, timeout=240):
    """`program` as `world_size` gloo ranks on this machine (torchrun's variables)."""
    port = free_port()
    ranks = []
    for rank in range(world_size):
        env = {**os.environ, 'OMP_NUM_THREADS': '1', 'RANK': str(rank), 'WORLD_SIZE': str(world_size),
               'LOCAL_RANK': str(rank), 'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': str(port),
               'GLOO_SOCKET_IFNAME': 'lo'}
        ranks.append(subprocess.Popen([sys.executable, os.path.join(REPO, 'src', 'pytorch', program),
                                       *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    try:
        outputs = [rank.communicate(timeout=timeout) for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
    for rank, (stdout, stderr) in zip(ranks, outputs):
        assert rank.returncode == 0, stderr[-3000:]
    return output.parse(outputs[0][0], labelled=False)


def test_synthetic_ddp_with_more_ranks_than_steps():
    """--synthetic made steps x batch samples: 2 ranks and 1 step left each rank half a batch,
    and the program died of StopIteration."""
    run = run_ranks('cifar/train_cifar100.py', '--synthetic', '--model', 'resnet18', '--workers', '0',
                    '--data', 'loader', '--no-augment',
                    '--batch-size', '4', '--epochs', '1', '--steps', '1', '--warmup-steps', '0',
                    '--solo-steps', '1', '--solo-warmup-steps', '0')
    assert run.result()['steps'] == 1 and run.result()['world_size'] == 2


def test_mnist_with_a_batch_larger_than_each_share(tmp_path):
    """2 ranks of the 1497 staged digits at 1000 per rank: each share (749) held no batch and
    the program spun at 100 % CPU until killed."""
    from mlcheck.data.staging import stage_mnist
    stage_mnist(str(tmp_path))
    run = run_ranks('mnist/mnist_DDP.py', '--data-dir', str(tmp_path), '--batch-size', '1000',
                    '--epochs', '1', '--steps', '1', '--solo-steps', '1', '--solo-warmup-steps', '0')
    assert [e['samples'] for e in run.events('epoch')] == [1000]


def test_a_loader_without_a_batch_ends_the_program_in_one_line():
    """It spun at 100 % CPU: each pass yielded nothing, and the next began at once."""
    from epochs import endless_batches
    empty = torch.utils.data.DataLoader(range(3), batch_size=4, drop_last=True)
    with pytest.raises(SystemExit, match='^rank 0: a pass over the data gave no batch of 4$'):
        next(endless_batches(empty))
