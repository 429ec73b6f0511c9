"""The report and baseline commands as README.md and docs/ write them, run as a user would: from
the repository root verbatim, and from another directory with their paths adjusted.

Commands that read perf logs committed under tests/data run here; those that need a results
database with sessions run in test_history_sim.py on real stored sessions.
"""

import pytest

from conftest import REPO
from docs_commands import adjusted, documented_commands, needs_database, run_command

PERFLOG_COMMANDS = [c for c, _ in documented_commands() if not needs_database(c)]


def test_the_documents_show_report_and_baseline_commands():
    commands = [c for c, _ in documented_commands()]
    assert any(c.startswith('python -m mlcheck.commands.report -C config/') for c in commands)
    assert any(c.startswith('python -m mlcheck.commands.baseline -C config/') for c in commands)
    assert any(c.startswith('mlcheck-report -C config/') for c in commands)     # README's
    assert PERFLOG_COMMANDS


@pytest.mark.parametrize('command', PERFLOG_COMMANDS)
def test_perf_log_commands_from_the_root_and_from_elsewhere(command, tmp_path):
    at_root = run_command(command, REPO)
    assert at_root.returncode in (0, 1) and at_root.stderr == '', at_root.stderr
    assert 'regression(s)' in at_root.stdout
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    moved = run_command(adjusted(command, elsewhere), elsewhere)
    assert (moved.returncode, moved.stdout) == (at_root.returncode, at_root.stdout), moved.stderr


def test_a_relative_config_reaches_reframe(tmp_path):
    """-C config/simulated.py from the root once failed: reframe ran in a scratch directory and
    looked for /tmp/tmpXXXX/config/simulated.py. An empty database made by reframe itself."""
    db = tmp_path / 'results.db'
    made = run_command('reframe -C config/simulated.py --list-stored-sessions', REPO,
                       env={'RFM_SQLITE_DB_FILE': str(db), 'RFM_SAVE_LOG_FILES': 'n',
                            'RFM_PREFIX': str(tmp_path)})
    assert made.returncode == 0 and db.exists(), made.stdout + made.stderr
    done = run_command(f'python -m mlcheck.commands.report -C config/simulated.py --db {db} now-1d:now now-1d:now',
                       REPO)
    assert done.returncode == 2, done.stderr
    assert 'failed to load configuration' not in done.stderr
    assert done.stderr == (f"mlcheck.commands.report: error: selection 'now-1d:now' holds no performance "
                           f"values (results database {db})\n")
