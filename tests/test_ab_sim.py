"""-S compare_with on the simulated cluster, in one session of two 1-node MNIST jobs run one after
the other: torch-2.9.1 against itself (the A=A control) and torch-2.14.1, slowed inside the image
(its config entry keeps oneDNN and ATen to their oldest kernels and tunes malloc badly, as in the
layer-fault test: nothing the judge reads), against torch-2.9.1. The slowed image's job runs the
fewest rounds the rule judges (5); the control 6, an even number, so each image runs first in
half of them, and the rule's chance of a false `slower` is at most 2**-6 whatever the steps'
noise (docs/ab-images.md; with 5 rounds one control was called slower before the rule asked the
median's interval to clear 1).
"""

import pathlib

import pytest

from layer_sessions import IMAGE as SLOWED, image_slowed_config
from mlcheck.data import images
from reframe_runner import job_file, report_cases, run_reframe

OTHER = 'torch-2.9.1'
CONTROL_ROUNDS = 6


@pytest.fixture(scope='module')
def ab_session(cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('ab')
    config, cases = image_slowed_config(tmp), {}
    for name, rounds in ((SLOWED, 5), (OTHER, CONTROL_ROUNDS)):
        done = run_reframe(config, tmp / 'rfm', '-r', '-n', 'MNIST', '-P', 'num_nodes=1',
                           '-P', f'image={images.image_path(name)}', '-S', f'compare_with={OTHER}',
                           '-S', f'ab_rounds={rounds}', timeout=1200)
        cases[name] = (done, *report_cases(tmp / 'rfm'))
    return cases, tmp / 'rfm'


def verdict_lines(case):
    return pathlib.Path(job_file(case, 'ab/verdict.txt')).read_text()


def test_a_slowed_image_is_slower_and_fails_the_session(ab_session):
    cases, prefix = ab_session
    done, case = cases[SLOWED]
    assert done.returncode != 0
    assert case['fail_phase'] == 'performance', case['fail_reason']
    reason = case['fail_reason']
    assert f'{SLOWED} against {OTHER}: B/A 0.' in reason and ': slower' in reason, reason
    # every step of both images passed the check's own sanity, and the perf log has the figures,
    # the verdict and both images
    perflog = (prefix / 'perflogs' / 'sim' / 'cluster' / 'MNISTDistributedCheck.log').read_text()
    lines = [line for line in perflog.splitlines()
             if f'compare_with={OTHER};ab_rounds=5;ab_verdict=slower' in line and f'|{SLOWED}|' in line]
    assert {name for name in ('ab_ratio', 'ab_ratio_low', 'ab_ratio_high') if any(name in l for l in lines)} \
        == {'ab_ratio', 'ab_ratio_low', 'ab_ratio_high'}, perflog[-2000:]


def test_an_image_against_itself_is_never_slower_and_says_its_threshold(ab_session):
    cases, _ = ab_session
    said = verdict_lines(cases[OTHER][1])
    assert f'{OTHER} against {OTHER}: B/A ' in said and ': slower' not in said, said
    assert 'A=A control: these rounds support threshold 0.' in said, said
