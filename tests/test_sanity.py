"""Sanity and performance rules against saved outputs in the real formats, and each broken case.

sim_cluster_2nodes.out: a real run on the simulated partition (4 gloo ranks on nid001-002).
lumi_standard-g_2nodes.out: 16 ranks on 2 LUMI-G nodes written in the formats srun --label,
RCCL (NCCL_DEBUG=INFO, aws-ofi-rccl plugin, cxi provider) and the training script print; it is
composed from those documented formats, not captured on LUMI.
"""

import os
import re

import pytest

from conftest import DATA
from mlcheck.judging import output, rank_lists
from saved_outputs import LUMI_OUT, SIM_OUT, judged, saved, with_facts, without_facts, without_lines


def test_real_simulated_run_is_sane(sim):
    assert judged(sim, saved(SIM_OUT), min_accuracy=0.9) == []


def test_real_simulated_run_with_swapped_masks_fails(sim):
    """srun applied the masks in the wrong order on nid002: both of its ranks are flagged."""
    text = with_facts(saved(SIM_OUT), 'rank', change=lambda fact: {**fact, 'affinity': [1 - fact['affinity'][0]]}
                      if fact['node'] == 'nid002' else fact)
    found = judged(sim, text, min_accuracy=0.9)
    assert found == ['rank 2 (local rank 0 on nid002) runs on cores [1], expected [0] (mask 0x1)',
                     'rank 3 (local rank 1 on nid002) runs on cores [0], expected [1] (mask 0x2)']


def test_real_simulated_run_figures(sim):
    run = output.read(os.path.join(DATA, SIM_OUT))
    assert run.result_value('samples_per_s') > 0
    assert run.result_value('samples_per_s_per_device') == pytest.approx(run.result_value('samples_per_s') / 4)


def test_good_lumi_run_is_sane(lumi):
    assert judged(lumi, saved(LUMI_OUT), min_accuracy=0.9) == []


def test_good_lumi_run_performance_figures():
    run = output.parse(saved(LUMI_OUT))
    # steady state: epochs 2-5 (the first, 2.91 s, is warm-up), 60000 samples each
    assert run.result_value('samples_per_s') == pytest.approx(4 * 60000 / (0.84 + 0.83 + 0.85 + 0.84))
    assert run.result_value('samples_per_s_per_device') == pytest.approx(run.result_value('samples_per_s') / 16)
    assert run.train_seconds() == pytest.approx(2.91 + 0.84 + 0.83 + 0.85 + 0.84)


@pytest.mark.parametrize('newer_wording', [
    ('NET/OFI Using aws-ofi-rccl 1.4.0', 'NET/OFI Initializing aws-ofi-rccl 1.9.2'),
    ('NET/OFI Using aws-ofi-rccl 1.4.0', 'NET/OFI Initializing aws-ofi-nccl 1.14.0'),
    ('NET/OFI Selected Provider is cxi', 'NET/OFI Selected Provider is cxi (found 4 nics)'),
    ('NET/OFI Selected Provider is cxi', 'NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)'),
])
def test_newer_plugin_wording_is_accepted(lumi, newer_wording):
    old, new = newer_wording
    assert judged(lumi, saved(LUMI_OUT).replace(old, new), min_accuracy=0.9) == []


def test_plugin_not_loaded_socket_fallback_fails(lumi):
    text = without_lines(saved(LUMI_OUT), 'NET/OFI|Using network AWS')
    text = text.replace('Init START', 'Init START\n 0: nid005001:48000:48000 [0] NCCL INFO NET/Plugin : '
                        'Plugin load returned 2 : librccl-net.so: cannot open shared object file')
    fallback = ''.join(f'{r:2d}: nid00500{1 + r // 8}:1:1 [0] NCCL INFO Using network Socket\n'
                       for r in range(16))
    found = judged(lumi, text + fallback, min_accuracy=0.9)
    assert any('network plugin not loaded on ranks 0-15' in p for p in found)
    assert "communicators of ranks 0-15 used network Socket, expected '(?:AWS )?Libfabric|OFI'" in found


def test_socket_network_fails_even_if_plugin_lines_appear(lumi):
    """Rank 5 loaded the plugin and chose cxi, yet its communicator ended on sockets."""
    text = re.sub(r'^( 5: .*NCCL INFO Using network) AWS Libfabric$', r'\1 Socket', saved(LUMI_OUT), flags=re.M)
    assert judged(lumi, text, min_accuracy=0.9) == [
        "communicators of rank 5 used network Socket, expected '(?:AWS )?Libfabric|OFI'"]


