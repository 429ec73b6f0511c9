"""Issue 48, item 1: a results database is data, and reading it runs nothing. ReFrame reads
`[PERIOD]?EXPR` in a query as a session filter and eval()s EXPR; mlcheck-nodes, mlcheck-report and
mlcheck-baseline handed it the newest stored session's id (`latest`) and the id a typed prefix
matched, so a colleague's database ran code as whoever read it. The reader now opens the file
read-only, selects by parameters and decodes the JSON itself; only UUIDs are ids. Item 7: one
malformed row is named and left out, not the end of every report. Each test here failed on
42e5ead."""

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest

from command_line import run_main
from mlcheck import REPO
from mlcheck.commands import baseline, nodes, report
from mlcheck.harness.reframe_api import time_period
from mlcheck.history.database import ResultsDatabase
from results_databases import new_session, report as run_report, store, sweep

CONFIG = os.path.join(REPO, 'config', 'simulated.py')
NOW = time.time()
GOOD, OLDER = new_session(), new_session()


def hostile(proof):
    """A session id that is a ReFrame session filter: Python that creates `proof`."""
    return f"?__import__('os').system('touch {proof}') == 99"


def dated(proof):
    """A stored id that an all-digit prefix typed to mlcheck-nodes found: a period, then a filter."""
    return f"20261127:now?__import__('os').system('touch {proof}') == 99"


@pytest.fixture(scope='module')
def stored(tmp_path_factory):
    """A database ReFrame wrote: two good sweeps, and newer sessions whose ids are code."""
    folder = tmp_path_factory.mktemp('stored')
    proof = folder / 'PROOF'
    path, storage = store(folder, sweep(OLDER, NOW - 7200, (90.0, 91.0)), sweep(GOOD, NOW - 3600),
                          sweep(dated(proof), NOW - 60), sweep(hostile(proof), NOW - 30))
    os.remove(folder / '.db.lock')    # ReFrame's own, from writing
    return path, storage, proof


@pytest.fixture
def database(stored, tmp_path):
    """A private copy of the stored database, and where its code would leave its proof."""
    path = tmp_path / 'results.db'
    shutil.copy(stored[0], path)
    return path, stored[2]


def refused(capsys, *args):
    """mlcheck-nodes' one line on stderr for `args`, exit status 2, nothing on stdout."""
    code, out, err = run_main(capsys, nodes.main, *args, '-C', CONFIG)
    assert code == 2 and out == '' and err.count('\n') == 1, err
    assert err.startswith('mlcheck-nodes: error: ')
    return err


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize('main, args', [
    (nodes.main, ['latest']),
    (report.main, [GOOD, 'latest']),
    (baseline.main, ['latest', '--dry-run']),
], ids=['nodes', 'report', 'baseline'])
def test_the_latest_sessions_id_runs_nothing(database, capsys, main, args):
    path, proof = database
    code, out, err = run_main(capsys, main, *args, '--db', str(path))
    assert not proof.exists(), 'the stored session id ran as code'
    # the newest row is the hostile one: `latest` never means an older session (issue 48's
    # security red-team, U1), so refused in one line, naming it, escaped
    assert code == 2 and err.count('\n') == 1, err
    assert 'is not a UUID' in err and 'its newest session' in err
    assert '\x1b' not in err


def test_a_typed_date_finds_no_stored_filter(database, capsys):
    path, proof = database
    err = refused(capsys, '20261127', '--db', str(path))
    assert not proof.exists(), 'the stored id that the date prefix matched ran as code'
    assert 'session 20261127 is not stored' in err


def test_a_typed_session_filter_is_refused(database, capsys, tmp_path):
    path, _ = database
    proof = tmp_path / 'TYPED'
    # its path joined by chr(47): a selection with '/' in it would be read as a perf log's
    filtered = f"now-1d:now?__import__('os').system('touch ' + chr(47).join({str(proof).split('/')})) == 99"
    err = refused(capsys, filtered, '--db', str(path))
    assert not proof.exists()
    assert 'a session filter (?FILTER) is not taken' in err


def test_reading_writes_nothing_into_the_database_or_beside_it(database, capsys):
    path, _ = database
    before = sha256(path)
    run_main(capsys, nodes.main, GOOD[:8], '--db', str(path), '-C', CONFIG)
    assert sha256(path) == before and sorted(os.listdir(path.parent)) == ['results.db']


