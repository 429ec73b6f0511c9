"""bin/simslurm's Python (mlcheck.simulated: processes, daemons, database, install, simslurm) without
root or a cluster: a /proc tree, pid files and the machine's files under tmp paths, and fake
commands (sinfo, squeue, scontrol, ss) first on PATH. tests/test_simslurm.py runs the real thing."""

import io
import os
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from mlcheck.simulated import cluster, daemons, database, hosts, install, processes, simslurm
from mlcheck.simulated.processes import Failure, Sim

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(REPO, 'tests', 'data', 'simslurm')


DAEMONS = ('slurmctld', 'slurmd', 'slurmdbd', 'mariadbd')


def sim_in(tmp_path, root=True, **env):
    """A Sim of a /proc tree, daemon binaries and users under tmp_path: this test's user stands
    for root and mysql."""
    settings = cluster.settings_from_env({'SIMSLURM_DIR': str(tmp_path / 'sim'), **env})
    binaries = tmp_path / 'sbin'
    binaries.mkdir(exist_ok=True)
    for name in DAEMONS:
        (binaries / name).touch(mode=0o755)
    return Sim(settings, proc=str(tmp_path / 'proc'), root=root, bin_path=str(binaries),
               uids={'root': os.getuid(), 'mysql': os.getuid()})


def fake_process(sim, pid, comm, argv, directory=None, exe=None):
    """A /proc/PID of `comm` with command line `argv`, started for SIMSLURM_DIR `directory`, from
    `exe` (default: the daemon's binary of `sim`, else /bin/`comm`)."""
    entry = os.path.join(sim.proc, str(pid))
    os.makedirs(entry)
    binary = os.path.join(sim.bin_path, comm)
    os.symlink(exe or (binary if os.path.exists(binary) else f'/bin/{comm}'), os.path.join(entry, 'exe'))
    with open(os.path.join(entry, 'comm'), 'w') as f:
        f.write(comm + '\n')
    with open(os.path.join(entry, 'cmdline'), 'wb') as f:
        f.write(b'\0'.join(a.encode() for a in argv) + b'\0')
    with open(os.path.join(entry, 'environ'), 'wb') as f:
        f.write(f'PATH=/usr/bin\0SIMSLURM_DIR={directory or sim.dir}\0'.encode())


def write_pidfile(path, pid):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(f'{pid}\n')


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """A folder first on PATH: fake_bin(name, script) writes a command there."""
    folder = tmp_path / 'bin'
    folder.mkdir()
    monkeypatch.setenv('PATH', f"{folder}:{os.environ['PATH']}")

    def write(name, script):
        path = folder / name
        path.write_text('#!/bin/sh\n' + script)
        path.chmod(0o755)
    return write


def test_our_daemons_are_found_by_their_environment(tmp_path):
    sim = sim_in(tmp_path)
    fake_process(sim, 40, 'slurmd', ['slurmd', '-N', 'nid002'])
    fake_process(sim, 41, 'slurmd', ['slurmd', '-N', 'nid001'], directory='/var/tmp/another')
    fake_process(sim, 42, 'slurmd', ['slurmd', '-N', 'nid001'])
    fake_process(sim, 7, 'slurmctld', ['slurmctld'])
    assert sim.our_pids('slurmd') == [40, 42]
    assert sim.daemon_pid('slurmd', 'nid001') == 42          # no pid file: found in /proc
    assert sim.daemon_pid('slurmd', 'nid001', pidfile_only=True) is None
    assert sim.daemon_pid('slurmd', 'nid003') is None
    assert sim.slurmd_node(40) == 'nid002' and sim.slurmd_node(7) == '?'
    # without root another process's environment cannot be read: the cluster's own is not asked
    assert sim_in(tmp_path, root=False).our_pids('slurmd') == [40, 41, 42]


