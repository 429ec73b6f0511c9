"""mlcheck-report's plumbing from issue 35: a reader that closes the pipe (a CI gate's `| head`)
leaves the exit status and the report's files as they would be; a session is selected by the 8
characters of its UUID the tables show, and one not stored says so and how to list them."""

import os
import random
import subprocess
import sys

import pytest

from mlcheck import REPO
from mlcheck.errors import InputError
from mlcheck.history.database import ResultsDatabase
from mlcheck.history.selection import load, parse_selection
from perflogs import write_perflog
from scenario_bank import Fault, build


def test_a_closed_pipe_keeps_the_verdict_and_the_report(tmp_path):
    before, after = build(random.Random(1), [Fault('image', 'torch-2.9.1', 0.3)], noise=0.01,
                          checks=('MNISTDistributedCheck',))
    logs = [write_perflog(tmp_path / f'{side}.log', found) for side, found in
            (('before', before), ('after', after))]
    command = (f'{sys.executable} -m mlcheck.commands.report {logs[0]} {logs[1]} -o {tmp_path / "r"}'
               ' | head -c 20 >/dev/null; echo "${PIPESTATUS[0]}"')
    done = subprocess.run(['bash', '-c', command], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, 'PYTHONPATH': REPO})
    assert done.stdout.strip() == '1' and 'Error' not in done.stderr, done.stderr
    assert (tmp_path / 'r' / 'report.md').is_file()


def stored(tmp_path, *uuids):
    """A results database file with `uuids` as its sessions (the tables ReFrame's has)."""
    import sqlite3
    path = tmp_path / 'results.db'
    with sqlite3.connect(path) as db:
        db.execute('CREATE TABLE sessions (uuid TEXT, session_start_unix REAL)')
        db.execute('CREATE TABLE testcases (uuid TEXT)')
        db.execute('CREATE TABLE metadata (schema_version TEXT)')
        db.execute("INSERT INTO metadata VALUES ('1.0')")
        db.executemany('INSERT INTO sessions VALUES (?, ?)', [(u, i) for i, u in enumerate(uuids)])
    return ResultsDatabase(str(path), os.path.join(REPO, 'config', 'simulated.py'))


UUIDS = ('3f2a9c1e-0000-4000-8000-000000000001', '3f2a9c1e-1111-4000-8000-000000000002',
         '7b41d0aa-0000-4000-8000-000000000003')


def test_the_8_characters_the_tables_show_select_a_session(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(ResultsDatabase, 'testcases', lambda self, query: asked.append(query) or [])
    with pytest.raises(InputError):
        load(parse_selection('7b41d0aa'), stored(tmp_path, *UUIDS))
    assert asked == [UUIDS[2]]


def test_a_session_not_stored_says_so_and_how_to_list_them(tmp_path):
    database = stored(tmp_path, *UUIDS)
    with pytest.raises(InputError, match='session 0123abcd is not stored in .*results.db: list the '
                                         'stored ones with reframe -C .* --list-stored-sessions'):
        load(parse_selection('0123abcd'), database)
    with pytest.raises(InputError, match='is not stored'):
        load(parse_selection('0123abcd-0000-4000-8000-000000000009'), database)
    with pytest.raises(InputError, match='the start of 2 stored sessions'):
        load(parse_selection('3f2a9c1e'), database)


def test_a_session_that_failed_entirely_is_a_regression(tmp_path, capsys, monkeypatch):
    """The image went missing: every test case failed at setup, none holds a value. It read
    'holds no performance values', exit 2, as for bad input."""
    from command_line import run_report
    before, _ = build(random.Random(1), [], checks=('MNISTDistributedCheck',))
    log = write_perflog(tmp_path / 'before.log', before)
    database = stored(tmp_path, *UUIDS)
    failed = [{'system': 'sim', 'partition': 'cluster', 'name': 'MNISTDistributedCheck %image=x',
               'result': 'fail', 'fail_phase': 'setup', 'fail_reason': 'image /images/x.sif not found',
               'perfvalues': {}}]
    monkeypatch.setattr(ResultsDatabase, 'testcases', lambda self, query: failed)
    code, out, err = run_report(capsys, log, UUIDS[2][:8], '--db', database.path)
    assert code == 1 and err == ''
    assert out.startswith(f"likely cause: cannot tell: every test case of '{UUIDS[2][:8]}' failed "
                          'before its figures (1: setup: image /images/x.sif not found)')
