"""The report names the layer a fault was injected at, on real runs of the simulated partition:
the host stack (every slurmd in a CPU quota), one image (its entry slows its kernels and malloc),
the fabric (every link between nodes limited by nftables); tests/layer_sessions.py injects them
and runs the tests that tell each layer apart, compared with the same tests run unfaulted in the
same minutes (the 1-node ones twice, just before and just after the image's fault).

One run of each test a side, so a change must pass a 25 % threshold to count: the faults cost
40 % or more, two runs of a test minutes apart on the 2 cores differ by less (bench/layer_faults.py
runs each side three times with the default rule).
"""

import pytest

from layer_sessions import FAULTS, faulty_runs, likely_causes

THRESHOLD = ['--threshold', '25%']


@pytest.fixture(scope='module')
def runs(cluster, tmp_path_factory):
    return faulty_runs(tmp_path_factory.mktemp('layer-faults'))


@pytest.mark.parametrize('fault', FAULTS)
def test_the_report_names_the_layer_of_the_fault(runs, fault):
    """The image is named; the host stack and the fabric are among what it cannot tell apart:
    Slurm put every 1-node job on nid001 and every 2-node one on both nodes, so a slow nid001
    (or its link, or nid002's) would slow the same runs (issue 35), and the line says which run
    separates them."""
    code, lines = likely_causes(runs['none'], runs[fault], fault, *THRESHOLD)
    assert code == 1 and lines == [lines[0]], lines
    if fault.startswith('image'):
        assert lines[0].startswith(f'likely cause: {fault}: '), lines
    else:
        listed = lines[0].split(': ')[2]
        assert lines[0].startswith('likely cause: cannot tell: ') and fault in listed.split(' or '), lines
        assert 'to separate them: reframe -c checks/ -r ' in lines[0], lines
