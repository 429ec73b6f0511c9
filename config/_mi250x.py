"""The node LUMI-G (config/lumi.py) and Frontier (config/frontier.py) share: one 64-core EPYC in 8
CCDs of 8 cores, the first core of each kept for the system, and 4 MI250X of 2 GCDs each, GCD i
closest to CCD [6, 7, 2, 3, 0, 1, 4, 5][i].

Sources: LUMI's documentation (https://docs.lumi-supercomputer.eu/hardware/lumig/: core 0 of each
CCD reserved) and OLCF's Frontier user guide
(https://docs.olcf.ornl.gov/systems/frontier_user_guide.html, "Low-noise Mode Layout": Slurm's
core specialization -S 8, the default, keeps the first core of every CCD).

A part the site files share (its name starts with _, so config/all.py loads no site from it):
each reads it with mlcheck.harness.config.shared_part('mi250x').
"""

# extras.mlcheck's keys of the node itself
NODE = {
    'topology': {
        'cores_per_node': 64,
        'cores_per_domain': 8,
        'gpu_domains': [6, 7, 2, 3, 0, 1, 4, 5],
        'reserved_cores_per_domain': [0],
    },
    'gpu_vendor': 'amd',
    # one GCD's peak: AMD's MI250X specifications give 95.7 TFLOPS FP32 matrix and
    # 383.0 TFLOPS bf16 for the module of 2 GCDs (220 CUs at 1.7 GHz, with AMD's
    # ROCm "MI250 microarchitecture" page: 256 and 1024 FLOPS/clock/CU); MIOpen
    # runs fp32 convolutions on the matrix cores
    'gpu_peak_tflops': {'fp32': 47.9, 'bf16': 191.5},
}

# The intra-node limit (GB/s): the ceiling of a ring all_reduce's bus bandwidth over the 8 GCDs.
# An Infinity Fabric link between GPUs carries 50 GB/s per direction (16 wide, 25 GT/s); a GCD
# drives 8 links, 4 of them to the other GCD of its MI250X, 200 GB/s
# (https://rocm.docs.amd.com/en/latest/reference/gpu-arch/mi250.html). One more is the CPU's
# link to the GCD (36 GB/s, https://docs.lumi-supercomputer.eu/hardware/lumig/), so at most 3
# reach GCDs of other MI250X: 50 or 100 GB/s per pair
# (https://docs.olcf.ornl.gov/systems/frontier_user_guide.html, same node). busbw is the sum of
# the rings' rates and every ring leaves every MI250X at least once, so busbw <= one MI250X's
# links out = 2 GCDs x 3 links x 50 GB/s = 300 GB/s. A bound from the link budget, not a rate
# shown reachable: the documents do not say which pairs get 2 links, and RCCL picks its rings.
NODE_LIMIT = 300.0
