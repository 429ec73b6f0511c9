"""The network plugin's sanity against each wording of the plugins and of NCCL, passing and failing.

Base: tests/data/lumi_standard-g_2nodes.out (16 ranks, aws-ofi-rccl 1.4, cxi, every communicator
on "AWS Libfabric"). Each case rewrites rank 5's lines, or every rank's, into another version's
wording; the patterns are LUMI's, from config/lumi.py.
"""

import dataclasses
import re

import pytest

from conftest import settings_of
from mlcheck.judging import nccl, output, sanity
from mlcheck.placement.launch import Layout
from saved_outputs import LUMI_OUT, judged, saved, without_lines

NETWORK = "'(?:AWS )?Libfabric|OFI'"


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
    text = everywhere(saved(LUMI_OUT), 'NET/OFI Using aws-ofi-rccl 1.4.0', init)
    text = everywhere(text, 'NET/OFI Selected Provider is cxi', provider)
    return everywhere(text, 'Using network AWS Libfabric', f'Using network {network}')


@pytest.mark.parametrize('plugin', PLUGIN_WORDINGS)
@pytest.mark.parametrize('network', ['AWS Libfabric', 'Libfabric', 'OFI'])   # OFI: NCCL_NET=OFI (OLCF)
def test_each_plugin_wording_on_the_fabric_passes(lumi, plugin, network):
    assert judged(lumi, with_plugin(plugin, network), min_accuracy=0.9) == []


@pytest.mark.parametrize('plugin', PLUGIN_WORDINGS)
@pytest.mark.parametrize('network', ['Socket', 'IB'])
def test_each_plugin_wording_that_ends_on_another_network_fails(lumi, plugin, network):
    """The plugin initialised and chose cxi, but rank 5's communicator used something else."""
    text = rank5(with_plugin(plugin), 'Using network AWS Libfabric', f'Using network {network}')
    assert judged(lumi, text, min_accuracy=0.9) == [
        f'communicators of rank 5 used network {network}, expected {NETWORK}']


def test_a_second_communicator_on_sockets_fails(lumi):
    """Every communicator counts: rank 5's first is on the fabric, a later one is not."""
    text = saved(LUMI_OUT) + ' 5: nid005001:48085:48300 [0] NCCL INFO Using network Socket\n'
    assert judged(lumi, text, min_accuracy=0.9) == [
        f'communicators of rank 5 used network Socket, expected {NETWORK}']


@pytest.mark.parametrize('fallback', [
    'NET/Plugin : No plugin found (libnccl-net.so), using internal implementation',
    'NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.',
    'NET/Plugin: Could not find: libnccl-net.so.',       # NCCL 2.27 and later
])
def test_each_nccl_fallback_wording_is_named_when_the_rank_ends_on_sockets(lumi, fallback):
    text = re.sub(r'^( 5: .*NCCL INFO )NET/OFI Using aws-ofi-rccl 1.4.0$', lambda m: m.group(1) + fallback,
                  saved(LUMI_OUT), flags=re.M)
    text = without_lines(text, r'^ 5: .*NET/OFI Selected Provider')
    text = rank5(text, 'Using network AWS Libfabric', 'Using network Socket')
    found = judged(lumi, text, min_accuracy=0.9)
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
    text = rank5(saved(LUMI_OUT), 'NET/OFI Using aws-ofi-rccl 1.4.0',
                 f'{fallback}\n 5: nid005001:48085:48085 [0] NCCL INFO NET/OFI Using aws-ofi-rccl 1.4.0')
    assert judged(lumi, text, min_accuracy=0.9) == []


def test_a_rank_that_never_names_its_network_fails(lumi):
    text = without_lines(saved(LUMI_OUT), r'^ 5: .*Using network')
    assert judged(lumi, text, min_accuracy=0.9) == [
        f'rank 5 never said which network its communicators used '
        f'(no line matches {lumi.net_plugin.network_pattern!r})']


def test_hang_after_connected_all_rings_is_said_per_rank(lumi):
    """As reported against LUMI's AI images: rings connect, trees never do, the first collective
    times out. Ranks 8-15 got no further than the rings; ranks 0-7 connected their trees too."""
    stdout = without_lines(saved(LUMI_OUT), r'Init COMPLETE|"event": "(epoch|summary|result|done)"')
    stdout = re.sub(r'^(\s*(\d+): (\S+) \[0\] NCCL INFO )(comm .* Init START)$',
                    lambda m: f'{m.group(1)}{m.group(4)}\n{m.group(1)}Connected all rings'
                              + (f'\n{m.group(1)}Connected all trees' if int(m.group(2)) < 8 else ''),
                    stdout, flags=re.M)
    stderr = ''.join(f'{r:2d}: [rank{r}]:[E ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective '
                     f'operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, '
                     f'Timeout(ms)=300000) ran for 300001 milliseconds before timing out.\n' for r in range(16))
    found = judged(lumi, stdout, stderr=stderr, min_accuracy=0.9)
    assert found[0].startswith('ranks 0-15 on nid005001, nid005002 failed: Watchdog caught collective '
                               'operation timeout')
    assert found[-2:] == [
        "NCCL set-up of ranks 8-15 reached 'Connected all rings' but never 'Connected all trees'",
        "NCCL set-up of ranks 0-7 reached 'Connected all trees' but never 'Init COMPLETE'"]


