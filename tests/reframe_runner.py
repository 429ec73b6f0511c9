"""Running reframe from the tests, into a private prefix so no user results are touched:
stage, output, perf logs, the results database and dry-run perf logs all go under it."""

import json
import os
import subprocess
import sys

from conftest import REPO

REFRAME = os.path.join(os.path.dirname(sys.executable), 'reframe')


def run_reframe(config, prefix, *args, timeout=900, env=None):
    """reframe -C config/<config>.py (or the file `config`) -c checks/, all it writes under `prefix`."""
    if not os.path.isfile(str(config)):
        config = os.path.join(REPO, 'config', f'{config}.py')
    command = [REFRAME, '-C', str(config),
               '-c', os.path.join(REPO, 'checks'), '--prefix', str(prefix),
               '--perflogdir', str(prefix / 'perflogs'),
               '--report-file', str(prefix / 'report.json'), *args]
    prefix.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, 'RFM_SAVE_LOG_FILES': 'n', 'RFM_SQLITE_DB_FILE': str(prefix / 'results.db'),
           'MLCHECK_DRY_RUN_PERFLOG_DIR': str(prefix / 'dry-run-perflogs'), **(env or {})}
    done = subprocess.run(command, cwd=prefix, env=env, capture_output=True, text=True, timeout=timeout)
    return done


def report_cases(prefix):
    with open(prefix / 'report.json') as f:
        report = json.load(f)
    return [case for run in report['runs'] for case in run['testcases']]
