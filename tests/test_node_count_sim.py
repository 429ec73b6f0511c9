"""End to end: what a check measures, and the bar it sets, do not change with the node count."""

import glob
import os

from mlcheck.judging import output
from reframe_runner import report_cases, run_reframe


def job_output(case):
    return output.read(os.path.join(case['outputdir'], 'rfm_job.out'))


def test_cifar_warmup_longer_than_an_epoch_still_times_every_epoch(cluster, tmp_path):
    """The issue's reproduction: 8 warm-up steps, epochs of 8 steps. Epoch 1 used to time
    nothing, and the check failed with a nan loss, as every healthy LUMI run at 8+ nodes did."""
    done = run_reframe('simulated', tmp_path, '-r', '-n', 'CIFAR', '-P', 'image=host', '-P', 'num_nodes=1',
                       '-S', 'epochs=2', '-S', 'batch_size=32', '-S', 'warmup_steps=8',
                       env={'RFM_ENABLE_RESULTS_STORAGE': '0'})
    [case] = report_cases(tmp_path)
    assert case['result'] == 'pass', (case.get('fail_reason'), done.stdout[-3000:])
    epochs = job_output(case).events('epoch')
    assert sorted((e['rank'], e['epoch'], e['steps']) for e in epochs) == [
        (0, 1, 8), (0, 2, 8), (1, 1, 8), (1, 2, 8)]
