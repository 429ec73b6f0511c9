"""Topology -> CPU masks, from the partitions' own config entries."""

import pytest

from mlcheck.errors import ConfigError
from mlcheck.placement.launch import Layout
from mlcheck.placement.topology import cores_to_mask, mask_to_cores
from mlcheck.site.settings import node_topology

LUMI_MASKS = ('0xfe000000000000,0xfe00000000000000,0xfe0000,0xfe000000,'
              '0xfe,0xfe00,0xfe00000000,0xfe0000000000')


def test_lumi_standard_g_masks_are_the_documented_ones(lumi):
    layout = Layout.for_nodes(lumi.topology, num_nodes=4)
    assert ','.join(layout.masks) == LUMI_MASKS
    assert layout.tasks_per_node == 8 and layout.cores_per_task == 7 and layout.num_tasks == 32
    assert layout.srun_options() == ['--label', '--kill-on-bad-exit=1', f'--cpu-bind=mask_cpu:{LUMI_MASKS}']


def test_lumi_gcd0_gets_ccd6_without_its_first_core(lumi):
    assert lumi.topology.cores_of_gpu(0) == list(range(49, 56))


def test_simulated_partition_has_one_core_per_slot(sim):
    layout = sim.layout(num_nodes=2)
    assert layout.masks == ('0x1', '0x2') and layout.gpus == (1, 0)
    assert layout.cores_per_task == 1 and layout.num_tasks == 4


def test_gpus_sharing_a_domain_split_its_free_cores():
    topo = node_topology({'cores_per_domain': 16, 'gpu_domains': [0, 0, 1, 1],
                                     'reserved_cores_per_domain': [0, 1]}, 'x')
    assert [topo.cores_of_gpu(g) for g in range(4)] == [
        list(range(2, 9)), list(range(9, 16)), list(range(18, 25)), list(range(25, 32))]


def test_fewer_tasks_than_gpus_use_the_first_gpus(lumi):
    assert list(Layout.for_nodes(lumi.topology, 1, 2).masks) == LUMI_MASKS.split(',')[:2]


def test_mask_round_trip():
    assert mask_to_cores(cores_to_mask([1, 2, 63])) == [1, 2, 63]


@pytest.mark.parametrize('entry, message', [
    ({'cores_per_domain': 8, 'gpu_domains': [0, 1]}, None),
    ({'cores_per_domain': 8}, "missing required key(s) gpu_domains"),
    ({'cores_per_domain': 8, 'gpu_domains': [0], 'gpus': 8}, 'unknown key(s) gpus'),
    ({'cores_per_domain': '8', 'gpu_domains': [0]}, 'cores_per_domain: expected int'),
    ({'cores_per_domain': 8, 'gpu_domains': [0, -1]}, 'gpu_domains[1]: -1 is less than 0'),
    ({'cores_per_domain': 8, 'gpu_domains': []}, 'gpu_domains: empty; give at least 1'),
    ({'cores_per_domain': 8, 'gpu_domains': [0], 'reserved_cores_per_domain': [8]}, 'outside a domain'),
    ({'cores_per_domain': 8, 'gpu_domains': [8], 'cores_per_node': 64}, 'only 8 domains'),
    ({'cores_per_domain': 1, 'gpu_domains': [0, 0]}, '1 unreserved core(s) for 2 GPUs'),
    ({'cores_per_domain': 2, 'gpu_domains': [0], 'reserved_cores_per_domain': [0, 1]},
     '0 unreserved core(s) for 1 GPUs'),
])
def test_bad_topologies_are_one_line_errors_naming_the_entry(entry, message):
    if message is None:
        node_topology(entry, 'partition p extras.mlcheck.topology')
        return
    with pytest.raises(ConfigError) as err:
        node_topology(entry, 'partition p extras.mlcheck.topology')
    assert message in str(err.value)
    assert str(err.value).startswith('partition p extras.mlcheck.topology')
    assert '\n' not in str(err.value)


def test_more_tasks_than_gpus_do_not_fit(sim):
    with pytest.raises(ConfigError, match='3 tasks per node do not fit 2 GPUs per node'):
        Layout.for_nodes(sim.topology, num_nodes=1, tasks_per_node=3)


def test_unequal_core_counts_cannot_be_one_cpus_per_task():
    topo = node_topology({'cores_per_domain': 4, 'gpu_domains': [0, 1, 1]}, 'x')
    with pytest.raises(ConfigError, match='unequal core counts'):
        topo.cores_per_task(3)
