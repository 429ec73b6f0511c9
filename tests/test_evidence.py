"""The upgrade report from one table of evidence (issue 49): the rows, the exit status and the
`likely cause:` line are drawn from the same runs and never disagree. The five cases a sixth look
at 42e5ead found them disagreeing (or the cause line wrong) are fed here as the runs a partition
makes (tests/scenario_bank.py: a busy partition's placement, a NIC at half speed, a network
plugin lost in one image, a GPU driver not loaded on one node, one transient failure), then the
exit-status contract as a Hypothesis property over generated sessions."""

import math
import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import scenario_bank
from command_line import run_report
from mlcheck.history import candidates, causes, compare
from mlcheck.history.evidence import NOTHING as NOTHING_SAID, WITHIN_NOISE as WITHIN_NOISE_SAID, EvidenceTable
from perflogs import write_perflog
from scenario_bank import IMAGES, Fault, build, partition


def report_of(tmp_path, capsys, before, after, *options):
    """(exit status, stdout) of mlcheck-report on perf logs of the runs (the real format)."""
    code, out, _ = run_report(capsys, write_perflog(tmp_path / 'before.log', before),
                              write_perflog(tmp_path / 'after.log', after), *options)
    return code, out


def first_line(out):
    return out.splitlines()[0]


def verdicts(before, after):
    return causes.likely_causes(compare.compare(before, after), before, after)


def on_node(samples, node):
    return [s for s in samples if node in s.nodelist.split(',')]


# --- case 1: a slow node on a busy partition --------------------------------------------------------

def busy_nic(seed, effect=0.5):
    """16 nodes, other users' jobs leave whichever nodes free, --repeat 5 a side; nid006's NIC at
    `effect` of its speed after the upgrade (0: healthy)."""
    faults = [Fault('link', 'nid006', effect)] if effect else []
    return build(random.Random(seed), faults, mode='busy', noise=0.02, nodes=partition(16))


def test_case_1_a_slow_node_on_a_busy_partition_fails_the_gate(tmp_path, capsys):
    """At 42e5ead: `likely cause: the link of nid006: 15 tests worse`, `0 regression(s)`, exit
    0: the slow node's runs widened the spread that judged them."""
    before, after = busy_nic(seed=6)
    runs = {(s.name, s.jobid) for s in after}
    slow = {(s.name, s.jobid) for s in on_node(after, 'nid006')}
    assert 0.1 < len(slow) / len(runs) < 0.3       # a minority of the runs landed on it
    code, out = report_of(tmp_path, capsys, before, after)
    assert first_line(out).startswith('likely cause: ') and 'nid006' in first_line(out)
    assert code == 1, out
    # the rows judge each test's runs against their own spread, at the whole report's level: a
    # minority of runs on one slow node is the cause line's to see, pooled over the tests it ran
    assert 'within noise' in out and 'fails the gate' not in first_line(out), out


def test_case_1_a_healthy_busy_partition_passes(tmp_path, capsys):
    """The same placement, nothing slowed: the robust noise adds no false alarm."""
    for seed in range(3):
        code, out = report_of(tmp_path, capsys, *busy_nic(seed, effect=0))
        assert code == 0 and first_line(out) == 'no likely cause: nothing got slower or failed', out


# --- case 2: one failed run among passes --------------------------------------------------------------

def one_transient(seed=2):
    """One CIFAR-100 run of 3 at 2 nodes failed after the upgrade; everything else as before."""
    run = ('CIFAR100ResNetCheck', 'torch-2.9.1', 2, 1)
    return build(random.Random(seed), [Fault('transient', None, 0.0, run)], repetitions=(3, 3))


def test_case_2_a_failed_run_after_is_in_its_row_the_summary_and_the_gate(tmp_path, capsys):
    """At 42e5ead the row read `unchanged`, the summary `0 regression(s) ... 72 unchanged`, exit
    0, while the first line said `cannot tell: image torch-2.9.1`."""
    code, out = report_of(tmp_path, capsys, *one_transient())
    assert code == 1, out
    rows = [line for line in out.splitlines() if line.startswith('sim:cluster  CIFAR100ResNetCheck %image=torch-2.9.1 %num_nodes=2 ')]
    assert rows and all('1 of 3 failed after' in row for row in rows), out
    assert re.search(r'^1 run failed after', out, re.MULTILINE), out
    line = first_line(out)
    # one failure is not an image's fault: the line keeps what it cannot rule out, and says
    # which run failed where
    assert line.startswith('likely cause: cannot tell: '), line
    assert 'a transient' in line and 'nid001' in line and '--repeat' in line, line


