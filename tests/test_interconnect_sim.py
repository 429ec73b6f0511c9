"""The interconnect check end to end on the simulated cluster: real Slurm, srun binding, gloo
ranks across the slurmd "nodes", in the host's Python and in every Charliecloud image (the
cases of the suite run, conftest.suite_run, which test_end_to_end_sim.py checks as a whole)."""


import pytest

from mlcheck.data import images
from mlcheck.judging import output
from reframe_runner import job_file, perf, report_cases

IMAGES = ['host', *images.recipe_names()]


def test_passes_at_1_and_2_nodes_in_the_host_and_every_image(suite_run):
    prefix, done = suite_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    cases = report_cases(prefix, 'InterconnectCheck')
    assert sorted((c['image'], c['num_nodes'], c['result']) for c in cases) == [
        (image, nodes, 'pass') for image in sorted(IMAGES) for nodes in (1, 2)]


def test_figures_against_references_and_the_declared_limit(suite_run):
    prefix, _ = suite_run
    for case in report_cases(prefix, 'InterconnectCheck'):
        values = perf(case)
        expected = {'busbw', 'latency', 'busbw_of_limit'} | ({'slowest_pair_bw'} if case['num_nodes'] > 1 else set())
        assert set(values) == expected, case['name']
        assert all(v[1] is not None for v in values.values()), 'a figure without a reference'
        assert values['busbw_of_limit'][0] == pytest.approx(100 * values['busbw'][0] / 0.9)


def test_every_rank_checked_every_buffer_and_the_pair_crossed_nodes(suite_run):
    prefix, _ = suite_run
    for case in report_cases(prefix, 'InterconnectCheck'):
        run = output.read(job_file(case))
        world = 2 * case['num_nodes']
        checked = {r: v['checked'] for r, v in run.by_rank('values').items()}
        assert checked == {r: run.result()['checked_per_rank'] for r in range(world)}
        pairs = [p['nodes'] for p in run.events('pair')]
        assert pairs == ([['nid001', 'nid002']] if case['num_nodes'] == 2 else [])
