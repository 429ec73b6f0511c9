import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, 'tests', 'data')
SIMSLURM = os.path.join(REPO, 'bin', 'simslurm')

# the training programs' modules (ddp_common, gpu_locality), importable as the programs import them
sys.path.insert(0, os.path.join(REPO, 'src', 'pytorch'))


# the machine has one simulated cluster (one slurm.conf, one set of nodes): a test session that
# restarts a node or resizes the partition fails the jobs of another session's tests (a fresh-clone
# CI beside an engineer's cluster tests failed 2 such tests, 2026-11-29), so each session holds it
# for all its tests, waiting up to a whole cluster tier for another's
CLUSTER_LOCK, CLUSTER_WAIT_S = '/run/mlcheck-cluster-tests.lock', 3600


@pytest.fixture(scope='session')
def cluster():
    """The simulated Slurm cluster, held by this session and started if it is not running (it is
    never stopped here: later tests and modules use it). Tests that use it are marked `cluster`."""
    from mlcheck import locks
    held = locks.hold(CLUSTER_LOCK, CLUSTER_WAIT_S, what="the test sessions' lock of the simulated cluster")
    # an enclosing job's SLURM_* variables (SLURM_JOB_ID, another SLURM_CONF) would redirect it
    env = {k: v for k, v in os.environ.items() if not k.startswith('SLURM_')}
    up = subprocess.run([SIMSLURM, 'up'], capture_output=True, text=True, timeout=180, env=env)
    assert up.returncode == 0, 'bin/simslurm up failed:\n' + up.stdout + up.stderr
    yield
    os.close(held)


@pytest.fixture
def four_nodes(cluster):
    """The cluster with 4 nodes for one test, then back to its default."""
    env = {k: v for k, v in os.environ.items() if k != 'SIMSLURM_NODES'}
    up = subprocess.run([SIMSLURM, 'up'], env={**env, 'SIMSLURM_NODES': '4'}, capture_output=True,
                        text=True, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield   # reframe needs no SIMSLURM_NODES: config/simulated.py reads what `up` recorded
    finally:
        subprocess.run([SIMSLURM, 'up'], env=env, capture_output=True, text=True, timeout=300)


def fake_scontrol(directory, states=None):
    """A `scontrol` in `directory` that prints `states` (saved `scontrol show node --oneliner`
    lines) for `show node`, or, without them, fails as scontrol does where no slurmctld answers."""
    directory.mkdir(exist_ok=True)
    script = directory / 'scontrol'
    if states is None:
        answer = ('echo "slurm_load_node error: Unable to contact slurm controller (connect failure)" >&2\n'
                  '    exit 1')
    else:
        (directory / 'states.txt').write_text(states)
        answer = f'exec cat {directory / "states.txt"}'
    # what needs no controller (`scontrol show hostnames`, which the rank wrapper uses) is the
    # real scontrol's, where the machine has one
    real = shutil.which('scontrol', path=os.pathsep.join(
        p for p in os.environ.get('PATH', '').split(os.pathsep) if p and os.path.abspath(p) != str(directory)))
    otherwise = f'exec {real} "$@"' if real else 'echo "scontrol: not here" >&2; exit 1'
    script.write_text(f'#!/bin/sh\nif [ "$1" = show ] && [ "$2" = node ]; then\n    {answer}\nfi\n{otherwise}\n')
    script.chmod(0o755)
    return directory


@pytest.fixture(autouse=True)
def no_slurm_here(request, tmp_path_factory, monkeypatch):
    """Tests that need no simulated cluster never read the machine's own Slurm (the cluster may
    be up, with other nodes than a test's sweep): `scontrol` fails as where no slurmctld answers,
    and config/simulated.py reads no node count that an earlier `bin/simslurm up` left (a 4-node
    test's count once made test_site's 2-node partition take 3)."""
    if request.node.get_closest_marker('cluster'):
        return None
    found = fake_scontrol(tmp_path_factory.mktemp('no-slurm'))
    monkeypatch.setenv('PATH', f'{found}:{os.environ["PATH"]}')
    monkeypatch.setenv('SIMSLURM_DIR', str(tmp_path_factory.mktemp('no-simslurm')))
    return found


def pytest_collection_modifyitems(items):
    """The tier of each test, in one place: a test that needs the simulated cluster, through
    the `cluster` fixture or a fixture that uses it, is marked `cluster` (bin/run-tests --quick
    leaves these out)."""
    for item in items:
        if 'cluster' in getattr(item, 'fixturenames', ()):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope='session')
def suite_run(cluster, tmp_path_factory):
    """The whole suite, as `bin/run-suite` runs it, into a private prefix: every check in the
    host's Python and in every image, at 1 and 2 nodes. Run once; the tests of several modules
    read its report and job outputs: (prefix, CompletedProcess)."""
    from mlcheck.data import images
    from reframe_runner import run_reframe
    for name in images.recipe_names():
        assert images.is_current(name), (f'image {name} is not built (bin/setup builds it): '
                                          f'{images.unbuilt_reason(images.image_path(name))}')
    prefix = tmp_path_factory.mktemp('e2e')
    done = run_reframe('simulated', prefix, '-r', env={'RFM_ENABLE_RESULTS_STORAGE': '0'})
    return prefix, done


def srun_line(script):
    """The srun command line of a job script."""
    return next(line for line in script.splitlines() if line.startswith('srun '))


def exports(script):
    """{variable: value} of the `export` lines of a job script."""
    return dict(re.findall(r'^export (\w+)=(.*)$', script, re.M))


def sha256(path):
    """The SHA-256 digest of a file, to show that a command left it alone."""
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_site_config(name):
    """The `site_configuration` dict of config/<name>.py, as ReFrame would load it."""
    spec = importlib.util.spec_from_file_location(f'site_{name}', os.path.join(REPO, 'config', f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


def partition_entry(config_name, partition):
    config = load_site_config(config_name)
    for system in config['systems']:
        for entry in system['partitions']:
            if f"{system['name']}:{entry['name']}" == partition:
                return entry
    raise KeyError(partition)


def settings_of(config_name, partition):
    from mlcheck.site.settings import PartitionSettings
    entry = partition_entry(config_name, partition)
    runtimes = [c['type'] for c in entry.get('container_platforms', [])]
    return PartitionSettings.from_extras(partition, entry['extras'], runtimes[0] if runtimes else None)


@pytest.fixture
def lumi():
    return settings_of('lumi', 'lumi:standard-g')


@pytest.fixture
def sim():
    return settings_of('simulated', 'sim:cluster')
