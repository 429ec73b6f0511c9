"""Every use of ReFrame's internals, in one place: names ReFrame does not document as its API
(reframe-hpc 4.10.4), each behind one function or class here with a test of its own
(tests/test_reframe_api.py), so that the next ReFrame (its run-report schema 5.0 is in an open
pull request) is this file's change. No other module of mlcheck names them (a test holds that).
"""

import argparse
import os


def database_lock(db_file):
    """The lock ReFrame takes to read or store sessions of the results database `db_file`:
    `.db.lock` beside it (reframe.frontend.reporting.storage.SQLiteStorage, an
    osext.ReadWriteFileLock made with the database's mode)."""
    return os.path.join(os.path.dirname(db_file), '.db.lock')


def _reporting():
    # imported when first asked: mlcheck-report reads perf logs where ReFrame is not installed
    from reframe.frontend.reporting import utility
    return utility


class ShownInJSON:
    """A value ReFrame shows in its JSON (--describe, reports) as `shown_in_json()` returns."""

    def shown_in_json(self):
        raise NotImplementedError

    def __rfm_json_encode__(self):      # the protocol ReFrame's JSON encoder calls
        return self.shown_in_json()


class ExpectedSanityFailure:
    """A test whose sanity failure may be expected per instance (ReFrame's @rfm.xfail is per
    class): ReFrame asks `__rfm_xfail_sanity__`, which asks `sanity_failure_expected()`."""

    def sanity_failure_expected(self):
        """(expected, reason)."""
        return False, ''

    def __rfm_xfail_sanity__(self):
        return self.sanity_failure_expected()


def time_period(text):
    """(start, end) in Unix seconds of a ReFrame period such as `now-1w:now`; raises on a bad one."""
    return _reporting().parse_time_period(text)


def stored_testcases(period, name_pattern, test_filter):
    """The test cases of the running session's results storage completed in `period` (start, end),
    with a name matching `name_pattern` and for which `test_filter` holds."""
    from reframe.frontend.reporting.storage import StorageBackend
    return StorageBackend.default().fetch_testcases(
        _reporting().QuerySelectorTestcase(time_period=period), name_pattern, test_filter)


def runtime_for(config_path, system):
    """ReFrame's runtime, initialised from `config_path` for `system` where none is running (to
    load check classes outside a session)."""
    from reframe.core import config, runtime
    try:
        return runtime.runtime()
    except BaseException:       # ReFrame's "no runtime" error is no Exception
        site = config.load_config(config_path)
        site.select_subconfig(system)
        runtime.init_runtime(site)
        return runtime.runtime()


def performance_variables(check_class):
    """The names of a check class's @performance_functions."""
    return set(check_class._rfm_perf_fns)


def variable_names(check_class):
    """The names of a check class's ReFrame variables (what -S can set)."""
    return set(check_class._rfm_var_space)


def command_line_variables(argv):
    """[(test or None, name, text)] of the -S/--setvar assignments on ReFrame's command line `argv`
    (sys.argv), as ReFrame reads them: `[TEST.]NAME=VALUE`; ReFrame keeps no other record of them."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument('-S', '--setvar', action='append', default=[])
    assignments = []
    for expr in parser.parse_known_args(argv[1:])[0].setvar:
        name, equals, text = expr.partition('=')
        if not equals:
            continue        # ReFrame skips it, with a warning of its own
        test, dot, var = name.partition('.')
        assignments.append((test, var, text) if dot else (None, name, text))
    return assignments


def stop_session(message):
    """End the ReFrame session from a test's hook, printing `message` as its one error line."""
    from reframe.core.exceptions import ForceExitError
    raise ForceExitError(message)
