"""End to end on the simulated Slurm cluster: real slurmctld/slurmd, srun CPU binding,
torch.distributed gloo ranks across the "nodes", torchvision's MNIST loader on staged IDX files.
"""

import os
import re

import pytest
import yaml

from conftest import REPO
from mlcheck.rfm_config import PERFLOG_HEADER
from reframe_runner import report_cases, run_reframe

PERF_VARS = ('samples_per_s', 'samples_per_s_per_gpu', 'train_time')


@pytest.fixture(scope='module')
def suite_run(cluster, tmp_path_factory):
    prefix = tmp_path_factory.mktemp('e2e')
    done = run_reframe('simulated', prefix, '-r')
    return prefix, done


def test_mnist_passes_at_1_and_2_nodes(suite_run):
    prefix, done = suite_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    cases = report_cases(prefix)
    assert sorted(c['num_nodes'] for c in cases) == [1, 2]
    assert all(c['result'] == 'pass' for c in cases), [c.get('fail_reason') for c in cases]


def test_performance_values_are_recorded(suite_run):
    prefix, _ = suite_run
    with open(os.path.join(REPO, 'config', 'references', 'sim.yaml')) as f:
        references = yaml.safe_load(f)['MNISTDistributedCheck']
    for case in report_cases(prefix):
        # 'partition:var': [value, reference, lower, upper, unit, result]
        values = {key.split(':')[-1]: entry for key, entry in case['perfvalues'].items()}
        assert set(values) == set(PERF_VARS)
        assert all(isinstance(values[v][0], float) and values[v][0] > 0 for v in PERF_VARS), values
        # the references of config/references/sim.yaml for this node count were applied
        expected = references['sim:cluster']['host'][case['num_nodes']]
        assert {v: values[v][1:5] for v in PERF_VARS} == {v: expected[v] for v in PERF_VARS}

    logs = list((prefix / 'perflogs').rglob('*.log'))
    assert [log.name for log in logs] == ['MNISTDistributedCheck.log']
    header, *lines = logs[0].read_text().splitlines()
    assert header == PERFLOG_HEADER
    assert header.split('|')[2:9] == ['system:partition', 'name', 'image', 'num_nodes', 'num_tasks',
                                      'jobid', 'job_nodelist']
    for nodes in (1, 2):
        for var in PERF_VARS:
            line = next(l for l in lines if f'|host|{nodes}|{2 * nodes}|' in l and f'|{var}|' in l)
            assert float(line.split(f'|{var}|')[1].split('|')[0]) > 0, line


def test_ranks_ran_where_and_how_they_were_asked(suite_run):
    """Beyond the check's own sanity: read the 2-node job's output directly."""
    prefix, _ = suite_run
    from mlcheck import output
    case = next(c for c in report_cases(prefix) if c['num_nodes'] == 2)
    run = output.read(os.path.join(case['outputdir'], 'rfm_job.out'))
    ranks = run.by_rank('rank')
    assert sorted(ranks) == [0, 1, 2, 3]
    assert {(r['node'], r['local_rank'], tuple(r['affinity'])) for r in ranks.values()} == {
        ('nid001', 0, (0,)), ('nid001', 1, (1,)), ('nid002', 0, (0,)), ('nid002', 1, (1,))}
    assert run.result()['test_accuracy'] >= 0.9


def test_missing_dataset_is_a_one_line_error(cluster, tmp_path):
    done = run_reframe('simulated', tmp_path, '-r', '-P', 'num_nodes=1', '-S', 'data_dir=/nonexistent/mnist')
    assert done.returncode != 0
    assert 'mnist dataset directory not found: /nonexistent/mnist (from -S data_dir)' in done.stdout


def test_image_on_a_partition_without_container_runtime_is_an_error(cluster, tmp_path):
    done = run_reframe('simulated', tmp_path, '-r', '-P', 'num_nodes=1', '-P', 'image=/images/x.sif')
    assert done.returncode != 0
    assert "has no container runtime, so image '/images/x.sif' cannot run there" in done.stdout


def test_a_model_that_does_not_learn_fails_sanity(cluster, tmp_path):
    """Labels shuffled at random: training runs, but accuracy stays at chance and the check fails."""
    import numpy as np
    from mlcheck.staging import MNIST_FILES, digits_as_mnist, write_idx
    train_x, train_y, test_x, test_y = digits_as_mnist()
    raw = tmp_path / 'data' / 'MNIST' / 'raw'
    raw.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for split, (x, y) in {'train': (train_x, rng.permutation(train_y)), 'test': (test_x, test_y)}.items():
        write_idx(raw / MNIST_FILES[split][0], x)
        write_idx(raw / MNIST_FILES[split][1], y)
    done = run_reframe('simulated', tmp_path / 'rfm', '-r', '-P', 'num_nodes=1',
                       '-S', f'data_dir={tmp_path / "data"}', '-S', 'epochs=3')
    assert done.returncode != 0
    assert re.search(r'sanity error: test accuracy 0\.\d+ is below 0\.9000', done.stdout), done.stdout[-3000:]
