"""Partition settings from config extras: validation, images, datasets."""

import copy
import os

import pytest

from conftest import partition_entry
from mlcheck.errors import ConfigError
from mlcheck.site.images import image_name
from mlcheck.site.settings import PartitionSettings


def lumi_extras():
    return copy.deepcopy(partition_entry('lumi', 'lumi:standard-g')['extras'])


def from_extras(extras, runtime='Singularity'):
    return PartitionSettings.from_extras('lumi:standard-g', extras, runtime)


@pytest.mark.parametrize('change, message', [
    (lambda m: m.update(gpu_vendr='amd'), 'unknown key(s) gpu_vendr'),
    (lambda m: m.update(gpu_vendor='intel'), "gpu_vendor: 'intel' is not one of amd, nvidia, stand-in, none"),
    (lambda m: m.update(node_counts=[1, '2']), "node_counts[1]: expected int, got str '2'"),
    (lambda m: m.update(node_counts=[]), 'node_counts: empty; give at least 1'),
    (lambda m: m.update(max_nodes='1024'), "max_nodes: expected int, got str '1024'"),
    (lambda m: m.update(max_nodes=2), 'max_nodes: 2 is less than the largest of node_counts, 4'),
    (lambda m: m.update(images='/a.sif'), "images: expected list, got str '/a.sif'"),
    (lambda m: m.update(datasets={'mnist': 3}), 'datasets.mnist: expected str'),
    (lambda m: m.pop('topology'), 'missing required key(s) topology'),
    (lambda m: m['net_plugin'].update(provider_pattern='Selected (cxi)'), "needs a group named 'provider'"),
    (lambda m: m['net_plugin'].update(used_pattern='NET/OFI ('), 'bad regular expression'),
    (lambda m: m['net_plugin'].pop('provider'), 'missing required key(s) provider'),
    (lambda m: m['net_plugin'].update(network_pattern='Using network (.*)'), "needs a group named 'network'"),
    (lambda m: m['net_plugin'].update(network='(AWS Libfabric'), 'net_plugin.network: bad regular expression'),
])
def test_bad_settings_are_one_line_errors_naming_the_partition(change, message):
    extras = lumi_extras()
    change(extras['mlcheck'])
    with pytest.raises(ConfigError) as err:
        from_extras(extras)
    text = str(err.value)
    assert message in text and 'partition lumi:standard-g extras.mlcheck' in text and '\n' not in text


def test_partition_without_settings_says_so():
    with pytest.raises(ConfigError, match='extras.mlcheck: missing'):
        from_extras({})


def test_image_names_drop_the_image_suffix():
    assert image_name('/appl/x/lumi-pytorch-rocm-6.2.4-v2.6.0.sif') == 'lumi-pytorch-rocm-6.2.4-v2.6.0'
    assert image_name('/var/images/torch-2.14/') == 'torch-2.14'
    # Enroot's squashfs files (CSCS and Pyxis users name them .sqsh)
    assert image_name('/capstor/ce-images/pytorch+25.11-py3.sqsh') == 'pytorch+25.11-py3'


def test_glob_finds_images_and_names_resolve(tmp_path):
    for name in ('pytorch-a.sif', 'pytorch-b.sif', 'other.sif'):
        (tmp_path / name).touch()
    extras = lumi_extras()
    extras['mlcheck']['images'] = [str(tmp_path / 'pytorch-*.sif')]
    settings = from_extras(extras)
    assert sorted(settings.image_paths()) == ['pytorch-a', 'pytorch-b']
    assert settings.resolve_image('pytorch-b') == str(tmp_path / 'pytorch-b.sif')
    # an image given by path with -P is taken as it is
    assert settings.resolve_image(str(tmp_path / 'other.sif')) == str(tmp_path / 'other.sif')