# --- case 3: one image's network plugin lost ---------------------------------------------------------

def plugin_lost(seed=3):
    """A site with one image; its RCCL no longer loads aws-ofi-rccl after the upgrade."""
    image = 'torch-2.14.1'
    return build(random.Random(seed), [Fault('image net', image, 0.85)], mode='busy',
                 repetitions=(3, 3), before_images=(image,), after_images=(image,),
                 nodes=partition(8))


def test_case_3_a_lost_network_plugin_is_a_change_and_the_image_s_network_layer_stands(tmp_path, capsys):
    """At 42e5ead: `likely cause: fabric`, and no stack line (a fact that vanished was not a
    change)."""
    code, out = report_of(tmp_path, capsys, *plugin_lost())
    assert code == 1
    assert 'stack of torch-2.14.1 on sim:cluster: network plugin aws-ofi-rccl 1.4.0 -> none (not loaded)' in out, out
    line = first_line(out)
    assert line.startswith('likely cause: cannot tell: '), line
    listed = line.split(': ')[2].split(' or ')
    assert sorted(listed) == ['fabric', 'image torch-2.14.1 (its network layer)'], line
    # the run that separates: another image (here the host's Python) across the same nodes
    assert re.search(r'to separate them: reframe -c checks/ -r -n \S+ -P image=host -P num_nodes=[24]', line), line


# --- case 4: dead GPUs on one node --------------------------------------------------------------------

def driver_not_loaded(seed=0):
    """amdgpu did not load on nid004 after a kernel update: every job on it fails its one-GPU
    promise (judging.sanity's sentence), every job elsewhere passes."""
    return build(random.Random(seed), [Fault('node fails', 'nid004', 1.0)], mode='busy',
                 repetitions=(3, 3), nodes=partition(8))


def test_case_4_failures_on_one_node_are_that_node_not_the_binding():
    """At 42e5ead: `likely cause: binding: 1 test failed the placement sanity`, from the
    sentence alone (the one test whose every run landed on nid004), beside `cannot tell: node
    nid004 or a GPU of nid004`."""
    before, after = driver_not_loaded()
    failed = [s for s in after if s.value is None]
    assert failed and all('nid004' in s.nodelist for s in failed)
    found = verdicts(before, after)
    assert [v.layer for v in found if v.kind == 'binding'] == [], [v.line() for v in found]
    # (a second line may follow: the runs that passed, judged on their own)
    line = found[0].line()
    assert line.startswith(('likely cause: node nid004: ',
                            'likely cause: cannot tell: node nid004 or binding: ')), line
    assert 'every failed run used nid004' in line, line


# --- case 5: no run suggested that cannot separate ----------------------------------------------------

def three_at_once(seed=5):
    """A node, an image and the fabric at once, each 40 %, at 1 % noise: no candidate nor pair
    fits every cell, and every worse cell is tens of spreads above the noise."""
    return build(random.Random(seed), [Fault('node', 'nid003', 0.4), Fault('image', 'torch-2.9.1', 0.4),
                                       Fault('fabric', None, 0.4)], mode='spread', noise=0.01)


def test_case_5_no_repetitions_advised_for_losses_far_above_the_noise():
    """At 42e5ead: `--repeat 5 (more repetitions, to clear the noise)`."""
    [v] = verdicts(*three_at_once())
    assert v.kind == 'cannot tell' and '--repeat' not in v.line(), v.line()


def test_repetitions_are_advised_for_a_loss_near_its_threshold():
    """One run a side at 4 % noise, one image 9 % slower: the cells sit near the threshold, and
    more repetitions are what would decide."""
    for seed in range(20):
        before, after = build(random.Random(seed), [Fault('image', 'torch-2.9.1', 0.15)],
                              noise=0.04, repetitions=(3, 3), mode='spread')
        for v in verdicts(before, after):
            if '--repeat' in v.separating:
                return
    raise AssertionError('no line advised repetitions for a loss near its threshold')


# --- the exit-status contract --------------------------------------------------------------------------

FAULTS = (None, 'link', 'node', 'image', 'transient', 'node fails')


