"""Both binding styles derived from one topology: LUMI's documented one and its 2026 one."""

import pytest

from mlcheck.errors import ConfigError
from mlcheck.placement.launch import Layout, job_exports
from mlcheck.placement.topology import mask_to_cores
from mlcheck.site.settings import node_topology

LUMI_DOCUMENTED_MASKS = ('0xfe000000000000,0xfe00000000000000,0xfe0000,0xfe000000,'
                         '0xfe,0xfe00,0xfe00000000,0xfe0000000000')
# CCD i without its reserved core 0, in order
LUMI_LINEAR_MASKS = ','.join(hex(0xfe << 8 * ccd) for ccd in range(8))


def test_lumi_by_domain_binds_ccds_in_order_and_maps_gpus_by_the_inverse_of_gpu_domains(lumi):
    layout = lumi.layout(num_nodes=2, binding='by_domain')
    assert layout.gpus == (4, 5, 2, 3, 6, 7, 0, 1)
    assert ','.join(layout.masks) == LUMI_LINEAR_MASKS
    assert layout.srun_options() == ['--label', '--kill-on-bad-exit=1',
                                     f'--cpu-bind=mask_cpu:{LUMI_LINEAR_MASKS}',
                                     '--gpu-bind=map_gpu:4,5,2,3,6,7,0,1',
                                     '--gres-flags=allow-task-sharing']
    # task i drives GPU gpus[i] from the cores of that GPU's domain, as in the documented style
    for task, gpu in enumerate(layout.gpus):
        assert mask_to_cores(layout.masks[task]) == lumi.topology.cores_of_gpu(gpu)


def test_lumi_by_gpu_is_the_documented_binding_with_the_wrapper_choosing_the_gpu(lumi):
    layout = lumi.layout(num_nodes=2)
    assert layout.style == 'by_gpu' and layout.gpus == tuple(range(8))
    assert ','.join(layout.masks) == LUMI_DOCUMENTED_MASKS
    assert not any(o.startswith(('--gpu-bind', '--gres-flags')) for o in layout.srun_options())
    exports = dict(line[len('export '):].split('=', 1) for line in job_exports(lumi, layout))
    assert exports['MLCHECK_VISIBLE_DEVICES_VARS'] == 'ROCR_VISIBLE_DEVICES'


def test_under_gpu_bind_the_rank_wrapper_leaves_the_visible_devices_to_slurm(lumi):
    layout = lumi.layout(num_nodes=1, binding='by_domain')
    exports = dict(line[len('export '):].split('=', 1) for line in job_exports(lumi, layout))
    assert exports['MLCHECK_VISIBLE_DEVICES_VARS'] == ''


def test_gpus_sharing_a_numa_domain_are_taken_in_domain_then_gpu_order():
    topo = node_topology({'cores_per_domain': 16, 'gpu_domains': [1, 1, 0, 0]}, 'x')
    layout = Layout.for_nodes(topo, 1, style='by_domain')
    assert layout.gpus == (2, 3, 0, 1)
    assert [mask_to_cores(m) for m in layout.masks] == [
        list(range(0, 8)), list(range(8, 16)), list(range(16, 24)), list(range(24, 32))]


def test_without_task_sharing_no_gres_flags():
    topo = node_topology({'cores_per_domain': 1, 'gpu_domains': [1, 0]}, 'x')
    assert Layout.for_nodes(topo, 1, style='by_domain').srun_options()[-1] == '--gpu-bind=map_gpu:1,0'


def test_an_unknown_style_is_a_one_line_error(lumi):
    with pytest.raises(ConfigError, match=r"^binding=by_ccd: unknown binding style 'by_ccd'; "
                                          r"one of by_gpu, by_domain$"):
        lumi.layout(num_nodes=1, binding='by_ccd')


def test_by_domain_needs_gpus_that_slurm_schedules(lumi):
    from dataclasses import replace
    with pytest.raises(ConfigError, match="binding 'by_domain' needs GPUs that Slurm schedules"):
        replace(lumi, gpu_vendor='none').layout(num_nodes=1, binding='by_domain')


@pytest.mark.parametrize('key, value, message', [
    ('binding', 'linear', "partition p extras.mlcheck.binding: 'linear' is not one of by_gpu, "
                          "by_domain"),
    ('gpu_task_sharing', 'yes', 'partition p extras.mlcheck.gpu_task_sharing: expected bool'),
])
def test_bad_binding_settings_in_config_are_one_line_errors(key, value, message):
    from mlcheck.site.settings import PartitionSettings
    extras = {'mlcheck': {'topology': {'cores_per_domain': 1, 'gpu_domains': [0]}, key: value}}
    with pytest.raises(ConfigError) as err:
        PartitionSettings.from_extras('p', extras)
    assert str(err.value).startswith(message) and '\n' not in str(err.value)
