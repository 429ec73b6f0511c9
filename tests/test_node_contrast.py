"""Issue 49, the fourth red-team pass: the report signed off real faults, exit 0 with `no likely
cause: nothing got slower or failed`. Two kinds (their perf logs: tests/data/redteam4-i49):

1. One test 15-20 % slower at --repeat 3, within the noise of 3 runs a side: the gate passes it
   (its strictness is the trade: 0.4 % of healthy reports fail), but the first line must say
   what the rows say, a change within the noise, the largest, and how many runs a side would
   tell a change that size from the spread measured (the gate's own test, not a guess).
2. A node slowed after the upgrade (power-capped 10-12 %, its NIC at half speed) on a busy
   partition: its runs spread over many tests, one or two of each, which no row nor cell sees.
   Pooled over the node's runs against the same tests' runs on other nodes and against its own
   runs before (mlcheck.history.node_contrast), it is named and fails the gate.
"""

import lzma
import math
import random
import re
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from command_line import run_report
from mlcheck.history import compare
from mlcheck.history.samples import Sample
from scenario_bank import Fault, build, partition

CASES = Path(__file__).parent / 'data' / 'redteam4-i49'
# the sixth red-team's sessions (its generator: 27 tests on 16 nodes, busy; /tmp/redteam6-i49)
CASES6 = Path(__file__).parent / 'data' / 'redteam6-i49'
WITHIN_NOISE = 'no likely cause: nothing failed, and no change beyond the noise: '


def logs_of(case, tmp_path, cases=CASES):
    """[before, after] perf log paths of a saved case, decompressed."""
    logs = []
    for side in ('before', 'after'):
        path = tmp_path / f'{side}.log'
        path.write_bytes(lzma.decompress((cases / case / f'{side}.log.xz').read_bytes()))
        logs.append(str(path))
    return logs


def report_on(case, tmp_path, capsys, cases=CASES):
    """(exit status, lines) of mlcheck-report on the case's perf logs."""
    code, out, _ = run_report(capsys, *logs_of(case, tmp_path, cases))
    return code, out.splitlines()


# --- 1. a change within the noise: said first, with what would decide it ------------------------

@pytest.mark.parametrize('case, largest, repeat', [
    ('d06_onetest_r3_host20_s3', 'MNISTDistributedCheck %image=host %num_nodes=1 train_time +25.7 %', 4),
    ('d07_onetest_r3_host15_s5', 'MNISTDistributedCheck %image=host %num_nodes=1 train_time +14.7 %', 7),
    ('d10_onetest_cifar_r3_host18_s4', 'CIFAR100ResNetCheck %image=torch-2.14.1 %num_nodes=1 train_time +37.5 %', 4)])
def test_a_pass_with_a_change_within_the_noise_says_so_first_with_the_runs_that_would_decide(
        case, largest, repeat, tmp_path, capsys):
    """At 6023b03: `no likely cause: nothing got slower or failed` first, exit 0, for one test
    20 % (d06), 15 % (d07) and 18 % (d10) slower at --repeat 3."""
    code, lines = report_on(case, tmp_path, capsys)
    assert code == 0, lines
    assert lines[0].startswith(WITHIN_NOISE) and 'nothing got slower' not in lines[0], lines[0]
    assert f'the largest {largest}' in lines[0], lines[0]
    assert f'{repeat} runs a side (--repeat {repeat}) would tell a change that size' in lines[0], lines[0]


def figure(change, spread, runs):
    """(before, after) [Sample] of one figure: `runs` runs a side, before about 1 and after about
    1 - change, each side's runs spread by exactly `spread` (their sample standard deviation)."""
    steps = [k - (runs - 1) / 2 for k in range(runs)]
    scale = spread / math.sqrt(sum(s * s for s in steps) / (runs - 1))
    sample = lambda side, mean, k: Sample('sim:cluster', 'MNISTDistributedCheck %image=host %num_nodes=1', 'host',
                                          1, 'samples_per_s', mean + scale * steps[k], 'samples/s',
                                          time=1e9 + k + 1e5 * (side == 'after'), jobid=f'{side}{k}')
    return ([sample('before', 1.0, k) for k in range(runs)],
            [sample('after', 1.0 - change, k) for k in range(runs)])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(change=st.floats(0.06, 0.4), spread=st.floats(0.01, 0.15), runs=st.integers(3, 5))
