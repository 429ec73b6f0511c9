"""mlcheck-report's plumbing from issue 35: a reader that closes the pipe (a CI gate's `| head`)
leaves the exit status and the report's files as they would be."""

import os
import random
import subprocess
import sys

from mlcheck import REPO
from perflogs import write_perflog
from scenario_bank import Fault, build


def test_a_closed_pipe_keeps_the_verdict_and_the_report(tmp_path):
    before, after = build(random.Random(1), [Fault('image', 'torch-2.9.1', 0.3)], noise=0.01,
                          checks=('MNISTDistributedCheck',))
    logs = [write_perflog(tmp_path / f'{side}.log', found) for side, found in
            (('before', before), ('after', after))]
    command = (f'{sys.executable} -m mlcheck.commands.report {logs[0]} {logs[1]} -o {tmp_path / "r"}'
               ' | head -c 20 >/dev/null; echo "${PIPESTATUS[0]}"')
    done = subprocess.run(['bash', '-c', command], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, 'PYTHONPATH': REPO})
    assert done.stdout.strip() == '1' and 'Error' not in done.stderr, done.stderr
    assert (tmp_path / 'r' / 'report.md').is_file()
