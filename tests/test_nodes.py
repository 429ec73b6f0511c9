"""mlcheck-nodes: every node of a sweep against its peers, failed runs, nodes not vetted; the
Slurm host lists of --expect. Perf logs in ReFrame's format, written from samples of known truth."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from mlcheck.commands import nodes as command
from mlcheck.errors import InputError
from mlcheck.history import hostlist, nodes
from mlcheck.history.samples import Sample
from perflogs import write_perflog

MNIST = 'MNISTDistributedCheck %image=host %num_nodes=1'
FIGURES = (('samples_per_s', 'samples/s', 970.0), ('epoch_time', 's', 12.0))


def sweep(n, slower=None, failed=(), noise=0.02, seed=1, figures=FIGURES, name=MNIST,
          node=lambda i: f'nid{i:03d}'):
    """Samples of one one-node run per node: nodes in `slower` ({node: fraction}) that much
    slower (a rate times 1 - f, a time divided by it), nodes in `failed` without values."""
    rng = random.Random(seed)
    found = []
    for i in range(1, n + 1):
        host = node(i)
        factor = 1 - (slower or {}).get(host, 0)
        for var, unit, base in figures:
            value = base * rng.gauss(1, noise)
            value = value * factor if unit != 's' else value / factor
            found.append(Sample('sim:cluster', name, 'host', 1, var,
                                None if host in failed else value, unit, 1.79e9 + i,
                                jobid=str(100 + i), nodelist=host, reference=(1250, -0.5, None),
                                result='fail' if host in failed else 'pass', settings='epochs=3'))
    return found


def run(capsys, *argv):
    code = command.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def drained(out):
    return sorted(line.split()[2].removeprefix('NodeName=') for line in out.splitlines()
                  if line.startswith('scontrol update') and 'State=DRAIN' in line)


def test_a_slow_node_and_a_failed_one_of_64_are_named_and_the_sweep_fails(tmp_path, capsys):
    log = write_perflog(tmp_path / 'sweep.log', sweep(64, {'nid017': 0.20}, failed={'nid033'}))
    code, out, err = run(capsys, log, '--expect', 'nid[001-064]', '-o', str(tmp_path / 'out'))
    assert code == 1, err
    assert drained(out) == ['nid017', 'nid033']
    line = next(ln for ln in out.splitlines() if 'NodeName=nid017' in ln)
    assert "State=DRAIN 'Reason=mlcheck: MNISTDistributedCheck[image=host] " in line
    # the worst figure (the time: 1.25 times is 20 % on the judged scale, as the rate's loss)
    assert ('% below its peers' in line or '% above its peers' in line) and '(and 1 more: nodes.md)' in line
    assert ("NodeName=nid033 State=DRAIN 'Reason=mlcheck: MNISTDistributedCheck[image=host] "
            'failed: failed; a perf log keeps no reason: select the session [perf log sweep.log, '
            "ended 2026-09-21T14:13Z]'") in out
    assert '0 not vetted' in out and '\nnot vetted (' not in out
    summary = (tmp_path / 'out' / 'nodes.md').read_text()
    assert '**nid017**' in summary and '**nid033**' in summary
    nid017 = next(ln for ln in summary.splitlines() if ln.startswith('- **nid017**'))
    assert '% below its peers' in nid017 and '% above its peers' in nid017   # the rate and the time
    assert len(list((tmp_path / 'out').glob('nodes-*.png'))) == 2


def test_a_healthy_partition_names_none_and_passes(tmp_path, capsys):
    log = write_perflog(tmp_path / 'sweep.log', sweep(64))
    code, out, _ = run(capsys, log, '--expect', 'nid[001-064]')
    assert code == 0 and drained(out) == []
    assert '64 node(s): 64 healthy, 0 drained, 0 not judged, 0 not vetted; 0 slow link(s)' in out
    assert "scontrol update 'NodeName=nid[001-064]' State=RESUME" in out


def test_nodes_expected_that_never_ran_are_not_vetted(tmp_path, capsys):
    log = write_perflog(tmp_path / 'sweep.log', sweep(62))
    code, out, _ = run(capsys, log, '--expect', 'nid[001-064]')
    assert code == 1 and drained(out) == []
    assert 'not vetted (2)' in out
    assert '  nid063: no record' in out and '  nid064: no record' in out


def test_a_node_that_ran_one_check_of_two_is_not_judged_nor_healthy():
    found = sweep(8) + [s for s in sweep(8, name='CifarCheck %image=host %num_nodes=1')
                        if s.nodelist != 'nid005']
    result = nodes.judge(found)
    assert result.not_judged == {'nid005': [
        "ran only some of sim:cluster's tests: no record of CifarCheck %image=host %num_nodes=1"]}
    assert result.not_vetted == {} and 'nid005' not in result.healthy + list(result.drain)


def test_the_failed_run_names_its_first_problem_line_where_the_record_has_one():
    found = [s if s.nodelist != 'nid003' else
             Sample(**{**s.__dict__, 'value': None, 'problem': 'sanity: rank 1 on nid003: no dataset'})
             for s in sweep(16)]
    assert [f.said for f in nodes.judge(found).drain['nid003']] == [
        'MNISTDistributedCheck[image=host] failed: sanity: rank 1 on nid003: no dataset']


def test_the_node_is_read_from_distributes_parameter_and_multi_node_jobs_are_left_out():
    found = sweep(8, name=MNIST + ' %.part=sim:cluster', node=lambda i: f'n{i}')
    found = [Sample(**{**s.__dict__, 'name': f'{s.name} %.nid={s.nodelist}', 'nodelist': ''})
             for s in found]
    pair = Sample('sim:cluster', 'Pair %num_nodes=2', 'host', 2, 'samples_per_s', 1.0,
                  'samples/s', 0, nodelist='n1,n2')
    result = nodes.judge(found + [pair])
    assert result.nodes == [f'n{i}' for i in range(1, 9)] and result.unplaced == 1
    assert [v.figure.test for v in result.figures] == [MNIST] * 2   # ReFrame's parameters dropped


def test_a_time_is_judged_by_its_inverse():
    """A node taking 30 % longer is named, one 30 % quicker is not."""
    found = sweep(32, figures=(('epoch_time', 's', 10.0),), noise=0.01,
                  slower={'nid004': 1 - 1 / 1.3, 'nid009': 1 - 1 / 0.7})
    (verdict,) = nodes.judge(found).figures
    assert [node for node, _, _ in verdict.named] == ['nid004']
    assert verdict.reference < verdict.limit   # the band lies above the reference for a time


def test_only_multi_node_records_are_bad_input(tmp_path, capsys):
    found = [Sample('sim:cluster', 'Pair %num_nodes=2', 'host', 2, 'samples_per_s', 1.0,
                    'samples/s', 1.79e9, nodelist='n1,n2')]
    code, _, err = run(capsys, write_perflog(tmp_path / 'pairs.log', found))
    assert code == 2 and err.count('\n') == 1 and 'no record names its node' in err


@pytest.mark.parametrize('argv, says', [
    (['--expect', 'nid[3-1]'], "range '3-1' runs backwards"),
    (['--threshold', '10'], 'expected a fraction'),
    (['--spread-factor', '-1'], 'must be 0 or more')])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys, argv, says):
    log = write_perflog(tmp_path / 'sweep.log', sweep(4))
    code, _, err = run(capsys, log, *argv)
    assert code == 2 and says in err and err.count('\n') == 1


def test_a_missing_perf_log_is_bad_input(tmp_path, capsys):
    code, _, err = run(capsys, str(tmp_path / 'none.log'))
    assert code == 2 and 'perf log not found' in err


@pytest.mark.parametrize('text, names', [
    ('nid[001-003,007]', ['nid001', 'nid002', 'nid003', 'nid007']),
    ('nid[008-010],gpu[1-2]x', ['nid008', 'nid009', 'nid010', 'gpu1x', 'gpu2x']),
    ('r[1-2]n[01-02]', ['r1n01', 'r1n02', 'r2n01', 'r2n02']),
    ('nid[9-11]', ['nid9', 'nid10', 'nid11']),
    ('a, b,a', ['a', 'b']), ('nid017', ['nid017'])])
def test_host_lists_expand_as_slurm_does(text, names):
    assert hostlist.expand(text) == names


def test_a_64_node_host_list():
    assert hostlist.expand('nid[001-064]') == [f'nid{i:03d}' for i in range(1, 65)]


@pytest.mark.parametrize('text', ['nid[1-', 'nid1-2]', 'nid[a]', 'nid[]', '', 'x y', 'n[[1]]'])
def test_bad_host_lists_say_so(text):
    with pytest.raises(InputError, match='host list'):
        hostlist.expand(text)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(nodes.MIN_PEERS, 600), share=st.floats(0, 0.5), seed=st.integers(0, 2**32 - 1),
       slower=st.floats(0, 0.8), noise=st.floats(0, 0.03))
def test_k_of_n_nodes_slower_by_more_than_the_rule_are_named_exactly(n, share, seed, slower, noise):
    """n nodes of one distribution (uniform, within `noise` of the base), k of them slower than
    the threshold with the noise on both sides: exactly those k are named, in a rate and a time."""
    rng = random.Random(seed)
    threshold = nodes.Rule.threshold
    least = 1 - (1 - threshold) * (1 - noise) / (1 + noise)
    slow = {f'nid{i:03d}': least + 1e-6 + slower * (1 - least - 1e-6)
            for i in rng.sample(range(1, n + 1), int(share * n))}
    found = []
    for i in range(1, n + 1):
        host, factor = f'nid{i:03d}', 1 - slow.get(f'nid{i:03d}', 0)
        jitter = rng.uniform(1 - noise, 1 + noise)
        found += [Sample('p', MNIST, 'host', 1, 'samples_per_s', 900 * jitter * factor, 'samples/s',
                         0, nodelist=host),
                  Sample('p', MNIST, 'host', 1, 'epoch_time', 12 / (jitter * factor), 's',
                         0, nodelist=host)]
    result = nodes.judge(found)
    for verdict in result.figures:
        assert {node for node, _, _ in verdict.named} == set(slow)
    assert set(result.drain) == set(slow)


def false_alarm_rate(n, noise, sweeps, seed=5):
    """The share of healthy nodes named in `sweeps` partitions of `n` nodes, each figure normal
    with a relative standard deviation of `noise` (docs/node-sweep.md states these rates)."""
    rng = random.Random(seed)
    named = 0
    for _ in range(sweeps):
        found = [Sample('p', MNIST, 'host', 1, 'samples_per_s', rng.gauss(1000, 1000 * noise),
                        'samples/s', 0, nodelist=f'nid{i:03d}') for i in range(n)]
        named += len(nodes.judge(found).drain)
    return named / (n * sweeps)


def test_healthy_partitions_with_normal_noise_of_up_to_3_percent_name_none():
    assert false_alarm_rate(64, 0.02, 100) == 0
    assert false_alarm_rate(512, 0.03, 20) < 0.0005


def test_at_5_percent_noise_fewer_than_one_healthy_node_in_a_hundred_is_named():
    assert false_alarm_rate(64, 0.05, 100) < 0.01


def test_var_judges_only_the_named_variables_and_an_unknown_one_is_bad_input(tmp_path, capsys):
    log = write_perflog(tmp_path / 'sweep.log', sweep(64, {'nid017': 0.20}, failed={'nid033'}))
    code, out, _ = run(capsys, log, '--var', 'samples_per_s')
    assert code == 1 and drained(out) == ['nid017', 'nid033'] and 'epoch_time' not in out
    code, _, err = run(capsys, log, '--var', 'samples')
    assert code == 2 and 'no variable samples in' in err


def test_too_few_nodes_for_a_spread_is_said(tmp_path, capsys):
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', sweep(4)))
    assert code == 0 and "2 figure(s) on fewer than 8 nodes: judged by the threshold alone" in out


def pair_sweep_failure(speeds, fraction=0.5):
    """A failed record of the interconnect check over the nodes, its problem as the check writes
    it: slow_pairs' sentences on pair facts of {(node, node): GB/s}, '; '-joined."""
    from mlcheck.judging import collectives, output
    from saved_outputs import fact_line
    facts = [{'event': 'pair', 'nodes': list(pair), 'GBps': gbps} for pair, gbps in speeds.items()]
    said = collectives.slow_pairs(output.parse(''.join(fact_line(f, task=0) for f in facts)), fraction)
    return Sample('sim:cluster', 'InterconnectCheck %image=host %num_nodes=4', 'host', 4,
                  'slowest_pair_bw', None, 'GB/s', 1.79e9, nodelist='nid[001-004]',
                  result='fail', problem='sanity: ' + '; '.join(said))


