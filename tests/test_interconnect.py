"""The interconnect program's formulas and checked values, and the sanity of its saved outputs.

sim_cluster_interconnect_{2,3}nodes.out: real runs of InterconnectCheck (image host) on the
simulated partition, 4 and 6 gloo ranks; each broken case is that output with one thing broken.
"""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import torch

from ddp_common import load_program
from mlcheck.judging import collectives, output
from saved_outputs import fact_line, judged, saved, saved_job, with_facts, without_facts, without_lines

program = load_program('comm/collectives.py')


OUTPUT = {nodes: f'sim_cluster_interconnect_{nodes}nodes.out' for nodes in (2, 3)}


def problems_of(sim, text, nodes=2):
    """Every problem the check would report: the launch's sanity, then the program's."""
    return judged(sim, text, nodes=nodes,
                  program=lambda run, expect: collectives.problems(run, expect.world_size, 0.5))


# --- formulas (nccl-tests, doc/PERFORMANCE.md) ------------------------------------------------

def test_algorithm_bandwidth_is_bytes_over_time_in_gb_per_s():
    assert program.algbw(2e9, 2.0) == 1.0


@pytest.mark.parametrize('op, ranks, factor', [
    ('all_reduce', 8, 2 * 7 / 8), ('all_reduce', 2, 1.0), ('all_reduce', 1, 0.0),
    ('all_gather', 8, 7 / 8), ('all_gather', 16, 15 / 16), ('reduce_scatter', 4, 3 / 4), ('p2p', 4, 1.0)])
def test_bus_bandwidth_factors(op, ranks, factor):
    assert program.busbw(op, 3e9, 1.5, ranks) == pytest.approx(2.0 * factor)


def test_size_sweep_reaches_both_ends_in_whole_elements():
    assert program.size_sweep(8, 4 << 20, 8) == [8, 64, 512, 4096, 32768, 262144, 2097152, 4 << 20]
    assert program.size_sweep(8, 1 << 30, 4)[-1] == 1 << 30
    assert program.size_sweep(1, 10, 4) == [4, 8]
    with pytest.raises(ValueError):
        program.size_sweep(16, 8, 2)


def test_iterations_follow_the_byte_budget_within_bounds():
    assert program.iterations(8, 1 << 20, 5, 100) == 100
    assert program.iterations(1 << 20, 8 << 20, 5, 100) == 8
    assert program.iterations(1 << 30, 1 << 20, 5, 100) == 5


def test_expected_values_are_what_the_ranks_send_combined():
    ranks, count = 5, 20
    sent = [program.pattern(count, r, 'cpu') for r in range(ranks)]
    assert torch.equal(program.all_reduce_expected(count, ranks, 'cpu'), sum(sent))
    assert torch.equal(program.all_gather_expected(count * ranks, ranks, 'cpu'), torch.cat(sent))


def test_a_wrong_element_is_found_with_its_index_and_values():
    expected = program.all_reduce_expected(100, 4, 'cpu')
    got = expected.clone()
    got[42] += 1
    assert program.wrong_values('all_reduce', 400, got, expected) == [
        {'op': 'all_reduce', 'bytes': 400, 'wrong': 1, 'index': 42,
         'got': expected[42].item() + 1, 'expected': expected[42].item()}]
    assert program.wrong_values('all_reduce', 400, expected, expected) == []


def test_percent_of_the_limit():
    assert collectives.percent_of(0.45, 0.9) == pytest.approx(50)
    assert collectives.percent_of(0.45, 0) is None


# --- sanity of saved outputs --------------------------------------------------------------

def test_real_runs_are_sane(sim):
    assert problems_of(sim, saved(OUTPUT[2])) == []
    assert problems_of(sim, saved(OUTPUT[3]), nodes=3) == []


def test_real_run_figures():
    result = output.parse(saved(OUTPUT[2])).result()
    sizes = [f for f in output.parse(saved(OUTPUT[2])).events('size') if f['op'] == 'all_reduce']
    assert result['busbw'] == sizes[-1]['busbw'] == pytest.approx(sizes[-1]['algbw'] * 1.5)
    assert result['largest_bytes'] == 4 << 20
    assert result['latency_us'] == pytest.approx(sizes[0]['seconds'] * 1e6)
    assert result['slowest_pair'] == ['nid001', 'nid002']


