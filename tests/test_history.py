"""Reading perf logs and judging changes, on real perf logs of the simulated partition.

data/perflogs/<campaign>.log are the perf logs of the measurement in docs/performance-history.md,
as ReFrame wrote them: a baseline session, five unchanged ones and sessions slowed on purpose
(-S throttle=F), each 1 node, 3 epochs, --repeat 5. 'shared-load' ran while other engineers'
jobs shared the machine's two cores, 'quiet' while the machine was otherwise idle but for a
minute of this suite's own unit tests during its first baseline: that one ('baseline') is
disturbed, and the sessions are judged against a second one recorded at the end ('baseline2').
data/perflogs/<campaign>.sessions.json lists each campaign's sessions (kind, throttle, UUID,
start and end).
"""

import dataclasses
import os
import shutil
import sqlite3

import pytest

from command_line import one_line_error, run_report
from conftest import DATA, load_site_config, sha256
from mlcheck.commands import report
from mlcheck.errors import InputError
from mlcheck.history import compare
from mlcheck.history.compare import Rule
from mlcheck.history.perflog import read_perflog
from mlcheck.history.samples import NOT_RECORDED, Sample, group
from mlcheck.history.selection import load, parse_selection
from mlcheck.harness.config import invoked_as_dry_run
from perflogs import (BASELINE, CAMPAIGN, FLAGGED_THROTTLE, PERFLOGS, SESSIONS, SLOWED, UNCHANGED, perflog_line,
                      samples, spec, write_perflog)

DRY_RUN = os.path.join(PERFLOGS, 'dry-run.log')
BASELINE_KIND = {'shared-load': 'baseline', 'quiet': 'baseline2'}


def baseline_of(session):
    campaign = session['campaign']
    return next(s for s in SESSIONS[campaign] if s['kind'] == BASELINE_KIND[campaign])


def judged(before, after, rule=Rule(), var='samples_per_s'):
    [found] = [c for c in compare.compare(samples(before), samples(after), rule) if c.key[2] == var]
    return found


# --- reading ---------------------------------------------------------------------------------

def test_perf_log_is_read_by_its_header():
    found = read_perflog(CAMPAIGN)
    assert len(found) == 3 * 5 * len(SESSIONS['shared-load'])
    first = found[0]
    assert (first.partition, first.name, first.image, first.num_nodes, first.unit) == (
        'sim:cluster', 'MNISTDistributedCheck %image=host %num_nodes=1', 'host', 1, 'samples/s')
    assert first.check == 'MNISTDistributedCheck' and first.system == 'sim'
    assert first.nodelist == 'nid001' and first.jobid.isdigit()
    assert first.reference == (1250, -0.5, None) and first.result in ('pass', 'fail')
    assert {s.var for s in found} == {'samples_per_s', 'samples_per_s_per_gpu', 'train_time'}


@pytest.mark.parametrize('session', [pytest.param(s, id=f"{c}-{s['uuid'][:8]}")
                                     for c, ss in SESSIONS.items() for s in ss])
def test_each_session_holds_its_repetitions(session):
    per_var = group(samples(session), lambda s: s.var)
    assert {len(v) for v in per_var.values()} == {5}


def test_dry_run_lines_have_no_value_and_are_skipped():
    assert read_perflog(DRY_RUN) == []
    with pytest.raises(InputError, match='holds no performance values'):
        load(parse_selection(DRY_RUN))


@pytest.mark.parametrize('text, kind', [
    ('latest', 'latest'),
    ('94135246-2005-443a-992d-0608253cf315', 'session'),
    ('now-1d:now', 'period'),
    ('20261120T0900:20261121', 'period'),
    ('var/rfm/perflogs', 'perflog'),
    ('x.log@now-1d:now', 'perflog'),
])
def test_selection_forms(text, kind):
    assert parse_selection(text).kind == kind


