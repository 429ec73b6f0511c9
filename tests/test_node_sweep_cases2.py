"""mlcheck-nodes against the nine answers of the second red-team of issue 47 that would lead an
admin to a wrong action (/tmp/redteam2-i47, W1-W9): each case's physics written with this
suite's own generator of sweeps (tests/test_nodes.run_of_sweep), each seen failing on 9b627e2
first."""

import dataclasses

import pytest

from mlcheck.history import hostlist
from perflogs import write_perflog
from test_node_sweep_cases import (CIFAR, CIFAR_FIGURES, HOUR, full_sweep, judged, resumed,
                                   utc)  # noqa: F401 (the fixture)
from test_nodes import LINKS, MNIST, NODES16, NOV, appended, drained, run, run_of_sweep, slurm_states

DAY = 86400
ROCM60 = 'MNISTDistributedCheck %image=rocm60.sif %num_nodes=1'


def not_judged_line(out, node):
    return next((ln for ln in out.splitlines() if ln.startswith(f'  {node}: not judged')), '')


@pytest.mark.parametrize('stale', ['retired image', 'one-node debug run'])
def test_w1_w2_a_test_last_swept_before_the_partitions_latest_sweep_drains_no_node(
        tmp_path, capsys, stale):
    """c03, c04: nid005 failed a month-old sweep of a retired image (or a one-node debug run of
    CIFAR with other settings); today's full sweep passes everywhere. The old test is stale: no
    DRAIN line, nid005 not judged naming it, never resumed."""
    if stale == 'retired image':
        old = run_of_sweep(NODES16, NOV[24] - 30 * DAY, failed={('nid005', 0)}, name=ROCM60,
                           first_job=100)
    else:
        old = run_of_sweep(['nid005'], NOV[24] - 25 * DAY, failed={('nid005', 0)}, name=CIFAR,
                           figures=CIFAR_FIGURES, settings='epochs=1', first_job=100)
    code, out, _ = judged(tmp_path, capsys, old + full_sweep(NOV[24]))
    assert code == 1 and drained(out) == [] and 'nid005' not in resumed(out), out
    line = not_judged_line(out, 'nid005')
    assert 'stale' in line and '2026-10' in line and '(@START:END)' in line, out
    assert len(resumed(out)) == 15, out


def test_w1_a_test_swept_for_a_day_before_another_is_re_run_alone_is_no_stale_test(
        tmp_path, capsys):
    """The stale rule reads a pause of the whole partition, not a test's age: MNIST swept over
    15 nodes (nid016 held by users), then CIFAR with --repeat 3 for 32 h, then CIFAR re-run alone
    3 h later (its data fixed): MNIST's sweep ended 35 h before. It is of this maintenance:
    nid005's MNIST failure drains it, and nid016, missing from it (it ran MNIST only in the sweep
    of 5 days before), is never resumed."""
    before = full_sweep(NOV[24] - 5 * DAY, seed=7)
    mnist = run_of_sweep(NODES16[:15], NOV[24], failed={('nid005', 0)}, first_job=2000)
    cifar = run_of_sweep(NODES16, mnist[-1].time + 60, 3, name=CIFAR, figures=CIFAR_FIGURES,
                         every_s=40 * 60, first_job=3000)
    rerun = run_of_sweep(NODES16, cifar[-1].time + 3 * HOUR, name=CIFAR, figures=CIFAR_FIGURES,
                         first_job=4000, seed=3)
    code, out, _ = judged(tmp_path, capsys, before + mnist + cifar + rerun)
    assert code == 1 and drained(out) == ['nid005'] and 'stale' not in out, out
    assert 'nid016' not in resumed(out) and len(resumed(out)) == 14, out


def test_w3_repaired_nodes_re_swept_alone_and_failing_again_are_drained(tmp_path, capsys):
    """c05: 4 nodes fail CIFAR in the full sweep, are repaired and re-swept alone 6 h later,
    and fail again 4 of 4: 4 of the partition's 16 nodes, not the partition's failure."""
    bad = ['nid003', 'nid007', 'nid011', 'nid013']
    first = full_sweep(NOV[24], failed={(n, 0, 'CIFAR') for n in bad})
    again = full_sweep(NOV[24] + 6 * HOUR, failed={(n, 0, 'CIFAR') for n in bad}, nodes_=bad,
                       seed=5)
    code, out, _ = judged(tmp_path, capsys, first + again)
    assert code == 1 and drained(out) == bad and 'partition-wide' not in out, out


def test_w3_a_test_failing_on_every_idle_node_of_a_partly_swept_partition_drains_none(
        tmp_path, capsys):
    """The other side of W3: after the upgrade only 6 of 16 nodes are idle (users hold the rest)
    and CIFAR fails on all 6 (its data path); they passed it 5 days before. 6 of 16 is under half
    the partition, but nothing says the nodes are at fault: no DRAIN line, each not judged."""
    idle = NODES16[:6]
    before = full_sweep(NOV[24] - 5 * DAY, seed=7)
    now = full_sweep(NOV[24], failed={(n, 0, 'CIFAR') for n in idle}, nodes_=idle)
    code, out, _ = judged(tmp_path, capsys, before + now)
    assert code == 1 and drained(out) == [] and not resumed(out) & set(idle), out
    assert all('re-run it over the partition' in not_judged_line(out, n) for n in idle), out


def test_w4_a_test_failing_everywhere_then_re_run_in_the_same_sweep_drains_the_node_still_failing(
        tmp_path, capsys):
    """c06: CIFAR fails on all 16 at 09:00 (its data path), the path is fixed and CIFAR re-run
    45 min later: nid009 fails, 15 pass. One sweep by the 60 min gap; never partition-wide, and
    nid009 never goes back to users."""
    mnist = run_of_sweep(NODES16, NOV[24], every_s=15)
    broken = run_of_sweep(NODES16, NOV[24] + 600, failed={(n, 0) for n in NODES16}, name=CIFAR,
                          figures=CIFAR_FIGURES, every_s=10, first_job=3000)
    fixed = run_of_sweep(NODES16, NOV[24] + 600 + 45 * 60, failed={('nid009', 0)}, name=CIFAR,
                         figures=CIFAR_FIGURES, every_s=60, first_job=4000, seed=4)
    code, out, _ = judged(tmp_path, capsys, mnist + broken + fixed)
    assert code == 1 and 'partition-wide' not in out and 'nid009' not in resumed(out), out
    assert drained(out) == ['nid009'], out


