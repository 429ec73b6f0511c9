"""A known-bad image, marked in its config entry, through real runs on the simulated cluster:
its failure is reported by ReFrame as expected, and an image so marked that passes is flagged."""

from reframe_runner import NO_SOLO, report_cases, run_reframe, simulated_config_with


def test_a_known_bad_image_is_an_expected_failure_and_its_passing_is_flagged(cluster, tmp_path):
    """Real runs: the host's Python, told by its entry's variables to crash rank 0, fails as
    expected (XFAIL, the reason shown); an image expected to fail that trains fine is reported
    as an unexpected success, so the entry gets removed."""
    from mlcheck.data import images
    image = images.image_path('torch-2.14.1')
    config = simulated_config_with(tmp_path, images=[
        {'path': 'host', 'env_vars': {'MLCHECK_FAULT': 'crash:0:1'},
         'expected_failure': 'rank 0 crashes in epoch 1 (issue #0)'},
        {'path': image, 'expected_failure': 'was fixed long ago'},
    ])
    done = run_reframe(config, tmp_path / 'rfm', '-r', '-n', 'MNISTDistributedCheck', '-P', 'num_nodes=1',
                       '-S', 'epochs=1', *NO_SOLO)    # clears its bar (0.3 at 11 steps); the host's run crashes in it
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
