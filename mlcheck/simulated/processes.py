"""The simulated cluster's processes: which daemons are ours, starting and stopping them, and who
holds a port (bin/simslurm, through mlcheck.simulated.simslurm).

A daemon is ours when /proc shows it run by its user (root; mysql for mariadbd), from its own
binary (/proc/PID/exe is the slurmd, slurmctld, slurmdbd or mariadbd that the daemons' PATH
finds), with SIMSLURM_DIR=<our directory> in its environment, the mark its clean environment
(Sim.daemon_env) gives it: pid files may be stale, missing or planted, and any local user can
start a process called slurmd with that variable set; only root can start one of root's from the
slurmd binary (issue 48). Only root can read another process's environment and executable; other
users (`status`) check the owner and name alone. Standard library only: bin/simslurm runs this with
the system's python3.
"""

import contextlib
import dataclasses
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from mlcheck.simulated.cluster import node_names, node_ports, paths

MUNGE_PIDFILE = '/run/munge/munged.pid'
# the PATH of every daemon (Sim.daemon_env), where its binary is found
DAEMON_PATH = '/usr/sbin:/usr/bin:/sbin:/bin'
# who runs each daemon but munged (a system service: see Sim.daemon_pid)
DAEMON_USERS = {'slurmctld': 'root', 'slurmd': 'root', 'slurmdbd': 'root', 'mariadbd': 'mysql'}

# The cluster's daemons, and so every job their slurmd start, run in a cgroup of their own that
# weighs 100 times any other process of the machine: a compute node's cores belong to its job,
# while the machine that simulates it also runs an editor, a browser or another user's tests.
# Beside a CPU-bound process of one core, a 1-node MNIST job's rank on that core trained alone at
# 0.60 of the other and failed the check (docs/simulated-cluster.md). A fault's CFS quota still
# caps its node, as a throttled GPU would.
PARTITION_CGROUP = 'mlcheck-partition'
PARTITION_WEIGHT = {'cpu.shares': 102400, 'cpu.weight': 10000}   # cgroup v1 and v2: 100 x default


class Failure(Exception):
    """What ends bin/simslurm: printed as its one line 'simslurm: error: ...', exit code 1."""


def say(message):
    print(f'simslurm: {message}', flush=True)


def show_log_tail(log):
    """The last lines of `log` on stderr, to explain a failure."""
    try:
        with open(log, errors='replace') as f:
            lines = f.readlines()
    except OSError:
        lines = []
    if lines:
        sys.stderr.write(f'---- last lines of {log} ----\n{"".join(lines[-20:])}')
        if not lines[-1].endswith('\n'):
            sys.stderr.write('\n')
        sys.stderr.write('----\n')
    else:
        sys.stderr.write(f'(log {log} is empty or missing)\n')
    sys.stderr.flush()


def output_of(args, timeout=None, stderr=subprocess.DEVNULL):
    """The stdout of command `args`, or None if it fails, times out or cannot be run."""
    try:
        proc = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                              text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def succeeds(args, timeout=None, **kwargs):
    """True if command `args` exits 0 (its output, unless redirected in `kwargs`, is dropped)."""
    kwargs.setdefault('stdout', subprocess.DEVNULL)
    kwargs.setdefault('stderr', subprocess.DEVNULL)
    try:
        return subprocess.run(args, stdin=kwargs.pop('stdin', subprocess.DEVNULL), timeout=timeout,
                              **kwargs).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def remove_files(*paths):
    """rm -f: each of `paths` that exists is removed."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def write_new(path, text, mode=0o644):
    """`text` replaces `path` at once: a new file beside it (O_EXCL | O_NOFOLLOW: no file or link
    planted there is written through), with `mode` from the start, renamed over `path`."""
    tmp = f'{path}.simslurm.tmp'
    remove_files(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with open(fd, 'w') as f:
        os.fchmod(fd, mode)
        f.write(text)
    os.replace(tmp, path)


def own_file(path, user=None, mode=None):
    """Create `path` if it is missing (never through a link), then give it to `user` and `mode`:
    changed on the open file, so a link swapped in meanwhile hands nothing else over."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    try:
        if user:
            entry = pwd.getpwnam(user)
            os.fchown(fd, entry.pw_uid, entry.pw_gid)
        if mode is not None:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def read_pid(path):
    """The digits in pid file `path` ('' if there are none or it cannot be read)."""
    try:
        with open(path) as f:
            return ''.join(c for c in f.read() if c.isdigit())
    except OSError:
        return ''


