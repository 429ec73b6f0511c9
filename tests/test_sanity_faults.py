"""Why a run broke off, from saved outputs of real faulty runs on the simulated partition.

tests/data/faults/sim_<fault>.out/.err are the stdout and stderr (srun --label) of 2-node jobs
(4 gloo ranks on nid001-002) run by ReFrame with -S fault=... and 10 s timeouts:
crash:1:2, hang-rendezvous:3, hang-collective:2:2, and a node loss (nid002's slurmd, job step
and ranks killed, as tests/test_faults_sim.py does). Each case is also varied into its neighbours.
"""

import re

import pytest

from mlcheck.judging import failures
from saved_outputs import SIM_OUT, fact_line, judged, saved, saved_job, without_lines

def test_crash_names_the_rank_its_node_and_its_exception(sim):
    # ranks 0, 2, 3 also failed, with "Connection closed by peer": a consequence, not the cause
    assert judged(sim, *saved_job('faults/sim_crash'), fault='crash:1:2', min_accuracy=0.9) == [
        'rank 1 on nid001 failed: RuntimeError: injected fault: rank 1 crashed in epoch 2']


def test_crash_without_a_traceback_is_named_from_srun(sim):
    """A rank killed by a signal (segfault in a library) leaves only srun's line."""
    stdout, stderr = saved_job('faults/sim_crash')
    stderr = without_lines(stderr, r'^1: ').replace('nid001: task 1: Exited with exit code 1',
                                              'nid001: task 1: Segmentation fault (core dumped)')
    assert judged(sim, stdout, stderr, min_accuracy=0.9) == [
        'rank 1 on nid001 failed: Segmentation fault (core dumped) (srun)']


@pytest.mark.parametrize('exception', ['StopIteration',
                                       'torch._dynamo.exc.Unsupported: call_function in skip_files'])
def test_an_exception_of_any_name_is_named_by_the_last_line_of_its_traceback(sim, exception):
    """Issue 18 item 8: an exception whose name does not end in Error or Exception was not
    recognised; the run was judged as if complete ('did not finish', 'no solo line')."""
    stdout, stderr = saved_job('faults/sim_crash')
    stderr = stderr.replace('[rank1]: RuntimeError: injected fault: rank 1 crashed in epoch 2',
                            f'[rank1]: {exception}')
    assert judged(sim, stdout, stderr, min_accuracy=0.9) == [f'rank 1 on nid001 failed: {exception}']
    # alone: every rank ended with it, and nothing else was said
    stderr = ''.join(f'{r}: [rank{r}]: Traceback (most recent call last):\n'
                     f'{r}: [rank{r}]:   File "train.py", line 9, in <module>\n'
                     f'{r}: [rank{r}]:     next(batches)\n{r}: [rank{r}]: {exception}\n' for r in range(4))
    stderr += 'srun: error: nid001: tasks 0-1: Exited with exit code 1\n'
    stderr += 'srun: error: nid002: tasks 2-3: Exited with exit code 1\n'
    assert judged(sim, without_lines(stdout, r'"event": "done"'), stderr, min_accuracy=0.9) == [
        f'ranks 0-3 on nid001, nid002 failed: {exception}']


def test_the_same_error_on_every_rank_is_one_line(sim):
    """E.g. a corrupt dataset that every rank fails to read."""
    stdout, stderr = saved_job('faults/sim_crash')
    stderr = re.sub(r'RuntimeError: .*', 'RuntimeError: invalid magic number 2049 in train-images-idx3-ubyte',
                    stderr)
    assert judged(sim, stdout, stderr, min_accuracy=0.9) == [
        'ranks 0-3 on nid001, nid002 failed: RuntimeError: invalid magic number 2049 in train-images-idx3-ubyte']


def test_rank_that_never_arrived_at_the_rendezvous(sim):
    assert judged(sim, *saved_job('faults/sim_hang-rendezvous'), fault='hang-rendezvous:3', min_accuracy=0.9) == [
        'rank 3 on nid002 never arrived at the rendezvous at nid001:10067; the others gave up after '
        '10 s (DistStoreError: wait timeout after 10000ms, keys: /0//cpu//0/0)']