@st.composite
def sessions(draw):
    """A before and after of the bank's partition: busy or idle placement, 1-5 repetitions a
    side, healthy or with one fault (failures among passes included)."""
    rng = random.Random(draw(st.integers(0, 2 ** 32)))
    kind = draw(st.sampled_from(FAULTS))
    reps = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    nodes = partition(draw(st.sampled_from((4, 8, 16))))
    faults = []
    if kind == 'transient':
        reps = (reps[0], max(reps[1], 2))
        faults = [Fault(kind, None, 0.0, ('MNISTDistributedCheck', IMAGES[0], draw(st.sampled_from((1, 2))),
                                          rng.randrange(reps[1])))]
    elif kind in ('link', 'node', 'node fails'):
        faults = [Fault(kind, rng.choice(nodes), draw(st.floats(0.05, 0.5)))]
    elif kind == 'image':
        faults = [Fault(kind, rng.choice(IMAGES[:2]), draw(st.floats(0.05, 0.5)))]
    return build(rng, faults, mode=draw(st.sampled_from(('slurm', 'busy'))),
                 noise=draw(st.floats(0.01, 0.08)), repetitions=reps, nodes=nodes,
                 checks=('MNISTDistributedCheck', 'InterconnectCheck'), before_images=IMAGES[:2],
                 after_images=IMAGES[:2], before_counts=(1, 2), after_counts=(1, 2))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sessions())
def test_the_exit_status_is_1_iff_the_report_names_a_regression_a_failed_run_or_a_cause(tmp_path, capsys, sides):
    code, out = report_of(tmp_path, capsys, *sides)
    lines = out.splitlines()
    rows = [line for line in lines if line.startswith('sim:cluster ')]
    named = (any(verdict in row for row in rows for verdict in compare.FAILING)
             or any(' failed after' in row for row in rows)
             or any(re.match(r'\d+ runs? failed after', line) for line in lines)
             or lines[0].startswith('likely cause: '))
    assert code in (0, 1)
    assert (code == 1) == named, (code, out)
    # exit 0 says nothing failed nor got slower beyond the noise, and the first line says the
    # same: never "nothing got slower" where a row got worse past the threshold within the noise
    # (the red-team's d06: -20 % at 3 runs a side read so)
    assert (code == 0) == lines[0].startswith('no likely cause: '), out
    moved = any(c.verdict == compare.WITHIN_NOISE and c.worse and c.worse > 0 for c in compare.compare(*sides))
    if code == 0:
        assert lines[0] == (WITHIN_NOISE_SAID if moved else NOTHING_SAID) or (
            moved and lines[0].startswith(WITHIN_NOISE_SAID + ': ')), out
        assert ('nothing got slower' in lines[0]) == (not moved), out


# --- the bank's families of issue 49 ------------------------------------------------------------------

def test_the_bank_s_new_families_are_never_confidently_wrong():
    """70 scenarios of the families above (scenario_bank.PHYSICS): no line names a cause that is
    not the truth, every cannot-tell lists it (a transient: any cannot-tell; a confident line is
    wrong), and a gate that fails has a line. The rates per family, of 600: docs."""
    results = scenario_bank.run(70, seed=49, families=scenario_bank.PHYSICS)
    wrong = [(family, sorted(truth), line) for family, truth, found, line in results
             if found in ('wrong', 'missed')]
    assert not wrong, wrong[:3]
    assert {family for family, *_ in results} == set(scenario_bank.PHYSICS)
    # a rule that always said cannot tell would pass the rest: half the families can be named
    # (15 % of the 700 in docs, 6 of these 70)
    assert sum(found == "right" for *_, found, _ in results) > 0.05 * len(results)


def test_a_pass_with_a_change_within_the_noise_says_so_in_the_first_line(tmp_path, capsys):
    """Issue 49 (new-user trial): -14 % within noise read only "nothing got slower or failed".
    The first line says a change within the noise, the largest, and what would decide: here the
    change is within 2 x the spread of one run, which no number of runs moves past."""
    before, after = build(random.Random(7), [Fault('image', 'torch-2.9.1', 0.14)], noise=0.1,
                          repetitions=(3, 3), checks=('MNISTDistributedCheck',), before_counts=(1,),
                          after_counts=(1,), mode='spread')
    code, out = report_of(tmp_path, capsys, before, after)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(WITHIN_NOISE_SAID + ': 4 figure(s) worse past the 5 % threshold'), out
    assert 'the largest MNISTDistributedCheck %image=torch-2.9.1' in lines[0] and 'nothing got slower' not in lines[0], out
    assert 'within 2 x the spread of one run' in lines[0], out