def wait_until(condition, seconds, step=0.1):
    """Poll `condition` every `step` seconds, `seconds` long at most: True as soon as it holds."""
    for _ in range(round(seconds / step)):
        if condition():
            return True
        time.sleep(step)
    return False


@dataclass
class Sim:
    """One simulated cluster: its settings (cluster.settings_from_env), the paths under its
    SIMSLURM_DIR, and its daemons as /proc shows them."""
    settings: dict
    proc: str = '/proc'
    root: bool = field(default_factory=lambda: os.geteuid() == 0)
    # where the daemons' binaries are found, and {user name: uid} of who runs them (a test's
    # /proc tree and binaries are its own)
    bin_path: str = DAEMON_PATH
    uids: dict = field(default_factory=dict)

    @property
    def dir(self):
        return self.settings['DIR']

    def at(self, directory):
        """The same cluster's settings and /proc, at state directory `directory`."""
        return dataclasses.replace(self, settings={**self.settings, 'DIR': directory})

    @property
    def paths(self):
        return paths(self.dir)

    def path(self, name, node=''):
        """The path `name` of paths(); %n, a node's part of it, becomes `node`."""
        return self.paths[name].replace('%n', node)

    def nodes(self):
        return node_names(self.settings['NODES'])

    def node_port(self, node):
        return node_ports(self.settings['NODES'], self.settings['PORT_BASE'])[node]

    def daemon_env(self):
        """The command prefix of every daemon: nothing from the caller's shell (venvs, an
        enclosing job's SLURM_* variables) leaks into it, and SIMSLURM_DIR marks it as ours."""
        return ['env', '-i', f'PATH={DAEMON_PATH}', 'HOME=/root', 'LANG=C.UTF-8',
                f'SIMSLURM_DIR={self.dir}']

    def slurmd_command(self, node):
        """How `node`'s slurmd is started (after daemon_env), by `up` and by a fault's restart alike."""
        return ['slurmd', '-N', node]

    def _read(self, pid, name, mode='r'):
        try:
            with open(f'{self.proc}/{pid}/{name}', mode) as f:
                return f.read()
        except OSError:
            return None

    def _uid(self, user):
        if user not in self.uids:
            try:
                self.uids[user] = pwd.getpwnam(user).pw_uid
            except KeyError:
                self.uids[user] = None
        return self.uids[user]

    def _runs_binary(self, pid, name):
        """True if `pid`'s executable is the `name` binary the daemons' PATH finds (also one
        replaced since it started, as a package upgrade does)."""
        binary = shutil.which(name, path=self.bin_path)
        try:
            exe = os.readlink(f'{self.proc}/{pid}/exe').removesuffix(' (deleted)')
        except OSError:
            return False
        return binary is not None and exe == os.path.realpath(binary)

    def is_our_daemon(self, pid, name, node=''):
        """True if `pid` is a live `name` daemon started for this SIMSLURM_DIR by root (and,
        given `node`, one whose command line names that node as a word)."""
        comm = self._read(pid, 'comm')
        if comm is None or comm.rstrip('\n') != name:
            return False
        if name in DAEMON_USERS:
            try:
                owner = os.stat(f'{self.proc}/{pid}').st_uid
            except OSError:
                return False
            if owner != self._uid(DAEMON_USERS[name]) or (self.root and not self._runs_binary(pid, name)):
                return False
        if self.root and name != 'munged':     # munged: see daemon_pid
            environ = self._read(pid, 'environ', 'rb')
            if environ is None or f'SIMSLURM_DIR={self.dir}'.encode() not in environ.split(b'\0'):
                return False
        if not node:
            return True
        cmdline = self._read(pid, 'cmdline', 'rb') or b''
        words = cmdline.replace(b'\0', b' ').decode(errors='replace')
        return re.search(rf'(?<!\w){re.escape(node)}(?!\w)', words, re.ASCII) is not None

    def our_pids(self, name, node=''):
        """The pids of all our `name` daemons (of `node`), lowest first, found in /proc: also one
        whose pid file was removed, or one of a node no longer configured."""
        try:
            pids = sorted(int(entry) for entry in os.listdir(self.proc) if entry.isdigit())
        except OSError:
            return []
        return [pid for pid in pids if self.is_our_daemon(pid, name, node)]

    def pidfile_of(self, name, node=''):
        files = {'slurmctld': 'CTLD_PIDFILE', 'slurmd': 'SLURMD_PIDFILE', 'slurmdbd': 'DBD_PIDFILE',
                 'mariadbd': 'MARIADBD_PIDFILE'}
        return MUNGE_PIDFILE if name == 'munged' else self.path(files[name], node)

    def daemon_pid(self, name, node='', pidfile_only=False):
        """The pid of our `name` daemon (slurmctld, slurmd of `node`, slurmdbd, mariadbd, munged),
        or None: the one finding of a daemon. Its pid file first, else the first of our_pids. Two
        take the pid file alone: munged, a system service that may not be ours (so any munged
        counts, and only its pid file says which), and start_daemon's wait (`pidfile_only`),
        where /proc could show the short-lived parent of the daemonizing fork."""
        digits = read_pid(self.pidfile_of(name, node))
        if digits and self.is_our_daemon(int(digits), name, node):
            return int(digits)
        if pidfile_only or name == 'munged':
            return None
        pids = self.our_pids(name, node)
        return pids[0] if pids else None

    def slurmd_node(self, pid):
        """The node of slurmd `pid`: the argument of its -N ('?' if none)."""
        args = (self._read(pid, 'cmdline', 'rb') or b'').split(b'\0')
        for flag, value in zip(args, args[1:]):
            if flag == b'-N':
                return value.decode(errors='replace')
        return '?'

    def start_daemon(self, label, name, node, log, command):
        """Start the self-daemonizing `name` (`node`: a slurmd's) with `command` and wait until its
        pid file names it. Its stdio goes to `log`, so errors from before it opens its own log (a
        bad config) land there too, and it keeps no pipe or lock of ours (only fds 0-2 pass)."""
        with open(log, 'ab') as out:
            started = succeeds([*self.daemon_env(), *command], stdout=out, stderr=out)
        if not started:
            show_log_tail(log)
            raise Failure(f'{label} failed to start; see {log}')
        for _ in range(100):
            pid = self.daemon_pid(name, node, pidfile_only=True)
            if pid:
                give_the_cores_to(pid, os.path.join(self.proc, 'self', 'mounts'))
                say(f'started {label} (pid {pid})')
                return
            time.sleep(0.1)
        show_log_tail(log)
        raise Failure(f'{label} did not come up within 10 s; see {log}')


