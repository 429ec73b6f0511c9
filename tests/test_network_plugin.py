"""The network plugin's sanity against each wording of the plugins and of NCCL, passing and failing.

Base: tests/data/lumi_standard-g_2nodes.out (16 ranks, aws-ofi-rccl 1.4, cxi, every communicator
on "AWS Libfabric"). Each case rewrites rank 5's lines, or every rank's, into another version's
wording; the patterns are LUMI's, from config/lumi.py.
"""

import re

import pytest

from mlcheck.judging import output, sanity
from mlcheck.placement.launch import Layout
from test_sanity import lumi_problems, lumi_text

NETWORK = "'(?:AWS )?Libfabric'"


def rank5(text, old, new):
    """`text` with `old` replaced by `new` in rank 5's NCCL lines only."""
    return re.sub(rf'^( 5: .*NCCL INFO ){re.escape(old)}$', lambda m: m.group(1) + new, text, flags=re.M)


def everywhere(text, old, new):
    return re.sub(rf'(NCCL INFO ){re.escape(old)}$', lambda m: m.group(1) + new, text, flags=re.M)


PLUGIN_WORDINGS = {
    'aws-ofi-rccl 1.4': ('NET/OFI Using aws-ofi-rccl 1.4.0', 'NET/OFI Selected Provider is cxi'),
    'aws-ofi-nccl 1.7.4': ('NET/OFI Initializing aws-ofi-nccl 1.7.4', 'NET/OFI Selected provider is cxi'),
    'aws-ofi-nccl 1.15': ('NET/OFI Initializing aws-ofi-nccl 1.15.0',
                          'NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)'),
    'NCCL 2.14+ plugin line': ('NET/Plugin: Loaded net plugin AWS Libfabric (v6)',
                               'NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)'),
}


def with_plugin(name, network='AWS Libfabric'):
    """The LUMI run as printed by the plugin `name`, every communicator ending on `network`."""
    init, provider = PLUGIN_WORDINGS[name]
    text = everywhere(lumi_text(), 'NET/OFI Using aws-ofi-rccl 1.4.0', init)
    text = everywhere(text, 'NET/OFI Selected Provider is cxi', provider)
    return everywhere(text, 'Using network AWS Libfabric', f'Using network {network}')


@pytest.mark.parametrize('plugin', PLUGIN_WORDINGS)
@pytest.mark.parametrize('network', ['AWS Libfabric', 'Libfabric'])
def test_each_plugin_wording_on_the_fabric_passes(lumi, plugin, network):
    assert lumi_problems(lumi, with_plugin(plugin, network)) == []


@pytest.mark.parametrize('plugin', PLUGIN_WORDINGS)
@pytest.mark.parametrize('network', ['Socket', 'IB'])
def test_each_plugin_wording_that_ends_on_another_network_fails(lumi, plugin, network):
    """The plugin initialised and chose cxi, but rank 5's communicator used something else."""
    text = rank5(with_plugin(plugin), 'Using network AWS Libfabric', f'Using network {network}')
    assert lumi_problems(lumi, text) == [
        f'communicators of rank 5 used network {network}, expected {NETWORK}']


def test_a_second_communicator_on_sockets_fails(lumi):
    """Every communicator counts: rank 5's first is on the fabric, a later one is not."""
    text = lumi_text() + ' 5: nid005001:48085:48300 [0] NCCL INFO Using network Socket\n'
    assert lumi_problems(lumi, text) == [f'communicators of rank 5 used network Socket, expected {NETWORK}']


@pytest.mark.parametrize('fallback', [
    'NET/Plugin : No plugin found (libnccl-net.so), using internal implementation',
    'NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.',
    'NET/Plugin: Could not find: libnccl-net.so.',       # NCCL 2.27 and later
])
def test_each_nccl_fallback_wording_is_named_when_the_rank_ends_on_sockets(lumi, fallback):
    text = re.sub(r'^( 5: .*NCCL INFO )NET/OFI Using aws-ofi-rccl 1.4.0$', lambda m: m.group(1) + fallback,
                  lumi_text(), flags=re.M)
    text = re.sub(r'^ 5: .*NET/OFI Selected Provider.*\n', '', text, flags=re.M)
    text = rank5(text, 'Using network AWS Libfabric', 'Using network Socket')
    found = lumi_problems(lumi, text)
    assert found[:3] == [
        f'network plugin not loaded on rank 5 (no line matches {lumi.net_plugin.used_pattern!r})',
        f"libfabric provider is never named on rank 5, expected 'cxi'",
        f'communicators of rank 5 used network Socket, expected {NETWORK}']
    wording = re.search(lumi.net_plugin.fallback_pattern, fallback).group(0)
    assert found[3:] == [f'NCCL fell back to its internal network on rank 5 ({wording!r})']