def test_the_gate_says_and_can_refuse_fewer_repetitions_than_it_is_measured_at(tmp_path, capsys):
    """The whole matrix's false alarms are measured at --repeat 5 (docs): fewer is said in one
    line, and refused with --require-repeats."""
    from command_line import one_line_error
    from mlcheck.commands import report
    shape = dict(checks=('MNISTDistributedCheck',), before_counts=(1,), after_counts=(1,))
    three = build(random.Random(8), [], repetitions=(5, 3), **shape)
    code, out = report_of(tmp_path, capsys, *three)
    assert code == 0 and re.search(r'^gated on as few as 3 run\(s\) a side \(.*, after\)', out, re.MULTILINE), out
    logs = [write_perflog(tmp_path / f'{side}.log', samples) for side, samples in zip('ab', three)]
    err = one_line_error(capsys, report.main, *logs, '--require-repeats', '5')
    assert re.search(r'--require-repeats 5: MNISTDistributedCheck %image=\S+ %num_nodes=1 has 3 run\(s\) '
                     r'after; run both sides with --repeat 5', err), err
    five = build(random.Random(8), [], repetitions=(5, 5), **shape)
    code, out = report_of(tmp_path, capsys, *five, '--require-repeats', '5')
    assert code == 0 and 'gated on as few' not in out, out


def test_a_long_cannot_tell_line_lists_each_candidate_once_and_reads_back():
    """Issue 49 (new-user trial): a 614-character line said 'a GPU of nid001' four times. (The
    host stack's fault: an image's, this test's until the fourth red-team, is now narrowed by its
    tests pooled beyond the other images' to two or three candidates.)"""
    from layer_sessions import listed_candidates
    for seed in range(6):
        before, after = build(random.Random(seed), [Fault('host stack', None, 0.15)], noise=0.04,
                              repetitions=(3, 3), mode='spread')
        for v in verdicts(before, after):
            first = v.line().splitlines()[0]
            singles = {h[0] for h in v.hypotheses if len(h) == 1}
            if v.kind == 'cannot tell' and len(singles) > 4:
                if v.likeliest:
                    # the candidate the losses together point to first, the others on a line of
                    # their own (the sixth red-team's f23-f26)
                    assert first.startswith(f'likely cause: cannot tell, most likely {v.likeliest}: '), first
                    [rest] = [line for line in v.line().splitlines() if line.startswith('  not cleared beside it: ')]
                    first = 'likely cause: cannot tell: ' + rest.split(': ', 1)[1]
                    singles -= {v.likeliest}
                assert first.startswith('likely cause: cannot tell: one of ')
                assert sorted(listed_candidates(first)) == sorted(singles), first
                nodes = {name.split()[-1] for name in singles if name.startswith(causes.NODE_KINDS)}
                assert first.count('a GPU of') <= 1 and all(first.count(n) == 1 for n in nodes), first
                return
    raise AssertionError('no long cannot-tell line drawn')


def test_a_session_stopped_at_setup_is_bad_input_not_a_regression(tmp_path, capsys, monkeypatch):
    """Issue 49 (new-user trial): after a mistyped -S the stored session's every test case failed
    at setup (ForceExitError, before any job), and the report called the upgrade a regression.
    The failure as selection.load words it (its reader is issue 48's: here it is given)."""
    from command_line import one_line_error
    from mlcheck.commands import report
    from mlcheck.history.selection import AllFailed
    stopped = ("every test case of 'latest' failed before its figures (18: setup: ForceExitError: -S "
               "epoch=2: no check of this run knows 'epoch'; their knobs: epochs, ...)")
    real = report.load

    def load(selection, *args, **kwargs):
        if selection.spec == 'latest':
            raise AllFailed(stopped)
        return real(selection, *args, **kwargs)
    monkeypatch.setattr(report, 'load', load)
    before = write_perflog(tmp_path / 'before.log', build(random.Random(1), [], repetitions=(2, 2))[0])
    from conftest import DATA
    database = str(Path(DATA) / 'failed-sanity' / 'results.db')
    err = one_line_error(capsys, report.main, '--db', database, before, 'latest')
    assert "selection 'latest' is a session that stopped before any job ran" in err, err


# --- the red-team of 5952cf0 (findings W1-W6) -----------------------------------------------------------

def noisier_after(seed):
    """Nothing changed, but the partition is busier after (users back after maintenance): before's
    runs spread 3 %, after's 8 %, and 6 % of the runs of both shared their nodes with another job
    (2-4 spreads slower); 16 nodes, busy placement, --repeat 5."""
    return build(random.Random(seed), [], mode='busy', noise=(0.03, 0.08), nodes=partition(16), tail=0.06)


def test_w3_a_healthy_upgrade_onto_a_noisier_partition_names_no_cause():
    """At 5952cf0, 7 of 7 red-team seeds (and 10 of 10 here): `likely cause: cannot tell: host
    stack: 7 tests worse`, exit 1, with 0 regression rows: single runs after were judged against
    before's spread alone. A cell's noise now holds after's own spread."""
    for seed in range(10):
        found = verdicts(*noisier_after(seed))
        # a row may still fail the gate (its rate is W6's, bench/gate_false_alarms.py); no loss
        # is located on any runs
        assert all('no test is clearly worse than its noise' in v.evidence for v in found), \
            (seed, found[0].line())


