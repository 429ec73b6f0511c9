"""Perlmutter (NERSC) GPU nodes: 4 NVIDIA A100 per node, Slingshot-11, PyTorch in Shifter images.

Where each fact comes from (read 2026-11; confirm on a node with `nvidia-smi topo -m` before
trusting a run):
- one AMD EPYC 7763 (64 cores), 4 A100 and 4 Slingshot-11 NICs per GPU node:
  https://docs.nersc.gov/systems/perlmutter/architecture/
- GPU i is nearest the cores of block 3 - i (16 cores each): NERSC's own job scripts set
  CUDA_VISIBLE_DEVICES=3,2,1,0 so that Slurm's default placement of 4 tasks of 16 cores puts each
  task by its GPU, https://github.com/NERSC/sc25-dl-tutorial/blob/main/submit_pm_dp.sh. That the
  blocks are NUMA domains (NPS4) is not stated in the pages read; the masks only need the blocks.
- the Shifter modules `gpu,nccl-plugin` and the image nersc/pytorch:25.06.01: the same script;
  `nccl-plugin` brings the NCCL network plugin (aws-ofi-nccl) into the container, documented by
  https://gitlab.com/NERSC/nersc.gitlab.io/-/merge_requests/2708
"""

import os

from mlcheck.harness.config import (builtin_environment, logging_config, run_prefix, slurm_gpu_partition,
                                    storage_config)

DATA_DIR = os.environ.get('MLCHECK_DATA_DIR', '/global/cfs/cdirs/mlcheck/data')

PREFIX = run_prefix('perlmutter')   # stage, output, perf logs and reframe.log

site_configuration = {
    'systems': [{
        'name': 'perlmutter',
        'prefix': PREFIX,
        'descr': 'Perlmutter',
        'hostnames': [r'login\d+', r'nid\d+'],
        'modules_system': 'nomod',     # images bring their software
        'partitions': [slurm_gpu_partition({
            'name': 'gpu',
            'descr': 'Perlmutter GPU nodes: 4 A100 per node',
            # the project to charge (its name ends in _g) comes from SBATCH_ACCOUNT
            'access': ['--constraint=gpu', '--qos=regular', '--exclusive'],
            'container_platforms': [{'type': 'Shifter'}],
            'env_vars': [
                ['NCCL_SOCKET_IFNAME', 'hsn0,hsn1,hsn2,hsn3'],
            ],
            'extras': {
                'mlcheck': {
                    'topology': {
                        'cores_per_node': 64,
                        'cores_per_domain': 16,
                        'gpu_domains': [3, 2, 1, 0],     # GPU i by cores 16*(3-i).. (above)
                    },
                    'gpu_vendor': 'nvidia',
                    # NVIDIA's A100 datasheet (A100 SXM, 40 and 80 GB alike): TF32 tensor core 156
                    # and BFLOAT16 312 TFLOPS dense; torch lets cuDNN run fp32 convolutions as TF32
                    'gpu_peak_tflops': {'fp32': 156, 'bf16': 312},
                    'node_counts': [1, 2, 4],
                    # NERSC's PyTorch image of its SC25 tutorial (above), pulled with shifterimg
                    # beforehand; 24.06.01 and 24.06.02 are the SC24 ones
                    'images': ['docker:nersc/pytorch:25.06.01'],
                    'container_options': ['--module=gpu,nccl-plugin'],
                    'datasets': {'mnist': DATA_DIR, 'cifar100': DATA_DIR},
                    'python': 'python',
                    'checks': {
                        'cifar100': {'model': 'resnet152', 'batch_size': 128, 'epochs': 3,
                                     'warmup_steps': 10, 'workers': 4},
                        # 4 Slingshot-11 NICs of 200 Gb/s per node (architecture page): 100 GB/s into
                        # the fabric. Within a node, the ceiling of a ring all_reduce's busbw over the
                        # 4 A100: an A100 has 12 NVLink 3 links of 25 GB/s per direction, 300 GB/s out
                        # (https://www.nvidia.com/en-us/data-center/a100/: 600 GB/s both ways), and
                        # each GPU links directly to each other one (https://docs.nersc.gov/
                        # beginner-guide/nodetypesfig/): 12 links make 4 per pair, 100 GB/s.
                        # busbw is what each GPU sends per second, summed over the rings, so <= 300;
                        # the 6 ring orders at 50 GB/s each fill every pair's 100 GB/s: reachable.
                        'interconnect': {'fabric_limit': 100.0, 'node_limit': 300.0},
                    },
                    'net_plugin': {
                        'used_pattern': r'NET/OFI (?:Using|Initializing) aws-ofi-nccl',
                        'provider_pattern': r'NET/OFI Selected [Pp]rovider is (?P<provider>[^\s,(]+)',
                        'provider': 'cxi',
                        # each communicator's last word, "Using network <name>": "Libfabric" from
                        # aws-ofi-nccl after 1.11.0, "AWS Libfabric" or "OFI" where NCCL_NET names
                        # it so (aws-ofi-nccl, src/nccl_ofi_interface_nvidia.cpp); never Socket
                        'network': r'(?:AWS )?Libfabric|OFI',
                        # From 2 nodes on (docs/interconnect.md): Slurm on Slingshot gives a
                        # single-node step no VNI by default; NERSC's pages found say nothing of
                        # one node.
                        'from_nodes': 2,
                    },
                },
            },
        })],
    }],
    'environments': [builtin_environment(['perlmutter'])],
    'logging': logging_config(PREFIX),
    'storage': storage_config(os.path.join(os.path.expanduser('~'), '.local', 'share', 'mlcheck',
                                           'perlmutter-results.db')),
}