def cgroup_roots(mounts='/proc/self/mounts'):
    """Where the cgroup hierarchies are mounted: {'v1': the v1 `cpu` one, 'v2': the unified one},
    each the first of its kind, either absent where it is not mounted (and both with no `mounts`)."""
    roots = {}
    if not os.path.exists(mounts):
        return roots
    with open(mounts) as stream:
        for line in stream:
            _, where, kind, options = line.split()[:4]
            if kind == 'cgroup' and 'cpu' in options.split(','):
                roots.setdefault('v1', where)
            elif kind == 'cgroup2':
                roots.setdefault('v2', where)
    return roots


def partition_cgroup(mounts='/proc/self/mounts', enable=True):
    """The cluster's cgroup: in the cgroup v1 `cpu` hierarchy where one is mounted, else in the
    cgroup v2 one whose root offers the cpu controller (turned on for its children, with
    `enable`); None where neither is (the jobs then share the cores with the machine's other work
    as any process does)."""
    roots = cgroup_roots(mounts)
    if 'v1' in roots:
        return os.path.join(roots['v1'], PARTITION_CGROUP)
    with contextlib.suppress(OSError):
        if 'v2' in roots and 'cpu' in open(os.path.join(roots['v2'], 'cgroup.controllers')).read().split():
            if enable:
                with open(os.path.join(roots['v2'], 'cgroup.subtree_control'), 'w') as stream:
                    stream.write('+cpu')
            return os.path.join(roots['v2'], PARTITION_CGROUP)
    return None


def cgroup_procs(cgroup):
    with open(os.path.join(cgroup, 'cgroup.procs')) as stream:
        return [int(line) for line in stream if line.strip()]


