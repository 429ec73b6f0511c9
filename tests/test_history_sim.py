"""Performance history on real runs of the simulated partition: two sessions stored by the
config's results database and written to its perf log, one unchanged and one slowed on purpose
(-S throttle=0.7: rank 0 idles 70 % of the time, and every rank waits for it; with
-S slow_rank_fraction=0 so that sanity does not fail the slow rank), each 1 node, 2 epochs (the
figures are compared with each other here, not with the partition's references), --repeat 3.
"""

import os
import re
import subprocess
import time

import pytest
import yaml

from command_line import one_line_error, run_report
from conftest import REPO, sha256
from mlcheck.commands import baseline, report
from reframe_runner import REFRAME, report_cases, run_reframe, utc_now

CONFIG = os.path.join(REPO, 'config', 'simulated.py')
RUN = ('-r', '-n', 'MNISTDistributedCheck', '-P', 'image=host', '-P', 'num_nodes=1', '-S', 'epochs=2',
       '--repeat', '3')
TEST = 'MNISTDistributedCheck %image=host %num_nodes=1'


def stored_uuid(done):
    found = re.search(r'Current session stored with UUID: (\S+)', done.stdout)
    assert found, done.stdout[-3000:] + done.stderr[-2000:]
    return found.group(1)


@pytest.fixture(scope='module')
def runs(cluster, tmp_path_factory):
    prefix = tmp_path_factory.mktemp('history')
    sessions = {}
    for kind, extra in (('unchanged', ()), ('slowed', ('-S', 'throttle=0.7', '-S', 'slow_rank_fraction=0',
                                               '--performance-report'))):
        start = utc_now()
        done = run_reframe('simulated', prefix, *RUN, *extra, '--session-extras', f'kind={kind}',
                           judged=False)     # the report compares them; their references may fail
        sessions[kind] = {'uuid': stored_uuid(done), 'period': f'{start}:{utc_now(round_up=True)}',
                          'cases': report_cases(prefix), 'stdout': done.stdout}
        time.sleep(1.1)    # so that the next period starts after this one ends
        assert all(c['fail_phase'] in (None, 'performance') for c in sessions[kind]['cases']), \
            [c['fail_reason'] for c in sessions[kind]['cases']]
    perflog = prefix / 'perflogs' / 'sim' / 'cluster' / 'MNISTDistributedCheck.log'
    return prefix, prefix / 'results.db', perflog, sessions


def fingerprint(*paths):
    return {str(p): sha256(p) for p in paths}


def verdicts(text):
    """{variable: verdict} of the report table for the test."""
    return {line.split()[4]: line.split()[-1] for line in text.splitlines()
            if line.startswith('sim:cluster') and TEST in line}