def test_the_runs_a_side_said_are_those_at_which_the_gate_fails_a_change_that_size(change, spread, runs):
    """The count the first line gives is where the gate itself (compare.compare: threshold, noise
    factor, one-sided t at the report's level) first fails the same change at the same spread."""
    verdict = lambda n: compare.compare(*figure(change, spread, n))[0]
    [c] = compare.compare(*figure(change, spread, runs))
    assume(c.verdict == compare.WITHIN_NOISE)
    n = compare.repetitions_to_tell(c, compare.Rule())
    if n is None:
        assert verdict(compare.MOST_REPEATS).verdict != compare.REGRESSION
    else:
        assert verdict(n).verdict == compare.REGRESSION
        assert verdict(n - 1).verdict != compare.REGRESSION


# --- 2. a slow node on a busy partition -------------------------------------------------------------

@pytest.mark.parametrize('case, node', [
    ('d15_cap10_nid009_busy_r5_s3', 'nid009'),
    ('c37_powercap12_nid006_busy_r5', 'nid006'),
    ('d39_nic50_nid006_busy_r5_after_r3', 'nid006'),
    ('n16_nic_half_nid006_busy_r3_seed2', 'nid006')])
def test_a_slow_node_on_a_busy_partition_is_named_and_fails_the_gate(case, node, tmp_path, capsys):
    """At 6023b03: `no likely cause: nothing got slower or failed`, exit 0 (d15: nid009's 12
    training runs after 8.7 % slower than the same tests' other runs, 11 of 12 below -4 %)."""
    code, lines = report_on(case, tmp_path, capsys)
    assert code == 1, lines
    assert lines[0].startswith('likely cause: '), lines[0]
    candidates = lines[0].split(': to separate')[0].split('; to separate')[0]
    assert set(re.findall(r'(?:node|the link of) (nid\d+)', candidates)) == {node}, lines[0]
    # no row sees it: the cause line is what fails the gate
    assert any(line.startswith('0 regression(s)') for line in lines), lines


def busy(rng, faults, noise, repetitions, tail):
    return build(rng, faults, mode='busy', noise=noise, repetitions=repetitions, nodes=partition(16), tail=tail)


def named(before, after):
    from mlcheck.history import node_contrast
    rule = compare.Rule()
    return node_contrast.slow_nodes(before, after, rule.threshold, node_contrast.LEVEL_SHARE * rule.false_alarm)


# A Hypothesis property on noisy figures is sized like a test (docs/testing.md): each example is
# a fixed seed (derandomize), and the rule names a node of a healthy partition at most 0.5 % of
# the time by its construction (Bonferroni over the nodes tried), 0 of 1,000 measured
# (docs/performance-history.md); the 8 examples here are fixed, so the test cannot flake.
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 32), noise=st.floats(0.01, 0.08), before=st.integers(3, 5),
       after=st.integers(3, 5), tail=st.floats(0.0, 0.08))
def test_a_healthy_busy_partition_names_no_node(seed, noise, before, after, tail):
    assert named(*busy(random.Random(seed), [], noise, (before, after), tail)) == []


# Named in 279 of 281 bank sessions with 8 such runs or more at 15 % and 4 % noise (one whose node
# ran slower before by chance: rightly not named; one at p 2e-4 against its 1.6e-4): fixed
# examples again, whose miss rate (under 1 %) the docs state.
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 32), effect=st.floats(0.15, 0.3), noise=st.floats(0.01, 0.04))
def test_a_node_slowed_15_percent_or_more_on_8_runs_or_more_is_named(seed, effect, noise):
    """At --repeat 5 a side (the gate's), a heavy tail of 4 % of runs slowed by a job beside them."""
    rng = random.Random(seed)
    node = rng.choice(partition(16))
    before, after = busy(rng, [Fault('node', node, effect)], noise, (5, 5), 0.04)
    assume(len({(s.name, s.jobid) for s in after if node in s.nodelist.split(',')
                and not s.name.startswith('InterconnectCheck')}) >= 8)
    found = named(before, after)
    assert found and found[0].nodes == (node,), found


