"""Issue 48's third security pass, the findings left after ed42d26 (F3-F6, the `access` parser,
a report of a session against itself, the node-list budget, unreadable records of a sweep): each
fed the hostile input of /tmp/redteam-i48-sec3, built here."""

import argparse
import dataclasses
import random

import pytest

from command_line import run_report
from mlcheck.commands.common import slurm_partitions
from mlcheck.history import cells
from perflogs import write_perflog
from scenario_bank import Fault, build

SITE = ("site_configuration = {{'systems': [{{'name': 'sim', 'hostnames': ['.*'], 'partitions': [{{"
        "'name': 'cluster', 'scheduler': 'slurm', 'launcher': 'srun', 'access': {access!r}, "
        "'environs': ['builtin']}}]}}], 'environments': [{{'name': 'builtin'}}]}}\n")


def _site(tmp_path, access):
    path = tmp_path / 'site.py'
    path.write_text(SITE.format(access=access))
    return str(path)


@pytest.mark.parametrize('access, names', [
    (['--cpus-per-task=2', '--partition=sim'], ('sim',)),
    (['--partition=gpu,sim'], ('gpu', 'sim')),
    (["--partition='sim'"], ('sim',)),
    (['-p', 'sim'], ('sim',)),
    (['-psim'], ('sim',)),
    (['--partition sim --constraint=gpu'], ('sim',)),
    (['--exclusive', '--comment=-p x'], ()),
], ids=['after-cpus-per-task', 'two', 'quoted', 'split', 'joined', 'one-entry', 'in-a-value'])
def test_f5_access_is_read_as_slurm_reads_its_options(tmp_path, access, names):
    """F5: `--cpus-per-task=2 --partition=sim` was read as the partition `er-task`,
    `--partition=gpu,sim` as `gpu`, `--partition='sim'` as `artition`."""
    found = slurm_partitions(argparse.Namespace(config=_site(tmp_path, access)))
    assert found.get('sim:cluster', ((), None))[0] == names, found


@pytest.mark.parametrize('access', [['--cpus-per-task=2', '--partition=sim'], ['--partition=gpu,sim'],
                                    ["--partition='sim'"]], ids=['after-cpus-per-task', 'two', 'quoted'])
def test_f5_a_node_named_as_any_partition_access_names_is_never_excluded(tmp_path, capsys, access):
    """F5 end to end: with these configs the report printed `-J exclude=sim`."""
    rename = lambda side: [dataclasses.replace(s, nodelist=s.nodelist.replace('nid001', 'sim'))
                           for s in side if s.var != cells.RANK_VAR]
    before, after = (rename(side) for side in build(random.Random(1), [Fault('node', 'nid001', 0.25)],
                                                    noise=0.01, recorded=False))
    _, out, _ = run_report(capsys, write_perflog(tmp_path / 'b.log', before),
                           write_perflog(tmp_path / 'a.log', after), '-C', _site(tmp_path, access))
    [line] = [line for line in out.splitlines() if line.startswith('likely cause: ')]
    assert 'exclude=sim' not in line and "'sim' is a partition's name" in line, line