def test_w5_a_partition_of_two_node_models_drains_neither(tmp_path, capsys):
    """c07: 5 of 16 nodes are a newer model, 28 % faster: the 11 others are the partition's
    common node, not 11 slow nodes."""
    faster = {n: -0.28 for n in NODES16[11:]}
    code, out, _ = judged(tmp_path, capsys, full_sweep(NOV[24], slower=faster))
    assert drained(out) == [], out
    assert 'two groups' in out, out


def test_w7_drain_times_of_a_saved_states_file_in_no_known_zone_prove_no_order(
        tmp_path, capsys, monkeypatch):
    """c10_Tokyo: Slurm (UTC) drained every node at 09:30 for the maintenance, the sweep's runs
    ended 08:00-08:32 UTC, before it; read on a laptop in Tokyo the drain time 09:30 reads as
    00:30 UTC, before the runs: 16 untested nodes resumed. Without --slurm-tz, a drain time within
    14 h of the evidence proves no order: not vetted; --slurm-tz UTC reads them right."""
    import time
    monkeypatch.setenv('TZ', 'Asia/Tokyo')
    time.tzset()
    states = {n: ('IDLE+DRAIN', 'upgrade 2026-11', '2026-11-24T09:30:00') for n in NODES16}
    found = run_of_sweep(NODES16, NOV[24])
    (tmp_path / 's.txt').write_text(slurm_states(NODES16, states))
    log = write_perflog(tmp_path / 'sweep.log', found)
    args = [log, '--slurm-states', str(tmp_path / 's.txt'), '--resume-reason', 'upgrade 2026-11']
    code, out, _ = run(capsys, *args)
    assert code == 1 and resumed(out) == set() and 'not vetted (16)' in out, out
    assert 'zone' in out, out
    code, out, _ = run(capsys, *args, '--slurm-tz', 'UTC')
    assert code == 1 and resumed(out) == set() and 'not vetted (16)' in out, out
    assert 'UTC' in out, out


def test_w8_a_node_an_admin_drained_for_a_ticket_gets_no_drain_line(tmp_path, capsys):
    """c09: an admin drained nid007 for 'RMA DIMM ticket 4411' while its sweep job ran; slow in
    that run, it gets no DRAIN line (which would overwrite the ticket), and is listed as left
    alone with what mlcheck found."""
    states = {'nid007': ('IDLE+DRAIN', 'RMA DIMM ticket 4411', '2026-11-24T08:20:00')}
    code, out, _ = judged(tmp_path, capsys, full_sweep(NOV[24], slower={'nid007': 0.35}), states)
    assert code == 1 and drained(out) == [], out
    assert "left alone (already drained: 'RMA DIMM ticket 4411'): nid007" in out, out
    assert 'nid007' not in resumed(out), out


@pytest.mark.parametrize('slow', [None, 'nid004'])
def test_w9_healthy_nodes_in_a_maintenance_reservation_are_one_line_and_exit_0(
        tmp_path, capsys, slow):
    """c01, c02: the documented flow: nodes resumed into a MAINT reservation, swept, DRAIN lines
    pasted, the reservation ended. Healthy nodes there need nothing resumed: one host list, and
    exit 0 when nothing else is wrong."""
    states = {n: ('IDLE+MAINT', '') for n in NODES16}
    found = full_sweep(NOV[24], slower={slow: 0.35} if slow else None)
    # Slurm's partition sim, the one config/simulated.py runs sim:cluster in: the nodes to vet
    (tmp_path / 's.txt').write_text(slurm_states(NODES16, states, partition='sim'))
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', found), '--slurm-states',
                       str(tmp_path / 's.txt'), '--slurm-tz', 'UTC')
    assert 'left alone' not in out, out
    reserved = [ln for ln in out.splitlines() if 'ending the reservation' in ln]
    assert len(reserved) == 1, out
    if slow:
        assert code == 1 and drained(out) == ['nid004'], out
    else:
        assert code == 0 and 'nid[001-016]' in reserved[0], out


def test_a_user_held_node_finishing_hours_later_is_of_the_same_sweep(tmp_path, capsys):
    """A node held by users starts its sweep job 3 h after the others (2.5 h after the last ended):
    a pause of the scheduler,
    not a sweep of its own; the sweep's other 15 nodes stay judged and the late one with them."""
    first = run_of_sweep(NODES16[:-1], NOV[24])
    late = run_of_sweep(NODES16[-1:], NOV[24] + 3 * HOUR, first_job=5000)
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', first + late), '--expect',
                       'nid[001-016]')
    assert 'the latest sweep counts: 32 record(s)' in out and 'earlier sweep' not in out, out
    assert code == 0 and resumed_line_names(out) == set(NODES16), out


def resumed_line_names(out):
    line = next((ln for ln in out.splitlines() if 'State=RESUME' in ln), '')
    return set(hostlist.expand(line.split()[2].strip("'").removeprefix('NodeName='))) if line else set()


def test_help_says_the_sweep_gap_is_per_test(capsys):
    with pytest.raises(SystemExit):
        run(capsys, '--help')
    out = capsys.readouterr().out
    assert 'per partition' not in out and 'latest sweep of a partition' not in out, out


def test_a_node_with_a_repetition_that_left_no_record_is_not_judged(tmp_path, capsys):
    """Third red-team, c01: --repeat 3 over 16 nodes; nid007's third job died with its node, so
    ReFrame wrote no line for it: 2 runs where its peers have 3. The missing run may have failed:
    nid007 is not judged (never resumed), exit 1; the others are resumed."""
    found = [s for s in run_of_sweep(NODES16, NOV[24], 3)
             if not (s.nodelist == 'nid007' and s.jobid == str(1000 + 6 * 3 + 3))]
    code, out, _ = judged(tmp_path, capsys, found)
    assert code == 1 and 'nid007' not in resumed(out) and len(resumed(out)) == 15, out
    assert 'ran 2 of the 3 repetitions most of its peers ran of MNISTDistributedCheck' in \
        not_judged_line(out, 'nid007'), out


