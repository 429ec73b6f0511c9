"""Properties of the rules that name slow ranks, nodes and node pairs, on generated runs whose truth
is known: 1-64 nodes, 1-8 GPUs per node, healthy ranks (and pairs) spread in a noise band below the
rule's margin. The invariants are listed in docs/per-rank.md and docs/interconnect.md.
"""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mlcheck.judging import collectives, output, sanity
from mlcheck.figures.quartiles import upper_quartile
from saved_outputs import fact_line
from ddp_common import load_program

collectives_program = load_program('comm/collectives.py')

BASE = 2000.0       # samples/s of a healthy rank, GB/s x 1000 of a healthy pair
EXAMPLES = settings(max_examples=60, deadline=None)


def node_name(index):
    return f'nid{index + 1:06d}'


@st.composite
def healthy_job(draw, min_nodes=1, min_ranks=1):
    """(nodes, gpus per node, limit, noise, speeds): every rank within `noise` below BASE, and
    noise below the rule's margin 1 - limit."""
    nodes = draw(st.integers(min_nodes, 64))
    gpus = draw(st.integers(2 if nodes < min_ranks else 1, 8))     # min_ranks: at most 2
    limit = draw(st.floats(0.5, 0.9))
    noise = draw(st.floats(0, 0.9)) * (1 - limit)
    speeds = [BASE * (1 - noise * draw(st.floats(0, 1))) for _ in range(nodes * gpus)]
    return nodes, gpus, limit, noise, speeds