def test_the_config_stores_every_session(runs):
    """Storage is on in config/simulated.py: ReFrame's own queries work without any option."""
    _, db, _, sessions = runs
    env = {**os.environ, 'RFM_SQLITE_DB_FILE': str(db), 'RFM_COLORIZE': 'n'}
    env.pop('RFM_ENABLE_RESULTS_STORAGE', None)
    listed = subprocess.run([REFRAME, '-C', CONFIG, '--list-stored-sessions'], env=env,
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for session in sessions.values():
        assert session['uuid'] in listed.stdout
    # the README's comparison of a later run against an earlier one, with ReFrame's own tool
    compared = subprocess.run(
        [REFRAME, '-C', CONFIG, '--performance-compare',
         f"{sessions['slowed']['uuid']}/{sessions['unchanged']['uuid']}/median:/+psamples"],
        env=env, capture_output=True, text=True)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    row = next(l for l in compared.stdout.splitlines() if '│ samples_per_s ' in l)
    pdiff = float(row.split('│')[-2])
    assert -90 < pdiff < -40, row
    # and --performance-report at the end of a run compares it with the stored ones
    ran = sessions['slowed']['stdout']
    assert ' PERFORMANCE REPORT ' in ran and 'failed to generate performance report' not in ran


def test_report_flags_the_slowed_session(runs, capsys, tmp_path):
    _, db, _, sessions = runs
    code, out, err = run_report(capsys, '--db', str(db), sessions['unchanged']['uuid'],
                                sessions['slowed']['uuid'], '-o', str(tmp_path / 'report'))
    assert code == 1, out + err
    # the throttled rank also trains slower alone, and the others wait for it; its memory is
    # the same (the telemetry figure, docs/telemetry.md)
    found = verdicts(out)
    assert found.pop('peak_host_memory') != 'REGRESSION', found
    assert found == {'samples_per_s': 'REGRESSION', 'samples_per_s_per_gpu': 'REGRESSION',
                             'train_time': 'REGRESSION', 'slowest_rank_fraction': 'REGRESSION',
                             'communication_efficiency': 'REGRESSION'}
    assert '5 regression(s)' in out
    markdown = (tmp_path / 'report' / 'report.md').read_text()
    assert '| sim:cluster | ' + TEST + ' | samples_per_s | 3 | 3 |' in markdown
    pictures = re.findall(r'!\[[^]]*\]\(([^)]+)\)', markdown)
    assert len(pictures) == 2
    for name in pictures:
        assert (tmp_path / 'report' / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_the_same_session_on_both_sides_is_refused(runs, capsys):
    """A session against itself compares nothing: its period and its id select the same
    records, refused in one line (issue 48's third security pass: the newest session against
    `latest` read `unchanged`, exit 0), where two sessions are compared."""
    _, db, _, sessions = runs
    code, out, _ = run_report(capsys, '--db', str(db), sessions['unchanged']['uuid'], 'latest')
    assert code == 1     # latest is the slowed one
    err = one_line_error(capsys, report.main, '--db', str(db), sessions['unchanged']['period'],
                         sessions['unchanged']['uuid'])
    assert 'select the same records' in err


def test_report_on_the_perf_log_by_periods(runs, capsys):
    _, _, perflog, sessions = runs
    code, out, err = run_report(capsys, f"{perflog}@{sessions['unchanged']['period']}",
                                f"{perflog}@{sessions['slowed']['period']}")
    assert code == 1, out + err
    assert verdicts(out)['samples_per_s'] == 'REGRESSION'
    assert re.search(r'samples_per_s\s+3\s+3\s', out)


def test_baseline_from_a_stored_session_is_used_by_reframe(runs, tmp_path):
    prefix, db, _, sessions = runs
    refs = tmp_path / 'refs'
    refs.mkdir()
    configured = os.path.join(REPO, 'config', 'references', 'sim.yaml')
    (refs / 'sim.yaml').write_text(open(configured).read())
    configured = yaml.safe_load(open(configured))['MNISTDistributedCheck']['sim:cluster']['host']
    assert baseline.main(['--db', str(db), '--references-dir', str(refs),
                          sessions['unchanged']['uuid']]) == 0
    written = yaml.safe_load((refs / 'sim.yaml').read_text())['MNISTDistributedCheck']
    entry = written['sim:cluster']['host'][1]
    # written at the file's own machine speed, from the speed each run recorded (issue 38)
    speed = yaml.safe_load((refs / 'sim.yaml').read_text())['$machine_speed']['steps_per_s']
    values = sorted(c['perfvalues']['sim:cluster:samples_per_s'][0] * speed / c['machine_speed']
                    for c in sessions['unchanged']['cases'])
    assert entry['samples_per_s'] == [float(f'{values[1]:.4g}'), -0.5, None, 'samples/s']
    assert entry['train_time'] == configured[1]['train_time']      # a time is recorded only when asked
    assert written['sim:cluster']['host'][2] == configured[2]      # other entries stay
    assert (f"# baseline: sim:cluster MNISTDistributedCheck host 1 node(s): median of 3 run(s) of "
            f"{sessions['unchanged']['uuid']}") in (refs / 'sim.yaml').read_text()

    # ReFrame applies them: a dry run reports the new reference of every value
    done = run_reframe('simulated', tmp_path / 'dry', '--dry-run', '-n', 'MNISTDistributedCheck',
                       '-P', 'image=host', '-P', 'num_nodes=1', env={'MLCHECK_REFERENCES_DIR': str(refs)})
    assert done.returncode == 0, done.stdout + done.stderr
    [case] = report_cases(tmp_path / 'dry')
    assert case['perfvalues']['sim:cluster:samples_per_s'][1] == entry['samples_per_s'][0]


def test_bad_selections_are_one_line_errors_and_touch_nothing(runs, capsys, tmp_path):
    _, db, perflog, sessions = runs
    before = fingerprint(db, perflog)
    garbage = tmp_path / 'garbage.db'
    garbage.write_bytes(os.urandom(4096))
    cases = [
        (['--db', str(db), '20200101:20200102', 'latest'],
         "selection '20200101:20200102' holds no performance values"),
        (['--db', str(db), 'tomorrow', 'latest'], "selection 'tomorrow' is not a session UUID"),
        (['--db', str(garbage), 'latest', 'latest'],
         f'{garbage} is not a ReFrame results database (file is not a database)'),
        (['--db', str(tmp_path / 'none.db'), 'latest', 'latest'],
         f'results database not found: {tmp_path / "none.db"}'),
        ([f'{perflog}@20200101:20200102', str(perflog)],
         f"selection '{perflog}@20200101:20200102' holds no performance values"),
        ([str(tmp_path / 'missing.log'), str(perflog)], f'perf log not found: {tmp_path / "missing.log"}'),
    ]
    for args, message in cases:
        code, out, err = run_report(capsys, *args)
        assert code == 2 and out == '', (args, out, err)
        assert err.count('\n') == 1 and message in err, (args, err)
    assert not (tmp_path / 'none.db').exists()
    assert fingerprint(db, perflog) == before


def test_documented_commands_on_stored_sessions(runs, tmp_path):
    """README's and docs' report and baseline commands verbatim, in a tree laid out like the
    repository root (its directories linked, var/rfm/perflogs the runs' perf logs, so that
    nothing is written into the checkout), then from another directory with paths adjusted."""
    from docs_commands import adjusted, documented_commands, needs_database, run_command

    prefix, db, _, sessions = runs
    root = tmp_path / 'root'
    (root / 'var' / 'rfm').mkdir(parents=True)
    for name in ('config', 'mlcheck', 'checks', 'src', 'tests'):
        (root / name).symlink_to(os.path.join(REPO, name))
    (root / 'var' / 'rfm' / 'perflogs').symlink_to(prefix / 'perflogs')
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    placeholders = {'<baseline UUID>': sessions['unchanged']['uuid'],
                    '<UUID of another session>': sessions['slowed']['uuid']}
    commands = [c for c, _ in documented_commands() if needs_database(c)]
    assert len(commands) >= 3
    for command in commands:
        for placeholder, uuid in placeholders.items():
            command = command.replace(placeholder, uuid)
        # these sessions are the simulated partition's: the site a command names stands for the
        # one that ran them (mlcheck-baseline writes references only for a system of its config)
        command = re.sub(r'-C config/\w+\.py', '-C config/simulated.py', command)
        for cwd, line in ((root, command), (elsewhere, adjusted(command, elsewhere, root))):
            refs = cwd / 'refs'
            done = run_command(line, cwd, env={'RFM_SQLITE_DB_FILE': str(db),
                                               'MLCHECK_REFERENCES_DIR': str(refs)})
            said = f'{line} in {cwd}: {done.stdout[-1500:]}{done.stderr}'
            if '@now-1w:now-1d' in line:    # nothing of these runs is older than a day
                assert done.returncode == 2 and 'holds no performance values' in done.stderr, said
            elif 'mlcheck.commands.baseline' in line or 'mlcheck-baseline' in line:
                assert done.returncode == 0 and (refs / 'sim.yaml').exists(), said
            else:   # the slowed session is the latest
                assert done.returncode == 1 and 'REGRESSION' in done.stdout, said
            if '-o reports/upgrade' in line:
                assert (cwd / 'reports' / 'upgrade' / 'report.md').exists(), said


def test_settings_and_stack_are_recorded_with_every_value(runs, capsys):
    """In the perf log and in the results database alike: the run's settings, and the stack
    the ranks and the job reported (the same in both sessions, so the report names no change)."""
    from mlcheck.figures import stack
    from mlcheck.history.database import ResultsDatabase
    from mlcheck.history.selection import load, parse_selection
    _, db, perflog, sessions = runs
    database = ResultsDatabase(str(db), CONFIG)
    for found in (load(parse_selection(str(perflog))),
                  load(parse_selection(sessions['unchanged']['uuid']), database)):
        assert {s.settings for s in found} == {'epochs=2;batch_size=64'}
        facts = stack.decode(found[0].stack)
        assert set(facts) >= {'torch', 'torchvision', 'kernel', 'slurm'}, found[0].stack
        slurm = subprocess.run(['srun', '--version'], capture_output=True, text=True).stdout
        assert facts['slurm'] == slurm.split()[-1]
        import torch
        assert facts['torch'] == torch.__version__
    code, out, _ = run_report(capsys, '--db', str(db), sessions['unchanged']['uuid'],
                              sessions['slowed']['uuid'])
    assert 'stack of' not in out
