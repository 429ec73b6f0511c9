"""End to end: a sweep of a 4-node simulated partition with faults injected at the nodes (a CPU
quota on one node's slurmd, the dataset hidden from another's, another torchvision version on a
third's) and the node-pair sweep with one link slowed (nftables), judged together by
mlcheck-nodes; a healthy node drained by an admin for a ticket is left out of its RESUME line."""

import contextlib
import os
import re
import subprocess

import pytest

import margins
from conftest import REPO
from mlcheck.commands import nodes as command
from mlcheck.simulated import faults
from reframe_runner import NO_SOLO, job_file, report_cases, run_reframe, utc_now

DATA = os.environ.get('MLCHECK_DATA_DIR', os.path.join(REPO, 'var', 'data'))   # config/simulated.py's


# On this shared 2-core machine (other work running), serial one-node jobs of healthy nodes
# differed by up to 31 % in throughput and 46 % in the one-node ratios (communication_efficiency),
# docs/node-sweep.md: the sweep judges the throughput at 50 %, and the quota gives the node's two
# ranks half of one CPU, about 4 times less than they use (a quarter: 87 % below, 150 s).
JUDGED = ['--var', 'samples_per_s', '--threshold', '50%']


# the link between two nodes, each way: 20 MB/s made its pair 0.02 GB/s where healthy pairs made
# 0.57-1.19 (docs/node-sweep.md); the collectives up to 64 KiB and 10 iterations, so that the
# slowed link delays them by seconds
SLOW_LINK = ('nid001', 'nid003')
LINK_KBYTES_PER_S = 20000
PAIR_SWEEP = ['-n', 'InterconnectCheck', '-P', 'image=host', '-P', 'num_nodes=4',
              '-S', f'max_bytes={1 << 16}', '-S', 'max_iters=10']


# nid004 keeps another torchvision: its version file, in its slurmd's mount namespace only
OTHER_TORCHVISION = '0.1.0+mlcheck.other'


def test_the_sweep_names_exactly_the_slowed_node_the_broken_one_and_the_slow_link(four_nodes, tmp_path, capsys):
    import torchvision.version
    start = utc_now()
    version_file = torchvision.version.__file__
    other = open(version_file).read().replace(torchvision.version.__version__, OTHER_TORCHVISION)
    with faults.cpu_quota('nid002', 0.5) as cgroup, faults.hidden_path('nid003', DATA), \
            faults.other_file('nid004', version_file, other):
        done = run_reframe('simulated', tmp_path, '-r', '-n', 'MNIST', '-P', 'image=host',
                           '-P', 'num_nodes=1', '--distribute=all', '--exec-policy=serial',
                           '-S', 'epochs=1', *NO_SOLO, judged=False)     # nid002's rate is the sweep's to judge
        broken = faults.slurmd_pid('nid003')
    # the faults are gone: no cgroup left, nid003's slurmd sees the data again
    assert not os.path.exists(cgroup)
    assert faults.slurmd_pid('nid003') != broken
    assert 'mlcheck-fault' not in open(f"/proc/{faults.slurmd_pid('nid003')}/mountinfo").read()
    cases = report_cases(tmp_path)
    assert sorted(c['job_nodelist'][0] for c in cases) == ['nid001', 'nid002', 'nid003', 'nid004'], \
        done.stdout[-3000:]
    with faults.slow_links([SLOW_LINK], LINK_KBYTES_PER_S):
        pairs = run_reframe('simulated', tmp_path / 'pairs', '-r', *PAIR_SWEEP, judged=False,
                            env={'RFM_SQLITE_DB_FILE': str(tmp_path / 'results.db')})
    [pair_case] = report_cases(tmp_path / 'pairs')
    # after the sweep: nid001 drained for the maintenance, nid004 by an admin for a ticket; read
    # from the real slurmctld, nid001's drain is newer than its evidence (Slurm starts no job on a
    # drained node): not vetted, never resumed; nid004 healthy, left alone for its ticket
    with drained_in_slurm({'nid001': MAINTENANCE, 'nid004': TICKET}):
        code = command.main(['-C', os.path.join(REPO, 'config', 'simulated.py'),
                             '--db', str(tmp_path / 'results.db'),
                             f'{start}:{utc_now(round_up=True)}', '--expect', 'nid[001-004]',
                             *JUDGED, '--resume-reason', MAINTENANCE, '-o', str(tmp_path / 'sweep')])
    out = capsys.readouterr().out
    drained = sorted(line.split()[2] for line in out.splitlines()
                     if line.startswith('scontrol') and 'State=DRAIN' in line)
    assert (code, drained) == (1, ['NodeName=nid002', 'NodeName=nid003']), out
    slowed = next(line for line in out.splitlines() if 'NodeName=nid002' in line)
    failed = next(line for line in out.splitlines() if 'NodeName=nid003' in line)
    assert 'below its peers' in slowed and 'failed' not in slowed, slowed
    below = float(re.search(r'(\d+)% below its peers', slowed).group(1))
    margins.record('node sweep: the half-CPU node % below its peers, must pass the threshold', below,
                   float(JUDGED[JUDGED.index('--threshold') + 1].rstrip('%')))
    assert 'MNISTDistributedCheck[image=host] failed: ' in failed, failed
    # nid004 passed, its stack unlike its peers' (read from its jobs' own rank lines)
    assert f'  nid004: torchvision {OTHER_TORCHVISION}, ' in out, out
    assert 'healthy (1): nid004' in out and 'State=RESUME' not in out, out
    assert "  nid001: no evidence since it was drained: Slurm drained it at " in out, out
    assert f"  left alone (drained for another reason): nid004 '{TICKET}'" in out, out
    links = [line for line in out.splitlines() if line.startswith('  link ')]
    assert links and all(line.startswith('  link nid001 <-> nid003: ') for line in links), \
        out + pairs.stdout[-2000:] + str(pair_case['fail_reason'])
    [case] = [c for c in cases if c['job_nodelist'] == ['nid003']]
    said = open(job_file(case)).read() + open(job_file(case, 'rfm_job.err')).read()
    assert DATA in said, said[-3000:]      # the node's job could not read the hidden dataset
    print(out)