def judged_ranks(nodes, gpus, limit, speeds, steps=None):
    """sanity.slow_ranks over a run whose rank r, on node r // gpus, trained alone at speeds[r]
    (with steps[r] its solo steps' samples/s, where given)."""
    lines = []
    for rank, speed in enumerate(speeds):
        placed = {'event': 'rank', 'rank': rank, 'node': node_name(rank // gpus), 'local_rank': rank % gpus}
        solo = {'event': 'solo', 'rank': rank, 'samples_per_s': speed}
        if steps:
            solo['step_samples_per_s'] = steps[rank]
        lines += [fact_line(placed, task=rank), fact_line(solo, task=rank)]
    expect = sanity.Expectations(num_nodes=nodes, tasks_per_node=gpus, masks=(), gpus=True,
                                 slow_rank_fraction=limit)
    return sanity.slow_ranks(output.parse(''.join(lines)), expect)


def stated(line):
    """(fractions, reference) a slow-rank line states: 'at 0.70 of' or 'at 0.60-0.61 of', and
    'upper quartile 2000'."""
    fractions = re.search(r' at ([\d.]+)(?:-([\d.]+))? of the upper-quartile rank', line).groups()
    reference = re.search(r'upper quartile ([\d.e+]+) \(limit', line).group(1)
    return [f for f in fractions if f], reference


@EXAMPLES
@given(healthy_job())
def test_a_healthy_job_names_nobody(job):
    nodes, gpus, limit, _, speeds = job
    assert judged_ranks(nodes, gpus, limit, speeds) == []


@st.composite
def moments(draw, job):
    """Each rank's 30 solo steps at its speed in `job`, fewer than half of them (any of them) slowed
    by any factor down to 1/20: the machine's moments (docs/per-rank.md); (steps, throughputs)."""
    _, _, _, _, speeds = job
    rnd = draw(st.randoms(use_true_random=False))   # up to 512 ranks: one draw, not 15,000
    worst = draw(st.floats(0.05, 1))
    steps = []
    for speed in speeds:
        slowed = set(rnd.sample(range(30), rnd.randint(0, 14)))
        steps.append([speed * (rnd.uniform(worst, 1) if i in slowed else 1) for i in range(30)])
    return steps, [30 / sum(1 / rate for rate in rates) for rates in steps]


@EXAMPLES
@given(healthy_job(), st.data())
def test_moments_of_the_machine_on_fewer_than_half_a_rank_s_steps_name_nobody(job, data):
    """Issue 51: the rule judges each rank's median step, so a burst that slows some of its steps,
    however much, names no healthy rank while it covers fewer than half of them."""
    nodes, gpus, limit, _, _ = job
    steps, throughputs = data.draw(moments(job))
    assert judged_ranks(nodes, gpus, limit, throughputs, steps) == []


def one_slow_rank(job, data):
    """(the slow rank, its fraction of BASE: below the limit, noise and all)."""
    nodes, gpus, limit, noise, _ = job
    return data.draw(st.integers(0, nodes * gpus - 1)), data.draw(st.floats(0.05, 0.99)) * limit * (1 - noise)


@EXAMPLES
@given(healthy_job(min_ranks=2), st.data())
def test_a_rank_slow_in_more_than_half_its_steps_is_named(job, data):
    nodes, gpus, limit, _, speeds = job
    slow, fraction = one_slow_rank(job, data)
    slowed = data.draw(st.sets(st.integers(0, 29), min_size=16))
    steps = [[s * (fraction if r == slow and i in slowed else 1) for i in range(30)]
             for r, s in enumerate(speeds)]
    found = judged_ranks(nodes, gpus, limit, [30 / sum(1 / x for x in rates) for rates in steps], steps)
    assert len(found) == 1 and (f'rank {slow} ' in found[0] or node_name(slow // gpus) in found[0]), found


@EXAMPLES
@given(healthy_job(), st.floats(0.05, 1))
def test_every_rank_equally_slow_names_nobody(job, slower):
    nodes, gpus, limit, _, _ = job
    assert judged_ranks(nodes, gpus, limit, [BASE * slower] * (nodes * gpus)) == []


@EXAMPLES
@given(healthy_job(min_nodes=2), st.data())
def test_one_slow_node_is_named_at_its_fraction_of_the_upper_quartile(job, data):
    nodes, gpus, limit, noise, speeds = job
    slow_node = data.draw(st.integers(0, nodes - 1))
    fraction = data.draw(st.floats(0.05, 0.99)) * limit * (1 - noise)    # below the limit, noise and all
    speeds = [BASE * fraction if r // gpus == slow_node else s for r, s in enumerate(speeds)]
    found = judged_ranks(nodes, gpus, limit, speeds)
    name = node_name(slow_node)
    assert len(found) == 1
    assert found[0].startswith(f'node {name} is slow: ' if gpus > 1 else f'rank {slow_node} on {name} ')
    reference = upper_quartile(speeds)
    assert reference >= BASE * (1 - noise)          # a healthy rank's speed: the slow node cannot drag it
    fractions, said = stated(found[0])
    assert said == f'{reference:.4g}'
    assert set(fractions) == {f'{BASE * fraction / reference:.2f}'}


@EXAMPLES
@given(healthy_job(min_ranks=2), st.data())
def test_one_slow_rank_is_named_with_its_speed_over_the_reference(job, data):
    nodes, gpus, limit, _, speeds = job
    slow, fraction = one_slow_rank(job, data)
    speeds[slow] = BASE * fraction
    found = judged_ranks(nodes, gpus, limit, speeds)
    assert len(found) == 1 and found[0].startswith(f'rank {slow} on {node_name(slow // gpus)} (GPU {slow % gpus}) ')
    fractions, said = stated(found[0])
    reference = upper_quartile(speeds)
    assert said == f'{reference:.4g}' and fractions == [f'{speeds[slow] / reference:.2f}']


# The slow-pair rule: the interconnect program times the nodes in rounds of disjoint pairs (its
# pair_rounds), each node meeting 3 partners (the check's default), or all there are.

PAIR_PARTNERS = 3


@st.composite
def healthy_rounds(draw, min_nodes=3):
    nodes = draw(st.integers(min_nodes, 64))
    fraction = draw(st.floats(0.3, 0.9))
    noise = draw(st.floats(0, 0.9)) * (1 - fraction)
    pairs = [pair for round_pairs in collectives_program.pair_rounds(
        [node_name(i) for i in range(nodes)], PAIR_PARTNERS) for pair in round_pairs]
    return nodes, fraction, noise, {pair: BASE * (1 - noise * draw(st.floats(0, 1))) for pair in pairs}


def judged_pairs(gbps, fraction):
    """collectives.slow_pairs over the pairs {(node, node): GB/s}."""
    pairs = [{'event': 'pair', 'nodes': list(pair), 'GBps': speed} for pair, speed in gbps.items()]
    return collectives.slow_pairs(output.parse(''.join(fact_line(p, task=0) for p in pairs)), fraction)


@EXAMPLES
@given(healthy_rounds(min_nodes=2))
def test_healthy_rounds_name_nothing(rounds):
    _, fraction, _, gbps = rounds
    assert judged_pairs(gbps, fraction) == []


@EXAMPLES
@given(healthy_rounds(), st.data())
def test_a_node_whose_every_pair_is_slow_is_named_alone(rounds, data):
    nodes, fraction, noise, gbps = rounds
    slow = node_name(data.draw(st.integers(0, nodes - 1)))
    slower = data.draw(st.floats(0.01, 0.99)) * fraction * (1 - noise)
    for pair in gbps:
        if slow in pair:
            gbps[pair] = BASE * slower
    assert [line.split(':')[0] for line in judged_pairs(gbps, fraction)] == [f'node {slow} is slow']


@EXAMPLES
@given(healthy_rounds(), st.data())
def test_a_single_slow_pair_is_named_by_both_nodes(rounds, data):
    nodes, fraction, noise, gbps = rounds
    a, b = data.draw(st.sampled_from(sorted(gbps)))
    gbps[a, b] = BASE * data.draw(st.floats(0.01, 0.99)) * fraction * (1 - noise)
    assert [line.split(':')[0] for line in judged_pairs(gbps, fraction)] == [f'node pair {a} <-> {b}']


@EXAMPLES
@given(healthy_rounds(min_nodes=4), st.data())
def test_a_slow_node_and_a_slow_link_elsewhere_are_both_named(rounds, data):
    """A node slow with every partner (its NIC) and a link between two other nodes slow only
    together: at 4 nodes that is 4 slow pairs of 6, which must not hide the link."""
    nodes, fraction, noise, gbps = rounds
    slow = node_name(data.draw(st.integers(0, nodes - 1)))
    links = sorted(pair for pair in gbps if slow not in pair)
    a, b = data.draw(st.sampled_from(links))
    for pair in gbps:
        if slow in pair or pair == (a, b):
            gbps[pair] = BASE * data.draw(st.floats(0.01, 0.99)) * fraction * (1 - noise)
    assert sorted(line.split(':')[0] for line in judged_pairs(gbps, fraction)) == sorted(
        [f'node {slow} is slow', f'node pair {a} <-> {b}'])
