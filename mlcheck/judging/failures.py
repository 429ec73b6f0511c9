"""Why a run broke off: the failure grammar (the error lines of ranks, srun and slurmstepd, the
container runtimes and the NCCL watchdog) and the one line that explains an unfinished run from
them. judging.sanity asks it first; see docs/faults.md.
"""

import re

from mlcheck.judging.rank_lists import (group_by_error, nodes_of_ranks, rank_list, srun_task_lines,
                                        task_statuses)


# The error that ended a rank: Python's last line of a traceback (torch prefixes it with
# [rankN]:), a fatal signal in Python, a script's own `x.py: error: ...` (argparse, rank-env.sh),
# the container runtime's (ch-run's error; Singularity's and Apptainer's FATAL), or the NCCL
# watchdog's message on a timed-out collective.
ERROR_LINE = re.compile(r'^(?:\[rank\d+\]:\s*)?(?:(?P<error>(?:[\w.]+(?:Error|Exception|Exit|Interrupt)'
                        r'|Fatal Python error|[\w./-]+\.(?:py|sh): error|ch-run\[\d+\]: error|FATAL)(?::.*)?)$'
                        r'|.*?(?P<watchdog>Watchdog caught collective operation timeout.*))')
RUNTIME_DETAILS = re.compile(r'(?<=^ch-run)\[\d+\]|\s*\(\w+\.c:\d+ \d+\)$')   # ch-run's pid and C source line
# Pyxis (NVIDIA's SPANK plugin for Enroot containers) failing to start a task's container, before
# any rank runs: slurmstepd's `error: pyxis: ...` lines, the enroot log's `[ERROR] ...` among them
# (as in NVIDIA/pyxis issues #12, #61, #78, #127): `failed to import docker image`, `couldn't start
# container`, then `[ERROR] URL https://registry-1.docker.io/... returned error code: 401 ...`.
PYXIS_LINE = re.compile(r'slurmstepd(?:-[\w.-]+)?: error: pyxis: +(?P<what>\S.*?)\s*$')
PYXIS_CONSEQUENCE = re.compile(r'^(?:child \d+ failed|printing |could not remove |if the image )')
ENROOT_ERROR = re.compile(r'\[ERROR\] (?P<error>.*)')
# Errors that a rank gets because another one failed: the cause lies elsewhere.
PEER_ERROR = re.compile(r'closed by peer|reset by peer|broken pipe|timed? ?out|'
                        r'communicator was aborted|remote process exited|DistNetworkError', re.I)
TIMEOUT = re.compile(r'timed? ?out', re.I)
# a rank that could not reach the master's store (name not resolved, or nothing listening)
UNREACHABLE = re.compile(r'trying to connect to \((?P<host>[^,()]+), (?P<port>\d+)\)')
# srun (on a node that stopped answering) and slurmstepd (when Slurm ends the job) say why
NODE_FAILURE = re.compile(r'srun: error: Node failure on (?P<node>\S+)')
CANCELLED = re.compile(r'\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+(?: DUE TO (?P<why>[^,*]*[^,* ]))?')
STEP_ENDED = re.compile(r'Terminated|Killed|Exited with exit code')   # the task's error is elsewhere
QUALIFIED = re.compile(r'^[\w.]+\.(\w+(?:Error|Exception)\b)')   # torch.distributed.DistStoreError
SOURCE_LOCATION = re.compile(r'\[[^\]\s]+:\d+\] ')   # "[/path/gloo/pair.cc:561] " in gloo's errors
# A shell's own error, as dash (`./launch/rank-env.sh: 40: exec: python: not found`) and bash
# (`/opt/conda/etc/profile.d/conda.sh: line 26: PS1: unbound variable`) write it: a rank that
# died in its launch shell, before Python ran (a missing interpreter, a failed activation).
SHELL_ERROR = re.compile(r'^(?P<error>[\w./-]+: (?:line )?\d+: \S.*)$')
SHELL_SCRIPT_ERROR = re.compile(r'^[\w./-]+\.sh: error')
EXIT_CODE = re.compile(r'^Exited with exit code (?P<code>\d+)')
# Python's traceback: after its header and indented frames, the first line flush left is the
# exception, whatever its name (StopIteration, torch._dynamo.exc.Unsupported: ...)
TRACEBACK = re.compile(r'^(?:\[rank\d+\]: ?)?Traceback \(most recent call last\):')
TRACEBACK_LINE = re.compile(r'^(?:\[rank\d+\]: ?)?(?P<line>.*)$')


def rank_error(lines):
    """The last exception line among a rank's stderr lines, shortened, or None: a line of a known
    error's form, or the line that ends a traceback."""
    ends = traceback_ends(lines)
    for index in reversed(range(len(lines))):
        line = lines[index].strip()
        match = ERROR_LINE.match(line) or SHELL_ERROR.match(line)
        if match:
            error = SOURCE_LOCATION.sub('', match.group('error') or match.groupdict().get('watchdog'), count=1)
        elif index in ends:
            error = ends[index]
        else:
            continue
        error = QUALIFIED.sub(r'\1', error, count=1)
        error = RUNTIME_DETAILS.sub('', error)
        return error if len(error) <= 160 else error[:157] + '...'
    return None


def traceback_ends(lines):
    """{index: exception} of the lines that end a Python traceback among `lines`."""
    ends, inside = {}, False
    for index, line in enumerate(lines):
        if TRACEBACK.match(line.strip()):
            inside = True
            continue
        text = TRACEBACK_LINE.match(line.rstrip()).group('line')
        if inside and text and not text[0].isspace():
            ends[index] = text
            inside = False
    return ends