def test_the_pair_sweep_drains_a_node_slow_with_every_partner_and_lists_a_slow_link():
    """Three rounds of 4 nodes: nid002's pairs all slow (its NIC), nid001 <-> nid003 slow only
    together (their link); nid004 fine with everyone."""
    failure = pair_sweep_failure({('nid001', 'nid004'): 1.0, ('nid002', 'nid003'): 0.2,
                                  ('nid001', 'nid003'): 0.25, ('nid002', 'nid004'): 0.2,
                                  ('nid001', 'nid002'): 0.2, ('nid003', 'nid004'): 1.1})
    assert 'node nid002 is slow' in failure.problem and 'node pair nid001 <-> nid003' in failure.problem
    result = nodes.judge(sweep(4) + [failure])
    assert list(result.drain) == ['nid002'] and list(result.slow_links) == [('nid001', 'nid003')]
    assert result.drain['nid002'][0].said.startswith(
        'InterconnectCheck[image=host,num_nodes=4]: node nid002 is slow: every pair with it')
    said = '\n'.join(command.report_lines(result, nodes.Rule()))
    assert drained(said) == ['nid002'] and '0 to drain' not in said, said
    assert '  link nid001 <-> nid003: InterconnectCheck[image=host,num_nodes=4]: node pair ' \
           'nid001 <-> nid003: 0.25 GB/s' in said


def test_a_healthy_pair_sweep_names_no_node_and_no_link():
    speeds = {pair: 1.0 + 0.05 * i for i, pair in enumerate(
        [('nid001', 'nid004'), ('nid002', 'nid003'), ('nid001', 'nid003'), ('nid002', 'nid004'),
         ('nid001', 'nid002'), ('nid003', 'nid004')])}
    failure = pair_sweep_failure(speeds)
    assert failure.problem == 'sanity: '
    result = nodes.judge(sweep(4) + [failure])
    assert result.drain == {} and result.slow_links == {}