def without_network(settings):
    """`settings` as a partition that names no expected network (as Frontier and Perlmutter did)."""
    return dataclasses.replace(settings, net_plugin=dataclasses.replace(settings.net_plugin, network=None))


def test_where_the_partition_names_no_network_a_fallback_line_alone_does_not_fail_a_rank(lumi):
    """Issue 18 item 6: without an expected network the fallback wording failed a rank that went
    on to load the plugin and use the fabric; its `Using network` lines decide, as with LUMI's."""
    text = rank5(saved(LUMI_OUT), 'NET/OFI Using aws-ofi-rccl 1.4.0',
                 'NET/Plugin: Could not find: libnccl-net.so.\n'
                 ' 5: nid005001:48085:48085 [0] NCCL INFO NET/OFI Using aws-ofi-rccl 1.4.0')
    assert judged(without_network(lumi), text, min_accuracy=0.9) == []
    # the plugin never loaded: named, but the rank's communicators used the fabric regardless
    text = rank5(saved(LUMI_OUT), 'NET/OFI Using aws-ofi-rccl 1.4.0',
                 'NET/Plugin: Could not find: libnccl-net.so.')
    assert judged(without_network(lumi), text, min_accuracy=0.9) == [
        f'network plugin not loaded on rank 5 (no line matches {lumi.net_plugin.used_pattern!r})']


def test_where_the_partition_names_no_network_a_rank_on_sockets_is_said_to_have_fallen_back(lumi):
    text = rank5(saved(LUMI_OUT), 'NET/OFI Using aws-ofi-rccl 1.4.0',
                 'NET/Plugin: Could not find: libnccl-net.so.')
    text = rank5(text, 'Using network AWS Libfabric', 'Using network Socket')
    assert judged(without_network(lumi), text, min_accuracy=0.9) == [
        f'network plugin not loaded on rank 5 (no line matches {lumi.net_plugin.used_pattern!r})',
        "NCCL fell back to its internal network on rank 5 ('Could not find: libnccl-net.so.')"]


@pytest.mark.parametrize('site, partition', [('frontier', 'frontier:batch'), ('perlmutter', 'perlmutter:gpu')])
def test_frontier_and_perlmutter_pass_a_rank_that_looked_for_a_plugin_first(site, partition):
    """The broken case of issue 18 item 6 against the sites' own net_plugin settings: rank 5
    printed NCCL's fallback line, then loaded aws-ofi-rccl, selected cxi and used the fabric."""
    plugin = settings_of(site, partition).net_plugin
    text = with_plugin('aws-ofi-nccl 1.15', 'Libfabric')
    text = rank5(text, 'NET/OFI Initializing aws-ofi-nccl 1.15.0',
                 'NET/Plugin: Could not find: libnccl-net.so.\n'
                 ' 5: nid005001:48085:48085 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.15.0')
    lines = output.parse(text).lines
    assert nccl.network_problems(lambda rank: lines.get(rank, []), 16, plugin) == []
    # and a rank that ended on sockets fails, with NCCL's words for it
    text = rank5(text, 'Using network Libfabric', 'Using network Socket')
    lines = output.parse(text).lines
    assert nccl.network_problems(lambda rank: lines.get(rank, []), 16, plugin) == [
        f"communicators of rank 5 used network Socket, expected {plugin.network!r}",
        "NCCL fell back to its internal network on rank 5 ('Could not find: libnccl-net.so.')"]


@pytest.mark.parametrize('site, partition', [('lumi', 'lumi:standard-g'), ('frontier', 'frontier:batch'),
                                             ('perlmutter', 'perlmutter:gpu')])
def test_one_node_on_nccls_sockets_passes_where_the_plugin_is_needed_from_two(site, partition):
    """OLCF: on one Frontier node "the plugin will not initialize", and NCCL sends nothing over
    the network there. The same lines on two nodes fail."""
    settings = settings_of(site, partition)
    text = without_lines(saved(LUMI_OUT), 'NET/OFI')
    text = everywhere(text, 'Using network AWS Libfabric', 'Using network Socket')
    run = output.parse(text)
    assert settings.net_plugin.from_nodes == 2
    one = sanity.Expectations.for_run(settings, Layout.for_nodes(settings.topology, 1))
    assert sanity.network_plugin(run, one) == []
    two = dataclasses.replace(one, num_nodes=2)
    assert sanity.network_plugin(run, two)[0].startswith('network plugin not loaded on ranks 0-')
