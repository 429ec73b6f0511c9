"""mlcheck-nodes: every node of a sweep against its peers, failed runs, nodes not vetted; the
Slurm host lists of --expect. Perf logs in ReFrame's format, written from samples of known truth."""

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlcheck.commands import nodes as command
from mlcheck.errors import InputError
from mlcheck.history import hostlist, multi_node, node_records, nodes
from mlcheck.history.samples import Sample
from mlcheck.judging import collectives, sanity
from mlcheck.judging.rank_lists import rank_list, ranks_of
from mlcheck.judging.sentences import NODE, Sentence
from conftest import fake_scontrol
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


def table_rows(out, var):
    """The rows of the figures' table that judge `var`."""
    return [ln for ln in out.splitlines() if ln.startswith('sim:') and f' {var} ' in ln]


def drained(out):
    """The nodes of the drain list: its scontrol lines, or, where no node list checks the names
    (no Slurm, no --expect), its lines of text."""
    found, section = [], False
    for line in out.splitlines():
        section = line.startswith('drain (') or (section and line != '')
        if line.startswith('scontrol update') and 'State=DRAIN' in line:
            found.append(line.split()[2].removeprefix('NodeName='))
        elif section and line.startswith('  '):
            found.append(line.split(':')[0].strip())
    return sorted(found)


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
                  'samples/s', 1.79e9, nodelist='n1,n2')
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
    (['--spread-factor', '-1'], 'must be 0 or more'),
    (['--sweep-gap', 'an hour'], "--sweep-gap 'an hour': expected a number"),
    (['--resume-reason', 'upgrade ('], "--resume-reason 'upgrade (': not a regular expression"),
    (['--slurm-states', '/nonexistent/states.txt'], '--slurm-states /nonexistent/states.txt: No such'),
    (['--expect', 'ALL'], "--expect: 'ALL' is Slurm's name for every node")])
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


def binomial_tail(k, n, p):
    """P(X >= k) for X ~ Binomial(n, p)."""
    from math import comb
    return 1 - sum(comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k))


@settings(max_examples=8, deadline=None)
@given(n=st.sampled_from([16, 64, 512, 4096]), noise=st.floats(0.01, 0.05),
       slow_count=st.integers(0, 3), seed=st.integers(0, 2**32 - 1))