def test_missing_images_name_the_path(tmp_path):
    extras = lumi_extras()
    extras['mlcheck']['images'] = [str(tmp_path / 'gone.sif'), str(tmp_path / 'none-*.sif')]
    settings = from_extras(extras)
    with pytest.raises(ConfigError, match=f'image not found: {tmp_path}/gone.sif'):
        settings.resolve_image('gone')
    with pytest.raises(ConfigError, match=f'no image matches {tmp_path}/none-\\*.sif'):
        settings.resolve_image('none-*')
    with pytest.raises(ConfigError, match="image 'nope' is not configured for partition lumi:standard-g"):
        settings.resolve_image('nope')
    with pytest.raises(ConfigError, match=f'image not found: {tmp_path}/x.sif'):
        settings.resolve_image(str(tmp_path / 'x.sif'))


def test_partition_without_container_runtime_runs_on_the_host():
    settings = from_extras(lumi_extras(), runtime=None)
    assert settings.image_paths() == {'host': None}
    assert settings.resolve_image('host') is None
    with pytest.raises(ConfigError, match='has no container runtime'):
        settings.resolve_image('/images/x.sif')
    with pytest.raises(ConfigError, match="has no container runtime, so image 'torch' cannot run"):
        settings.resolve_image('torch')


def test_host_runs_beside_images_with_its_own_python(tmp_path):
    """'host' among the images: the partition's own Python, the data at its host path."""
    (tmp_path / 'torch-a').mkdir()
    extras = lumi_extras()
    extras['mlcheck'].update(images=['host', str(tmp_path / 'torch-a')], python='/opt/venv/bin/python',
                             host_python='/usr/bin/python3', data_mount='/mlcheck/data')
    settings = from_extras(extras, runtime='Charliecloud')
    assert settings.image_paths() == {'host': None, 'torch-a': str(tmp_path / 'torch-a')}
    assert settings.resolve_image('host') is None
    image = settings.resolve_image('torch-a')
    assert (settings.python_for(None), settings.python_for(image)) == ('/usr/bin/python3', '/opt/venv/bin/python')
    assert settings.data_path_for(None, '/d') == '/d'
    assert settings.data_path_for(image, '/d') == '/mlcheck/data'
    assert ('/d', '/mlcheck/data') in settings.bind_mounts('/d')


def test_an_image_that_could_not_be_built_says_why(tmp_path):
    """Its recorded reason makes the check skip; without one, a missing image is an error."""
    from mlcheck.site.images import ImageUnavailable
    extras = lumi_extras()
    extras['mlcheck']['images'] = ['host', str(tmp_path / 'torch-a'), str(tmp_path / 'torch-b')]
    (tmp_path / 'torch-a.unbuilt').write_text('only 2.0 GB free in /cache; an image needs about 14 GB\n')
    settings = from_extras(extras, runtime='Charliecloud')
    with pytest.raises(ImageUnavailable) as err:
        settings.resolve_image('torch-a')
    assert str(err.value) == ('image torch-a was not built on this machine: only 2.0 GB free in '
                              '/cache; an image needs about 14 GB')
    with pytest.raises(ConfigError, match=f'image not found: {tmp_path}/torch-b') as err:
        settings.resolve_image('torch-b')
    assert not isinstance(err.value, ImageUnavailable)


def test_dataset_directory_is_checked(tmp_path, sim):
    (tmp_path / 'MNIST' / 'raw').mkdir(parents=True)
    assert sim.dataset_dir('mnist', str(tmp_path), 'MNIST/raw') == str(tmp_path)
    with pytest.raises(ConfigError, match=f'mnist dataset directory not found: {tmp_path}/no'):
        sim.dataset_dir('mnist', str(tmp_path / 'no'))
    with pytest.raises(ConfigError, match='does not hold MNIST/raw'):
        sim.dataset_dir('mnist', str(tmp_path / 'MNIST'), 'MNIST/raw')
    with pytest.raises(ConfigError, match='no imagenet dataset is configured'):
        sim.dataset_dir('imagenet')


def test_binds_map_to_the_same_path_unless_given(lumi):
    assert ('/opt/cray', '/opt/cray') in lumi.bind_mounts('/data')
    settings = from_extras({**lumi_extras(), 'mlcheck': {**lumi_extras()['mlcheck'],
                                                          'container_binds': ['/a:/b']}})
    assert settings.bind_mounts('/data') == [('/a', '/b'), ('/data', '/data')]


