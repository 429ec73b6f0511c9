"""Alps (CSCS), Daint's GH200 nodes: 4 GH200 per node, Slingshot-11, PyTorch from an NGC image
through CSCS's Container Engine (`srun --environment=EDF`) with the aws-ofi-nccl hook.

Where each fact comes from (cscs-docs at 80abed1, 2026-08; cscs-reframe-tests at 2f81355, 2026-08):
- four Grace-Hopper modules and four NICs per node: https://docs.cscs.ch/alps/hardware/ ("NVIDIA
  GH200 GPU Nodes"); the system name `daint`, partition `normal` and 4 GPUs per node:
  eth-cscs/cscs-reframe-tests, config/systems/daint.py
- 72 cores per Grace CPU, each its own NUMA node, rank i of `srun -n4 -c72` on cores 72i..72i+71,
  and "each GPU is attached to the corresponding NUMA node":
  https://docs.cscs.ch/running/slurm/ (affinity examples, "NVIDIA GH200 GPU Nodes", the MPS wrapper)
- the EDF (image, mounts, workdir, [env], [annotations]): https://docs.cscs.ch/software/container-engine/edf/;
  the aws-ofi-nccl hook and its `cuda-dl` variant, with the NGC PyTorch 25.11 example:
  https://docs.cscs.ch/software/container-engine/resource-hook/ ("AWS OFI NCCL hook")
- the NCCL and libfabric variables: https://docs.cscs.ch/software/communication/nccl/ (the file
  nccl_env_vars it includes); CUDA_CACHE_DISABLE and MPICH_GPU_SUPPORT_ENABLED from the EDF of
  https://docs.cscs.ch/software/ml/pytorch/
"""

import os

from mlcheck.harness.config import (builtin_environment, logging_config, run_prefix, slurm_gpu_partition,
                                    storage_config)

DATA_DIR = os.environ.get('MLCHECK_DATA_DIR', '/capstor/store/cscs/mlcheck/data')

# The fabric limit (GB/s): four Slingshot-11 NICs of 200 Gb/s (25 GB/s) per node, 100 GB/s into
# the fabric. CSCS states the four NICs (hardware page); 200 Gb/s is the Slingshot-11 NIC's rate,
# as NERSC and LUMI document it for the same NIC (config/perlmutter.py, config/lumi.py).
GH200_FABRIC_LIMIT = 4 * 200 / 8
# The node limit (GB/s): a GH200's Hopper GPU has 18 NVLink 4 links, 900 GB/s counting both
# directions (https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/), 450 GB/s out.
# A ring all_reduce crosses the cut around any one GPU in each direction, so its busbw is at most
# that GPU's links out, however the 18 links are shared among the other three: 450 GB/s.
GH200_NODE_LIMIT = 18 * 25.0
# CSCS's all_reduce figures for 2 GH200 nodes, 4 ranks each (busbw, GB/s): the anchors the limits
# are checked against (tests/test_dry_run_alps.py). 150 at 1 GiB: the reference of CSCS's
# NCCLTestsCE (cscs-reframe-tests, checks/microbenchmarks/xccl/xccl_tests.py); 122.57 at 128 MiB,
# and 5.43 with the CXI hook off: https://docs.cscs.ch/software/communication/nccl/ ("NCCL
# Performance"). Both exceed the fabric limit: on two nodes NCCL runs its tree, whose traffic
# between the nodes is algbw, so busbw = 2(n-1)/n algbw may reach 1.75 x 100 GB/s with n = 8
# (NVIDIA/nccl-tests#22 and #196; the arithmetic in docs/container-sites.md).
CSCS_ALL_REDUCE_2_NODES = {'1 GiB': 150.0, '128 MiB': 122.57, '128 MiB, CXI hook off': 5.43}

PREFIX = run_prefix('daint')   # stage, output, perf logs and reframe.log

