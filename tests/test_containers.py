"""Container platforms by configured name, and the command line of Charliecloud's ch-run."""

import pytest

from mlcheck.placement.containers import Charliecloud, Shifter, known_platforms, platform_for


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
    assert {'Charliecloud', 'Singularity', 'Apptainer'} <= set(known_platforms())


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
