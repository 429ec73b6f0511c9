"""Perf logs: finding ReFrame's perf log files (rotated ones included) and reading their lines,
by the header's column names, into Samples.
"""

import math
import os
import re
import stat
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


# a header longer than this is no perf log's (this suite's is some 250 characters)
MAX_HEADER_BYTES = 64 << 10


def _has_sample_columns(path):
    """Whether the first line of `path` names every column a sample needs, read without reading
    the rest of the file (a rotated log is as large as any)."""
    from mlcheck.files import NotRegular, read_start
    try:
        header = read_start(path, MAX_HEADER_BYTES).decode(errors='replace')
    except (NotRegular, OSError):
        return False
    columns = header.split('\n', 1)[0].split('|') if '\n' in header else []
    return all(column in columns for column in PERFLOG_REQUIRED)


# a perf log larger than this is not read (a year of a busy site's logs is some hundred MB)
MAX_PERFLOG_BYTES = 4 << 30

# the bytes one selection's perf logs may hold in all (issue 48, B6): a record of this suite is
# 200-350 bytes (ReFrame 4.10.4, with its settings; a software stack adds some hundred), so 1 KiB
# each, 1,000 records a night (every partition, image and node count) for ten years is 3.7 GB:
# no site's logs reach 4 GiB, and reading that many takes minutes (22 MB/s on a 2-core machine)
# and three times as much memory, which a report must not cost because of one colleague's files
PERFLOG_BUDGET_BYTES = 4 << 30


class OverBudget(InputError):
    """A selection's perf logs hold more than PERFLOG_BUDGET_BYTES: refused, nothing judged."""

    def __init__(self, path, held):
        super().__init__(
            f'perf logs {visible(path)} hold {held:,} bytes, more than the budget of '
            f'{PERFLOG_BUDGET_BYTES:,} one selection reads (PERFLOG_BUDGET_BYTES): none judged; '
            'give a subfolder (<system>/<partition>, or one check\'s log) or move old logs aside '
            '(@START:END still reads every file)')


class _Budget:
    """The bytes a selection of perf logs at `path` may still read, all files together."""

    def __init__(self, path, files):
        self.path, self.left = path, PERFLOG_BUDGET_BYTES
        held = sum(map(_regular_size, files))      # before anything is read
        if held > self.left:
            raise OverBudget(path, held)

    def take(self, size):
        if size > self.left:
            raise OverBudget(self.path, PERFLOG_BUDGET_BYTES - self.left + size)
        self.left -= size


def _regular_size(path):
    """The bytes that reading `path` would take: its size if it is a regular file (not a link)
    that one perf log may be, else 0 (it is left out unread)."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_PERFLOG_BYTES else 0


def _read(path, budget=None):
    """The text of a perf log, read as src/pytorch/regular_file.py reads (no link followed, a
    FIFO not waited on, a device not read): an InputError naming it otherwise; its bytes taken
    from `budget` (OverBudget where they are more than it has left)."""
    from mlcheck.files import NotRegular, TooLarge, read_regular
    shown = visible(path)     # a file name may hold a newline that would start a forged line
    limit = MAX_PERFLOG_BYTES if budget is None else min(MAX_PERFLOG_BYTES, budget.left)
    try:
        content = read_regular(path, limit)
    except TooLarge as err:
        if err.size <= MAX_PERFLOG_BYTES:          # within a file's cap: past the budget
            budget.take(err.size)
        raise UnreadableFile(f'perf log {shown} is not read: {err}') from None
    except NotRegular as err:
        raise UnreadableFile(f'perf log {shown} is not read: {err}') from None
    except OSError as err:
        raise UnreadableFile(f'cannot read perf log {shown}: {err.strerror}') from None
    if budget is not None:
        budget.take(len(content))
    return content.decode(errors='replace')


def read_perflogs(path, period=None, with_failed=False, left_out=None):
    """The samples of the perf logs at `path` (perflog_files), read as read_perflog reads each.
    A file that cannot be read as a perf log is named on stderr and left out (one planted file,
    a FIFO or a link to /dev/zero, must not stop every report), unless it is the only one; the
    files together may hold PERFLOG_BUDGET_BYTES, checked before any is read (OverBudget)."""
    files = perflog_files(path)
    budget = _Budget(path, files)
    samples = []
    for file in files:
        try:
            samples += read_perflog(file, period, with_failed, left_out, budget)
        except UnreadableFile as err:
            if len(files) == 1:
                raise
            print(f'{err}; its file left out', file=sys.stderr)
    return samples


class UnreadableFile(InputError):
    """A file that cannot be read as a perf log (not a regular file; empty, of a foreign header,
    a database): in a directory, named and left out (one planted file must not stop every
    report); given alone, refused."""


class BadLine(ValueError):
    """A perf log line that cannot be read: left out, named by its file:line."""


def read_perflog(path, period=None, with_failed=False, left_out=None, budget=None):
    """The samples of one perf log, read by its header. A test case that failed before its
    performance stage has its lines, with the value null (ReFrame 4.10.4, perflog_multiline);
    they are kept with the value None if `with_failed`, else skipped.

    A line that repeats the header (two sessions that started the log at once) is skipped. A line
    that cannot be read (a value holding '|', a line cut short) is named on stderr and left out,
    (file:line, the node it names or None, why) appended to `left_out`: one such line must not
    hide the rest of the log, nor make its node look healthy (mlcheck-nodes judges it not).
    `budget`: the _Budget of the selection its bytes are taken from."""
    # at newlines only, read as bytes: str.splitlines() also splits at \x1c-\x1e, \x85, \u2028
    # ..., and a text stream turns \r into a newline (issue 48)
    lines = _read(path, budget).split('\n')
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
                left_out.append((f'{shown}:{number}', _node_named(columns, line), str(err),
                                 _time_read(columns, line)))
            continue
        if sample:
            samples.append(sample)
    return samples


def _node_named(columns, line):
    """The one node an unreadable line names (its %.nid=, else its job_nodelist), None where it
    names none or not one host name, or its %.nid and its one-node job_nodelist disagree (which
    ran where is unknown)."""
    values = line.split('|')
    row = dict(zip(columns, values)) if len(values) == len(columns) else {}
    nid = NODE_PARAMETER.search(line)
    listed = row.get('job_nodelist', '')
    node = nid.group(1) if nid else listed
    if nid and HOST_NAME.fullmatch(listed) and listed != node:
        return None
    return node if HOST_NAME.fullmatch(node) else None


def _time_read(columns, line):
    """An unreadable line's completion time where that field reads, else None (mlcheck-nodes:
    a line of an earlier sweep is history; one of no known time may be of the latest)."""
    values = line.split('|')
    if len(values) != len(columns):
        return None
    try:
        return _timestamp(dict(zip(columns, values))['job_completion_time'])
    except BadLine:
        return None


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
