"""Issue 48, items 2 and 5: bin/simslurm trusts no process a pid file or an environment variable
names, and no state directory it has not claimed. A daemon is ours only when root runs it from
the slurmd (slurmctld, slurmdbd) binary; a restarted slurmd is rebuilt from the cluster's own
settings; every subcommand claims SIMSLURM_DIR as `up` does; the partition's weight goes to
root's own daemons and only root and the invoking user's group may submit to it, for a limited
time; `down` removes the cluster's cgroup. Root, no cluster: real processes of this test's own
(a `sleep` that calls itself slurmd), directories of its own. Each test failed on 42e5ead."""

import os
import re
import subprocess
import threading

import pytest

from mlcheck import REPO
from mlcheck.simulated import cluster, faults, install, processes, simslurm
from mlcheck.simulated.processes import Failure, Sim

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason='needs root: processes and folders of root and of others')


@pytest.fixture
def state(tmp_path):
    """A claimed state directory (root's alone) with a pid file for nid001 in it."""
    directory = tmp_path / 'simslurm'
    (directory / 'run').mkdir(parents=True)
    directory.chmod(0o755)
    return directory


CALLED_SLURMD = ('import ctypes, time; ctypes.CDLL(None).prctl(15, b"slurmd", 0, 0, 0); '   # PR_SET_NAME
                 'print(flush=True); time.sleep(60)')


