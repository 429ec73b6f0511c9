"""Issue 48's fourth security pass (/tmp/redteam-i48-sec4): the node-list budget's leave-out (G1),
mlcheck-nodes quadratic in records (G2), the `access` parser's abbreviations (A1), one file
spelled twice as both selections; each fed the pass's hostile input, built here."""

import argparse
import dataclasses
import pytest

from mlcheck.commands.common import slurm_partitions
from mlcheck.history import nodes
from mlcheck.history.samples import Sample

SITE = ("site_configuration = {{'systems': [{{'name': 'sim', 'hostnames': ['.*'], 'partitions': [{{"
        "'name': 'cluster', 'scheduler': 'slurm', 'launcher': 'srun', 'access': {access!r}, "
        "'environs': ['builtin']}}]}}], 'environments': [{{'name': 'builtin'}}]}}\n")


@pytest.mark.parametrize('access, names', [
    (['--part=sim'], {'sim'}),
    (['--parti', 'sim'], {'sim'}),
    (['-Qpsim'], {'sim'}),
    (['-Q', '-vp', 'sim'], {'sim'}),
    (["--partition='sim"], {'sim'}),
    (['--par=sim'], set()),           # --parsable shares it: sbatch refuses the option
    (['-Jpjob'], set()),              # -J takes the rest of the word: a job name
], ids=['prefix-eq', 'prefix-word', 'grouped', 'grouped-word', 'unbalanced-quote', 'ambiguous', 'job-name'])
def test_a1_access_is_read_as_sbatch_s_getopt_long_reads_it(tmp_path, access, names):
    """A1: `--part=sim`, `--parti sim`, `-Qpsim` and `--partition='sim` named no partition, so a
    node named sim could be printed in -J exclude=sim."""
    site = tmp_path / 'site.py'
    site.write_text(SITE.format(access=access))
    found = slurm_partitions(argparse.Namespace(config=str(site)))
    assert names <= set(found.get('sim:cluster', ((), None))[0]), found
    if not names:
        assert 'sim' not in found.get('sim:cluster', ((), None))[0]


class CountedEnds(list):
    """Run ends that count the elements read through them, and stop a quadratic scan early."""

    def __init__(self, items, budget):
        super().__init__(items)
        self.read, self.budget = 0, budget

    def __iter__(self):
        for item in super().__iter__():
            self.read += 1
            assert self.read <= self.budget, f'read {self.read:,} run ends: a scan per record'
            yield item


def test_g2_stale_partitions_reads_each_partition_s_run_ends_a_few_times_not_once_per_record():
    """G2: 300,000 one-node records of one partition (the probe's shape, sw/slow5+300001z.log) took
    the max of the partition's 300,000 run ends once per record: 9e10 reads, about 20 minutes.
    Counted, not timed: the ends are read a few times over (the max, the pauses), never 300,000
    times; the bound, 10 reads per record, stops the old scan within its first 10 records."""
    n = 300_000
    record = Sample('sim:cluster', 'MNISTDistributedCheck %num_nodes=1', 'host', 1, 'samples_per_s',
                    5134.6, 'samples/s', 1.79e9 + n, jobid='1', nodelist='zz000000')
    kept = [(f'zz{i:06d}', record) for i in range(n)]
    past = nodes.History(ends={'sim:cluster': CountedEnds((1.79e9 + i for i in range(n)), 10 * n)})
    left, _ = nodes._stale_partitions(kept, past)
    assert len(left) == n