def test_the_same_evidence_gives_the_same_drain_list(n, noise, slow_count, seed):
    """Item 6: two independent draws of one partition (tests/node_sessions.py, generated from
    the steps' times) name the same healthy nodes but for at most 1 % of them, and a node 25 %
    slow in both at least 99 % of the time: over about 2,000 healthy node draws per example,
    each rate is refused where a true 1 % (99 %) would give what was seen less than once in
    a thousand (docs/node-sweep.md has the rates over more draws). At 16 nodes above 4 % noise
    one run per node cannot reach 99 % drained in both (docs/node-sweep.md says why; 97.3 %
    measured over 2,400 slow nodes): there it is held to 96 % and the slow node to never healthy
    in 99 % (a true 97.3 % misses 4 % by chance far less than once in a thousand examples)."""
    from node_sessions import draw_pairs
    pairs = max(1, 2048 // n)
    found = draw_pairs(n, noise, slow_count, pairs, seed)
    assert binomial_tail(found.differ, found.healthy, 0.01) > 1e-3, found
    corner = n == 16 and noise > 0.04
    assert binomial_tail(found.slow - found.both, found.slow, 0.04 if corner else 0.01) > 1e-3, found
    assert binomial_tail(found.slow - found.kept, found.slow, 0.01) > 1e-3, found
    assert found.kept >= found.both, found      # not drained: not judged, or else healthy


def test_a_node_past_the_threshold_but_within_the_peers_noise_is_not_judged():
    """Item 6: 16 nodes with a spread of 6 %, one 15 % below the reference (past the 15 %
    threshold, 2.3 sd of the peers, whose band widens to 3 of their deviations and so holds it):
    neither drained nor healthy, but not judged, with why."""
    values = [0.90, 0.92, 0.94, 0.96, 0.98, 0.99, 1.0, 1.0, 1.01, 1.02, 1.04, 1.06, 1.08, 1.10,
              1.12, 0.88]
    found = [Sample('p', MNIST, 'host', 1, 'samples_per_s', 1000 * v, 'samples/s', 0,
                    nodelist=f'nid{i:03d}') for i, v in enumerate(values, 1)]
    result = nodes.judge(found)
    assert result.drain == {} and list(result.not_judged) == ['nid016'], result.not_judged
    assert "15% below its peers (1040; 2.3 sd), within 3 sd of its peers' noise" in \
        result.not_judged['nid016'][0]
    assert 'nid016' not in result.healthy and len(result.healthy) == 15


def test_a_slow_node_the_threshold_misses_in_a_draw_is_not_judged_rather_than_healthy(monkeypatch):
    """Item 6: of 1,200 nodes 25 % slow among 16 at 5 % noise, those not drained in a draw (past
    the threshold, within 3 sd of the peers' noise) are not judged there, not healthy; without
    that verdict each would go back to users."""
    from node_sessions import draw_pairs
    found = draw_pairs(16, 0.05, 3, 400, seed=11)
    assert found.kept > found.both, found
    judge_figure = nodes.judge_figure

    def without_it(*args):
        verdict = judge_figure(*args)
        verdict.within_noise = []
        return verdict
    monkeypatch.setattr(nodes, 'judge_figure', without_it)
    assert draw_pairs(16, 0.05, 3, 400, seed=11).kept == found.both


def test_the_stability_check_tells_the_rule_from_a_noisier_one():
    """The check above is no formality: the upper quarter's spread (the rule before issue 36)
    names a 25 % slow node of 16 at 5 % noise in both draws 80 % of the time, and is refused."""
    from mlcheck.judging import peers
    from node_sessions import draw_pairs
    upper_quarter = lambda values, threshold, factor=0.0: peers.spread(values)
    original = nodes.healthy_spread
    nodes.healthy_spread = upper_quarter
    try:
        found = draw_pairs(16, 0.05, 3, 64, seed=11)
    finally:
        nodes.healthy_spread = original
    assert binomial_tail(found.slow - found.both, found.slow, 0.01) < 1e-3, found
    found = draw_pairs(16, 0.05, 3, 64, seed=11)
    assert binomial_tail(found.slow - found.both, found.slow, 0.01) > 1e-3, found


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


def test_at_10_percent_noise_the_peers_spread_is_not_cut_by_the_threshold():
    """The eighth red-team's m18: at 10 % noise the band of the threshold alone cut the
    spread's tails, and 6 % of healthy nodes were drained at '3 sd' (bench/node_sweep.py); the
    band now widens to 3 deviations: 1.6 % measured over 400 sweeps, a fixed draw of 100 here."""
    assert false_alarm_rate(64, 0.10, 100) < 0.025


def test_var_judges_only_the_named_variables_and_an_unknown_one_is_bad_input(tmp_path, capsys):
    log = write_perflog(tmp_path / 'sweep.log', sweep(64, {'nid017': 0.20}, failed={'nid033'}))
    code, out, _ = run(capsys, log, '--var', 'samples_per_s')
    assert code == 1 and drained(out) == ['nid017', 'nid033'] and not table_rows(out, 'epoch_time')
    assert table_rows(out, 'samples_per_s'), out
    # a figure left out is said (the sixth red-team's c07b: a node slow in it was healthy unsaid)
    assert ('--var samples_per_s: the figures of MNISTDistributedCheck[image=host] on sim:cluster '
            'not judged (epoch_time): a node slow in them is not seen here') in out, out
    code, _, err = run(capsys, log, '--var', 'samples')
    assert code == 2 and 'no variable samples in' in err


def test_too_few_nodes_for_a_spread_is_said(tmp_path, capsys):
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', sweep(4)))
    assert code == 0 and "2 figure(s) on fewer than 8 nodes: judged by the threshold alone" in out


def stored(problems):
    """A check's sanity problems as the results database gives them back: the SanityError the
    check raises ('; '-joined), as ReFrame words its fail_reason, read by the database's reader."""
    from reframe.core.exceptions import SanityError, what
    from mlcheck.history.database import failure_line
    error = SanityError('; '.join(problems))
    return failure_line('sanity', what(SanityError, error, None))


def pair_problems(speeds, fraction=0.5):
    """slow_pairs' sentences, as the check writes them, on pair facts of {(node, node): GB/s}."""
    from mlcheck.judging import output
    from saved_outputs import fact_line
    facts = [{'event': 'pair', 'nodes': list(pair), 'GBps': gbps} for pair, gbps in speeds.items()]
    return collectives.slow_pairs(output.parse(''.join(fact_line(f, task=0) for f in facts)), fraction)


def pair_sweep_failure(speeds, fraction=0.5, problems=()):
    """A failed record of the interconnect check over 4 nodes (2 ranks each), its reason as the
    database keeps it: slow_pairs' sentences, then `problems`."""
    return Sample('sim:cluster', 'InterconnectCheck %image=host %num_nodes=4', 'host', 4,
                  'slowest_pair_bw', None, 'GB/s', 1.79e9, nodelist='nid[001-004]', num_tasks=8,
                  result='fail', problem=stored(pair_problems(speeds, fraction) + list(problems)))


# nid002's pairs all slow (its NIC), nid001 <-> nid003 slow only together (their link)
SLOW_NODE_AND_LINK = {('nid001', 'nid004'): 1.0, ('nid002', 'nid003'): 0.2, ('nid001', 'nid003'): 0.25,
                      ('nid002', 'nid004'): 0.2, ('nid001', 'nid002'): 0.2, ('nid003', 'nid004'): 1.1}


def test_the_pair_sweep_drains_a_node_slow_with_every_partner_and_lists_a_slow_link():
    """Three rounds of 4 nodes: nid002 slow with every partner, the link nid001 <-> nid003 slow;
    nid004 fine with everyone."""
    failure = pair_sweep_failure(SLOW_NODE_AND_LINK)
    assert 'node nid002 is slow' in failure.problem and 'node pair nid001 <-> nid003' in failure.problem
    result = nodes.judge(sweep(4) + [failure])
    assert list(result.drain) == ['nid002'] and list(result.slow_links) == [('nid001', 'nid003')]
    assert result.drain['nid002'][0].said.startswith(
        'InterconnectCheck[image=host,num_nodes=4]: node nid002 is slow: every pair with it')
    said = '\n'.join(command.report_lines(result, nodes.Rule(), unchecked(result)))
    assert drained(said) == ['nid002'] and '0 to drain' not in said, said
    assert '  link nid001 <-> nid003: InterconnectCheck[image=host,num_nodes=4]: node pair ' \
           'nid001 <-> nid003: 0.25 GB/s' in said


LINK_SAID = collectives.SLOW_LINK.write(node='nid001', other='nid003', gbps=0.0209, fraction=0.25,
                                       reference=1.11)
NODE_SAID = collectives.SLOW_NODE.write(node='nid002', fraction=0.5, reference=1.1,
                                        pairs='nid001 <-> nid002 0.2 GB/s')


@pytest.mark.parametrize('said, unexplained', [
    ('sanity: sanity error: ' + LINK_SAID, False), ('sanity: ' + NODE_SAID, False),
    (f'sanity: {NODE_SAID}; {LINK_SAID}', False),
    ('sanity: sanity error: rank 3 on nid002: no result line', True),
    (f'sanity: {LINK_SAID}; ' + sanity.NEVER_REPORTED.write(ranks='ranks 8-15'), True),
    ('sanity: ', True), ('', True)])
def test_a_failed_pair_sweep_leaves_its_nodes_unjudged_unless_its_slow_pairs_explain_it(
        said, unexplained):
    assert multi_node.unexplained(said) is unexplained


def missing_ranks_problems(ranks, world_size=8, per_node=2):
    """What sanity says of a run of `world_size` ranks whose `ranks` never started."""
    from mlcheck.judging import output
    from saved_outputs import fact_line
    started = [r for r in range(world_size) if r not in ranks]
    run = output.parse(''.join(
        fact_line({'event': 'rank', 'rank': r, 'world_size': world_size,
                   'node': f'nid{r // per_node + 1:03d}'}, task=r)
        + fact_line({'event': 'done', 'rank': r}, task=r) for r in started))
    return sanity.ranks_started_and_finished(
        run, sanity.Expectations(num_nodes=world_size // per_node, tasks_per_node=per_node, masks=()))


def round_trip():
    """The pair sweep's verdicts and the ranks that never reported in, from their writers
    through the stored reason to the sweep: (drained nodes, their first reasons, slow links)."""
    problems = missing_ranks_problems({6, 7})
    result = nodes.judge(sweep(4) + [pair_sweep_failure(SLOW_NODE_AND_LINK, problems=problems)])
    return sorted(result.drain), [f[0].said for f in result.drain.values()], list(result.slow_links)


def test_the_verdicts_stored_as_text_are_read_back_by_their_writers_own_sentences():
    """Issue 40 item 4: ReFrame keeps only a failure's text, so the verdicts travel in it, each
    written and read through one Sentence (collectives.SLOW_NODE, SLOW_LINK; sanity's
    NEVER_REPORTED): from the writers, through ReFrame's fail_reason and the database's reading
    (rank 6-7 on nid004 by Slurm's block layout)."""
    drained, reasons, links = round_trip()
    assert drained == ['nid002', 'nid004'] and links == [('nid001', 'nid003')]
    assert reasons[0].startswith('InterconnectCheck[image=host,num_nodes=4]: node nid002 is slow')
    assert reasons[1] == 'InterconnectCheck[image=host,num_nodes=4]: its ranks never reported in'


@pytest.mark.parametrize('sentence, word', [(collectives.SLOW_NODE, 'slow'),
                                            (collectives.SLOW_LINK, 'below'),
                                            (sanity.NEVER_REPORTED, 'never')])
def test_the_round_trip_fails_when_a_writer_words_its_verdict_apart_from_its_reader(
        sentence, word, monkeypatch):
    """Were a writer to word its sentence otherwise than the pattern reads (as an f-string
    beside a pattern could), the round trip above would not hold."""
    written = sentence.write
    monkeypatch.setattr(sentence, 'write',
                        lambda **values: written(**values).replace(word, 'quite ' + word, 1))
    drained, _, links = round_trip()
    assert (drained, links) != (['nid002', 'nid004'], [('nid001', 'nid003')])


def test_a_sentence_names_only_its_own_fields_and_ranks_read_back_as_written():
    with pytest.raises(ValueError, match="has no field nod"):
        Sentence('node {node} is slow', nod=NODE)
    assert ranks_of(rank_list([0, 1, 2, 3, 6])) == [0, 1, 2, 3, 6] and ranks_of('rank 3') == [3]
    assert ranks_of('ranks 0-x') == []


def test_a_healthy_pair_sweep_names_no_node_and_no_link():
    speeds = {pair: 1.0 + 0.05 * i for i, pair in enumerate(
        [('nid001', 'nid004'), ('nid002', 'nid003'), ('nid001', 'nid003'), ('nid002', 'nid004'),
         ('nid001', 'nid002'), ('nid003', 'nid004')])}
    failure = pair_sweep_failure(speeds)
    assert failure.problem == 'sanity: sanity error'     # no sentence of slow_pairs
    result = nodes.judge(sweep(4) + [failure])
    assert result.drain == {} and result.slow_links == {}


# --- the verdicts an admin acts on (issue 36) and the lines they paste (issue 37) ---

SESSION = '0b7e2a31-54c6-4f4e-9a55-8d1f3c2e9a10'
PAIRS = 'InterconnectCheck %image=host %num_nodes=8'


def replaced(found, **changes):
    return [Sample(**{**s.__dict__, **changes}) for s in found]


def multi_node_run(problem='', value=None, nodelist='nid[001-008]', num_tasks=64, source=SESSION,
                   var='slowest_pair_bw'):
    """A record of the interconnect check over 8 nodes, failed (value None) unless given one."""
    return Sample('sim:cluster', PAIRS, 'host', 8, var, value, 'GB/s', 1.79e9 + 100,
                  jobid='900', nodelist=nodelist, result='fail' if value is None else 'pass',
                  source=source, problem=problem, num_tasks=num_tasks)


def unchecked(result):
    """The RESUME plan where Slurm cannot be read."""
    from mlcheck.history import slurm_states
    return slurm_states.resume_plan(result.healthy, None, 'no scontrol here')


def said(result):
    return '\n'.join(command.report_lines(result, nodes.Rule(), unchecked(result)))


def test_a_failed_multi_node_run_names_its_nodes_and_maps_the_ranks_that_never_reported_in():
    """Case 1: nid008's NIC is down, its 8 ranks of 64 never reported in; the database keeps the
    reason. nid008 is drained for it, the run's other nodes are not judged (their fabric check
    failed), never healthy."""
    found = replaced(sweep(8), source=SESSION) + [
        multi_node_run('sanity: ranks 56-63 never reported in (no rank line)')]
    result = nodes.judge(found)
    assert list(result.drain) == ['nid008']
    assert result.drain['nid008'][0].said == 'InterconnectCheck[image=host,num_nodes=8]: its ranks never reported in'
    assert result.healthy == [] and sorted(result.not_judged) == [f'nid{i:03d}' for i in range(1, 8)]
    assert 'its multi-node run failed: InterconnectCheck[image=host,num_nodes=8] on nid[001-008]' \
        in result.not_judged['nid001'][0]
    out = said(result)
    assert ('failed: InterconnectCheck[image=host,num_nodes=8] on nid[001-008] (ended '
            '2026-09-21T14:15Z): sanity: ranks 56-63 never reported in (no rank line) (on nid008)') in out
    assert not command.all_healthy(result)


def test_a_failed_multi_node_run_in_a_perf_log_says_it_keeps_no_reason_and_exits_1(tmp_path, capsys):
    """Case 1 from a perf log: ReFrame writes the failed case with null values and no reason."""
    log = write_perflog(tmp_path / 'sweep.log', sweep(8) + [multi_node_run(source='')])
    code, out, _ = run(capsys, log, '--expect', 'nid[001-008]')
    assert code == 1 and drained(out) == []
    assert ('InterconnectCheck[image=host,num_nodes=8] on nid[001-008] (ended 2026-09-21T14:15Z): '
            'failed; a perf log keeps no reason: select the session') in out
    assert '0 healthy, 0 drained, 8 not judged' in out and 'State=RESUME' not in out


def test_a_passed_pair_sweep_is_said_to_have_been_read():
    result = nodes.judge(sweep(8) + [multi_node_run(value=0.9)])
    assert result.healthy == [f'nid{i:03d}' for i in range(1, 9)] and command.all_healthy(result)
    assert ('pair sweep InterconnectCheck[image=host,num_nodes=8] on nid[001-008] (ended '
            '2026-09-21T14:15Z): read, every node pair healthy') in said(result)


def test_each_partition_is_judged_against_its_own_peers_and_its_own_tests(tmp_path, capsys):
    """Case 2: partition gpu runs MNIST at 970/s, partition cpu runs CIFAR at half that: every
    node is healthy, none is missing the other partition's test."""
    cpu = sweep(8, name='CifarCheck %image=host %num_nodes=1', node=lambda i: f'cpu{i:02d}',
                figures=(('samples_per_s', 'samples/s', 485.0), ('epoch_time', 's', 24.0)))
    found = replaced(sweep(8), partition='sim:gpu') + replaced(cpu, partition='sim:cpu')
    code, out, _ = run(capsys, write_perflog(tmp_path / 'two.log', found),
                       '--expect', 'nid[001-008],cpu[01-08]')
    assert code == 0, out
    assert 'healthy (16): cpu[01-08],nid[001-008]' in out and 'not vetted (' not in out


def test_a_re_run_in_a_later_sweep_is_history_and_judges_only_what_it_ran(tmp_path, capsys):
    """nid033 failed, was repaired (or not), and passed its re-run two hours later: within a day,
    the same sweep, and the records cannot tell a flaky node from a repaired one: not judged, the
    others healthy. Two days later its re-run is a sweep of its own, the latest, which says so;
    one node has no peers to judge it by, and the nodes it left out are not vetted (their runs
    are an earlier sweep's), so nothing is resumed (issue 47)."""
    first = sweep(64, failed={'nid033'})
    rerun = replaced([s for s in sweep(64, seed=2) if s.nodelist == 'nid033'], time=1.79e9 + 7200)
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', first + rerun),
                       '--expect', 'nid[001-064]')
    assert code == 1 and drained(out) == [] and '63 healthy, 0 drained, 1 not judged, 0 not vetted' in out, out
    assert ('  nid033: not judged: MNISTDistributedCheck[image=host] failed at 2026-09-21T14:13Z and '
            'passed 1 run(s) from 2026-09-21T16:13Z, 2.0h later: a flaky node (one sweep the '
            'scheduler paused) or one repaired in the pause, the records cannot tell') in out, out
    rerun = replaced(rerun, time=1.79e9 + 2 * 86400)
    code, out, _ = run(capsys, write_perflog(tmp_path / 'later.log', first + rerun),
                       '--expect', 'nid[001-064]')
    assert code == 1 and drained(out) == [] and 'State=RESUME' not in out, out
    assert '  nid033: MNISTDistributedCheck[image=host] passed on re-run at 2026-09-23T14:13Z ' \
           '(the latest sweep) after failing at 2026-09-21T14:13Z (an earlier sweep)' in out, out
    assert '0 healthy, 0 drained, 1 not judged, 63 not vetted' in out, out


def test_a_node_that_passed_and_then_failed_is_drained_by_its_latest_run():
    later = replaced([s for s in sweep(16, failed={'nid003'}) if s.nodelist == 'nid003'],
                     time=1.79e9 + 3600)
    result = nodes.judge(sweep(16) + later)
    assert list(result.drain) == ['nid003'] and result.reruns == {}


def test_only_the_latest_session_of_a_test_on_a_node_counts_where_records_name_sessions():
    """nid005 was 30 % slow two days ago (session OLD, another maintenance: sweeps less than a
    day apart are one) and is like its peers in this session."""
    old = replaced(sweep(16, {'nid005': 0.3}), source=SESSION.replace('0b7e', '1b7e'))
    new = replaced(sweep(16, seed=2), source=SESSION, time=1.79e9 + 2 * 86400)
    assert nodes.judge(old + new).drain == {}
    assert list(nodes.judge(new + old[:2 * 4] + replaced(old, time=1.79e9 + 4 * 86400)).drain) \
        == ['nid005']


def test_two_nodes_are_not_judged_and_get_no_drain_line(tmp_path, capsys):
    """Item 5, the README's 2-node sweep: the loopback latency 51 % apart is no verdict."""
    found = sweep(2, figures=(('latency', 'us', 20.0),), slower={'nid002': 1 - 1 / 1.51}, noise=0)
    code, out, _ = run(capsys, write_perflog(tmp_path / 'two.log', found))
    assert code == 1 and drained(out) == [] and 'State=RESUME' not in out
    assert '0 healthy, 0 drained, 2 not judged' in out
    assert ('  nid002: not judged: MNISTDistributedCheck[image=host] latency: too few peers: 2 '
            'node(s) of sim:cluster ran it, fewer than 4') in out


def test_four_nodes_that_ran_a_test_are_enough_peers_even_when_one_failed_it():
    """The 4-node simulated sweep: nid003 failed (no value), nid002 under half a CPU; the three
    values and the failure are 4 nodes that ran it, so nid002 is judged, and drained."""
    result = nodes.judge(sweep(4, {'nid002': 0.75}, failed={'nid003'}))
    assert list(result.drain) == ['nid002', 'nid003'] and result.healthy == ['nid001', 'nid004']


def test_a_figure_too_noisy_to_tell_nodes_apart_drains_no_node_and_the_verdict_comes_first(
        tmp_path, capsys):
    """Item 5: 6 nodes' 1-node loopback latency, 13-40 us: nid002, nid004 and nid005 are past
    the threshold alone (15 % above the peers' 18 us), but the other three spread too widely
    (sd 26 %) for that to be a judgement the peers back; the steady figure still judges every
    node."""
    latency = dict(zip([f'nid{i:03d}' for i in range(1, 7)], [20.0, 28.0, 13.0, 24.0, 40.0, 18.0]))
    found = sweep(6, figures=(('samples_per_s', 'samples/s', 970.0),)) + [
        replaced([s], value=latency[s.nodelist])[0]
        for s in sweep(6, figures=(('latency', 'us', 1.0),), noise=0)]
    code, out, _ = run(capsys, write_perflog(tmp_path / 'noisy.log', found),
                       '--expect', 'nid[001-006]')
    assert code == 1 and drained(out) == [], out
    assert '3 healthy, 0 drained, 3 not judged' in out, out
    line = next(ln for ln in out.splitlines() if ln.startswith('  nid005: not judged: '))
    assert 'latency 40 us, 122% above its peers (18)' in line, line
    assert "but its healthy nodes spread 26% (sd), wider than the rule's 15% margin" in line, line
    lines = out.splitlines()
    table = next(i for i, ln in enumerate(lines) if ln.startswith('partition '))
    assert lines[0].startswith('6 node(s): ') and lines.index('healthy (3): nid[001,003,006]') < table


def test_scaling_efficiency_is_left_out_at_one_node():
    found = sweep(8) + sweep(8, figures=(('scaling_efficiency', '%', 100.0),), noise=0.2)
    result = nodes.judge(found)
    assert {v.figure.var for v in result.figures} == {'samples_per_s', 'epoch_time'}
    assert result.left_out == ['MNISTDistributedCheck[image=host] scaling_efficiency: the same on '
                               'every node at one node']


def test_the_healthy_nodes_are_named_with_the_line_to_resume_them_also_in_nodes_md(tmp_path, capsys):
    log = write_perflog(tmp_path / 'sweep.log', sweep(64, {'nid017': 0.3}))
    code, out, _ = run(capsys, log, '--expect', 'nid[001-064]', '-o', str(tmp_path / 'out'))
    resume = "scontrol update 'NodeName=nid[001-016,018-064]' State=RESUME"
    assert code == 1 and 'healthy (63): nid[001-016,018-064]' in out and resume in out
    summary = (tmp_path / 'out' / 'nodes.md').read_text()
    assert 'healthy (63): nid[001-016,018-064]' in summary and resume in summary


@settings(max_examples=200, deadline=None)
@given(st.sets(st.tuples(st.sampled_from(['nid', 'gpu', 'x1n']), st.integers(0, 130),
                         st.sampled_from([0, 2, 3]), st.sampled_from(['', 'x'])), min_size=1))
def test_a_compressed_host_list_expands_to_its_names(parts):
    names = {f'{head}{n:0{width}d}{tail}' for head, n, width, tail in parts}
    assert sorted(hostlist.expand(hostlist.compress(names))) == sorted(names)


def test_every_drain_line_says_where_and_when_its_evidence_was_seen():
    """Item 8: session, check, figure, the node's value, the peers' reference, the run's end."""
    result = nodes.judge(replaced(sweep(64, {'nid017': 0.3}), source=SESSION))
    [line] = command.drain_lines(result)
    assert line.startswith("scontrol update NodeName=nid017 State=DRAIN 'Reason=mlcheck: "
                           'MNISTDistributedCheck[image=host] epoch_time ')
    assert '% above its peers (' in line and line.endswith(
        f"[session {SESSION}, ended 2026-09-21T14:13Z]'")


def test_max_age_leaves_old_runs_out_and_says_how_many(tmp_path, capsys):
    import time
    now = time.time()
    found = replaced(sweep(8), time=now - 3600) + [
        replaced([s], time=now - 10 * 86400)[0] for s in sweep(12) if s.nodelist > 'nid008']
    log = write_perflog(tmp_path / 'sweep.log', found)
    code, out, _ = run(capsys, log, '--max-age', '7d')
    assert code == 0 and 'healthy (8): nid[001-008]' in out
    assert '--max-age 7d: 8 record(s) of runs that ended before ' in out
    code, _, err = run(capsys, log, '--max-age', 'week')
    assert code == 2 and "--max-age 'week': expected a number" in err


def test_a_node_whose_stack_differs_from_its_peers_is_listed_and_its_drain_line_says_so():
    """Item 4: nid005 loaded another libfabric; nid017, also slow, another NCCL."""
    stack = lambda lib, nccl: f'torch=2.5.1;nccl={nccl};libfabric={lib};kernel=6.1'
    found = [replaced([s], stack=stack('1.20.1' if s.nodelist == 'nid005' else '1.22.0',
                                       '2.20.5' if s.nodelist == 'nid017' else '2.21.5'))[0]
             for s in sweep(64, {'nid017': 0.3})]
    result = nodes.judge(found)
    assert result.stack == {'nid005': ['libfabric 1.20.1, 63 peers 1.22.0'],
                            'nid017': ['NCCL 2.20.5, 63 peers 2.21.5']}
    assert 'nid005' in result.healthy
    [line] = command.drain_lines(result)
    assert '; stack: NCCL 2.20.5, 63 peers 2.21.5' in line


def test_a_network_plugin_that_vanished_on_one_node_is_listed_as_not_loaded():
    """The tenth red-team of issue 47, p18: NCCL on nid011 no longer loads aws-ofi-nccl after the
    upgrade, so its records lack the fact its 15 peers record; nothing was said, exit 0."""
    stack = lambda plugin: 'torch=2.5.1;nccl=2.21.5' + (f';net_plugin={plugin}' if plugin else '')
    found = [replaced([s], stack=stack('' if s.nodelist == 'nid011' else 'aws-ofi-nccl 1.9.2'))[0]
             for s in sweep(16)]
    result = nodes.judge(found)
    assert result.stack == {'nid011': ['network plugin none (not loaded), 15 peers aws-ofi-nccl 1.9.2']}
    # ... and one node's fact that most peers lack is as unlike them
    found = [replaced([s], stack=stack('aws-ofi-nccl 1.9.2' if s.nodelist == 'nid011' else ''))[0]
             for s in sweep(16)]
    assert nodes.judge(found).stack == {'nid011': ['network plugin aws-ofi-nccl 1.9.2, 15 peers none']}


# names and reasons that others wrote, pasted by the Slurm operator (issue 37, item 1)
HOSTILE_NODES = ['nid001;id>{tmp}/x;#', '$(id>{tmp}/y)', 'nid001 nid002', '-nid001', 'nid[1]`id`']


@pytest.mark.parametrize('node', HOSTILE_NODES)
def test_a_node_that_is_not_a_host_name_is_refused_in_one_line_naming_where(tmp_path, capsys, node):
    node = node.format(tmp=tmp_path)
    by_nid = replaced(sweep(8), name=f'{MNIST} %.nid={node}') if ' ' not in node else []
    by_list = [s if s.nodelist != 'nid003' else replaced([s], nodelist=node)[0] for s in sweep(8)]
    for found in filter(None, [by_nid, by_list]):
        # the record is named and left out (issue 48 re-check: one bad record stopped the sweep of
        # every node), no node is resumed and the exit status is not 0
        code, out, err = run(capsys, write_perflog(tmp_path / 'hostile.log', found))
        named = [line for line in err.splitlines() if line.endswith('record left out')]
        assert code != 0 and named and all('hostile.log' in line for line in named), err
        assert 'is not a host name' in err or 'bad host name' in err or 'bad range' in err, err
        assert node not in out and 'State=RESUME' not in out
    if ' ' not in node:    # a failure's sentence names a node up to a space: left out, named
        result = nodes.judge(sweep(8) + [multi_node_run('sanity: ' + collectives.SLOW_NODE.write(
            node=node, fraction=0.5, reference=1.0, pairs=f'{node} <-> nid002 0.1 GB/s'))])
        assert result.unknown_nodes == 1 and 'not a host name' in ' '.join(result.unreadable)
    code, _, err = run(capsys, write_perflog(tmp_path / 'fine.log', sweep(8)), f'--expect={node}')
    assert code == 2 and err.count('\n') == 1 and 'host list' in err, err
    assert not list(tmp_path.glob('[xy]'))


def test_the_printed_lines_run_nothing_but_scontrol_with_the_reasons_as_written(tmp_path):
    """Hostile text in an image name and a failure reason: the printed lines pass `bash -n`, and
    run by bash with a stand-in scontrol that records its words, they run only it, each reason
    one word as written."""
    import json
    import subprocess
    evil = '$(id>y)`id>z`\'"; id>w; #'     # files in the working directory, tmp_path
    found = replaced(sweep(16, {'nid004': 0.3}, failed={'nid009'}),
                     name=f'MNISTDistributedCheck %image={evil} %num_nodes=1', source=SESSION)
    found = [replaced([s], problem=f'sanity: {evil}')[0] if s.value is None else s for s in found]
    result = nodes.judge(found)
    lines = command.drain_lines(result) + [command.resume_line(unchecked(result))]
    script = '\n'.join(lines) + '\n'
    assert subprocess.run(['bash', '-n'], input=script, text=True).returncode == 0
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'scontrol').write_text(
        '#!/usr/bin/env python3\nimport json, sys\n'
        f'open({str(tmp_path / "argv")!r}, "a").write(json.dumps(sys.argv[1:]) + "\\n")\n')
    (bin_dir / 'scontrol').chmod(0o755)
    subprocess.run(['bash', '-c', script], check=True, cwd=tmp_path,
                   env={'PATH': f'{bin_dir}:/usr/bin:/bin'})
    calls = [json.loads(line) for line in (tmp_path / 'argv').read_text().splitlines()]
    assert [call[:3] for call in calls] == [
        ['update', 'NodeName=nid004', 'State=DRAIN'], ['update', 'NodeName=nid009', 'State=DRAIN'],
        ['update', 'NodeName=nid[001-003,005-008,010-016]', 'State=RESUME']]
    assert evil in calls[1][3] and calls[1][3].startswith('Reason=mlcheck: ')
    assert sorted(p.name for p in tmp_path.iterdir()) == ['argv', 'bin']


# --- the sweep as one unit: every printed line safe to paste (issue 47) ---
# Perf logs as ReFrame appends them: `reframe ... --distribute=all --repeat N` writes one line per
# variable per job, the node in job_nodelist (the perf log's name keeps no %.nid nor %.repeat_no),
# one job per node and repetition, each completing a few minutes after the one before.

NOV = {day: 1795507200 + (day - 24) * 86400 for day in (18, 20, 22, 24)}   # 08:00Z, Nov 2026
CIFAR = 'CIFAR100ResNetCheck %image=host %num_nodes=1'
LINKS = 'InterconnectCheck %image=host %num_nodes=1'


def appended(*sweeps):
    return [s for one in sweeps for s in one]


def run_of_sweep(nodes_, when, repeats=1, failed=(), slower=None, name=MNIST, figures=FIGURES,
                 seed=1, every_s=120, first_job=1000, slow_runs=None, partition='sim:cluster',
                 noise=0.02, settings='epochs=3'):
    """One sweep of `name` over `nodes_` as `--distribute=all --repeat repeats` runs it: a job per
    node and repetition (the repetitions of a node one after the other), `failed` holding the
    (node, repetition) pairs that failed before their figures (null values), `slower` {node:
    fraction} slower in every repetition (negative: faster), `slow_runs` {(node, repetition):
    fraction} in one; `noise` the run-to-run relative standard deviation."""
    rng = random.Random(seed)
    found, job = [], first_job
    for host in nodes_:
        for rep in range(repeats):
            job += 1
            factor = (1 - (slower or {}).get(host, 0)) * (1 - (slow_runs or {}).get((host, rep), 0))
            fails = (host, rep) in failed
            for var, unit, base in figures:
                value = base * rng.gauss(1, noise)
                value = value * factor if unit != 's' else value / factor
                found.append(Sample(partition, name, 'host', 1, var, None if fails else value,
                                    unit, when + every_s * (job - first_job), jobid=str(job),
                                    nodelist=host, result='fail' if fails else 'pass',
                                    settings=settings))
    return found


NODES16 = [f'nid{i:03d}' for i in range(1, 17)]


def test_case1_a_node_that_failed_its_first_repetition_of_three_is_drained(tmp_path, capsys):
    """Case 1: --repeat 3, nid005 fails repetition 1 and passes 2 and 3 of the same sweep: a
    flaky node, drained, whichever repetition failed; not 'passed on re-run'."""
    for rep in (0, 2):
        found = run_of_sweep(NODES16, NOV[24], repeats=3, failed={('nid005', rep)})
        code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', found))
        assert code == 1 and drained(out) == ['nid005'], out
        assert 'failed 1 of 3 repetitions' in out and 'passed on re-run' not in out, out
        assert 'nid005' not in hostlist.expand(resume_names(out) or 'x'), out


def resume_names(out):
    """The host list of the printed RESUME line, '' where there is none."""
    line = next((ln for ln in out.splitlines() if 'State=RESUME' in ln), '')
    return line.split()[2].strip("'").removeprefix('NodeName=') if line else ''


def test_case2_older_sweeps_in_the_perf_log_never_outvote_the_latest(tmp_path, capsys):
    """Case 2: nid005 healthy on Nov 18 and 20, 35 % slow in the Nov 24 sweep: drained."""
    found = appended(run_of_sweep(NODES16, NOV[18], seed=1), run_of_sweep(NODES16, NOV[20], seed=2),
                     run_of_sweep(NODES16, NOV[24], slower={'nid005': 0.35}, seed=3))
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', found), '--expect', 'nid[001-016]')
    assert code == 1 and drained(out) == ['nid005'], out
    assert 'nid005' not in hostlist.expand(resume_names(out)), out


def test_case3_a_node_missing_from_the_latest_sweep_is_not_vetted_never_resumed(tmp_path, capsys):
    """Case 3: nid007, drained on Nov 22 for a hardware ticket, is not in the Nov 24 sweep of 15
    nodes: not vetted, out of the RESUME line, exit 1, with no --max-age to guess."""
    found = appended(run_of_sweep(NODES16, NOV[20], seed=2),
                     run_of_sweep([n for n in NODES16 if n != 'nid007'], NOV[24], seed=3))
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', found), '--expect', 'nid[001-016]')
    assert code == 1 and drained(out) == [], out
    assert 'not vetted (1)' in out and '  nid007: not in the latest sweep' in out, out
    assert 'nid007' not in hostlist.expand(resume_names(out)), out


def test_case4_var_never_hides_a_failed_run(tmp_path, capsys):
    """Case 4: nid005's interconnect run failed its value check; --var chooses the training
    figures to judge, and the failure still drains nid005."""
    found = appended(run_of_sweep(NODES16, NOV[24], figures=(
        ('samples_per_s', 'samples/s', 970.0), ('images_per_s', 'images/s', 970.0))),
        run_of_sweep(NODES16, NOV[24] + 5000, name=LINKS, failed={('nid005', 0)},
                     figures=(('allreduce_busbw', 'GB/s', 80.0),)))
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', found),
                       '--var', 'samples_per_s', '--var', 'images_per_s')
    assert code == 1 and drained(out) == ['nid005'], out
    assert 'InterconnectCheck[image=host] failed' in out, out