def test_w5_the_first_line_mentions_a_test_that_did_not_run_after(tmp_path, capsys):
    """At 5952cf0 the red-team's test_missing_after_r5 (one test not run after, beside a loss
    elsewhere) read `likely cause: cannot tell: ...` with no word of the missing test."""
    before, after = build(random.Random(5), [Fault('image', 'torch-2.9.1', 0.3)], repetitions=(5, 5))
    gone = 'InterconnectCheck %image=torch-2.12.0 %num_nodes=4'
    after = [s for s in after if s.name != gone]
    code, out = report_of(tmp_path, capsys, before, after)
    assert code == 1 and first_line(out).startswith('likely cause: '), out
    assert '1 test(s) did not run after' in first_line(out) and gone in first_line(out), first_line(out)


def test_w4_a_second_cause_left_unexplained_is_named_not_counted():
    """At 5952cf0 the red-team's two_faults_nic_and_host_busy_r5 (the host stack 15 % slower,
    nid010's NIC at half speed) read `cannot tell: one of host stack ... or two causes at once: 25
    pairs of these`: the engineer fixes the stack and returns a broken NIC to service. nid010's
    interconnect runs lost beyond the same test's runs elsewhere, which no layer of every run
    does: the line names the pairs, nid010 in them."""
    for seed in range(3):
        before, after = build(random.Random(seed), [Fault('host stack', None, 0.15), Fault('link', 'nid010', 0.5)],
                              mode='busy', noise=0.03, nodes=partition(16))
        [v] = verdicts(before, after)
        line = v.line()
        assert v.kind == 'cannot tell' and ('host stack',) not in v.hypotheses, line
        assert ('host stack', 'the link of nid010') in v.hypotheses, line
        assert 'the link of nid010' in line.split('\n')[0] and 'pairs of these' not in line, line
        assert 'no one cause nor pair' not in line, line


def test_w2_one_candidate_left_is_named_with_what_is_not_cleared():
    """At 5952cf0 the red-team's power_nid003_busy_r5 (nid003 power-capped, 80 % speed) read
    `cannot tell: one of node nid003` with one candidate (9 such cases); the docs promise 'One
    left: it is named'. The pairs that a second cause in cells near the noise would make are
    said on the next line, not counted."""
    named = 0
    for seed in range(3):
        before, after = build(random.Random(seed), [Fault('node', 'nid003', 0.2)], mode='busy', noise=0.03,
                              nodes=partition(16))
        found = verdicts(before, after)
        line = found[0].line()
        assert 'cannot tell: one of node nid003:' not in line and 'pairs of these' not in line, line
        named += line.startswith('likely cause: node nid003')
    assert named >= 2, line


def test_w1_the_run_proposed_separates_nodes_that_always_ran_together():
    """At 5952cf0 the red-team's idle-placement cases (every 4-node job on nid001-004) proposed
    `-n InterconnectCheck -P num_nodes=2 -J exclude=nid003,nid004` to tell nid003 from nid004:
    every hypothesis predicts that run passes (6 cases). A run pinned to one of them does not.
    Where only the 4-node jobs lost and the slowest rank's fraction did not fall (a link), the
    fabric as 4-node jobs use it stands beside them (the fourth red-team's d11), and the run
    that leaves them out is the one that separates: at 4 nodes, which that fabric slows."""
    for kind in ('link', 'node'):
        before, after = build(random.Random(7), [Fault(kind, 'nid003', 0.5)], mode='slurm', noise=0.02,
                              before_counts=(1, 2, 4), after_counts=(1, 2, 4))
        [v] = verdicts(before, after)
        assert v.kind == 'cannot tell' and {'nid003', 'nid004'} <= {n.split()[-1] for n in v.named}, v.line()
        if kind == 'node':
            assert re.search(r'-J nodelist=nid00[34]\b', v.separating), v.line()
            assert 'exclude=nid003,nid004' not in v.separating, v.line()
        else:
            assert candidates.fabric_from(4) in v.named, v.line()
            assert '-n InterconnectCheck -P num_nodes=4 -J exclude=nid003,nid004' in v.separating, v.line()


# --- the third red-team of issue 49 (seen failing on dae80fa) ---------------------------------------

NID006 = {'node nid006', 'a GPU of nid006', 'the link of nid006'}


