"""The failure grammar (mlcheck.judging.failures), one row per expression: a line it must read (and
what it takes from it) and a line it must leave alone. The lines are of the formats the tools
print (the saved outputs under tests/data/faults show them in whole jobs)."""

import pytest

from mlcheck.judging import failures

ROWS = [
    # expression, a line it reads, what it takes (group: value), a line it must not read
    ('ERROR_LINE', '[rank1]: RuntimeError: boom', {'error': 'RuntimeError: boom'}, '  File "x.py", line 3'),
    ('ERROR_LINE', 'ch-run[123]: error: can\'t mkdir: /x (ch-run.c:99 2)', {'error': "ch-run[123]: error: can't mkdir: /x (ch-run.c:99 2)"}, 'ch-run: warning'),
    ('ERROR_LINE', 'x Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE)',
     {'watchdog': 'Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE)'}, 'NCCL INFO ok'),
    ('RUNTIME_DETAILS', 'ch-run[4242]: error: x (ch-run.c:12 2)', {}, 'python: error'),
    ('PYXIS_LINE', 'slurmstepd: error: pyxis: failed to import docker image', {'what': 'failed to import docker image'},
     'slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1'),
    ('PYXIS_CONSEQUENCE', 'child 4121 failed with error code: 1', {}, 'failed to import docker image'),
    ('ENROOT_ERROR', '    [ERROR] URL https://auth.docker.io/token returned error code: 401 Unauthorized',
     {'error': 'URL https://auth.docker.io/token returned error code: 401 Unauthorized'}, '[INFO] Querying registry'),
    ('PEER_ERROR', 'RuntimeError: Connection closed by peer [127.0.0.1]:1234', {}, 'ValueError: bad batch size'),
    ('TIMEOUT', 'DistStoreError: wait timeout after 180000ms', {}, 'ZeroDivisionError: division by zero'),
    ('UNREACHABLE', 'The client socket has failed to connect to any network address; trying to connect to (nid001, 29500)',
     {'host': 'nid001', 'port': '29500'}, 'connected to (nid001, 29500)'),
    ('NODE_FAILURE', 'srun: error: Node failure on nid002', {'node': 'nid002'}, 'srun: error: nid002: task 3: Killed'),
    ('CANCELLED', 'slurmstepd: error: *** JOB 17 ON nid001 CANCELLED AT 2026-11-22T02:22:06 DUE TO TIME LIMIT ***',
     {'why': 'TIME LIMIT'}, 'slurmstepd: error: *** JOB 17 ON nid001 STARTED'),
    ('STEP_ENDED', 'Exited with exit code 1', {}, 'Segmentation fault'),
    ('QUALIFIED', 'torch.distributed.DistStoreError: wait timeout', {}, 'DistStoreError: wait timeout'),
    ('SOURCE_LOCATION', 'RuntimeError: [/pytorch/gloo/transport/tcp/pair.cc:561] Connection closed', {}, 'RuntimeError: [x] closed'),
    ('SHELL_ERROR', './launch/rank-env.sh: 40: exec: python: not found', {'error': './launch/rank-env.sh: 40: exec: python: not found'},
     'python: not found'),
    ('SHELL_SCRIPT_ERROR', './launch/rank-env.sh: error: no GPU visible', {}, './train.py: error: bad'),
    ('EXIT_CODE', 'Exited with exit code 127', {'code': '127'}, 'Killed'),
    ('TRACEBACK', '[rank0]: Traceback (most recent call last):', {}, 'Traceback follows'),
    ('TRACEBACK_LINE', '[rank0]: StopIteration', {'line': 'StopIteration'}, None),
]


def test_every_expression_of_the_grammar_has_a_row():
    expressions = {name for name, value in vars(failures).items()
                   if name.isupper() and hasattr(value, 'pattern')}
    assert expressions == {row[0] for row in ROWS}


@pytest.mark.parametrize('name, line, taken, other', ROWS, ids=[f'{r[0]}-{i}' for i, r in enumerate(ROWS)])
def test_an_expression_reads_its_line_and_leaves_the_other_alone(name, line, taken, other):
    expression = getattr(failures, name)
    found = expression.search(line)
    assert found, line
    for group, value in taken.items():
        assert found.group(group) == value
    if other is not None:
        assert not expression.search(other), other