def test_case5_a_test_failing_on_every_node_is_one_partition_wide_line_and_no_drain(tmp_path, capsys):
    """Case 5: the upgrade moved CIFAR-100's data path: it fails on all 16 nodes, MNIST passes."""
    found = appended(run_of_sweep(NODES16, NOV[24]),
                     run_of_sweep(NODES16, NOV[24] + 3000, name=CIFAR,
                                  failed={(n, 0) for n in NODES16}))
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', found))
    assert code == 1 and drained(out) == [], out
    assert ('CIFAR100ResNetCheck[image=host] failed on 16 of 16 nodes: a partition-wide failure '
            "(configuration, data, image), not a node's") in out, out
    assert 'State=RESUME' not in out, out


@pytest.mark.parametrize('name', ['ALL', 'all', 'All'])
def test_case6_a_node_named_all_is_refused_and_no_line_names_it(tmp_path, capsys, name):
    """Case 6: `scontrol update NodeName=ALL State=DRAIN` drains the whole cluster. The record
    is named and left out, never in a command; the others are judged (issue 48's security
    red-team, U3: the whole sweep was refused), none resumed (its real node is unknown), exit 1."""
    found = [s if s.nodelist != 'nid003' else replaced([s], nodelist=name)[0]
             for s in run_of_sweep(NODES16, NOV[24], slower={'nid003': 0.4})]
    code, out, err = run(capsys, write_perflog(tmp_path / 'sweep.log', found),
                         '--expect', 'nid[001-016]')
    assert code == 1 and f'{name!r}' in out and 'sweep.log' in out, out
    assert not [line for line in out.splitlines() if line.startswith('scontrol') and name in line], out
    assert 'State=RESUME' not in out and 'no node is resumed' in out, out


