"""ReFrame's results database, only ever read, and its stored test cases turned into Samples.

Every reading of it is here, through ReFrame's own storage code: from a command (the report, the
baseline) by asking reframe after checking the file read-only (ResultsDatabase), and from inside a
running ReFrame session (scaling efficiency) through that session's storage backend
(session_testcases). Where the database is comes from the site config (database_of).
"""

import json
import math
import os
import pathlib
import sqlite3
import subprocess
import sys
import tempfile

from mlcheck.errors import InputError
from mlcheck.history.samples import Sample, recorded


def database_of(config):
    """The results database a site config names (RFM_SQLITE_DB_FILE first, as in ReFrame)."""
    if os.environ.get('RFM_SQLITE_DB_FILE'):
        return os.path.expandvars(os.environ['RFM_SQLITE_DB_FILE'])
    import runpy
    try:
        site = runpy.run_path(config)['site_configuration']
        return os.path.expandvars(site['storage'][0]['sqlite_db_file'])
    except (KeyError, IndexError, TypeError):
        raise InputError(f'config {config} enables no results database (storage)') from None
    except Exception as err:
        raise InputError(f'config {config} does not load: {err}') from None


class ResultsDatabase:
    """ReFrame's results database: checked read-only here, queried through reframe itself."""

    TABLES = {'sessions', 'testcases', 'metadata'}

    def __init__(self, path, config):
        # absolute: reframe runs in a scratch directory, where a relative path means nothing
        self.path, self.config = path, os.path.abspath(config)
        if not os.path.isfile(path):
            raise InputError(f'results database not found: {path}')
        tables = {name for (name,) in self._query(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not self.TABLES <= tables:
            raise InputError(f'{path} is not a ReFrame results database '
                             f'(no table {", ".join(sorted(self.TABLES - tables))})')

    def _query(self, sql):
        uri = pathlib.Path(os.path.abspath(self.path)).as_uri() + '?mode=ro'
        try:
            connection = sqlite3.connect(uri, uri=True)
            try:
                return connection.execute(sql).fetchall()
            finally:
                connection.close()
        except sqlite3.Error as err:
            raise InputError(f'{self.path} is not a ReFrame results database ({err})') from None

    def latest_session(self):
        rows = self._query('SELECT uuid FROM sessions ORDER BY session_start_unix DESC LIMIT 1')
        if not rows:
            raise InputError(f'results database {self.path} holds no session')
        return rows[0][0]

    def testcases(self, query):
        """The stored test cases of a query (session UUID or period), as reframe describes them."""
        command = [os.path.join(os.path.dirname(sys.executable), 'reframe'), '-C', self.config,
                   '--describe-stored-testcases', query]
        env = {**os.environ, 'RFM_ENABLE_RESULTS_STORAGE': 'y',
               'RFM_SQLITE_DB_FILE': os.path.abspath(self.path),
               'RFM_COLORIZE': 'n', 'RFM_SAVE_LOG_FILES': 'n'}
        env.pop('RFM_CONFIG_FILES', None)
        with tempfile.TemporaryDirectory() as scratch:   # for reframe's own log file
            done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=scratch)
        if done.returncode != 0:
            said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
            reason = said[-1].removeprefix('ERROR: ') if said else f'exit code {done.returncode}'
            raise InputError(f'results database {self.path}, selection {query!r}: {reason}')
        try:
            return json.loads(done.stdout)
        except ValueError:
            raise InputError(f'results database {self.path}: reframe answered no JSON for '
                             f'{query!r}: {done.stdout[:200]!r}') from None


def samples_of_testcases(testcases, with_failed=False):
    """The samples of stored test cases. One that failed before its performance stage is stored
    with its variables and the value None (ReFrame 4.10.4); kept as such if `with_failed`."""
    samples = []
    for case in testcases:
        partition = f"{case['system']}:{case['partition']}"
        for key, entry in (case.get('perfvalues') or {}).items():
            value, ref, lower, upper, unit, *result = entry
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                if not with_failed:
                    continue
                value = None
            nodes = case.get('job_nodelist') or []
            samples.append(Sample(
                partition=partition, name=case['name'], image=str(case.get('image', '')),
                num_nodes=int(case.get('num_nodes') or 0), var=key.split(':')[-1],
                value=None if value is None else float(value), unit=unit or '', time=case.get('job_completion_time_unix') or 0.0,
                jobid=str(case.get('jobid') or ''),
                nodelist=nodes if isinstance(nodes, str) else ','.join(nodes),
                reference=(ref, lower, upper), result=(result or [''])[0] or '',
                source=case.get('session_uuid', ''), settings=recorded(case.get('run_settings')),
                stack=recorded(case.get('software_stack')),
                problem=_first_line(case.get('fail_phase'), case.get('fail_reason')),
                num_tasks=int(case.get('num_tasks') or 0)))
    return samples


def _first_line(phase, reason):
    """The first line of a stored failure, with the phase it failed in: '' for none."""
    lines = [line.strip() for line in str(reason or '').splitlines() if line.strip()]
    if not lines:
        return ''
    return f'{phase}: {lines[0]}' if phase else lines[0]


def session_stores_results():
    """Whether the running ReFrame session has its results storage enabled."""
    from reframe.core.runtime import runtime
    return runtime().get_option('storage/0/enable')


def session_testcases(period, name_pattern, test_filter):
    """The stored test cases, read from inside a running ReFrame session through its storage
    backend: completed in `period` (start, end: Unix seconds), with a name matching the regex
    `name_pattern`, and for which `test_filter` (a Python expression over a test case) holds."""
    from mlcheck.harness.reframe_api import stored_testcases
    return stored_testcases(period, name_pattern, test_filter)