def test_a_pid_file_names_the_daemon_only_while_it_is_ours(tmp_path):
    sim = sim_in(tmp_path)
    fake_process(sim, 7, 'slurmctld', ['slurmctld'])
    fake_process(sim, 9, 'bash', ['bash'])
    write_pidfile(sim.path('CTLD_PIDFILE'), 9)               # stale: pid 9 is something else now
    assert sim.daemon_pid('slurmctld') == 7
    assert sim.daemon_pid('slurmctld', pidfile_only=True) is None
    write_pidfile(sim.path('CTLD_PIDFILE'), 7)
    assert sim.daemon_pid('slurmctld', pidfile_only=True) == 7


def test_any_munged_counts_but_only_by_its_pid_file(tmp_path, monkeypatch):
    sim = sim_in(tmp_path)
    fake_process(sim, 5, 'munged', ['munged'], directory='/elsewhere')
    monkeypatch.setattr(processes, 'MUNGE_PIDFILE', str(tmp_path / 'munged.pid'))
    assert sim.daemon_pid('munged') is None
    write_pidfile(processes.MUNGE_PIDFILE, 5)
    assert sim.daemon_pid('munged') == 5


def test_the_daemons_environment_is_clean_and_marked(tmp_path):
    sim = sim_in(tmp_path)
    assert sim.daemon_env() == ['env', '-i', 'PATH=/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/root', 'LANG=C.UTF-8',
                                f'SIMSLURM_DIR={sim.dir}']


@pytest.mark.parametrize('lines, owner', [
    ('', None),
    ('LISTEN 0 4096 127.0.0.1:6817 0.0.0.0:* users:(("slurmctld",pid=123,fd=5))\n', ('slurmctld', '123')),
    ('LISTEN 0 4096 127.0.0.1:6817 0.0.0.0:*\n', ('?', '?')),
])
def test_the_owner_of_a_port(lines, owner):
    assert processes.parse_port_owner(lines) == owner


def test_a_busy_port_is_one_line_naming_its_owner_and_the_setting():
    assert processes.busy_port_error(6817, 'slurmctld', 'SIMSLURM_CTLD_PORT', ('python', '77'), '/d') == (
        'port 6817 (for slurmctld) is already in use by python (pid 77); stop it (kill 77) or set '
        'SIMSLURM_CTLD_PORT to a free port')
    assert 'not started from SIMSLURM_DIR=/d; stop it (bin/simslurm down with its SIMSLURM_DIR, or kill 8)' in \
        processes.busy_port_error(17001, 'slurmd nid001', 'SIMSLURM_SLURMD_PORT_BASE', ('slurmd', '8'), '/d')
    assert "unknown process; stop it (see: ss -ltnp 'sport = :6819') or set SIMSLURM_DBD_PORT" in \
        processes.busy_port_error(6819, 'slurmdbd', 'SIMSLURM_DBD_PORT', ('?', '?'), '/d')


def test_check_ports_asks_only_for_daemons_not_running(tmp_path, fake_bin):
    sim = sim_in(tmp_path, SIMSLURM_NODES='1')
    fake_process(sim, 7, 'slurmctld', ['slurmctld'])
    # every port is busy: slurmctld's is not asked, it runs
    fake_bin('ss', 'echo "LISTEN 0 1 127.0.0.1:${2#*:} *:* users:((\\"nc\\",pid=55,fd=3))"\n')
    with pytest.raises(Failure, match=r'^port 17001 \(for slurmd nid001\) is already in use by nc \(pid 55\)'):
        processes.check_ports(sim)


def test_stop_pids_terminates_all_and_says_so(capsys):
    children = [subprocess.Popen(['sleep', '30']) for _ in range(2)]
    reapers = [threading.Thread(target=child.wait) for child in children]
    for reaper in reapers:
        reaper.start()
    processes.stop_pids([(f'sleeper {i}', child.pid) for i, child in enumerate(children)])
    for reaper in reapers:
        reaper.join()
    assert [child.returncode for child in children] == [-signal.SIGTERM] * 2
    assert capsys.readouterr().out == ''.join(
        f'simslurm: stopped sleeper {i} (pid {child.pid})\n' for i, child in enumerate(children))


