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


def test_a_report_of_the_newest_session_against_latest_is_refused_not_silent(tmp_path, capsys):
    """`mlcheck-report B latest` with B the newest compared B with itself: '1 unchanged of 1
    compared', exit 0 (the third pass's L-report-same, no hostile data needed). Likewise a perf
    log named twice; an older session against latest still compares."""
    import time
    from mlcheck.commands import report
    from command_line import run_main
    from results_databases import new_session, store, sweep
    older, newest = new_session(), new_session()
    path, _ = store(tmp_path, sweep(older, time.time() - 3600, (100.0, 101.0, 99.0)), sweep(newest, time.time() - 60))
    for selection in (newest, 'latest'):
        code, out, err = run_main(capsys, report.main, selection, 'latest', '--db', str(path))
        assert code == 2 and out == '' and len(err.splitlines()) == 1 and 'select the same records' in err, err
    code, out, err = run_main(capsys, report.main, older, 'latest', '--db', str(path))
    assert code in (0, 1) and 'same records' not in err, err
    log = write_perflog(tmp_path / 'a.log', build(random.Random(1), [], noise=0.01)[1])
    code, out, err = run_main(capsys, report.main, log, log)
    assert code == 2 and 'select the same records' in err, err
