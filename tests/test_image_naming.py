"""An image is named the same however it was given (a configured name, or a path with -P), so
its references, perf log lines and history are one; a test without references says so."""

import copy
import os
import re

import pytest

from conftest import REPO
from mlcheck.errors import ConfigError
from mlcheck.judging.references import missing_references
from mlcheck.site.images import ImageByPath, image_given_by_path, image_parameter
from reframe_runner import run_reframe

SIM_REFERENCES = os.path.join(REPO, 'config', 'references', 'sim.yaml')
MNIST_VARS = ('samples_per_s', 'samples_per_s_per_gpu', 'train_time')


def test_an_image_given_by_path_is_named_by_its_file_name():
    image = image_parameter('/var/cache/mlcheck/images/978a52c858e27f41/torch-2.14.1')
    assert image == 'torch-2.14.1' and f'{image}' == 'torch-2.14.1' and {image: 1}['torch-2.14.1']
    assert image_given_by_path(image) == '/var/cache/mlcheck/images/978a52c858e27f41/torch-2.14.1'
    assert image_given_by_path(copy.deepcopy(image)) == image_given_by_path(image)   # ReFrame copies it
    assert image_parameter('/appl/images/lumi-pytorch-rocm-6.2.sif') == 'lumi-pytorch-rocm-6.2'
    assert image_given_by_path(image_parameter('torch-2.14.1')) is None            # a configured name


def test_the_path_given_is_run_even_where_an_image_of_that_name_is_configured(sim, tmp_path):
    given = tmp_path / 'torch-2.14.1'
    given.mkdir()
    assert sim.resolve_image(ImageByPath(str(given))) == str(given)
    assert sim.image_paths()['torch-2.14.1'] != str(given)


def test_an_image_given_by_path_finds_the_configured_ones_references():
    keys = {'$partition': 'sim:cluster', 'image': str(image_parameter('/x/torch-2.14.1')), 'num_nodes': 1}
    assert missing_references(SIM_REFERENCES, 'MNISTDistributedCheck', keys, MNIST_VARS) is None


@pytest.mark.parametrize('keys, why', [
    ({'image': 'torch-3.0', 'num_nodes': 1}, 'no references for partition sim:cluster, image torch-3.0, num_nodes 1'),
    ({'image': 'host', 'num_nodes': 4}, 'no references for partition sim:cluster, image host, num_nodes 4'),
])
def test_a_test_without_references_says_so(keys, why):
    found = missing_references(SIM_REFERENCES, 'MNISTDistributedCheck', {'$partition': 'sim:cluster', **keys},
                               MNIST_VARS)
    assert found == f'{why} in {SIM_REFERENCES}'


def test_missing_variables_and_files_are_named(tmp_path):
    keys = {'$partition': 'sim:cluster', 'image': 'host', 'num_nodes': 1}
    assert missing_references(SIM_REFERENCES, 'MNISTDistributedCheck', keys, (*MNIST_VARS, 'new_var')) == \
        f'no references for new_var in {SIM_REFERENCES}'
    assert missing_references(str(tmp_path / 'x.yaml'), 'MNISTDistributedCheck', keys, MNIST_VARS) == \
        f'no references file {tmp_path / "x.yaml"}'


@pytest.mark.parametrize('given', ['/images/a|b/torch-2.14.1', '/images/torch\n2.14.1', 'torch|x'])
def test_an_image_that_would_break_a_perf_log_line_is_refused_at_setup(sim, given):
    """-P image=... goes into the perf log unescaped: a '|' or a newline would corrupt the line."""
    with pytest.raises(ConfigError, match=re.escape("a '|', a line break or a control character cannot be logged")):
        sim.resolve_image(image_parameter(given))


def one_line_session_error(done):
    """The session ended before any test ran, with one line of its own on stderr (ReFrame's banner
    on stdout aside): no test failed in a block of its own."""
    assert done.returncode != 0 and 'FAILURE INFO' not in done.stdout and 'Traceback' not in done.stderr
    [line] = done.stderr.splitlines()
    return line


def test_a_missing_image_ends_the_session_in_one_line(tmp_path):
    """New-user trial: -P image=/nonexistent/new.sif failed its test at setup with a 15-line
    FAILURE INFO block, where the README promises one line."""
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', 'image=/nonexistent/new.sif')
    assert one_line_session_error(done) == 'mlcheck: config error: image not found: /nonexistent/new.sif (-P image)'


def test_two_images_of_one_file_name_in_different_folders_are_refused_in_one_line(tmp_path):
    """/a/new.sif and /b/new.sif were both the test `%image=new`: one name for two images."""
    for folder in 'ab':
        (tmp_path / folder / 'new.sif').mkdir(parents=True)
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', f'image={tmp_path}/a/new.sif,{tmp_path}/b/new.sif')
    assert one_line_session_error(done) == (
        f'mlcheck: config error: -P image: {tmp_path}/a/new.sif and {tmp_path}/b/new.sif are both named '
        f'new (an image is named by its file name): give one of them another name')
