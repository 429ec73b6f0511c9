"""The shell scripts of bin/ and .ci/ pass shellcheck (Debian's package, which bin/setup installs)
with no finding at all; a deliberate exception is an inline `# shellcheck disable=SCxxxx` that
says why."""

import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shell_scripts():
    """Every file of bin/ and .ci/ whose first line names bash or sh."""
    found = []
    for folder in ('bin', '.ci'):
        for name in sorted(os.listdir(os.path.join(REPO, folder))):
            path = os.path.join(REPO, folder, name)
            with open(path, 'rb') as f:
                first = f.readline()
            if first.startswith(b'#!') and first.rstrip().split(b'/')[-1].split()[-1] in (b'bash', b'sh'):
                found.append(os.path.relpath(path, REPO))
    return found


def shellcheck(*args, **kwargs):
    tool = shutil.which('shellcheck')
    assert tool, 'shellcheck is not installed: bin/setup installs it (apt-get install shellcheck)'
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120, cwd=REPO, **kwargs)


def test_the_scripts_are_found():
    assert {'bin/simslurm', 'bin/setup', 'bin/run-tests', 'bin/run-suite', '.ci/run'} <= set(shell_scripts())


@pytest.mark.parametrize('script', shell_scripts())
def test_script_has_no_shellcheck_finding(script):
    proc = shellcheck('--external-sources', script)
    assert proc.returncode == 0, f'shellcheck {script}:\n{proc.stdout}{proc.stderr}'


def test_shellcheck_reports_a_finding():
    """The check above can fail: an unquoted variable in a bash script is a finding (SC2086)."""
    proc = shellcheck('--shell=bash', '-', input='#!/usr/bin/env bash\nrm $1\n')
    assert proc.returncode == 1 and 'SC2086' in proc.stdout, proc.stdout + proc.stderr
