"""The CIFAR-100 check's one-process modes (-S mode=dp, -S mode=single): their task layout and
what sanity expects of them, against outputs of train_cifar100.py run directly on this machine's
CPU in each mode (the simulated partition's settings: resnet18, batch 16, 8 steps, 2 warm-up,
0 workers, --synthetic; single under `taskset -c 0`, the core its mask gives it), each line
labelled `0: ` as srun --label writes it. On a CPU the stand-in GPUs are not used: dp trains
on one device without DataParallel, so what is judged there is the launch (one process, its
CPU mask) and the training promise; the GPU rule is judged on LUMI's settings, below."""

import pytest
from hypothesis import given, settings, strategies as st

from mlcheck.errors import ConfigError
from mlcheck.placement.launch import Layout
from mlcheck.placement.topology import NodeTopology, cores_to_mask, mask_to_cores
from saved_outputs import judged, saved, with_facts

MODE_OUT = 'cifar100_modes/sim_{}.out'
# what the check asks of each mode (checks/cifar100_resnet.py task_shape), per partition
SHAPES = {'dp': lambda s: {'tasks_per_node': 1, 'gpus_per_task': s.topology.gpus_per_node},
          'single': lambda s: {'tasks_per_node': 1, 'gpus_per_task': 1}}


def problems(site, mode, text):
    """The check's problems in a one-process mode: no solo phase, its training promise."""
    return judged(site, text, layout=site.layout(1, **SHAPES[mode](site)), epochs=3, loss_must_fall=True)


@pytest.mark.parametrize('mode', ['dp', 'single'])
def test_saved_run_of_each_mode_is_sane_on_the_simulated_partition(sim, mode):
    assert problems(sim, mode, saved(MODE_OUT.format(mode))) == []


@pytest.mark.parametrize('mode', ['dp', 'single'])
def test_ddp_expectations_would_fail_a_one_process_run(sim, mode):
    """Why the mode has expectations of its own: a DDP world and a solo phase are not there."""
    found = judged(sim, saved(MODE_OUT.format(mode)), nodes=1, epochs=3, loss_must_fall=True,
                   slow_rank_fraction=0.8)
    assert any('ran in a world of 1, launched 2' in p for p in found), found
    assert any('reported no solo throughput' in p for p in found), found


@pytest.mark.parametrize('mode', ['dp', 'single'])
@pytest.mark.parametrize('event, change, problem', [
    ('done', lambda f: None, 'rank 0 did not finish'),
    ('epoch', lambda f: None if f['epoch'] == 2 else f,
     'rank 0 reported throughput for epochs [1, 3], expected 1-3'),
    ('summary', lambda f: {**f, 'loss': 9.0} if f['epoch'] == 3 else f, 'loss did not fall'),
    ('summary', lambda f: {**f, 'loss': float('nan')} if f['epoch'] == 2 else f,
     'loss is not finite in epoch(s) 2'),
    ('rank', lambda f: {**f, 'world_size': 2}, 'rank 0 ran in a world of 2, launched 1'),
    ('rank', lambda f: {**f, 'affinity': [5]}, 'runs on cores [5], expected'),
])
def test_each_broken_promise_of_a_one_process_mode_is_found(sim, mode, event, change, problem):
    found = problems(sim, mode, with_facts(saved(MODE_OUT.format(mode)), event, change=change))
    assert any(problem in p for p in found), found


def on_lumi_gpus(text, visible, cores):
    """The saved run as LUMI would show it: the rank on cuda:0 seeing `visible` GCDs, on `cores`."""
    return with_facts(text, 'rank', device='cuda:0', visible_devices=visible, affinity=cores)


def lumi_cores(lumi, gpus):
    return lumi.topology.cores_of_gpus(gpus)


def test_dp_on_a_gpu_partition_must_see_every_gpu_of_the_node(lumi):
    every = lumi_cores(lumi, range(8))
    assert problems(lumi, 'dp', on_lumi_gpus(saved(MODE_OUT.format('dp')), 8, every)) == []
    found = problems(lumi, 'dp', on_lumi_gpus(saved(MODE_OUT.format('dp')), 1, every))
    assert found == ["rank 0 uses device 'cuda:0' and sees 1 GPU(s); expected exactly 8 GPUs"]


def test_single_on_a_gpu_partition_must_see_one_gpu(lumi):
    cores = lumi_cores(lumi, [0])
    assert problems(lumi, 'single', on_lumi_gpus(saved(MODE_OUT.format('single')), 1, cores)) == []
    found = problems(lumi, 'single', on_lumi_gpus(saved(MODE_OUT.format('single')), 8, cores))
    assert found == ["rank 0 uses device 'cuda:0' and sees 8 GPU(s); expected exactly one GPU"]


def test_dp_layout_on_lumi_is_one_task_on_the_union_of_the_gcds_cores(lumi):
    dp = lumi.layout(1, **SHAPES['dp'](lumi))
    ddp = lumi.layout(1)
    assert (dp.num_tasks, dp.gpus_per_node, dp.cores_per_task) == (1, 8, 56)
    assert dp.masks == (hex(sum(int(m, 16) for m in ddp.masks)),)
    # one task of eight GPUs: the rank wrapper gives them, not --gpu-bind's one per task
    by_domain = lumi.layout(1, 'by_domain', **SHAPES['dp'](lumi))
    assert not by_domain.slurm_binds_gpus and '--gpu-bind' not in ' '.join(by_domain.srun_options())


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.data())
def test_a_task_of_several_gpus_runs_on_exactly_their_cores(per_domain, domains, data):
    """Whatever the topology, a task of n GPUs gets the union of the cores the n one-GPU tasks
    would get, and nothing else; its tasks' cores never overlap."""
    gpu_domains = data.draw(st.lists(st.integers(0, domains - 1), min_size=1, max_size=8))
    topo = NodeTopology(cores_per_domain=max(per_domain, len(gpu_domains)), gpu_domains=tuple(gpu_domains))
    divisors = [n for n in range(1, topo.gpus_per_node + 1) if topo.gpus_per_node % n == 0]
    per_task = data.draw(st.sampled_from(divisors))
    try:
        layout = Layout.for_nodes(topo, 1, gpus_per_task=per_task)
    except ConfigError as err:      # unequal core counts are refused, and said so
        assert 'unequal core counts' in str(err)
        return
    assert layout.tasks_per_node * layout.gpus_per_task == topo.gpus_per_node
    seen = []
    for task, mask in enumerate(layout.masks):
        gpus = range(task * per_task, (task + 1) * per_task)
        cores = mask_to_cores(mask)
        assert cores == sorted({c for g in gpus for c in topo.cores_of_gpu(g)})
        assert len(cores) == layout.cores_per_task
        seen += cores
    assert len(seen) == len(set(seen))
    every_gpu = {c for g in range(topo.gpus_per_node) for c in topo.cores_of_gpu(g)}
    assert cores_to_mask(seen) == cores_to_mask(every_gpu)
