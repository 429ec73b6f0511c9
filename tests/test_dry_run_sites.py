"""Frontier and Perlmutter from their config alone: the job scripts of a ReFrame dry run.

Frontier runs PyTorch from a conda environment with ROCm modules (image 'host'); Perlmutter runs
it in Shifter images. Neither needs a change to checks/.
"""

import re

import pytest

from conftest import exports, srun_line
from reframe_runner import dry_run_scripts


TRAINING_CHECKS = ['MNISTDistributedCheck', 'CIFAR100ResNetCheck']   # they read a dataset
CHECKS = [*TRAINING_CHECKS, 'InterconnectCheck']


@pytest.fixture(scope='module')
def frontier(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('frontier')
    scripts = dry_run_scripts('frontier', 'frontier', tmp)
    return tmp, {key: script for key, (script, _) in scripts.items()}


@pytest.fixture(scope='module')
def perlmutter(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('perlmutter')
    scripts = dry_run_scripts('perlmutter', 'perlmutter', tmp)
    return tmp, {key: script for key, (script, _) in scripts.items()}


def test_frontier_runs_every_check_at_each_node_count(frontier):
    _, scripts = frontier
    assert sorted(scripts) == [(check, nodes) for check in sorted(CHECKS) for nodes in (1, 2, 4)]


@pytest.mark.parametrize('check', CHECKS)
def test_frontier_binds_seven_low_noise_cores_per_gcd(frontier, check):
    """Core 0 of each CCD is kept for the system; GCD 0 sits by cores 48-55, GCD 4 by 0-7."""
    script = frontier[1][check, 2]
    assert '#SBATCH --ntasks=16\n' in script and '#SBATCH --ntasks-per-node=8\n' in script
    assert '#SBATCH --cpus-per-task=7\n' in script and '#SBATCH --gpus-per-node=8\n' in script
    assert '#SBATCH --partition=batch\n#SBATCH --network=disable_rdzv_get\n' in script
    assert ('--cpu-bind=mask_cpu:0xfe000000000000,0xfe00000000000000,0xfe0000,0xfe000000,0xfe,0xfe00,'
            '0xfe00000000,0xfe0000000000 ') in srun_line(script)


@pytest.mark.parametrize('check', TRAINING_CHECKS)
def test_frontier_loads_rocm_and_the_plugin_then_runs_the_conda_python_under_srun(frontier, check):
    tmp, scripts = frontier
    script = scripts[check, 4]
    modules = re.findall(r'^module load (\S+)$', script, re.M)
    assert modules == ['PrgEnv-gnu/8.7.0', 'cpe/26.03', 'miniforge3/23.11.0-0', 'rocm/7.1.1',
                       'rccl-net-plugin', 'craype-accel-amd-gfx90a']
    env = exports(script)
    assert env['NCCL_SOCKET_IFNAME'] == 'hsn0,hsn1,hsn2,hsn3'
    assert env['MLCHECK_VISIBLE_DEVICES_VARS'] == 'ROCR_VISIBLE_DEVICES'
    assert env['MLCHECK_MIOPEN_CACHE_ROOT'] == "'/tmp'" and env['OMP_NUM_THREADS'] == '7'
    # the modules come before anything that runs Python
    assert script.index('module load rccl-net-plugin') < script.index('srun ')
    srun = srun_line(script)
    assert 'torchrun' not in script and 'singularity' not in srun and 'shifter' not in srun
    assert (' sh ./launch/rank-env.sh /lustre/orion/proj-shared/mlcheck/conda/pytorch/bin/python -u '
            f'./{"pytorch/mnist/mnist_DDP.py" if check.startswith("MNIST") else "pytorch/cifar/train_cifar100.py"} '
            f'--data-dir {tmp / "data"} ') in srun


def test_perlmutter_runs_every_check_in_its_shifter_image(perlmutter):
    _, scripts = perlmutter
    assert sorted(scripts) == [(check, nodes) for check in sorted(CHECKS) for nodes in (1, 2, 4)]


@pytest.mark.parametrize('check', CHECKS)
def test_perlmutter_binds_each_a100_to_its_numa_domain(perlmutter, check):
    """Four ranks per node, 16 cores each: GPU 0 by domain 3 (cores 48-63) ... GPU 3 by domain 0."""
    script = perlmutter[1][check, 2]
    assert '#SBATCH --ntasks=8\n' in script and '#SBATCH --ntasks-per-node=4\n' in script
    assert '#SBATCH --cpus-per-task=16\n' in script and '#SBATCH --gpus-per-node=4\n' in script
    assert '#SBATCH --constraint=gpu\n' in script
    assert '--cpu-bind=mask_cpu:0xffff000000000000,0xffff00000000,0xffff0000,0xffff ' in srun_line(script)


@pytest.mark.parametrize('check', TRAINING_CHECKS)
def test_perlmutter_environment_and_shifter_command(perlmutter, check):
    tmp, scripts = perlmutter
    script = scripts[check, 4]
    env = exports(script)
    assert env['NCCL_SOCKET_IFNAME'] == 'hsn0,hsn1,hsn2,hsn3'
    assert env['MLCHECK_VISIBLE_DEVICES_VARS'] == 'CUDA_VISIBLE_DEVICES'
    assert env['TORCH_NCCL_ASYNC_ERROR_HANDLING'] == '1' and env['OMP_NUM_THREADS'] == '16'
    assert 'MLCHECK_MIOPEN_CACHE_ROOT' not in env and 'module load' not in script
    container = srun_line(script).split(' --cpu-bind=mask_cpu:')[1].split(' ', 1)[1]
    assert container.startswith(
        f'shifter --image=docker:nersc/pytorch:25.06.01 --volume={tmp / "data"}:{tmp / "data"} '
        '--module=gpu,nccl-plugin sh ./launch/rank-env.sh python -u ./pytorch/')
