"""The console commands installed with the package, and bin/setup's check that they are."""

import importlib
import os
import re
import subprocess
import sys

from conftest import REPO

SCRIPTS = {'mlcheck-report': 'mlcheck.commands.report:main', 'mlcheck-baseline': 'mlcheck.commands.baseline:main',
           'mlcheck-nodes': 'mlcheck.commands.nodes:main'}


def project_scripts():
    text = open(os.path.join(REPO, 'pyproject.toml')).read()
    section = re.search(r'^\[project\.scripts\]\n(.*?)(?=^\[|\Z)', text, re.M | re.S).group(1)
    return dict(re.findall(r'^([\w.-]+)\s*=\s*"([^"]+)"', section, re.M))


def test_the_console_scripts_are_declared_and_resolve_to_callables():
    assert project_scripts() == SCRIPTS
    for target in SCRIPTS.values():
        module, function = target.split(':')
        assert callable(getattr(importlib.import_module(module), function))


def test_python_dash_m_still_works():
    for module in ('mlcheck.commands.report', 'mlcheck.commands.baseline', 'mlcheck.commands.nodes'):
        done = subprocess.run([sys.executable, '-m', module, '--help'], capture_output=True, text=True)
        assert done.returncode == 0 and 'usage:' in done.stdout


def setup_says(venv):
    """bin/setup's project_installed, for a venv directory."""
    done = subprocess.run(['bash', '-c', 'source bin/setup && project_installed'], cwd=REPO,
                          env={**os.environ, 'MLCHECK_VENV': str(venv), 'PYTHONPATH': REPO},
                          capture_output=True, text=True)
    return done.returncode == 0


def test_setup_reinstalls_when_a_console_script_is_missing(tmp_path):
    """A venv that imports the package but lacks a console script (installed before the
    scripts were declared) is reinstalled; one with every script is left alone."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    # a link to the venv's python outside the venv is the base interpreter: it imports this
    # checkout through PYTHONPATH (setup_says), as CI's fresh clone has no PYTHONPATH of its own
    (bin_dir / 'python').symlink_to(sys.executable)
    assert not setup_says(tmp_path)
    for name in SCRIPTS:
        (bin_dir / name).write_text('#!/bin/sh\n')
        (bin_dir / name).chmod(0o755)
    assert setup_says(tmp_path)
    (bin_dir / 'mlcheck-baseline').unlink()
    assert not setup_says(tmp_path)


def test_help_and_errors_name_the_command_as_typed(tmp_path):
    """Issue 49 (new-user trial): `mlcheck-report --help` and its errors said `python -m
    mlcheck.commands.report`."""
    script = os.path.join(os.path.dirname(sys.executable), 'mlcheck-report')
    done = subprocess.run([script, '--help'], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith('usage: mlcheck-report '), done.stdout[:200]
    done = subprocess.run([script, str(tmp_path / 'none.log'), str(tmp_path / 'none.log')],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith('mlcheck-report: error: '), done.stderr
    done = subprocess.run([sys.executable, '-m', 'mlcheck.commands.report', '--help'], capture_output=True, text=True)
    assert done.stdout.startswith('usage: python -m mlcheck.commands.report '), done.stdout[:200]