def test_plugin_missing_on_one_rank_fails(lumi):
    text = without_lines(saved(LUMI_OUT), r'^ 9: .*NET/OFI Using')
    assert judged(lumi, text, min_accuracy=0.9) == [
        f"network plugin not loaded on rank 9 (no line matches {lumi.net_plugin.used_pattern!r})"]


def test_wrong_provider_fails(lumi):
    text = saved(LUMI_OUT).replace('Selected Provider is cxi', 'Selected Provider is tcp;ofi_rxm')
    assert judged(lumi, text, min_accuracy=0.9) == [
        "libfabric provider is tcp;ofi_rxm on ranks 0-15, expected 'cxi'"]


def test_missing_rank_fails(lumi):
    text = without_lines(saved(LUMI_OUT), r'^13: ')
    found = judged(lumi, text, min_accuracy=0.9)
    assert 'rank 13 never reported in (no rank line)' in found
    assert 'rank 13 did not finish' in found
    assert any('network plugin not loaded on rank 13' in p for p in found)


def test_rank_that_did_not_finish_fails(lumi):
    text = without_facts(saved(LUMI_OUT), 'done', rank=(4, 12))
    assert judged(lumi, text, min_accuracy=0.9) == ['ranks 4, 12 did not finish']


def test_wrong_affinity_fails(lumi):
    # rank 2 (local rank 2) on CCD 2 is bound to the whole CCD, reserved core 16 included
    text = with_facts(saved(LUMI_OUT), 'rank', rank=2, affinity=[16, 17, 18, 19, 20, 21, 22, 23])
    assert judged(lumi, text, min_accuracy=0.9) == [
        'rank 2 (local rank 2 on nid005001) runs on cores [16, 17, 18, 19, 20, 21, 22, 23], '
        'expected [17, 18, 19, 20, 21, 22, 23] (mask 0xfe0000)']


def test_unbound_ranks_fail(lumi):
    text = with_facts(saved(LUMI_OUT), 'rank', affinity=list(range(64)))
    assert len(judged(lumi, text, min_accuracy=0.9)) == 16


def test_low_accuracy_fails(lumi):
    text = with_facts(saved(LUMI_OUT), 'result', test_accuracy=0.1135)
    assert judged(lumi, text, min_accuracy=0.9) == ['test accuracy 0.1135 is below 0.9000']


def test_missing_result_fails(lumi):
    assert judged(lumi, without_facts(saved(LUMI_OUT), 'result'), min_accuracy=0.9) == [
        'no test accuracy reported (no result line)']


def test_wrong_world_size_fails(lumi):
    found = judged(lumi, saved(LUMI_OUT), nodes=4, min_accuracy=0.9)
    assert 'ranks 16-31 never reported in (no rank line)' in found
    assert 'rank 0 ran in a world of 16, launched 32' in found
    assert 'ranks ran on 2 node(s) (nid005001, nid005002), expected 4' in found


def test_rank_without_its_own_gpu_fails(lumi):
    text = with_facts(saved(LUMI_OUT), 'rank', rank=0, visible_devices=8)
    assert judged(lumi, text, min_accuracy=0.9) == [
        "rank 0 uses device 'cuda:0' and sees 8 GPU(s); expected exactly one GPU"]


def test_cpu_run_on_a_gpu_partition_fails(lumi):
    text = with_facts(saved(LUMI_OUT), 'rank', device='cpu')
    assert len(judged(lumi, text, min_accuracy=0.9)) == 16


def test_ranks_piled_on_one_node_fail(lumi):
    text = with_facts(saved(LUMI_OUT), 'rank', node='nid005001')
    assert judged(lumi, text, min_accuracy=0.9) == ['ranks ran on 1 node(s) (nid005001), expected 2',
                                                    'node nid005001 ran 16 ranks, expected 8']


def test_garbled_fact_line_is_reported(lumi):
    found = judged(lumi, saved(LUMI_OUT) + ' 3: MLCHECK {"event": "done", "rank": 3\n', min_accuracy=0.9)
    assert found == ['unreadable fact line: 3: MLCHECK {"event": "done", "rank": 3']


def test_rank_list_compacts_ranges():
    assert rank_lists.rank_list([5]) == 'rank 5'
    assert rank_lists.rank_list([0, 1, 2, 3, 7, 9, 10]) == 'ranks 0-3, 7, 9-10'
