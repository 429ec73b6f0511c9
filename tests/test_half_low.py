"""One against its peers when the low ones are half of them (issue 30): the median sat halfway
between two groups and named neither. Low power, slow ranks and slow pairs now share one rule
(mlcheck.judging.peers); each case here passed unnamed before it."""

import random

from hypothesis import given, settings, strategies as st

from mlcheck.figures import gpu_use as figures
from mlcheck.judging import collectives, gpu_health, output, sanity
from saved_outputs import fact_line


def power_run(watts, gpus_per_node=8, secondary=()):
    """A run whose rank r, GPU r % gpus_per_node on node r // gpus_per_node, drew watts[r]
    (ranks in `secondary`: an MI250X secondary die, no power of its own)."""
    lines = []
    for rank, w in enumerate(watts):
        node = f'nid{rank // gpus_per_node + 1:03d}'
        fact = {'power_w': w} if rank not in secondary else {'power_note': 'secondary die: ...'}
        lines += [fact_line({'event': 'rank', 'rank': rank, 'node': node, 'local_rank': rank % gpus_per_node}, task=rank),
                  fact_line({'event': 'telemetry', 'rank': rank, 'gpu': rank % gpus_per_node,
                             'utilization': 99.0, **fact}, task=rank)]
    return output.parse(''.join(lines))


def test_a_whole_node_of_two_at_two_thirds_power_is_named_as_the_node():
    watts = [500, 505, 498, 502, 501, 499, 503, 500] + [300, 320, 350, 335, 310, 345, 330, 325]
    run = power_run(watts)
    assert gpu_health.problems(run, 0.75) == [
        'node nid002 draws too little: every GPU of it, ranks 8-15, drew 300-350 W, 0.60-0.70 '
        'of the upper-quartile GPU (500 W; limit 0.75)']
    assert figures.lowest_power_fraction(run) < 0.75       # the median read 0.75 here


def test_one_gpu_of_two_at_0_62_is_named():
    found = gpu_health.problems(power_run([500, 310], gpus_per_node=2), 0.75)
    assert len(found) == 1 and found[0].startswith('rank 1 on nid001 (GPU 1) drew 310 W, 0.62')


def test_two_mi250x_packages_at_560_and_392_w():
    found = gpu_health.problems(power_run([560, None, 392, None], secondary=(1, 3)), 0.75)
    assert found == ['the package of GCDs 2-3 on nid001 (ranks 2, 3) drew 392 W, 0.70 of the '
                     'upper-quartile package (560 W; limit 0.75); utilization GCD 2 99 %, GCD 3 99 %']


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 4096), share=st.floats(0, 0.5), seed=st.integers(0, 2**32 - 1))
def test_k_of_n_gpus_at_two_thirds_power_are_named(n, share, seed):
    """n GPUs within 3 % of 500 W, k <= n/2 of them (anywhere, one GPU a node) at 0.5-0.68 of it:
    exactly those named by the power rule at its default 0.75."""
    rng = random.Random(seed)
    low = set(rng.sample(range(n), int(share * n)))
    watts = {r: 500 * (rng.uniform(0.5, 0.68) if r in low else rng.uniform(0.97, 1.03)) for r in range(n)}
    named, _ = gpu_health.low_power(power_run([watts[r] for r in range(n)], gpus_per_node=1), 0.75)
    assert {rank for rank, _ in named} == low


def test_half_the_ranks_slow_at_two_nodes_are_named_as_their_node():
    lines = []
    for rank in range(16):
        node = f'nid{rank // 8 + 1:03d}'
        lines += [fact_line({'event': 'rank', 'rank': rank, 'node': node, 'local_rank': rank % 8}, task=rank),
                  fact_line({'event': 'solo', 'rank': rank, 'samples_per_s': 1000 if rank < 8 else 650},
                            task=rank)]
    expect = sanity.Expectations(num_nodes=2, tasks_per_node=8, masks=(), gpus=True, slow_rank_fraction=0.75)
    found = sanity.slow_ranks(output.parse(''.join(lines)), expect)
    assert len(found) == 1 and found[0].startswith('node nid002 is slow: ranks 8-15')


def test_half_the_pairs_slow_are_named():
    """Four pairs of a ring, two of them (not sharing a node) at 0.4 of the others: the median
    was 0.7 of the fast pairs, and a 0.5 limit named neither."""
    speeds = {('nid001', 'nid002'): 2.5, ('nid002', 'nid003'): 1.0, ('nid003', 'nid004'): 2.5,
              ('nid004', 'nid001'): 1.0}
    pairs = [{'event': 'pair', 'nodes': list(nodes), 'GBps': gbps} for nodes, gbps in speeds.items()]
    found = collectives.slow_pairs(output.parse(''.join(fact_line(p, task=0) for p in pairs)), 0.5)
    assert [line.split(':')[0] for line in found] == ['node pair nid002 <-> nid003',
                                                      'node pair nid004 <-> nid001']