def test_wrong_value_on_one_rank_fails_naming_rank_node_collective_and_size(sim):
    wrong = [{'op': 'all_reduce', 'bytes': 32768, 'wrong': 3, 'index': 17, 'got': 0.0, 'expected': 30.0}]
    text = with_facts(saved(OUTPUT[2]), 'values', rank=2, wrong=wrong)
    assert problems_of(sim, text) == ['rank 2 on nid002: all_reduce of 32768 B received 3 wrong value(s) '
                                 '(element 17: got 0.0, expected 30.0)']


def test_missing_rank_fails(sim):
    text = without_lines(saved(OUTPUT[2]), r'^3: ')
    found = problems_of(sim, text)
    assert 'rank 3 never reported in (no rank line)' in found
    assert 'rank 3 did not finish' in found


def test_rank_that_checked_nothing_fails(sim):
    text = without_facts(saved(OUTPUT[2]), 'values', rank=1)
    assert problems_of(sim, text) == ['rank 1 reported no checked values']
    text = with_facts(saved(OUTPUT[2]), 'values', rank=1, checked=3)
    assert problems_of(sim, text) == ['rank 1 on nid001 checked 3 buffers, rank 0 measured 17']


def test_slow_pair_fails_naming_both_nodes(sim):
    text = with_pair_speeds(saved(OUTPUT[3]), {('nid002', 'nid003'): 0.3})
    assert problems_of(sim, text, nodes=3) == [
        'node pair nid002 <-> nid003: 0.3 GB/s, below 50% of the upper-quartile pair (2.59 GB/s)']


def with_pair_speeds(text, speeds):
    """`text` with each node pair's GB/s set from {(node, node): GB/s}."""
    return with_facts(text, 'pair',
                      change=lambda fact: {**fact, 'GBps': speeds.get(tuple(fact['nodes']), fact['GBps'])})


def test_a_slow_node_of_three_is_named(sim):
    """Issue 18 item 11: both pairs of nid003 at 0.3 GB/s made the median pair one of its own,
    and nothing was named."""
    text = with_pair_speeds(saved(OUTPUT[3]), {('nid002', 'nid003'): 0.3, ('nid003', 'nid001'): 0.3,
                                               ('nid001', 'nid002'): 2.59})
    assert problems_of(sim, text, nodes=3) == [
        'node nid003 is slow: every pair with it is below 50% of the upper-quartile pair without it '
        '(2.59 GB/s): nid002 <-> nid003 0.3 GB/s, nid003 <-> nid001 0.3 GB/s']


def test_two_neighbouring_slow_nodes_of_four_are_named():
    """Issue 18 item 11 at 4 nodes: nid002 and nid003 slow make 3 of the 4 ring pairs slow."""
    speeds = {('nid001', 'nid002'): 0.3, ('nid002', 'nid003'): 0.3, ('nid003', 'nid004'): 0.3,
              ('nid004', 'nid001'): 2.5}
    pairs = [{'event': 'pair', 'nodes': list(nodes), 'GBps': gbps} for nodes, gbps in speeds.items()]
    run = output.parse(''.join(fact_line(p, task=0) for p in pairs))
    assert [line.split(':')[0] for line in collectives.slow_pairs(run, 0.5)] == [
        'node nid002 is slow', 'node nid003 is slow']


def test_no_result_fails(sim):
    text = without_facts(saved(OUTPUT[2]), 'result')
    assert problems_of(sim, text) == ['no result line with the bus bandwidth (rank 0 did not report)']


def test_real_hang_in_a_collective_is_named(sim):
    """A real 2-node run with -S fault=hang-collective:1:2 -S collective_timeout=10: rank 1
    stopped before its first all_gather (phase 2); the others timed out after 10 s."""
    found = judged(sim, *saved_job('faults/sim_interconnect_hang-collective'), fault='hang-collective:1:2')
    assert len(found) == 1
    assert found[0].startswith('rank 1 on nid001 stopped responding: ranks 0, 2-3 timed out waiting '
                               'for it in a collective (RuntimeError: Timed out waiting 10000ms')


