"""Faults injected at one node of the simulated cluster, below anything the programs or the judge
read: each a context manager that undoes itself however its block ends.

- cpu_quota(node, share): the node's slurmd in a cgroup v1 `cpu` child with a CFS quota of
  `share` of one CPU's period; the job steps it starts inherit the cgroup (proctrack/linuxproc
  does not move them), so everything that runs on the node gets at most that CPU time.
- hidden_path(node, path): the node's slurmd restarted in a mount namespace of its own where
  `path` is an empty read-only tmpfs: on that node only, the directory is there and empty (a
  dataset or bind source that did not mount after maintenance).

Both need root and a running cluster (bin/simslurm up), and must be entered before the jobs
start: a step already running keeps its cgroup and namespace.
"""

import contextlib
import os
import signal
import subprocess
import time

from mlcheck.simulated.cluster import DEFAULT_DIR, paths

CPU_CGROUP = '/sys/fs/cgroup/cpu'
CFS_PERIOD_US = 100_000
WAIT_S = 20


def slurmd_pid(node, directory=None):
    """The pid of `node`'s slurmd, from its pid file; a RuntimeError when it is not running."""
    path = paths(directory or os.environ.get('SIMSLURM_DIR') or DEFAULT_DIR)['SLURMD_PIDFILE']
    path = path.replace('%n', node)
    try:
        pid = int(open(path).read().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        raise RuntimeError(f'no slurmd running for {node} (pid file {path})') from None
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


def _procs(cgroup):
    with open(os.path.join(cgroup, 'cgroup.procs')) as stream:
        return [int(line) for line in stream if line.strip()]


@contextlib.contextmanager
def cpu_quota(node, share):
    """`node` (its slurmd and every task it starts meanwhile) limited to `share` of one CPU."""
    pid = slurmd_pid(node)
    home = cpu_cgroup_of(pid)
    cgroup = os.path.join(CPU_CGROUP, f'mlcheck-fault-{node}')
    os.makedirs(cgroup, exist_ok=True)
    try:
        _write(os.path.join(cgroup, 'cpu.cfs_period_us'), CFS_PERIOD_US)
        _write(os.path.join(cgroup, 'cpu.cfs_quota_us'), max(1000, int(share * CFS_PERIOD_US)))
        _write(os.path.join(cgroup, 'cgroup.procs'), pid)
        yield cgroup
    finally:
        # everything still inside (the slurmd, steps that outlived the block) goes back
        for _ in range(50):
            try:
                left = _procs(cgroup)
            except FileNotFoundError:
                break
            for proc in left:
                with contextlib.suppress(OSError):   # a process that ended meanwhile
                    _write(os.path.join(home, 'cgroup.procs'), proc)
            with contextlib.suppress(OSError):
                os.rmdir(cgroup)
                break
            time.sleep(0.1)


def _restart_slurmd(node, old, wrap):
    """Stop `node`'s slurmd (pid `old`) and start it again with the same command line and
    environment, inside `wrap` (a command prefix); the new pid."""
    argv = open(f'/proc/{old}/cmdline', 'rb').read().split(b'\0')[:-1]
    env = dict(item.split(b'=', 1) for item in open(f'/proc/{old}/environ', 'rb').read().split(b'\0')
               if b'=' in item)
    os.kill(old, signal.SIGTERM)
    _wait(lambda: not os.path.exists(f'/proc/{old}'), f'slurmd of {node} (pid {old}) to stop')
    subprocess.run([*wrap, *argv], env=env, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    new = {}

    def started():
        try:
            new['pid'] = slurmd_pid(node)
        except RuntimeError:
            return False
        return new['pid'] != old
    _wait(started, f'slurmd of {node} to start again')
    _wait(lambda: _responding(node), f'{node} to respond to slurmctld')
    return new['pid']


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
    hide = f'mount -t tmpfs -o ro,size=1m mlcheck-fault "$1" && shift && exec "$@"'
    pid = _restart_slurmd(node, old, ['unshare', '--mount', '--propagation', 'private',
                                      'sh', '-c', hide, 'hide', path])
    try:
        yield pid
    finally:
        _restart_slurmd(node, slurmd_pid(node), [])
