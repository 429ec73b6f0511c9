"""simslurm: run a simulated Slurm cluster on this one machine.

One slurmctld plus SIMSLURM_NODES slurmd daemons (nid001, nid002, ...), all
on localhost, each slurmd on its own port; munged provides authentication.
The config goes to /etc/slurm/slurm.conf (the Debian default path) so plain
sinfo/sbatch/srun work from any shell. Job accounting as at real sites: a
slurmdbd (port SIMSLURM_DBD_PORT) stores the jobs in a MariaDB server of its
own (datadir and socket under SIMSLURM_DIR/db, no TCP), so sacct works. No
cgroups (proctrack/linuxproc, task/affinity).
Each node has 2 GPU slots that Slurm schedules as generic resources
(gres.conf beside slurm.conf): stand-in device files /dev/fakegpuN (copies of
/dev/null), GPU 0 nearest core 1 and GPU 1 nearest core 0, so that
--gpus-per-node, --gpu-bind and the visible-device variables Slurm sets are real.

Usage: bin/simslurm up|status|down|purge|env|fault
  up      start munged (if needed), MariaDB, slurmdbd (registering the
          cluster), slurmctld and the slurmd's; wait until all nodes are
          idle. Idempotent: on a healthy cluster it only prints the
          status; daemons of an older config are restarted. Brings back a
          crashed node (slurmd and job steps dead): its jobs are ended
          first (NODE_FAIL), as after a real node crash.
  status  show daemons, sinfo and the log dir; exit 0 only if all healthy.
  down    cancel jobs, stop the slurmd's, slurmctld, slurmdbd, MariaDB, and
          munged if `up` started it (a munged started by something else is
          left alone). Idempotent; logs, state and the accounting database
          are kept.
  purge   down, then remove what up added to the machine: the /etc/hosts
          lines it marked, the config files in /etc/slurm that carry its
          marker line, the stand-in GPU devices. SIMSLURM_DIR is kept (its
          path is printed, to remove by hand).
  env     print export lines for the simulated cluster.
  fault   a node or link fault in place while a command runs, then undone
          (bin/simslurm fault --help; mlcheck/simulated/fault_command.py).

Environment (same values must be used for up, status and down):
  SIMSLURM_NODES             number of nodes (default 2)
  SIMSLURM_DIR               state, spool, pid and log dir (default /var/lib/mlcheck/simslurm)
  SIMSLURM_CTLD_PORT         slurmctld port (default 6817)
  SIMSLURM_SLURMD_PORT_BASE  port of nid001; nidNNN uses base+NNN-1 (default 17001)
  SIMSLURM_DBD_PORT          slurmdbd port (default 6819)
  SIMSLURM_TIMEOUT           seconds `up` waits for the nodes (default 30)
"""

# The command line of bin/simslurm (which only finds the system's python3 and runs main()): the
# order of `up` and `down`, the lock, `status`. The daemons are in daemons.py and database.py,
# finding and stopping processes in processes.py, the machine's files in install.py and hosts.py,
# the settings and config files in cluster.py. Standard library only.

import io
import os
import pwd
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time

from mlcheck import locks
from mlcheck.simulated import daemons, database, faults, hosts, install
from mlcheck.simulated.fault_command import cmd_fault
from mlcheck.simulated.cluster import settings_from_env
from mlcheck.simulated.processes import (Failure, Sim, check_ports, give_the_cores_to, remove_partition_cgroup, say,
                                         write_new)

# up and down of any SIMSLURM_DIR share /etc/slurm/slurm.conf: serialize them. In /run, which
# only root can write, and mode 0600: anyone who can open a lock file can hold it (flock needs no
# write access), and /run/lock, where it was, lets every user make files
LOCK_FILE = '/run/mlcheck-simslurm.lock'
LOCK_WAIT_S = 300
OLD_LOCK_FILE = '/run/lock/simslurm.lock'     # where the lock was before issue 48
HOSTS_FILE = '/etc/hosts'


def take_lock(path=LOCK_FILE, wait_s=LOCK_WAIT_S):
    """The lock of up and down, held until we exit; waits for a concurrent up or down to finish.
    Its descriptor is not inherited: no daemon can hold it after us (munged keeps what it gets)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = locks.hold(path, wait_s, 0o600, "the lock of 'bin/simslurm up/down'")
    except locks.LockBusy as err:
        raise Failure(str(err)) from None
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        os.close(fd)
        raise Failure(f'the lock {path} is not ours alone (uid {info.st_uid}, mode '
                      f'{stat.S_IMODE(info.st_mode):o}): others could hold it; remove it')
    return fd


def remove_old_lock(path=OLD_LOCK_FILE):
    """Remove the lock file of earlier versions where it is ours (an empty regular file of this
    user, not a link): left there, it only misleads whoever looks for the cluster's lock."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_size:
        return False
    os.unlink(path)
    say(f'removed the lock file of an earlier version: {path}')
    return True