def test_a_node_as_slow_before_as_after_is_not_named():
    """What changed is named, not a node that always was slower: the same node 15 % slow on both
    sides passes the test against the other nodes' runs, not the one against its own before."""
    from mlcheck.history import node_contrast
    node = 'nid005'
    slow = [busy(random.Random(seed), [Fault('node', node, 0.15)], 0.03, (5, 5), 0.04)[1] for seed in (1, 2)]
    before = [Sample(**{**s.__dict__, 'jobid': 'before' + s.jobid, 'time': s.time - 86400}) for s in slow[0]]
    sides = {'before': node_contrast._scored(before, 'before'), 'after': node_contrast._scored(slow[1], 'after')}
    trials = [t for t in node_contrast._trials(sides, set(), 0.05) if t.nodes == (node,)]
    assert min(t.p for t in trials) < 1e-4          # slower than the others after: the first test alone would name it
    assert named(before, slow[1]) == []


def test_the_work_is_bounded_by_the_records_sizes():
    """Issue 48's hostile shapes, through the node contrast: 1,080 jobs of one 100,000-node list
    (F6: one set of nodes, gathered once), 2,100 jobs each on its own 50 nodes (R2), and 2,100 jobs
    on any 4 of 400 nodes (each node ranked against the rest in one pass over them, not a list
    and a table anew: 14 s at first)."""
    import time
    from mlcheck.history import node_contrast
    rng = random.Random(1)

    def side(name, jobs, nodelist, num_nodes):
        return [Sample('sim:cluster', f'MNISTDistributedCheck %image={image} %num_nodes={num_nodes}', image, num_nodes,
                       'samples_per_s', 100 * (1 + rng.gauss(0, 0.03)), 'samples/s', time=1e9 + k + (name == 'a') * 1e6,
                       jobid=f'{name}{image}{k}', nodelist=nodelist(k))
                for k in range(jobs) for image in ('a', 'b', 'c')]
    for jobs, nodelist, num_nodes in ((360, lambda k: 'h[00000-99999]', 100_000), (700, lambda k: f'm{k}x[00-49]', 50),
                                      (700, lambda k: ','.join(f'n{x:03d}' for x in sorted(rng.sample(range(400), 4))), 4)):
        before, after = side('b', jobs, nodelist, num_nodes), side('a', jobs, nodelist, num_nodes)
        start = time.process_time()
        assert node_contrast.slow_nodes(before, after, 0.05, 0.005) == []
        assert time.process_time() - start < 3, (jobs, num_nodes)      # 0.3-0.7 s here


def test_a_slow_gpu_is_not_named_a_slow_node():
    """One GPU of nid006 slowed slows every run on nid006, within one node too, as a slow node
    does: the line lists both (the bank's `gpu` family read a confident `node nid006` at
    0a81d7d), with the run that tells them apart, a training check on nid006 alone."""
    from mlcheck.history import causes
    before, after = busy(random.Random(1), [Fault('gpu', 'nid006', 0.3)], 0.03, (5, 5), 0.0)     # 2 runs within one node a side
    [found] = causes._slow_nodes(before, after, compare.Rule())
    assert found.kind == 'cannot tell' and {'a GPU of nid006', 'node nid006'} <= found.named, found.line()
    assert '-J nodelist=nid006 ' in found.separating and 'slowest_rank_fraction' in found.separating, found.line()


# --- what did not change on a node is not the node's (the sixth red-team) -------------------------

def samples_of(case, tmp_path):
    from mlcheck.history.perflog import read_perflog
    return [read_perflog(log) for log in logs_of(case, tmp_path, CASES6)]


