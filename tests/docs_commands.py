"""The report and baseline commands that README.md and docs/ write: found in the documents, and
run as a user would (tests/test_documented_commands.py, tests/test_history_sim.py)."""

import os
import re
import shlex
import subprocess
import sys

from conftest import REPO

DOCUMENTS = ['README.md', *sorted(f'docs/{name}' for name in os.listdir(os.path.join(REPO, 'docs'))
                                  if name.endswith('.md'))]
# the module form and the console command of the report and the baseline
COMMAND = re.compile(r'(?:python -m mlcheck\.commands\.|mlcheck-)(?:report|baseline)\b[^`\n]*')


def documented_commands():
    """Every `python -m mlcheck.commands.report|baseline ...` (or `mlcheck-report|baseline ...`) of the documents, continuation lines joined
    and a trailing `# comment` dropped, with where it is written."""
    found = []
    for document in DOCUMENTS:
        with open(os.path.join(REPO, document)) as stream:
            text = stream.read().replace('\\\n', ' ')
        for match in COMMAND.finditer(text):
            command = ' '.join(match.group(0).split('  #')[0].split())
            if ' ' in command.removeprefix('python -m '):     # not the name alone, in prose
                found.append((command, document))
    return found


def run_command(command, cwd, env=None):
    """`command` through the shell in `cwd`, with this venv's python first on PATH."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH']
    env = {**os.environ, 'PATH': path, 'PYTHONPATH': REPO, **(env or {})}
    env.pop('RFM_CONFIG_FILES', None)
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def adjusted(command, cwd, root=REPO):
    """The command with each path relative to `root` made relative to `cwd`."""
    words = []
    for word in shlex.split(command):
        path = word.split('@')[0]
        if '/' in path and os.path.exists(os.path.join(root, path)):
            word = os.path.relpath(os.path.join(root, path), cwd) + word[len(path):]
        words.append(word)
    return shlex.join(words)


def needs_database(command):
    return '<' in command or ' latest' in command or 'var/rfm' in command