def closed_pipe_run(argv, cwd):
    """`python -m argv...` with its stdout a pipe whose reader has already left (`| head -1`
    once head has exited): every write fails with EPIPE, as in the new user's trial, without
    the race of a real head. (exit status, stderr)"""
    import os
    import subprocess
    import sys
    from mlcheck import REPO
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, '-m', *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=cwd, env={**os.environ, 'PYTHONPATH': REPO})
    finally:
        os.close(write)
    return done.returncode, done.stderr


def test_a_closed_pipe_keeps_the_exit_status_and_the_files_of_nodes_and_baseline(tmp_path):
    """The new user's `mlcheck-nodes ... | head -1` exited 3 (internal error: BrokenPipeError)
    and mostly wrote no nodes.md; `mlcheck-baseline ... | head` exited 1."""
    log = write_perflog(tmp_path / 'sweep.log', sweep(64, {'nid017': 0.20}))
    code, err = closed_pipe_run(['mlcheck.commands.nodes', log, '-o', str(tmp_path / 'out')],
                                tmp_path)
    assert code == 1 and err == '', err
    assert '**nid017**' in (tmp_path / 'out' / 'nodes.md').read_text()
    from perflogs import BASELINE, spec
    code, err = closed_pipe_run(['mlcheck.commands.baseline', spec(BASELINE), '--references-dir',
                                 str(tmp_path / 'refs')], tmp_path)
    assert code == 0 and err == '', err
    assert (tmp_path / 'refs' / 'sim.yaml').is_file()


