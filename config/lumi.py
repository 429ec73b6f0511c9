"""LUMI-G (standard-g): 8 GCDs of MI250X per node, Slingshot-11, PyTorch in Singularity images.

Facts from LUMI's documentation: the node is Frontier's (config/_mi250x.py: 64 cores in 8 CCDs
of 8, core 0 of each CCD reserved, GCD i closest to CCD [6, 7, 2, 3, 0, 1, 4, 5][i]); RCCL reaches
Slingshot through the aws-ofi-rccl plugin with libfabric's cxi provider.
"""

import os

from mlcheck.harness.config import (builtin_environment, logging_config, run_prefix, shared_part,
                                    slurm_gpu_partition, storage_config)

# Where the support team keeps the datasets in torchvision's layouts:
# DIR/MNIST/raw/*-ubyte and DIR/cifar-100-python/{train,test,meta}.
DATA_DIR = os.environ.get('MLCHECK_DATA_DIR', '/appl/local/mlcheck/data')

# the node LUMI-G shares with Frontier: its topology, GPUs and intra-node limit
MI250X = shared_part('mi250x')

PREFIX = run_prefix('lumi')   # stage, output, perf logs and reframe.log

site_configuration = {
    'systems': [{
        'name': 'lumi',
        'prefix': PREFIX,
        'descr': 'LUMI',
        'hostnames': [r'uan\d+', r'nid\d+'],
        'modules_system': 'nomod',     # images bring their software; no modules are loaded
        'partitions': [slurm_gpu_partition({
            'name': 'standard-g',
            'descr': 'LUMI-G: 8 MI250X GCDs per node',
            'access': ['--partition=standard-g', '--exclusive'],
            'container_platforms': [{'type': 'Singularity'}],
            'env_vars': [
                # RCCL must use the Slingshot interfaces, never the management network
                ['NCCL_SOCKET_IFNAME', 'hsn0,hsn1,hsn2,hsn3'],
            ],
            'extras': {
                'mlcheck': {
                    **MI250X['NODE'],
                    # LUMI's documented binding; its 2026 one (since Slurm 24.05) is 'by_domain':
                    # CCDs in order, --gpu-bind=map_gpu:4,5,2,3,6,7,0,1 (-S binding=by_domain)
                    'binding': 'by_gpu',
                    'gpu_task_sharing': True,   # with by_domain: RCCL reaches the other GCDs
                    'node_counts': [1, 2, 4],
                    'max_nodes': 1024,      # the most nodes one standard-g job may have
                    # Two generations of images, each with the RCCL settings it was published
                    # with: set partition-wide, either generation's would hang the other's jobs.
                    'images': [
                        # LUMI's older PyTorch images (lumi-pytorch-rocm-6.2.4-...): LUMI-AI-Guide
                        # ran them with NCCL_NET_GDR_LEVEL=PHB, for GPU RDMA to the NICs, until
                        # https://github.com/Lumi-supercomputer/LUMI-AI-Guide/pull/97
                        {'path': '/appl/local/containers/sif-images/lumi-pytorch-*.sif',
                         'env_vars': {'NCCL_NET_GDR_LEVEL': 'PHB'}},
                        # LUMI AI Factory's images: from ROCm 7.0 (u24r70...) a multi-node RCCL init
                        # hangs with NCCL_NET_GDR_LEVEL=PHB or SYS and is as fast without it
                        # (https://github.com/lumi-ai-factory/laifs-container-recipes/issues/28 and
                        # issues/30, LUMI-AI-Guide PR #97), and FI_MR_CACHE_MONITOR=userfaultfd keeps
                        # their jobs from hanging (LUMI-AI-Guide PR #118,
                        # https://github.com/Lumi-supercomputer/LUMI-AI-Guide/pull/118).
                        # The guide runs them after `module load lumi-aif-singularity-bindings`; that
                        # the container_binds below do the same for them is not checked here.
                        {'path': '/appl/local/laifs/containers/lumi-multitorch-*/lumi-multitorch-full-*.sif',
                         'env_vars': {'FI_MR_CACHE_MONITOR': 'userfaultfd'}},
                    ],
                    'container_binds': ['/var/spool/slurmd', '/opt/cray',
                                        '/usr/lib64/libcxi.so.1', '/usr/lib64/libjansson.so.4'],
                    # -S compare_layers=aws-ofi-nccl: the images' RCCL with a network plugin the
                    # admins have not installed (docs/ab-images.md). ROCm/aws-ofi-rccl is deprecated
                    # for upstream aws/aws-ofi-nccl, which builds for ROCm too (both READMEs). A
                    # build with its libfabric beside it (found by its RUNPATH), bound where it lies
                    # on the host, and NCCL_NET_PLUGIN naming its library: NCCL takes "a suffix
                    # string or a library name" there (microsoft/mrc-nccl-plugin's README, a path);
                    # RCCL's docs ("Using the NCCL Net plugin API") show only the suffix form
                    # (librccl-net-<suffix>.so on the library path), so that RCCL loads the path is
                    # not checked here. The current layer: the images' own plugin, /opt/cray above.
                    # The path is where this config expects the admins to put a candidate build:
                    # it does not exist until they do, and a run with it fails until then.
                    'host_layer_candidates': {
                        'aws-ofi-nccl': {
                            'binds': ['/appl/local/mlcheck/candidates/aws-ofi-nccl'],
                            'env_vars': {'NCCL_NET_PLUGIN':
                                         '/appl/local/mlcheck/candidates/aws-ofi-nccl/lib/librccl-net.so'},
                        },
                    },
                    'datasets': {'mnist': DATA_DIR, 'cifar100': DATA_DIR},
                    # the course's benchmark in full: ResNet-152, whole epochs
                    'checks': {
                        'cifar100': {'model': 'resnet152', 'batch_size': 128, 'epochs': 3,
                                     'warmup_steps': 10, 'workers': 4},
                        # four Slingshot-11 NICs of 200 Gb/s per node: 100 GB/s into the
                        # fabric. Within a node: the ceiling of a ring all_reduce's busbw over
                        # the 8 GCDs, the MI250X's Infinity Fabric out of one package
                        'interconnect': {'fabric_limit': 100.0, 'node_limit': MI250X['NODE_LIMIT']},
                    },
                    'python': 'python',
                    # older LUMI images need their conda environment activated first
                    'rank_prelude': 'if [ -n "${WITH_CONDA:-}" ]; then eval "$WITH_CONDA"; fi',
                    'miopen_cache_root': '/tmp',
                    'net_plugin': {
                        # aws-ofi-rccl 1.4: "NET/OFI Using aws-ofi-rccl 1.4.0"; aws-ofi-nccl
                        # 1.7.4 and later: "NET/OFI Initializing aws-ofi-nccl 1.x"; NCCL 2.14 and
                        # later: "NET/Plugin: Loaded net plugin AWS Libfabric (v6)"
                        'used_pattern': r'NET/OFI (?:Using|Initializing) aws-ofi-[rn]ccl'
                                        r'|NET/Plugin: Loaded net plugin (?:AWS )?Libfabric',
                        # "Selected Provider is cxi", "... is cxi (found 4 nics)",
                        # "Selected provider is cxi, fabric is cxi (found 4 nics)"
                        'provider_pattern': r'NET/OFI Selected [Pp]rovider is (?P<provider>[^\s,(]+)',
                        'provider': 'cxi',
                        # each communicator's last word: "Using network AWS Libfabric"; aws-ofi-nccl
                        # after 1.11.0 "Libfabric", and "AWS Libfabric" or "OFI" where NCCL_NET
                        # names it so (src/nccl_ofi_interface_nvidia.cpp of
                        # github.com/aws/aws-ofi-nccl); never Socket or IB on Slingshot
                        'network_pattern': r'NCCL INFO Using network (?P<network>.*\S)',
                        'network': r'(?:AWS )?Libfabric|OFI',
                        # NCCL without the plugin: before 2.27 "No plugin found (libnccl-net.so),
                        # using internal implementation" or "Could not find: libnccl-net.so.
                        # Using internal network plugin."; since 2.27 "Could not find: libnccl-net.so."
                        'fallback_pattern': r'No plugin found \(libnccl-net\.so\), using internal implementation'
                                            r'|Could not find: libnccl-net\.so\.?(?: Using internal network plugin\.)?',
                        # From 2 nodes on (docs/interconnect.md): Slurm on Slingshot gives a
                        # single-node step no VNI by default; LUMI's documentation says nothing of
                        # one node.
                        'from_nodes': 2,
                    },
                },
            },
        })],
    }],
    'environments': [builtin_environment(['lumi'])],
    'logging': logging_config(PREFIX),
    # each user's sessions on local disk (RFM_SQLITE_DB_FILE to share one, e.g. in a project dir)
    'storage': storage_config(os.path.join(os.path.expanduser('~'), '.local', 'share', 'mlcheck',
                                           'lumi-results.db')),
}