MAINTENANCE, TICKET = 'upgrade 2026-11', 'RMA DIMM ticket 4411'


@contextlib.contextmanager
def drained_in_slurm(reasons):
    """The nodes {node: reason} drained in Slurm while the block runs, resumed afterwards."""
    try:
        for node, reason in reasons.items():
            subprocess.run(['scontrol', 'update', f'NodeName={node}', 'State=DRAIN',
                            f'Reason={reason}'], check=True, timeout=30)
        yield
    finally:
        for node in reasons:
            subprocess.run(['scontrol', 'update', f'NodeName={node}', 'State=RESUME'], timeout=30)


def test_a_multi_node_check_under_distribute_is_skipped_in_one_line(cluster, tmp_path):
    done = run_reframe('simulated', tmp_path, '-r', '-n', 'InterconnectCheck', '-P', 'image=host',
                       '-P', 'num_nodes=2', '--distribute=all')
    cases = report_cases(tmp_path)
    assert len(cases) == 2 and {c['result'] for c in cases} == {'skip'}, done.stdout[-3000:]
    assert done.stdout.count('2 nodes: --distribute runs one copy per node, so vet every node '
                             'with -P num_nodes=1') == 2


def test_the_faults_undo_themselves_when_their_block_fails(cluster):
    home = faults.cpu_cgroup_of(faults.slurmd_pid('nid001'))
    with pytest.raises(KeyError):
        with faults.cpu_quota('nid001', 0.5) as cgroup:
            assert faults.cpu_cgroup_of(faults.slurmd_pid('nid001')) == cgroup
            raise KeyError('the block failed')
    assert not os.path.exists(cgroup)
    assert faults.cpu_cgroup_of(faults.slurmd_pid('nid001')) == home
    with pytest.raises(KeyError):
        with faults.hidden_path('nid001', DATA) as hidden:
            assert 'mlcheck-fault' in open(f'/proc/{hidden}/mountinfo').read()
            raise KeyError('the block failed')
    assert 'mlcheck-fault' not in open(f"/proc/{faults.slurmd_pid('nid001')}/mountinfo").read()
