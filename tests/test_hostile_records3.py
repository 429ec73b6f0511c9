"""Issue 48's fourth security pass (/tmp/redteam-i48-sec4): the node-list budget's leave-out (G1),
mlcheck-nodes quadratic in records (G2), the `access` parser's abbreviations (A1), one file
spelled twice as both selections; each fed the pass's hostile input, built here."""

import argparse
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
