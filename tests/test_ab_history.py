"""A/B runs in the performance history: compared by test, comparison and image, whatever their
verdict (an outcome, not a setting) and their rounds (a most), `ab_ratio` judged with its
direction; mlcheck-baseline writes no reference of them (a reference is keyed by the image
alone, an A/B ratio belongs to its pair).

The perf log data/perflogs/ab-sim.log is a real one: the session of tests/test_ab_sim.py on the
simulated partition (2026-11-28 17:02, torch-2.14.1 slowed against torch-2.9.1, then torch-2.9.1
against itself). Its slowed image's lines are written again as two sessions of two runs each,
before and after the image was mended (or broken again), in the settings A/B runs of 42e5ead
recorded (`...;compare_with=torch-2.9.1;ab_rounds=6;ab_verdict=slower`) and in today's.
"""

import dataclasses
import os

from command_line import run_main, run_report
from conftest import DATA
from mlcheck.commands import baseline
from mlcheck.history import compare
from mlcheck.history.selection import load, parse_selection
from perflogs import write_perflog

PERFLOG = os.path.join(DATA, 'perflogs', 'ab-sim.log')
PAIR = 'MNISTDistributedCheck %image=torch-2.14.1'


def the_pair():
    """The real job's lines of torch-2.14.1 against torch-2.9.1 (ab_ratio and its interval)."""
    found = [s for s in load(parse_selection(PERFLOG)) if s.name.startswith(PAIR)]
    assert {s.var for s in found} == {'ab_ratio', 'ab_ratio_low', 'ab_ratio_high'}
    assert {s.settings for s in found} == {'epochs=2;batch_size=64;compare_with=torch-2.9.1'}
    return found


def session(ratios, start, verdict=None):
    """Samples of A/B runs whose ab_ratio were `ratios` (one run each, an hour from `start`), the
    interval about it as the real job's; `verdict`: as 42e5ead recorded it in the settings."""
    settings = 'epochs=2;batch_size=64;compare_with=torch-2.9.1'
    if verdict:
        settings += f';ab_rounds=6;ab_verdict={verdict}'
    real = {s.var: s for s in the_pair()}
    return [dataclasses.replace(s, value=s.value / real['ab_ratio'].value * ratio, settings=settings,
                                time=start + 3600 * run, jobid=str(100 + run))
            for run, ratio in enumerate(ratios) for s in real.values()]


def report(tmp_path, capsys, before, after):
    code, out, _ = run_report(capsys, write_perflog(tmp_path / 'before.log', before),
                              write_perflog(tmp_path / 'after.log', after))
    verdicts = {next(w for w in line.split() if w.startswith('ab_ratio')): line for line in out.splitlines()
                if line.startswith('sim:cluster') and 'ab_ratio' in line}
    return code, verdicts, out


def test_a_mended_image_is_improved_and_passes(tmp_path, capsys):
    """0.82 -> 1.00: the verdicts differed, so 42e5ead's key (ab_verdict in run_settings) failed
    the gate as OTHER SETTINGS AFTER ("run the settings of before")."""
    day = the_pair()[0].time
    before = session([0.82, 0.83], day - 7 * 86400, verdict='slower')
    after = session([1.00, 1.01], day, verdict='same')
    code, verdicts, out = report(tmp_path, capsys, before, after)
    assert compare.IMPROVED in verdicts['ab_ratio'] and code == 0, out
    assert compare.OTHER_SETTINGS not in out


def test_an_image_broken_again_is_a_regression_and_fails(tmp_path, capsys):
    """1.00 -> 0.82: 42e5ead read "nothing got slower" (each side only in its own settings). Last
    week's runs recorded by 42e5ead, this week's without the verdict: still one test."""
    day = the_pair()[0].time
    before = session([1.00, 1.01], day - 7 * 86400, verdict='same')
    after = session([0.82, 0.83], day)
    code, verdicts, out = report(tmp_path, capsys, before, after)
    assert compare.REGRESSION in verdicts['ab_ratio'] and code == 1, out
    # the interval's ends are shown, never judged
    assert compare.REGRESSION not in verdicts['ab_ratio_low'] + verdicts['ab_ratio_high']


def test_the_baseline_writes_no_reference_of_an_ab_ratio(tmp_path, capsys):
    code, out, err = run_main(capsys, baseline.main, PERFLOG, '--references-dir', str(tmp_path))
    assert code == 2 and out == '' and 'holds only A/B runs' in err, err
    assert not os.path.exists(tmp_path / 'sim.yaml')