# --- third red-team of issue 47: a sweep split by a pause of the scheduler (c10, c02, c29) -----

def test_c10_a_failed_repetition_before_a_scheduler_stall_is_never_history(tmp_path, capsys):
    """--repeat 3, the repetitions one after another over 16 nodes; the scheduler stalls 2 h
    after the first (a slurmctld restart). nid005 failed the first and passed the two after: a
    flaky node, or one repaired in the pause; the records cannot tell, so it is never resumed
    and its line says so."""
    first = run_of_sweep(NODES16, NOV[24], failed={('nid005', 0)}, first_job=1000)
    second = run_of_sweep(NODES16, first[-1].time + 2 * HOUR, seed=2, first_job=2000)
    third = run_of_sweep(NODES16, second[-1].time + 120, seed=3, first_job=3000)
    code, out, _ = judged(tmp_path, capsys, first + second + third)
    assert code == 1 and 'nid005' not in resumed(out) and len(resumed(out)) == 15, out
    line = not_judged_line(out, 'nid005')
    assert 'failed at 2026-11-24T' in line and 'the records cannot tell' in line, out


@pytest.mark.parametrize('late', ['busy partition', 'one node held by users'])
def test_c02_c29_runs_going_on_to_other_nodes_after_a_pause_are_the_same_sweep(
        tmp_path, capsys, late):
    """--repeat 3 over 16 nodes; nid005 failed 1 of its 3 repetitions. The partition is busy and
    its other 8 nodes are freed 90 min after the first 8 ended (c02), or one node held by users
    runs 3 h late (c29): one sweep, nid005 drained for its failure, the others resumed."""
    split = 8 if late == 'busy partition' else 15
    pause = 90 * 60 if late == 'busy partition' else 3 * HOUR
    first = run_of_sweep(NODES16[:split], NOV[24], 3, failed={('nid005', 1)})
    rest = run_of_sweep(NODES16[split:], first[-1].time + pause, 3, seed=4, first_job=9000)
    code, out, _ = judged(tmp_path, capsys, first + rest)
    assert code == 1 and drained(out) == ['nid005'], out
    assert 'failed 1 of 3 repetitions' in out and resumed(out) == set(NODES16) - {'nid005'}, out


@pytest.mark.parametrize('expect', [False, True])
def test_d1_nodes_slurm_lists_that_never_ran_are_not_vetted_without_expect(tmp_path, capsys, expect):
    """Third red-team, D1: Slurm lists 16 nodes in sim, the partition config/simulated.py runs
    sim:cluster in (and 20 in all, with 4 CPU nodes); the sweep ran on 14, nid015 and nid016
    held by users' jobs. Without --expect they were not mentioned and the exit status was 0:
    the admin read the partition as vetted. They are not vetted, exit 1; the CPU nodes of `all`
    are no node of this sweep; --expect still chooses. Where no Slurm partition is named for the
    ReFrame partition (gpu here), none is guessed: exit 1, saying to give --expect."""
    held = {'nid015': ('MIXED', ''), 'nid016': ('ALLOCATED', '')}
    log = write_perflog(tmp_path / 'sweep.log', run_of_sweep(NODES16[:14], NOV[24]))
    for name in ('sim', 'gpu'):
        states = slurm_states(NODES16, {n: ('IDLE+DRAIN', UPGRADE) for n in NODES16[:14]}
                              | held, partition=f'{name},all')
        states += slurm_states([f'cpu{i:03d}' for i in range(1, 5)], partition='all')
        (tmp_path / 'states.txt').write_text(states)
        code, out, _ = run(capsys, log, '-C', 'config/simulated.py', '--slurm-states', str(tmp_path / 'states.txt'),
                           '--slurm-tz', 'UTC', '--resume-reason', UPGRADE,
                           *(['--expect', 'nid[001-014]'] if expect else []))
        assert resumed_line_names(out) == set(NODES16[:14]), out
        if expect:
            assert code == 0 and 'nid015' not in out, out
            continue
        if name == 'gpu':
            assert code == 1 and 'the nodes to vet of sim:cluster are unknown' in out and 'give --expect' in out, out
            continue
        assert code == 1 and '14 healthy, 0 drained, 0 not judged, 2 not vetted' in out, out
        assert '  nid015: no record: never ran' in out and 'cpu001' not in out, out
        assert "Slurm's partition sim (16 nodes" in out, out


UPGRADE = 'upgrade 2026-11'


def test_c04_nightly_smoke_runs_keep_no_retired_test_alive(tmp_path, capsys):
    """Third red-team, c04: a month ago a sweep of a retired image failed on nid005; every night
    since, a one-node smoke run of MNIST on nid001; today's full sweep passes. The smoke runs are
    no sweep: the month still lies between the retired image's sweep and today's, which is stale,
    drains no node, and nid005 is not judged naming it."""
    old = run_of_sweep(NODES16, NOV[24] - 30 * DAY, failed={('nid005', 0)}, name=ROCM60, first_job=100)
    smoke = [s for night in range(29, 0, -1)
             for s in run_of_sweep(['nid001'], NOV[24] - night * DAY, seed=night, first_job=10000 + 10 * night)]
    code, out, _ = judged(tmp_path, capsys, old + smoke + full_sweep(NOV[24]))
    assert code == 1 and drained(out) == [] and 'nid005' not in resumed(out), out
    assert 'stale' in not_judged_line(out, 'nid005'), out


# --- fourth red-team of issue 47 (on 4367e2c): ReFrame's order of repetitions -----------------