def test_rt3_c38_a_slow_nic_on_a_busy_partition_under_repeat_3_fails_the_gate():
    """c38: nid006's NIC at half speed, busy partition of 16, --repeat 3, 3 % noise and 4 % of
    runs interfered (2-4 spreads slower). At dae80fa 2 of these 8 seeds exited 0 (`no likely
    cause: nothing got slower or failed`: each of nid006's runs lost 12-49 %, but each was one
    run of its test, judged alone against a spread too wide for one run) and 2 listed every
    node. Pooled over the tests nid006 ran (each test's runs on it against its runs elsewhere),
    its loss is clear: the line names nid006's candidates and no other."""
    for seed in range(8):
        before, after = build(random.Random(seed), [Fault('link', 'nid006', 0.5)], mode='busy', noise=0.03,
                              repetitions=(3, 3), nodes=partition(16), tail=0.04)
        found = verdicts(before, after)
        assert found, seed
        singles = {h[0] for h in found[0].hypotheses if len(h) == 1}
        assert singles and singles <= NID006, (seed, found[0].line())


def test_rt3_c35_a_plugin_lost_in_every_image_is_not_the_fabric_alone():
    """c35: RCCL no longer loads the network plugin in any image (each image's own plugin), busy
    partition and idle. At dae80fa: `likely cause: fabric` (busy) or `cannot tell: one of fabric,
    nid001 ...` (idle): an engineer sent to the network team, while the stack line said `network
    plugin aws-ofi-rccl 1.4.0 -> none (not loaded) in every image`. The images' own network
    layer, alike in all of them, slows what the fabric slows: cannot tell, both named."""
    for mode in ('busy', 'slurm'):
        for seed in range(2):
            before, after = build(random.Random(seed), [Fault('image net', image, 0.6) for image in IMAGES],
                                  mode=mode, noise=0.03, nodes=partition(16))
            [v] = verdicts(before, after)
            assert v.kind == 'cannot tell' and {('fabric',), ('the network layer of every image',)} <= set(v.hypotheses), v.line()
            assert 'network plugin aws-ofi-rccl 1.4.0 -> none (not loaded)' in v.line(), v.line()


def test_rt3_a_fabric_fault_with_the_plugin_unchanged_stays_the_fabric():
    """The other side of c35: the fabric slowed and every image's RCCL and plugin as before (the
    host's libfabric changed, which every image bind-mounts): no images' network layer."""
    before, after = build(random.Random(3), [Fault('fabric', None, 0.6)], mode='busy', noise=0.03,
                          nodes=partition(16))
    [v] = verdicts(before, after)
    assert ('fabric',) in v.hypotheses and 'the network layer of every image' not in v.named, v.line()


def shares_session(rng, compute, comm, side):
    """One 4-node MNIST test, 5 runs: a step's compute and communication times (s) give its rate,
    and communication_efficiency (the job's rate over the same GPUs alone: compute over the step)."""
    from mlcheck.history.samples import Sample
    found = []
    for r in range(5):
        step = compute + comm
        shared = 1 + rng.gauss(0, 0.03)
        for var, unit, value in (('samples_per_s', 'samples/s', 4000 / step * shared),
                                 ('train_time', 's', 10 * step / shared),
                                 ('communication_efficiency', '%', 100 * compute / step * (1 + rng.gauss(0, 0.01)))):
            found.append(Sample('sim:cluster', 'MNISTDistributedCheck %image=torch-2.9.1 %num_nodes=4', 'torch-2.9.1',
                                4, var, value, unit, time=1e9 + r * 600 + (side == 'after') * 86400,
                                jobid=f'{side}{r}', nodelist='nid001,nid002,nid003,nid004', settings='epochs=3'))
    return found


def test_rt3_c16_a_faster_job_whose_efficiency_share_fell_passes_the_gate():
    """c16 and c34: the host stack 15-25 % faster (GPUs compute faster, the exchange takes as
    long): every rate improved, and communication_efficiency (and scaling_efficiency, against a
    1-node run that sped up more) fell 6-7 %. At dae80fa that share's row was a REGRESSION, exit
    1, `cannot tell: one of host stack, fabric, ...` for an upgrade that made everything faster.
    A share of a faster reference that fell where its test's own rates improved and none got worse
    is said, not gated; where the job got slower too, it stays a regression."""
    for seed in range(5):
        rng = random.Random(seed)
        before = shares_session(rng, 1.0, 0.5, 'before')
        table = EvidenceTable.of(before, shares_session(rng, 0.8, 0.5, 'after'))
        share = next(c for c in table.comparisons if c.key[2] == 'communication_efficiency')
        assert share.change < -0.05 and share.verdict not in compare.FAILING, (seed, share.verdict, share.change)
        assert table.exit_status() == 0 and table.cause_lines()[0] == NOTHING_SAID, table.cause_lines()
        slower = EvidenceTable.of(before, shares_session(rng, 1.0, 0.7, 'after'))
        share = next(c for c in slower.comparisons if c.key[2] == 'communication_efficiency')
        assert share.verdict == compare.REGRESSION and slower.exit_status() == 1, (seed, share.verdict)