def test_the_reports_separating_command_never_excludes_all(tmp_path):
    """Issue 48, item 4: the report's `-J exclude=` takes node names from the records' node
    lists; `ALL` there is refused, said, and the other node kept."""
    from mlcheck.history import causes
    said = causes.separating([('node ALL', 'host stack'), ('node nid002',)], [])
    assert '-J exclude=nid002 (refused: ' in said and "'ALL' is Slurm's name for every node" in said
    assert 'exclude=ALL' not in said and 'ALL,' not in said, said


# `scontrol show node --oneliner` of Slurm 22.05 (the simulated cluster's), one node
STATE_LINE = ('NodeName={node} Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 '
              'CPULoad=0.62 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:2(S:0) '
              'NodeAddr=127.0.0.1 NodeHostName=localhost Port=17001 Version=22.05.8 OS=Linux '
              '6.18.44 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1024 AllocMem=0 FreeMem=8607 '
              'Sockets=2 Boards=1 State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A '
              'MCS_label=N/A Partitions={partition}  BootTime=2026-11-28T16:32:07 '
              'SlurmdStartTime=2026-11-28T16:41:40 LastBusyTime=2026-11-28T16:43:13 '
              'CfgTRES=cpu=2,mem=1G,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 '
              'ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s{reason}\n')


