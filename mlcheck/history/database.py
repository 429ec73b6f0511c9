"""ReFrame's results database, only ever read, and its stored test cases turned into Samples.

Every reading of it is here: from a command (the report, the baseline, the node sweep) in Python,
the file opened read-only and nothing of it handed to reframe (ResultsDatabase), and from inside a
running ReFrame session (scaling efficiency) through that session's storage backend
(session_testcases). Where the database is comes from the site config (database_of).
"""

import contextlib
import io
import json
import math
import os
import pathlib
import re
import socket
import sqlite3
import sys

from mlcheck.errors import InputError
from mlcheck.visible import visible
from mlcheck.history.samples import Sample, recorded


# a session's id as ReFrame makes it (str(uuid.uuid4())): the only stored id this reader takes
SESSION_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
# a run's or a test case's index in a test case id (ASCII digits: int() of 5000 digits raises)
RUN_INDEX = re.compile(r'[0-9]{1,9}')


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
    """ReFrame's results database (reframe-hpc 4.10.4's sqlite layout), read here in Python and
    never handed to reframe: ReFrame reads `[PERIOD]?EXPR` in a query as a session filter and
    eval()s EXPR, so a stored session id or a typed selection would run as code. The file is
    opened read-only (`mode=ro`: no index, lock file or journal is written into it, and no other
    process's lock is waited on beyond sqlite's own short timeout); sessions are selected by
    parameters, never by text pasted into SQL, and their JSON decoded here. A row that cannot be
    read (not a UUID, not JSON) is named on stderr and left out, as bad perf log lines are; a
    layout this reader does not know is refused in one line."""

    TABLES = {'sessions', 'testcases', 'metadata'}
    SCHEMA_VERSION = '1.0'          # metadata.schema_version of ReFrame 4.10.4's storage
    DATA_VERSIONS = ('4.2',)        # session_info.data_version of its run reports

    def __init__(self, path, config, system=None):
        self.path, self.config, self.system = path, os.path.abspath(config), system
        self.unknown_versions = []     # sessions of a layout this reader does not know: named, skipped
        if not os.path.isfile(path):
            raise InputError(f'results database not found: {path}')
        tables = {name for (name,) in self._query(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not self.TABLES <= tables:
            raise InputError(f'{path} is not a ReFrame results database '
                             f'(no table {", ".join(sorted(self.TABLES - tables))})')
        versions = {version for (version,) in self._query('SELECT schema_version FROM metadata')}
        if versions != {self.SCHEMA_VERSION}:
            raise InputError(f'results database {path} has schema version '
                             f'{", ".join(sorted(map(visible, map(str, versions)))) or "none"}; '
                             f'this reader knows {self.SCHEMA_VERSION} (ReFrame 4.10.4)')

    def _query(self, sql, parameters=()):
        uri = pathlib.Path(os.path.abspath(self.path)).as_uri() + '?mode=ro' + self._immutable()
        try:
            connection = sqlite3.connect(uri, uri=True)
            try:
                return connection.execute(sql, parameters).fetchall()
            finally:
                connection.close()
        except sqlite3.Error as err:
            raise InputError(f'{self.path} is not a ReFrame results database ({err})') from None

    def _immutable(self):
        """'&immutable=1' for a database in WAL mode (ReFrame never makes one) with nothing in
        its -wal file: read-only sqlite would still create a -shm file beside it (through a
        planted link too); immutable reads the main file alone, which then holds everything. A
        WAL database with writes pending in its -wal is refused in one line."""
        try:
            with open(self.path, 'rb') as stream:
                header = stream.read(20)
        except OSError:
            return ''
        if header[18:20] != b'\x02\x02':     # the file format's read and write versions: 2 is WAL
            return ''
        try:
            pending = os.lstat(self.path + '-wal').st_size
        except FileNotFoundError:
            pending = 0
        if pending:
            raise InputError(f'results database {self.path} is in WAL mode with writes pending in '
                             f'{self.path}-wal: reading it would write beside it; checkpoint it first '
                             "(sqlite3 FILE 'PRAGMA wal_checkpoint(TRUNCATE)') or copy it")
        return '&immutable=1'

    def _skipped(self, row, why):
        print(f'results database {visible(self.path)}: session row {row} left out: {why}', file=sys.stderr)

    def _report(self, row, uuid, blob):
        """The decoded run report of the session in `row`, None (said on stderr) where it cannot be
        read; an InputError where its data version is one this reader does not know."""
        if not isinstance(uuid, str) or not SESSION_UUID.fullmatch(uuid):
            return self._skipped(row, f'its id {visible(repr(uuid))} is not a UUID')
        try:
            report = json.loads(blob)
            info = report['session_info']
            if info.get('uuid') != uuid or not _runs_of_test_cases(report.get('runs')):
                raise ValueError('its JSON is not the run report of that session')
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as err:
            # RecursionError: JSON nested thousands deep
            return self._skipped(row, f'session {uuid}: {type(err).__name__}: {visible(str(err))[:120]}')
        if info.get('data_version') not in self.DATA_VERSIONS:
            self.unknown_versions.append(
                f'session {uuid}: run report data version {visible(repr(info.get("data_version")))[:40]}, '
                f'this reader knows {", ".join(self.DATA_VERSIONS)} (ReFrame 4.10.4)')
            return None      # said by the caller: refused where the session was asked for by id
        return report

    def _sessions(self, where='', parameters=()):
        """(uuid, report) of each readable session the SQL condition `where` selects, newest first."""
        for row, uuid, blob in self._query(f'SELECT rowid, uuid, json_blob FROM sessions {where} '
                                           'ORDER BY session_start_unix DESC', parameters):
            report = self._report(row, uuid, blob)
            if report is not None:
                yield uuid, report

    def _say_unknown(self):
        for said in self.unknown_versions:
            print(f'results database {visible(self.path)}: {said}: left out', file=sys.stderr)
        self.unknown_versions = []

    def latest_session(self):
        """The newest session's id; an InputError where the newest cannot be read, naming the
        newest that can: `latest` meaning an older one judged last week's sweep and resumed a
        node that failed the newest, or compared a session with itself, exit 0 (issue 48's
        security red-team, U1). Its id, or a period, selects the readable one."""
        rows = list(self._query('SELECT rowid, uuid FROM sessions ORDER BY session_start_unix DESC LIMIT 2'))
        if not rows:
            raise InputError(f'results database {self.path} holds no session')
        # which is newest must be plain: a start time that is no number sorts last, and two
        # sessions of one start time are in no order (the security re-check's N1: the newest,
        # its start made NULL, vanished and an older sweep resumed a failed node)
        (timeless,), = self._query("SELECT count(*) FROM sessions WHERE typeof(session_start_unix) "
                                   "NOT IN ('integer', 'real') OR abs(session_start_unix) > 1e15")
        # ... and the session stored last must be the one that started last (a start of 0, or an
        # older session's far future one, hid the newest: the third security pass's F1)
        (last_stored,), = self._query('SELECT rowid FROM sessions ORDER BY rowid DESC LIMIT 1')
        if not timeless and rows[0][0] != last_stored:
            raise InputError(f'results database {self.path}: the session stored last (row {last_stored}) '
                             f'is not the one that started last (row {rows[0][0]}): which is newest '
                             'cannot be told, and `latest` never guesses: give a session by its id')
        (tied,), = self._query('SELECT count(*) FROM sessions WHERE session_start_unix = '
                               '(SELECT max(session_start_unix) FROM sessions)')
        if timeless or tied > 1:
            raise InputError(f'results database {self.path}: which session is newest cannot be told ('
                             + (f'{timeless} session(s) with no start time' if timeless else
                                f'{tied} sessions share the newest start time')
                             + '), and `latest` never guesses: give a session by its id')
        with contextlib.redirect_stderr(io.StringIO()) as said:
            found = next(self._sessions(), None)
        newest_row, newest = rows[0]
        if found is None or found[0] != newest:
            first = said.getvalue().partition('\n')[0]
            why = (first.partition(' left out: ')[2] if f'session row {newest_row} ' in first
                   else (self.unknown_versions or ['it cannot be read'])[0])
            raise InputError(
                f'results database {self.path}: its newest session (row {newest_row}) cannot be read '
                f'({why[:200]}), and `latest` never means an older one: '
                + (f'give the newest readable session by its id ({found[0]}) if that is the one meant'
                   if found else 'no session of it can be read'))
        return found[0]

    def session_uuid(self, prefix):
        """The stored session whose UUID is `prefix` or begins with it (the tables show 8
        characters); an InputError that says how to list them where none or several do. Stored
        ids that are not UUIDs are never candidates."""
        found = [uuid for (uuid,) in self._query('SELECT uuid FROM sessions')
                 if isinstance(uuid, str) and SESSION_UUID.fullmatch(uuid) and uuid.startswith(prefix)]
        if len(found) == 1:
            if prefix.isdecimal():     # digits only: a date typed without its :END, say what it found
                print(f'selection {prefix!r} (digits only) is taken as the start of session {found[0]}, '
                      'not as a date (a period is START:END)', file=sys.stderr)
            return found[0]
        if not found:
            raise InputError(f'session {prefix} is not stored in {self.path}: list the stored ones '
                             f'with reframe -C {self.config} --list-stored-sessions')
        raise InputError(f'session {prefix} is the start of {len(found)} stored sessions '
                         f'({", ".join(sorted(found)[:4])}): give more of it')

    def testcases(self, query):
        """The stored test cases of a query, as ReFrame's --describe-stored-testcases gives them:
        of a session (its UUID), every test case of its runs; of a period (start, end: Unix
        seconds), each test case completed in it, oldest first."""
        if isinstance(query, str):
            cases = [case for _, report in self._sessions('WHERE uuid = ?', (query,))
                     for run in report['runs'] for case in run.get('testcases', [])]
            if not cases and self.unknown_versions:
                raise InputError(f'results database {self.path}, {self.unknown_versions[-1]}')
            return cases
        rows = self._query('SELECT uuid FROM testcases WHERE job_completion_time_unix >= ? AND '
                           'job_completion_time_unix < ? ORDER BY job_completion_time_unix', query)
        places = [parts for (case_uuid,) in rows for parts in [str(case_uuid).split(':')]
                  if len(parts) == 3 and SESSION_UUID.fullmatch(parts[0])
                  and RUN_INDEX.fullmatch(parts[1]) and RUN_INDEX.fullmatch(parts[2])]
        reports = {}
        for session in dict.fromkeys(session for session, _, _ in places):
            reports.update(self._sessions('WHERE uuid = ?', (session,)))
        self._say_unknown()
        cases = []
        for session, run, index in places:
            with contextlib.suppress(KeyError, IndexError, TypeError):
                cases.append(reports[session]['runs'][int(run)]['testcases'][int(index)])
        return cases


def _runs_of_test_cases(runs):
    """Whether `runs` is a run report's list of runs, each holding a list of test cases (dicts)."""
    return isinstance(runs, list) and all(
        isinstance(run, dict) and isinstance(run.get('testcases'), list)
        and all(isinstance(case, dict) for case in run['testcases']) for run in runs)


def samples_of_testcases(testcases, with_failed=False, left_out=None):
    """The samples of stored test cases. One that failed before its performance stage is stored
    with its variables and the value None (ReFrame 4.10.4); kept as such if `with_failed`. A
    test case that cannot be read is named on stderr and left out, and appended to `left_out`
    (where, None: its node is unknown, why), as a perf log's unreadable line is."""
    samples = []
    for case in testcases:
        try:
            samples += _samples_of_testcase(case, with_failed)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as err:
            # OverflowError: `num_nodes: Infinity`, which json reads as float('inf')
            said = f'test case {visible(repr(case.get("uuid")))[:80]}'
            why = f'it cannot be read ({type(err).__name__}: {visible(str(err))[:80]})'
            print(f'results database: {said} left out: {why}', file=sys.stderr)
            if left_out is not None:
                left_out.append((f'results database, {said}', None, why))
    return samples


def _text(value, field, optional=False):
    """`value`, a string (None too where `optional`); a ValueError naming `field` otherwise
    (`name: 123` of a hand-edited database was an internal error further on)."""
    if isinstance(value, str) or (optional and value is None):
        return value
    raise ValueError(f'its {field} is {type(value).__name__}, not text')


def _finite(value, field):
    """`value`, a finite number or None; a ValueError naming `field` otherwise."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                         and math.isfinite(value)):
        return value
    raise ValueError(f'its {field} {visible(repr(value))[:40]} is not a finite number')


def _samples_of_testcase(case, with_failed):
    samples = []
    partition = f"{_text(case['system'], 'system')}:{_text(case['partition'], 'partition')}"
    name = _text(case['name'], 'name')
    when = _finite(case.get('job_completion_time_unix'), 'job_completion_time_unix')
    for key, entry in (case.get('perfvalues') or {}).items():
        value, ref, lower, upper, unit, *result = entry
        ref, lower, upper = (_finite(v, f'{key} {field}')
                             for v, field in ((ref, 'reference'), (lower, 'lower threshold'),
                                              (upper, 'upper threshold')))
        unit = _text(unit, f'{key} unit', optional=True)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            if not with_failed:
                continue
            value = None
        nodes = case.get('job_nodelist') or []
        samples.append(Sample(
            partition=partition, name=name, image=str(case.get('image', '')),
            num_nodes=int(case.get('num_nodes') or 0), var=key.split(':')[-1],
            value=None if value is None else float(value), unit=unit or '', time=when or 0.0,
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
