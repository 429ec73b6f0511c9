"""Perlmutter (NERSC) GPU nodes: 4 NVIDIA A100 per node, Slingshot-11, PyTorch in Shifter images.

From NERSC's architecture page: a GPU node has one 64-core AMD EPYC 7763 and 4 A100s, and 4
Slingshot NICs (hsn0-hsn3). The CPU runs as 4 NUMA domains of 16 cores, GPU i nearest domain 3 - i,
and Shifter's `gpu` and `nccl-plugin` modules bring the host's CUDA driver and aws-ofi-nccl (NCCL
over libfabric's cxi provider): these three are from NERSC's user guides as remembered, not
re-read here; confirm them on a node (`nvidia-smi topo -m`, `shifter --help`) before trusting a run.
"""

import os

from mlcheck.rfm_config import builtin_environment, logging_config, storage_config

DATA_DIR = os.environ.get('MLCHECK_DATA_DIR', '/global/cfs/cdirs/mlcheck/data')

site_configuration = {
    'systems': [{
        'name': 'perlmutter',
        'descr': 'Perlmutter',
        'hostnames': [r'login\d+', r'nid\d+'],
        'modules_system': 'nomod',     # images bring their software
        'partitions': [{
            'name': 'gpu',
            'descr': 'Perlmutter GPU nodes: 4 A100 per node',
            'scheduler': 'slurm',
            'launcher': 'srun',
            # the project to charge (its name ends in _g) comes from SBATCH_ACCOUNT
            'access': ['--constraint=gpu', '--qos=regular', '--exclusive'],
            'environs': ['builtin'],
            'max_jobs': 20,
            'time_limit': '30m',
            'container_platforms': [{'type': 'Shifter'}],
            'resources': [
                {'name': '_rfm_gpu', 'options': ['--gpus-per-node={num_gpus_per_node}']},
            ],
            'env_vars': [
                ['NCCL_SOCKET_IFNAME', 'hsn0,hsn1,hsn2,hsn3'],
            ],
            'extras': {
                'mlcheck': {
                    'topology': {
                        'cores_per_node': 64,
                        'cores_per_domain': 16,
                        'gpu_domains': [3, 2, 1, 0],
                    },
                    'gpu_vendor': 'nvidia',
                    'node_counts': [1, 2, 4],
                    # NERSC's PyTorch images, pulled with shifterimg beforehand
                    'images': ['docker:nersc/pytorch:24.06.01'],
                    'container_options': ['--module=gpu,nccl-plugin'],
                    'datasets': {'mnist': DATA_DIR, 'cifar100': DATA_DIR},
                    'python': 'python',
                    'checks': {
                        'cifar100': {'model': 'resnet152', 'batch_size': 128, 'epochs': 3,
                                     'warmup_steps': 10, 'workers': 4},
                    },
                    'net_plugin': {
                        'used_pattern': r'NET/OFI (?:Using|Initializing) aws-ofi-nccl',
                        'provider_pattern': r'NET/OFI Selected [Pp]rovider is (?P<provider>[^\s,(]+)',
                        'provider': 'cxi',
                    },
                },
            },
        }],
    }],
    'environments': [builtin_environment(['perlmutter'])],
    'logging': logging_config(),
    'storage': storage_config(os.path.join(os.path.expanduser('~'), '.local', 'share', 'mlcheck',
                                           'perlmutter-results.db')),
}
