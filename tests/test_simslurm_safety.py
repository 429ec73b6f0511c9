"""The simulated cluster on a shared machine (issue 37): what a fault session killed before its
undo leaves behind, and bin/simslurm up removing it (mlcheck.simulated.faults.clear_leftovers);
SIGTERM running the undo; a SIMSLURM_DIR that someone else prepared refused; no file written or
handed over through a planted link. Root (and the cgroup v1 cpu hierarchy for the faults), but not
the cluster: each test works in cgroups, an nftables table and directories of its own, a fake /proc
and a stand-in slurmd, so it leaves a running cluster and its faults alone."""

import os
import pathlib
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading

import pytest

from mlcheck.simulated import faults
from test_simslurm_units import fake_process, sim_in, write_pidfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not os.access(faults.CPU_CGROUP, os.W_OK),
                                reason='needs root and a writable cgroup v1 cpu hierarchy')


@pytest.fixture
def cpu_root():
    """A cgroup of this test's own below the cpu hierarchy: the root of its fault cgroups."""
    root = os.path.join(faults.CPU_CGROUP, f'mlcheck-test-leftovers-{os.getpid()}')
    os.makedirs(root)
    yield root
    for name in os.listdir(root):
        if os.path.isdir(os.path.join(root, name)):
            faults.empty_and_remove(os.path.join(root, name), faults.CPU_CGROUP)
    faults.empty_and_remove(root, faults.CPU_CGROUP)


def sleeper():
    """A process of ours, reaped as soon as it ends (so that it counts as gone)."""
    proc = subprocess.Popen(['sleep', '60'])
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


@needs_root
def test_up_removes_fault_cgroups_the_link_table_and_a_hidden_path_slurmd(tmp_path, cpu_root):
    sim = sim_in(tmp_path)
    # a CPU-quota cgroup holding a process, as a killed session leaves it
    throttled = sleeper()
    cgroup = os.path.join(cpu_root, 'mlcheck-fault-nid001')
    os.mkdir(cgroup)
    faults._write(os.path.join(cgroup, 'cgroup.procs'), throttled.pid)
    # the link fault's nftables table
    table = f'mlcheck_test_links_{os.getpid()}'
    subprocess.run(['nft', 'add', 'table', 'inet', table], check=True)
    # nid002's slurmd in a mount namespace other than ours (hidden_path's restart)
    hidden = sleeper()
    fake_process(sim, hidden.pid, 'slurmd', ['slurmd', '-N', 'nid002'])
    write_pidfile(sim.path('SLURMD_PIDFILE', 'nid002'), hidden.pid)
    for pid, namespace in (('self', 'mnt:[4026531841]'), (hidden.pid, 'mnt:[4026532999]')):
        os.makedirs(f'{sim.proc}/{pid}/ns', exist_ok=True)
        os.symlink(namespace, f'{sim.proc}/{pid}/ns/mnt')
    try:
        removed = faults.clear_leftovers(sim, [cpu_root], table, proc=sim.proc)
        assert removed == [f'cgroup {cgroup}', f'nftables table inet {table}',
                           f'slurmd of nid002 in a mount namespace of its own (pid {hidden.pid})']
        assert not os.path.exists(cgroup) and throttled.poll() is None
        assert str(throttled.pid) in open(os.path.join(cpu_root, 'cgroup.procs')).read().split()
        assert subprocess.run(['nft', 'list', 'table', 'inet', table], capture_output=True).returncode != 0
        hidden.wait(5)
        # nothing left: a second `up` removes nothing
        assert faults.clear_leftovers(sim, [cpu_root], table, proc=sim.proc) == []
    finally:
        throttled.kill()
        hidden.kill()
        subprocess.run(['nft', 'delete', 'table', 'inet', table], capture_output=True)


