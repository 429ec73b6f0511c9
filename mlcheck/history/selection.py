"""Selections: the grammar of what the report and the baseline read (a session UUID, a period
START:END, 'latest', a perf log with an optional @START:END) and the samples each one holds.
"""

import os
import re
import sys
from dataclasses import dataclass


from mlcheck.errors import InputError
from mlcheck.harness.reframe_api import time_period
from mlcheck.history.database import SESSION_UUID, failure_line, samples_of_testcases
from mlcheck.history import hostlist
from mlcheck.history.perflog import read_perflogs
from mlcheck.visible import visible

LATEST = 'latest'
# the start of a session's UUID, as the report's tables and docs show it (8 characters or more)
SESSION_PREFIX = re.compile(r'[0-9a-f]{8}[0-9a-f-]*')
SELECTION_FORMS = """\
  SESSION-UUID      that session, from the results database (or its first 8 characters)
  START:END         every stored test case completed in that period, in ReFrame's syntax
                    (20261120, 20261120T0930, now-1d:now, ...)
  latest            the most recent stored session
  PATH[@START:END]  a perf log file, or a directory of them, optionally only a period
"""


@dataclass(frozen=True)
class Selection:
    spec: str
    kind: str             # 'session', 'period', 'latest' (results database) or 'perflog'
    path: str = ''        # perf log file or directory
    period: tuple = None  # (start, end) Unix seconds, of a period or a perf log's @START:END

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
    path, _, period = spec.partition('@')
    # a path first, without ReFrame's UUID test: perf logs are read where ReFrame may not be installed
    if os.sep in path or path.endswith('.log') or (os.path.exists(path) and not SESSION_PREFIX.fullmatch(spec)):
        if period:
            try:
                period = time_period(period)
            except ValueError as err:
                raise InputError(f'selection {spec!r}: {err}') from None
        return Selection(spec, 'perflog', path=path, period=period or None)
    if SESSION_UUID.fullmatch(spec):
        return Selection(spec, 'session')
    if '?' in spec:     # ReFrame's session filter: Python it would eval(), so never taken
        raise InputError(f'selection {spec!r}: a session filter (?FILTER) is not taken; give a '
                         f'session UUID, a period START:END, {LATEST!r} or a perf log path')
    try:
        return Selection(spec, 'period', period=time_period(spec))
    except ValueError as err:
        if SESSION_PREFIX.fullmatch(spec):
            return Selection(spec, 'session')       # resolved against the stored sessions
        raise InputError(f'selection {spec!r} is not a session UUID, a period START:END, '
                         f'{LATEST!r} or a perf log path ({err})') from None


class AllFailed(InputError):
    """A stored selection whose every test case failed before its performance stage (the image
    went missing at setup): no values, and the worst regression there is."""


def failed_before_any_value(cases):
    """'setup: <why>' of each stored test case that failed without performance values."""
    return [failure_line(case.get('fail_phase'), case.get('fail_reason')) or 'failed'
            for case in cases if case.get('result') == 'fail' or case.get('fail_phase')]


def load(selection, database=None, with_failed=False, left_out=None, budget=frozenset()):
    """The samples of a selection; an InputError when it holds none. With `with_failed` the
    test cases that ran without a value (value None) count too: a selection whose every test
    failed still names them, and only one that names no test case at all is an error.
    `left_out`: a list to which the perf log lines that cannot be read are appended (file:line,
    the node the line names or None, why). `budget`: the host names known to be the partition's,
    whose node lists the node-list budget keeps first (within_budget); None: the caller applies it."""
    if selection.stored:
        if database is None:
            raise InputError(f'selection {selection.spec!r} needs the results database')
        if selection.kind == 'latest':
            query = database.latest_session()
        elif selection.kind == 'session':
            query = database.session_uuid(selection.spec)     # a UUID, or its first characters
        else:
            query = selection.period
        cases = database.testcases(query)
        samples = samples_of_testcases(cases, with_failed, left_out)
        where = f'results database {visible(database.path)}'
        failures = failed_before_any_value(cases)
        if not samples and failures and with_failed:
            raise AllFailed(f'every test case of {selection.spec!r} failed before its figures '
                            f'({len(failures)}: {failures[0]})')
    else:
        left_out = [] if left_out is None else left_out
        samples = read_perflogs(selection.path, selection.period, with_failed, left_out)
        where = f'perf log {visible(selection.path)}'
        if left_out:
            print(f'{len(left_out)} unreadable perf log line(s) left out (named above)',
                  file=sys.stderr)
    if not samples:
        raise InputError(f'selection {selection.spec!r} holds no performance values ({where})')
    if budget is None:
        return samples
    label = f'selection {visible(selection.spec)!r} ({where})'
    kept, _ = within_budget(samples, label, budget, left_out)
    if not kept:
        raise InputError(f'{label}: every record left out by the node-list budget; none left')
    return kept


def within_budget(samples, label, known=frozenset(), left_out=None):
    """(kept, left out) of a selection's samples, those of the node lists hostlist.past_budget
    leaves out named on stderr and, each record's node where its list is one known host, in
    `left_out` (at, node, why, None): a node whose records went is not judged (the fourth
    security pass, G1)."""
    past = hostlist.past_budget((s.nodelist for s in samples if s.nodelist), known)
    if not past:
        return samples, []
    dropped = [s for s in samples if s.nodelist in past]
    longest = max(past, key=past.get)
    why = (f'{len(dropped)} record(s) of {len(past)} node list(s) naming {sum(past.values()):,} hosts left '
           f'out (the longest {visible(longest[:80])!r}, {past[longest]:,} hosts): the node lists of the records '
           f'together are past {hostlist.TOTAL_HOSTS:,} hosts, more than any real partition\'s runs; '
           'those naming a host outside the partition (or the other selection) go first, then the longest; '
           'their tests and nodes are not judged')
    print(f'{label}: {why}', file=sys.stderr)
    if left_out is not None:
        left_out.append((label, None, why, None))
        left_out += [(label, s.nodelist, 'left out by the node-list budget', None) for s in dropped
                     if s.nodelist in known]
    return [s for s in samples if s.nodelist not in past], dropped