def slurm_states(nodes_, drained=None, partition='gpu', since='2026-11-22T10:00:00'):
    """Saved `scontrol show node --oneliner`: `drained` {node: (state, reason[, when])}, others
    IDLE; a reason set at `since` (Slurm's local time) unless the node says when."""
    text = ''
    for node in nodes_:
        state, reason, *when = (drained or {}).get(node, ('IDLE', ''))
        text += STATE_LINE.format(node=node, state=state, partition=partition, reason=(
            f' Reason={reason} [root@{when[0] if when else since}]' if reason else ''))
    return text


AFTER_MAINTENANCE = {
    **{n: ('IDLE+DRAIN', 'mlcheck: MNISTDistributedCheck[image=host] failed [perf log x.log]')
       for n in ('nid001', 'nid002', 'nid003', 'nid004')},
    'nid005': ('IDLE+DRAIN', 'upgrade 2026-11 torch 2.9'),
    'nid007': ('IDLE+DRAIN', 'RMA DIMM ticket 4411'),
    'nid008': ('IDLE+DRAIN+MAINTENANCE', 'mlcheck: an earlier sweep'),
    'nid009': ('DOWN*+DRAIN', 'Not responding'),
    'nid016': ('IDLE+DRAIN', 'upgrade 2026-11 torch 2.9')}