@needs_root
def test_up_leaves_the_faults_of_a_live_session_alone(tmp_path, cpu_root):
    """Issue 48 item 10: a concurrent session's fault in place is not a leftover (on 42e5ead
    `up` removed it under that session's running jobs)."""
    sim = sim_in(tmp_path)
    cgroup = os.path.join(cpu_root, 'mlcheck-fault-nid001')
    os.mkdir(cgroup)
    fake_process(sim, 4242, 'python3', ['python3', '-m', 'pytest'])      # the session, alive
    os.makedirs(f'{sim.proc}/self/ns')
    os.symlink('mnt:[4026531841]', f'{sim.proc}/self/ns/mnt')
    os.makedirs(os.path.join(sim.path('RUN_DIR'), faults.SESSIONS))
    pathlib.Path(sim.path('RUN_DIR'), faults.SESSIONS, '4242').touch()
    assert faults.live_sessions(sim) == [4242]
    assert faults.clear_leftovers(sim, [cpu_root], f'mlcheck_test_links_{os.getpid()}', proc=sim.proc) == []
    assert os.path.isdir(cgroup)
    shutil.rmtree(os.path.join(sim.proc, '4242'))                        # it was killed
    assert faults.clear_leftovers(sim, [cpu_root], f'mlcheck_test_links_{os.getpid()}', proc=sim.proc) == \
        [f'cgroup {cgroup}']


@needs_root
def test_sigterm_in_a_fault_runs_its_undo(cpu_root):
    """CI's timeout sends SIGTERM: the CPU-quota cgroup is gone and the node's slurmd is back."""
    slurmd = sleeper()
    program = f'''
import sys, time
sys.path.insert(0, {REPO!r})
from mlcheck.simulated import faults
faults.CPU_CGROUP = {cpu_root!r}
faults.slurmd_pid = lambda node: {slurmd.pid}
faults.cpu_cgroup_of = lambda pid: {cpu_root!r}
with faults.cpu_quota('nid001', 0.5):
    print('in', flush=True)
    time.sleep(60)
'''
    session = subprocess.Popen([sys.executable, '-c', program], stdout=subprocess.PIPE, text=True)
    try:
        assert session.stdout.readline() == 'in\n'
        assert os.path.isdir(os.path.join(cpu_root, 'mlcheck-fault-nid001'))
        session.send_signal(signal.SIGTERM)
        assert session.wait(10) == 128 + signal.SIGTERM
        assert not os.path.exists(os.path.join(cpu_root, 'mlcheck-fault-nid001'))
        assert str(slurmd.pid) in open(os.path.join(cpu_root, 'cgroup.procs')).read().split()
    finally:
        session.kill()
        slurmd.kill()


# --- SIMSLURM_DIR: root's alone (issue 37 item 6)

@pytest.mark.skipif(os.geteuid() != 0, reason='needs root: the state directory is given to another user')
@pytest.mark.parametrize('prepare, problem', [
    (lambda d: (d.mkdir(), os.chown(d, 65534, 65534)), 'is owned by uid 65534, not root'),
    (lambda d: (d.mkdir(), d.chmod(0o777)), 'is writable by others (mode 777)'),
    (lambda d: (d.parent.joinpath('elsewhere').mkdir(), d.symlink_to(d.parent / 'elsewhere')),
     'is a symbolic link'),
])
def test_a_state_directory_someone_else_prepared_is_refused(tmp_path, prepare, problem):
    """A local user who made SIMSLURM_DIR (e.g. /var/tmp/simslurm) before root's first `up`, with links
    inside: root must neither write through it nor hand its files to munge and mysql."""
    from mlcheck.simulated import install
    from mlcheck.simulated.processes import Failure
    state = tmp_path / 'simslurm'
    prepare(state)
    with pytest.raises(Failure, match=re.escape(f'{state} {problem}: SIMSLURM_DIR={state} is not root')):
        install.claim_state_dir(str(state))


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root: the directories must be root-owned')
def test_a_state_directory_below_a_folder_others_can_change_is_refused(tmp_path):
    open_folder = tmp_path / 'shared'
    open_folder.mkdir()
    open_folder.chmod(0o777)                   # no sticky bit: anyone could rename simslurm away
    from mlcheck.simulated import install
    from mlcheck.simulated.processes import Failure
    with pytest.raises(Failure, match=re.escape(f'{open_folder} is writable by others')):
        install.claim_state_dir(str(open_folder / 'simslurm'))
    open_folder.chmod(0o1777)                  # as /var/tmp: others' files only
    install.claim_state_dir(str(open_folder / 'simslurm'))
    assert stat.S_IMODE((open_folder / 'simslurm').stat().st_mode) == 0o755