def test_slowdown_makes_each_timed_block_last_1_over_1_minus_f(tmp_path):
    """--slowdown F: a block of calls is timed at no less than 1/(1-F) times the calls themselves
    (a sleep never ends early), in a real one-rank gloo group."""
    import time
    import torch.distributed as dist
    dist.init_process_group('gloo', init_method=f'file://{tmp_path}/store', rank=0, world_size=1)
    try:
        cpu = torch.device('cpu')
        plain = program.timed(lambda: time.sleep(0.01), iters=3, warmup=0, device=cpu)
        slowed = program.timed(lambda: time.sleep(0.01), iters=3, warmup=0, device=cpu, slowdown=0.5)
    finally:
        dist.destroy_process_group()
    assert plain >= 0.01 and slowed >= 0.02


@pytest.mark.parametrize('config_name, partition', [('lumi', 'lumi:standard-g'),
                                                    ('frontier', 'frontier:batch'),
                                                    ('perlmutter', 'perlmutter:gpu')])
def test_gpu_sites_declare_both_limits_so_one_node_runs_report_busbw_of_limit(config_name, partition):
    """Both limits are the ceilings derived in each site's config: 4 x 200 Gb/s NICs, and a ring
    all_reduce's busbw over the node's GPU links (300 GB/s on MI250X and on 4 x A100)."""
    from conftest import settings_of
    limits = settings_of(config_name, partition).checks['interconnect']
    assert (limits['fabric_limit'], limits['node_limit']) == (100.0, 300.0)
    assert collectives.percent_of(150.0, limits['node_limit']) == 50.0


# --- values that stay exact at every world size (issue 18 item 5) ------------------------------

def summed_in_float32(sent, order):
    """Element-wise sum of the rows of `sent` (ranks x elements) added one rank at a time in
    float32, in the rank order `order`, as a ring all_reduce adds them (numpy's cumsum adds
    sequentially in the dtype it is given)."""
    return np.cumsum(sent[order], axis=0, dtype=np.float32)[-1]


def summed_as_a_tree_in_float32(sent):
    rows = sent.astype(np.float32)
    while len(rows) > 1:
        odd = rows[-1:] if len(rows) % 2 else rows[:0]
        half = len(rows) // 2
        rows = np.concatenate([rows[:half] + rows[half:2 * half], odd])
    return rows[0]


def sent_by_every_rank(world_size):
    """What every rank sends in one period of the pattern: world_size x PATTERN_PERIOD (the
    pattern repeats every PATTERN_PERIOD ranks, so those are asked of the program once)."""
    period = program.PATTERN_PERIOD
    one_period = np.stack([program.pattern(period, r, 'cpu').numpy() for r in range(period)])
    for r in (period, 2 * period + 3, world_size - 1):
        assert np.array_equal(program.pattern(period, r, 'cpu').numpy(), one_period[r % period])
    return one_period[np.arange(world_size) % period]


def largest_configured_world():
    from conftest import load_site_config
    from mlcheck.site.settings import PartitionSettings
    worlds = []
    for name in ('lumi', 'frontier', 'perlmutter', 'simulated'):
        for system in load_site_config(name)['systems']:
            for entry in system['partitions']:
                settings = PartitionSettings.from_extras(f"{system['name']}:{entry['name']}",
                                                         entry['extras'])
                nodes = settings.max_nodes or max(settings.node_counts)
                worlds.append(settings.layout(nodes).num_tasks)
    return max(worlds)


def test_the_largest_configured_world_is_within_what_the_values_check():
    assert 75776 == largest_configured_world() <= program.MAX_WORLD_SIZE   # Frontier: 9472 x 8