def test_rt3_idle_the_run_that_separates_is_not_more_repetitions_on_the_same_nodes():
    """The red-team's idle cases (c07 fabric, c08 host stack; 3 % noise and 4 % of runs
    interfered, so some cells sit near their threshold): `cannot tell: one of fabric, nid001 (its
    link), nid002 (the node or its link)` and `host stack, node nid001`, each with `--repeat 5
    (more repetitions ...)`. On an idle partition Slurm gives every job the lowest nodes: the
    repetitions land on nid001-nid004 again and every hypothesis predicts what they show. The
    run on other nodes separates them (the fabric and the host stack slow it, nid001 does not)."""
    for kind in ('fabric', 'host stack'):
        for seed in range(3):
            before, after = build(random.Random(seed), [Fault(kind, None, 0.4 if kind == 'fabric' else 0.15)],
                                  mode='slurm', noise=0.03, tail=0.04)
            v = verdicts(before, after)[0]
            assert v.kind == 'cannot tell' and (kind,) in v.hypotheses, v.line()
            assert '--repeat' not in v.separating and '-J exclude=nid001' in v.separating, (kind, seed, v.line())


# --- a whole report judged at once: the false alarms of healthy upgrades (third red-team: n13, c29) -----

# Each figure against twice its own spread of 3-5 repetitions a side made one of a report's hundred
# figures fail by chance in 15-35 % of healthy upgrades at --repeat 5 and 50-75 % at --repeat 3
# (20fee69, docs/performance-history.md). Sized so that a healthy run of this test fails at most
# once in a thousand: a batch of HEALTHY sessions may hold ALARMS_ALLOWED exits 1; were the rate
# per report the 1 % the rule is built for (measured: under 1 %, docs), 7 or more of 100 is
# binomially 8e-5, and three batches 2.4e-4. At 20fee69's rates every batch fails.
HEALTHY, ALARMS_ALLOWED = 100, 6


@st.composite
def healthy_partitions(draw):
    """The matrix of a site (24 tests: 3 checks x 2 images x 1, 2, 4 and 8 nodes) on 16 nodes,
    busy or idle, --repeat 3 or 5, runs spreading 3-8 % (after's up to twice before's: a busier
    partition after maintenance) and 0-6 % of them interfered (2-4 spreads slower); nothing
    changed."""
    noise = draw(st.floats(0.03, 0.08))
    return dict(seed=draw(st.integers(0, 2 ** 32)), mode=draw(st.sampled_from(('slurm', 'busy'))),
                repetitions=(draw(st.sampled_from((3, 5))),) * 2, tail=draw(st.floats(0, 0.06)),
                noise=(noise, noise * draw(st.floats(1, 2))))


@settings(max_examples=3, deadline=None)
@given(healthy_partitions())
def test_a_healthy_upgrade_fails_the_gate_at_most_one_time_in_a_hundred(shape):
    rng = random.Random(shape.pop('seed'))
    alarms = []
    for _ in range(HEALTHY):
        before, after = build(rng, [], nodes=partition(16), before_images=IMAGES[:2], after_images=IMAGES[:2],
                              before_counts=(1, 2, 4, 8), after_counts=(1, 2, 4, 8), **shape)
        table = EvidenceTable.of(before, after)
        if table.exit_status():
            alarms.append(table.cause_lines()[0])
    assert len(alarms) <= ALARMS_ALLOWED, (shape, len(alarms), alarms[:2])


def test_rt3_c46_one_run_whose_slowest_rank_fell_is_a_transient_or_that_gpu():
    """c46: one GPU of nid012 a quarter slower, a busy partition running 1-node tests only, one
    run after landed on it: its slowest rank's fraction fell from 0.98 to 0.73. At 20fee69 `no
    likely cause: nothing got slower or failed`, exit 0: a loss on one run is a job beside another
    (interference), and made unclear. A job beside another slows every rank, which all wait at
    each step; one rank three thresholds under its peers is a GPU's, though one run cannot rule
    out a transient: `cannot tell`, and the run on that node again."""
    for seed in range(40):
        before, after = build(random.Random(seed), [Fault('gpu', 'nid012', 0.25)], mode='busy', noise=0.03,
                              nodes=partition(16), before_counts=(1,), after_counts=(1,))
        if len({s.jobid + s.name for s in on_node(after, 'nid012')}) == 1:
            break
    [found] = verdicts(before, after)
    assert found.kind == 'cannot tell' and {causes.TRANSIENT, 'a GPU of nid012'} <= found.named, found.line()
    assert '-J nodelist=nid012' in found.separating and '--repeat' in found.separating, found.separating


