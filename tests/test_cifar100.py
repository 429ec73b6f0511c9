"""CIFAR-100 benchmark: the staged data through torchvision's loader, the program's timing
arithmetic, and the sanity rules on a real run of the simulated partition
(sim_cluster_cifar100_2nodes.out: ResNet-18, 4 gloo ranks on nid001-002, 3 epochs of 8 steps).
"""

import hashlib
import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from conftest import DATA, REPO
from ddp_common import load_program
from epochs import steady_state, steps_per_epoch
from mlcheck.data import staging
from mlcheck.judging import output
from saved_outputs import judged, saved, with_facts

PROGRAM = os.path.join(REPO, 'src', 'pytorch', 'cifar', 'train_cifar100.py')
SIM_OUT = 'sim_cluster_cifar100_2nodes.out'


@pytest.fixture(scope='module')
def staged(tmp_path_factory):
    dest = tmp_path_factory.mktemp('cifar')
    staging.stage_cifar100(str(dest))
    return dest


def test_torchvision_loader_reads_the_staged_set(staged):
    program = load_program('cifar/cifar_data.py')
    train = program.StagedCIFAR100(str(staged), train=True)
    test = program.StagedCIFAR100(str(staged), train=False)
    assert (len(train), len(test)) == (5000, 1000)
    assert train.data.shape == (5000, 32, 32, 3) and train.data.dtype == np.uint8
    assert len(train.classes) == 100 and train.classes[7] == 'class_07'
    assert sorted(set(train.targets)) == list(range(100)) and sorted(set(test.targets)) == list(range(100))
    image, label = train[0]
    assert image.size == (32, 32) and image.mode == 'RGB' and 0 <= label < 100


def test_staged_files_have_cifar100_keys_and_layout(staged):
    with open(staged / 'cifar-100-python' / 'train', 'rb') as f:
        entry = pickle.load(f, encoding='latin1')
    assert set(entry) == {'filenames', 'batch_label', 'fine_labels', 'coarse_labels', 'data'}
    assert entry['data'].shape == (5000, 3072)
    assert max(entry['coarse_labels']) == 19 and max(entry['fine_labels']) == 99
    with open(staged / 'cifar-100-python' / 'meta', 'rb') as f:
        meta = pickle.load(f, encoding='latin1')
    assert len(meta['fine_label_names']) == 100 and len(meta['coarse_label_names']) == 20


class Payload:
    """What a planted pickle would run on loading: here, writing a marker file."""
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


@pytest.fixture
def planted(staged, tmp_path):
    """A copy of the staged set whose training file is a pickle that runs code; (root, marker)."""
    import shutil
    root = tmp_path / 'data'
    shutil.copytree(staged, root)
    marker = tmp_path / 'ran'
    with open(root / 'cifar-100-python' / 'train', 'wb') as f:
        pickle.dump({'data': Payload(marker), 'fine_labels': []}, f, protocol=2)
    return root, marker


def test_a_planted_pickle_runs_nothing(planted):
    """The dataset directory is writable by a project group: a file there must not run code."""
    root, marker = planted
    program = load_program('cifar/cifar_data.py')
    with pytest.raises(SystemExit, match='is neither the published file nor the generated stand-in'):
        program.StagedCIFAR100(str(root), train=True)
    assert not marker.exists()
    # and were its digest one of the known ones, the unpickler itself admits no other global
    with open(root / 'cifar-100-python' / 'train', 'rb') as f, \
            pytest.raises(pickle.UnpicklingError, match='posix.system is not part of the CIFAR-100 format'):
        program.CIFARUnpickler(f, encoding='latin1').load()
    assert not marker.exists()


def test_a_file_others_can_write_is_refused_unless_trusted(staged, tmp_path, monkeypatch):
    import shutil
    root = tmp_path / 'data'
    shutil.copytree(staged, root)
    (root / 'cifar-100-python' / 'meta').chmod(0o664)
    program = load_program('cifar/cifar_data.py')
    monkeypatch.delenv(program.TRUST_VARIABLE, raising=False)
    with pytest.raises(SystemExit, match=f'CIFAR-100 file {root}/cifar-100-python/meta can be written '
                                         r'by others \(owner uid 0, mode 664\): not read'):
        program.StagedCIFAR100(str(root), train=False)
    monkeypatch.setenv(program.TRUST_VARIABLE, '1')
    assert len(program.StagedCIFAR100(str(root), train=False).classes) == 100


