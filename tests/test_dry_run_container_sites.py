"""Alps (CSCS Container Engine) and a DGX H100 cluster (Pyxis) from their config alone: the job
scripts and environment definition files of a ReFrame dry run. Neither needs a change to checks/.
"""

import importlib.util
import pathlib
import tomllib

import pytest

from conftest import REPO, exports, partition_entry, srun_line
from reframe_runner import dry_run_scripts, run_reframe

CHECKS = ['CIFAR100ResNetCheck', 'InterconnectCheck', 'MNISTDistributedCheck']
NGC_IMAGE = 'nvcr.io#nvidia/pytorch:25.11-py3'
# 72 cores per Grace CPU, GPU i by NUMA node i: task i on cores 72i..72i+71
GH200_MASKS = ('0xffffffffffffffffff,0xffffffffffffffffff000000000000000000,'
               '0xffffffffffffffffff000000000000000000000000000000000000,'
               '0xffffffffffffffffff000000000000000000000000000000000000000000000000000000')
# 56 cores per Xeon, GPUs 0-3 on socket 0, 4-7 on socket 1: 14 cores each, in GPU order
DGX_MASKS = ('0x3fff,0xfffc000,0x3fff0000000,0xfffc0000000000,0x3fff00000000000000,'
             '0xfffc00000000000000000,0x3fff000000000000000000000,0xfffc000000000000000000000000')
# CSCS's documented NCCL and libfabric settings for Alps, and its PyTorch EDF's
ALPS_ENV = {'NCCL_NET': 'AWS Libfabric', 'NCCL_NET_GDR_LEVEL': 'PHB', 'NCCL_CROSS_NIC': '1',
            'NCCL_PROTO': '^LL128', 'FI_CXI_DEFAULT_CQ_SIZE': '131072',
            'FI_CXI_DEFAULT_TX_SIZE': '16384', 'FI_CXI_DISABLE_HOST_REGISTER': '1',
            'FI_CXI_RX_MATCH_MODE': 'software', 'FI_MR_CACHE_MONITOR': 'userfaultfd',
            'CUDA_CACHE_DISABLE': '1', 'MPICH_GPU_SUPPORT_ENABLED': '0'}


@pytest.fixture(scope='module')
def alps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('alps')
    return tmp, dry_run_scripts('alps', 'daint:normal', tmp)