def check_prereqs():
    if os.geteuid() != 0:
        raise Failure('must run as root (the daemons run as root and /etc/slurm, /etc/hosts are written); '
                      'rerun with sudo')
    needs = [(('slurmctld', 'slurmd', 'sinfo', 'scontrol', 'squeue', 'scancel', 'srun', 'munged', 'munge',
               'unmunge'), '; install with: apt-get install slurm-wlm munge (or run bin/setup)'),
             (('slurmdbd', 'sacctmgr', 'sacct', 'mariadbd', 'mariadb-install-db', 'mariadb', 'mariadb-admin'),
              ' (job accounting); install with: apt-get install slurmdbd mariadb-server (or run bin/setup)')]
    for commands, how in needs:
        missing = [cmd for cmd in commands if not shutil.which(cmd)]
        if missing:
            raise Failure(f"missing {' '.join(missing)}{how}")
    if not user_exists('mysql'):
        raise Failure("user 'mysql' does not exist; reinstall mariadb-server: apt-get install --reinstall mariadb-server")
    for cmd in ('ss', 'runuser'):
        if not shutil.which(cmd):
            raise Failure(f'missing {cmd}; install with: apt-get install iproute2 util-linux')
    if not user_exists('munge'):
        raise Failure("user 'munge' does not exist; reinstall munge: apt-get install --reinstall munge")
    if not os.access('/etc/munge/munge.key', os.R_OK):
        raise Failure('/etc/munge/munge.key is missing; create it with: mungekey --create '
                      '(then chown munge:munge /etc/munge/munge.key)')


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def print_status(sim, out=None):
    """One line per daemon, then sinfo: True only if all are healthy."""
    out = out or sys.stdout
    ok = True

    def line(label, pid, detail='', failure='NOT running'):
        nonlocal ok
        if pid:
            out.write(f'{label:<16} running (pid {pid}{detail})\n')
        else:
            out.write(f'{label:<16} {failure}\n')
            ok = False

    munge_ok = daemons.munge_works()
    munged = sim.daemon_pid('munged')
    line('munged', munged if munge_ok and munged else 'unknown' if munge_ok else None,
         failure='NOT running (munge -n | unmunge fails)')
    line('mariadbd', sim.daemon_pid('mariadbd'), f", socket {sim.path('DB_SOCKET')}")
    line('slurmdbd', sim.daemon_pid('slurmdbd'), f", port {sim.settings['DBD_PORT']}")
    line('slurmctld', sim.daemon_pid('slurmctld'), f", port {sim.settings['CTLD_PORT']}")
    for node in sim.nodes():
        line(f'slurmd {node}', sim.daemon_pid('slurmd', node), f', port {sim.node_port(node)}')
    if sim.daemon_pid('slurmctld'):
        out.write('---- sinfo ----\n')
        out.flush()
        try:
            proc = subprocess.run(['sinfo'], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=15)
            out.write(proc.stdout.decode(errors='replace'))
            ok = ok and proc.returncode == 0
        except (OSError, subprocess.TimeoutExpired) as err:
            ok = False
            out.write(f'{err}\n')
        if not daemons.all_nodes_healthy(sim):
            out.write('not all nodes are idle/allocated (see sinfo -R)\n')
            ok = False
    out.write(f'config: {install.SLURM_CONF_PATH}, {install.SLURMDBD_CONF_PATH}\n')
    out.write(f"logs:   {sim.path('LOG_DIR')}\n")
    out.flush()
    return ok


def hosts_resolve(sim):
    try:
        hosts.ensure_hosts(HOSTS_FILE, sim.settings['NODES'], check_only=True)
        return True
    except (OSError, ValueError):
        return False


def healthy(sim, config):
    return (config.is_current() and install.gpu_devices_exist() and hosts_resolve(sim) and daemons.munge_works()
            and print_status(sim, io.StringIO()))


def record_nodes(sim):
    """The running cluster's node count, for config/simulated.py (max_nodes): a later shell need
    not export SIMSLURM_NODES again."""
    write_new(sim.path('NODES_FILE'), f"{sim.settings['NODES']}\n")


def already_up(sim):
    record_nodes(sim)
    # daemons started before the cluster had a cgroup of its own (an older checkout) join it:
    # our_pids finds root's own daemons only, so no other process gains the weight
    for name in ('slurmctld', 'slurmdbd', 'slurmd'):
        for pid in sim.our_pids(name):
            give_the_cores_to(pid)
    say('cluster already up')
    return print_status(sim)