def test_a_daemon_that_fails_to_start_shows_its_log(tmp_path, capsys):
    sim = sim_in(tmp_path)
    log = tmp_path / 'x.log'
    with pytest.raises(Failure, match=f'^slurmctld failed to start; see {log}$'):
        sim.start_daemon('slurmctld', 'slurmctld', '', str(log), ['sh', '-c', 'echo bad config; exit 1'])
    assert capsys.readouterr().err == f'---- last lines of {log} ----\nbad config\n----\n'


def test_a_started_daemon_is_waited_for_by_its_pid_file(tmp_path, capsys):
    """The command daemonizes (here: it writes the pid file of a process in the fake /proc)."""
    sim = sim_in(tmp_path)
    fake_process(sim, 31, 'slurmctld', ['slurmctld'])
    os.makedirs(sim.path('RUN_DIR'))
    sim.start_daemon('slurmctld', 'slurmctld', '', str(tmp_path / 'log'),
                     ['sh', '-c', f"echo 31 > {sim.path('CTLD_PIDFILE')}"])
    assert capsys.readouterr().out == 'simslurm: started slurmctld (pid 31)\n'


def test_the_lock_waits_then_fails_in_one_line(tmp_path):
    path = str(tmp_path / 'lock' / 'simslurm.lock')
    held = simslurm.take_lock(path)
    try:
        with pytest.raises(Failure, match=f"^the lock of 'bin/simslurm up/down' {path} has been held by "
                                          f"another process for 0.3 s; "):
            simslurm.take_lock(path, wait_s=0.3)
    finally:
        os.close(held)
    os.close(simslurm.take_lock(path, wait_s=0.3))


def test_node_states(fake_bin, tmp_path):
    sim = sim_in(tmp_path, SIMSLURM_NODES='3')
    fake_bin('sinfo', 'printf "nid001 idle\\nnid002 mix\\nnid003 down*\\n"\n')
    states = daemons.node_states()
    assert [daemons.state_of(states, n) for n in ('nid001', 'nid003', 'nid004')] == ['idle', 'down*', '']
    assert not daemons.all_nodes_healthy(sim)
    assert daemons.all_nodes_healthy(sim_in(tmp_path, SIMSLURM_NODES='2'))
    fake_bin('sinfo', 'exit 1\n')
    assert daemons.node_states() is None and not daemons.all_nodes_healthy(sim)


def test_a_crashed_node_is_marked_down_only_when_its_steps_are_gone(tmp_path, fake_bin, capsys):
    sim = sim_in(tmp_path)
    calls = tmp_path / 'calls'
    fake_bin('squeue', 'printf "12\\n13\\n"\n')
    fake_bin('scontrol', f'echo "$@" >> {calls}\n')
    fake_bin('ss', f'echo "u_str LISTEN 0 1 {sim.path("SPOOL_DIR", "nid001")}/nid001_12.0 users:((\\"slurmstepd\\",pid=9,fd=1))"\n')
    daemons.fail_jobs_of_crashed_node(sim, 'nid001')       # a step still runs there
    assert not calls.exists()
    daemons.fail_jobs_of_crashed_node(sim, 'nid002')
    assert calls.read_text() == 'update nodename=nid002 state=down reason=simslurm: slurmd and job steps were gone\n'
    assert capsys.readouterr().out == 'simslurm: nid002 had crashed: marked it down, which ends its jobs 12 13\n'


def test_each_slurmd_starts_as_its_node(tmp_path, monkeypatch):
    sim = sim_in(tmp_path)
    started = []
    monkeypatch.setattr(Sim, 'start_daemon', lambda self, *args: started.append(args))
    daemons.start_slurmds(sim)
    assert [(label, node, cmd) for label, _, node, _, cmd in started] == [
        (f'slurmd {n}', n, ['slurmd', '-N', n]) for n in ('nid001', 'nid002')]