def why_it_broke_off(run, expect):
    """One line on why an unfinished run ended: the rank that failed first and its error, the
    rank that never arrived at the rendezvous or stopped responding, or the node that was lost."""
    expected = set(range(expect.world_size))
    unfinished = expected - set(run.by_rank('done'))
    stderr = [line for lines in run.errors.values() for line in lines]
    # "did not start" only where no rank reported in: Pyxis also complains when it cannot remove
    # a container after a crash, and the crash is then the cause
    container = container_not_started(run, stderr) if unfinished and not run.by_rank('rank') else None
    if container:       # no rank ran: every other line would be a consequence
        return [container]
    errors = {rank: e for rank in expected if (e := rank_error(run.errors.get(rank, [])))}
    # a rank killed by a signal of its own (not by srun ending the step) leaves no traceback
    for rank, status in task_statuses(run).items():
        if rank in expected and rank not in errors and not STEP_ENDED.match(status):
            errors[rank] = f'{status} (srun)'
    if not unfinished or not (errors or any(CANCELLED.search(line) for line in stderr)):
        return []
    errors = with_shell_exit_codes(errors, task_statuses(run))

    nodes = nodes_of_ranks(run)

    def ranks_on(ranks):
        where = sorted({nodes[r] for r in ranks if nodes.get(r)})
        return f'{rank_list(ranks)} on {", ".join(where)}' if where else rank_list(ranks)

    causes = group_by_error({r: e for r, e in errors.items() if not PEER_ERROR.search(e)})
    if causes:
        return [f'{ranks_on(ranks)} failed: {error}' for error, ranks in causes.items()]

    lost = sorted({m.group('node') for m in map(NODE_FAILURE.search, stderr) if m})
    if lost:
        on_lost = [r for r in unfinished if nodes.get(r) in lost]
        where = f'; {rank_list(on_lost)} ran there and ended without an error' if on_lost else ''
        return [f'node {", ".join(lost)} was lost during the job (srun: Node failure){where}']

    timed_out = sorted(r for r, e in errors.items() if TIMEOUT.search(e))
    example = f' ({errors[timed_out[0]]})' if timed_out else ''
    arrived = run.by_rank('rendezvous')
    absent = expected - set(arrived)
    if arrived and absent and set(run.by_rank('rank')) != expected:
        some = next(iter(arrived.values()))
        waited = some.get('timeout')
        waited = f' after {waited:g} s' if isinstance(waited, (int, float)) else ''
        return [f'{ranks_on(absent)} never arrived at the rendezvous at {some.get("master")}; '
                f'the others gave up{waited}{example}']

    unreachable = {r: m for r, e in errors.items() if (m := UNREACHABLE.search(e))}
    if unreachable and not run.by_rank('rank'):
        first = next(iter(unreachable.values()))
        return [f'{ranks_on(sorted(unreachable))} could not connect to the rendezvous at '
                f'{first.group("host")}:{first.group("port")}: check that the nodes resolve its name '
                f'and reach it ({errors[min(unreachable)]})']

    silent = sorted(unfinished - set(errors))
    if silent and timed_out:
        epochs = [f['epoch'] for rank in silent for f in run.rank_events('epoch', rank)]
        when = f' after epoch {max(epochs)}' if epochs else ''
        return [f'{ranks_on(silent)} stopped responding{when}: {rank_list(timed_out)} timed out '
                f'waiting for {"it" if len(silent) == 1 else "them"} in a collective{example}']

    # no rank stands out: say what the ranks saw, and why Slurm ended the job if it did
    found = [f'{ranks_on(ranks)} failed: {error}' for error, ranks in group_by_error(errors).items()]
    cancelled = [m.group('why') or 'cancelled' for m in map(CANCELLED.search, stderr) if m]
    if cancelled:
        found.append(f'{rank_list(unfinished)} did not finish: Slurm ended the job '
                     f'({cancelled[0].lower()})')
    return found


def container_not_started(run, stderr):
    """One line where Pyxis could not start the container: the nodes and ranks, what Pyxis said
    and the enroot log's own error (the image's name is in it), instead of every consequence (no
    rank line, no epochs, no result); None where Pyxis said nothing."""
    said = [m.group('what') for m in map(PYXIS_LINE.search, stderr) if m]
    if not said:
        return None
    what = next((w for w in said if not PYXIS_CONSEQUENCE.match(w) and not ENROOT_ERROR.match(w)), said[0])
    enroot = next((m.group('error') for m in map(ENROOT_ERROR.search, said) if m), '')
    failed = {task: node for task, node, _ in srun_task_lines(run)}
    where = f' on {", ".join(sorted(set(failed.values())))} ({rank_list(failed)})' if failed else ''
    return f'the container did not start{where}: pyxis: {what}' + (f': {enroot}' if enroot else '')


def with_shell_exit_codes(errors, statuses):
    """A launch shell's error with the rank's exit code from srun (127: command not found):
    unlike a Python exception, the line alone does not say how the rank ended."""
    coded = dict(errors)
    for rank, error in errors.items():
        code = EXIT_CODE.match(statuses.get(rank, ''))
        if code and (SHELL_ERROR.match(error) or SHELL_SCRIPT_ERROR.match(error)):
            coded[rank] = f'{error} (exit code {code.group("code")})'
    return coded