@pytest.mark.parametrize('how', ['scontrol', 'saved'])
def test_the_resume_line_names_only_healthy_nodes_slurm_shows_drained_for_mlchecks_reason(
        tmp_path, capsys, monkeypatch, how):
    """The RESUME line: nid001-004 (mlcheck's reason) and, with --resume-reason, nid005 (the
    maintenance's); nid007 (a DIMM ticket) and nid009 (not responding) left alone with their
    reasons, nid008 (a maintenance reservation) too, the idle ones in service; nid016, slow,
    drained, its DRAIN line before the RESUME line."""
    import os
    states = slurm_states(NODES16, AFTER_MAINTENANCE)
    log = write_perflog(tmp_path / 'sweep.log', run_of_sweep(NODES16, NOV[24], slower={'nid016': 0.4}))
    if how == 'scontrol':
        monkeypatch.setenv('PATH', f'{fake_scontrol(tmp_path / "bin", states)}:{os.environ["PATH"]}')
        where = []
    else:
        (tmp_path / 'states.txt').write_text(states)
        where = ['--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC']
    code, out, err = run(capsys, log, *where, '--resume-reason', 'upgrade 2026-11.*')
    assert code == 1 and drained(out) == ['nid016'], out + err
    assert resume_names(out) == 'nid[001-005]', out
    assert "  left alone (drained for another reason): nid007 'RMA DIMM ticket 4411'" in out, out
    assert '  left alone (not responding (DOWN*+DRAIN)): nid009' in out, out
    assert '  left alone (in a maintenance reservation or planned (IDLE+DRAIN+MAINTENANCE)): nid008' in out
    assert '  in service already (not drained, nothing to resume): nid[006,010-015]' in out, out
    lines = out.splitlines()
    assert lines.index(next(ln for ln in lines if 'State=DRAIN' in ln)) < \
        lines.index(next(ln for ln in lines if 'State=RESUME' in ln))
    assert 'not checked against Slurm' not in out
    code, out, _ = run(capsys, log, *where)
    assert resume_names(out) == 'nid[001-004]', out
    assert "  left alone (drained for another reason): nid005 'upgrade 2026-11 torch 2.9'" in out


def test_where_slurm_cannot_be_read_the_output_says_the_resume_line_was_not_checked(tmp_path, capsys):
    log = write_perflog(tmp_path / 'sweep.log', run_of_sweep(NODES16, NOV[24]))
    code, out, _ = run(capsys, log, '--expect', 'nid[001-016]')
    assert code == 0 and resume_names(out) == 'nid[001-016]', out
    assert ("  the RESUME line was not checked against Slurm's current reasons (scontrol failed: "
            'slurm_load_node error: Unable to contact slurm controller') in out, out


@pytest.mark.parametrize('name, says', [
    ('nid099', "'nid099' is not one of the partition's nodes"),
    ('gpu', "'gpu' is a partition's name"), ('cluster', "'cluster' is a partition's name")])
def test_a_node_outside_the_nodes_slurm_knows_or_named_like_a_partition_is_refused(
        tmp_path, capsys, name, says):
    """A NodeSet's name is no node Slurm lists; a partition's name (Slurm's gpu, ReFrame's
    cluster of sim:cluster) may stand for all its nodes."""
    (tmp_path / 'states.txt').write_text(slurm_states(NODES16))
    found = [s if s.nodelist != 'nid003' else replaced([s], nodelist=name)[0]
             for s in run_of_sweep(NODES16, NOV[24])]
    code, out, err = run(capsys, write_perflog(tmp_path / 'sweep.log', found),
                         '--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC')
    assert code == 1 and says in out and 'State=RESUME' not in out, out    # left out (U3)
    assert not [line for line in out.splitlines() if line.startswith('scontrol') and name in line], out


def test_a_node_outside_expect_is_refused_where_slurm_cannot_be_read(tmp_path, capsys):
    found = run_of_sweep(NODES16 + ['nid099'], NOV[24])
    code, out, err = run(capsys, write_perflog(tmp_path / 'sweep.log', found), '--expect', 'nid[001-016]')
    assert code == 1 and "'nid099' is not one of the partition's nodes (nid[001-016])" in out, out


def test_a_failed_pair_sweep_naming_all_as_its_slow_node_is_refused():
    failure = pair_sweep_failure(SLOW_NODE_AND_LINK)
    failure = replaced([failure], problem=failure.problem.replace('node nid002 is slow',
                                                                  'node ALL is slow'))[0]
    result = nodes.judge(sweep(4) + [failure])       # left out, named (U3)
    assert result.unknown_nodes == 1 and "'ALL' is Slurm's name for every node" in ' '.join(result.unreadable)


# the admins' reasons on a partition after a maintenance (the RESUME line's guard reads them)
OTHER_REASONS = ('RMA DIMM ticket 4411', 'Not responding', 'GPU 3 fell off the bus, ticket 918',
                 'held for the vendor')
MAINTENANCE = 'upgrade 2026-11 torch 2.9'


def admins_drained(rng, all_nodes):
    """Slurm's states after the sweeps: some nodes drained for tickets (before the latest sweep
    or after their run in it), some by mlcheck's own DRAIN lines of an earlier sweep, most for
    the maintenance, some in a maintenance reservation, the rest idle."""
    states = {}
    for node in all_nodes:
        draw = rng.random()
        states[node] = (('IDLE+DRAIN', rng.choice(OTHER_REASONS)) if draw < 0.1 else
                        ('IDLE+DRAIN', 'mlcheck: CIFAR100ResNetCheck[image=host] failed') if draw < 0.2 else
                        ('IDLE+DRAIN+MAINTENANCE', MAINTENANCE) if draw < 0.25 else
                        ('IDLE', '') if draw < 0.35 else ('IDLE+DRAIN', MAINTENANCE))
    return states


def slurm_time(unix):
    """A time as Slurm writes it in a reason: its local time, without an offset (the cluster's
    zone here is UTC, and the tests say --slurm-tz UTC)."""
    from datetime import datetime, timezone
    return datetime.fromtimestamp(unix, timezone.utc).strftime('%Y-%m-%dT%H:%M:%S')


def after_the_sweeps(rng, found, all_nodes, tests, repeats, job, latest):
    """What an admin does after a maintenance sweep, hours later, each drawn or not: re-runs one
    test alone over the idle nodes (the data fixed, a new image), or re-sweeps 2-3 nodes (two
    repaired and a control), the repaired ones failing again or not. `latest` {test: (nodes,
    failing nodes)} of each test's runs after, updated; the last job."""
    from node_sessions import PlannedSweep, run_sweep
    start = found[-1].time + rng.uniform(2 * 3600, 8 * 3600)
    if rng.random() < 0.5:                       # one test re-run alone
        test = rng.choice(tests)
        nodes_ = [n for n in all_nodes if rng.random() < 0.95]
        failing = {(n, test, r) for n in rng.sample(nodes_, rng.randint(0, 2))
                   for r in range(repeats)}
        runs = [(test, nodes_, failing)]
    else:                                        # a targeted re-sweep of a few nodes
        nodes_ = rng.sample(all_nodes, rng.randint(2, 3))
        failing = {(n, t, r) for n in nodes_[:rng.randint(0, 2)] for t in tests
                   for r in range(repeats)}
        runs = [(t, nodes_, failing) for t in tests]
    for test, nodes_, failing in runs:
        records, job = run_sweep(rng, PlannedSweep(nodes_, repeats, failing, {}, {}), start,
                                 (test,), first_job=job)
        found += records
        start = records[-1].time + 60
        latest[test] = (set(nodes_), {n for n, t, _ in failing if t == test})
    return job


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.one_of(st.integers(16, 200), st.sampled_from([1024, 4096])), sweeps=st.integers(2, 4),
       repeats=st.integers(1, 3), seed=st.integers(0, 2**32 - 1), later=st.booleans())