def cmd_up(sim):
    check_prereqs()
    sim = install.claimed(sim, make=True)
    install.check_config_is_ours()
    # a fault of a killed test session would make this "healthy" cluster slow or broken; a live
    # session's faults stay
    live = faults.live_sessions(sim)
    if live:
        say(f"faults held in place by pid {', '.join(map(str, live))}: left alone")
    for removed in faults.clear_leftovers(sim):
        say(f'removed a leftover fault: {removed}')
    config = install.Config(sim, install.node_cpus(), install.node_memory_mb())
    if healthy(sim, config):
        return already_up(sim)
    take_lock()
    remove_old_lock()
    if healthy(sim, config):      # a concurrent `up` may have done the work meanwhile
        return already_up(sim)
    try:
        hosts.ensure_hosts(HOSTS_FILE, sim.settings['NODES'])
    except ValueError as err:
        raise Failure(str(err)) from None
    install.check_hostname_is_loopback()
    install.ensure_gpu_devices()
    install.make_dirs(sim)
    daemons.start_munged(sim)
    # daemons of an older config (another SIMSLURM_NODES) are restarted: slurmctld cannot add
    # nodes by reconfiguring
    if not config.is_current() and daemons.any_slurm_daemon_running(sim):
        say('configuration changed: restarting the Slurm daemons')
        daemons.cancel_jobs(sim)
        daemons.stop_slurm_daemons(sim)
    if not config.dbd_is_current():
        database.stop_accounting(sim)
    check_ports(sim)
    config.write()
    database.start_mariadb(sim)
    database.setup_database(sim)
    database.start_slurmdbd(sim)
    daemons.start_slurmctld(sim)
    daemons.start_slurmds(sim)
    daemons.wait_for_nodes(sim)
    record_nodes(sim)
    say('cluster is up')
    return print_status(sim)


def cmd_status(sim):
    claimed = install.claimed(sim)
    if claimed is None:
        print(f'no simulated cluster: {sim.dir} (SIMSLURM_DIR) does not exist')
        return False
    return print_status(claimed)


def cmd_down(sim):
    if os.geteuid() != 0:
        raise Failure('must run as root to stop the daemons; rerun with sudo')
    take_lock()
    claimed = install.claimed(sim)
    if claimed is None:     # a typed SIMSLURM_DIR of no cluster leaves the live one's weight be
        say(f'no simulated cluster in {sim.dir} (SIMSLURM_DIR): nothing stopped, the cgroup left as it is')
        return True
    daemons.cancel_jobs(claimed)
    daemons.stop_slurm_daemons(claimed)
    database.stop_accounting(claimed)
    daemons.stop_our_munged(claimed)
    removed = remove_partition_cgroup()
    if removed:
        say(f'removed the cluster\'s cgroup {removed}')
    say(f"cluster is down (logs and the accounting database kept in {sim.dir}; munged is stopped only if 'up' "
        f"started it)")
    return True


def cmd_purge(sim):
    """down, then what up added to the machine removed."""
    cmd_down(sim)
    for removed in install.purge(sim, HOSTS_FILE):
        say(f'removed {removed}')
    say(f"the machine is as before 'up', but for {sim.dir} (logs, accounting database): "
        f'remove it with: rm -r {sim.dir}')
    return True


def cmd_env(sim):
    print(f'export SIMSLURM_DIR={shlex.quote(sim.dir)}')
    print(f'export SLURM_CONF={shlex.quote(install.SLURM_CONF_PATH)}')
    return True


COMMANDS = {'up': cmd_up, 'status': cmd_status, 'down': cmd_down, 'purge': cmd_purge, 'env': cmd_env}


def main(argv=None, environ=None):
    # a closed stdout ends us silently, as it ended the bash script (`bin/simslurm up | head`);
    # the daemons get the default back anyway (subprocess restores SIGPIPE)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv else ''
    try:
        if command == 'fault':
            sys.exit(cmd_fault(argv[1:], os.environ if environ is None else environ))
        if command in COMMANDS:
            sim = Sim(settings_from_env(os.environ if environ is None else environ))
            sys.exit(0 if COMMANDS[command](sim) else 1)
        if command in ('-h', '--help', 'help'):
            sys.stdout.write(__doc__)
            return
        sys.stderr.write(__doc__)
        raise Failure(f"unknown command '{command}'; use one of: up status down purge env fault")
    except (Failure, ValueError, OSError) as err:
        sys.stdout.flush()
        sys.exit(f'simslurm: error: {err}')


if __name__ == '__main__':
    main()
