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

from layer_sessions import FAULTS, faulty_runs, likely_causes, listed_candidates

THRESHOLD = ['--threshold', '25%']


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
    kept the fabric only beside the host image (docs/performance-history.md)."""
    code, lines = likely_causes(runs['none'], runs[fault], fault, *THRESHOLD)
    assert code == 1 and lines == [lines[0]], lines
    if lines[0].startswith((f'likely cause: {fault}: ', f'likely cause: {fault}, though a second cause')):
        return
    assert lines[0].startswith('likely cause: cannot tell: '), lines      # a wrong cause fails
    hypotheses = listed_candidates(lines[0])
    assert any(h == fault or h.startswith(f'{fault}, and ') or h.endswith(f', and {fault} beyond it')
               for h in hypotheses), lines
    # a run that separates them, or the line says none on these two nodes can (the links of
    # nid001 and nid002 carry every run across nodes: excluding both leaves no node to run on)
    assert ('to separate them: reframe -c checks/ -r ' in lines[0] or 'to clear it: reframe -c checks/ -r ' in lines[0]
            or lines[0].endswith('; no run of these checks on these nodes separates them')), lines