@pytest.mark.parametrize('spell', [
    lambda d: ('pl/x.log', './pl/x.log'),
    lambda d: ('pl/x.log', str(d / 'pl' / 'x.log')),
    lambda d: ('pl', 'pl/.'),
    lambda d: ('pl/x.log', 'link.log'),
], ids=['dot-slash', 'absolute', 'dir-dot', 'hard-link'])
def test_one_perf_log_spelled_twice_is_refused_as_the_same_records(tmp_path, capsys, monkeypatch, spell):
    """S2/S3/S8: pl/x.log against ./pl/x.log, its absolute path, a hard link, or d1 against d1/. compared the
    file with itself: '1 unchanged', exit 0."""
    import random
    from command_line import one_line_error
    from mlcheck.commands import report
    from perflogs import write_perflog
    from scenario_bank import build
    (tmp_path / 'pl').mkdir()
    write_perflog(tmp_path / 'pl' / 'x.log', build(random.Random(1), [], noise=0.01)[1])
    (tmp_path / 'link.log').hardlink_to(tmp_path / 'pl' / 'x.log')
    monkeypatch.chdir(tmp_path)
    err = one_line_error(capsys, report.main, *spell(tmp_path))
    assert 'select the same records' in err, err


# --- the node-list budget's leave-out (G1) -------------------------------------------------------

HEADER = ('job_completion_time|reframe version|system:partition|name|image|num_nodes|num_tasks|jobid|'
          'job_nodelist|perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres|'
          'perf_result|run_settings|software_stack|machine_speed')


def _log(path, day, jobs):
    """A perf log of `jobs` [(check, nodes, node list, busbw)], each run once at 5 repetitions'
    times (pl/b16-*.log of the fourth pass, mk4.py)."""
    lines = [HEADER]
    for n, (check, nodes, nodelist, value) in enumerate(jobs):
        lines.append(f'2001-09-{day:02d}T{n // 60 % 24:02d}:{n % 60:02d}:00+00:00|reframe 4.10.4|sim:cluster|'
                     f'{check} %image=torch-2.9.1 %num_nodes={nodes}|torch-2.9.1|{nodes}|{nodes}|{day}{n:06d}|'
                     f'{nodelist}|busbw|{value}|GB/s|null|null|null||epochs=3||null')
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def _real(factor, check='RealCheck', nodes=16):
    values = (80.0, 81.0, 79.5, 80.5, 79.8)
    return [(check, nodes, f'nid[0000-{nodes - 1:04d}]', v * factor) for v in values]


def test_g1_planted_lists_shorter_than_a_real_job_s_do_not_make_its_regression_vanish(tmp_path, capsys, monkeypatch):
    """B16-report-junk15: past the budget the longest lists went first, so planted 15-node lists
    of new names left out the real 16-node job's records after, and its -30 % regression read
    'NO RESULT AFTER ... leave its tests out with -n'. The planted lists (hosts the before side
    never names) go first now; the budget is 1,000 here (300,000 in use) so that little expands."""
    from mlcheck.commands import report
    from mlcheck.history import hostlist
    from command_line import run_main
    monkeypatch.setattr(hostlist, 'TOTAL_HOSTS', 1_000)
    before = _log(tmp_path / 'before.log', 9, _real(1.0))
    junk = [('JunkCheck', 15, f'j{i:05d}n[00-14]', 80.0) for i in range(70)]
    after = _log(tmp_path / 'after.log', 10, _real(0.7) + junk)
    code, out, err = run_main(capsys, report.main, before, after)
    assert code == 1 and 'REGRESSION' in out and 'NO RESULT AFTER' not in out and ' -n' not in out, out
    assert 'NOT JUDGED: JunkCheck' in out and 'j000' in err, (out, err)


def test_g1_a_test_that_lost_records_to_the_budget_is_not_judged_never_a_pass(tmp_path, capsys, monkeypatch):
    """A real test whose records the budget takes (its list the longest of those the other side
    names too) was dropped from the report without a word on stdout, exit 0: NOT JUDGED now, on
    both sides, no advice to leave it out, and never exit 0."""
    from mlcheck.commands import report
    from mlcheck.history import hostlist
    from command_line import run_main
    monkeypatch.setattr(hostlist, 'TOTAL_HOSTS', 10)
    before = _log(tmp_path / 'before.log', 9, _real(1.0) + _real(1.0, 'SmallCheck', 4))
    after = _log(tmp_path / 'after.log', 10, _real(0.7) + _real(1.0, 'SmallCheck', 4))
    code, out, err = run_main(capsys, report.main, before, after)
    assert code != 0 and 'NOT JUDGED: RealCheck' in out, (code, out, err)
    assert 'NO RESULT' not in out and ' -n' not in out and 'SmallCheck' in out, out


