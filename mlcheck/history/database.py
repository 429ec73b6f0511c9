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
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile

from mlcheck.errors import InputError
from mlcheck.history.samples import Sample, recorded


def database_of(config, system=None):
    """The results database a site config names (RFM_SQLITE_DB_FILE first, as in ReFrame): the
    storage entry of the system this host is, as ReFrame picks it (--system or RFM_SYSTEM, else
    the first system with a hostname pattern that matches the hostname), where a config holds
    several sites' (config/all.py scopes each site's storage to its systems)."""
    if os.environ.get('RFM_SQLITE_DB_FILE'):
        return os.path.expandvars(os.environ['RFM_SQLITE_DB_FILE'])
    site = site_configuration(config)
    name = (system or os.environ.get('RFM_SYSTEM') or _detected(site.get('systems', []))).split(':')[0]
    if not name:
        raise InputError(f'no system of config {config} matches this host ({socket.gethostname()}): '
                         'name one with --system=<name> or RFM_SYSTEM=<name>')
    entries = [entry for entry in site.get('storage', [])
               if any(target in ('*', name) or target.split(':')[0] == name
                      for target in entry.get('target_systems', ['*']))]
    try:
        return os.path.expandvars(entries[0]['sqlite_db_file'])
    except (KeyError, IndexError, TypeError):
        raise InputError(f'config {config} enables no results database (storage) for system '
                         f'{name}') from None


def site_configuration(config):
    """The site_configuration dictionary of a ReFrame config file (loading one measures and
    writes nothing: config/simulated.py measures the machine's speed only in a check's set-up)."""
    import runpy
    try:
        return runpy.run_path(config)['site_configuration']
    except BaseException as err:    # a config's own check exits (SystemExit) with its reason
        raise InputError(f'config {config} does not load: {err}') from None


def system_names(config):
    """The names of the systems a config file describes."""
    return [system['name'] for system in site_configuration(config).get('systems', [])]


def _detected(systems):
    """The name of the first system whose hostname pattern matches this host (re.match, as
    ReFrame's _detect_system), or ''."""
    hostname = socket.gethostname()
    return next((s['name'] for s in systems if any(re.match(p, hostname) for p in s.get('hostnames', []))), '')


class ResultsDatabase:
    """ReFrame's results database: checked read-only here, queried through reframe itself."""

    TABLES = {'sessions', 'testcases', 'metadata'}

    def __init__(self, path, config, system=None):
        # absolute: reframe runs in a scratch directory, where a relative path means nothing
        self.path, self.config, self.system = path, os.path.abspath(config), system
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

    def session_uuid(self, prefix):
        """The stored session whose UUID is `prefix` or begins with it (the tables show 8
        characters); an InputError that says how to list them where none or several do."""
        found = [uuid for (uuid,) in self._query('SELECT uuid FROM sessions') if uuid.startswith(prefix)]
        if len(found) == 1:
            return found[0]
        if not found:
            raise InputError(f'session {prefix} is not stored in {self.path}: list the stored ones '
                             f'with reframe -C {self.config} --list-stored-sessions')
        raise InputError(f'session {prefix} is the start of {len(found)} stored sessions '
                         f'({", ".join(sorted(found)[:4])}): give more of it')

    def testcases(self, query):
        """The stored test cases of a query (session UUID or period), as reframe describes them."""
        command = [os.path.join(os.path.dirname(sys.executable), 'reframe'), '-C', self.config,
                   '--describe-stored-testcases', query]
        env = {**os.environ, 'RFM_ENABLE_RESULTS_STORAGE': 'y',
               'RFM_SQLITE_DB_FILE': os.path.abspath(self.path),
               'RFM_COLORIZE': 'n', 'RFM_SAVE_LOG_FILES': 'n',
               **({'RFM_SYSTEM': self.system} if self.system else {})}
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
                problem=failure_line(case.get('fail_phase'), case.get('fail_reason')),
                num_tasks=int(case.get('num_tasks') or 0),
                machine_speed=_speed(case.get('machine_speed'))))
    return samples


def _speed(value):
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


def failure_line(phase, reason):
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