def test_the_accounting_sql():
    assert database.setup_sql('pw') == (
        "CREATE DATABASE IF NOT EXISTS slurm_acct_db;\nCREATE USER IF NOT EXISTS 'slurmdbd'@'localhost';\n"
        "ALTER USER 'slurmdbd'@'localhost' IDENTIFIED BY 'pw';\nGRANT ALL ON slurm_acct_db.* TO 'slurmdbd'@'localhost';\n")


@pytest.fixture
def etc_slurm(tmp_path, monkeypatch):
    for name in ('SLURM_CONF_PATH', 'GRES_CONF_PATH', 'SLURMDBD_CONF_PATH'):
        monkeypatch.setattr(install, name, str(tmp_path / 'etc' / getattr(install, name).split('/')[-1]))
    return tmp_path / 'etc'


def test_up_passes_its_settings_to_the_generator(tmp_path, monkeypatch):
    """With the 4-node golden's SIMSLURM_* settings and measurements, `up` generates that golden's
    files."""
    import pwd     # a user staff whose private group is Debian's staff (gid 50)
    monkeypatch.setattr(pwd, 'getpwnam', lambda name: pwd.struct_passwd((name, 'x', 1050, 50, '', '/', '/bin/sh')))
    sim = sim_in(tmp_path, SIMSLURM_NODES='4', SIMSLURM_DIR='/tmp/sim4', SIMSLURM_CTLD_PORT='7817',
                 SIMSLURM_SLURMD_PORT_BASE='18001', SIMSLURM_DBD_PORT='7819', SUDO_GID='50', SUDO_USER='staff')
    monkeypatch.setattr(install, 'read_password', {'/tmp/sim4/db/slurmdbd.password': 'examplepassword0123456789abcd'}.get)
    files = install.Config(sim, 8, 512).files()
    assert sorted(files) == sorted(os.listdir(os.path.join(GOLDEN, '4nodes')))
    for name, text in files.items():
        with open(os.path.join(GOLDEN, '4nodes', name)) as f:
            assert text == f.read(), name


def test_the_files_are_installed_with_their_modes_once(tmp_path, etc_slurm, capsys):
    sim = sim_in(tmp_path)
    install.make_dirs(sim, owner=(os.getuid(), os.getgid()))
    config = install.Config(sim, 2, 1024)
    assert not config.is_current()
    config.write()
    files = config.files()
    for path, (name, mode) in install.installed_files(sim).items():
        assert open(path).read() == files[name], name
        assert os.stat(path).st_mode & 0o777 == mode
    assert config.is_current() and config.dbd_is_current()
    config.write()                                     # nothing changed: nothing written
    assert capsys.readouterr().out == f'simslurm: wrote {etc_slurm}/slurm.conf and {etc_slurm}/slurmdbd.conf\n'
    with open(sim.path('DB_CNF'), 'a') as f:
        f.write('# edited\n')
    assert not config.dbd_is_current() and not config.is_current()


def test_a_foreign_slurm_conf_is_never_overwritten(etc_slurm):
    etc_slurm.mkdir()
    (etc_slurm / 'slurm.conf').write_text('ClusterName=real\n')
    with pytest.raises(Failure, match=f"^{etc_slurm}/slurm.conf exists and was not written by simslurm"):
        install.check_config_is_ours()


def test_another_running_cluster_keeps_slurm_conf(tmp_path, etc_slurm):
    sim = sim_in(tmp_path)
    etc_slurm.mkdir()
    (etc_slurm / 'slurm.conf').write_text(f'{cluster.MARKER}\n# simslurm-dir: /var/tmp/other\n')
    install.check_no_other_cluster(sim)                # not running
    fake_process(sim, 3, 'slurmctld', ['slurmctld'], directory='/var/tmp/other')
    with pytest.raises(Failure, match='^a simslurm cluster with SIMSLURM_DIR=/var/tmp/other is running; stop it '
                                      'first: SIMSLURM_DIR=/var/tmp/other bin/simslurm down$'):
        install.check_no_other_cluster(sim)


