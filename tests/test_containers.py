"""Container platforms by configured name, and the command lines (and CSCS's environment
definition file) each one gives."""

import tomllib

import pytest

from mlcheck.errors import ConfigError
from mlcheck.placement.containers import (Charliecloud, ContainerEngine, Pyxis, Shifter,
                                          known_platforms, platform_for)


def charliecloud(**values):
    platform = platform_for('Charliecloud')
    platform.image = '/images/torch 2'
    platform.command = 'sh ./launch/rank-env.sh python -u ./train.py'
    for name, value in values.items():
        setattr(platform, name, value)
    return platform


def test_platforms_are_created_by_their_configured_name():
    assert isinstance(platform_for('Charliecloud'), Charliecloud)
    assert isinstance(platform_for('charliecloud'), Charliecloud)
    assert platform_for('Singularity').name == 'Singularity'     # ReFrame's own
    with pytest.raises(ValueError, match='unknown container platform'):
        platform_for('Podmann')
    assert {'Charliecloud', 'Pyxis', 'ContainerEngine', 'Singularity'} <= set(known_platforms())


def test_ch_run_binds_then_stage_directory_then_image_and_command():
    platform = charliecloud(mount_points=[('/data', '/mlcheck/data')], options=['--private-tmp'])
    assert platform.launch_command('/stage/x') == (
        "ch-run --bind=/data:/mlcheck/data --bind=/stage/x:/rfm_workdir --cd=/rfm_workdir "
        "--private-tmp '/images/torch 2' -- sh ./launch/rank-env.sh python -u ./train.py")
    # building the command twice gives the same binds (nothing is appended to mount_points)
    assert platform.launch_command('/stage/x') == platform.launch_command('/stage/x')


def test_paths_with_spaces_are_quoted_and_the_stage_mount_can_be_left_out():
    platform = charliecloud(mount_points=[('/my data', '/d')], mount_stagedir=None, workdir=None)
    assert platform.launch_command('/stage') == (
        "ch-run '--bind=/my data:/d' '/images/torch 2' -- sh ./launch/rank-env.sh python -u ./train.py")


def test_ch_run_gets_a_user_name_in_batch_jobs():
    assert charliecloud().emit_prepare_commands('/stage') == ['export USER="${USER:-$(id -un)}"']


def test_shifter_takes_image_and_volumes_as_nersc_documents_them():
    """`shifter [options] command`, not ReFrame's Sarus-like `shifter run --mount=...`."""
    platform = platform_for('Shifter')
    assert isinstance(platform, Shifter)
    platform.image = 'docker:nersc/pytorch:24.06.01'
    platform.command = 'sh ./launch/rank-env.sh python -u ./train.py'
    platform.mount_points = [('/global/data', '/data')]
    platform.options = ['--module=gpu,nccl-plugin']
    assert platform.launch_command('/stage/x') == (
        'shifter --image=docker:nersc/pytorch:24.06.01 --volume=/global/data:/data '
        '--module=gpu,nccl-plugin sh ./launch/rank-env.sh python -u ./train.py')
    assert platform.emit_prepare_commands('/stage/x') == []


def configured(name, **values):
    platform = platform_for(name)
    platform.image = 'nvcr.io#nvidia/pytorch:25.11-py3'
    platform.command = 'sh ./launch/rank-env.sh python -u ./train.py'
    platform.mount_points = [('/data', '/data')]
    for key, value in values.items():
        setattr(platform, key, value)
    return platform


