"""mlcheck.judging.peers: one against its peers, the rule of slow ranks, low power, slow pairs and
the node sweep. Generated peers of known truth: k of n made slower, k <= n/2."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from mlcheck.judging import peers

THRESHOLD, NOISE = 0.10, 0.03   # healthy values vary by up to NOISE about the base

@settings(max_examples=300, deadline=None)
@given(n=st.integers(2, 4096), share=st.floats(0, 0.5), seed=st.integers(0, 2**32 - 1),
       slower=st.floats(0, 0.8), base=st.floats(1e-3, 1e6))
def test_k_of_n_made_slower_by_more_than_the_threshold_are_named_exactly(n, share, seed, slower, base):
    rng = random.Random(seed)
    k = int(share * n)
    values = {i: base * rng.uniform(1 - NOISE, 1 + NOISE) for i in range(n)}
    # slowed past the threshold with the noise on both sides: (1 + e)(1 - s) < (1 - t)(1 - e)
    least = 1 - (1 - THRESHOLD) * (1 - NOISE) / (1 + NOISE)
    cut = least + 1e-9 + slower * (1 - least)
    slow = set(rng.sample(range(n), k))
    for i in slow:
        values[i] *= 1 - cut
    verdict = peers.below_peers(values, THRESHOLD)
    assert {m for m, _ in verdict.named} == slow
    assert [v for _, v in verdict.named] == sorted(values[m] for m in slow)

@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 4096), seed=st.integers(0, 2**32 - 1), factor=st.floats(0, 5))
def test_healthy_peers_are_never_named(n, seed, factor):
    """Values within the noise band: none is 10 % below any of them, whatever the spread factor."""
    rng = random.Random(seed)
    values = {i: rng.uniform(1 - NOISE, 1 + NOISE) for i in range(n)}
    assert peers.below_peers(values, THRESHOLD, factor).named == []

@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 512), low=st.floats(0.01, 0.99))
def test_all_equally_low_is_no_outlier(n, low):
    assert peers.below_peers({i: low for i in range(n)}, THRESHOLD).named == []

def test_the_median_rule_missed_half_low_groups_and_this_one_names_them():
    """Issue 30: a node's GPUs at 0.60-0.70 of the other node's at 2 nodes, one GPU of two at 0.62,
    two MI250X packages at 560 and 392 W: each half of its peers, each named."""
    node = {0: 500, 1: 505, 2: 498, 3: 502, 4: 300, 5: 320, 6: 350, 7: 335}
    assert [m for m, _ in peers.below_peers(node, 0.25).named] == [4, 5, 7, 6]
    assert [m for m, _ in peers.below_peers({0: 1.0, 1: 0.62}, 0.25).named] == [1]
    assert [m for m, _ in peers.below_peers({'a': 560, 'b': 392}, 0.25).named] == ['b']

def test_the_spread_makes_the_rule_stricter_where_the_peers_are_noisy():
    """Peers that vary by 20 %: a value 15 % below the upper quartile is within 3 of their
    standard deviations and is not named; with no spread factor it is."""
    rng = random.Random(7)
    values = {i: rng.gauss(100, 20) for i in range(200)}
    reference = peers.upper_quartile(values.values())
    values['x'] = 0.85 * reference
    assert 'x' not in dict(peers.below_peers(values, 0.10, 3).named)
    assert 'x' in dict(peers.below_peers(values, 0.10).named)
    assert peers.spread(list(values.values())) == pytest.approx(20, rel=0.3)

def test_spread_needs_eight_values():
    assert peers.spread([1.0] * 7) is None and peers.spread([1.0] * 8) == 0
    assert peers.below_peers({}, 0.1) == peers.Verdict([], None, None)