@pytest.mark.parametrize('text, message', [
    ('', 'empty selection'),
    ('yesterday', "selection 'yesterday' is not a session UUID, a period START:END"),
    ('x.log@soon:now', "selection 'x.log@soon:now': invalid timestamp: soon"),
    # ReFrame eval()s a session filter (issue 48): never taken
    ('now-1w:now?kind=="baseline"', r'a session filter \(\?FILTER\) is not taken'),
])
def test_bad_selection_forms(text, message):
    with pytest.raises(InputError, match=message):
        parse_selection(text)


# --- the rule, on real sessions ------------------------------------------------------------

UNCHANGED_SESSIONS = [pytest.param(s, id=f"{c}-{s['uuid'][:8]}") for c, ss in SESSIONS.items()
                      for s in ss if s['kind'] == 'unchanged']
FLAGGED_SESSIONS = [pytest.param(s, id=f"{c}-{s['throttle']}-{s['uuid'][:8]}")
                    for c, ss in SESSIONS.items() for s in ss
                    if s['kind'] == 'slowed' and s['throttle'] >= FLAGGED_THROTTLE[c]]


def test_five_unchanged_runs_in_each_campaign():
    for campaign, found in SESSIONS.items():
        assert sum(s['kind'] == 'unchanged' for s in found) == 5, campaign


@pytest.mark.parametrize('session', UNCHANGED_SESSIONS)
def test_unchanged_runs_raise_no_regression(session):
    for comparison in compare.compare(samples(baseline_of(session)), samples(session)):
        assert comparison.verdict != compare.REGRESSION, comparison


@pytest.mark.parametrize('session', FLAGGED_SESSIONS)
def test_slowed_runs_are_flagged(session):
    found = judged(baseline_of(session), session)
    assert found.verdict == compare.REGRESSION, found
    assert found.worse > Rule.threshold and -found.change > Rule.noise_factor * found.noise


def test_a_disturbed_baseline_shows_as_improvement_everywhere():
    """The quiet campaign's first baseline ran beside this suite's unit tests: against it every
    unchanged session is 'improved', and against the second baseline it is the regression."""
    disturbed = next(s for s in SESSIONS['quiet'] if s['kind'] == 'baseline')
    for session in SESSIONS['quiet']:
        if session['kind'] == 'unchanged':
            assert judged(disturbed, session).verdict == compare.IMPROVED
    assert judged(baseline_of(disturbed), disturbed).verdict == compare.REGRESSION


def test_a_time_is_worse_when_it_grows():
    found = judged(BASELINE, SLOWED, var='train_time')
    assert found.change > 0 and found.worse > 0 and found.verdict == compare.REGRESSION


def test_faster_is_improved_not_regression():
    assert judged(SLOWED, BASELINE).verdict == compare.IMPROVED


def test_a_change_within_the_threshold_is_unchanged():
    """The same real slowdown, under a threshold it does not reach."""
    assert judged(BASELINE, SLOWED, Rule(threshold=0.95)).verdict == compare.UNCHANGED


def test_a_change_within_the_noise_is_not_a_regression():
    """The same real slowdown, when it must exceed a hundred times the measured noise."""
    assert judged(BASELINE, SLOWED, Rule(noise_factor=100)).verdict == compare.WITHIN_NOISE