def rep_major(nodes_, when, repeats, pause_after=0, pause=2 * HOUR, failed=(), slow_runs=None):
    """--repeat with --distribute=all as ReFrame orders it: repetition 0 on every node, then
    repetition 1 on every node (the node varies fastest), a scheduler's pause after repetition
    `pause_after` (0: none)."""
    found, start = [], when
    for rep in range(repeats):
        runs = run_of_sweep(nodes_, start, failed={(n, 0) for n, r in failed if r == rep},
                            slow_runs={(n, 0): f for (n, r), f in (slow_runs or {}).items() if r == rep},
                            seed=rep + 1, first_job=1000 * (rep + 1))
        found += runs
        start = runs[-1].time + 120 + (pause if pause_after and rep + 1 == pause_after else 0)
    return found


def test_r4_c04_a_slow_repetition_before_a_scheduler_stall_still_drains(tmp_path, capsys):
    """c04: --repeat 3 in ReFrame's order, a 2.5 h stall after repetition 0, in which nid011 ran
    40 % slow (a GPU throttling now and then): one sweep, drained as without the stall."""
    found = rep_major(NODES16, NOV[24], 3, pause_after=1, pause=2.5 * HOUR, slow_runs={('nid011', 0): 0.4})
    code, out, _ = judged(tmp_path, capsys, found)
    assert code == 1 and drained(out) == ['nid011'] and 'slow in 1 of 3 repetitions' in out, out


def test_r4_c16_a_data_path_fixed_while_users_held_the_other_nodes_drains_none(tmp_path, capsys):
    """c16: CIFAR ran on nid001-007 and failed on all 7 (its data path); fixed while users held
    the other nodes, which ran it 3 h later and passed. No DRAIN for the 7 (they need a re-run of
    CIFAR), the others healthy."""
    first = run_of_sweep(NODES16[:7], NOV[24], failed={(n, 0) for n in NODES16[:7]}, name=CIFAR,
                         figures=CIFAR_FIGURES)
    rest = run_of_sweep(NODES16[7:], first[-1].time + 3 * HOUR, name=CIFAR, figures=CIFAR_FIGURES,
                        seed=2, first_job=3000)
    code, out, _ = judged(tmp_path, capsys, first + rest)
    assert code == 1 and drained(out) == [] and resumed(out) == set(NODES16[7:]), out


def test_r4_c33_a_node_slow_in_a_stale_test_is_never_resumed(tmp_path, capsys):
    """c33: a two-day maintenance: CIFAR swept on day 1 (nid009 30 % slow), MNIST 26 h later,
    nothing between. CIFAR is stale and drains no node; nid009 is not judged naming it."""
    cifar = run_of_sweep(NODES16, NOV[24], name=CIFAR, figures=CIFAR_FIGURES, slower={'nid009': 0.3})
    mnist = run_of_sweep(NODES16, cifar[-1].time + 26 * HOUR, seed=2, first_job=3000)
    code, out, _ = judged(tmp_path, capsys, cifar + mnist)
    assert code == 1 and drained(out) == [] and resumed(out) == set(NODES16) - {'nid009'}, out
    assert 'stale' in not_judged_line(out, 'nid009'), out


def test_d2_one_rack_of_two_failing_is_not_called_the_partitions_failure(tmp_path, capsys):
    """Third red-team, D2: nid001-008 (one rack of two, its switch failed) fail MNIST, the other
    rack passes. Half the partition is no partition-wide failure (`fix the configuration`): the
    8 are not judged, named, with both stories; none is resumed."""
    rack = NODES16[:8]
    code, out, _ = judged(tmp_path, capsys, run_of_sweep(NODES16, NOV[24], failed={(n, 0) for n in rack}))
    assert code == 1 and drained(out) == [] and 'partition-wide' not in out, out
    assert resumed(out) == set(NODES16[8:]), out
    assert 'nid[001-008]): the partition\'s failure (configuration, data, image) or these nodes\' (a rack' \
        in not_judged_line(out, 'nid003'), out


# --- fifth red-team of issue 47 (on 7bacc93) --------------------------------------------------

def test_r5_c01_a_slow_repetition_of_a_session_longer_than_a_day_still_drains(tmp_path, capsys):
    """c01b: --repeat 3 on a busy partition; repetition 1 trickles over a day between two
    stalls of 2 h, so repetition 0 ended 27 h before repetition 2 began. nid007 ran repetition
    0 35 % slow: one session, drained as without the stalls."""
    found = rep_major(NODES16, NOV[24], 1, slow_runs={('nid007', 0): 0.35})
    slow_rep = run_of_sweep(NODES16, found[-1].time + 2 * HOUR, every_s=90 * 60, seed=2, first_job=2000)
    last = run_of_sweep(NODES16, slow_rep[-1].time + 2 * HOUR, seed=3, first_job=3000)
    code, out, _ = judged(tmp_path, capsys, found + slow_rep + last)
    assert code == 1 and drained(out) == ['nid007'] and 'slow in 1 of 3 repetitions' in out, out


def test_r5_c11c_a_chassis_failing_before_a_pause_and_passing_after_is_no_fix(tmp_path, capsys):
    """c11c: only nid001-004 (one chassis) are idle at first and all four fail; 3 h later the
    other 12 pass; 70 min after, the chassis re-run with nothing repaired passes. A fix or a
    flaky chassis: the four are not judged, never resumed."""
    chassis = run_of_sweep(NODES16[:4], NOV[24], failed={(n, 0) for n in NODES16[:4]})
    rest = run_of_sweep(NODES16[4:], chassis[-1].time + 3 * HOUR, seed=2, first_job=2000)
    again = run_of_sweep(NODES16[:4], rest[-1].time + 70 * 60, seed=3, first_job=3000)
    code, out, _ = judged(tmp_path, capsys, chassis + rest + again)
    assert code == 1 and drained(out) == [] and resumed(out) == set(NODES16[4:]), out
    assert 'the re-run counts' not in out and '@START' not in out, out


