"""How fast this machine's cores are now, for the simulated partition's references.

The partition's "GPUs" are the cores of whatever machine runs it, and that machine's speed moves:
the quiet 2-core machine trained MNIST on one node at 1300 samples/s on 2026-11-24 and at 630-660
on 2026-11-25, so fixed references either failed a healthy run or let a halved one pass. So the
references file records, beside its figures, the rate of one fixed workload measured with them
(`$machine_speed`), and each run's expectations follow that workload's rate now: a rate expected
at R is expected at R * now / then, a time at T * then / now (mlcheck.judging.references).

The workload runs here, in a process of its own outside every job and its cgroups, before the
first job of the run starts (when the first test of the partition is set up; config/simulated.py
says `machine_speed: 'measured'`): a node slowed below its neighbours, a rank throttled in its
job, a slower image or a broken data path is not in it and still fails. Loading the config
measures and writes nothing, so a site's `reframe` with config/all.py never runs it. It is a few
training steps of a small convolution network in one thread, the shape of work the checks do.

The last reading is kept in the measuring user's own cache directory
($XDG_CACHE_HOME/mlcheck/speed.json, else ~/.cache/...): a file in a shared place, made by the
first user, was one the others could neither write nor trust.

    python -m mlcheck.simulated.speed          # measure now and print steps/s
"""

import json
import os
import subprocess
import sys
import time

from mlcheck import REPO

SPEED_FILE = 'speed.json'
FRESH_S = 600            # a measurement this recent is reused by later reframe runs
MEASURED = 'measured'    # the partition setting: measured as the run's first test is set up
_this_run = None         # the reading this process took or read (this_run)
REPEATS, REPEAT_S = 5, 0.3


def measure(repeats=REPEATS, seconds=REPEAT_S):
    """Training steps per second of the fixed workload in one thread (src/pytorch/speed_workload.py,
    which the CIFAR-100 program also runs in its job): the median of `repeats` spans of about
    `seconds` each, after one warm-up span."""
    sys.path.insert(0, os.path.join(REPO, 'src', 'pytorch'))
    import speed_workload
    return speed_workload.measure(repeats, seconds)


def speed_file(environ=os.environ):
    """The measuring user's own file: $XDG_CACHE_HOME/mlcheck/speed.json, else ~/.cache/mlcheck/."""
    cache = environ.get('XDG_CACHE_HOME') or os.path.join(environ.get('HOME') or os.path.expanduser('~'),
                                                          '.cache')
    return os.path.join(cache, 'mlcheck', SPEED_FILE)


def last(environ=os.environ):
    """The last measurement, {'steps_per_s': ..., 'measured_at': ...}, as the speed file holds it;
    OSError where the file is not this user's (it would not be the reading this user took)."""
    path = speed_file(environ)
    with open(path) as f:
        if os.fstat(f.fileno()).st_uid != os.getuid():
            raise PermissionError(f'{path} is not owned by this user')
        return json.load(f)


def now(environ=os.environ, python=sys.executable, clock=time.time):
    """The workload's steps/s, measured within the last FRESH_S seconds: read from the speed
    file, or measured now in a child process (this process may be one that must not import torch
    yet) and written there for the next reframe run."""
    path = speed_file(environ)
    try:
        recorded = last(environ)
        if 0 <= clock() - recorded['measured_at'] < FRESH_S:
            return float(recorded['steps_per_s'])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    done = subprocess.run([python, '-m', 'mlcheck.simulated.speed'], capture_output=True, text=True,
                          cwd=REPO)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ['no message'])[-1]
        raise RuntimeError(f'measuring the machine speed ({python} -m mlcheck.simulated.speed) failed: {said}')
    rate = float(done.stdout)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    partial = f'{path}.{os.getpid()}'
    with open(partial, 'w') as f:
        json.dump({'steps_per_s': rate, 'measured_at': clock()}, f)
    os.replace(partial, path)
    return rate


def this_run():
    """The machine's speed for this ReFrame run: now() at the first call, the same afterwards, so
    every test of a run is judged at one speed, read before its first job (not beside one)."""
    global _this_run
    if _this_run is None:
        _this_run = now()
    return _this_run


if __name__ == '__main__':
    print(f'{measure():.2f}')
