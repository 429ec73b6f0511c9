"""The simulated cluster's authentication and Slurm daemons: munged, slurmctld and one slurmd per
node; waiting for the nodes, bringing back a crashed one, cancelling jobs and stopping (bin/simslurm
up and down). Standard library only: bin/simslurm runs this with the system's python3.
"""

import glob
import os
import shutil
import subprocess
import sys
import time

from mlcheck.simulated.processes import (Failure, output_of, own_file, read_pid, remove_files, say, show_log_tail,
                                         stop_pids, succeeds, wait_until, write_new)

MUNGE_RUNDIR = '/run/munge'
# a usable node: it responds and is not down or drained
HEALTHY_STATES = ('idle', 'mix', 'alloc', 'comp', 'plnd')
# a node left so by an earlier run, which `up` resumes ('*', not responding yet, is not one)
RESUMABLE_STATES = ('down', 'drain', 'drng', 'fail', 'failg')


def munge_works():
    """True if `munge -n | unmunge` succeeds."""
    credential = output_of(['munge', '-n'])
    return credential is not None and succeeds(['unmunge'], input=credential.encode(), stdin=None)


def start_munged(sim):
    if munge_works():
        return
    log = os.path.join(sim.path('LOG_DIR'), 'munged.log')
    pid = sim.daemon_pid('munged')
    if pid:
        raise Failure(f"munged (pid {pid}) is running but 'munge -n | unmunge' fails; see {log} or "
                      f"/var/log/munge/munged.log, or restart it: kill {pid} && bin/simslurm up")
    # munged refuses to run as root (it checks ownership of /var/lib/munge, /etc/munge), so run
    # it as its own user, like the packaged service does
    os.makedirs(MUNGE_RUNDIR, exist_ok=True)
    os.chmod(MUNGE_RUNDIR, 0o755)
    shutil.chown(MUNGE_RUNDIR, 'munge', 'munge')
    own_file(log, 'munge', 0o640)
    try:
        proc = subprocess.run(['runuser', '-u', 'munge', '--', *sim.daemon_env(), 'munged', f'--log-file={log}'],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        failed, err = proc.returncode != 0, proc.stdout.decode(errors='replace').rstrip('\n')
    except OSError as error:
        failed, err = True, str(error)
    if failed:
        print(err, file=sys.stderr, flush=True)
        show_log_tail(log)
        raise Failure(f'munged failed to start; see the output above and {log}')
    if not wait_until(munge_works, 5):
        show_log_tail(log)
        raise Failure(f"munged started but 'munge -n | unmunge' still fails after 5 s; see {log}")
    # remember that we started it, so that `down` stops only our munged
    pid = sim.daemon_pid('munged')
    write_new(os.path.join(sim.path('RUN_DIR'), 'munged.started-by-simslurm'), f'{pid}\n' if pid else '')
    say(f"started munged (pid {pid or '?'})")


def stop_our_munged(sim):
    """munged, if `up` started it (a munged of the system's is left alone)."""
    started = os.path.join(sim.path('RUN_DIR'), 'munged.started-by-simslurm')
    if not os.path.exists(started):
        return
    pid = sim.daemon_pid('munged')
    if pid and str(pid) == read_pid(started):
        stop_pids([('munged', pid)])
    remove_files(started)


def start_slurmctld(sim):
    if not sim.daemon_pid('slurmctld'):
        sim.start_daemon('slurmctld', 'slurmctld', '', sim.path('CTLD_LOG'), ['slurmctld'])


def node_has_live_steps(sim, node):
    """True if a slurmstepd of `node` is alive: each listens on a socket in the node's spool dir."""
    spool = sim.path('SPOOL_DIR', node) + '/'
    sockets = output_of(['ss', '-xlpnH']) or ''
    return any(spool in line and 'pid=' in line for line in sockets.splitlines())


def fail_jobs_of_crashed_node(sim, node):
    """A node whose slurmd died together with its job steps (a node crash): a restarted slurmd
    knows nothing of them, and slurmctld, which cannot see that the "node" rebooted, would wait
    for them until the jobs' time limits. Mark the node DOWN first, so Slurm ends those jobs now
    (NODE_FAIL, and srun says "Node failure on NODE"); wait_for_nodes resumes it. A slurmd that
    died alone leaves its steps running, and the new one takes them over: nothing to do."""
    jobs = output_of(['squeue', '-h', '-w', node, '-t', 'R,CG', '-o', '%A'], timeout=10)
    if not jobs or not jobs.strip() or node_has_live_steps(sim, node):
        return
    succeeds(['scontrol', 'update', f'nodename={node}', 'state=down',
              'reason=simslurm: slurmd and job steps were gone'], timeout=10)
    say(f"{node} had crashed: marked it down, which ends its jobs {' '.join(jobs.splitlines())}")


def start_slurmds(sim):
    for node in sim.nodes():
        if sim.daemon_pid('slurmd', node):
            continue
        if sim.daemon_pid('slurmctld'):
            fail_jobs_of_crashed_node(sim, node)
        sim.start_daemon(f'slurmd {node}', 'slurmd', node, sim.path('SLURMD_LOG', node),
                         sim.slurmd_command(node))


def node_states():
    """sinfo's "node state" lines, one per node slurmctld knows; None if sinfo fails."""
    return output_of(['sinfo', '-h', '-N', '-o', '%N %t'], timeout=15)


def state_of(states, node):
    """`node`'s state in node_states() text ('' if it is not there)."""
    for line in states.splitlines():
        fields = line.split()
        if fields and fields[0] == node:
            return fields[1] if len(fields) > 1 else ''
    return ''


def all_nodes_healthy(sim, states=None):
    states = node_states() if states is None else states
    return states is not None and all(state_of(states, node) in HEALTHY_STATES for node in sim.nodes())


def check_daemons_alive(sim):
    """Fail (with the daemon's log) if slurmctld or a slurmd has died."""
    logs = [('slurmctld', '', sim.path('CTLD_LOG'))]
    logs += [('slurmd', node, sim.path('SLURMD_LOG', node)) for node in sim.nodes()]
    for name, node, log in logs:
        if not sim.daemon_pid(name, node):
            show_log_tail(log)
            raise Failure(f"{name}{' ' + node if node else ''} died; see {log}")


def wait_for_nodes(sim):
    """Wait until all nodes are usable; resume nodes left down or drained by an earlier run
    (slurmctld restores node states from StateSaveLocation)."""
    timeout = sim.settings['TIMEOUT']
    deadline = time.monotonic() + timeout
    while True:
        check_daemons_alive(sim)
        if all_nodes_healthy(sim):
            return
        if time.monotonic() >= deadline:
            break
        states = node_states() or ''
        for node in sim.nodes():
            if state_of(states, node) in RESUMABLE_STATES:
                succeeds(['scontrol', 'update', f'nodename={node}', 'state=resume'], timeout=10)
        time.sleep(1)
    print(f'node states after {timeout} s:', file=sys.stderr, flush=True)
    succeeds(['sinfo', '-h', '-N', '-o', '%N %t'], timeout=15, stdout=2)
    succeeds(['sinfo', '-R'], timeout=10, stdout=2, stderr=None)
    show_log_tail(sim.path('CTLD_LOG'))
    raise Failure(f"nodes did not become idle within {timeout} s (SIMSLURM_TIMEOUT); see the reasons above "
                  f"and the logs in {sim.path('LOG_DIR')}")


def cancel_jobs(sim):
    """Cancel all jobs, so that no job step outlives its slurmd; wait a little for them to end."""
    if not sim.daemon_pid('slurmctld'):
        return
    jobs = output_of(['squeue', '-h', '-o', '%A'], timeout=10)
    if not jobs or not jobs.strip():
        return
    succeeds(['scancel', *jobs.split()], timeout=10)
    say(f"cancelled jobs: {' '.join(jobs.splitlines())}")
    wait_until(lambda: not (output_of(['squeue', '-h', '-t', 'R,CG,S', '-o', '%A'], timeout=10) or '').strip(),
               10, step=0.5)


def stop_slurm_daemons(sim):
    """All our slurmd's (also of nodes no longer configured: an earlier run may have had more),
    then slurmctld; their pid files go."""
    slurmds = [(f'slurmd {sim.slurmd_node(pid)}', pid) for pid in sim.our_pids('slurmd')]
    if slurmds:
        stop_pids(slurmds)
    pid = sim.daemon_pid('slurmctld')
    if pid:
        stop_pids([('slurmctld', pid)])
    prefix, _, suffix = sim.paths['SLURMD_PIDFILE'].partition('%n')
    remove_files(*glob.glob(glob.escape(prefix) + '*' + glob.escape(suffix)), sim.path('CTLD_PIDFILE'))


def any_slurm_daemon_running(sim):
    return bool(sim.our_pids('slurmctld') or sim.our_pids('slurmd'))