def test_node_count_must_fit_the_partition(sim, lumi):
    sim.check_node_count(2)
    with pytest.raises(ConfigError) as err:
        sim.check_node_count(3)
    assert str(err.value) == ('num_nodes=3 does not fit partition sim:cluster: a job there gets at '
                              'most 2 nodes (extras.mlcheck.max_nodes)')
    with pytest.raises(ConfigError, match='num_nodes=0: a job needs at least one node'):
        lumi.check_node_count(0)
    lumi.check_node_count(1024)


def test_corrupt_mnist_files_are_named(tmp_path):
    from mlcheck.data.datasets import check_mnist
    from mlcheck.data.staging import stage_mnist
    raw, _ = stage_mnist(str(tmp_path))
    check_mnist(str(tmp_path), '-S data_dir')
    images = os.path.join(raw, 'train-images-idx3-ubyte')
    with open(images, 'r+b') as f:
        f.truncate(5000)                       # a copy that stopped half-way
    with pytest.raises(ConfigError) as err:
        check_mnist(str(tmp_path), '-S data_dir')
    assert str(err.value) == (f'mnist dataset file {images} is corrupt: 5000 bytes, but its header '
                              f'(1498x28x28) needs 1174448 (from -S data_dir)')
    with open(images, 'wb') as f:
        f.write(b'<html>Not Found</html>')      # an error page saved in its place
    with pytest.raises(ConfigError, match='header 3c68746d is not that of IDX unsigned bytes'):
        check_mnist(str(tmp_path), '-S data_dir')
    os.remove(os.path.join(raw, 't10k-labels-idx1-ubyte'))
    os.remove(images)
    with pytest.raises(ConfigError, match=r'train-images-idx3-ubyte is missing \(from -S data_dir\)'):
        check_mnist(str(tmp_path), '-S data_dir')


def test_image_entries_carry_their_own_environment_python_and_expected_failure(tmp_path):
    """A glob entry's settings hold for each image it matches, and for an image given by path
    with -P that it matches; plain paths keep the partition's settings."""
    for name in ('lumi-pytorch-new-a.sif', 'lumi-pytorch-old.sif'):
        (tmp_path / name).touch()
    extras = lumi_extras()
    extras['mlcheck']['images'] = [
        {'path': str(tmp_path / 'lumi-pytorch-new-*.sif'), 'env_vars': {'FI_MR_CACHE_MONITOR': 'userfaultfd'},
         'python': '/opt/conda/bin/python', 'rank_prelude': '', 'expected_failure': 'hangs at start (#28)'},
        str(tmp_path / 'lumi-pytorch-old.sif')]
    settings = from_extras(extras)
    assert sorted(settings.image_paths()) == ['lumi-pytorch-new-a', 'lumi-pytorch-old']
    new = settings.resolve_image('lumi-pytorch-new-a')
    old = settings.resolve_image('lumi-pytorch-old')
    assert settings.image_entry(new).env_vars == {'FI_MR_CACHE_MONITOR': 'userfaultfd'}
    assert settings.image_entry(new).expected_failure == 'hangs at start (#28)'
    assert (settings.python_for(new), settings.rank_prelude_for(new)) == ('/opt/conda/bin/python', '')
    assert settings.image_entry(old).env_vars == {} and not settings.image_entry(old).expected_failure
    assert (settings.python_for(old), settings.rank_prelude_for(old)) == ('python', settings.rank_prelude)
    assert settings.image_entry(str(tmp_path / 'lumi-pytorch-new-b.sif')).expected_failure
    assert not settings.image_entry('/elsewhere/lumi-pytorch-new-b.sif').expected_failure