def test_the_stand_in_is_the_recorded_one(staged):
    """The program knows the generated stand-in by its digests: staging must still write those bytes."""
    program = load_program('cifar/cifar_data.py')
    found = {name: hashlib.md5((staged / 'cifar-100-python' / name).read_bytes()).hexdigest()
             for name in ('train', 'test', 'meta')}
    assert found == program.STAND_IN_MD5


def test_staging_keeps_a_complete_earlier_staging(staged):
    before = os.stat(staged / 'cifar-100-python' / 'train').st_mtime_ns
    assert staging.stage_cifar100(str(staged))[1] is False
    assert os.stat(staged / 'cifar-100-python' / 'train').st_mtime_ns == before


def test_steady_state_excludes_the_first_epoch():
    summaries = [{'samples': 100, 'seconds': 10.0, 'steps': 5},
                 {'samples': 200, 'seconds': 1.0, 'steps': 10},
                 {'samples': 200, 'seconds': 3.0, 'steps': 10}]
    assert steady_state(summaries, 4) == {'samples_per_s': 100.0, 'samples_per_s_per_device': 25.0,
                                          'step_time': 0.2}
    assert steady_state(summaries[:1], 1) == {'samples_per_s': 10.0, 'samples_per_s_per_device': 10.0,
                                              'step_time': 2.0}
    # epochs that do not count steps (MNIST's) give no step time
    assert steady_state([{'samples': 60, 'seconds': 2.0}], 2) == {'samples_per_s': 30.0,
                                                                  'samples_per_s_per_device': 15.0}


def run_program(*args):
    env = {**os.environ, 'OMP_NUM_THREADS': '2'}
    for name in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_LOCALID'):
        env.pop(name, None)
    # the loader path without crops and flips, as these runs were measured (the check's defaults differ)
    done = subprocess.run([sys.executable, PROGRAM, '--model', 'resnet18', '--workers', '0', '--data', 'loader',
                           '--no-augment', *args],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return output.parse(done.stdout, labelled=False)


@pytest.mark.parametrize('mode', ['single', 'dp', 'ddp'])
def test_warmup_steps_are_not_timed_and_first_epoch_is_apart(mode):
    run = run_program('--synthetic', '--mode', mode, '--batch-size', '4', '--epochs', '3',
                      '--steps', '5', '--warmup-steps', '2')
    epochs = sorted(run.events('summary'), key=lambda s: s['epoch'])
    # the warm-up comes before epoch 1: every epoch times all of its steps
    assert [(e['samples'], e['steps']) for e in epochs] == [(20, 5), (20, 5), (20, 5)]
    result = run.result()
    steady = sum(e['samples'] for e in epochs[1:]) / sum(e['seconds'] for e in epochs[1:])
    assert result['samples_per_s'] == pytest.approx(steady)
    assert result['first_epoch_samples_per_s'] == pytest.approx(20 / epochs[0]['seconds'])
    assert result['samples_per_s_per_device'] == pytest.approx(result['samples_per_s'] / result['devices'])
    assert result['model_flops_per_s'] == pytest.approx(result['flops_per_sample'] * steady)
    # ResNet-18 at 32x32: ~0.07 GFLOP forward per image, about three times that with backward
    assert 1.5e8 < result['flops_per_sample'] < 3e8
    assert run.by_rank('done') and result['mode'] == mode


def test_warmup_longer_than_an_epoch_still_times_every_epoch(staged):
    """8 warm-up steps and epochs of 3 steps, as 48 steps per node at 16 nodes: epoch 1 used to
    time nothing (0 samples, nan loss), failing a healthy run."""
    run = run_program('--data-dir', str(staged), '--mode', 'single', '--batch-size', '32',
                      '--epochs', '2', '--steps', '3', '--warmup-steps', '8')
    epochs = sorted(run.events('summary'), key=lambda s: s['epoch'])
    assert [(e['samples'], e['steps']) for e in epochs] == [(96, 3), (96, 3)]
    assert all(math.isfinite(e['loss']) and e['seconds'] > 0 for e in epochs)


def test_timed_steps_are_one_nodes_pass_whatever_the_world_size():
    """By default an epoch is one node's pass over the data (real CIFAR-100 on LUMI: 50000
    images, 128 per GCD, 8 GCDs per node: 48 steps) at any node count; more ranks add passes."""
    assert steps_per_epoch(0, 50000, 128, ranks_per_node=8) == 48
    assert steps_per_epoch(7, 50000, 128, ranks_per_node=8) == 7


def test_a_set_too_small_for_one_step_is_a_one_line_error():
    with pytest.raises(SystemExit, match='10 samples make no step of 4 on each of 8 ranks per node: give --steps'):
        steps_per_epoch(0, 10, 4, ranks_per_node=8)


def test_program_reads_the_staged_set_and_the_loss_falls(staged):
    run = run_program('--data-dir', str(staged), '--mode', 'single', '--batch-size', '32',
                      '--epochs', '3', '--steps', '8', '--warmup-steps', '1')
    losses = [s['loss'] for s in sorted(run.events('summary'), key=lambda s: s['epoch'])]
    assert all(math.isfinite(l) for l in losses) and losses[-1] < losses[0]


def test_missing_data_is_a_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, PROGRAM, '--data-dir', str(tmp_path), '--mode', 'single'],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f'CIFAR-100 data not found: {tmp_path}/cifar-100-python does not exist (stage it, or use --synthetic)')