def test_files_are_never_written_or_given_away_through_a_planted_link(tmp_path):
    from mlcheck.simulated import database, install, processes
    victim = tmp_path / 'victim'
    victim.write_text('mine\n')
    state = tmp_path / 'sim'
    state.mkdir()
    (state / 'nodes.simslurm.tmp').symlink_to(victim)     # the scratch name of a replaced file
    processes.write_new(str(state / 'nodes'), '2\n')
    (state / 'mariadbd.log').symlink_to(victim)           # a log handed to the mysql user
    with pytest.raises(OSError):
        processes.own_file(str(state / 'mariadbd.log'), 'root')
    install.install_file('x\n', str(state / 'my.cnf'), 0o644)
    assert victim.read_text() == 'mine\n' and (state / 'nodes').read_text() == '2\n'
    assert not (state / 'nodes').is_symlink()


# --- the machine after the simulated cluster (issue 37 item 8)

@pytest.fixture
def machine(tmp_path, monkeypatch):
    """/etc/hosts, /etc/slurm and /dev of a machine under tmp_path, as `up` leaves them, with a
    hosts line and a gres.conf that are not ours."""
    from mlcheck.simulated import install
    etc = tmp_path / 'etc'
    (etc / 'slurm').mkdir(parents=True)
    for name in ('SLURM_CONF_PATH', 'SLURMDBD_CONF_PATH', 'GRES_CONF_PATH'):
        monkeypatch.setattr(install, name, str(etc / 'slurm' / os.path.basename(getattr(install, name))))
    hosts_file = etc / 'hosts'
    hosts_file.write_text('127.0.0.1 localhost\n10.1.2.3 nid001.site nid009\n')
    return tmp_path, hosts_file


def test_gres_conf_that_is_not_ours_is_not_overwritten(machine):
    from mlcheck.simulated import install
    from mlcheck.simulated.processes import Failure
    gres = pathlib.Path(install.GRES_CONF_PATH)
    gres.write_text('Name=gpu File=/dev/nvidia0\n')
    with pytest.raises(Failure, match=f'{gres} exists and was not written by simslurm'):
        install.check_config_is_ours()


def test_a_file_where_a_stand_in_device_goes_is_not_replaced(tmp_path):
    from mlcheck.simulated import install
    from mlcheck.simulated.processes import Failure
    theirs = tmp_path / 'fakegpu0'
    theirs.write_text('not a device\n')
    with pytest.raises(Failure, match=f'{theirs} exists and is not a character device'):
        install.ensure_gpu_devices([str(theirs)])
    assert theirs.read_text() == 'not a device\n'


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root: stand-in devices are character devices')
def test_purge_removes_what_up_added_and_nothing_else(machine, tmp_path):
    from mlcheck.simulated import hosts, install
    _, hosts_file = machine
    sim = sim_in(tmp_path)
    with open(hosts_file, 'a') as f:        # what ensure_hosts appends (without resolving here)
        f.write(''.join(f'127.0.0.1 {name}   {hosts.HOSTS_MARK}\n' for name in ('nid001', 'nid002')))
    ours = install.Config(sim, 2, 1024).files()
    for name in ('slurm.conf', 'slurmdbd.conf'):
        pathlib.Path(install.SLURM_CONF_PATH).with_name(name).write_text(ours[name])
    pathlib.Path(install.GRES_CONF_PATH).write_text('Name=gpu File=/dev/nvidia0\n')   # the site's
    devices = [str(tmp_path / 'fakegpu0'), str(tmp_path / 'fakegpu1'), str(tmp_path / 'other')]
    install.ensure_gpu_devices(devices[:2])
    os.mknod(devices[2], 0o600 | stat.S_IFCHR, os.makedev(1, 5))        # a /dev/zero: not ours
    removed = install.purge(sim, str(hosts_file), devices)
    assert removed == [f'2 line(s) of {hosts_file}', install.SLURM_CONF_PATH, install.SLURMDBD_CONF_PATH,
                       *devices[:2]]
    assert hosts_file.read_text() == '127.0.0.1 localhost\n10.1.2.3 nid001.site nid009\n'
    assert sorted(os.listdir(os.path.dirname(install.GRES_CONF_PATH))) == ['gres.conf']
    assert os.path.exists(devices[2])
    assert install.purge(sim, str(hosts_file), devices) == []      # twice: nothing more