def test_g1_mlcheck_nodes_leaves_out_records_of_unexpected_nodes_first(tmp_path, capsys, monkeypatch):
    """B-nodes-300001z: 300,001 planted one-name records (zz000000...) past the budget made every
    real node's records the ones left out (ties by text: 'nid...' < 'zz...'): no DRAIN line for
    the slow nid00005. The lists of nodes --expect names are kept first; a node whose own records
    go is named not judged. The budget is 12 hosts here, 300,000 in use."""
    import random
    from mlcheck.commands import nodes as command
    from mlcheck.history import hostlist
    from command_line import run_main
    from node_sessions import session
    from perflogs import write_perflog
    monkeypatch.setattr(hostlist, 'TOTAL_HOSTS', 12)
    found = session(8, 0.01, {'nid00005': 0.25}, random.Random(7), partition='sim:cluster', time=1.79e9)
    planted = [dataclasses.replace(found[0], nodelist=f'zz{i:06d}', jobid=str(900 + i)) for i in range(10)]
    log = write_perflog(tmp_path / 'shared.log', found + planted)
    code, out, err = run_main(capsys, command.main, log, '--expect', 'nid[00000-00007]')
    assert code == 1 and 'NodeName=nid00005 State=DRAIN' in out and 'State=RESUME' not in out, (out, err)
    # a budget smaller than the partition: its own nodes' records go, and those nodes are not judged
    monkeypatch.setattr(hostlist, 'TOTAL_HOSTS', 4)
    code, out, err = run_main(capsys, command.main, log, '--expect', 'nid[00000-00007]')
    assert code == 1 and 'State=RESUME' not in out, (out, err)
    assert 'node nid00000: not judged' in out and 'healthy (4)' not in out, out


def test_h1_baseline_writes_no_reference_from_records_the_budget_chose(tmp_path, capsys, monkeypatch):
    """The fifth security pass's H1 (pl/c10-good+junk.log): past the budget the longest lists went
    first, so planted lists left out the real job's three runs at 80 GB/s and mlcheck-baseline
    wrote 60 from its other two, exit 0, with `-n` too: a later run 25 % slower then passed. A
    test that lost any record writes no reference now: refused in one line, nothing written."""
    from mlcheck.commands import baseline
    from mlcheck.history import hostlist
    from command_line import one_line_error, run_main
    monkeypatch.setattr(hostlist, 'TOTAL_HOSTS', 1_000)
    real = ([('InterconnectCheck', 16, 'nid[0000-0015]', v) for v in (80.0, 80.5, 79.5)]
            + [('InterconnectCheck', 16, 'nid[0016-0031]', v) for v in (60.0, 60.2)])
    junk = [('MNISTDistributedCheck', 16, f'z{i:05d}n[00-15]', 1.0) for i in range(70)]
    refs = tmp_path / 'refs'
    log = _log(tmp_path / 'good+junk.log', 9, real + junk)
    err = one_line_error(capsys, baseline.main, log, '--references-dir', str(refs))
    assert 'MNISTDistributedCheck' in err and 'node-list budget' in err and '-n, a period' in err, err
    assert not refs.exists()
    # -n before the budget: the planted records of another test are not this selection's, and the
    # reference is the median of all five runs, as without them
    for selected in (['-n', 'InterconnectCheck', log], [_log(tmp_path / 'good.log', 9, real)]):
        code, out, _ = run_main(capsys, baseline.main, '--dry-run', *selected, '--references-dir', str(refs))
        assert code == 0 and 'busbw: [79.5' in out, out