def test_make_dirs_and_the_password(tmp_path):
    sim = sim_in(tmp_path)
    install.make_dirs(sim, owner=(os.getuid(), os.getgid()))
    for name in ('STATE_DIR', 'RUN_DIR', 'LOG_DIR', 'DB_DIR', 'DB_RUN'):
        assert os.path.isdir(sim.path(name)), name
    assert os.stat(sim.path('SPOOL_DIR', 'nid002')).st_mode & 0o777 == 0o755
    password = open(sim.path('DB_PASSWORD_FILE')).read()
    assert password.isalnum() and len(password) >= 24
    assert os.stat(sim.path('DB_PASSWORD_FILE')).st_mode & 0o777 == 0o600
    install.make_dirs(sim, owner=(os.getuid(), os.getgid()))
    assert open(sim.path('DB_PASSWORD_FILE')).read() == password      # made once


def test_node_memory(tmp_path):
    meminfo = tmp_path / 'meminfo'
    for total_kb, mb in ((16_000_000, 1024), (1_000_000, 488), (1000, 1)):
        meminfo.write_text(f'MemTotal:       {total_kb} kB\nMemFree: 1 kB\n')
        assert install.node_memory_mb(str(meminfo)) == mb


def test_a_hostname_beyond_loopback_is_a_warning(capsys):
    install.check_hostname_is_loopback('box', resolve=lambda name: '127.0.1.1')
    install.check_hostname_is_loopback('box', resolve=lambda name: '::1')
    assert capsys.readouterr().out == ''
    install.check_hostname_is_loopback('box', resolve=lambda name: '10.0.0.5')
    assert capsys.readouterr().out.startswith("simslurm: warning: this machine's name box resolves to '10.0.0.5', not")


def test_status_lines(tmp_path, monkeypatch, fake_bin):
    """The format tests/test_simslurm.py and its readers parse: a line per daemon, then sinfo."""
    sim = sim_in(tmp_path)
    pids = {('munged', ''): 5, ('mariadbd', ''): 6, ('slurmctld', ''): 7, ('slurmd', 'nid001'): 8}
    monkeypatch.setattr(Sim, 'daemon_pid', lambda self, name, node='', pidfile_only=False: pids.get((name, node)))
    monkeypatch.setattr(daemons, 'munge_works', lambda: True)
    fake_bin('sinfo', 'case "$*" in *%t*) printf "nid001 idle\\nnid002 idle\\n";; *) echo SINFO;; esac\n')
    out = io.StringIO()
    assert not simslurm.print_status(sim, out)
    assert out.getvalue() == (
        'munged           running (pid 5)\n'
        f"mariadbd         running (pid 6, socket {sim.path('DB_SOCKET')})\n"
        'slurmdbd         NOT running\n'
        'slurmctld        running (pid 7, port 6817)\n'
        'slurmd nid001    running (pid 8, port 17001)\n'
        'slurmd nid002    NOT running\n'
        '---- sinfo ----\nSINFO\n'
        'config: /etc/slurm/slurm.conf, /etc/slurm/slurmdbd.conf\n'
        f"logs:   {sim.path('LOG_DIR')}\n")
    pids.update({('slurmdbd', ''): 9, ('slurmd', 'nid002'): 10, ('munged', ''): None})
    out = io.StringIO()
    assert simslurm.print_status(sim, out)
    assert out.getvalue().startswith('munged           running (pid unknown)\n')


def run_simslurm(*args, **env):
    return subprocess.run([os.path.join(REPO, 'bin', 'simslurm'), *args], capture_output=True, text=True,
                          env={'PATH': os.environ['PATH'], **env}, timeout=60)


