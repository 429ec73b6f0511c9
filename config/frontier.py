"""Frontier (OLCF) batch partition: 8 GCDs of MI250X per node, Slingshot-11, PyTorch from a conda
environment with ROCm modules (no container: the image is `host`).

Facts from OLCF's Frontier user guide, https://docs.olcf.ornl.gov/systems/frontier_user_guide.html
(node layout, "Low-noise Mode Layout"): the node is LUMI-G's (config/_mi250x.py: one 64-core EPYC
in 8 L3 regions (CCDs) of 8 cores; low-noise mode with Slurm core specialization (-S 8, the
default) keeps the first core of every CCD, leaving 7 per GCD; GCD i is closest to CCD
[6, 7, 2, 3, 0, 1, 4, 5][i], GCD 4 on cores 0-7, GCD 0 on 48-55). From its PyTorch guide, https://docs.olcf.ornl.gov/software/analytics/pytorch_frontier.html:
the modules and their order; ranks start with srun, never torchrun (much slower there); the
`rccl-net-plugin` module, loaded after `rocm`, brings aws-ofi-nccl and sets the Slingshot
variables RCCL needs, and its FI_CXI_RDZV_PROTO=alt_read wants --network=disable_rdzv_get at
allocation; NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3, or hsn0 alone where ranks hang; MIOpen's
cache on node-local /tmp.
"""

import os

from mlcheck.harness.config import (builtin_environment, logging_config, run_prefix, shared_part,
                                    slurm_gpu_partition, storage_config)

# The conda environment with PyTorch for ROCm, and where the datasets are kept in torchvision's
# layouts (DIR/MNIST/raw, DIR/cifar-100-python): the support team's choice of directories.
CONDA_ENV = os.environ.get('MLCHECK_CONDA_ENV', '/lustre/orion/proj-shared/mlcheck/conda/pytorch')
DATA_DIR = os.environ.get('MLCHECK_DATA_DIR', '/lustre/orion/proj-shared/mlcheck/data')
# the node Frontier shares with LUMI-G: its topology, GPUs and intra-node limit
MI250X = shared_part('mi250x')

PREFIX = run_prefix('frontier')   # stage, output, perf logs and reframe.log

site_configuration = {
    'systems': [{
        'name': 'frontier',
        'prefix': PREFIX,
        'descr': 'Frontier',
        'hostnames': [r'login\d+\.frontier', r'frontier\d+'],
        'modules_system': 'lmod',
        'partitions': [slurm_gpu_partition({
            'name': 'batch',
            'descr': 'Frontier compute nodes: 8 MI250X GCDs per node',
            # the project to charge comes from SBATCH_ACCOUNT
            'access': ['--partition=batch', '--network=disable_rdzv_get'],
            # loaded in the job script, in this order (the plugin after rocm), as OLCF's guide does
            'modules': ['PrgEnv-gnu/8.7.0', 'cpe/26.03', 'miniforge3/23.11.0-0', 'rocm/7.1.1',
                        'rccl-net-plugin', 'craype-accel-amd-gfx90a'],
            'env_vars': [
                # a non-default CPE: its libraries before the system's (OLCF's PyTorch guide)
                ['LD_LIBRARY_PATH', '$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH'],
                ['NCCL_SOCKET_IFNAME', 'hsn0,hsn1,hsn2,hsn3'],   # 'hsn0' if ranks hang (above)
            ],
            'extras': {
                'mlcheck': {
                    **MI250X['NODE'],
                    'node_counts': [1, 2, 4],
                    'max_nodes': 9472,      # the largest job of the batch partition
                    'datasets': {'mnist': DATA_DIR, 'cifar100': DATA_DIR},
                    'host_python': os.path.join(CONDA_ENV, 'bin', 'python'),
                    'checks': {
                        'cifar100': {'model': 'resnet152', 'batch_size': 128, 'epochs': 3,
                                     'warmup_steps': 10, 'workers': 4},
                        # four Slingshot-11 NICs of 200 Gb/s (OLCF's guide): 100 GB/s into the fabric.
                        # Within a node, the ring all_reduce's ceiling over the 8 GCDs
                        # (config/_mi250x.py has the arithmetic)
                        'interconnect': {'fabric_limit': 100.0, 'node_limit': MI250X['NODE_LIMIT']},
                    },
                    'miopen_cache_root': '/tmp',    # node-local: MIOpen fails on Lustre/NFS
                    'net_plugin': {
                        'used_pattern': r'NET/OFI (?:Using|Initializing) aws-ofi-[rn]ccl',
                        'provider_pattern': r'NET/OFI Selected [Pp]rovider is (?P<provider>[^\s,(]+)',
                        'provider': 'cxi',
                        # each communicator's last word, "Using network <name>": "Libfabric" from
                        # aws-ofi-nccl after 1.11.0, "AWS Libfabric" or "OFI" where NCCL_NET names
                        # it so (aws-ofi-nccl, src/nccl_ofi_interface_nvidia.cpp); never Socket
                        'network': r'(?:AWS )?Libfabric|OFI',
                        # From 2 nodes on (docs/interconnect.md). OLCF's PyTorch guide, "RCCL Network
                        # Plugin": on Frontier "the network is not configured for single node jobs
                        # and the plugin will not initialize" (it sets NCCL_NET=Socket on one node).
                        'from_nodes': 2,
                    },
                },
            },
        })],
    }],
    'environments': [builtin_environment(['frontier'])],
    'logging': logging_config(PREFIX),
    # modules are loaded by the job script on the compute nodes; ReFrame does not load them
    # itself (nor needs Lmod where it runs)
    'general': [{'resolve_module_conflicts': False, 'target_systems': ['frontier']}],
    'storage': storage_config(os.path.join(os.path.expanduser('~'), '.local', 'share', 'mlcheck',
                                           'frontier-results.db')),
}
