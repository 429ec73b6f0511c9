"""Scaling efficiency: throughput per device at N nodes over that at one node, same image and
same settings (model, batch size, epochs...: the check's figure_settings).

The one-node figure comes from this session when its one-node test has already finished, or
else from ReFrame's results storage (the latest passing one-node run of the same check, image,
partition and settings), when storage is enabled.
"""

import time

from reframe.core.logging import getlogger

from mlcheck.history.database import session_stores_results, session_testcases

# this session's figures: (partition, check, image, settings, num_nodes) -> value
_session = {}
STORED_WINDOW_DAYS = 90


def _key(test, num_nodes):
    return (test.current_partition.fullname, type(test).__name__, test.image, test.run_settings,
            num_nodes)


def record(test, value):
    _session[_key(test, test.num_nodes)] = value


def one_node_baseline(test, perf_var):
    """(value, where it came from) of `perf_var` for the one-node run of `test`, or None."""
    value = _session.get(_key(test, 1))
    if value is not None:
        return value, 'this session'
    stored = _latest_stored(test, perf_var)
    if stored is not None:
        return stored, 'stored results'
    return None


def _latest_stored(test, perf_var):
    if not session_stores_results():
        return None
    now = time.time()
    part = test.current_partition
    test_filter = (f'num_nodes == 1 and image == {test.image!r} and result == "pass" and '
                   f'system == {part.fullname.split(":")[0]!r} and partition == {part.name!r}')
    try:
        cases = session_testcases((now - STORED_WINDOW_DAYS * 86400, now), f'^{type(test).__name__}',
                                  test_filter)
    except Exception as err:   # an unreadable database must not fail the measurement itself
        getlogger().warning(f'scaling efficiency: could not read stored results: {err}')
        return None
    for case in reversed(cases):
        if not like(case, test):
            continue
        entry = case.get('perfvalues', {}).get(f'{part.fullname}:{perf_var}')
        if entry:
            return entry[0]
    return None


def like(case, test):
    """Whether a stored test case ran with the test's settings (one stored before settings
    were recorded has none, and is not taken)."""
    return case.get('run_settings', '') == test.run_settings
