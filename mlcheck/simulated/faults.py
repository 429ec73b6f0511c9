"""Faults injected at one node of the simulated cluster, below anything the programs or the judge
read: each a context manager that undoes itself however its block ends.

- cpu_quota(node, share): the node's slurmd in a cgroup v1 `cpu` child with a CFS quota of
  `share` of one CPU's period; the job steps it starts inherit the cgroup (proctrack/linuxproc
  does not move them), so everything that runs on the node gets at most that CPU time.
- hidden_path(node, path): the node's slurmd restarted in a mount namespace of its own where
  `path` is an empty read-only tmpfs: on that node only, the directory is there and empty (a
  dataset or bind source that did not mount after maintenance).
- other_file(node, path, text): the node's slurmd restarted in a mount namespace of its own where
  the file `path` reads `text` (a read-only bind of a copy): on that node only, e.g. a library's
  version file, as when one node kept an older package after maintenance.
- slow_links(pairs, kbytes_per_s): the traffic between each pair of nodes, both ways, limited by
  nftables: each node's slurmd in a cgroup v2 group of its own, whose sockets its ranks inherit;
  a packet is marked with its sender's node as it leaves, and dropped on arrival at a socket of
  the other node beyond the rate, so TCP backs off as on a degraded link. The ranks of one node
  still talk at full speed, and a 1-node job is untouched. (Not by address: every node is
  127.0.0.1, and gloo connects from an unbound socket; this kernel has no `tc` qdiscs.)

All need root and a running cluster (bin/simslurm up), and must be entered before the jobs
start: a step already running keeps its cgroup and namespace. While one is in place, SIGTERM (a
CI timeout) ends the process with SystemExit, so the undo runs; what a SIGKILL leaves behind,
bin/simslurm up removes (clear_leftovers).
"""

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time

from mlcheck.simulated.cluster import settings_from_env
from mlcheck.simulated.processes import DAEMON_PATH, Sim, alive, cgroup_roots, empty_and_remove

CPU_CGROUP = '/sys/fs/cgroup/cpu'
NFT_CGROUP_ROOT = '/sys/fs/cgroup'      # nftables names a cgroup v2 group relative to this
LINK_TABLE = 'mlcheck_fault_links'
LINK_MARK = 0x6d6c00                    # + the node's index: who sent a packet
CFS_PERIOD_US = 100_000
WAIT_S = 20


def cluster(environ=None):
    """The running cluster of SIMSLURM_DIR (bin/simslurm's settings), its state directory
    claimed as every subcommand claims it; a RuntimeError where there is none."""
    from mlcheck.simulated.install import claimed
    sim = claimed(Sim(settings_from_env(os.environ if environ is None else environ)))
    if sim is None:
        raise RuntimeError('no simulated cluster: SIMSLURM_DIR does not exist')
    return sim


def slurmd_pid(node, sim=None):
    """The pid of `node`'s slurmd: root's own, from the slurmd binary, started for the cluster
    (Sim.daemon_pid; a pid file alone names nothing); a RuntimeError when it is not running."""
    sim = sim or cluster()
    pid = sim.daemon_pid('slurmd', node)
    if pid is None:
        raise RuntimeError(f"no slurmd running for {node} (pid file {sim.path('SLURMD_PIDFILE', node)})")
    return pid


def cpu_cgroup_of(pid):
    """The cgroup v1 `cpu` directory that `pid` is in."""
    for line in open(f'/proc/{pid}/cgroup'):
        _, controllers, where = line.rstrip('\n').split(':', 2)
        if 'cpu' in controllers.split(','):
            return os.path.join(CPU_CGROUP, where.lstrip('/'))
    raise RuntimeError(f'pid {pid} is in no cgroup v1 cpu hierarchy')


def _write(path, text):
    with open(path, 'w') as stream:
        stream.write(str(text))


FAULT_PREFIX = 'mlcheck-fault'            # every fault's cgroup name starts with it
SESSIONS = 'faults'                       # below the cluster's run directory: a file per live session
_entered = []                             # this process's faults in place (they nest)


@contextlib.contextmanager
def in_place():
    """While this process holds a fault in place, a file named by its pid in the cluster's run
    directory: `up` (clear_leftovers) then leaves every fault alone, another session's being
    live, not left over (issue 48)."""
    try:
        folder = os.path.join(cluster().path('RUN_DIR'), SESSIONS)
        os.makedirs(folder, mode=0o755, exist_ok=True)
        marker = os.path.join(folder, str(os.getpid()))
    except (RuntimeError, OSError, ValueError):     # no cluster here: nothing to tell apart
        marker = None
    if marker and not _entered:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))
    _entered.append(marker)
    try:
        yield
    finally:
        _entered.pop()
        if marker and not _entered:
            with contextlib.suppress(FileNotFoundError):
                os.remove(marker)


def live_sessions(sim):
    """The pids of the processes that hold faults of `sim`'s cluster in place now."""
    folder = os.path.join(sim.path('RUN_DIR'), SESSIONS)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(int(name) for name in names
                  if name.isdecimal() and os.path.exists(os.path.join(sim.proc, name)))


