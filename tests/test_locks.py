"""Issue 48 item 6: a lock that any user who can read it can hold makes every writer wait for
ever. The locks of bin/simslurm up/down and of mlcheck-baseline are files only their owners (and
the baseline's group) can open, and a wait ends with one line naming the lock. Failed on 42e5ead
(the files were 0644: another user held them with flock)."""

import os
import shutil
import subprocess
import tempfile

import pytest

from mlcheck.commands import baseline
from mlcheck.simulated import simslurm


@pytest.fixture
def open_folder():
    """A folder any user can reach (pytest's own is root's alone)."""
    folder = tempfile.mkdtemp(prefix='mlcheck-locks-')
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


def held_by_nobody(path):
    """Whether the user nobody can open `path` and flock it."""
    return subprocess.run(['runuser', '-u', 'nobody', '--', 'flock', '-n', path, 'true'],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root: another user tries the lock')
def test_another_user_cannot_hold_the_locks(open_folder):
    path = os.path.join(open_folder, 'simslurm.lock')
    os.close(simslurm.take_lock(path))
    from mlcheck.files import Directory
    with baseline.locked(Directory(open_folder), 'sim.yaml'):
        pass
    assert not held_by_nobody(path)
    assert not held_by_nobody(os.path.join(open_folder, '.sim.yaml.lock'))
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.join(open_folder, '.sim.yaml.lock')).st_mode & 0o777 == 0o660


def test_the_perf_log_lock_is_the_log_writers_alone():
    """ReFrame takes it (its wait has no deadline we can set): mode 0660, not 0664."""
    from mlcheck.harness.config import logging_config
    assert logging_config('/nonexistent/prefix')[0]['handlers_perflog'][0]['locking_file_mode'] == '660'