def test_rank_that_could_not_reach_the_master(sim):
    """As captured from an image without /etc/hosts: every rank arrived, rank 2 could not resolve
    nid001, and the others were waiting for it. Not a hang inside training."""
    stdout = ''.join(fact_line({'event': 'rendezvous', 'master': 'nid001:10619', 'node': f'nid00{1 + r // 2}',
                                'rank': r, 'timeout': 180.0, 'world_size': 4}, task=r) for r in (2, 0, 3, 1))
    stderr = ('2: torch.distributed.DistNetworkError: The client socket has timed out after 180000ms '
              'while trying to connect to (nid001, 10619).\n'
              'srun: error: nid002: task 2: Exited with exit code 1\n'
              'srun: launch/slurm: _step_signal: Terminating StepId=619.0\n'
              '0: slurmstepd-nid001: error: *** STEP 619.0 ON nid001 CANCELLED AT 2026-11-22T02:22:06 ***\n'
              'srun: error: nid002: task 3: Terminated\n'
              'srun: error: nid001: tasks 0-1: Terminated\n')
    assert judged(sim, stdout, stderr, min_accuracy=0.9) == [
        'rank 2 on nid002 could not connect to the rendezvous at nid001:10619: check that the nodes '
        'resolve its name and reach it (DistNetworkError: The client socket has timed out after '
        '180000ms while trying to connect to (nid001, 10619).)']


def test_rank_that_stopped_inside_training(sim):
    found = judged(sim, *saved_job('faults/sim_hang-collective'), fault='hang-collective:2:2', min_accuracy=0.9)
    assert found == [
        'rank 2 on nid002 stopped responding after epoch 1: ranks 0-1, 3 timed out waiting for it '
        'in a collective (RuntimeError: Timed out waiting 10000ms for recv operation to complete)']


def test_lost_node_is_named_with_its_ranks(sim):
    assert judged(sim, *saved_job('faults/sim_nodeloss'), min_accuracy=0.9) == [
        'node nid002 was lost during the job (srun: Node failure); ranks 2-3 ran there and ended '
        'without an error']


def test_job_that_hit_its_time_limit_says_so(sim):
    """Every rank blocked with no timeout of its own: only Slurm's time limit ended the job."""
    stdout, _ = saved_job('faults/sim_hang-collective')
    stderr = ('srun: Job step aborted: Waiting up to 4 seconds for job step to finish.\n'
              'slurmstepd-nid001: error: *** JOB 69 ON nid001 CANCELLED AT 2026-11-21T23:50:10 '
              'DUE TO TIME LIMIT ***\n')
    assert judged(sim, stdout, stderr, min_accuracy=0.9) == [
        'ranks 0-3 did not finish: Slurm ended the job (time limit)']


def test_fault_asked_for_but_not_injected_fails(sim):
    """A script that ignores MLCHECK_FAULT would make a fault test pass for nothing."""
    stdout, stderr = saved_job('faults/sim_crash')
    good = saved(SIM_OUT)
    assert judged(sim, good, '', fault='crash:1:2', min_accuracy=0.9) == [
        "fault 'crash:1:2' was asked for, but no rank injected it (does the training script read "
        "MLCHECK_FAULT?)"]
    found = judged(sim, stdout, stderr, fault='crash:1:2', min_accuracy=0.9)
    assert found[0].startswith('rank 1 on nid001 failed')


def test_good_run_with_harmless_stderr_is_sane(sim):
    """Warnings in stderr of a run where every rank finished explain nothing and fail nothing."""
    good = saved(SIM_OUT)
    stderr = '0: UserWarning: TypedStorage is deprecated\n2: [W1121 socket.cpp:469] timed out\n'
    assert judged(sim, good, stderr, min_accuracy=0.9) == []


