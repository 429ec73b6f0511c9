"""An NVIDIA DGX H100 cluster on InfiniBand, PyTorch from NGC images through Pyxis and Enroot:
the example of a Pyxis site (`srun --container-image=... --container-mounts=...
--container-workdir=...`).

Why this cluster: Pyxis and Enroot are NVIDIA's own, and DGX SuperPOD/BasePOD clusters of DGX H100
on an NDR InfiniBand compute fabric are where they run under Slurm; NCCL reaches InfiniBand with
its built-in transport, so unlike the Slingshot sites there is no network plugin to check, and
what this partition adds to the others is the container launcher alone. A site of this kind sets
its partition, account and data directory; confirm the node facts with `nvidia-smi topo -m`.

Where each fact comes from (read 2026-11):
- 8 H100 GPUs, 4 NVSwitch, dual Xeon Platinum 8480C with 112 cores in total, eight single-port
  ConnectX-7 of up to 400 Gb/s for the compute fabric: NVIDIA DGX BasePOD reference architecture,
  https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-foundation-enterprise-ai/latest/core-components.html
- GPUs 0-3 behind CPU 0, GPUs 4-7 behind CPU 1: NVIDIA DGX H100 User Guide, "Network Modules"
  (table 6, each GPU's ConnectX-7 and the CPU of its module). That CPU 0's cores are 0-55 is the
  usual numbering with one NUMA node per socket, not stated there.
- the Pyxis options and the Enroot image reference ([REGISTRY#]IMAGE[:TAG] or a squashfs file):
  https://github.com/NVIDIA/pyxis (README, "Usage")
"""

import os

from mlcheck.harness.config import (builtin_environment, logging_config, run_prefix, slurm_gpu_partition,
                                    storage_config)

DATA_DIR = os.environ.get('MLCHECK_DATA_DIR', '/lustre/mlcheck/data')

# Across nodes: 8 ConnectX-7 of 400 Gb/s, 400 GB/s into the fabric.
DGX_H100_FABRIC_LIMIT = 8 * 400 / 8
# Within a node: an H100 has 18 NVLink 4 links, 900 GB/s counting both directions, 450 GB/s out,
# all to the NVSwitches. A ring crosses the cut around one GPU in each direction: busbw <= 450.
# NCCL's NVLS algorithm reduces inside the NVSwitches and can report more (docs/container-sites.md).
DGX_H100_NODE_LIMIT = 18 * 25.0

PREFIX = run_prefix('dgx')   # stage, output, perf logs and reframe.log

site_configuration = {
    'systems': [{
        'name': 'dgx',
        'prefix': PREFIX,
        'descr': 'DGX H100 cluster (Pyxis example)',
        # an example cluster's names: a site puts its own (a bare login\d+ would be Perlmutter's too)
        'hostnames': [r'dgx-login\d+', r'dgx\d+'],
        'modules_system': 'nomod',     # images bring their software
        'partitions': [slurm_gpu_partition({
            'name': 'batch',
            'descr': 'DGX H100: 8 H100 per node, NDR InfiniBand',
            'access': ['--partition=batch', '--exclusive'],
            'container_platforms': [{'type': 'Pyxis'}],
            'extras': {
                'mlcheck': {
                    'topology': {
                        'cores_per_node': 112,
                        'cores_per_domain': 56,                  # one Xeon 8480C
                        'gpu_domains': [0, 0, 0, 0, 1, 1, 1, 1],  # 14 cores per GPU
                    },
                    'gpu_vendor': 'nvidia',
                    # NVIDIA's H100 datasheet, H100 SXM: TF32 tensor core 989 and BFLOAT16 1,979
                    # TFLOPS with sparsity, half that dense; torch lets cuDNN run fp32 convolutions as TF32
                    'gpu_peak_tflops': {'fp32': 494.5, 'bf16': 989.5},
                    'node_counts': [1, 2, 4],
                    # NGC's PyTorch, imported by Enroot on each node; a squashfs made beforehand
                    # with `enroot import` is given by its path instead
                    'images': ['nvcr.io#nvidia/pytorch:25.11-py3'],
                    'datasets': {'mnist': DATA_DIR, 'cifar100': DATA_DIR},
                    'python': 'python',
                    'checks': {
                        'cifar100': {'model': 'resnet152', 'batch_size': 128, 'epochs': 3,
                                     'warmup_steps': 10, 'workers': 4},
                        'interconnect': {'fabric_limit': DGX_H100_FABRIC_LIMIT,
                                         'node_limit': DGX_H100_NODE_LIMIT},
                    },
                },
            },
        })],
    }],
    'environments': [builtin_environment(['dgx'])],
    'logging': logging_config(PREFIX),
    'storage': storage_config(os.path.join(os.path.expanduser('~'), '.local', 'share', 'mlcheck',
                                           'dgx-results.db')),
}