def test_rt3_w9c_two_interfered_runs_on_no_common_node_are_said_not_blamed():
    """w9c: a healthy busy partition, two of five runs of one test 30 % slower on nodes with none
    in common (each shared its nodes with another job). At 20fee69 a REGRESSION row and `cannot
    tell: one of fabric, the network layer of image ..., nid001/.../nid016 (its link)`, exit 1:
    every link of the partition, as if something that every run crosses broke. Judged on every
    run's spread the change is within the report's noise: the gate passes, and the line after
    the first says which runs, that it is interference or a fault of the image that strikes now
    and then, and the run that tells them apart."""
    run = ('CIFAR100ResNetCheck', IMAGES[0], 2)
    for seed in range(40):
        faults = [Fault('transient slow', None, 0.3, run + (r,)) for r in (1, 3)]
        before, after = build(random.Random(seed), faults, mode='busy', noise=0.03, nodes=partition(16))
        slow = [set(s.nodelist.split(',')) for s in after if s.name == f'{run[0]} %image={run[1]} %num_nodes=2'
                and s.jobid in ('after1', 'after3') and s.var == 'images_per_s']
        if not slow[0] & slow[1]:
            break
    table = EvidenceTable.of(before, after)
    lines = table.cause_lines()
    assert table.exit_status() == 0 and lines[0].startswith(WITHIN_NOISE_SAID), lines
    assert '2 of 5 runs of CIFAR100ResNetCheck' in lines[1] and 'no node in common' in lines[1], lines
    assert '--repeat 5' in lines[1], lines


@pytest.mark.parametrize('repetitions', [(3, 1), (2, 1), (1, 3)])
def test_rt5_a_healthy_upgrade_with_one_run_on_a_side_passes_the_gate(repetitions):
    """e11, e17: the baseline at --repeat 3, the upgrade's check a plain `reframe -r` (or the
    other way round), nothing changed. A cell with a spread on one side only was judged by the
    threshold and that spread, never by the report's level: 3 runs' spread on 2 degrees of freedom
    is as often a third of the noise as not, and 49 of 50 such healthy reports failed the gate at
    6023b03 (`busbw -5.3 %, 1.6 % (before only) REGRESSION` beside like cells at 8.4 %). Now such a
    cell takes its like cells' pooled spread where wider, and is judged with the rest. Sized as the
    healthy-gate property above (at most 6 of 100 at a true 1 %: 8e-5 a batch)."""
    rng = random.Random(sum(repetitions))
    alarms = []
    for _ in range(HEALTHY):
        before, after = build(rng, [], mode='busy', noise=0.04, nodes=partition(16), repetitions=repetitions,
                              before_images=IMAGES[:3], after_images=IMAGES[:3],
                              before_counts=(1, 2, 4), after_counts=(1, 2, 4))
        table = EvidenceTable.of(before, after)
        if table.exit_status():
            alarms.append(table.cause_lines()[0])
    assert len(alarms) <= ALARMS_ALLOWED, (len(alarms), alarms[:2])


@settings(max_examples=300, deadline=None)
@given(x=st.floats(allow_nan=True) | st.sampled_from([0.0, -0.0, math.inf, -math.inf]),
       dof=st.floats(min_value=-2, max_value=1e7) | st.integers(-1, 400) | st.just(math.inf))
def test_the_fast_t_tail_is_scipy_s_t_sf(x, dof):
    """The gate's one-sided chance is Student's t's survival function, taken by scipy's ufunc for
    speed (compare._t_sf): it must be the very value scipy's t.sf gives, invalid arguments too."""
    from scipy.stats import t
    fast, slow = compare._t_sf(x, dof), float(t.sf(x, dof))
    assert fast == slow or (math.isnan(fast) and math.isnan(slow)), (x, dof, fast, slow)


def test_the_chi_square_quantiles_are_scipy_s():
    from scipy.stats import chi2
    for dof in (1, 2, 3.5, 4, 12, 36, 250):
        assert compare._chi2_quantiles(dof) == (float(chi2.median(dof)), float(chi2.ppf(compare.UNLIKE, dof)))