def test_a_session_of_an_unknown_layout_is_refused_in_one_line(database, capsys):
    path, _ = database
    with sqlite3.connect(path) as db:
        (blob,) = db.execute('SELECT json_blob FROM sessions WHERE uuid = ?', (GOOD,)).fetchone()
        changed = json.loads(blob)
        changed['session_info']['data_version'] = '5.0'
        db.execute('UPDATE sessions SET json_blob = ? WHERE uuid = ?', (json.dumps(changed), GOOD))
    err = refused(capsys, GOOD, '--db', str(path))
    assert f"session {GOOD}: run report data version '5.0', this reader knows 4.2" in err


def test_a_database_of_another_schema_is_refused_in_one_line(database, capsys):
    path, _ = database
    with sqlite3.connect(path) as db:
        db.execute("UPDATE metadata SET schema_version = '2.0'")
    err = refused(capsys, 'latest', '--db', str(path))
    assert 'has schema version 2.0; this reader knows 1.0' in err


@pytest.mark.parametrize('blob', [
    '{"session_info": {"uuid": "',                                        # cut short
    '{"session_info": {"uuid": "%s"}, "runs": [{"testcases": [7]}]}',     # JSON, not a report
], ids=['cut-short', 'not-a-report'])
def test_a_malformed_row_is_named_and_left_out(database, capsys, blob):
    """Item 7: the newest session's row cannot be read; the sweep before it is, the bad row named."""
    path, _ = database
    broken = new_session()
    with sqlite3.connect(path) as db:
        db.execute('INSERT INTO sessions VALUES (?, ?, ?, ?, ?)',
                   (broken, NOW, NOW + 1, blob.replace('%s', broken), None))
    code, out, err = run_main(capsys, nodes.main, 'latest', '--db', str(path), '-C', CONFIG)
    assert code == 2 and f'session {broken}: ' in err, err   # `latest` is the newest or nothing
    day = time.strftime('%Y%m%d', time.localtime(NOW - 86400))
    code, out, err = run_main(capsys, nodes.main, f'{day}:now', '--db', str(path), '-C', CONFIG)
    assert code in (0, 1), err        # a period's verdict, the bad row not read, not bad input
    assert 'nid001' in out and 'nid002' in out


def test_a_test_case_that_cannot_be_read_is_named_and_left_out(database, capsys):
    """Item 7: a session whose one test case lacks its system: the others are judged."""
    path, _ = database
    with sqlite3.connect(path) as db:
        (blob,) = db.execute('SELECT json_blob FROM sessions WHERE uuid = ?', (GOOD,)).fetchone()
        changed = json.loads(blob)
        del changed['runs'][0]['testcases'][0]['system']
        db.execute('UPDATE sessions SET json_blob = ? WHERE uuid = ?', (json.dumps(changed), GOOD))
    code, out, err = run_main(capsys, nodes.main, GOOD, '--db', str(path), '-C', CONFIG)
    assert code in (0, 1) and f"test case '{GOOD}:0:0' left out: it cannot be read (KeyError" in err
    assert 'nid002' in out


def test_what_is_read_is_what_reframe_itself_describes(stored):
    """The reading in Python gives the test cases reframe --describe-stored-testcases gives, of a
    session and of a period (run on a database without the hostile rows: reframe would run them)."""
    folder = os.path.dirname(stored[0]) + '-plain'
    os.makedirs(folder, exist_ok=True)
    path, storage = store(folder, sweep(OLDER, NOW - 7200, (90.0, 91.0)), sweep(GOOD, NOW - 3600))
    database = ResultsDatabase(path, CONFIG)
    reframe = [sys.executable, '-c', 'from reframe.frontend.cli import main; main()']
    for query, ours in ((GOOD, database.testcases(GOOD)),
                        ('now-3h:now', database.testcases(time_period('now-3h:now')))):
        done = subprocess.run([*reframe, '-C', storage, '--describe-stored-testcases', query],
                              capture_output=True, text=True, cwd=folder,
                              env={**os.environ, 'RFM_SAVE_LOG_FILES': 'n'})
        assert done.returncode == 0, done.stderr
        assert ours == json.loads(done.stdout) and ours, query
    assert len(database.testcases(time_period('now-3h:now'))) == 4
