"""mlcheck.harness.reframe_api: each use of ReFrame's internals, tested against the installed
ReFrame, so that an upgrade that moves one fails here, in one place."""

import json
import pathlib
import re

import pytest

from conftest import REPO
from mlcheck.harness import knob_table, reframe_api

# (`_rfm_gpu`, the resource that num_gpus_per_node fills, is ReFrame's documented configuration)
PRIVATE = re.compile(r'__rfm_\w+|\b_rfm_(?!gpu\b)\w+|reframe\.frontend|init_runtime|StorageBackend|QuerySelector')


def test_a_value_shown_in_json_is_what_reframe_encodes():
    from reframe.utility.jsonext import dumps

    class Default(reframe_api.ShownInJSON):
        def shown_in_json(self):
            return 42
    assert json.loads(dumps({'knob': Default()})) == {'knob': 42}


def test_an_expected_sanity_failure_is_what_reframe_asks():
    class Known(reframe_api.ExpectedSanityFailure):
        def sanity_failure_expected(self):
            return True, 'known bad image'
    assert Known().__rfm_xfail_sanity__() == (True, 'known bad image')
    assert reframe_api.ExpectedSanityFailure().__rfm_xfail_sanity__() == (False, '')


def test_periods():
    start, end = reframe_api.time_period('20261101:20261102')
    assert end - start == 86400
    week = reframe_api.time_period('now-1w:now')
    assert week[1] - week[0] == pytest.approx(7 * 86400, abs=1)
    with pytest.raises(Exception):
        reframe_api.time_period('not a period')


def test_stored_testcases_are_read_through_reframes_storage():
    """The classes it uses are where this ReFrame has them; the reading itself runs inside a
    session, on stored results of the simulated cluster (tests/test_end_to_end_sim.py,
    test_scaling_efficiency_only_from_a_stored_one_node_run_of_the_same_settings)."""
    from reframe.frontend.reporting import storage, utility
    assert callable(storage.StorageBackend.default) and callable(utility.QuerySelectorTestcase)
    assert 'fetch_testcases' in dir(storage.StorageBackend)


def test_a_runtime_for_loading_check_classes():
    rt = reframe_api.runtime_for(str(pathlib.Path(REPO, 'config', 'simulated.py')), 'sim')
    assert rt.system.name


def test_performance_variables_of_a_check_class():
    mnist = next(c for c in knob_table.check_classes() if c.__name__ == 'MNISTDistributedCheck')
    assert {'samples_per_s', 'train_time', 'peak_host_memory'} <= reframe_api.performance_variables(mnist)


def test_no_other_module_names_reframes_internals():
    found = [f'{path.relative_to(REPO)}:{n}' for top in ('mlcheck', 'checks', 'config', 'bench')
             for path in pathlib.Path(REPO, top).rglob('*.py') if path.name != 'reframe_api.py'
             for n, line in enumerate(path.read_text().splitlines(), 1) if PRIVATE.search(line)]
    assert found == []


def test_the_checks_answer_reframes_xfail_question_themselves():
    """ReFrame's RegressionTest has its own __rfm_xfail_sanity__: the mixin must come first in a
    check's bases, or a known-bad image's failure is no longer reported as expected."""
    from mlcheck.harness.launch_check import DistributedLaunchCheck
    assert DistributedLaunchCheck.__rfm_xfail_sanity__ is reframe_api.ExpectedSanityFailure.__rfm_xfail_sanity__


def test_S_assignments_are_read_as_reframe_reads_them():
    argv = ['reframe', '-c', 'checks/', '-S', 'epoch=2', '--setvar=MNISTDistributedCheck.epochs=4',
            '-n', 'MNIST', '-Sbatch_size=8', '-r']
    assert reframe_api.command_line_variables(argv) == [
        (None, 'epoch', '2'), ('MNISTDistributedCheck', 'epochs', '4'), (None, 'batch_size', '8')]


def test_the_checks_variables_are_what_S_sets():
    mnist = next(c for c in knob_table.check_classes() if c.__name__ == 'MNISTDistributedCheck')
    assert {'epochs', 'batch_size', 'throttle', 'data_dir', 'time_limit'} <= reframe_api.variable_names(mnist)


def test_a_stop_from_a_hook_is_one_reframe_ends_the_session_with():
    from reframe.frontend.executors import ABORT_REASONS
    with pytest.raises(ABORT_REASONS, match='^mlcheck: why$'):
        reframe_api.stop_session('mlcheck: why')


def test_the_database_lock_checked_is_the_one_reframe_takes():
    """The lock's name and place as ReFrame 4.10.4 opens it (reframe.frontend.reporting.storage)."""
    import inspect
    from reframe.frontend.reporting import storage
    assert "os.path.join(os.path.dirname(self.__db_file), '.db.lock')" in inspect.getsource(storage)
    assert reframe_api.database_lock('/x/y/results.db') == '/x/y/.db.lock'
