"""End to end on the simulated cluster: what each rank's launch shell does before Python runs.

The site's rank_prelude runs as a user's shell would run it (conda's activate reads unset
variables; /bin/sh here is dash, which has no `source`), and a rank that dies in that shell is
named, with its error and exit code. Each case runs the real check under a copy of
config/simulated.py whose partition differs only in the key under test.
"""

import re
import sys
import textwrap

from reframe_runner import NO_SOLO, report_cases, run_reframe, simulated_config_with

MNIST_ONE_NODE = ('-r', '-n', 'MNIST', '-P', 'image=host', '-P', 'num_nodes=1', '-S', 'epochs=1', *NO_SOLO)


def test_prelude_that_sources_a_conda_like_activate_script_works(cluster, tmp_path):
    """The activate script reads PS1 (unset in a batch job) and is sourced with an argument:
    under `set -eu` and dash every rank died (PS1: unbound variable; source: not found)."""
    bin_dir = tmp_path / 'env' / 'bin'
    bin_dir.mkdir(parents=True)
    python = bin_dir / 'mlcheck-env-python'     # not a link: a venv's python finds its venv by its path
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    activate = tmp_path / 'env' / 'activate'
    activate.write_text(textwrap.dedent(f'''\
        if [ -n "$PS1" ]; then PS1="($1) $PS1"; fi
        [ "$1" = mlcheck-env ] && export PATH="{bin_dir}:$PATH"
        '''))
    config = simulated_config_with(tmp_path, rank_prelude=f'source {activate} mlcheck-env',
                                   host_python='mlcheck-env-python')   # found only once activated
    done = run_reframe(config, tmp_path / 'rfm', *MNIST_ONE_NODE, env={'RFM_ENABLE_RESULTS_STORAGE': '0'})
    [case] = report_cases(tmp_path / 'rfm')
    # the cores are shared: the throughput may miss its reference; every rank must have trained
    assert case['result'] == 'pass' or case['fail_phase'] == 'performance', \
        (case.get('fail_reason'), done.stdout[-3000:])


def test_rank_whose_python_is_missing_is_named_with_the_exit_code(cluster, tmp_path):
    """As after an image upgrade that moved the interpreter: the ranks die in rank-env.sh's exec."""
    config = simulated_config_with(tmp_path, host_python='/nonexistent/bin/python')
    done = run_reframe(config, tmp_path / 'rfm', *MNIST_ONE_NODE, env={'RFM_ENABLE_RESULTS_STORAGE': '0'})
    assert done.returncode != 0
    [case] = report_cases(tmp_path / 'rfm')
    assert re.fullmatch(r'sanity error: ranks 0-1 on nid001 failed: \./launch/rank-env\.sh: \d+: exec: '
                        r'/nonexistent/bin/python: not found \(exit code 127\)',
                        case['fail_reason']), case['fail_reason']
