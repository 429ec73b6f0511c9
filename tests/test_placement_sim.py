"""Both binding styles end to end on the simulated cluster, whose GPU slots Slurm schedules as
generic resources (bin/simslurm: gres.conf with stand-in devices, GPU 0 nearest core 1 and GPU 1
nearest core 0): --gpus-per-node, --gpu-bind=map_gpu and the per-task variables Slurm sets."""


import pytest

from mlcheck.judging import output
from reframe_runner import job_file, report_cases, run_reframe

# (node, local rank) -> (cores, Slurm's GPUs for the task, CUDA_VISIBLE_DEVICES)
EXPECTED = {
    # task i on core i, and Slurm gives it the GPU nearest that core, selecting it by itself
    'by_domain': {0: ([0], [1], '1'), 1: ([1], [0], '0')},
    # task i drives GPU i from the core nearest it; Slurm gives the step both, the wrapper picks one
    'by_gpu': {0: ([1], [0, 1], '0'), 1: ([0], [0, 1], '1')},
}


@pytest.mark.parametrize('style', ['by_domain', 'by_gpu'])
def test_binding_style_on_the_simulated_cluster(cluster, tmp_path, style):
    done = run_reframe('simulated', tmp_path / 'rfm', '-r', '-n', 'MNISTDistributedCheck',
                       '-P', 'image=host', '-P', 'num_nodes=2',   # all 10 epochs: accuracy >= 0.9
                       '-S', f'binding={style}', env={'RFM_ENABLE_RESULTS_STORAGE': '0'})
    [case] = report_cases(tmp_path / 'rfm')
    # sanity passed (performance against references is not this test's business)
    assert case['fail_phase'] in (None, 'performance'), case.get('fail_reason') or done.stdout[-3000:]
    script = open(job_file(case, 'rfm_job.sh')).read()
    assert '#SBATCH --gpus-per-node=2\n' in script
    assert ('--gpu-bind=map_gpu:1,0' in script) == (style == 'by_domain')
    ranks = output.read(job_file(case)).by_rank('rank')
    seen = {(r['node'], r['local_rank']): (r['affinity'], r['slurm_step_gpus'],
                                          r['visible_devices_env']['CUDA_VISIBLE_DEVICES'])
            for r in ranks.values()}
    assert seen == {(node, local): want for node in ('nid001', 'nid002')
                    for local, want in EXPECTED[style].items()}
    # no GPU to read a locality from: said once, not failed
    assert 'GPU locality could not be read (ranks 0-3: no GPU in use)' in done.stdout