@pytest.mark.skipif(os.geteuid() != 0, reason='bin/setup disables services only as root')
def test_setup_disables_the_packaged_daemons_and_says_so(tmp_path):
    """After a reboot the packaged slurmctld, slurmd, slurmdbd, mariadb and munge would start on
    the simulated cluster's config and `up` would fail: bin/setup disables them (a fake systemctl)."""
    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'systemctl').write_text(
        '#!/bin/sh\necho "$*" >>"$CALLS"\n'
        'if [ "$1" = is-enabled ]; then [ "$2" = slurmd ] && echo disabled || echo enabled; fi\n')
    (fake / 'systemctl').chmod(0o755)
    calls = tmp_path / 'calls'
    done = subprocess.run(['bash', '-c', 'source bin/setup && installed_now=(slurm-wlm slurmdbd mariadb-server munge) '
                                         '&& disable_packaged_services'], cwd=REPO,
                          capture_output=True, text=True,
                          env={**os.environ, 'PATH': f"{fake}:{os.environ['PATH']}", 'CALLS': str(calls)})
    assert done.returncode == 0, done.stderr
    disabled = [line.split()[-1] for line in calls.read_text().splitlines() if line.startswith('disable')]
    assert disabled == ['slurmctld', 'slurmdbd', 'mariadb', 'munge']
    assert done.stdout == ('setup: disabled the packaged services slurmctld slurmdbd mariadb munge at boot: '
                           'bin/simslurm runs its own daemons, and these would start on its config\n')


@pytest.mark.skipif(os.geteuid() != 0, reason='bin/setup disables services only as root')
def test_setup_leaves_the_services_of_packages_it_did_not_install(tmp_path):
    """Issue 48 item 10 (on 42e5ead it disabled a MariaDB and munge the machine had enabled before):
    only the services of the packages this run installed (here Slurm's) are disabled."""
    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'systemctl').write_text('#!/bin/sh\necho "$*" >>"$CALLS"\n[ "$1" = is-enabled ] && echo enabled\nexit 0\n')
    (fake / 'systemctl').chmod(0o755)
    calls = tmp_path / 'calls'
    calls.touch()
    done = subprocess.run(['bash', '-c', 'source bin/setup && installed_now=(slurm-wlm slurmdbd) '
                                         '&& disable_packaged_services'], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, 'PATH': f"{fake}:{os.environ['PATH']}", 'CALLS': str(calls)})
    assert done.returncode == 0, done.stderr
    disabled = [line.split()[-1] for line in calls.read_text().splitlines() if line.startswith('disable')]
    assert disabled == ['slurmctld', 'slurmd', 'slurmdbd']


def test_the_default_state_directory_is_where_only_root_can_make_it():
    """No other user can make the default SIMSLURM_DIR before root's first `up` (in /var/tmp anyone
    could, and `up` then refused to start): every folder above it that exists here is root's and
    writable by no one else, sticky or not."""
    from mlcheck.simulated.cluster import DEFAULT_DIR
    folder = os.path.dirname(DEFAULT_DIR)
    while not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    while True:
        info = os.lstat(folder)
        assert info.st_uid == 0 and not info.st_mode & 0o022, (folder, oct(info.st_mode))
        if folder == '/':
            break
        folder = os.path.dirname(folder)
