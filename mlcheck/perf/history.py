"""Performance history: performance values from ReFrame's results database or from perf logs,
and the comparison of two selections that tells regressions from noise.

A selection is one of the SELECTION_FORMS below. Stored data is only read: the database is
checked read-only before ReFrame queries it.
"""

import json
import math
import os
import pathlib
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from reframe.frontend.reporting.utility import is_uuid, parse_query_spec, parse_time_period

from mlcheck.errors import InputError

# perf log columns (by header name) that every sample needs
PERFLOG_REQUIRED = ('job_completion_time', 'system:partition', 'name', 'image', 'num_nodes',
                    'perf_var', 'perf_value', 'perf_unit')
TIME_UNITS = {'s', 'ms', 'us', 'min', 'h'}   # lower is better; everything else higher is better
LATEST = 'latest'
SELECTION_FORMS = """\
  SESSION-UUID      that session, from the results database
  START:END         every stored test case completed in that period, in ReFrame's syntax
                    (20261120, 20261120T0930, now-1d:now, ...); START:END?FILTER selects sessions
  latest            the most recent stored session
  PATH[@START:END]  a perf log file, or a directory of them, optionally only a period
"""


@dataclass(frozen=True)
class Sample:
    """One performance value of one test case run."""
    partition: str        # system:partition
    name: str             # test name with its parameters, e.g. 'Check %image=x %num_nodes=2'
    image: str
    num_nodes: int
    var: str              # performance variable
    value: float          # None: the test case ran and failed before its performance stage
    unit: str
    time: float           # job completion, Unix seconds
    jobid: str = ''
    nodelist: str = ''
    reference: tuple = ()  # (value, lower, upper) as ReFrame applied them
    result: str = ''
    source: str = ''      # session UUID or perf log path
    settings: str = ''    # the run's settings that change a figure ('' where not recorded)
    stack: str = ''       # its software stack (mlcheck.perf.stack; '' where not recorded)

    @property
    def key(self):
        """What is compared like with like: the test, its settings and the variable."""
        return (self.partition, self.name, self.var, self.settings)

    @property
    def system(self):
        return self.partition.split(':')[0]

    @property
    def check(self):
        """The test's class name, which keys its references."""
        return self.name.split()[0]


def higher_is_better(unit):
    return unit not in TIME_UNITS


# --- selections ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Selection:
    spec: str
    kind: str             # 'session', 'period', 'latest' (results database) or 'perflog'
    path: str = ''        # perf log file or directory
    period: tuple = None  # (start, end) Unix seconds, for perf logs

    @property
    def stored(self):
        return self.kind != 'perflog'


def parse_selection(spec):
    """A Selection from its command-line form; an InputError if it is none of the forms."""
    spec = spec.strip()
    if not spec:
        raise InputError('empty selection: give a session UUID, a period START:END, '
                         f'{LATEST!r} or a perf log path')
    if spec == LATEST:
        return Selection(spec, 'latest')
    if is_uuid(spec):
        return Selection(spec, 'session')
    path, _, period = spec.partition('@')
    if os.sep in path or path.endswith('.log') or os.path.exists(path):
        if period:
            try:
                period = parse_time_period(period)
            except ValueError as err:
                raise InputError(f'selection {spec!r}: {err}') from None
        return Selection(spec, 'perflog', path=path, period=period or None)
    try:
        parse_query_spec(spec)
    except ValueError as err:
        raise InputError(f'selection {spec!r} is not a session UUID, a period START:END, '
                         f'{LATEST!r} or a perf log path ({err})') from None
    return Selection(spec, 'period')


# --- perf logs -----------------------------------------------------------------------------

