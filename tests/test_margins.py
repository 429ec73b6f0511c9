"""bin/run-tests's table of margins (tests/margins.py): what the tests record and what it prints."""

import json
import subprocess

import pytest

import margins
from conftest import REPO


def test_nothing_is_recorded_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(margins.ENV, raising=False)
    margins.record('x', 1.0, 0.5)
    assert list(tmp_path.iterdir()) == []


def test_the_narrowest_margin_per_figure_narrowest_first_and_figures_beyond_their_limit(tmp_path, monkeypatch):
    path = tmp_path / 'margins.jsonl'
    monkeypatch.setenv(margins.ENV, str(path))
    margins.record('rate', 130.0, 65.0, test='a')            # 100 % inside its floor
    margins.record('rate', 70.0, 65.0, test='b')             # 7.7 %: narrow
    margins.record('time', 5.0, 10.0, higher=False, test='c')     # a ceiling, 50 % inside
    margins.record('throttled rank', 0.9, 0.7, higher=False, test='d')   # a broken case not caught
    lines = margins.table([json.loads(line) for line in path.read_text().splitlines()])
    assert lines[1] == '     7.7%  rate: 70 against >= 65 (2 judged; narrowest in b)  NARROW'
    assert lines[2] == '    50.0%  time: 5 against <= 10 (1 judged; narrowest in c)'
    assert lines[4] == '   -28.6%  throttled rank: 0.9 against <= 0.7 in d'


def test_the_perf_logs_of_a_run_are_read_in_its_period_with_the_slow_rank_rule(tmp_path, monkeypatch):
    """Every figure with a reference bound, each bound its own limit; lines of another period left out."""
    path = tmp_path / 'margins.jsonl'
    monkeypatch.setenv(margins.ENV, str(path))
    log = tmp_path / 'perflogs' / 'sim' / 'cluster' / 'MNISTDistributedCheck.log'
    log.parent.mkdir(parents=True)
    header = ('job_completion_time|reframe version|system:partition|name|image|num_nodes|num_tasks|jobid|'
              'job_nodelist|perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres|perf_result')
    line = ('{when}|reframe 4.10.4|sim:cluster|MNISTDistributedCheck %image=host %num_nodes=1|host|1|2|1|nid001|'
            '{var}|{value}|x|{ref}|{lower}|{upper}|pass')
    log.write_text('\n'.join([
        header,
        line.format(when='2026-11-28T16:00:00+00:00', var='samples_per_s', value=700, ref=1000, lower=-0.5, upper='null'),
        line.format(when='2026-11-28T16:00:00+00:00', var='peak_host_memory', value=0.6, ref=0.6, lower=-0.5, upper=0.5),
        line.format(when='2026-11-28T16:00:00+00:00', var='slowest_rank_fraction', value=0.8, ref=0.95, lower=-0.4,
                    upper='null'),
        line.format(when='2026-11-28T15:00:00+00:00', var='samples_per_s', value=1, ref=1000, lower=-0.5, upper='null'),
    ]) + '\n')
    start = 1795881600      # 2026-11-28 16:00 UTC
    margins.record_perflogs(tmp_path / 'perflogs', (start, start + 1), slow_rank_limit=0.6)
    recorded = [(e['figure'], e['value'], pytest.approx(e['limit']), e['higher']) for e in
                map(json.loads, path.read_text().splitlines())]
    figure = 'MNISTDistributedCheck {} at 1 node(s)'
    assert recorded == [(figure.format('samples_per_s'), 700, 500, True),
                        (figure.format('peak_host_memory'), 0.6, 0.3, True),
                        (figure.format('peak_host_memory'), 0.6, 0.9, False),
                        (figure.format('slowest_rank_fraction'), 0.8, 0.57, True),
                        (figure.format('slowest_rank_fraction') + ', slow-rank rule', 0.8, 0.6, True)]


def test_the_table_is_printed_by_the_command_run_tests_runs(tmp_path):
    path = tmp_path / 'margins.jsonl'
    path.write_text('{"test": "t", "figure": "rate", "value": 2.0, "limit": 1.0, "higher": true}\n')
    done = subprocess.run([f'{REPO}/.venv/bin/python', 'tests/margins.py', str(path)], cwd=REPO,
                          capture_output=True, text=True)
    assert done.stdout.splitlines()[1] == '   100.0%  rate: 2 against >= 1 (1 judged; narrowest in t)'
    empty = subprocess.run([f'{REPO}/.venv/bin/python', 'tests/margins.py', str(tmp_path / 'none')],
                           cwd=REPO, capture_output=True, text=True)
    assert empty.stdout == 'run-tests: no judged figure recorded in this run (margins)\n'
