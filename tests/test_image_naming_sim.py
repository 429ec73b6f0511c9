"""End to end: an image given by path is the configured image of that name (its references,
perf log lines and history), and an image without references says which figures are not judged."""

import os
import subprocess

import pytest

from conftest import REPO
from mlcheck.data import images
from mlcheck.judging import references
from mlcheck.simulated import speed
from reframe_runner import NO_SOLO, run_reframe


def test_image_given_by_path_is_judged_like_the_configured_one(cluster, tmp_path):
    name = images.recipe_names()[0]
    configured = images.image_path(name)
    assert images.is_current(name), f'image {name} is not built (bin/setup builds it)'
    new = tmp_path / 'images' / 'torch-new'          # the same files, under a name without references
    new.parent.mkdir()
    subprocess.run(['cp', '-al', configured, str(new)], check=True)
    done = run_reframe('simulated', tmp_path / 'rfm', '-r', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', f'image={configured},{new}', '-S', 'epochs=1', *NO_SOLO,
                       env={'RFM_ENABLE_RESULTS_STORAGE': '0'})
    log = (tmp_path / 'rfm' / 'perflogs' / 'sim' / 'cluster' / 'MNISTDistributedCheck.log').read_text()
    lines = [line.split('|') for line in log.splitlines()[1:]]
    # name | image | ... | perf_var | value | unit | ref: the name and the references of the configured one
    by_image = {fields[4]: fields for fields in lines if fields[9] == 'samples_per_s'}
    assert sorted(by_image) == sorted([name, 'torch-new']), log
    assert f'%image={name} ' in by_image[name][3] and configured not in log
    # at the machine speed the run measured or read as it started (mlcheck.simulated.speed)
    reference = references.at_machine_speed(
        os.path.join(REPO, 'config', 'references', 'sim.yaml'), 'MNISTDistributedCheck',
        {'$partition': 'sim:cluster', 'image': name, 'num_nodes': 1}, speed.last()['steps_per_s'])
    assert float(by_image[name][12]) == pytest.approx(reference['samples_per_s'][0]), by_image[name]
    # the figures named, then why
    assert (f'peak_host_memory, samples_per_s, samples_per_s_per_gpu, train_time not judged: no references for partition sim:cluster, image torch-new, '
            f'num_nodes 1 in ') in done.stdout, done.stdout[-3000:]
    assert f'image {name}, num_nodes 1' not in done.stdout
