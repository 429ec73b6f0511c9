"""Which way a figure is better belongs to the figure (mlcheck.figures.directions), not to its unit
(issue 30): memory is better lower, power is informational; the report, the baseline and the
references read the one table. Also the unit and the zero that the rule cannot compare."""

import dataclasses

import pytest
import yaml

from command_line import run_main, run_report
from mlcheck.commands import baseline
from mlcheck.figures import directions
from mlcheck.harness import knob_table, reframe_api
from mlcheck.history import compare
from mlcheck.history.samples import Sample
from perflogs import write_perflog

NAME = 'MNISTDistributedCheck %image=host %num_nodes=1'


def runs(var, unit, values, start=0.0):
    """One sample of `var` per run, with the run's unchanged throughput beside it."""
    found = []
    for i, value in enumerate(values):
        common = dict(partition='sim:cluster', name=NAME, image='host', num_nodes=1,
                      time=start + 60 * i, jobid=str(i), nodelist='nid001', result='pass',
                      settings='epochs=3')
        found += [Sample(var=var, value=value, unit=unit, **common),
                  Sample(var='samples_per_s', value=1000 + i, unit='samples/s', **common)]
    return found


def report(tmp_path, capsys, before, after):
    code, out, _ = run_report(capsys, write_perflog(tmp_path / 'before.log', before),
                              write_perflog(tmp_path / 'after.log', after))
    verdicts = {line.split()[4]: line.rsplit('  ', 1)[-1].strip()
                for line in out.splitlines() if line.startswith('sim:cluster')}
    return code, verdicts, out


MEMORY = [0.59, 0.60, 0.58, 0.59, 0.60]


def test_a_doubled_memory_peak_is_a_regression(tmp_path, capsys):
    code, verdicts, _ = report(tmp_path, capsys, runs('peak_host_memory', 'GB', MEMORY),
                               runs('peak_host_memory', 'GB', [2 * m for m in MEMORY], 1e6))
    assert verdicts['peak_host_memory'] == compare.REGRESSION and code == 1


def test_a_quarter_less_memory_is_an_improvement(tmp_path, capsys):
    code, verdicts, _ = report(tmp_path, capsys, runs('peak_host_memory', 'GB', MEMORY),
                               runs('peak_host_memory', 'GB', [0.75 * m for m in MEMORY], 1e6))
    assert verdicts['peak_host_memory'] == compare.IMPROVED and code == 0


@pytest.mark.parametrize('factor', [0.75, 1.25])
def test_power_changes_are_shown_and_never_fail(tmp_path, capsys, factor):
    power = [500, 505, 498, 502, 501]
    code, verdicts, out = report(tmp_path, capsys, runs('gpu_power', 'W', power),
                                 runs('gpu_power', 'W', [factor * w for w in power], 1e6))
    assert verdicts['gpu_power'] == compare.CHANGED and code == 0
    assert f'1 {compare.CHANGED}: a figure that is neither better higher nor lower' in out


def test_a_zero_before_is_said_and_the_others_judged(tmp_path, capsys):
    code, verdicts, out = report(tmp_path, capsys, runs('peak_gpu_memory', 'GB', [0, 0, 0]),
                                 runs('peak_gpu_memory', 'GB', [1, 1, 1], 1e6))
    assert verdicts == {'peak_gpu_memory': compare.ZERO_BEFORE, 'samples_per_s': compare.UNCHANGED}
    assert code == 0 and 'internal error' not in out


def test_a_time_in_another_unit_is_converted_before_it_is_compared(tmp_path, capsys):
    """300 s before, 5.6 min after: 12 % slower, not 98 % better."""
    code, verdicts, _ = report(tmp_path, capsys, runs('train_time', 's', [300, 301, 299]),
                               runs('train_time', 'min', [5.6, 5.61, 5.59], 1e6))
    assert verdicts['train_time'] == compare.REGRESSION and code == 1


def test_a_unit_that_does_not_convert_fails_as_unit_changed(tmp_path, capsys):
    code, verdicts, out = report(tmp_path, capsys, runs('busbw', 'GB/s', [10, 10.1, 9.9]),
                                 runs('busbw', '%', [10, 10.1, 9.9], 1e6))
    assert verdicts['busbw'] == compare.UNIT_CHANGED and code == 1
    assert compare.in_unit(1, 'GiB', 'MiB') == 1024 and compare.in_unit(1, 'GB', 'W') is None


def test_the_baseline_bounds_each_figure_on_its_worse_side(tmp_path, capsys):
    found = [*runs('peak_host_memory', 'GB', MEMORY), *runs('gpu_power', 'W', [500] * 5),
             *[dataclasses.replace(s, var='train_time', unit='s', value=7.0)
               for s in runs('x', 'x', [0] * 5) if s.var == 'x']]
    code, _, _ = run_main(capsys, baseline.main, write_perflog(tmp_path / 'good.log', found),
                          '--references-dir', str(tmp_path), *[f'--var={var}' for var in
                          ('peak_host_memory', 'gpu_power', 'train_time', 'samples_per_s')])
    entry = yaml.safe_load((tmp_path / 'sim.yaml').read_text())['MNISTDistributedCheck']['sim:cluster']['host'][1]
    assert code == 0
    assert entry['peak_host_memory'] == [0.59, None, 0.1, 'GB']
    assert entry['train_time'] == [7.0, None, 0.1, 's']
    assert entry['samples_per_s'][1:] == [-0.1, None, 'samples/s']
    assert entry['gpu_power'] == [500.0, None, None, 'W']


def test_a_zero_figure_does_not_stop_the_baseline(tmp_path, capsys):
    code, out, _ = run_main(capsys, baseline.main,
                            write_perflog(tmp_path / 'good.log', runs('peak_gpu_memory', 'GB', [0, 0])),
                            '--references-dir', str(tmp_path))
    assert code == 0 and 'references written' in out


@pytest.mark.parametrize('check', knob_table.check_classes(), ids=lambda check: check.__name__)
def test_every_figure_a_check_declares_says_which_way_is_better(check):
    """A new figure must take its place in the table (else its unit would decide for it)."""
    assert reframe_api.performance_variables(check) <= set(directions.BETTER)


def test_an_unknown_figure_is_judged_by_its_unit():
    assert directions.better('other_suites_time', 'ms') == directions.LOWER
    assert directions.better('other_suites_rate', 'GB/s') == directions.HIGHER
    assert directions.worse_by('gpu_power', 'W', -0.5) is None