def perflog_files(path):
    """The perf logs at `path`: the file, or every *.log below the directory, with the .log.hN
    files into which ReFrame moves a log when its header changes (when the settings and stack
    columns were added, say) if their header has every column a sample needs."""
    if os.path.isdir(path):
        found = sorted(os.path.join(d, f) for d, _, files in os.walk(path)
                       for f in files if f.endswith('.log'))
        if not found:
            raise InputError(f'no perf log (*.log) in directory {path}')
        rotated = sorted(os.path.join(d, f) for d, _, files in os.walk(path)
                         for f in files if re.search(r'\.log\.h\d+$', f))
        return found + [f for f in rotated if _has_sample_columns(f)]
    if not os.path.exists(path):
        raise InputError(f'perf log not found: {path}')
    return [path]


def _has_sample_columns(path):
    try:
        with open(path, errors='replace') as stream:
            header = stream.readline().rstrip('\n').split('|')
    except OSError:
        return False
    return all(column in header for column in PERFLOG_REQUIRED)


def read_perflog(path, period=None, with_failed=False):
    """The samples of one perf log, read by its header. A test case that failed before its
    performance stage has its lines, with the value null (ReFrame 4.10.4, perflog_multiline);
    they are kept with the value None if `with_failed`, else skipped."""
    try:
        with open(path, errors='replace') as stream:
            lines = stream.read().splitlines()
    except OSError as err:
        raise InputError(f'cannot read perf log {path}: {err.strerror}') from None
    if not lines:
        raise InputError(f'perf log {path} is empty (no header)')
    if lines[0].startswith('SQLite format 3'):
        raise InputError(f'{path} is a database, not a perf log: give it with --db')
    columns = lines[0].split('|')
    missing = [c for c in PERFLOG_REQUIRED if c not in columns]
    if missing:
        raise InputError(f'perf log {path} has an older or foreign header: no column '
                         f'{", ".join(missing)} (header: {lines[0][:100]!r})')
    samples = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        values = line.split('|')
        if len(values) != len(columns):
            raise InputError(f'{path}:{number}: {len(values)} fields where the header has '
                             f'{len(columns)}')
        row = dict(zip(columns, values))
        value = _number(row['perf_value'])
        if value is None and not with_failed:
            continue              # a test that failed before its performance stage, or a dry run
        when = _timestamp(row['job_completion_time'], f'{path}:{number}')
        if period and not period[0] <= when < period[1]:
            continue
        samples.append(Sample(
            partition=row['system:partition'], name=row['name'], image=row['image'],
            num_nodes=_int(row['num_nodes'], f'{path}:{number}: num_nodes'),
            var=row['perf_var'], value=value, unit=row['perf_unit'], time=when,
            jobid=row.get('jobid', ''), nodelist=row.get('job_nodelist', ''),
            reference=tuple(_number(row.get(c)) for c in ('perf_ref', 'perf_lower_thres',
                                                           'perf_upper_thres')),
            result=row.get('perf_result', ''), source=path,
            settings=_field(row.get('run_settings')), stack=_field(row.get('software_stack'))))
    return samples


def _field(text):
    """A column that older perf logs lack, or that ReFrame wrote as null."""
    return '' if text in (None, 'null', 'None', '<undefined>') else text


def _number(text):
    if text in (None, '', 'None', 'null'):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text, where):
    try:
        return int(text)
    except ValueError:
        raise InputError(f'{where}: {text!r} is not a number') from None


def _timestamp(text, where):
    try:
        return datetime.fromisoformat(text).timestamp()   # without an offset: local time
    except ValueError:
        raise InputError(f'{where}: bad completion time {text!r}') from None


# --- the results database ------------------------------------------------------------------

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
                source=case.get('session_uuid', ''), settings=_field(case.get('run_settings')),
                stack=_field(case.get('software_stack'))))
    return samples


def load(selection, database=None, with_failed=False):
    """The samples of a selection; an InputError when it holds none. With `with_failed` the
    test cases that ran without a value (value None) count too: a selection whose every test
    failed still names them, and only one that names no test case at all is an error."""
    if selection.stored:
        if database is None:
            raise InputError(f'selection {selection.spec!r} needs the results database')
        query = database.latest_session() if selection.kind == 'latest' else selection.spec
        samples = samples_of_testcases(database.testcases(query), with_failed)
        where = f'results database {database.path}'
    else:
        samples = [s for path in perflog_files(selection.path)
                   for s in read_perflog(path, selection.period, with_failed)]
        where = f'perf log {selection.path}'
    if not samples:
        raise InputError(f'selection {selection.spec!r} holds no performance values ({where})')
    return samples