@pytest.fixture(scope='module')
def dgx(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('dgx')
    return tmp, dry_run_scripts('dgx', 'dgx:batch', tmp)


def test_alps_runs_every_check_at_each_node_count(alps):
    assert sorted(alps[1]) == [(check, nodes) for check in CHECKS for nodes in (1, 2, 4)]


@pytest.mark.parametrize('check', CHECKS)
def test_alps_binds_one_task_to_each_grace_cpu_and_its_gpu(alps, check):
    script, _ = alps[1][check, 2]
    assert '#SBATCH --ntasks=8\n' in script and '#SBATCH --ntasks-per-node=4\n' in script
    assert '#SBATCH --cpus-per-task=72\n' in script and '#SBATCH --gpus-per-node=4\n' in script
    assert '#SBATCH --partition=normal\n' in script
    assert f' --cpu-bind=mask_cpu:{GH200_MASKS} --environment=' in srun_line(script)
    # task i drives GPU i: the rank wrapper sets CUDA_VISIBLE_DEVICES, Slurm binds no GPU
    assert exports(script)['MLCHECK_VISIBLE_DEVICES_VARS'] == 'CUDA_VISIBLE_DEVICES'
    assert '--gpu-bind' not in script


@pytest.mark.parametrize('check', ['MNISTDistributedCheck', 'CIFAR100ResNetCheck'])
def test_alps_srun_takes_the_environment_definition_written_in_the_stage_directory(alps, check):
    tmp, scripts = alps
    script, stagedir = scripts[check, 4]
    srun = srun_line(script)
    assert f' --environment={stagedir}/rfm_env.toml sh ./launch/rank-env.sh python -u ./pytorch/' in srun
    assert '--container-image' not in srun and 'singularity' not in srun
    edf = tomllib.loads((stagedir / 'rfm_env.toml').read_text())
    data = str(tmp / 'data')
    assert edf == {
        'image': NGC_IMAGE,
        'mounts': [f'{data}:{data}', f'{stagedir}:/rfm_workdir'],
        'workdir': '/rfm_workdir',
        'env': ALPS_ENV,
        'annotations': {'com': {'hooks': {'aws_ofi_nccl': {'enabled': 'true', 'variant': 'cuda-dl'}}}},
    }
    env = exports(script)
    assert env['NCCL_DEBUG'] == 'INFO' and env['OMP_NUM_THREADS'] == '72'
    assert env['TORCH_NCCL_ASYNC_ERROR_HANDLING'] == '1' and 'MLCHECK_MIOPEN_CACHE_ROOT' not in env


def test_alps_interconnect_mounts_only_its_stage_directory(alps):
    script, stagedir = alps[1]['InterconnectCheck', 2]
    edf = tomllib.loads((stagedir / 'rfm_env.toml').read_text())
    assert edf['mounts'] == [f'{stagedir}:/rfm_workdir'] and edf['image'] == NGC_IMAGE
    assert ' sh ./launch/rank-env.sh python -u ./pytorch/comm/collectives.py ' in srun_line(script)


def config_module(name):
    spec = importlib.util.spec_from_file_location(name, pathlib.Path(REPO) / 'config' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cscs_all_reduce_figures_fit_the_declared_limits():
    """CSCS's 2-node, 8-rank all_reduce busbw (150 GB/s at 1 GiB, 122.57 at 128 MiB) exceeds one
    node's injection (the fabric limit, a ring's ceiling), and stays within what NCCL's tree can
    report on two nodes: each node's NICs carry the message once, busbw counts 2(n-1)/n of it.
    With the CXI hook off (TCP) the figure is a few % of the limit."""
    limits = partition_entry('alps', 'daint:normal')['extras']['mlcheck']['checks']['interconnect']
    anchors = config_module('alps').CSCS_ALL_REDUCE_2_NODES
    ranks = 2 * 4
    tree_ceiling = 2 * (ranks - 1) / ranks * limits['fabric_limit']
    assert (limits['fabric_limit'], tree_ceiling) == (100.0, 175.0)
    for size in ('1 GiB', '128 MiB'):
        assert limits['fabric_limit'] < anchors[size] <= tree_ceiling
    assert anchors['128 MiB, CXI hook off'] < 0.1 * limits['fabric_limit']
    assert limits['node_limit'] == 450.0


def test_dgx_runs_every_check_at_each_node_count(dgx):
    assert sorted(dgx[1]) == [(check, nodes) for check in CHECKS for nodes in (1, 2, 4)]


@pytest.mark.parametrize('check', CHECKS)
def test_dgx_keeps_the_cpu_masks_and_gives_srun_pyxis_options(dgx, check):
    tmp, scripts = dgx
    script, stagedir = scripts[check, 2]
    assert '#SBATCH --ntasks=16\n' in script and '#SBATCH --ntasks-per-node=8\n' in script
    assert '#SBATCH --cpus-per-task=14\n' in script and '#SBATCH --gpus-per-node=8\n' in script
    mounts = f'{tmp / "data"}:{tmp / "data"},' if check != 'InterconnectCheck' else ''
    # the image reference is quoted for the shell: it holds a '#'
    assert (f" --cpu-bind=mask_cpu:{DGX_MASKS} '--container-image={NGC_IMAGE}' "
            f'--container-mounts={mounts}{stagedir}:/rfm_workdir --container-workdir=/rfm_workdir '
            'sh ./launch/rank-env.sh python -u ./pytorch/') in srun_line(script)
    assert exports(script)['MLCHECK_VISIBLE_DEVICES_VARS'] == 'CUDA_VISIBLE_DEVICES'
    assert not (stagedir / 'rfm_env.toml').exists() and '--environment' not in script


def test_dgx_runs_a_squashfs_image_given_by_path(dgx, tmp_path):
    """An image imported beforehand (`enroot import` makes a .sqsh) is given by its path."""
    tmp, _ = dgx
    image = tmp_path / 'pytorch+25.11-py3.sqsh'
    image.touch()
    scripts = dry_run_scripts('dgx', 'dgx:batch', tmp, '-n', 'MNIST', '-P', 'num_nodes=1', '-P', f'image={image}')
    (script, _), = scripts.values()
    assert f' --container-image={image} --container-mounts=' in srun_line(script)


def test_dgx_warns_of_a_docker_style_reference_that_enroot_misreads(dgx, tmp_path):
    """Issue 30: `-P image=nvcr.io/nvidia/pytorch:25.11-py3` was taken without a word; Enroot reads
    it as a Docker Hub image and every node's import fails. One line at setup says how to write it."""
    tmp, _ = dgx
    done = run_reframe('dgx', tmp_path / 'rfm', '--system', 'dgx:batch', '--dry-run',
                       '-S', f'data_dir={tmp / "data"}', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', 'image=nvcr.io/nvidia/pytorch:25.11-py3')
    assert ('image nvcr.io/nvidia/pytorch:25.11-py3: Enroot reads this as a Docker Hub image; a '
            'registry other than Docker Hub is written nvcr.io#nvidia/pytorch:25.11-py3') in done.stdout + done.stderr
