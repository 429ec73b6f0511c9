import importlib.util
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, 'tests', 'data')
SIMSLURM = os.path.join(REPO, 'bin', 'simslurm')

# the training programs' modules (ddp_common, gpu_locality), importable as the programs import them
sys.path.insert(0, os.path.join(REPO, 'src', 'pytorch'))


@pytest.fixture(scope='session')
def cluster():
    """The simulated Slurm cluster, started if it is not running (it is never stopped here)."""
    up = subprocess.run([SIMSLURM, 'up'], capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, up.stdout + up.stderr


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
    from mlcheck.site import PartitionSettings
    entry = partition_entry(config_name, partition)
    runtimes = [c['type'] for c in entry.get('container_platforms', [])]
    return PartitionSettings.from_extras(partition, entry['extras'], runtimes[0] if runtimes else None)


@pytest.fixture
def lumi():
    return settings_of('lumi', 'lumi:standard-g')


@pytest.fixture
def sim():
    return settings_of('simulated', 'sim:cluster')