@pytest.mark.parametrize('fallback', [
    'NET/Plugin : No plugin found (libnccl-net.so), using internal implementation',
    'NET/Plugin: Could not find: libnccl-net.so.',
])
def test_a_fallback_line_before_the_plugin_loads_does_not_fail_a_rank_on_the_fabric(lumi, fallback):
    """NCCL may look for a plugin under several names: the network used decides."""
    text = rank5(lumi_text(), 'NET/OFI Using aws-ofi-rccl 1.4.0',
                 f'{fallback}\n 5: nid005001:48085:48085 [0] NCCL INFO NET/OFI Using aws-ofi-rccl 1.4.0')
    assert lumi_problems(lumi, text) == []


def test_a_rank_that_never_names_its_network_fails(lumi):
    text = re.sub(r'^ 5: .*Using network.*\n', '', lumi_text(), flags=re.M)
    assert lumi_problems(lumi, text) == [
        f'rank 5 never said which network its communicators used '
        f'(no line matches {lumi.net_plugin.network_pattern!r})']


def test_hang_after_connected_all_rings_is_said_per_rank(lumi):
    """As reported against LUMI's AI images: rings connect, trees never do, the first collective
    times out. Ranks 8-15 got no further than the rings; ranks 0-7 connected their trees too."""
    stdout = re.sub(r'^.*(Init COMPLETE|"event": "(epoch|summary|result|done)").*\n', '', lumi_text(), flags=re.M)
    stdout = re.sub(r'^(\s*(\d+): (\S+) \[0\] NCCL INFO )(comm .* Init START)$',
                    lambda m: f'{m.group(1)}{m.group(4)}\n{m.group(1)}Connected all rings'
                              + (f'\n{m.group(1)}Connected all trees' if int(m.group(2)) < 8 else ''),
                    stdout, flags=re.M)
    stderr = ''.join(f'{r:2d}: [rank{r}]:[E ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective '
                     f'operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, '
                     f'Timeout(ms)=300000) ran for 300001 milliseconds before timing out.\n' for r in range(16))
    expect = sanity.Expectations.for_run(lumi, Layout.for_nodes(lumi.topology, 2), min_accuracy=0.9)
    found = sanity.problems(output.parse(stdout, stderr=stderr), expect)
    assert found[0].startswith('ranks 0-15 on nid005001, nid005002 failed: Watchdog caught collective '
                               'operation timeout')
    assert found[-2:] == [
        "NCCL set-up of ranks 8-15 reached 'Connected all rings' but never 'Connected all trees'",
        "NCCL set-up of ranks 0-7 reached 'Connected all trees' but never 'Init COMPLETE'"]


def test_where_the_partition_names_no_network_the_fallback_wording_alone_names_the_rank(lumi):
    """Without an expected network, NCCL's fallback words are read on every rank, also where
    the network lines look fine."""
    import dataclasses
    text = rank5(lumi_text(), 'NET/OFI Using aws-ofi-rccl 1.4.0', 'NET/Plugin: Could not find: libnccl-net.so.')
    expect = sanity.Expectations.for_run(lumi, Layout.for_nodes(lumi.topology, 2), min_accuracy=0.9)
    expect = dataclasses.replace(expect, net_plugin=dataclasses.replace(lumi.net_plugin, network=None))
    assert sanity.problems(output.parse(text), expect) == [
        f'network plugin not loaded on rank 5 (no line matches {lumi.net_plugin.used_pattern!r})',
        "NCCL fell back to its internal network on rank 5 ('Could not find: libnccl-net.so.')"]
