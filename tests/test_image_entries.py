"""Image entries with their own environment, through ReFrame: the job scripts of two images
differ exactly in their variables (their expected failures run in test_image_entries_sim.py)."""

from reframe_runner import changed_lines, job_scripts_by_image, run_reframe, simulated_config_with


def test_two_images_job_scripts_differ_exactly_in_their_variables(tmp_path):
    for name in ('torch-new', 'torch-old'):
        (tmp_path / name).mkdir()      # a dry run only writes the scripts
    config = simulated_config_with(tmp_path, images=[
        {'path': str(tmp_path / 'torch-new'), 'env_vars': {'FI_MR_CACHE_MONITOR': 'userfaultfd'}},
        {'path': str(tmp_path / 'torch-old'), 'env_vars': {'NCCL_NET_GDR_LEVEL': 'PHB'}},
    ])
    done = run_reframe(config, tmp_path / 'rfm', '--dry-run', '-n', 'MNISTDistributedCheck',
                       '-P', 'num_nodes=1')
    assert done.returncode == 0, done.stdout + done.stderr
    scripts = job_scripts_by_image(tmp_path / 'rfm')
    assert sorted(scripts) == ['torch-new', 'torch-old']
    assert changed_lines(scripts['torch-new'], scripts['torch-old']) == [
        "- export FI_MR_CACHE_MONITOR='userfaultfd'", "+ export NCCL_NET_GDR_LEVEL='PHB'"]