def test_r5_c12_max_age_never_cuts_a_sweep_in_two(tmp_path, capsys):
    """c12: a --repeat 2 sweep began 20 h ago, nid005 failed repetition 0, then a 6 h stall;
    --max-age 16h (to leave out last week's sweep) would keep repetition 1 alone: refused in one
    line, exit 2, nothing printed to paste."""
    import time
    start = time.time() - 20 * HOUR
    week = run_of_sweep(NODES16, start - 7 * DAY, seed=9, first_job=100)
    found = rep_major(NODES16, start, 2, pause_after=1, pause=6 * HOUR, failed={('nid005', 0)})
    code, out, err = judged(tmp_path, capsys, week + found, None, '--max-age', '16h')
    assert code == 2 and 'cuts the sweep of MNISTDistributedCheck[image=host]' in err, (out, err)
    assert err.count('\n') == 1 and 'scontrol' not in out, err


def test_r5_c06b_the_slurm_partition_named_as_reframes_is_vetted_without_expect(tmp_path, capsys):
    """c06b: ReFrame's sim:gpu swept only nid001-008 (users held nid009-032); Slurm has gpu
    (nid001-032), debug (nid001-008) and all. The 24 unswept nodes of gpu are not vetted, exit 1."""
    nodes32 = [f'nid{i:03d}' for i in range(1, 33)]
    states = slurm_states(nodes32[:8], partition='gpu,debug,all') + slurm_states(nodes32[8:], partition='gpu,all')
    (tmp_path / 'states.txt').write_text(states)
    log = write_perflog(tmp_path / 'sweep.log', run_of_sweep(nodes32[:8], NOV[24], partition='sim:gpu'))
    code, out, _ = run(capsys, log, '--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC')
    assert code == 1 and '8 healthy, 0 drained, 0 not judged, 24 not vetted' in out, out
    assert "Slurm's partition gpu (32 nodes" in out, out


# --- sixth red-team of issue 47 (on 72c7a35) --------------------------------------------------

def test_r6_c09_a_pass_a_failure_and_a_pass_hours_apart_is_a_flaky_node(tmp_path, capsys):
    """c09: --repeat 3 of MNIST and CIFAR, their repetitions interleaved over hours; nid005
    passed MNIST's repetition 0, failed 1 and passed 2: flaky, drained, whatever the pauses."""
    r0 = run_of_sweep(NODES16, NOV[24], first_job=1000)
    r1 = run_of_sweep(NODES16, r0[-1].time + 3 * HOUR, failed={('nid005', 0)}, seed=2, first_job=2000)
    r2 = run_of_sweep(NODES16, r1[-1].time + 3 * HOUR, seed=3, first_job=3000)
    found = r0 + r1 + r2
    code, out, _ = judged(tmp_path, capsys, found)
    assert code == 1 and drained(out) == ['nid005'] and 'failed 1 of 3 repetitions' in out, out


def test_r6_c08_every_node_of_a_small_partition_failing_is_its_failure(tmp_path, capsys):
    """c08: CIFAR failed on nid001-003, every node of a 3-node partition: its data path, no DRAIN."""
    nodes3 = NODES16[:3]
    (tmp_path / 'states.txt').write_text(slurm_states(nodes3))
    log = write_perflog(tmp_path / 'sweep.log', run_of_sweep(nodes3, NOV[24], failed={(n, 0) for n in nodes3},
                                                            name=CIFAR, figures=CIFAR_FIGURES))
    code, out, _ = run(capsys, log, '--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC')
    assert code == 1 and drained(out) == [] and 'failed on 3 of 3 nodes: a partition-wide failure' in out, out


def test_r6_c14_a_failed_pair_sweep_then_a_pass_is_never_hidden(tmp_path, capsys):
    """c14b/c14c: the pair sweep over nid[001-008] failed at 10:00 and passed at 13:00 (or 15 min
    later): a flaky fabric or a repaired one; its nodes not judged, exit 1, the failure said."""
    from test_nodes import pair_sweep_failure
    for later in (3 * HOUR, 15 * 60):
        sweep = run_of_sweep(NODES16, NOV[24])
        failed = dataclasses.replace(pair_sweep_failure({}), time=sweep[-1].time + 600)
        passed = dataclasses.replace(failed, value=0.9, result='pass', problem='', time=failed.time + later)
        code, out, _ = judged(tmp_path, capsys, sweep + [failed, passed])
        assert code == 1 and 'failed, then passed: ' in out and 'the records cannot tell' in out, out


