"""bin/simslurm fault (mlcheck/simulated/fault_command.py), without root or a cluster: its bad
arguments are one line each, refused before anything is touched, and a fault is in place while
its command runs and undone after, whatever the command's exit status."""

import contextlib
import os
import subprocess

import pytest

from conftest import REPO
from mlcheck.simulated import fault_command, faults


def simslurm(tmp_path, *args):
    (tmp_path / 'nodes').write_text('4\n')       # what `SIMSLURM_NODES=4 bin/simslurm up` records
    return subprocess.run([os.path.join(REPO, 'bin', 'simslurm'), 'fault', *args], text=True,
                          capture_output=True, timeout=60,
                          env={'PATH': os.environ['PATH'], 'SIMSLURM_DIR': str(tmp_path)})


@pytest.mark.parametrize('args, says', [
    ([], "unknown kind ''; use one of: cpu hide file link"),
    (['slow', 'nid002'], "unknown kind 'slow'"),
    (['cpu', 'nid005', '0.5'], "fault cpu: no node 'nid005' in the running simulated cluster "
                               '(nid001, nid002, nid003, nid004)'),
    (['cpu', 'nid002'], 'fault cpu: expected NODE SHARE, got 1 argument(s)'),
    (['cpu', 'nid002', 'half'], "fault: SHARE 'half': expected a number above 0"),
    (['cpu', 'nid002', '-1'], "fault: SHARE '-1': expected a number above 0"),
    (['link', 'nid001', 'nid001', '500'], 'a link joins two nodes, not nid001 to itself'),
    (['hide', 'nid001', 'var/data'], "fault hide: PATH 'var/data' must be an absolute path"),
    (['file', 'nid001', '/etc/hostname', '/no/such/file'], "fault file: COPY '/no/such/file': "
                                                          'No such file or directory')])
def test_a_bad_fault_is_one_line_naming_what(tmp_path, args, says):
    done = simslurm(tmp_path, *args, '--', 'touch', str(tmp_path / 'ran'))
    assert done.returncode == 1 and done.stdout == '' and says in done.stderr, done.stderr
    assert done.stderr.startswith('simslurm: error: fault') and done.stderr.count('\n') == 1
    assert not (tmp_path / 'ran').exists()


def test_the_help_says_how_to_watch_the_sweep_name_a_node(tmp_path):
    said = simslurm(tmp_path, '--help').stdout
    assert 'bin/simslurm fault cpu nid002 0.5 -- reframe' in said and 'mlcheck-nodes' in said


def test_the_fault_is_in_place_while_the_command_runs_and_undone_after(tmp_path, monkeypatch, capsys):
    (tmp_path / 'nodes').write_text('4\n')
    seen = []

    @contextlib.contextmanager
    def quota(node, share):
        seen.append(('in', node, share))
        yield
        seen.append(('out', node))
    monkeypatch.setattr(faults, 'cpu_quota', quota)
    monkeypatch.setattr(os, 'geteuid', lambda: 0)
    code = fault_command.cmd_fault(['cpu', 'nid002', '0.5', '--', 'sh', '-c', 'exit 3'],
                                   {'SIMSLURM_DIR': str(tmp_path)})
    assert code == 3 and seen == [('in', 'nid002', 0.5), ('out', 'nid002')]
    out = capsys.readouterr().out
    assert 'fault in place: nid002 limited to 0.5 CPU' in out
    assert 'fault undone: nid002 limited to 0.5 CPU' in out