@contextlib.contextmanager
def sigterm_unwinds():
    """SIGTERM raises SystemExit in the main thread for the block's length (Python's default would
    end the process at once, skipping every `finally`: the fault would stay in place)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise SystemExit(128 + signum)
    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def cpu_quota(node, share):
    """`node` (its slurmd and every task it starts meanwhile) limited to `share` of one CPU."""
    pid = slurmd_pid(node)
    home = cpu_cgroup_of(pid)
    cgroup = os.path.join(CPU_CGROUP, f'{FAULT_PREFIX}-{node}')
    os.makedirs(cgroup, exist_ok=True)
    try:
        with sigterm_unwinds(), in_place():
            _write(os.path.join(cgroup, 'cpu.cfs_period_us'), CFS_PERIOD_US)
            _write(os.path.join(cgroup, 'cpu.cfs_quota_us'), max(1000, int(share * CFS_PERIOD_US)))
            # the cluster's weight kept (processes.PARTITION_WEIGHT): only the quota slows the node
            _write(os.path.join(cgroup, 'cpu.shares'), open(os.path.join(home, 'cpu.shares')).read())
            _write(os.path.join(cgroup, 'cgroup.procs'), pid)
            yield cgroup
    finally:
        empty_and_remove(cgroup, home)


def _restart_slurmd(node, old, wrap):
    """Stop `node`'s slurmd (pid `old`) and start it again inside `wrap` (a command prefix),
    rebuilt from the cluster's own settings as `up` starts it (never from the old process's
    command line or environment: a pid file could name anything); the new pid."""
    sim = cluster()
    home = _cpu_home_of(old)    # the new one runs where the old one did (the cluster's cgroup)
    os.kill(old, signal.SIGTERM)
    _wait(lambda: not os.path.exists(f'/proc/{old}'), f'slurmd of {node} (pid {old}) to stop')
    subprocess.run([*wrap, *sim.daemon_env(), *sim.slurmd_command(node)], env={'PATH': DAEMON_PATH},
                   check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL,
                   preexec_fn=home and (lambda: _write(os.path.join(home, 'cgroup.procs'), os.getpid())))
    new = {}

    def started():
        # the pid file's, as start_daemon waits: /proc can show the daemonizing fork's short-lived
        # parent first (a fault test once read the mounts of a pid that had just exited)
        new['pid'] = sim.daemon_pid('slurmd', node, pidfile_only=True)
        return new['pid'] not in (None, old)
    _wait(started, f'slurmd of {node} to start again')
    _wait(lambda: _responding(node), f'{node} to respond to slurmctld')
    return new['pid']


def _cpu_home_of(pid):
    """The cgroup that weighs `pid`'s CPU time: its v1 `cpu` group, else its v2 group; or None."""
    with contextlib.suppress(RuntimeError):
        return cpu_cgroup_of(pid)
    with contextlib.suppress(RuntimeError):
        return cgroup2_of(pid, cgroup2_root())
    return None


def _responding(node):
    done = subprocess.run(['scontrol', 'show', 'node', node], capture_output=True, text=True)
    state = next((w.split('=', 1)[1] for w in done.stdout.split() if w.startswith('State=')), '')
    return done.returncode == 0 and 'NOT_RESPONDING' not in state and 'DOWN' not in state


def _wait(condition, what):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f'timed out after {WAIT_S} s waiting for {what}')
        time.sleep(0.1)


@contextlib.contextmanager
def hidden_path(node, path):
    """`path` empty on `node` only: its slurmd restarted in a private mount namespace with an
    empty read-only tmpfs over `path`; restarted plainly afterwards."""
    old = slurmd_pid(node)
    hide = 'mount -t tmpfs -o ro,size=1m mlcheck-fault "$1" && shift && exec "$@"'
    with in_place():
        pid = _restart_slurmd(node, old, ['unshare', '--mount', '--propagation', 'private',
                                          'sh', '-c', hide, 'hide', path])
        try:
            with sigterm_unwinds():
                yield pid
        finally:
            _restart_slurmd(node, slurmd_pid(node), [])


@contextlib.contextmanager
def other_file(node, path, text):
    """The file `path` reads `text` on `node` only: its slurmd restarted in a private mount
    namespace with a copy bound read-only over `path`; restarted plainly afterwards."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix='mlcheck-fault-') as scratch:
        copy = os.path.join(scratch, os.path.basename(path))
        with open(copy, 'w') as stream:
            stream.write(text)
        os.chmod(scratch, 0o755)
        os.chmod(copy, 0o644)
        bind = 'mount --bind -o ro "$1" "$2" && shift 2 && exec "$@"'
        with in_place():
            pid = _restart_slurmd(node, slurmd_pid(node), [
                'unshare', '--mount', '--propagation', 'private', 'sh', '-c', bind, 'bind', copy, path])
            try:
                yield pid
            finally:
                _restart_slurmd(node, slurmd_pid(node), [])


def cgroup2_root(mounts='/proc/self/mounts'):
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup/unified on this hybrid machine)."""
    root = cgroup_roots(mounts).get('v2')
    if root is None:
        raise RuntimeError('no cgroup v2 hierarchy is mounted: the link fault needs one')
    return root