site_configuration = {
    'systems': [{
        'name': 'daint',
        'prefix': PREFIX,
        'descr': 'Alps: Daint GH200 nodes',
        'hostnames': [r'daint', r'nid\d+'],
        'modules_system': 'nomod',     # images bring their software
        'partitions': [slurm_gpu_partition({
            'name': 'normal',
            'descr': 'GH200: 4 Grace-Hopper modules per node',
            # the project to charge comes from SBATCH_ACCOUNT
            'access': ['--partition=normal', '--exclusive'],
            'container_platforms': [{'type': 'ContainerEngine'}],
            'extras': {
                'mlcheck': {
                    'topology': {
                        'cores_per_node': 288,
                        'cores_per_domain': 72,        # one Grace CPU, one NUMA node
                        'gpu_domains': [0, 1, 2, 3],   # GPU i by NUMA node i (above)
                    },
                    'gpu_vendor': 'nvidia',
                    'node_counts': [1, 2, 4],
                    # NGC's PyTorch, the image of CSCS's hook example (above), an Enroot reference
                    'images': ['nvcr.io#nvidia/pytorch:25.11-py3'],
                    'edf': {
                        'env': {
                            # NCCL's plugin or failure, never its TCP fallback (nccl.md)
                            'NCCL_NET': 'AWS Libfabric',
                            'NCCL_NET_GDR_LEVEL': 'PHB',
                            'NCCL_CROSS_NIC': '1',
                            'NCCL_PROTO': '^LL128',   # LL128, NCCL's default since 2.27, is slower here
                            'FI_CXI_DEFAULT_CQ_SIZE': '131072',
                            'FI_CXI_DEFAULT_TX_SIZE': '16384',
                            'FI_CXI_DISABLE_HOST_REGISTER': '1',
                            'FI_CXI_RX_MATCH_MODE': 'software',
                            'FI_MR_CACHE_MONITOR': 'userfaultfd',
                            'CUDA_CACHE_DISABLE': '1',          # no JIT cache on the shared file system
                            'MPICH_GPU_SUPPORT_ENABLED': '0',   # GPU-aware MPI beside NCCL can deadlock
                        },
                        'annotations': {
                            'com.hooks.aws_ofi_nccl.enabled': 'true',
                            'com.hooks.aws_ofi_nccl.variant': 'cuda-dl',   # any CUDA version
                        },
                    },
                    # -S compare_layers=aws-ofi-nccl: a plugin build the admins have not
                    # installed. The hook mounts the host's plugin and sets NCCL_NET_PLUGIN to it
                    # (resource-hook page); the candidate turns it off, keeps the CXI hook (host
                    # libfabric and Slingshot devices, which the plugin hook otherwise enables) and
                    # mounts its own build. The engine's other way, the hooks' libraries from a
                    # prebuilt artifact, is a candidate of annotations alone:
                    # {'annotations': {'com.hooks.netstack.source': 'artifact'}} (same page).
                    # The path is where this config expects the admins to put a candidate build:
                    # it does not exist until they do, and a run with it fails until then.
                    'host_layer_candidates': {
                        'aws-ofi-nccl': {
                            'binds': ['/capstor/store/cscs/mlcheck/candidates/aws-ofi-nccl'],
                            'env_vars': {'NCCL_NET_PLUGIN':
                                         '/capstor/store/cscs/mlcheck/candidates/aws-ofi-nccl/lib/libnccl-net.so'},
                            'annotations': {'com.hooks.aws_ofi_nccl.enabled': 'false',
                                            'com.hooks.cxi.enabled': 'true'},
                        },
                    },
                    'datasets': {'mnist': DATA_DIR, 'cifar100': DATA_DIR},
                    'python': 'python',
                    'checks': {
                        'cifar100': {'model': 'resnet152', 'batch_size': 128, 'epochs': 3,
                                     'warmup_steps': 10, 'workers': 4},
                        'interconnect': {'fabric_limit': GH200_FABRIC_LIMIT,
                                         'node_limit': GH200_NODE_LIMIT},
                    },
                    'net_plugin': {
                        # aws-ofi-nccl's own line, or NCCL's "Loaded net plugin Libfabric"
                        'used_pattern': r'NET/OFI (?:Using|Initializing) aws-ofi-nccl'
                                        r'|NET/Plugin: Loaded net plugin (?:AWS )?Libfabric',
                        # CSCS's xccl sanity: "NET/OFI Selected [pP]rovider is cxi"
                        'provider_pattern': r'NET/OFI Selected [Pp]rovider is (?P<provider>[^\s,(]+)',
                        'provider': 'cxi',
                        # "Using network Libfabric": the plugin's name after aws-ofi-nccl 1.11.0;
                        # "AWS Libfabric", its older name, still when NCCL_NET asks for it, as
                        # the env above does (aws/aws-ofi-nccl, nvidia_plugin_name_fixup())
                        'network_pattern': r'NCCL INFO Using network (?P<network>.*\S)',
                        'network': r'(?:AWS )?Libfabric',
                    },
                },
            },
        })],
    }],
    'environments': [builtin_environment(['daint'])],
    'logging': logging_config(PREFIX),
    'storage': storage_config(os.path.join(os.path.expanduser('~'), '.local', 'share', 'mlcheck',
                                           'daint-results.db')),
}