def test_the_command_line():
    """The thin script runs the module with the system's python3: help, env, and the one-line
    errors of an unknown command and a bad setting."""
    assert run_simslurm('--help').stdout == simslurm.__doc__
    env = run_simslurm('env', SIMSLURM_DIR='/tmp/x y')
    # quoted for the shell that evaluates it (issue 48 item 10: it read `export SIMSLURM_DIR=/tmp/x y`)
    assert (env.returncode, env.stdout) == (0, "export SIMSLURM_DIR='/tmp/x y'\nexport SLURM_CONF=/etc/slurm/slurm.conf\n")
    bad = run_simslurm('bogus')
    assert bad.returncode == 1 and bad.stderr.endswith(
        "simslurm: error: unknown command 'bogus'; use one of: up status down purge env fault\n")
    assert bad.stderr.startswith('simslurm: run a simulated Slurm cluster')
    nodes = run_simslurm('status', SIMSLURM_NODES='0')
    assert (nodes.returncode, nodes.stdout, nodes.stderr) == (
        1, '', "simslurm: error: SIMSLURM_NODES='0' is not a number between 1 and 999; set it to e.g. 2\n")


def test_only_root_brings_it_up_or_down(monkeypatch, capsys):
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    for command, error in (('up', 'must run as root (the daemons run as root and /etc/slurm, /etc/hosts are '
                                  'written); rerun with sudo'),
                           ('down', 'must run as root to stop the daemons; rerun with sudo')):
        with pytest.raises(SystemExit) as raised:
            simslurm.main([command], environ={})
        assert raised.value.code == f'simslurm: error: {error}'


def test_the_modules_need_no_venv():
    """As bin/simslurm runs them, with the system's python3 and without even its site-packages
    (-S): standard library only."""
    python = shutil.which('python3', path='/usr/bin:/bin') or sys.executable
    code = 'import sys; sys.path.insert(0, sys.argv[1]); import mlcheck.simulated.simslurm'
    subprocess.run([python, '-I', '-S', '-c', code, REPO], check=True)


def test_nodes_the_hosts_file_lacks_are_added_at_loopback(tmp_path, monkeypatch):
    """Lines are appended (a bind-mounted /etc/hosts cannot be replaced), once; a node the machine
    names itself keeps its line."""
    path = tmp_path / 'hosts'
    path.write_text('127.0.0.1 localhost\n10.1.2.3 nid002 # the site')
    inode = path.stat().st_ino
    # the machine's resolver: what the hosts file names (a site's nid002 taken as local here)
    monkeypatch.setattr(hosts, 'resolve_ipv4', lambda name: '127.0.0.1' if name in hosts.named(path.read_text()) else None)
    hosts.ensure_hosts(str(path), 3)
    hosts.ensure_hosts(str(path), 3)
    assert path.read_text() == ('127.0.0.1 localhost\n10.1.2.3 nid002 # the site\n'
                                '127.0.0.1 nid001   # added by bin/simslurm\n'
                                '127.0.0.1 nid003   # added by bin/simslurm\n')
    assert path.stat().st_ino == inode


def test_a_node_name_the_resolver_knows_gets_no_line_of_ours(tmp_path, monkeypatch):
    """Issue 48 item 10: DNS names a real host nid001 (on 42e5ead `up` appended 127.0.0.1 nid001,
    shadowing it for everyone on the machine while the cluster was up): no line, one error."""
    path = tmp_path / 'hosts'
    path.write_text('127.0.0.1 localhost\n')
    monkeypatch.setattr(hosts, 'resolve_ipv4', {'nid001': '10.0.0.7'}.get)
    with pytest.raises(ValueError, match="host name nid001 resolves to '10.0.0.7'"):
        hosts.ensure_hosts(str(path), 1)
    assert path.read_text() == '127.0.0.1 localhost\n'