def empty_and_remove(cgroup, home):
    """Every process still in `cgroup` moved to `home`, and `cgroup` removed (tried for 5 s:
    a process may be forking meanwhile). True if it is gone."""
    for _ in range(50):
        try:
            left = cgroup_procs(cgroup)
        except FileNotFoundError:
            return True
        for proc in left:
            with contextlib.suppress(OSError):   # a process that ended meanwhile
                with open(os.path.join(home, 'cgroup.procs'), 'w') as stream:
                    stream.write(str(proc))
        with contextlib.suppress(OSError):
            os.rmdir(cgroup)
            return True
        time.sleep(0.1)
    return False


def remove_partition_cgroup(mounts='/proc/self/mounts'):
    """The cluster's cgroup removed (bin/simslurm down): its weight is for the cluster's daemons
    alone, and a process left in it would keep it. What was removed, or None."""
    cgroup = partition_cgroup(mounts, enable=False)
    if cgroup is None or not os.path.isdir(cgroup):
        return None
    return cgroup if empty_and_remove(cgroup, os.path.dirname(cgroup)) else None


def give_the_cores_to(pid, mounts='/proc/self/mounts'):
    """Move daemon `pid` into the cluster's cgroup (PARTITION_CGROUP above says why); the
    processes it starts later inherit it."""
    cgroup = partition_cgroup(mounts)
    if cgroup is None:
        return
    os.makedirs(cgroup, exist_ok=True)
    for name, weight in PARTITION_WEIGHT.items():
        if os.path.exists(os.path.join(cgroup, name)):
            with open(os.path.join(cgroup, name), 'w') as stream:
                stream.write(str(weight))
    with open(os.path.join(cgroup, 'cgroup.procs'), 'w') as stream:
        stream.write(str(pid))


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_pids(labelled):
    """Stop the processes of `labelled`, [(label, pid)]: SIGTERM to all at once (a Slurm daemon
    takes ~2 s to shut down), SIGKILL to any still there after 10 s."""
    for _, pid in labelled:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not any(alive(pid) for _, pid in labelled), 10)
    for label, pid in labelled:
        if alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            say(f'killed {label} (pid {pid}): it ignored SIGTERM for 10 s')
        else:
            say(f'stopped {label} (pid {pid})')


def parse_port_owner(ss_lines):
    """(name, pid) of the first process in `ss -ltnpH` lines, ('?', '?') if none is shown
    (another user's), None if there are no lines (nothing listens)."""
    if not ss_lines.strip():
        return None
    for line in ss_lines.splitlines():
        match = re.search(r'users:\(\("([^"]*)",pid=([0-9]*)', line)
        if match:
            return match[1], match[2]
    return '?', '?'


def port_owner(port):
    """(name, pid) of the process listening on TCP `port` (see parse_port_owner), or None."""
    lines = output_of(['ss', '-ltnpH', f'sport = :{port}'])
    return None if lines is None else parse_port_owner(lines)


def busy_port_error(port, label, var, owner, directory):
    """The one line `up` fails with when `owner` (port_owner) holds the `port` of `label`."""
    name, pid = owner
    if name == '?':
        return (f"port {port} (for {label}) is already in use by an unknown process; stop it "
                f"(see: ss -ltnp 'sport = :{port}') or set {var} to a free port")
    if name in ('slurmctld', 'slurmd', 'slurmdbd'):
        return (f'port {port} (for {label}) is already in use by {name} (pid {pid}), not started from '
                f'SIMSLURM_DIR={directory}; stop it (bin/simslurm down with its SIMSLURM_DIR, or kill {pid}) '
                f'or set {var} to a free port')
    return f'port {port} (for {label}) is already in use by {name} (pid {pid}); stop it (kill {pid}) or set {var} to a free port'


def check_ports(sim):
    """Fail on the first port of a daemon `up` will start that some other process holds."""
    wanted = [('slurmctld', '', sim.settings['CTLD_PORT'], 'slurmctld', 'SIMSLURM_CTLD_PORT')]
    wanted += [('slurmd', node, sim.node_port(node), f'slurmd {node}', 'SIMSLURM_SLURMD_PORT_BASE')
               for node in sim.nodes()]
    wanted.append(('slurmdbd', '', sim.settings['DBD_PORT'], 'slurmdbd', 'SIMSLURM_DBD_PORT'))
    for name, node, port, label, var in wanted:
        if sim.daemon_pid(name, node) is None:
            owner = port_owner(port)
            if owner:
                raise Failure(busy_port_error(port, label, var, owner, sim.dir))