def cgroup2_of(pid, root):
    """The cgroup v2 directory that `pid` is in."""
    for line in open(f'/proc/{pid}/cgroup'):
        if line.startswith('0::'):
            return os.path.join(root, line.rstrip('\n')[3:].lstrip('/'))
    raise RuntimeError(f'pid {pid} is in no cgroup v2 group')


def link_rules(pairs, groups):
    """The nftables script that limits the traffic of each (node, node, kbytes_per_s) in `pairs`,
    both ways; `groups`: {node: its cgroup v2 directory}. A packet's mark says the node it left,
    the socket it reaches says the node it arrives at (nftables reads the group relative to
    NFT_CGROUP_ROOT, at the group's depth below the hierarchy's `root`)."""
    root = cgroup2_root()

    def group(node):
        path = groups[node]
        return (f'socket cgroupv2 level {os.path.relpath(path, root).count(os.sep) + 1} '
                f'"{os.path.relpath(path, NFT_CGROUP_ROOT)}"')
    index = {node: i for i, node in enumerate(sorted(groups))}
    lines = [f'add table inet {LINK_TABLE}',
             f'add chain inet {LINK_TABLE} out {{ type filter hook output priority 0; }}',
             f'add chain inet {LINK_TABLE} in {{ type filter hook input priority 0; }}']
    lines += [f'add rule inet {LINK_TABLE} out {group(node)} meta mark set {LINK_MARK + i:#x}'
              for node, i in index.items()]
    lines += [f'add rule inet {LINK_TABLE} in meta mark {LINK_MARK + index[a]:#x} {group(b)} '
              f'limit rate over {rate} kbytes/second drop'
              for x, y, rate in pairs for a, b in ((x, y), (y, x))]
    return '\n'.join(lines) + '\n'


@contextlib.contextmanager
def slow_links(pairs, kbytes_per_s):
    """The links between each pair of nodes in `pairs` limited to `kbytes_per_s` each way."""
    pairs = [(a, b, kbytes_per_s) for a, b in pairs]
    if any(a == b for a, b, _ in pairs):
        raise ValueError(f'a link joins two nodes, not a node to itself: {pairs}')
    root = cgroup2_root()
    nodes = sorted({n for a, b, _ in pairs for n in (a, b)})
    with contextlib.ExitStack() as undo:
        undo.enter_context(sigterm_unwinds())
        undo.enter_context(in_place())
        groups = {}
        for node in nodes:
            pid = slurmd_pid(node)
            home, group = cgroup2_of(pid, root), os.path.join(root, f'{FAULT_PREFIX}-link-{node}')
            os.makedirs(group, exist_ok=True)
            undo.callback(empty_and_remove, group, home)
            _write(os.path.join(group, 'cgroup.procs'), pid)
            groups[node] = group
        subprocess.run(['nft', '-f', '-'], input=link_rules(pairs, groups), text=True, check=True)
        undo.callback(subprocess.run, ['nft', 'delete', 'table', 'inet', LINK_TABLE], check=True)
        yield LINK_TABLE


def clear_leftovers(sim, cgroup_roots=None, table=LINK_TABLE, proc='/proc'):
    """Undo what faults of a killed process left (bin/simslurm up calls it): every fault cgroup
    below `cgroup_roots` (default: the cpu and cgroup v2 hierarchies), its processes moved to the
    hierarchy's root; the nftables `table`; a slurmd of `sim` in a mount namespace other than
    ours (hidden_path's), stopped so that `up` starts it plainly. What it removed, one line each;
    nothing while a session holds faults in place (live_sessions): they are not left over."""
    if live_sessions(sim):
        return []
    if cgroup_roots is None:
        cgroup_roots = [CPU_CGROUP]
        with contextlib.suppress(OSError, RuntimeError):
            cgroup_roots.append(cgroup2_root())
    removed = []
    for root in cgroup_roots:
        with contextlib.suppress(FileNotFoundError):
            for name in sorted(os.listdir(root)):
                if name.startswith(FAULT_PREFIX) and os.path.isdir(os.path.join(root, name)):
                    empty_and_remove(os.path.join(root, name), root)
                    removed.append(f'cgroup {os.path.join(root, name)}')
    if shutil.which('nft') and subprocess.run(['nft', 'list', 'table', 'inet', table],
                                              capture_output=True).returncode == 0:
        subprocess.run(['nft', 'delete', 'table', 'inet', table], check=True)
        removed.append(f'nftables table inet {table}')
    ours = os.readlink(f'{proc}/self/ns/mnt')
    for node in sim.nodes():
        pid = sim.daemon_pid('slurmd', node)
        with contextlib.suppress(OSError):
            if pid and os.readlink(f'{proc}/{pid}/ns/mnt') != ours:
                os.kill(pid, signal.SIGTERM)
                _wait(lambda: not alive(pid), f'slurmd of {node} (pid {pid}) to stop')
                removed.append(f'slurmd of {node} in a mount namespace of its own (pid {pid})')
    return removed
