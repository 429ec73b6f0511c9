"""The GPU code paths, judged by the project's own sanity code on real output of a real GPU.

tests/data/gpu/h100_*: bench/gpu-path.sh on one NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0,
NCCL 2.28.9, torch 2.11.0+cu130; a KVM guest with 16 cores and no network fabric), both programs as
one rank through src/launch/rank-env.sh with NCCL_DEBUG=INFO, stdout and stderr labelled "0: " as
srun --label labels task 0. See docs/cifar-benchmark.md.
"""

import os

import pytest

from conftest import DATA
from mlcheck.judging import output, sanity
from mlcheck.placement.topology import cores_to_mask

GPU = os.path.join(DATA, 'gpu')


def gpu_run(name):
    return output.read(os.path.join(GPU, f'h100_{name}.out'), os.path.join(GPU, f'h100_{name}.err'))


def one_rank(run, **promises):
    """Expectations of the one-rank run on all 16 cores of the GPU machine."""
    cores = run.by_rank('rank')[0]['affinity']
    return sanity.Expectations(num_nodes=1, tasks_per_node=1, masks=(cores_to_mask(cores),), gpus=True,
                               **promises)


def test_mnist_on_one_gpu_is_sane():
    run = gpu_run('mnist')
    rank = run.by_rank('rank')[0]
    assert (rank['backend'], rank['device'], rank['visible_devices']) == ('nccl', 'cuda:0', 1)
    assert sanity.problems(run, one_rank(run, min_accuracy=0.9)) == []
    assert run.result_value('samples_per_s') > 0


def test_a_rank_that_sees_no_gpu_fails_on_a_gpu_partition():
    run = gpu_run('mnist')
    run.by_rank('rank')[0].update(device='cpu', visible_devices=0)
    assert sanity.problems(run, one_rank(run, min_accuracy=0.9)) == [
        "rank 0 uses device 'cpu' and sees 0 GPU(s); expected exactly one GPU"]


def test_nccl_without_a_network_plugin_fails_where_one_is_expected(lumi):
    """NCCL 2.28's own words when it finds no plugin ("NET/Plugin: Could not find: libnccl-net.so",
    "Using network Socket"): on a partition that expects aws-ofi with cxi, the rank is flagged."""
    run = gpu_run('mnist')
    expect = sanity.Expectations(**{**one_rank(run, min_accuracy=0.9).__dict__,
                                    'net_plugin': lumi.net_plugin})
    found = sanity.problems(run, expect)
    assert any('not loaded on rank 0' in p for p in found), found
    assert any('fell back' in p and 'rank 0' in p for p in found), found


@pytest.mark.parametrize('name', ['mnist', 'cifar100'])
def test_nccl_info_lines_are_tied_to_the_rank(name):
    lines = gpu_run(name).lines[0]
    assert any('NCCL INFO NCCL version 2.28.9' in line for line in lines)
    assert any('NCCL INFO Using network Socket' in line for line in lines)


def test_cifar100_resnet152_at_lr_0_05_diverged_and_sanity_says_so():
    """The captured run used the program's earlier default learning rate, 0.05: ResNet-152 from
    scratch at batch 128 diverged (loss 6.4 -> 7.3, above ln 100 = 4.6), and sanity fails it."""
    run = gpu_run('cifar100')
    assert run.result_value('model') == 'resnet152'
    found = sanity.problems(run, one_rank(run, epochs=3, loss_must_fall=True))
    assert found == ['loss did not fall: 6.4398 in epoch 1, 7.3474 in epoch 3']