def valued(samples):
    """The samples that hold a value (not those of test cases that failed before it)."""
    return [s for s in samples if s.value is not None]


# --- comparison ----------------------------------------------------------------------------

REGRESSION, IMPROVED, WITHIN_NOISE, UNCHANGED, TOO_FEW = (
    'REGRESSION', 'improved', 'within noise', 'unchanged', 'too few repetitions')
# neither side has the repetitions for a spread, and after is worse by more than the threshold:
# nothing says the change is noise, so it fails the gate
TOO_FEW_WORSE = 'WORSE, TOO FEW TO JUDGE'
ONLY_BEFORE, ONLY_AFTER = 'only before', 'only after'
# a test with values before and none at all after: it broke outright, the worst regression
NO_RESULT = 'NO RESULT AFTER'
# ... or ran after only with other settings (epochs, model...): it cannot be said to be as fast
OTHER_SETTINGS = 'OTHER SETTINGS AFTER'
# verdicts that fail the gate
FAILING = (REGRESSION, NO_RESULT, OTHER_SETTINGS, TOO_FEW_WORSE)
NOT_RECORDED = 'settings not recorded'   # how values without a settings column are labelled


@dataclass(frozen=True)
class Rule:
    threshold: float = 0.05    # relative change that matters
    noise_factor: float = 2.0  # a change must also exceed this many times the noise
    min_repeats: int = 2       # repetitions a side needs for a noise estimate

    def __post_init__(self):
        # a standard deviation needs two values on a side; a bound of 1 or more is no bound
        if self.min_repeats < 2:
            raise InputError(f'--min-repeats {self.min_repeats}: the noise estimate needs at '
                             'least 2 repetitions on each side')
        if self.noise_factor < 0:
            raise InputError(f'--noise-factor {self.noise_factor:g}: expected 0 or more')


@dataclass
class Comparison:
    key: tuple
    unit: str
    image: str
    num_nodes: int
    before: list = field(default_factory=list)   # values
    after: list = field(default_factory=list)
    verdict: str = ''
    change: float = None    # relative change of the mean, after against before
    worse: float = None     # the change in the direction that is worse (positive: slower)
    noise: float = None     # the spread the change is judged against, relative (see judge)
    noise_of: str = ''      # 'both' sides pooled, or the one side ('before', 'after') that has it
    failed_after: int = 0   # test case runs after that ended without a value

    @property
    def mean_before(self):
        return statistics.fmean(self.before) if self.before else None

    @property
    def mean_after(self):
        return statistics.fmean(self.after) if self.after else None


def relative_noise(before, after):
    """Standard deviation of the repetitions about their side's mean, both sides pooled,
    relative to the before mean."""
    dof = len(before) + len(after) - 2
    squares = sum((v - statistics.fmean(side)) ** 2 for side in (before, after) for v in side)
    return math.sqrt(squares / dof) / statistics.fmean(before)


def one_sided_noise(spread_side, other, mean_before):
    """The spread of the change when only one side has repetitions for a standard deviation:
    that side's standard deviation s (n values), as far as a mean of the other side's m values
    is expected to fall from its mean, s * sqrt(1/m + 1/n), relative to the before mean."""
    n, m = len(spread_side), len(other)
    return statistics.stdev(spread_side) * math.sqrt(1 / m + 1 / n) / mean_before


