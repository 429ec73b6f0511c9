"""Perf logs: finding ReFrame's perf log files (rotated ones included) and reading their lines,
by the header's column names, into Samples.
"""

import math
import os
import re
from datetime import datetime

from mlcheck.errors import InputError
from mlcheck.history.samples import Sample, recorded

# perf log columns (by header name) that every sample needs
PERFLOG_REQUIRED = ('job_completion_time', 'system:partition', 'name', 'image', 'num_nodes',
                    'perf_var', 'perf_value', 'perf_unit')


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
            settings=recorded(row.get('run_settings')), stack=recorded(row.get('software_stack'))))
    return samples


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