def test_one_repetition_is_judged_against_the_other_sides_spread():
    """Once 'too few repetitions', not judged and exit 0 (issue 18.3): now the side with
    repetitions gives the spread; with one repetition on both sides nothing does."""
    one = [s for s in samples(SLOWED) if s.jobid == samples(SLOWED)[0].jobid]
    found = {c.key[2]: c for c in compare.compare(samples(BASELINE), one)}
    assert all(c.noise_of == 'before' for c in found.values())
    # judged by Student's t on before's 4 degrees of freedom with the report's other figures
    # (compare.judge_together): the rate, -52 % against before's 20 % a run, is a chance of 3 %,
    # within the report's 1 %; by the threshold alone, as until the fifth red-team, a healthy
    # upgrade run once after a --repeat 3 baseline failed the gate 49 times in 50
    rate = found['samples_per_s']
    assert rate.change < -0.5 and rate.dof == 4 and 0.01 < rate.p < 0.05 and rate.verdict == compare.WITHIN_NOISE
    # judged alone, at a looser gate, it is the regression it was
    [alone] = [c for c in compare.compare(samples(BASELINE), one, Rule(false_alarm=0.1)) if c.key[2] == 'samples_per_s']
    assert alone.verdict == compare.REGRESSION
    lines = report.summary(compare.compare(samples(BASELINE), one), Rule())
    assert lines[1].startswith("1 test(s) with too few repetitions on one side, judged against the other side's spread")
    first = [s for s in samples(BASELINE) if s.jobid == samples(BASELINE)[0].jobid]
    [found] = [c for c in compare.compare(first, one) if c.key[2] == 'samples_per_s']
    assert found.verdict == compare.TOO_FEW_WORSE and found.noise is None and found.change < 0
    lines = report.summary(compare.compare(first, one), Rule())
    assert lines[1].startswith('3 with too few repetitions to estimate noise')


def test_a_test_on_one_side_only_is_listed():
    before = samples(BASELINE)
    after = [s for s in before if s.var != 'train_time']
    verdicts = {c.key[2]: c.verdict for c in compare.compare(before, after)}
    assert verdicts['train_time'] == compare.ONLY_BEFORE


# --- the command -----------------------------------------------------------------------------

def test_command_exit_status_follows_the_verdicts(capsys):
    assert run_report(capsys, spec(BASELINE), spec(UNCHANGED[0]))[0] == 0
    code, out, _ = run_report(capsys, spec(BASELINE), spec(SLOWED))
    assert code == 1 and 'REGRESSION' in out


@pytest.mark.parametrize('typed', ['5%', '0.05', '5.0%'])
def test_threshold_as_a_person_types_it(capsys, typed):
    code, out, _ = run_report(capsys, spec(BASELINE), spec(SLOWED), '--threshold', typed)
    assert code == 1 and 'worse by more than 5%' in out


@pytest.mark.parametrize('typed', ['5', '1', '-0.05', '0', '150%', 'five'])
def test_threshold_that_turns_the_detector_off_is_refused(capsys, typed):
    """'--threshold 5' once meant 500 %: a -50 % drop was 'unchanged' and the gate green."""
    err = one_line_error(capsys, report.main, spec(BASELINE), spec(SLOWED), '--threshold', typed)
    assert f'--threshold {typed}: expected a fraction between 0 and 1 (0.05) or a percentage (5%)' in err


@pytest.mark.parametrize('repeats', ['1', '0'])
def test_min_repeats_below_what_the_noise_needs_is_one_line(capsys, repeats):
    """--min-repeats 1 with one value a side once divided by zero degrees of freedom, exit 1."""
    one = [s for s in samples(SLOWED) if s.jobid == samples(SLOWED)[0].jobid]
    assert len({s.jobid for s in one}) == 1
    err = one_line_error(capsys, report.main, spec(BASELINE), spec(SLOWED), '--min-repeats', repeats)
    assert f'--min-repeats {repeats}: the noise estimate needs at least 2 repetitions' in err