def judge(comparison, rule):
    """The verdict on one comparison. Means, not medians: the noise is the spread about the means,
    and one stray repetition moves a mean by less than it widens that spread (1/n against about
    1/sqrt(n) of its distance), so it cannot make a regression on its own; a median of few
    repetitions can jump by more than the spread when they fall into two groups (busy, idle).
    With too few repetitions on one side, the spread is the other side's (one_sided_noise); with
    too few on both, a change worse than the threshold fails as TOO_FEW_WORSE."""
    c = comparison
    if not c.after:
        c.verdict = ONLY_BEFORE
        return c
    if not c.before:
        c.verdict = ONLY_AFTER
        return c
    c.change = c.mean_after / c.mean_before - 1
    c.worse = -c.change if higher_is_better(c.unit) else c.change
    enough = [name for name, side in (('before', c.before), ('after', c.after))
              if len(side) >= rule.min_repeats]
    if len(enough) == 2:
        c.noise, c.noise_of = relative_noise(c.before, c.after), 'both'
    elif enough == ['before']:
        c.noise, c.noise_of = one_sided_noise(c.before, c.after, c.mean_before), 'before'
    elif enough == ['after']:
        c.noise, c.noise_of = one_sided_noise(c.after, c.before, c.mean_before), 'after'
    else:
        c.verdict = TOO_FEW_WORSE if c.worse > rule.threshold else TOO_FEW
        return c
    beyond = abs(c.change) > rule.threshold
    if beyond and abs(c.change) > rule.noise_factor * c.noise:
        c.verdict = REGRESSION if c.worse > 0 else IMPROVED
    else:
        c.verdict = WITHIN_NOISE if beyond else UNCHANGED
    return c


def compare(before, after, rule=Rule()):
    """One judged Comparison per test, settings and performance variable of either selection:
    runs of other settings (epochs, model, batch size...) are never compared, and values whose
    settings were not recorded (settings '') are a group of their own. Samples without a value
    (test cases that failed before their performance stage) only tell that the test ran."""
    table = {}
    for side, samples in (('before', before), ('after', after)):
        for s in samples:
            entry = table.setdefault(s.key, Comparison(s.key, s.unit, s.image, s.num_nodes))
            if s.value is not None:
                getattr(entry, side).append(s.value)
            elif side == 'after':
                entry.failed_after += 1
    judged = [judge(table[key], rule) for key in sorted(table) if table[key].before or table[key].after]
    settings_after = {test_of(c.key) for c in judged if c.after}
    tests_after = {c.key[:2] for c in judged if c.after}
    tests_compared = {c.key[:2] for c in judged if c.before and c.after}
    for c in judged:
        if c.verdict != ONLY_BEFORE or test_of(c.key) in settings_after:
            continue
        # it ran after in these settings and failed; else, a group of settings that did not run
        # after is a stray one (a smoke run in the baseline's period) where the test was
        # compared in other settings, and where it was compared in none, nothing says the test
        # is as fast as before
        if c.failed_after or c.key[:2] not in tests_compared:
            c.verdict = OTHER_SETTINGS if not c.failed_after and c.key[:2] in tests_after \
                else NO_RESULT
    return judged


def test_of(key):
    """(partition, name, settings) of a sample's or comparison's key."""
    partition, name, _, settings = key
    return partition, name, settings


def test_of_sample(sample):
    return test_of(sample.key)


def parse_fraction(text, option):
    """A fraction as a person types it: '5%' or '0.05'; an InputError for anything else,
    a bare number of 1 or more included (is '5' meant as 5 % or as 500 %?)."""
    text = str(text).strip()
    percent = text.endswith('%')
    try:
        value = float(text.removesuffix('%'))
    except ValueError:
        value = math.nan
    if percent:
        value /= 100
    if not 0 < value < 1:
        raise InputError(f'{option} {text}: expected a fraction between 0 and 1 (0.05) or a '
                         'percentage (5%)')
    return value


def group(samples, by):
    """{by(sample): [samples]} in sample order."""
    groups = defaultdict(list)
    for s in samples:
        groups[by(s)].append(s)
    return dict(groups)


def slug(text):
    return re.sub(r'[^A-Za-z0-9.]+', '-', text).strip('-')
