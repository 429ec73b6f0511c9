"""-S compare_with on the simulated cluster, in one session of two 1-node MNIST jobs run one after
the other: torch-2.9.1 against itself (the A=A control) and torch-2.14.1, slowed inside the image
(its config entry keeps oneDNN and ATen to their oldest kernels and tunes malloc badly, as in the
layer-fault test: nothing the judge reads), against torch-2.9.1. Each job runs 5 rounds.
"""

import pathlib

import pytest

from layer_sessions import IMAGE as SLOWED, image_slowed_config
from mlcheck.data import images
from reframe_runner import job_file, report_cases, run_reframe

OTHER = 'torch-2.9.1'


@pytest.fixture(scope='module')
def ab_session(cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('ab')
    paths = ','.join(images.image_path(name) for name in (SLOWED, OTHER))
    done = run_reframe(image_slowed_config(tmp), tmp / 'rfm', '-r', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', f'image={paths}', '-S', f'compare_with={OTHER}', '-S', 'ab_rounds=5',
                       '--exec-policy=serial', timeout=1200)
    cases = {case['image']: case for case in report_cases(tmp / 'rfm')}
    return done, cases, tmp / 'rfm'


def verdict_lines(case):
    return pathlib.Path(job_file(case, 'ab/verdict.txt')).read_text()


def test_a_slowed_image_is_slower_and_fails_the_session(ab_session):
    done, cases, prefix = ab_session
    case = cases[SLOWED]
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
    _, cases, _ = ab_session
    said = verdict_lines(cases[OTHER])
    assert f'{OTHER} against {OTHER}: B/A ' in said and ': slower' not in said, said
    assert 'A=A control: these rounds support threshold 0.' in said, said