# --- sanity on a real run ---------------------------------------------------------------------

def test_real_cifar_run_is_sane(sim):
    assert judged(sim, saved(SIM_OUT), epochs=3, loss_must_fall=True) == []


def test_real_cifar_run_figures():
    run = output.read(os.path.join(DATA, SIM_OUT))
    result = run.result()
    assert result['samples_per_s_per_device'] == pytest.approx(result['samples_per_s'] / 4)
    assert result['world_size'] == 4 and result['model'] == 'resnet18'


def test_loss_that_does_not_fall_fails(sim):
    text = with_facts(saved(SIM_OUT), 'summary', loss=4.6)
    found = judged(sim, text, epochs=3, loss_must_fall=True)
    assert found == ['loss did not fall: 4.6000 in epoch 1, 4.6000 in epoch 3']


def test_nan_loss_fails(sim):
    text = with_facts(saved(SIM_OUT), 'summary',
                      change=lambda f: {**f, 'loss': float('nan')} if f['epoch'] == 3 else f)
    assert judged(sim, text, epochs=3, loss_must_fall=True) == ['loss is not finite in epoch(s) 3']


def test_rank_without_throughput_for_an_epoch_fails(sim):
    text = with_facts(saved(SIM_OUT), 'epoch', rank=2, change=lambda f: None if f['epoch'] == 2 else f)
    found = judged(sim, text, epochs=3, loss_must_fall=True)
    assert found == ['rank 2 reported throughput for epochs [1, 3], expected 1-3']


def test_rank_that_timed_nothing_fails(sim):
    text = with_facts(saved(SIM_OUT), 'epoch', rank=1,
                      change=lambda f: {**f, 'samples': 0} if f['epoch'] == 1 else f)
    found = judged(sim, text, epochs=3, loss_must_fall=True)
    assert found == ['rank 1 reported throughput for epochs [2, 3], expected 1-3']


def unblock_a_reader(fifo, done):
    """Open `fifo` for writing once a reader waits in open() (42e5ead's reader did: without this,
    the test would hang as every rank hung), then close it: that reader reads nothing."""
    while not done.wait(0.1):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            continue


@pytest.mark.parametrize('kind', ['fifo', 'link', 'too large'])
def test_a_dataset_file_that_would_hang_or_fill_memory_is_refused(staged, tmp_path, kind, monkeypatch):
    """Issue 48 item 7 (on 42e5ead a FIFO hung every rank, a link was followed anywhere, to
    /dev/zero too, filling the rank's memory, and a file was read whole before any check):
    one line, nothing read."""
    import shutil
    import threading
    root = tmp_path / 'data'
    shutil.copytree(staged, root)
    meta = root / 'cifar-100-python' / 'meta'
    shutil.move(meta, tmp_path / 'meta')
    done = threading.Event()
    if kind == 'fifo':
        os.mkfifo(meta, 0o644)
        threading.Thread(target=unblock_a_reader, args=(str(meta), done), daemon=True).start()
    elif kind == 'link':     # to the very file it should be, outside the dataset directory
        meta.symlink_to(tmp_path / 'meta')
    else:
        with open(meta, 'wb') as f:
            f.truncate(64_001)
    program = load_program('cifar/cifar_data.py')
    monkeypatch.delenv(program.TRUST_VARIABLE, raising=False)
    try:
        with pytest.raises(SystemExit, match=f'^CIFAR-100 file {meta} (is not a regular file|cannot be opened)'):
            program.StagedCIFAR100(str(root), train=False)
    finally:
        done.set()
