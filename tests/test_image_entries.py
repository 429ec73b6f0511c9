"""Image entries with their own environment and expected failure, through ReFrame: the job
scripts of two images differ exactly in their variables; a known-bad image's failure is
reported by ReFrame as expected."""

import difflib

from conftest import REPO
from reframe_runner import report_cases, run_reframe


def sim_config_with_images(tmp_path, images):
    """A config file: the simulated partition's, with extras.mlcheck.images set to `images`."""
    path = tmp_path / 'sim_images.py'
    path.write_text(
        'import importlib.util\n'
        f"spec = importlib.util.spec_from_file_location('simulated', '{REPO}/config/simulated.py')\n"
        'base = importlib.util.module_from_spec(spec)\n'
        'spec.loader.exec_module(base)\n'
        'site_configuration = base.site_configuration\n'
        "site_configuration['systems'][0]['partitions'][0]['extras']['mlcheck']['images'] = "
        f'{images!r}\n')
    return path


def test_two_images_job_scripts_differ_exactly_in_their_variables(tmp_path):
    for name in ('torch-new', 'torch-old'):
        (tmp_path / name).mkdir()      # a dry run only writes the scripts
    config = sim_config_with_images(tmp_path, [
        {'path': str(tmp_path / 'torch-new'), 'env_vars': {'FI_MR_CACHE_MONITOR': 'userfaultfd'}},
        {'path': str(tmp_path / 'torch-old'), 'env_vars': {'NCCL_NET_GDR_LEVEL': 'PHB'}},
    ])
    done = run_reframe(config, tmp_path / 'rfm', '--dry-run', '-n', 'MNISTDistributedCheck',
                       '-P', 'num_nodes=1')
    assert done.returncode == 0, done.stdout + done.stderr
    scripts = {}
    for case in report_cases(tmp_path / 'rfm'):
        text = (tmp_path / 'rfm' / case['stagedir'] / 'rfm_job.sh').read_text()
        # the stage directory, job name and image are the variants' own; the rest must be the same
        for own in (case['stagedir'], case['hashcode'], case['image']):
            text = text.replace(own, 'OWN')
        scripts[case['image']] = text
    assert sorted(scripts) == ['torch-new', 'torch-old']
    diff = [line for line in difflib.ndiff(scripts['torch-new'].splitlines(), scripts['torch-old'].splitlines())
            if line[:1] in '+-']
    assert diff == ["- export FI_MR_CACHE_MONITOR='userfaultfd'", "+ export NCCL_NET_GDR_LEVEL='PHB'"]


def test_a_known_bad_image_is_an_expected_failure_and_its_passing_is_flagged(cluster, tmp_path):
    """Real runs: the host's Python, told by its entry's variables to crash rank 0, fails as
    expected (XFAIL, the reason shown); an image expected to fail that trains fine is reported
    as an unexpected success, so the entry gets removed."""
    from mlcheck.data import images
    image = images.image_path('torch-2.14.1')
    config = sim_config_with_images(tmp_path, [
        {'path': 'host', 'env_vars': {'MLCHECK_FAULT': 'crash:0:1'},
         'expected_failure': 'rank 0 crashes in epoch 1 (issue #0)'},
        {'path': image, 'expected_failure': 'was fixed long ago'},
    ])
    done = run_reframe(config, tmp_path / 'rfm', '-r', '-n', 'MNISTDistributedCheck', '-P', 'num_nodes=1',
                       '-S', 'epochs=3')    # enough to learn; the host's run crashes in the first
    assert done.returncode != 0, done.stdout
    results = {case['image']: case['result'] for case in report_cases(tmp_path / 'rfm')}
    assert results == {'host': 'xfail', 'torch-2.14.1': 'fail'}, done.stdout
    xfail = next(line for line in done.stdout.splitlines() if 'XFAIL' in line)
    assert '%image=host %num_nodes=1 /' in xfail and xfail.endswith(
        '@sim:cluster+builtin [image host is expected to fail: rank 0 crashes in epoch 1 (issue #0)]')
    assert ('%image=host %num_nodes=1: failed as expected: rank 0 on nid001 failed: RuntimeError: '
            'injected fault: rank 0 crashed in epoch 1') in done.stdout
    assert ('Reason: unexpected success error: image torch-2.14.1 is expected to fail: was fixed '
            'long ago') in done.stdout
