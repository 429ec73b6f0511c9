"""Issue 48, the re-check's bypasses (/tmp/sec48 of the red team): records, files and links that
others write neither run code when a printed command is pasted, nor forge a line, nor write
outside where the user asked, nor stop or hang every report. Each test was seen failing on
8e9d6a4 first (tests/test_data_from_others.py holds the first round's)."""

import dataclasses
import random
import shlex

from command_line import run_main
from mlcheck.commands import report
from mlcheck.history import cells
from perflogs import write_perflog
from scenario_bank import Fault, build

# a shell command after a `;`: run by whoever pastes the printed line
EVIL_IMAGE = '0;touch /tmp/mlcheck-pwned;'


def _upgrade_with_image(image):
    """Before and after of an upgrade whose nid001 got slower, its image named `image`."""
    before, after = build(random.Random(1), [Fault('node', 'nid001', 0.25)], noise=0.01, recorded=False)
    named = lambda s: dataclasses.replace(s, image=image, name=s.name.replace(s.image, image))
    return ([named(s) for s in before if s.var != cells.RANK_VAR],
            [named(s) for s in after if s.var != cells.RANK_VAR])


def test_a_separating_command_never_prints_an_image_that_the_shell_would_run(tmp_path, capsys):
    """Item 1: `-P image=0;touch ...;` was printed as it was stored."""
    before, after = _upgrade_with_image(EVIL_IMAGE)
    logs = [write_perflog(tmp_path / 'b.log', before), write_perflog(tmp_path / 'a.log', after)]
    _, out, _ = run_main(capsys, report.main, *logs)
    separating = [line.split('to separate them: ')[1] for line in out.splitlines() if 'to separate them: ' in line]
    assert separating, out
    for line in separating:
        assert 'touch' not in line.split(' (')[0] or 'no command printed' in line, line
        assert f"image {EVIL_IMAGE!r} of the data is not a plain name" in line, line


def test_a_separating_command_is_quoted_word_by_word(tmp_path, capsys):
    """A plain image still gets its command, which the shell splits into the words meant."""
    before, after = _upgrade_with_image('torch-2.12.0')
    logs = [write_perflog(tmp_path / 'b.log', before), write_perflog(tmp_path / 'a.log', after)]
    _, out, _ = run_main(capsys, report.main, *logs)
    [line] = [line.split('to separate them: ')[1] for line in out.splitlines() if 'to separate them: ' in line]
    command = shlex.split(line.split(' (')[0])
    assert command[:4] == ['reframe', '-c', 'checks/', '-r'] and 'image=torch-2.12.0' in command, line
