"""Both binding styles end to end on the simulated cluster, whose GPU slots Slurm schedules as
generic resources (bin/simslurm: gres.conf with stand-in devices, GPU 0 nearest core 1 and GPU 1
nearest core 0): --gpus-per-node, --gpu-bind=map_gpu and the per-task variables Slurm sets."""


import re

import pytest

from conftest import load_site_config
from mlcheck.judging import output
from reframe_runner import NO_SOLO, job_file, report_cases, run_reframe

# (node, local rank) -> (cores, Slurm's GPUs for the task, CUDA_VISIBLE_DEVICES)
EXPECTED = {
    # task i on core i, and Slurm gives it the GPU nearest that core, selecting it by itself
    'by_domain': {0: ([0], [1], '1'), 1: ([1], [0], '0')},
    # task i drives GPU i from the core nearest it; Slurm gives the step both, the wrapper picks one
    'by_gpu': {0: ([1], [0, 1], '0'), 1: ([0], [0, 1], '1')},
}


def binding_run(style, suite_run, tmp_path):
    """(MNIST's 2-node case in the host's Python, reframe's stdout) with `style`: the suite run's
    for the partition's own style, by_domain (config/simulated.py); otherwise a run of its own,
    of 2 epochs (learning still judged, bar 0.7: the binding, not the accuracy, is tested here)."""
    if style == load_site_config('simulated')['systems'][0]['partitions'][0]['extras']['mlcheck']['binding']:
        prefix, done = suite_run
        [case] = [c for c in report_cases(prefix, 'MNISTDistributedCheck')
                  if c['image'] == 'host' and c['num_nodes'] == 2]
        return case, done.stdout
    done = run_reframe('simulated', tmp_path / 'rfm', '-r', '-n', 'MNISTDistributedCheck',
                       '-P', 'image=host', '-P', 'num_nodes=2', '-S', 'epochs=2',
                       '-S', f'binding={style}', *NO_SOLO, env={'RFM_ENABLE_RESULTS_STORAGE': '0'})
    [case] = report_cases(tmp_path / 'rfm')
    return case, done.stdout


@pytest.mark.parametrize('style', ['by_domain', 'by_gpu'])
def test_binding_style_on_the_simulated_cluster(suite_run, tmp_path, style):
    case, stdout = binding_run(style, suite_run, tmp_path)
    # sanity passed (performance against references is not this test's business)
    assert case['fail_phase'] in (None, 'performance'), case.get('fail_reason') or stdout[-3000:]
    script = open(job_file(case, 'rfm_job.sh')).read()
    assert '#SBATCH --gpus-per-node=2\n' in script
    assert ('--gpu-bind=map_gpu:1,0' in script) == (style == 'by_domain')
    ranks = output.read(job_file(case)).by_rank('rank')
    seen = {(r['node'], r['local_rank']): (r['affinity'], r['slurm_step_gpus'],
                                          r['visible_devices_env']['CUDA_VISIBLE_DEVICES'])
            for r in ranks.values()}
    assert seen == {(node, local): want for node in ('nid001', 'nid002')
                    for local, want in EXPECTED[style].items()}
    # no GPU to read a locality from: said (once a session, by its first test), not failed
    assert re.search(r'GPU locality could not be read \(ranks 0-[13]: no GPU in use\)', stdout), stdout[-3000:]