@pytest.mark.parametrize('world_size', [2190, 8192, 75776, program.MAX_WORLD_SIZE])
def test_all_reduce_values_are_exact_in_float32_in_any_order(world_size):
    """The issue's case: with (r + 1) * (1 + i % 7) the sums passed 2**24 from 2190 ranks, and
    a healthy fabric's ring reported 1 wrong element of 7 (7 of 7 at 8192)."""
    sent = sent_by_every_rank(world_size)
    expected = program.all_reduce_expected(program.PATTERN_PERIOD, world_size, 'cpu').numpy()
    rng = np.random.default_rng(world_size)
    for order in (np.arange(world_size), rng.permutation(world_size)):
        assert np.array_equal(summed_in_float32(sent, order), expected)
    assert np.array_equal(summed_as_a_tree_in_float32(sent[rng.permutation(world_size)]), expected)


def test_the_former_pattern_fails_the_same_simulation():
    """The simulation finds the issue's failure: it can tell an inexact pattern from an exact one."""
    index = np.arange(7)
    sent = np.stack([((index + 1) * (r + 1)).astype(np.float32) for r in range(2190)])
    expected = (index + 1) * (2190 * 2191 // 2)
    assert (summed_in_float32(sent, np.arange(2190)) != expected).sum() == 1


def test_a_world_beyond_what_the_values_check_is_refused():
    assert program.unverifiable_world(program.MAX_WORLD_SIZE) is None
    assert program.unverifiable_world(program.MAX_WORLD_SIZE + 1) == (
        '132105 ranks: the all_reduce values can be checked exactly in float32 for at most 132104 ranks')


def test_the_check_refuses_at_setup_what_the_program_would(tmp_path):
    """At setup, in one line, not after the job waited in the queue for thousands of nodes."""
    from reframe_runner import report_cases, run_reframe
    from conftest import REPO
    config = tmp_path / 'lumi_large.py'
    text = open(os.path.join(REPO, 'config', 'lumi.py')).read()
    config.write_text(text.replace("'max_nodes': 1024,", "'max_nodes': 20000,"))
    image = tmp_path / 'x.sif'
    image.touch()
    largest = program.MAX_WORLD_SIZE // 8
    done = run_reframe(config, tmp_path / 'rfm', '--system', 'lumi:standard-g', '--dry-run',
                       '-n', 'Interconnect', '-P', f'num_nodes={largest},{largest + 1}',
                       '-P', f'image={image}')
    assert done.returncode != 0 and 'Traceback' not in done.stdout + done.stderr
    cases = {c['num_nodes']: (c['fail_phase'], c['fail_reason']) for c in report_cases(tmp_path / 'rfm')}
    assert cases == {largest: (None, None),
                     largest + 1: ('setup', f'config error: {largest + 1} nodes: {8 * largest + 8} '
                                            f'ranks; the all_reduce values can be checked exactly '
                                            f'for at most {program.MAX_WORLD_SIZE}')}


def gloo_rank(rank, world_size, port, results):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.distributed.init_process_group('gloo', rank=rank, world_size=world_size)
    count = 3 * program.PATTERN_PERIOD + 5
    buffer = program.pattern(count, rank, 'cpu')
    torch.distributed.all_reduce(buffer)
    gathered = torch.empty(count * world_size)
    program.ALL_GATHER(gathered, program.pattern(count, rank, 'cpu'))
    results.put((rank, program.wrong_values('all_reduce', 4 * count, buffer,
                                            program.all_reduce_expected(count, world_size, 'cpu')),
                 program.wrong_values('all_gather', 4 * count * world_size, gathered,
                                      program.all_gather_expected(count * world_size, world_size,
                                                                  'cpu'))))
    torch.distributed.destroy_process_group()


def test_a_real_gloo_group_receives_the_expected_values():
    import multiprocessing
    from ddp_common import free_port
    context = multiprocessing.get_context('fork')
    results, world_size, port = context.Queue(), 3, free_port()
    ranks = [context.Process(target=gloo_rank, args=(r, world_size, port, results))
             for r in range(world_size)]
    for process in ranks:
        process.start()
    found = sorted(results.get(timeout=120) for _ in ranks)
    for process in ranks:
        process.join(timeout=60)
    assert found == [(r, [], []) for r in range(world_size)]


def test_the_check_and_the_program_agree_on_the_largest_world():
    from conftest import REPO
    text = open(os.path.join(REPO, 'checks', 'interconnect.py')).read()
    assert f'max_checked_ranks = {program.MAX_WORLD_SIZE}\n' in text


@pytest.mark.parametrize('latency, timed', [(1, 4), (4, 4), (8, 8), (9, 8)])
def test_the_latency_message_holds_at_least_one_element(latency, timed):
    """-S min_bytes=1 made the latency an all_reduce of an empty tensor: the program times one
    element instead, and its result names the size it timed."""
    sizes, latency_bytes = program.sweep_with_latency(latency, latency, 4096, 8)
    assert latency_bytes == timed and latency_bytes in sizes and min(sizes) == timed


# --- the node pairs in rounds -------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=100), st.integers(min_value=1, max_value=120))
def test_pair_rounds_give_each_node_its_partners_one_new_one_a_round(nodes, partners):
    names = [f'nid{i:03d}' for i in range(nodes)]
    schedule = program.pair_rounds(names, partners)
    met = {name: set() for name in names}
    for pairs in schedule:
        in_round = [n for pair in pairs for n in pair]
        assert len(in_round) == len(set(in_round)), pairs            # disjoint: at once
        assert len(in_round) >= nodes - 1                              # at most one sits out
        for a, b in pairs:
            assert a != b and names.index(a) < names.index(b)
            assert b not in met[a]                                     # a new partner each round
            met[a].add(b)
            met[b].add(a)
    assert all(len(others) == min(partners, nodes - 1) or len(others) > partners
               for others in met.values())
    # the rounds grow with the partners, not with the nodes
    assert len(schedule) <= (partners + nodes % 2 if nodes > 1 else 0)


def test_a_real_run_times_the_pairs_of_each_round_and_checks_their_values(tmp_path):
    """The program itself as 4 gloo ranks on 3 "nodes" (two ranks on nid001): 3 rounds, each
    pair once; the pairs with nid001 exchange through its first rank only (nid002 and nid003
    have one), so its second rank checks no pair, which the judge expects."""
    import subprocess
    import sys
    from ddp_common import free_port
    nodes, port = ['nid001', 'nid001', 'nid002', 'nid003'], free_port()
    script = os.path.join(os.path.dirname(program.__file__), 'collectives.py')
    ranks = [subprocess.Popen(
        [sys.executable, script, '--device', 'cpu', '--max-bytes', '4096', '--p2p-bytes', '65536',
         '--max-iters', '2', '--min-iters', '1', '--blocks', '1', '--warmup-iters', '0'],
        env={**os.environ, 'RANK': str(r), 'WORLD_SIZE': '4', 'LOCAL_RANK': str(nodes[:r].count(node)),
             'SLURMD_NODENAME': node, 'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': str(port),
             'OMP_NUM_THREADS': '1'},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r, node in enumerate(nodes)]
    said = [rank.communicate(timeout=300)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0] * 4, said
    text = ''.join(f'{r}: {line}\n' for r, out in enumerate(said) for line in out.splitlines())
    run = output.parse(text)
    pairs = [(p['round'], tuple(p['nodes']), p['ranks']) for p in run.events('pair')]
    assert pairs == [(1, ('nid002', 'nid003'), 1), (2, ('nid001', 'nid003'), 1),
                     (3, ('nid001', 'nid002'), 1)]
    assert {r: v['pairs_checked'] for r, v in run.by_rank('values').items()} == {0: 2, 1: 0, 2: 2, 3: 2}
    # their speeds here are of 2 cores shared by 4 ranks: not judged (fraction 0)
    assert collectives.problems(run, 4, 0.0) == []
    # a rank that skipped one of its pairs is named
    broken = with_facts(text, 'values', rank=2, change=lambda fact: {**fact, 'pairs_checked': 1})
    assert collectives.problems(output.parse(broken), 4, 0.0) == [
        'rank 2 on nid002 checked 1 node-pair buffers, its node and local id took part in 2 pairs']
