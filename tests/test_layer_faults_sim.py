"""The report names the layer a fault was injected at, on real runs of the simulated partition:
the host stack (every slurmd in a CPU quota), one image (its entry slows its kernels and malloc),
the fabric (every link between nodes limited by nftables); tests/layer_sessions.py injects them
and runs the tests that tell each layer apart, compared with the same tests run unfaulted in the
same minutes (the 1-node ones twice, just before and just after the image's fault).

One run of each test a side (bench/layer_faults.py runs each side three times with the default
rule), so a change must pass a 25 % threshold to count (layer_sessions.THRESHOLD). Most figures
of two runs minutes apart differ by less, not all: in two CI runs the 1-node interconnect check's
latency doubled and its busbw fell 26 % between sessions (tests/data/perflogs/layer-faults-*, tests/test_causes.py).
"""

import pytest

from layer_sessions import FAULTS, THRESHOLD, faulty_runs, likely_causes, never_confidently_wrong


@pytest.fixture(scope='module')
def runs(cluster, tmp_path_factory):
    return faulty_runs(tmp_path_factory.mktemp('layer-faults'))


@pytest.mark.parametrize('fault', FAULTS)
def test_the_report_names_the_layer_of_the_fault(runs, fault):
    """Never confidently wrong on real runs, the bank's criterion (tests/scenario_bank.py): the
    fault named, or `cannot tell` with the fault among the hypotheses it keeps and the run that
    would separate them. Slurm put every 1-node job on nid001 and every 2-node one on both nodes,
    so a slow nid001 (or its link, or nid002's) slows the same runs as the host stack or the
    fabric (issue 35). With one run after and two before, the rule's bound on the noise is wide:
    of two fresh-clone runs on 2026-11-27, one named the image, the other said cannot tell (its
    loss -70 % against 4 % of noise), and the 1-node loopback latency (+89 % in one run, noise)
    kept the fabric only beside the host image (docs/performance-history.md). The fabric, on
    two CI runs on 2026-11-28, was blamed on the host image, until a figure no test repeated took
    the widest spread measured (mlcheck.history.cells) instead of a guess of 5 %."""
    never_confidently_wrong(*likely_causes(runs['none'], runs[fault], fault, *THRESHOLD), fault)