def impostor(state, user=None):
    """A process called slurmd (its comm set by prctl) with the state directory in its
    environment, named by nid001's pid file: what any local user can start (`user`), or a
    process of root's that is not the slurmd binary."""
    command = ['runuser', '-u', user, '--'] if user else []
    proc = subprocess.Popen([*command, 'env', '-i', f'SIMSLURM_DIR={state}', '/usr/bin/python3', '-c', CALLED_SLURMD,
                             '-N', 'nid001'], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()      # named by now
    pid = int(subprocess.run(['pgrep', '-P', str(proc.pid), '-x', 'slurmd'], capture_output=True, text=True).stdout
              or proc.pid) if user else proc.pid
    threading.Thread(target=proc.wait, daemon=True).start()
    assert open(f'/proc/{pid}/comm').read() == 'slurmd\n'
    (state / 'run' / 'slurmd-nid001.pid').write_text(f'{pid}\n')
    return proc, pid


@needs_root
@pytest.mark.parametrize('user', [None, 'nobody'], ids=['root-not-the-binary', 'another-user'])
def test_a_process_that_calls_itself_slurmd_is_not_ours(state, monkeypatch, user):
    proc, pid = impostor(state, user)
    try:
        sim = Sim(cluster.settings_from_env({'SIMSLURM_DIR': str(state)}))
        assert sim.daemon_pid('slurmd', 'nid001') is None and pid not in sim.our_pids('slurmd')
        # the fault's restart would have re-run its command line and environment as root
        monkeypatch.setenv('SIMSLURM_DIR', str(state))
        with pytest.raises(RuntimeError, match='no slurmd running for nid001'):
            faults.slurmd_pid('nid001')
        # and `up` on a healthy cluster gave the cluster's weight to whatever our_pids found
        weighed = []
        monkeypatch.setattr(simslurm, 'give_the_cores_to', weighed.append)
        monkeypatch.setattr(simslurm, 'print_status', lambda sim: True)
        simslurm.already_up(sim)
        assert pid not in weighed
    finally:
        os.kill(pid, 9)


def test_a_restarted_slurmd_is_rebuilt_from_the_clusters_settings(tmp_path, monkeypatch):
    """Not from /proc/<old>/cmdline and environ, which a planted pid file would choose."""
    sim = Sim(cluster.settings_from_env({'SIMSLURM_DIR': str(tmp_path)}))
    ran = []
    monkeypatch.setattr(faults, 'cluster', lambda environ=None: sim)
    monkeypatch.setattr(faults, '_cpu_home_of', lambda pid: None)
    monkeypatch.setattr(faults.os, 'kill', lambda pid, signal: None)
    monkeypatch.setattr(sim, 'daemon_pid', lambda name, node='', pidfile_only=False: 7 if pidfile_only else None)
    monkeypatch.setattr(faults, '_responding', lambda node: True)
    monkeypatch.setattr(faults, '_wait', lambda condition, what: condition() or pytest.fail(what))
    monkeypatch.setattr(faults.subprocess, 'run', lambda command, **kw: ran.append((command, kw['env'])))
    monkeypatch.setattr(faults.os.path, 'exists', lambda path: False)
    assert faults._restart_slurmd('nid001', 999999999, ['unshare', '--mount']) == 7
    assert ran == [(['unshare', '--mount', *sim.daemon_env(), 'slurmd', '-N', 'nid001'],
                    {'PATH': processes.DAEMON_PATH})]


@needs_root
@pytest.mark.parametrize('argv', [['status'], ['fault', 'cpu', 'nid001', '0.5', '--', 'true']])
def test_every_subcommand_claims_the_state_directory(state, argv):
    """A SIMSLURM_DIR another user owns: `up` refused it, `status` and `fault` read and acted
    on it (fault would have moved the process its pid file names into a cgroup as root)."""
    (state / 'nodes').write_text('2\n')
    os.chown(state, 65534, 65534)
    done = subprocess.run([os.path.join(REPO, 'bin', 'simslurm'), *argv], capture_output=True, text=True,
                          timeout=60, env={'PATH': os.environ['PATH'], 'SIMSLURM_DIR': str(state)})
    assert done.returncode == 1 and done.stderr.count('\n') == 1, done.stderr
    assert f'{state} is owned by uid 65534, not root: SIMSLURM_DIR={state} is not root' in done.stderr


@needs_root
def test_down_claims_the_state_directory(state, monkeypatch):
    os.chown(state, 65534, 65534)
    monkeypatch.setattr(simslurm, 'take_lock', lambda: None)
    monkeypatch.setattr(simslurm, 'remove_partition_cgroup', lambda: None)
    with pytest.raises(Failure, match='is owned by uid 65534, not root'):
        simslurm.cmd_down(Sim(cluster.settings_from_env({'SIMSLURM_DIR': str(state)})))


@needs_root
def test_the_checked_path_is_the_used_path(tmp_path):
    """Item 10: a folder above SIMSLURM_DIR that is a link is resolved once; the cluster uses the
    real path that was checked, not the link a co-owner of its folder could swap."""
    (tmp_path / 'real' / 'simslurm').mkdir(parents=True)
    (tmp_path / 'via').symlink_to(tmp_path / 'real')
    sim = Sim(cluster.settings_from_env({'SIMSLURM_DIR': str(tmp_path / 'via' / 'simslurm')}))
    assert install.claimed(sim).dir == str(tmp_path / 'real' / 'simslurm')


def test_the_partition_is_root_s_and_the_invoking_group_s_for_a_limited_time(monkeypatch):
    """Root and the invoking user's private group only (issue 48's security red-team, U5 and its
    re-check): a group another account has too (a site's users, every account's), or one not
    named as the user (an LDAP login node lists no one's primary group), is not admitted."""
    import pwd
    accounts = {'staff': pwd.struct_passwd(('staff', 'x', 1050, 50, '', '/', '/bin/sh')),
                'alice': pwd.struct_passwd(('alice', 'x', 1051, 50, '', '/', '/bin/sh'))}
    monkeypatch.setattr(pwd, 'getpwnam', accounts.__getitem__)
    monkeypatch.setattr(pwd, 'getpwall', lambda: [accounts['staff']])
    groups = lambda user: cluster.settings_from_env({'SUDO_GID': '50', 'SUDO_USER': user})['GROUPS']
    settings = cluster.settings_from_env({'SUDO_GID': '50', 'SUDO_USER': 'staff'})   # staff, on Debian
    assert settings['GROUPS'] == ('root', 'staff')
    assert cluster.settings_from_env({})['GROUPS'] == ('root',)
    assert groups('alice') == ('root',)          # gid 50 is not alice's private group
    monkeypatch.setattr(pwd, 'getpwall', lambda: [])     # an LDAP login node lists no account
    assert groups('alice') == ('root',) and groups('staff') == ('root', 'staff')
    monkeypatch.setattr(pwd, 'getpwall', lambda: [accounts['staff']])
    monkeypatch.setattr(pwd, 'getpwall', lambda: list(accounts.values()))
    assert groups('staff') == ('root',)          # alice has it too
    conf = cluster.slurm_conf(cluster.Settings(cpus=2, memory_mb=1024, db_password='x', groups=settings['GROUPS']))
    [line] = re.findall(r'^PartitionName=.*$', conf, re.M)
    assert 'AllowGroups=root,staff' in line.split() and f'MaxTime={cluster.MAX_TIME}' in line.split()
    assert cluster.MAX_TIME != 'INFINITE'


@needs_root
def test_down_of_a_state_directory_of_no_cluster_leaves_the_cgroup(tmp_path, monkeypatch):
    """Issue 48's second security red-team: `down` with a mistyped SIMSLURM_DIR removed the live
    cluster's cgroup, its hundred-fold CPU weight."""
    removed = []
    monkeypatch.setattr(simslurm, 'take_lock', lambda: None)
    monkeypatch.setattr(simslurm, 'remove_partition_cgroup', lambda: removed.append(True))
    simslurm.cmd_down(Sim(cluster.settings_from_env({'SIMSLURM_DIR': str(tmp_path / 'typo')})))
    assert removed == []


@needs_root
@pytest.mark.skipif(not os.access('/sys/fs/cgroup/cpu', os.W_OK), reason='needs the cgroup v1 cpu hierarchy')
def test_down_removes_the_clusters_cgroup(tmp_path, monkeypatch, state):
    """In a hierarchy of this test's own (a cgroup below the machine's cpu one): a process left
    in the cluster's cgroup goes back to the hierarchy's root, and the cgroup goes."""
    root = f'/sys/fs/cgroup/cpu/mlcheck-test-partition-{os.getpid()}'
    os.makedirs(root)
    mounts = tmp_path / 'mounts'
    mounts.write_text(f'cgroup {root} cgroup rw,cpu,cpuacct 0 0\n')
    sleeper = subprocess.Popen(['sleep', '60'])
    try:
        processes.give_the_cores_to(sleeper.pid, str(mounts))
        group = os.path.join(root, processes.PARTITION_CGROUP)
        assert processes.cgroup_procs(group) == [sleeper.pid]
        assert processes.remove_partition_cgroup(str(mounts)) == group
        assert not os.path.exists(group) and sleeper.pid in processes.cgroup_procs(root)
        removed = []
        monkeypatch.setattr(simslurm, 'take_lock', lambda: None)
        monkeypatch.setattr(simslurm, 'remove_partition_cgroup', lambda: removed.append(True))
        simslurm.cmd_down(Sim(cluster.settings_from_env({'SIMSLURM_DIR': str(state)})))
        assert removed == [True]
    finally:
        sleeper.kill()
        sleeper.wait()
        processes.empty_and_remove(root, '/sys/fs/cgroup/cpu')
