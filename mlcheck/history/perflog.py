"""Perf logs: finding ReFrame's perf log files (rotated ones included) and reading their lines,
by the header's column names, into Samples.
"""

import math
import os
import re
import sys
from datetime import datetime

from mlcheck.errors import InputError
from mlcheck.history.hostlist import HOST_NAME
from mlcheck.history.node_records import NODE_PARAMETER
from mlcheck.history.samples import Sample, recorded
from mlcheck.visible import visible

# perf log columns (by header name) that every sample needs
PERFLOG_REQUIRED = ('job_completion_time', 'system:partition', 'name', 'image', 'num_nodes',
                    'perf_var', 'perf_value', 'perf_unit')


def perflog_files(path):
    """The perf logs at `path`: the file, or every *.log below the directory, with the .log.hN
    files into which ReFrame moves a log when its header changes (when the settings and stack
    columns were added, say) if their header has every column a sample needs."""
    if os.path.isdir(path):
        below = sorted(_files_below(path))
        found = [f for f in below if f.endswith('.log')]
        if not found:
            raise InputError(f'no perf log (*.log) in directory {visible(path)}')
        rotated = [f for f in below if re.search(r'\.log\.h\d+$', os.path.basename(f))]
        return found + [f for f in rotated if _has_sample_columns(f)]
    if not os.path.exists(path):
        raise InputError(f'perf log not found: {visible(path)}')
    return [path]


# ReFrame writes <prefix>/<system>/<partition>/<check>.log: folders deeper than this below a perf
# log directory are not searched (1,500 nested ones overflowed os.walk's recursion, issue 48)
MAX_PERFLOG_DEPTH = 16


def _files_below(path):
    """The paths of everything but folders below the folder `path`, searched without recursion
    and without following a link; the folders deeper than MAX_PERFLOG_DEPTH, and those that
    cannot be listed, named on stderr and not searched."""
    found, too_deep, pending = [], [], [(path, 0)]
    while pending:
        folder, depth = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as err:
            print(f'perf log folder {visible(folder)} not searched: {err.strerror}', file=sys.stderr)
            continue
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                found.append(entry.path)
            elif depth < MAX_PERFLOG_DEPTH:
                pending.append((entry.path, depth + 1))
            else:
                too_deep.append(entry.path)
    if too_deep:
        print(f'perf log directory {visible(path)}: {len(too_deep)} folder(s) more than '
              f'{MAX_PERFLOG_DEPTH} levels down not searched (first: {visible(min(too_deep))[:200]})',
              file=sys.stderr)
    return found


def _has_sample_columns(path):
    try:
        header = _read(path).split('\n', 1)[0].split('|')
    except UnreadableFile:
        return False
    return all(column in header for column in PERFLOG_REQUIRED)


# a perf log larger than this is not read (a year of a busy site's logs is some hundred MB)
MAX_PERFLOG_BYTES = 4 << 30


def _read(path):
    """The text of a perf log, read as src/pytorch/regular_file.py reads (no link followed, a
    FIFO not waited on, a device not read): an InputError naming it otherwise."""
    from mlcheck.files import NotRegular, read_regular
    shown = visible(path)     # a file name may hold a newline that would start a forged line
    try:
        return read_regular(path, MAX_PERFLOG_BYTES).decode(errors='replace')
    except NotRegular as err:
        raise UnreadableFile(f'perf log {shown} is not read: {err}') from None
    except OSError as err:
        raise UnreadableFile(f'cannot read perf log {shown}: {err.strerror}') from None


class UnreadableFile(InputError):
    """A file that cannot be read as a perf log (not a regular file; empty, of a foreign header,
    a database): in a directory, named and left out (one planted file must not stop every
    report); given alone, refused."""


class BadLine(ValueError):
    """A perf log line that cannot be read: left out, named by its file:line."""


def read_perflog(path, period=None, with_failed=False, left_out=None):
    """The samples of one perf log, read by its header. A test case that failed before its
    performance stage has its lines, with the value null (ReFrame 4.10.4, perflog_multiline);
    they are kept with the value None if `with_failed`, else skipped.

    A line that repeats the header (two sessions that started the log at once) is skipped. A line
    that cannot be read (a value holding '|', a line cut short) is named on stderr and left out,
    (file:line, the node it names or None, why) appended to `left_out`: one such line must not
    hide the rest of the log, nor make its node look healthy (mlcheck-nodes judges it not)."""
    # at newlines only, read as bytes: str.splitlines() also splits at \x1c-\x1e, \x85, \u2028
    # ..., and a text stream turns \r into a newline (issue 48)
    lines = _read(path).split('\n')
    shown = visible(path)     # every message names the file escaped: its name is data too
    if lines[-1] == '':
        lines.pop()
    if not lines:
        raise UnreadableFile(f'perf log {shown} is empty (no header)')
    if lines[0].startswith('SQLite format 3'):
        raise UnreadableFile(f'{shown} is a database, not a perf log: give it with --db')
    columns = lines[0].split('|')
    missing = [c for c in PERFLOG_REQUIRED if c not in columns]
    if missing:
        raise UnreadableFile(f'perf log {shown} has an older or foreign header: no column '
                         f'{", ".join(missing)} (header: {lines[0][:100]!r})')
    samples = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip() or line == lines[0]:
            continue
        try:
            sample = _sample(columns, line.split('|'), period, with_failed, path)
        except BadLine as err:
            print(f'{shown}:{number}: {err}; line left out', file=sys.stderr)
            if left_out is not None:
                left_out.append((f'{shown}:{number}', _node_named(columns, line), str(err)))
            continue
        if sample:
            samples.append(sample)
    return samples


def _node_named(columns, line):
    """The one node an unreadable line names (its %.nid=, else its job_nodelist), None where it
    names none or not one host name."""
    values = line.split('|')
    row = dict(zip(columns, values)) if len(values) == len(columns) else {}
    nid = NODE_PARAMETER.search(line)
    node = nid.group(1) if nid else row.get('job_nodelist', '')
    return node if HOST_NAME.fullmatch(node) else None


def _sample(columns, values, period, with_failed, path):
    """The Sample of one line's `values`, None if it is not one to keep; BadLine if unreadable."""
    if len(values) != len(columns):
        raise BadLine(f'{len(values)} fields where the header has {len(columns)}')
    row = dict(zip(columns, values))
    value = _number(row['perf_value'])
    if value is None and not with_failed:
        return None               # a test that failed before its performance stage, or a dry run
    when = _timestamp(row['job_completion_time'])
    if period and not period[0] <= when < period[1]:
        return None
    return Sample(
        partition=row['system:partition'], name=row['name'], image=row['image'],
        num_nodes=_int(row['num_nodes'], 'num_nodes'),
        var=row['perf_var'], value=value, unit=row['perf_unit'], time=when,
        jobid=row.get('jobid', ''), nodelist=row.get('job_nodelist', ''),
        reference=tuple(_number(row.get(c)) for c in ('perf_ref', 'perf_lower_thres',
                                                       'perf_upper_thres')),
        result=row.get('perf_result', ''), source=path,
        settings=recorded(row.get('run_settings')), stack=recorded(row.get('software_stack')),
        machine_speed=_number(row.get('machine_speed')))


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
        raise BadLine(f'{where}: {text[:40]!r} is not a number') from None


def _timestamp(text):
    try:
        return datetime.fromisoformat(text).timestamp()   # without an offset: local time
    except ValueError:
        raise BadLine(f'bad completion time {text[:40]!r}') from None