def test_a_configless_slurm_client_is_not_taken_over(tmp_path, etc_slurm, monkeypatch):
    """Issue 48 item 10: a login node of a configless cluster has no /etc/slurm/slurm.conf but a
    cached one in /run/slurm/conf; on 42e5ead `up` wrote /etc/slurm/slurm.conf, redirecting the
    site's sbatch and srun to the simulated cluster."""
    cache = tmp_path / 'run' / 'slurm.conf'
    cache.parent.mkdir()
    cache.write_text('ClusterName=site\n')
    monkeypatch.setattr(install, 'CONFIGLESS_CACHE', str(cache), raising=False)
    with pytest.raises(Failure, match='this machine is a node of a configless Slurm cluster'):
        install.check_config_is_ours()


def test_a_node_that_resolves_off_the_machine_is_named_with_the_file(tmp_path, monkeypatch):
    path = tmp_path / 'hosts'
    path.write_text('10.1.2.3 nid002\n')
    monkeypatch.setattr(hosts, 'resolve_ipv4', {'nid001': '127.0.0.1', 'nid002': '10.1.2.3'}.get)
    with pytest.raises(ValueError, match=f"^host name nid002 resolves to '10.1.2.3', not 127.0.0.1; "
                                         f"fix its entry in {path}$"):
        hosts.ensure_hosts(str(path), 2, check_only=True)
    monkeypatch.setattr(hosts, 'resolve_ipv4', lambda name: None)
    with pytest.raises(ValueError, match="nid001 resolves to 'nothing'.*nid002 .*fix their entries"):
        hosts.ensure_hosts(str(path), 2, check_only=True)
    assert path.read_text() == '10.1.2.3 nid002\n'


@pytest.mark.parametrize('kind', ['v1', 'v2'])
def test_the_cluster_s_daemons_weigh_100_times_other_work(tmp_path, kind):
    """A started daemon (and so every job its slurmd starts) joins the cluster's own cgroup,
    weighted 100 times the default, in whichever hierarchy has the cpu controller."""
    sim = sim_in(tmp_path)
    root = tmp_path / 'cgroup'
    root.mkdir()
    weight = {'v1': 'cpu.shares', 'v2': 'cpu.weight'}[kind]
    group = root / processes.PARTITION_CGROUP
    group.mkdir()
    (group / weight).write_text('1024\n' if kind == 'v1' else '100\n')
    if kind == 'v1':
        mount = f'cgroup {root} cgroup rw,relatime,cpu 0 0\n'
    else:
        mount = f'cgroup2 {root} cgroup2 rw,relatime 0 0\n'
        (root / 'cgroup.controllers').write_text('cpuset cpu io memory pids\n')
    os.makedirs(os.path.join(sim.proc, 'self'))
    with open(os.path.join(sim.proc, 'self', 'mounts'), 'w') as f:
        f.write('proc /proc proc rw 0 0\n' + mount)
    fake_process(sim, 31, 'slurmctld', ['slurmctld'])
    os.makedirs(sim.path('RUN_DIR'))
    sim.start_daemon('slurmctld', 'slurmctld', '', str(tmp_path / 'log'),
                     ['sh', '-c', f"echo 31 > {sim.path('CTLD_PIDFILE')}"])
    assert (group / 'cgroup.procs').read_text() == '31'
    assert (group / weight).read_text() == str(100 * int('1024' if kind == 'v1' else '100'))
    if kind == 'v2':
        assert (root / 'cgroup.subtree_control').read_text() == '+cpu'


def test_without_a_cpu_controller_the_daemons_stay_where_they_are(tmp_path):
    mounts = tmp_path / 'mounts'
    mounts.write_text(f'cgroup2 {tmp_path} cgroup2 rw 0 0\n')
    (tmp_path / 'cgroup.controllers').write_text('memory pids\n')
    assert processes.partition_cgroup(str(mounts)) is None
    assert processes.partition_cgroup(str(tmp_path / 'absent')) is None