def test_no_resume_line_names_a_node_that_failed_missed_the_sweep_or_is_drained_for_another_reason(
        tmp_path, capsys, n, sweeps, repeats, seed, later):
    """Issue 47, done when: sweeps generated as Slurm runs them (tests/node_sessions.py: jobs in
    ReFrame's order in max_jobs slots; flaky nodes failing any one repetition, broken nodes, a
    test failing on most nodes, slow nodes, nodes drained for tickets missing from later sweeps),
    several appended to one perf log, and (`later`) one test re-run alone hours after or a
    targeted re-sweep of 2-3 nodes; a second partition swept only in the first sweep; judged
    with Slurm's states, some set after the evidence (a ticket, mlcheck's later sweep), some not
    responding: the RESUME line names no node that failed a repetition of a test's latest sweep,
    was not in it, is drained for another reason (or set aside, or not responding), or was
    drained after its last run of a test; no DRAIN line is printed for a failure most nodes
    share."""
    from node_sessions import TESTS, plan_sweep, run_sweep
    rng = random.Random(seed)
    all_nodes = [f'nid{i:05d}' for i in range(1, n + 1)]
    debug = [f'dbg{i:03d}' for i in range(1, 9)]       # a partition swept before the maintenance
    tests = TESTS if n <= 1024 else TESTS[:1]
    repeats = repeats if n <= 1024 else 1
    found, job, start, ticketed = [], 0, NOV[18], set()
    for number in range(sweeps):
        ticketed |= set(rng.sample(all_nodes, rng.randint(0, max(1, n // 50))))
        held = set(rng.sample(all_nodes, rng.randint(0, n // 20)))      # users' jobs, not idle
        plan = plan_sweep(rng, all_nodes, ticketed | held, repeats, tests)
        records, job = run_sweep(rng, plan, start, tests, first_job=job)
        if number == 0:
            found += run_sweep(rng, plan_sweep(rng, debug, set(), repeats, tests), start, tests,
                               partition='sim:debug', first_job=job)[0]
        found += records
        # the maintenance before this sweep: every node drained for it, 10 min to 3 h before
        maintenance_at = start - rng.uniform(600, 3 * 3600)
        start = records[-1].time + rng.uniform(30 * 3600, 5 * 86400)    # maintenances days apart
    latest = {t: (set(plan.nodes), {node for node, test, _ in plan.failing if test == t})
              for t in tests}
    # the maintenance's sweep: the latest, and what ran hours after it (less than a day), a
    # failure of either a failure
    sweep_of_maintenance = dict(latest)
    if later:
        after_the_sweeps(rng, found, all_nodes, tests, repeats, job, latest)
        # ... but a test that failed on most nodes (its data moved), re-run after the fix: the
        # re-run alone counts (docs/node-sweep.md: the partition's failure, history once re-run)
        fixed = lambda ran, failing: 2 * len(failing) > len(ran) and len(failing) >= nodes.MIN_PEERS
        # (a re-run over the partition, not a targeted re-sweep of 2-3 nodes)
        sweep_of_maintenance = {t: latest[t] if fixed(ran, failing) and len(latest[t][0]) > 3
                                and latest[t] != (ran, failing) else
                                (ran | latest[t][0], failing | latest[t][1])
                                for t, (ran, failing) in sweep_of_maintenance.items()}
    last_run = {}
    for s in found:
        last_run[(s.nodelist, s.name)] = max(last_run.get((s.nodelist, s.name), 0), s.time)
    states = {node: (*state, slurm_time(maintenance_at))
              for node, state in admins_drained(rng, all_nodes + debug).items()}
    states.update({node: ('IDLE+DRAIN', rng.choice(OTHER_REASONS)) for node in ticketed})
    for node in rng.sample(all_nodes, max(1, n // 20)):     # drained after their runs
        states[node] = ('IDLE+DRAIN', rng.choice([MAINTENANCE, 'mlcheck: a later pair sweep']),
                        slurm_time(found[-1].time + rng.uniform(60, 86400)))
    for node in rng.sample(all_nodes, max(1, n // 50)):     # not responding
        states[node] = (rng.choice(['DOWN*+DRAIN', 'IDLE*+DRAIN']), MAINTENANCE)
    (tmp_path / 'states.txt').write_text(slurm_states(all_nodes + debug, states,
                                                      since=slurm_time(maintenance_at)))
    log = write_perflog(tmp_path / 'perflogs.log', found)
    capsys.readouterr()
    code, out, err = run(capsys, log, '--slurm-states', str(tmp_path / 'states.txt'),
                         '--slurm-tz', 'UTC', '--resume-reason', MAINTENANCE)
    assert code in (0, 1), err
    resumed = set(hostlist.expand(resume_names(out))) if resume_names(out) else set()
    failed_any = set().union(*(failing for _, failing in sweep_of_maintenance.values()))
    in_every = set.intersection(*(ran for ran, _ in sweep_of_maintenance.values()))
    set_aside = {node for node, (state, reason, *_) in states.items()
                 if 'MAINTENANCE' in state or '*' in state
                 or (reason and not reason.startswith(('mlcheck: ', MAINTENANCE)))}
    stale = {node for node, (_, _, *when) in states.items() if when and any(
        last_run.get((node, t), 0) < datetime_of(when[0]) for t in tests)}
    assert not resumed & failed_any, (resumed & failed_any, out[:3000])
    assert resumed <= in_every, (resumed - in_every, out[:3000])
    assert not resumed & set_aside, (resumed & set_aside, out[:3000])
    assert not resumed & stale, (resumed & stale, out[:3000])
    drain = [ln for ln in out.splitlines() if ln.startswith('scontrol update NodeName=nid')
             and 'State=DRAIN' in ln]                 # the main partition's (not dbg's)
    for test in tests:
        ran, failing = sweep_of_maintenance[test]
        if 2 * len(failing) > len(ran) and len(failing) >= nodes.MIN_PEERS:
            said = f'{node_records.short(test)} failed'
            assert not [ln for ln in drain if said in ln], (test, len(failing), out[:3000])
            # ... unless a re-run after it passed: the re-run counts, the failure history
            fixed = f'{node_records.short(test)} on sim:cluster: ' in out and 'the re-run counts' in next(
                ln for ln in out.splitlines() if ln.startswith(f'  {node_records.short(test)} on sim:cluster: '))
            assert fixed or f'{said} on {len(failing)} of {len(ran)} nodes: a partition-wide' in out, \
                (test, len(failing), len(ran), out[:3000])


def datetime_of(slurm):
    from datetime import datetime, timezone
    return datetime.fromisoformat(slurm).replace(tzinfo=timezone.utc).timestamp()


def test_name_chooses_the_figures_judged_and_never_hides_another_tests_failure(tmp_path, capsys):
    """As --var (case 4): `-n MNIST` judges MNIST's figures; nid005's failed interconnect run
    still drains it."""
    found = appended(run_of_sweep(NODES16, NOV[24]), run_of_sweep(
        NODES16, NOV[24] + 5000, name=LINKS, failed={('nid005', 0)},
        figures=(('allreduce_busbw', 'GB/s', 80.0),)))
    code, out, _ = run(capsys, write_perflog(tmp_path / 'sweep.log', found), '-n', 'MNIST')
    assert code == 1 and drained(out) == ['nid005'] and not table_rows(out, 'allreduce_busbw'), out
    assert '-n MNIST: the figures of ' in out and ' not judged (allreduce_busbw)' in out, out


def test_a_node_of_an_earlier_sweep_that_slurm_no_longer_lists_is_not_to_vet(tmp_path, capsys):
    """nid016 left the partition after Nov 20: not in Slurm's list, not in the Nov 24 sweep;
    neither refused (it is in no printed command) nor not vetted."""
    (tmp_path / 'states.txt').write_text(slurm_states(NODES16[:15], {
        n: ('IDLE+DRAIN', 'mlcheck: an earlier sweep') for n in NODES16[:15]}))
    found = appended(run_of_sweep(NODES16, NOV[20], seed=2), run_of_sweep(NODES16[:15], NOV[24]))
    code, out, err = run(capsys, write_perflog(tmp_path / 'sweep.log', found),
                         '--slurm-states', str(tmp_path / 'states.txt'), '--slurm-tz', 'UTC')
    assert code == 0 and resume_names(out) == 'nid[001-015]' and 'nid016' not in out, out + err
