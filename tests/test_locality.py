"""The GPU locality each rank reads from sysfs, and the sanity rule over it, on saved sysfs trees:
LUMI-G and a two-socket NVIDIA node from their documented layouts, the lent H100 machine and this
CI machine as captured. Also the topology entry derived from those trees."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from conftest import REPO
from mlcheck.judging import locality, notes, sanity
from mlcheck.judging.output import RunOutput
from mlcheck.placement import discover
from mlcheck.placement.launch import Layout
from mlcheck.placement.topology import mask_to_cores
from mlcheck.site.settings import node_topology
from sysfs_trees import SAVED, lumi_g, two_socket_nvidia

import gpu_locality  # from src/pytorch (conftest)

LUMI_PCI = ['0000:c1:00.0', '0000:c6:00.0', '0000:c9:00.0', '0000:cc:00.0',
            '0000:d1:00.0', '0000:d6:00.0', '0000:d9:00.0', '0000:dc:00.0']
LUMI = {'cores_per_node': 64, 'cores_per_domain': 8, 'gpu_domains': [6, 7, 2, 3, 0, 1, 4, 5],
        'reserved_cores_per_domain': [0]}
TWO_SOCKET_PCI = ['0000:17:00.0', '0000:65:00.0', '0000:b1:00.0', '0000:ca:00.0']


def run_on(tree, topology, pcis, style='by_gpu', moved=None):
    """(output, expectations) of one node's ranks bound as the config says; `moved`:
    {local rank: cores} for ranks that ran elsewhere."""
    layout = Layout.for_nodes(node_topology(topology, 'topology'), 1, style=style)
    run = RunOutput()
    for task, gpu in enumerate(layout.gpus):
        cores = (moved or {}).get(task, mask_to_cores(layout.masks[task]))
        run.facts.append({'event': 'rank', 'rank': task, 'local_rank': task, 'node': 'nid001',
                          'affinity': cores, **gpu_locality.read_locality(pcis[gpu], tree)})
    expect = sanity.Expectations(num_nodes=1, tasks_per_node=layout.tasks_per_node,
                                 masks=layout.masks, gpus_of_tasks=layout.gpus)
    return run, expect


@pytest.fixture(scope='module')
def lumi_tree(tmp_path_factory):
    return lumi_g(tmp_path_factory.mktemp('lumi-g'))


@pytest.fixture(scope='module')
def two_socket_tree(tmp_path_factory):
    return two_socket_nvidia(tmp_path_factory.mktemp('two-socket'))


@pytest.mark.parametrize('style', ['by_gpu', 'by_domain'])
def test_lumi_ranks_bound_by_either_style_sit_next_to_their_gcd(lumi_tree, style):
    run, expect = run_on(lumi_tree, LUMI, LUMI_PCI, style)
    assert sanity.cpu_affinity(run, expect) == []
    assert locality.cores_local_to_gpu(run, expect) == []


def test_a_rank_on_another_numa_domains_cores_fails_naming_everything(lumi_tree):
    run, expect = run_on(lumi_tree, LUMI, LUMI_PCI, moved={0: list(range(1, 8))})
    assert locality.cores_local_to_gpu(run, expect) == [
        'rank 0 on nid001 runs on cores 1-7, not all local to its GPU 0000:c1:00.0 '
        '(NUMA node 3: cores 48-63,112-127)']


def test_permuted_gpu_domains_pass_the_mask_check_and_fail_against_the_hardware(lumi_tree):
    """A config gone stale: GCDs 0-1 and 2-3 swapped their CCDs. Slurm applies the masks
    faithfully, so only the hardware can tell."""
    stale = {**LUMI, 'gpu_domains': [2, 3, 6, 7, 0, 1, 4, 5]}
    for style in ('by_gpu', 'by_domain'):
        run, expect = run_on(lumi_tree, stale, LUMI_PCI, style)
        assert sanity.cpu_affinity(run, expect) == []
        found = locality.cores_local_to_gpu(run, expect)
        assert len(found) == 4
        assert {line.split(' runs on')[0] for line in found} <= {f'rank {r} on nid001' for r in range(8)}
        assert any('GPU 0000:c1:00.0 (NUMA node 3: cores 48-63,112-127)' in line for line in found)


def test_a_swap_inside_one_numa_domain_is_beyond_what_sysfs_tells(lumi_tree):
    """sysfs gives a GPU's NUMA node, not its CCD: GCD 0 and 1 swapped stay unseen."""
    swapped = {**LUMI, 'gpu_domains': [7, 6, 2, 3, 0, 1, 4, 5]}
    run, expect = run_on(lumi_tree, swapped, LUMI_PCI)
    assert locality.cores_local_to_gpu(run, expect) == []


def test_two_socket_nvidia_node(two_socket_tree):
    topology = {'cores_per_domain': 32, 'gpu_domains': [0, 0, 1, 1]}
    run, expect = run_on(two_socket_tree, topology, TWO_SOCKET_PCI)
    assert locality.cores_local_to_gpu(run, expect) == []
    run, expect = run_on(two_socket_tree, {**topology, 'gpu_domains': [1, 1, 0, 0]}, TWO_SOCKET_PCI)
    assert len(locality.cores_local_to_gpu(run, expect)) == 4