@pytest.mark.parametrize('case, node', [
    # nid006 power-capped to 85 % before and after, --repeat 5 and 3: its runs measured against
    # their tests' other runs, which often held nid006 too, lost 5-9 % "against its runs before"
    # (p 0.03-0.04 where 0.05 sufficed); 6 and 4 of 50 such reports exited 1 at 8e4d574
    ('slow_both_cap15_006_r5_s4_7011', 'nid006'),
    ('slow_both_cap15_006_r5_s4_7043', 'nid006'),
    ('slow_both_cap15_006_r3_s4_7008', 'nid006'),
    # e37: image torch-2.14.1 10 % slower over 5 images, --repeat 3: `cannot tell: node nid003
    # or a GPU of nid003` (a test's 3 runs: one slow run lowers the others' reference, so a
    # node's slow runs and the rest of their tests part twice as far as the runs did; a rare
    # draw on that shape, 0 of 50 at 5af4d81 as now: the image moves no run within its test)
    ('e37_5img_2141_10_r3_s4', 'nid003'),
    # healthy, 10 % noise, 8 % of runs interfered, nid006 free 95 % of the time: a healthy node
    # named in 2 of 50 reports, where the rule allows 0.5 % (the other, seed 7023, nid014's 15 runs
    # across nodes after all slower than their tests' runs on other nodes, still reaches p 1.5e-4
    # against its 1.6e-4 share: a draw the 0.5 % allows, whose rate docs/performance-history.md
    # states as measured)
    ('healthy_bias006_r5_s10_t8_7035', 'nid001')])
def test_a_node_whose_runs_did_not_change_is_not_named(case, node, tmp_path, capsys):
    """Each named the node at 5af4d81 (the line `the N ... runs after that used <node> were`):
    seen failing there, each of the six."""
    assert [found.nodes for found in named(*samples_of(case, tmp_path))] == []
    code, lines = report_on(case, tmp_path, capsys, CASES6)
    assert f'that used {node} were' not in lines[0], lines[0]


# A node slowed before and after alike (power-capped, its NIC at half speed since before the
# upgrade): its change is tested at the rule's own level (0.5 %), so named in at most 0.5 % of
# such reports by construction; fixed examples (derandomize), so the test cannot flake.
@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 32), kind=st.sampled_from(['node', 'link']), effect=st.floats(0.1, 0.3),
       noise=st.floats(0.02, 0.06), repetitions=st.sampled_from([(3, 3), (5, 5), (5, 3)]), tail=st.floats(0.0, 0.08))
def test_a_node_as_slow_before_as_after_is_not_named_whatever_its_placement(seed, kind, effect, noise, repetitions,
                                                                           tail):
    rng = random.Random(seed)
    node = rng.choice(partition(16))
    fault = [Fault(kind, node, effect)]
    # the fault on both sides: two sessions where it acts, the first relabelled before
    before = [Sample(**{**s.__dict__, 'jobid': 'before' + s.jobid, 'time': s.time - 86400})
              for s in busy(rng, fault, noise, (repetitions[0],) * 2, tail)[1]]
    after = busy(rng, fault, noise, (repetitions[1],) * 2, tail)[1]
    assert named(before, after) == []


# An image's fault slows every run of that image on every node: no node's runs stand out from the
# runs of the same tests (the same image) on other nodes. Fixed examples, as above.
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 32), effect=st.floats(0.08, 0.3), noise=st.floats(0.02, 0.06),
       repetitions=st.sampled_from([(3, 3), (5, 5)]), tail=st.floats(0.0, 0.08))
def test_an_image_fault_names_no_node(seed, effect, noise, repetitions, tail):
    from scenario_bank import IMAGES
    rng = random.Random(seed)
    assert named(*busy(rng, [Fault('image', rng.choice(IMAGES), effect)], noise, repetitions, tail)) == []


# The healthy property above at the sixth red-team's noisier partition: 8-12 % noise, up to 10 % of
# runs interfered. Fixed examples; by construction at most 0.5 % of such reports name a node.
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 32), noise=st.floats(0.08, 0.12), repetitions=st.sampled_from([(3, 3), (5, 5)]),
       tail=st.floats(0.04, 0.1))
def test_a_healthy_noisy_busy_partition_names_no_node(seed, noise, repetitions, tail):
    assert named(*busy(random.Random(seed), [], noise, repetitions, tail)) == []