@pytest.mark.parametrize('entry, message', [
    ({'env_vars': {}}, 'images[0]: missing required key(s) path'),
    ({'path': '/a.sif', 'env': {}}, 'images[0]: unknown key(s) env; allowed:'),
    ({'path': '/a.sif', 'env_vars': {'NCCL_NET_GDR_LEVEL': 3}}, 'images[0].env_vars.NCCL_NET_GDR_LEVEL: expected str'),
    ({'path': '/a.sif', 'env_vars': {'A-B': '1'}}, "images[0].env_vars: 'A-B' is not a variable name"),
    ({'path': '/a.sif', 'expected_failure': True}, 'images[0].expected_failure: expected str'),
    (3, 'images[0]: expected str or mapping, got int 3'),
])
def test_bad_image_entries_are_one_line_errors(entry, message):
    extras = lumi_extras()
    extras['mlcheck']['images'] = [entry]
    with pytest.raises(ConfigError) as err:
        from_extras(extras)
    assert message in str(err.value) and 'partition lumi:standard-g extras.mlcheck' in str(err.value)


def alps_extras():
    return copy.deepcopy(partition_entry('alps', 'daint:normal')['extras'])


@pytest.mark.parametrize('change, message', [
    (lambda m: m['edf'].update(mounts=['/a']), 'edf: unknown key(s) mounts; allowed: annotations, env'),
    (lambda m: m['edf']['env'].update({'BAD-NAME': '1'}), "'BAD-NAME' is not a variable name"),
    (lambda m: m['edf']['env'].update(NCCL_CROSS_NIC=1), 'edf.env.NCCL_CROSS_NIC: expected str, got int 1'),
    (lambda m: m['edf']['annotations'].update({'com.hooks..x': 'true'}),
     "'com.hooks..x' is not an annotation key"),
])
def test_bad_environment_definitions_are_one_line_errors(change, message):
    extras = alps_extras()
    change(extras['mlcheck'])
    with pytest.raises(ConfigError) as err:
        PartitionSettings.from_extras('daint:normal', extras, 'ContainerEngine')
    assert message in str(err.value) and 'partition daint:normal extras.mlcheck' in str(err.value)


def test_environment_definition_only_where_the_container_engine_reads_it():
    with pytest.raises(ConfigError, match=r'daint:normal extras.mlcheck.edf: only a partition whose '
                                          r'container_platforms type is ContainerEngine .* has Pyxis\)'):
        PartitionSettings.from_extras('daint:normal', alps_extras(), 'Pyxis')


def test_image_entry_variables_join_the_environment_definition_over_the_partitions():
    extras = alps_extras()
    extras['mlcheck']['images'] = [{'path': 'nvcr.io#nvidia/pytorch:25.11-py3',
                                    'env_vars': {'NCCL_PROTO': 'Simple', 'EXTRA': 'x'}}]
    settings = PartitionSettings.from_extras('daint:normal', extras, 'ContainerEngine')
    edf = settings.edf_for('nvcr.io#nvidia/pytorch:25.11-py3')
    assert edf['env']['NCCL_PROTO'] == 'Simple' and edf['env']['EXTRA'] == 'x'
    assert edf['env']['NCCL_NET'] == 'AWS Libfabric'
    assert edf['annotations'] == {'com.hooks.aws_ofi_nccl.enabled': 'true',
                                  'com.hooks.aws_ofi_nccl.variant': 'cuda-dl'}
    # the partition's own definition is left as configured
    assert settings.edf_for('other')['env']['NCCL_PROTO'] == '^LL128'


def test_trusting_the_dataset_writers_reaches_the_ranks():
    """extras.mlcheck.trusts_dataset_writers is what lets the CIFAR-100 program read a file
    that others can write (src/pytorch/cifar/cifar_data.py): the job script exports it."""
    from mlcheck.placement.launch import job_exports
    extras = lumi_extras()
    plain = from_extras(extras)
    extras['mlcheck']['trusts_dataset_writers'] = True
    trusting = from_extras(extras)
    variable = 'export MLCHECK_TRUSTS_DATASET_WRITERS=1'
    assert variable not in job_exports(plain, plain.layout(1))
    assert variable in job_exports(trusting, trusting.layout(1))