def test_r6_c17_the_slurm_partition_the_site_config_names_is_vetted(tmp_path, capsys):
    """c17: ReFrame's sim:cluster runs with --partition=sim (config/simulated.py: the names
    differ); Slurm has sim (nid001-016) and debug (nid001-012, overlapping, as LUMI's small-g
    overlaps standard-g). The sweep reached nid001-012 (users held the rest): the 4 unswept nodes
    of sim are not vetted, exit 1, not the 12 of debug vetted, exit 0."""
    states = slurm_states(NODES16[:12], partition='sim,debug') + slurm_states(NODES16[12:], partition='sim')
    (tmp_path / 'states.txt').write_text(states)
    log = write_perflog(tmp_path / 'sweep.log', run_of_sweep(NODES16[:12], NOV[24]))
    code, out, _ = run(capsys, log, '-C', 'config/simulated.py', '--slurm-states',
                       str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC')
    assert code == 1 and '12 healthy, 0 drained, 0 not judged, 4 not vetted' in out, out
    assert "Slurm's partition sim (16 nodes" in out, out


def test_r6_c06_a_selection_s_start_never_cuts_a_sweep_in_two(tmp_path, capsys, utc):
    """c06: --repeat 2 with a 3 h stall between the repetitions; nid003 failed repetition 0. The
    admin selects the runs after the stall (PATH@START): refused in one line, as --max-age is."""
    found = rep_major(NODES16, NOV[24], 2, pause_after=1, pause=3 * HOUR, failed={('nid003', 0)})
    log = write_perflog(tmp_path / 'sweep.log', found)
    after = min(s.time for s in found if s.time > found[0].time + HOUR)
    import time
    start = time.strftime('%Y%m%dT%H%M', time.gmtime(after - 60))    # the fixture `utc`: TZ=UTC
    code, out, err = run(capsys, f'{log}@{start}:20261130', '--expect', 'nid[001-016]')
    assert code == 2 and "'s @START:END cuts the sweep of MNISTDistributedCheck[image=host]" in err, (out, err)
    assert 'scontrol' not in out, out


def test_r7_n11b_no_slurm_partition_is_guessed_for_a_partition_no_one_names(tmp_path, capsys):
    """Seventh red-team, n11b: config/perlmutter.py runs perlmutter:gpu with --constraint=gpu (no
    Slurm partition named); Slurm has regular (nid001-032, GPU and CPU nodes) and debug
    (nid001-004). The busy sweep reached nid001-004: debug was taken, 4 healthy, exit 0. Now the
    nodes to vet are unknown, exit 1, saying to give --expect."""
    nodes32 = [f'nid{i:03d}' for i in range(1, 33)]
    (tmp_path / 'states.txt').write_text(slurm_states(nodes32[:4], partition='regular,debug')
                                         + slurm_states(nodes32[4:], partition='regular'))
    log = write_perflog(tmp_path / 'sweep.log', run_of_sweep(nodes32[:4], NOV[24], partition='perlmutter:gpu'))
    code, out, _ = run(capsys, log, '-C', 'config/perlmutter.py', '--system', 'perlmutter', '--slurm-states',
                       str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC')
    assert code == 1 and 'the nodes to vet of perlmutter:gpu are unknown' in out and 'debug, regular' in out, out


# --- the sixth red-team's cases left open in stop 55 -------------------------------------------

def test_r6_c06b_a_selection_s_start_never_leaves_out_a_test_of_the_same_maintenance(tmp_path, capsys, utc):
    """c06b: CIFAR swept on Nov 23 at 14:00 (nid009 fails it), MNIST on Nov 24 at 08:00, one
    maintenance; PATH@20261124 keeps MNIST alone, and nid009 was resumed, exit 0. Refused in one
    line; the same CIFAR sweep a week before (another maintenance), or a one-node debug run of it
    2 h before, is left out quietly."""
    import time
    mnist = run_of_sweep(NODES16, NOV[24])
    for nodes_, before, refused in ((NODES16, 18 * HOUR, True), (NODES16, 7 * DAY, False),
                                    (['nid009'], 2 * HOUR, False),
                                    # the eighth red-team's m01: on the 7 nodes idle 14 h before
                                    (NODES16[:7] + ['nid009'], 14 * HOUR, True)):
        cifar = run_of_sweep(nodes_, NOV[24] - before, name=CIFAR, figures=CIFAR_FIGURES,
                             failed={('nid009', 0)}, first_job=100)
        log = write_perflog(tmp_path / 'sweep.log', cifar + mnist)
        start = time.strftime('%Y%m%dT%H%M', time.gmtime(NOV[24] - 60))    # the fixture `utc`
        code, out, err = run(capsys, f'{log}@{start}:20261130', '--expect', 'nid[001-016]')
        if refused:
            assert code == 2 and err.count('\n') == 1 and 'scontrol' not in out, (out, err)
            assert "'s @START:END leaves out every run of CIFAR100ResNetCheck[image=host] on sim:cluster" in err, err
        else:
            assert code == 0 and 'nid009' in resumed(out), (out, err)


def test_r6_c11_a_slow_run_in_an_earlier_sweep_of_the_same_maintenance_is_never_resumed(tmp_path, capsys):
    """c11: --sweep-gap 60m (shorter than the default); MNIST --repeat 2 with a 3 h stall between
    the repetitions, nid003 40 % slow in the first, normal in the second. The first is an earlier
    sweep by the admin's gap, but of the same maintenance, as a failure there is: nid003 not
    judged, exit 1. A week apart, the slow sweep is another maintenance's: resumed."""
    for pause, same in ((3 * HOUR, True), (7 * DAY, False)):
        found = rep_major(NODES16, NOV[24], 2, pause_after=1, pause=pause, slow_runs={('nid003', 0): 0.40})
        code, out, _ = judged(tmp_path, capsys, found, None, '--sweep-gap', '60m')
        if same:
            assert code == 1 and drained(out) == [] and 'nid003' not in resumed(out), out
            line = not_judged_line(out, 'nid003')
            assert 'in an earlier sweep of the same maintenance' in line and 'samples_per_s' in line, out
            assert len(resumed(out)) == 15, out
        else:
            assert len(resumed(out)) == 16 and not_judged_line(out, 'nid003') == '', out


def test_r7_n05_a_nightly_smoke_run_joins_no_two_maintenances(tmp_path, capsys):
    """n05: maintenance A (nid007 40 % slow in MNIST; its fan replaced after), a nightly one-node
    MNIST smoke run on nid001 18 h later, maintenance B 18 h after that (nid007 fine, nid012
    fails CIFAR). The smoke run chained A into B's sweep and nid007 was drained on A's record.
    Only nid012 is drained; nid007 is resumed, with or without the smoke run."""
    a, b = NOV[24] - 35 * HOUR, NOV[24] + HOUR     # Slurm drained every node at 07:00
    before = appended(run_of_sweep(NODES16, a, slower={'nid007': 0.40}),
                      run_of_sweep(NODES16, a + HOUR, name=CIFAR, figures=CIFAR_FIGURES, first_job=5000))
    smoke = run_of_sweep(['nid001'], a + 18 * HOUR, seed=4, first_job=7000)
    after = full_sweep(b, failed={('nid012', 0, 'CIFAR')}, seed=5)
    for found in (before + smoke + after, before + after):
        code, out, _ = judged(tmp_path, capsys, found)
        assert code == 1 and drained(out) == ['nid012'] and 'nid007' in resumed(out), out


def test_r8_m02_a_selection_s_end_never_cuts_a_sweep_in_two(tmp_path, capsys, utc):
    """The eighth red-team's m02: --repeat 2 with a 90-minute stall; nid005 failed repetition 1,
    after the selection's END: refused in one line as a START that cuts is."""
    import time
    found = rep_major(NODES16, NOV[24], 2, pause_after=1, pause=90 * 60, failed={('nid005', 1)})
    log = write_perflog(tmp_path / 'sweep.log', found)
    end = time.strftime('%Y%m%dT%H%M', time.gmtime(found[len(NODES16) - 1].time + 60))
    code, out, err = run(capsys, f'{log}@20261124T0000:{end}', '--expect', 'nid[001-016]')
    assert code == 2 and "'s @START:END cuts the sweep of MNISTDistributedCheck[image=host]" in err, (out, err)
    assert 'within --sweep-gap of the last it keeps' in err and 'scontrol' not in out, (out, err)


def test_finding4_nodes_outside_expect_are_peers_only_and_said(tmp_path, capsys):
    """--expect nid[001-012] of a sweep over 16: nid013-016 are peers, named in no line."""
    code, out, _ = judged(tmp_path, capsys, run_of_sweep(NODES16, NOV[24]), None, '--expect', 'nid[001-012]')
    assert code == 0 and resumed(out) == set(NODES16[:12]), out
    assert '4 node(s) outside --expect ran in the sweep: peers only, named in no line' in out, out


def test_r8_m13b_a_partition_swept_only_in_the_maintenance_before_vouches_for_no_node(tmp_path, capsys):
    """The eighth red-team's m13b: sim:gpu swept on Nov 24, sim:cpu only on Nov 17; all 32 nodes
    in the maintenance reservation, with no drain time. The cpu nodes were called healthy, exit 0
    ('ending the reservation returns them to users'); they are not vetted, exit 1."""
    cpu = [f'nid{i:03d}' for i in range(17, 33)]
    states = (slurm_states(NODES16, {n: ('IDLE+MAINTENANCE', '') for n in NODES16}, partition='gpu')
              + slurm_states(cpu, {n: ('IDLE+MAINTENANCE', '') for n in cpu}, partition='cpu'))
    (tmp_path / 'states.txt').write_text(states)
    found = appended(run_of_sweep(cpu, NOV[24] - 7 * DAY, partition='sim:cpu'),
                     run_of_sweep(NODES16, NOV[24], partition='sim:gpu', first_job=5000))
    log = write_perflog(tmp_path / 'sweep.log', found)
    code, out, _ = run(capsys, log, '--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC')
    assert code == 1 and '16 healthy, 0 drained, 0 not judged, 16 not vetted' in out, out
    assert not any(n in out.split('not vetted (16)')[0] for n in ('nid017', 'nid[017')), out


def test_r7_n11_the_nodes_a_constraint_selects_are_the_ones_to_vet(tmp_path, capsys):
    """The seventh red-team's n11: config/perlmutter.py runs perlmutter:gpu with --constraint=gpu
    and names no Slurm partition; Slurm's regular holds GPU nodes nid001-016 (feature gpu) and CPU
    nodes nid017-032. The sweep of the 16 GPU nodes was exit 1 for ever (its CPU nodes 'not
    vetted'); the GPU nodes are the ones to vet, exit 0 when they pass. A GPU node held by users
    (no record) is still not vetted."""
    nodes32 = [f'nid{i:03d}' for i in range(1, 33)]
    gpu = slurm_states(nodes32[:16], partition='regular,debug').replace(
        'AvailableFeatures=(null)', 'AvailableFeatures=gpu,a100')
    (tmp_path / 'states.txt').write_text(gpu + slurm_states(nodes32[16:], partition='regular'))
    for swept, code_, said in ((nodes32[:16], 0, '16 healthy, 0 drained, 0 not judged, 0 not vetted'),
                               (nodes32[:15], 1, '15 healthy, 0 drained, 0 not judged, 1 not vetted')):
        log = write_perflog(tmp_path / 'sweep.log', run_of_sweep(swept, NOV[24], partition='perlmutter:gpu'))
        code, out, _ = run(capsys, log, '-C', 'config/perlmutter.py', '--system', 'perlmutter',
                           '--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC')
        assert code == code_ and said in out, out
        assert "the nodes to vet of perlmutter:gpu: Slurm's nodes with feature gpu (16 nodes" in out, out


# --- ninth red-team of issue 47 (on 93ad88b) ---------------------------------------------------

CPU16 = [f'nid{i:03d}' for i in range(17, 33)]
UPGRADE = 'upgrade 2026-11'


def two_partitions_in_the_reservation(tmp_path):
    """Slurm's states: gpu nid001-016, cpu nid017-032, every node in the maintenance reservation,
    no drain time to compare (the reservation flow)."""
    states = ''.join(slurm_states(nodes_, {n: ('IDLE+MAINTENANCE', '') for n in nodes_}, partition=p)
                     for p, nodes_ in (('gpu', NODES16), ('cpu', CPU16)))
    (tmp_path / 'states.txt').write_text(states)
    return ['--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC']


@pytest.mark.parametrize('nightly', ['pair job', 'smoke run'])
def test_r9_n04_a_nightly_job_keeps_no_partition_s_week_old_sweep_current(tmp_path, capsys, nightly):
    """n04g, n04c: sim:cpu swept on Nov 17 (nid025 failed it, dealt with since), sim:gpu on Nov
    24; a nightly 2-node interconnect job on nid017-018 (or a one-node smoke run of another test
    on nid017) 6 h before gpu's sweep. The cpu nodes were healthy, exit 0 (or nid025 drained on
    last week's record); they are not vetted, exit 1."""
    cpu = run_of_sweep(CPU16, NOV[24] - 7 * DAY, partition='sim:cpu', failed={('nid025', 0)})
    one = run_of_sweep(['nid017'], NOV[24] - 6 * HOUR, name=LINKS, partition='sim:cpu',
                       figures=(('allreduce_busbw', 'GB/s', 80.0),), first_job=7000)
    if nightly == 'pair job':
        one = [dataclasses.replace(s, name=LINKS.replace('=1', '=2'), num_nodes=2,
                                   nodelist='nid[017-018]') for s in one]
    gpu = run_of_sweep(NODES16, NOV[24], partition='sim:gpu', first_job=8000)
    log = write_perflog(tmp_path / 'sweep.log', cpu + one + gpu)
    code, out, _ = run(capsys, log, *two_partitions_in_the_reservation(tmp_path))
    assert code == 1 and '16 healthy, 0 drained, 0 not judged, 16 not vetted' in out, out
    assert drained(out) == [] and 'sim:cpu: its latest sweep ended 2026-11-17' in out, out


def test_r9_n09_a_selection_never_leaves_out_a_partition_swept_in_the_same_maintenance(
        tmp_path, capsys, utc):
    """n09: sim:cpu swept on Nov 23 at 18:00 (nid020 failed), sim:gpu on Nov 24 at 08:00, one
    maintenance; PATH@20261124 kept gpu alone: 16 healthy, exit 0, cpu unmentioned. Refused."""
    found = appended(run_of_sweep(CPU16, NOV[24] - 14 * HOUR, partition='sim:cpu', failed={('nid020', 0)}),
                     run_of_sweep(NODES16, NOV[24], partition='sim:gpu', first_job=5000))
    log = write_perflog(tmp_path / 'sweep.log', found)
    code, out, err = run(capsys, f'{log}@20261124:20261130', *two_partitions_in_the_reservation(tmp_path))
    assert code == 2 and "leaves out every run of MNISTDistributedCheck[image=host] on sim:cpu" in err, (out, err)


def test_r9_a_test_of_16_nodes_keeps_its_node_count_in_its_short_name():
    """n22: a pair sweep with -P num_nodes=16 was named InterconnectCheck[image=host,6]."""
    from mlcheck.history.node_records import short
    assert short('InterconnectCheck %image=host %num_nodes=16') == 'InterconnectCheck[image=host,num_nodes=16]'
    assert short(MNIST) == 'MNISTDistributedCheck[image=host]'


# --- tenth red-team of issue 47 (on 835cef3) ---------------------------------------------------

def test_r10_p04_a_node_slow_then_normal_after_a_repair_re_run_is_not_drained_on_the_median(tmp_path, capsys):
    """p04: the 08:00 sweep finds nid011 35 % slow; repaired, it is re-run at 14:00 with another
    repaired node and two controls, and passes. It was drained on the median of its two runs,
    dated at the good one; it is not judged, naming the slow run, as a failure there is. A slow
    repetition before a stall of a session that goes on over every node still drains (c04)."""
    first = run_of_sweep(NODES16, NOV[24], slower={'nid011': 0.35})
    again = run_of_sweep(['nid004', 'nid011', 'nid001', 'nid016'], NOV[24] + 6 * HOUR, seed=3, first_job=3000)
    code, out, _ = judged(tmp_path, capsys, first + again)
    assert code == 1 and drained(out) == [] and 'nid011' not in resumed(out), out
    line = not_judged_line(out, 'nid011')
    assert 'above its peers (' in line and 'at 2026-11-24T08:2' in line and 'a flaky node' in line, out


# --- eleventh red-team of issue 47 (on 9845ef6) ------------------------------------------------

def test_r11_q35_a_node_named_on_a_median_of_slow_and_normal_runs_names_its_slow_run(tmp_path, capsys):
    """q35c: nid011 60 % slow at 08:00; repaired, the whole partition re-swept at 14:00, nid011
    normal. Drained as '79% above' the median of the two runs, dated at the good one: a good node
    sent to its vendor. Still drained (the records cannot tell a repair from a flaky node once
    every node ran again), but the reason names the slow run and when it ran."""
    first = run_of_sweep(NODES16, NOV[24], slower={'nid011': 0.60})
    again = run_of_sweep(NODES16, NOV[24] + 6 * HOUR, seed=3, first_job=3000)
    code, out, _ = judged(tmp_path, capsys, first + again)
    [line] = [ln for ln in out.splitlines() if ln.startswith('scontrol') and 'nid011' in ln]
    assert 'slow in 1 of 2 repetitions: ' in line and ' at 2026-11-24T08:2' in line, line
    assert 'ended 2026-11-24T08:2' in line, line


@pytest.mark.parametrize('fact, values', [('net_plugin', ('aws-ofi-nccl 1.9.2', '')),
                                          ('gpu_driver', ('565.57.01', '560.35.03'))])
def test_r11_q37_a_fact_split_half_and_half_is_said(fact, values):
    """q37, q33: one chassis of 8 of 16 lost its network plugin, or a driver reached half the
    nodes: no majority, and nothing was said, exit 0. Every node is listed against the other half."""
    from mlcheck.history import nodes
    stack = lambda v: 'torch=2.5.1;nccl=2.21.5' + (f';{fact}={v}' if v else '')
    found = [dataclasses.replace(s, stack=stack(values[s.nodelist > 'nid008']))
             for s in run_of_sweep(NODES16, NOV[24])]
    said = nodes.judge(found).stack
    assert sorted(said) == NODES16, said
    assert said['nid001'][0].endswith(f', 8 peers {values[1] or "none"}'), said


# --- twelfth red-team of issue 47 (on ea6593a) ------------------------------------------------

def test_r12_r39_a_node_mlcheck_drained_for_one_test_is_never_resumed_on_another(tmp_path, capsys):
    """r39: MNIST swept, nid005 failed it; mlcheck's DRAIN line for it pasted at 08:14:30 while
    its CIFAR job ran on, which passed at 08:15. CIFAR's perf log judged alone resumed nid005,
    exit 0. Its drain names MNIST, of which the selection holds no run: not vetted, exit 1."""
    cifar = run_of_sweep(NODES16, NOV[24] + 12 * 60, name=CIFAR, figures=CIFAR_FIGURES, every_s=45)
    drained_at = '2026-11-24T08:14:30'
    states = {n: ('IDLE+DRAIN', UPGRADE, '2026-11-24T07:00:00') for n in NODES16}
    states['nid005'] = ('IDLE+DRAIN', 'mlcheck: MNISTDistributedCheck[image=host] failed: failed', drained_at)
    (tmp_path / 'states.txt').write_text(slurm_states(NODES16, states))
    log = write_perflog(tmp_path / 'cifar.log', cifar)
    code, out, _ = run(capsys, log, '--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC',
                       '--resume-reason', UPGRADE, '--expect', 'nid[001-016]')
    assert code == 1 and 'nid005' not in resumed(out), out
    assert 'for MNISTDistributedCheck[image=host], which this selection holds no run of' in out, out