def test_pyxis_gives_srun_its_container_options_before_the_command():
    """Pyxis's options are srun's own: image, comma-separated mounts, workdir, then the command."""
    platform = configured('Pyxis')
    assert isinstance(platform, Pyxis)
    assert platform.launch_command('/stage/x') == (
        "'--container-image=nvcr.io#nvidia/pytorch:25.11-py3' "
        '--container-mounts=/data:/data,/stage/x:/rfm_workdir --container-workdir=/rfm_workdir '
        'sh ./launch/rank-env.sh python -u ./train.py')
    assert platform.emit_prepare_commands('/stage/x') == []
    # a squashfs file is an image too; without mounts or workdir no empty option is left
    platform = configured('Pyxis', image='/images/torch.sqsh', mount_points=[],
                          mount_stagedir=None, workdir=None)
    assert platform.launch_command('/s') == (
        '--container-image=/images/torch.sqsh sh ./launch/rank-env.sh python -u ./train.py')


def test_pyxis_refuses_a_mount_with_a_comma():
    platform = configured('Pyxis', mount_points=[('/my,data', '/d')])
    with pytest.raises(ConfigError, match="Pyxis cannot mount '/my,data:/d'"):
        platform.launch_command('/stage')


def test_container_engine_writes_the_edf_into_the_stage_directory(tmp_path):
    platform = configured('ContainerEngine', env={'NCCL_NET': 'AWS Libfabric', 'Q': 'say "hi"'},
                          annotations={'com.hooks.aws_ofi_nccl.enabled': 'true'},
                          options=['--mpi=pmix'])
    assert isinstance(platform, ContainerEngine)
    command = platform.launch_command(str(tmp_path))
    edf = tmp_path / 'rfm_env.toml'
    assert command == (f'--environment={edf} --mpi=pmix '
                       'sh ./launch/rank-env.sh python -u ./train.py')
    assert tomllib.loads(edf.read_text()) == {
        'image': 'nvcr.io#nvidia/pytorch:25.11-py3',
        'mounts': ['/data:/data', f'{tmp_path}:/rfm_workdir'],
        'workdir': '/rfm_workdir',
        'env': {'NCCL_NET': 'AWS Libfabric', 'Q': 'say "hi"'},
        'annotations': {'com': {'hooks': {'aws_ofi_nccl': {'enabled': 'true'}}}},
    }


def test_an_emoji_in_an_image_path_keeps_the_edf_valid_toml(tmp_path):
    """Issue 48 item 10: json.dumps wrote '\\ud83d\\ude00' for it, a surrogate pair TOML refuses
    (on 42e5ead tomllib could not read the EDF)."""
    image = '/images/torch-\U0001f600.sqsh'
    platform = configured('ContainerEngine', image=image, env={'NOTE': 'caf\u00e9 \U0001f680'})
    platform.launch_command(str(tmp_path))
    edf = tomllib.loads((tmp_path / 'rfm_env.toml').read_text())
    assert edf['image'] == image and edf['env'] == {'NOTE': 'caf\u00e9 \U0001f680'}


def test_container_engine_without_tables_writes_none():
    platform = configured('ContainerEngine', mount_points=[], workdir=None, mount_stagedir=None)
    assert platform.environment_definition('/s') == (
        'image = "nvcr.io#nvidia/pytorch:25.11-py3"\nmounts = []\n')


@pytest.mark.parametrize('image, meant', [
    ('nvcr.io/nvidia/pytorch:25.11-py3', 'nvcr.io#nvidia/pytorch:25.11-py3'),
    ('localhost:5000/torch:1', 'localhost:5000#torch:1'),
    ('me@nvcr.io/nvidia/pytorch:1', 'me@nvcr.io#nvidia/pytorch:1'),
    ('nvcr.io#nvidia/pytorch:25.11-py3', None), ('nvidia/pytorch:25.11', None),
    ('ubuntu:24.04', None), ('/images/torch.sqsh', None), ('./torch.sqsh', None)])
def test_a_docker_style_reference_to_another_registry_is_said_in_enroots_form(image, meant):
    from mlcheck.placement.containers import enroot_uri_meant
    assert enroot_uri_meant(image) == meant
    warning = configured('Pyxis', image=image).image_warning()
    assert (warning is None) == (meant is None) and (meant is None or warning.endswith(meant))