def test_the_h100_machine_as_captured():
    """One NUMA node and no locality from the hypervisor (numa_node -1): every core is local,
    as nvidia-smi topo -m says (CPU affinity 0-15)."""
    tree = os.path.join(SAVED, 'h100-vm')
    assert gpu_locality.read_locality('0000:00:06.0', tree) == {
        'gpu_pci': '0000:00:06.0', 'gpu_local_cpus': list(range(16)), 'gpu_numa_node': -1}
    run, expect = run_on(tree, {'cores_per_domain': 16, 'gpu_domains': [0]}, ['0000:00:06.0'])
    assert locality.cores_local_to_gpu(run, expect) == []


def test_unreadable_locality_is_said_once_and_never_fails(monkeypatch):
    """This CI machine: no GPU; and a GPU whose sysfs entry the container hides."""
    tree = os.path.join(SAVED, 'ci-2core')
    cpu = SimpleNamespace(type='cpu')
    assert gpu_locality.rank_fields(cpu, tree) == {'gpu_locality_unread': 'no GPU in use'}
    monkeypatch.setattr(gpu_locality, 'pci_address', lambda device: '0000:3b:00.0')
    hidden = gpu_locality.rank_fields(SimpleNamespace(type='cuda'), tree)
    assert hidden['gpu_pci'] == '0000:3b:00.0' and 'sysfs does not tell' in hidden['gpu_locality_unread']

    run = RunOutput(facts=[{'event': 'rank', 'rank': r, 'local_rank': r, 'affinity': [r],
                            'gpu_locality_unread': 'no GPU in use'} for r in range(4)])
    expect = sanity.Expectations(num_nodes=2, tasks_per_node=2, masks=('0x1', '0x2'))
    assert locality.cores_local_to_gpu(run, expect) == []
    assert locality.unread_note(run) == ('GPU locality could not be read (ranks 0-3: no GPU in use); '
                                         'CPU placement was checked against the configured topology only')
    assert locality.unread_note(RunOutput()) is None


def test_slurm_giving_a_task_another_gpu_than_the_binding_meant_fails():
    expect = sanity.Expectations(num_nodes=1, tasks_per_node=2, masks=('0x1', '0x2'), gpus_of_tasks=(1, 0))

    def given(gpus):
        return RunOutput(facts=[{'event': 'rank', 'rank': r, 'local_rank': r, 'node': 'nid001',
                                 'slurm_step_gpus': gpus[r]} for r in range(2)])

    assert locality.gpus_given_by_slurm(given([[1], [0]]), expect) == []
    assert locality.gpus_given_by_slurm(given([[1, 0], [1, 0]]), expect) == []   # no --gpu-bind
    assert locality.gpus_given_by_slurm(given([[0], [1]]), expect) == [
        'rank 0 (local rank 0 on nid001) was given GPU(s) [0] by Slurm, expected GPU 1',
        'rank 1 (local rank 1 on nid001) was given GPU(s) [1] by Slurm, expected GPU 0']


def test_topology_derived_from_lumi_g_gives_the_documented_masks(lumi_tree):
    """At NUMA level (all sysfs tells), with core 0 of every CCD outside the job's CPUs."""
    allowed = [cpu for cpu in range(128) if cpu % 8]
    entry, notes = discover.derive(lumi_tree, allowed)
    assert entry == {'cores_per_node': 64, 'cores_per_domain': 16, 'gpu_domains': [3, 3, 1, 1, 0, 0, 2, 2],
                     'reserved_cores_per_domain': [0, 8]}
    derived = node_topology(entry, 'derived')
    documented = node_topology(LUMI, 'lumi')
    assert Layout.for_nodes(derived, 1, 8).masks == Layout.for_nodes(documented, 1, 8).masks
    assert 'GPU 0: 0000:c1:00.0 (amd), domain 3' in notes


def test_topology_derived_from_the_other_trees(two_socket_tree):
    assert discover.derive(two_socket_tree, range(128))[0] == {
        'cores_per_node': 64, 'cores_per_domain': 32, 'gpu_domains': [0, 0, 1, 1]}
    assert discover.derive(os.path.join(SAVED, 'h100-vm'), range(16))[0] == {
        'cores_per_node': 16, 'cores_per_domain': 16, 'gpu_domains': [0]}


def test_discover_on_a_node_without_gpus_says_so():
    done = subprocess.run([sys.executable, '-m', 'mlcheck.placement.discover', '--sysfs',
                           os.path.join(SAVED, 'ci-2core')], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        '# 2 cores (2 CPUs online) in 1 NUMA node domain(s) of 2 cores',
        f'# no GPUs on this node (no NVIDIA or AMD display device in {SAVED}/ci-2core/bus/pci/devices): '
        'gpu_domains cannot be derived']


def test_discover_on_this_machine_runs():
    done = subprocess.run([sys.executable, '-m', 'mlcheck.placement.discover'],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0 and done.stdout.startswith('# '), done.stdout + done.stderr


def test_stand_in_gpus_notes_are_said_once_per_session_and_kind_real_gpus_each_test(sim, lumi, monkeypatch):
    """Every simulated test printed the same locality note (18 per session), and then the same
    telemetry note, on a partition whose GPUs the config declares stand-ins; on a real GPU
    partition each test still says them."""
    monkeypatch.setattr(notes, '_SAID_ON_STAND_INS', set())
    for kind, note in (('locality', 'GPU locality could not be read (ranks 0-1: no GPU in use)'),
                       ('telemetry', 'GPU telemetry not available on stand-in GPUs (ranks 0-1: ...)')):
        said = [notes.to_say(sim, kind, note) for _ in range(18)]
        assert said[0].startswith(note) and 'stand-ins' in said[0] and said[1:] == [None] * 17
        assert [notes.to_say(lumi, kind, note) for _ in range(3)] == [note] * 3
        assert notes.to_say(sim, kind, None) is None
