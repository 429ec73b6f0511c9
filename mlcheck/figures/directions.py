"""Which way each performance figure is better: the one table that the report's verdicts, the
baseline's reference bounds and the perf logs of the tests read (tests/test_directions.py holds
every figure a check declares to an entry here).

A unit says too little: memory in GB is better lower (a doubled peak is a leak), power in W is
neither (less power at the same speed is no loss, more is no gain; the throughput figures judge
the speed, and judging.gpu_health names a GPU drawing too little against its peers), so power
is informational: its changes are shown, never a verdict that fails the gate.
"""

HIGHER, LOWER, INFORMATIONAL = 'higher', 'lower', 'informational'

BETTER = {
    # throughput and how much of it each part keeps
    'samples_per_s': HIGHER, 'samples_per_s_per_gpu': HIGHER,
    'images_per_s': HIGHER, 'images_per_s_per_gpu': HIGHER, 'loader_images_per_s': HIGHER,
    'model_gflop_per_s': HIGHER, 'model_flops_of_peak': HIGHER, 'scaling_efficiency': HIGHER,
    'slowest_rank_fraction': HIGHER, 'communication_efficiency': HIGHER,
    'busbw': HIGHER, 'busbw_of_limit': HIGHER, 'slowest_pair_bw': HIGHER,
    'gpu_utilization': HIGHER, 'lowest_gpu_power_fraction': HIGHER,
    # time and memory
    'train_time': LOWER, 'latency': LOWER, 'peak_gpu_memory': LOWER, 'peak_host_memory': LOWER,
    # what the GPUs drew: shown, not judged (see above); the machine's speed read in the job,
    # which the simulated partition's loader reference follows (mlcheck.judging.references)
    'gpu_power': INFORMATIONAL, 'job_speed': INFORMATIONAL,
    # -S compare_with: B/A of two images in one job, judged by its own verdict (mlcheck.ab.rule)
    'ab_ratio': HIGHER, 'ab_ratio_low': INFORMATIONAL, 'ab_ratio_high': INFORMATIONAL,
}

# a figure not in BETTER (another suite's, or an old perf log's) is judged by its unit
# a job's speed as a share of a faster reference: over the same GPUs training alone
# (communication), over one node's per-GPU rate (scaling). Where the reference speeds up more
# than the job (faster GPUs, an exchange that takes as long), the share falls on a faster job
SHARES = frozenset({'communication_efficiency', 'scaling_efficiency'})
TIME_UNITS = {'s', 'ms', 'us', 'min', 'h'}


def better(var, unit):
    """HIGHER, LOWER or INFORMATIONAL for performance variable `var` measured in `unit`."""
    return BETTER.get(var) or (LOWER if unit in TIME_UNITS else HIGHER)


def worse_by(var, unit, change):
    """A relative change (after / before - 1) as how much worse it is: positive is worse; None
    for an informational figure."""
    direction = better(var, unit)
    if direction == INFORMATIONAL:
        return None
    return -change if direction == HIGHER else change
