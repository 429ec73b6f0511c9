"""Running reframe from the tests, into a private prefix so no user results are touched."""

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
    env = {**os.environ, 'RFM_SAVE_LOG_FILES': 'n', **(env or {})}
    done = subprocess.run(command, cwd=prefix, env=env, capture_output=True, text=True, timeout=timeout)
    return done


def report_cases(prefix, check=None):
    """The test cases of the run report, of one check class if given."""
    with open(prefix / 'report.json') as f:
        report = json.load(f)
    cases = [case for run in report['runs'] for case in run['testcases']]
    return [c for c in cases if check is None or c['name'].startswith(check + ' ')]


def perf(case):
    """{variable: [value, reference, lower, upper, unit, result]} of a reported test case."""
    return {key.split(':')[-1]: entry for key, entry in case['perfvalues'].items()}