def test_a_crash_is_not_read_as_a_regression(capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError('float division by zero')
    monkeypatch.setattr(compare, 'compare', broken)
    code, out, err = run_report(capsys, spec(BASELINE), spec(SLOWED))
    assert code == report.EXIT_INTERNAL != report.EXIT_REGRESSION
    assert err.count('\n') == 1
    assert err.startswith('mlcheck.commands.report: internal error: ZeroDivisionError: float division by zero')


def test_a_test_that_stopped_producing_results_fails_the_gate(capsys, tmp_path):
    """Before: 1- and 2-node MNIST; after: only the 1-node one. A test new after the upgrade
    (the reverse) does not fail."""
    base = samples(BASELINE)
    two_nodes = [dataclasses.replace(s, name=s.name.replace('num_nodes=1', 'num_nodes=2'),
                                     num_nodes=2) for s in base]
    verdicts = {(c.key[1], c.key[2]): c.verdict
                for c in compare.compare(base + two_nodes, samples(UNCHANGED[0]))}
    assert {v for (name, _), v in verdicts.items() if 'num_nodes=2' in name} == {compare.NO_RESULT}
    reverse = compare.compare(samples(UNCHANGED[0]), base + two_nodes)
    assert {c.verdict for c in reverse if 'num_nodes=2' in c.key[1]} == {compare.ONLY_AFTER}

    before = tmp_path / 'before.log'
    with open(CAMPAIGN) as f:
        lines = f.readlines()
    before.write_text(''.join(lines + [l.replace('num_nodes=1|host|1|', 'num_nodes=2|host|2|')
                                       for l in lines[1:]]))
    code, out, _ = run_report(capsys, f"{before}@{BASELINE['start']}:{BASELINE['end']}", spec(UNCHANGED[0]))
    assert code == 1
    assert '3 NO RESULT AFTER: values before and none after (failed or not run)' in out
    assert run_report(capsys, spec(UNCHANGED[0]), f"{before}@{BASELINE['start']}:{BASELINE['end']}")[0] == 0


def test_missing_perf_log(capsys, tmp_path):
    err = one_line_error(capsys, report.main, str(tmp_path / 'gone.log'), CAMPAIGN)
    assert f'perf log not found: {tmp_path / "gone.log"}' in err


def test_directory_without_perf_logs(capsys, tmp_path):
    err = one_line_error(capsys, report.main, str(tmp_path), CAMPAIGN)
    assert f'no perf log (*.log) in directory {tmp_path}' in err


def test_empty_selection(capsys):
    err = one_line_error(capsys, report.main, f'{CAMPAIGN}@20200101:20200102', CAMPAIGN)
    assert f"selection '{CAMPAIGN}@20200101:20200102' holds no performance values" in err


def test_perf_log_with_an_older_header(capsys, tmp_path):
    """The campaign's log as a format without image and node count would have written it."""
    old = tmp_path / 'old.log'
    with open(CAMPAIGN) as f:
        rows = [line.rstrip('\n').split('|') for line in f]
    old.write_text(''.join('|'.join(r[:4] + r[6:]) + '\n' for r in rows))
    before = sha256(old)
    err = one_line_error(capsys, report.main, str(old), CAMPAIGN)
    assert f'perf log {old} has an older or foreign header: no column image, num_nodes' in err
    assert sha256(old) == before


def test_unreadable_perf_log_lines_are_named_and_left_out(capsys, tmp_path):
    """A second header (two sessions starting the log at once), an image path holding '|' (ReFrame
    writes values unescaped) and a line cut short: the header is skipped, the two bad lines named
    by file:line and counted, and the rest judged as the clean log is."""
    broken = tmp_path / 'broken.log'
    with open(CAMPAIGN) as f:
        lines = f.readlines()
    piped = lines[5].replace('|host|1|', '|/images/a|b|1|', 1)
    assert piped != lines[5]
    broken.write_text(''.join(lines[:3]) + lines[0] + lines[3][:60] + '\n' + piped + ''.join(lines[3:]))
    fields = len(lines[3][:60].split('|'))
    shutil.copy(CAMPAIGN, tmp_path / 'campaign.log')     # a log against itself is refused
    clean = run_report(capsys, str(tmp_path / 'campaign.log'), CAMPAIGN)
    code, out, err = run_report(capsys, str(broken), CAMPAIGN)
    assert (code, out) == clean[:2]
    assert err.splitlines() == [f'{broken}:5: {fields} fields where the header has 16; line left out',
                                f'{broken}:6: 17 fields where the header has 16; line left out',
                                '2 unreadable perf log line(s) left out (named above)']


def test_database_file_that_is_not_one(capsys, tmp_path):
    garbage = tmp_path / 'results.db'
    with open(CAMPAIGN, 'rb') as f:
        garbage.write_bytes(f.read())
    before = sha256(garbage)
    err = one_line_error(capsys, report.main, '--db', str(garbage), 'latest', CAMPAIGN)
    assert f'{garbage} is not a ReFrame results database (file is not a database)' in err
    assert sha256(garbage) == before and sorted(os.listdir(tmp_path)) == ['results.db']


def test_database_given_as_a_perf_log(capsys, tmp_path):
    db = tmp_path / 'results.db'
    with sqlite3.connect(db) as connection:
        connection.execute('CREATE TABLE sessions (uuid TEXT)')
    err = one_line_error(capsys, report.main, str(db), CAMPAIGN)
    assert f'{db} is a database, not a perf log: give it with --db' in err


def test_sqlite_database_of_something_else(capsys, tmp_path):
    other = tmp_path / 'other.db'
    with sqlite3.connect(other) as connection:
        connection.execute('CREATE TABLE sessions (uuid TEXT)')
    before = sha256(other)
    err = one_line_error(capsys, report.main, '--db', str(other), 'now-1d:now', CAMPAIGN)
    assert f'{other} is not a ReFrame results database (no table metadata, testcases)' in err
    assert sha256(other) == before


def test_missing_database_is_not_created(capsys, tmp_path):
    err = one_line_error(capsys, report.main, '--db', str(tmp_path / 'results.db'), 'latest', CAMPAIGN)
    assert f'results database not found: {tmp_path / "results.db"}' in err
    assert os.listdir(tmp_path) == []


def test_report_and_plots(capsys, tmp_path):
    code, out, _ = run_report(capsys, spec(BASELINE), spec(SLOWED), '-o', str(tmp_path))
    assert code == 1
    text = (tmp_path / 'report.md').read_text()
    assert text.startswith(f'# Performance: {spec(SLOWED)} against {spec(BASELINE)}')
    assert '**3 regression(s), 0 improved' in text
    pngs = sorted(p.name for p in tmp_path.glob('*.png'))
    assert pngs == ['scaling-sim-cluster-MNISTDistributedCheck.png',
                    'time-sim-cluster-MNISTDistributedCheck.png']
    assert all(f'({name})' in text for name in pngs)


# --- the perf log configuration ----------------------------------------------------------------

def test_every_site_shares_the_perf_log_handler():
    """The same perf log handler; only ReFrame's own log is the site's (under its prefix)."""
    lumi, simulated = load_site_config('lumi')['logging'], load_site_config('simulated')['logging']
    assert lumi[0]['handlers_perflog'] == simulated[0]['handlers_perflog']
    assert [h['type'] for h in lumi[0]['handlers']] == [h['type'] for h in simulated[0]['handlers']]


@pytest.mark.parametrize('argv, dry', [
    (['-c', 'checks/', '-r'], False), (['--dry-run'], True), (['-r', '--dry'], True),
    (['--dr'], True), (['--d'], False), (['-n', 'dry'], False),
])
def test_dry_run_is_recognised_as_argparse_does(argv, dry):
    assert invoked_as_dry_run(argv) is dry


# --- issue 18: stray settings, broken tests, one repetition, unrecorded settings ---------------

MNIST_2N = 'MNISTDistributedCheck %image=host %num_nodes=2'
DEFAULT = 'epochs=10;batch_size=64'


def runs(values, settings=DEFAULT, var='samples_per_s', unit='samples/s', name=MNIST_2N, start=0.0):
    """Samples of one test, one per repetition."""
    return [Sample('sim:cluster', name, 'host', 2, var, value, unit, start + i,
                   jobid=str(1000 + i), settings=settings) for i, value in enumerate(values)]


def test_a_stray_run_of_other_settings_in_the_baseline_does_not_fail_the_gate(capsys, tmp_path):
    """Issue 18.1: a period as baseline holds a -S epochs=2 smoke run beside three default runs;
    after, three unchanged default runs: the smoke group is 'only before', the gate passes."""
    before = runs([640, 652, 633]) + runs([610], settings='epochs=2', start=10)
    after = runs([645, 638, 650], start=100)
    verdicts = {c.key[3]: c.verdict for c in compare.compare(before, after)}
    assert verdicts == {DEFAULT: compare.UNCHANGED, 'epochs=2': compare.ONLY_BEFORE}
    code, out, _ = run_report(capsys, write_perflog(tmp_path / 'before.log', before),
                              write_perflog(tmp_path / 'after.log', after))
    assert code == 0 and compare.OTHER_SETTINGS not in out
    # with no group compared on both sides, other settings after still fail the gate
    only_smoke = runs([612], settings='epochs=2', start=100)
    verdicts = {c.key[3]: c.verdict for c in compare.compare(runs([640, 652, 633]), only_smoke)}
    assert verdicts == {DEFAULT: compare.OTHER_SETTINGS, 'epochs=2': compare.ONLY_AFTER}


FAILED = os.path.join(DATA, 'failed-sanity')
ALL_PASS, BROKEN_FAILS, ALL_FAIL = ('37aefb5d-b7a1-47f3-8142-192ce47387a6',
                                    '79d6ec29-3a1b-4892-8af1-592c0541d6ce',
                                    '173e64bc-5ec6-448d-a101-5c3638feaede')


def perflog_session(name, session):
    """One session of data/failed-sanity's perf log of test `name`, as a selection."""
    period = {ALL_PASS: '20261123T202320+0000:20261123T202327+0000',
              BROKEN_FAILS: '20261123T202327+0000:20261123T202331+0000',
              ALL_FAIL: '20261123T202331+0000:20261123T202340+0000'}[session]
    return f'{os.path.join(FAILED, name)}@{period}'


def test_failed_test_cases_are_read_from_the_real_perf_log():
    broken = read_perflog(os.path.join(FAILED, 'BrokenCheck.log'), with_failed=True)
    assert [s.value for s in broken] == [5.0] * 3 + [None] * 6
    assert {s.settings for s in broken} == {DEFAULT}
    assert len(read_perflog(os.path.join(FAILED, 'BrokenCheck.log'))) == 3


def test_every_test_broken_in_a_perf_log_is_no_result_not_bad_input(capsys):
    """Issue 18.2, perf logs: every test case of the after session failed sanity."""
    before, after = (f'{FAILED}@{perflog_session("x", s).split("@")[1]}' for s in (ALL_PASS, ALL_FAIL))
    code, out, err = run_report(capsys, before, after)
    assert code == 1 and err == ''
    assert '2 NO RESULT AFTER' in out and '2 ran and failed before their performance stage' in out


def test_a_named_test_that_broke_is_no_result_not_bad_input(capsys):
    """Issue 18.2 with -n: the named test failed after, the other passed."""
    code, out, err = run_report(capsys, perflog_session('BrokenCheck.log', ALL_PASS),
                                perflog_session('BrokenCheck.log', BROKEN_FAILS), '-n', 'Broken')
    assert code == 1 and err == '' and '1 NO RESULT AFTER' in out
    code, out, err = run_report(capsys, f'{FAILED}@{perflog_session("x", ALL_PASS).split("@")[1]}',
                                f'{FAILED}@{perflog_session("x", BROKEN_FAILS).split("@")[1]}', '-n', 'Broken')
    assert code == 1 and '1 NO RESULT AFTER' in out


def test_names_given_several_times_select_the_tests_named_like_any(capsys):
    """-n twice: both tests; once: the one (a test left out of after would be NO RESULT)."""
    both = run_report(capsys, '--db', os.path.join(FAILED, 'results.db'), ALL_PASS, BROKEN_FAILS,
                      '-n', 'Good', '-n', 'Broken')[1]
    good = run_report(capsys, '--db', os.path.join(FAILED, 'results.db'), ALL_PASS, BROKEN_FAILS,
                      '-n', 'Good')[1]
    assert 'GoodCheck' in both and 'BrokenCheck' in both and '1 NO RESULT AFTER' in both
    assert 'GoodCheck' in good and 'BrokenCheck' not in good and 'NO RESULT' not in good


def test_a_name_that_matches_nothing_is_still_bad_input(capsys):
    err = one_line_error(capsys, report.main, FAILED, FAILED, '-n', 'NoSuchCheck')
    assert "no test named like 'NoSuchCheck' in either selection" in err
    err = one_line_error(capsys, report.main, FAILED, FAILED, '-n', 'NoSuch', '-n', 'Nor')
    assert "no test named like 'NoSuch' or 'Nor' in either selection" in err


def test_every_test_broken_in_the_results_database_is_no_result(capsys):
    """Issue 18.2, results database: the latest session's test cases all failed sanity."""
    database = os.path.join(FAILED, 'results.db')
    code, out, err = run_report(capsys, '--db', database, ALL_PASS, 'latest')
    assert code == 1 and err == '' and '2 NO RESULT AFTER' in out
    code, out, err = run_report(capsys, '--db', database, ALL_PASS, BROKEN_FAILS, '-n', 'Broken')
    assert code == 1 and err == '' and '1 NO RESULT AFTER' in out


def test_a_failed_run_of_the_baseline_settings_is_no_result_beside_a_compared_smoke_run():
    """The default settings failed after while a smoke run matched one before: not a stray group."""
    before = runs([640, 652, 633]) + runs([610, 615], settings='epochs=2', start=10)
    after = [dataclasses.replace(s, value=None) for s in runs([1, 1, 1], start=100)] + \
        runs([612, 611], settings='epochs=2', start=110)
    verdicts = {c.key[3]: c.verdict for c in compare.compare(before, after)}
    assert verdicts[DEFAULT] == compare.NO_RESULT


def test_one_repetition_after_is_judged_against_the_spread_before(capsys, tmp_path):
    """Issue 18.3: three runs before, one after at half the throughput (reframe -r without
    --repeat): a regression against the before side's spread, shown with its change."""
    before, after = runs([640, 652, 633]), runs([330], start=100)
    [found] = compare.compare(before, after)
    assert found.verdict == compare.REGRESSION and found.noise_of == 'before'
    code, out, _ = run_report(capsys, write_perflog(tmp_path / 'before.log', before),
                              write_perflog(tmp_path / 'after.log', after))
    assert code == 1 and '-48.6%' in out and '(before only)' in out
    # one run after within the before spread and the threshold is unchanged
    [found] = compare.compare(before, runs([641], start=100))
    assert found.verdict == compare.UNCHANGED


def test_one_repetition_each_side_is_shown_and_fails_beyond_the_threshold(capsys, tmp_path):
    code, out, _ = run_report(capsys, write_perflog(tmp_path / 'before.log', runs([640])),
                              write_perflog(tmp_path / 'after.log', runs([330], start=100)))
    assert code == 1 and '-48.4%' in out and compare.TOO_FEW_WORSE in out
    [found] = compare.compare(runs([640]), runs([630], start=100))
    assert found.verdict == compare.TOO_FEW and found.change < 0


def test_values_of_unrecorded_settings_are_never_merged_into_a_known_group(capsys, tmp_path):
    """Issue 18.12: an old-header perf log (no settings column) of -S epochs=3 runs (13 s)
    against default runs (44 s): no +236 % regression; shown apart as 'settings not recorded'."""
    from mlcheck.harness.config import PERFLOG_HEADER
    old = [dataclasses.replace(s, settings='') for s in runs([13.1, 13.0, 13.2], var='train_time', unit='s')]
    old_header = PERFLOG_HEADER.rsplit('|run_settings', 1)[0]
    (tmp_path / 'old.log').write_text('\n'.join([old_header] + [perflog_line(s).rsplit('|', 3)[0]
                                                                 for s in old]) + '\n')
    new = runs([44.0, 44.2, 43.9], var='train_time', unit='s', start=100)
    code, out, _ = run_report(capsys, str(tmp_path / 'old.log'), write_perflog(tmp_path / 'new.log', new))
    assert 'REGRESSION' not in out and '+236' not in out
    assert f'[{NOT_RECORDED}]' in out and f'[{DEFAULT}]' in out
    assert code == 1 and compare.OTHER_SETTINGS in out


# --- issue 49, the fourth red-team: the noise of like cells pooled (compare.pool_noise) ---------

def like_cells(spreads, slowed=None, loss=0.0):
    """(before, after): one check's rate at one job size in as many images as `spreads` (each
    image's runs: 3 a side, 1000 x (1 - s, 1, 1 + s), a relative spread of s); image `slowed`
    `loss` slower after."""
    before, after = [], []
    for k, spread in enumerate(spreads):
        image = f'torch-2.{k}.0'
        name = f'MNISTDistributedCheck %image={image} %num_nodes=2'
        for side, scale, start in ((before, 1.0, 0), (after, 1 - loss if image == slowed else 1.0, 100)):
            side += [dataclasses.replace(s, image=image) for s in runs(
                [1000 * scale * (1 + d * spread) for d in (-1, 0, 1)], name=name, start=start)]
    return before, after


def test_a_cell_of_three_runs_is_judged_on_its_like_cells_noise():
    """d06's loss inside a report: 15 % slower at 3 % noise, 3 runs a side. On its own 4 degrees
    of freedom, the chance of such a change (t 6.1) is 0.2 %, over the report's 1 % split among 9
    measurements: within noise at d9f1218. The 8 other images' same figure spread alike (3 %):
    pooled, 36 degrees of freedom, the chance is under 1e-6, a REGRESSION."""
    judged = {c.image: c for c in compare.compare(*like_cells([0.03] * 9, 'torch-2.0.0', 0.15))}
    slowed = judged['torch-2.0.0']
    assert slowed.verdict == compare.REGRESSION and slowed.dof == 36 and slowed.p < 1e-6, (slowed.verdict, slowed.p)
    assert all(c.verdict == compare.UNCHANGED for image, c in judged.items() if image != 'torch-2.0.0')
    # alone, its own spread on 4 degrees of freedom: as wide as ever
    [alone] = compare.compare(*like_cells([0.03], 'torch-2.0.0', 0.15))
    assert alone.dof == 4 and not alone.pooled


def test_a_cell_noisier_than_its_like_cells_keeps_its_own_spread():
    """Pooling never narrows a noise: two cells at 15 % (an interfered run, a busier node) among
    seven at 3 % keep their own spread and 4 degrees of freedom, and are not pooled into the
    others' noise either (it stays 3 %, not widened past what judges them)."""
    quiet = [0.03, 0.031, 0.029, 0.032, 0.028, 0.03, 0.031]
    judged = {c.image: c for c in compare.compare(*like_cells([0.15, 0.15] + quiet))}
    for image in ('torch-2.0.0', 'torch-2.1.0'):
        assert not judged[image].pooled and judged[image].dof == 4 and judged[image].noise > 0.12
    pooled = [c for c in judged.values() if c.pooled]
    assert {c.image for c in pooled} == {'torch-2.2.0', 'torch-2.4.0', 'torch-2.6.0', 'torch-2.7.0'}
    assert all(c.dof == 28 and abs(c.noise - 0.0302) < 0.0005 for c in pooled), [(c.dof, c.noise) for c in pooled]
    # the quiet cells noisier than the pool (3.1-3.2 %) keep their own
    assert [round(judged[f'torch-2.{k}.0'].noise, 3) for k in (3, 5, 8)] == [0.031, 0.032, 0.031]


def test_two_cells_are_not_a_pool():
    """Fewer than compare.POOL_FROM like cells: each its own noise (a median of two is no center)."""
    assert not any(c.pooled for c in compare.compare(*like_cells([0.03, 0.05])))