@pytest.mark.parametrize('line, error', [
    ('[rank1]: RuntimeError: boom', 'RuntimeError: boom'),
    ('torch.distributed.DistStoreError: wait timeout after 10000ms', 'DistStoreError: wait timeout after 10000ms'),
    ('RuntimeError: [/__w/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer',
     'RuntimeError: Connection closed by peer'),
    ('KeyboardInterrupt', 'KeyboardInterrupt'),
    ('mnist_DDP.py: error: argument --epochs: invalid int value', 'mnist_DDP.py: error: argument --epochs: invalid int value'),
    ('rank-env.sh: error: SLURM_PROCID is not set', 'rank-env.sh: error: SLURM_PROCID is not set'),
    # container runtimes: ch-run (without its pid and source line, so all ranks group), Singularity
    ("ch-run[6235]: error: can't mkdir: /img/mlcheck: Read-only file system (ch_misc.c:409 30)",
     "ch-run: error: can't mkdir: /img/mlcheck: Read-only file system"),
    ('FATAL:   container creation failed: mount /data->/data error: no such file or directory',
     'FATAL:   container creation failed: mount /data->/data error: no such file or directory'),
    ('slurmstepd-nid001: error: *** STEP 66.0 ON nid001 CANCELLED AT 2026-11-21T23:49:21 ***', None),
    ('[rank0]:[E1121 10:00:00.1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation '
     'timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 300012 milliseconds before timing out.',
     'Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for '
     '300012 milliseconds before timing out.'),
    ('  File "x.py", line 3, in <module>', None),
    ('[W1121 socket.cpp:469] [c10d] waitForInput: poll returned 0, likely a timeout', None),
])
def test_rank_error_lines(line, error):
    assert failures.rank_error([line]) == error


# --- a rank that died in its launch shell, before Python ran ----------------------------------

@pytest.mark.parametrize('line, code', [
    ('./launch/rank-env.sh: 40: exec: python: not found', 127),              # dash
    ('/opt/conda/etc/profile.d/conda.sh: line 26: PS1: unbound variable', 1),  # bash
])
def test_launch_shell_error_is_named_with_the_exit_code(sim, line, code):
    """Only the shell's line and srun's exit code: this used to give 'ranks 0-1 never reported
    in (no rank line); ranks 0-1 did not finish', without the cause."""
    stderr = (f'0: {line}\n1: {line}\n'
              f'srun: error: nid001: tasks 0-1: Exited with exit code {code}\n'
              f'srun: error: nid002: tasks 2-3: Terminated\n')
    assert judged(sim, '', stderr, min_accuracy=0.9) == [f'ranks 0-1 on nid001 failed: {line} (exit code {code})']


def test_failed_prelude_is_named_with_the_exit_code(sim):
    stderr = ("0: rank-env.sh: error: the site's rank_prelude failed with exit status 1\n"
              'srun: error: nid001: task 0: Exited with exit code 1\n'
              'srun: error: nid001: task 1: Terminated\nsrun: error: nid002: tasks 2-3: Terminated\n')
    assert judged(sim, '', stderr, min_accuracy=0.9) == [
        "rank 0 on nid001 failed: rank-env.sh: error: the site's rank_prelude failed with exit "
        "status 1 (exit code 1)"]


def test_a_container_pyxis_cannot_start_is_one_line_naming_pyxis_and_enroot():
    """Issue 30: an image import that failed (the registry's 401) read as 18 lines of consequences
    (ranks never reported in, did not finish, no epochs) and named neither the container nor the
    image. Pyxis's own lines, in the format its users report (tests/data/faults/README.md)."""
    from conftest import settings_of
    dgx = settings_of('dgx', 'dgx:batch')
    assert judged(dgx, *saved_job('faults/dgx_pyxis_import_401'), min_accuracy=0.9) == [
        'the container did not start on dgx001, dgx002 (ranks 0-15): pyxis: failed to import docker '
        'image: URL https://auth.docker.io/token returned error code: 401 Unauthorized']


def test_a_crash_whose_container_pyxis_cannot_remove_is_the_crash(sim):
    """Issue 35 item 7: Pyxis that cannot remove the container at the end of the step prints its
    log after the crash; the ranks had reported in, so the container started, and the crash is
    the cause (this used to read 'the container did not start on nid001, nid002 ...: pyxis: rm:
    cannot remove ...')."""
    stdout, stderr = saved_job('faults/sim_crash')
    stderr += ('slurmstepd: error: pyxis: printing contents of log file ...\n'
               'slurmstepd: error: pyxis:     rm: cannot remove \'/run/enroot/data/pyxis_1.0\': '
               'Device or resource busy\n'
               'slurmstepd: error: pyxis: could not remove container\n')
    assert judged(sim, stdout, stderr, fault='crash:1:2', min_accuracy=0.9) == [
        'rank 1 on nid001 failed: RuntimeError: injected fault: rank 1 crashed in epoch 2']
