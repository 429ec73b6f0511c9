"""The simulated partition's references follow the machine's speed (mlcheck.simulated.speed):
rates scale with it, times against it, everything else stays; and the judgement that follows
still fails a program that got slower while the machine did not."""

import json
import os
import stat

import pytest
import yaml
from hypothesis import given, settings, strategies as st
from reframe.core.exceptions import SanityError
from reframe.utility import sanity as sn

from conftest import REPO
from mlcheck.judging import references
from mlcheck.simulated import speed

SIM_REFERENCES = os.path.join(REPO, 'config', 'references', 'sim.yaml')
KEYS = {'$partition': 'sim:cluster', 'image': 'host', 'num_nodes': 1}


def write_references(path, recorded=50.0):
    path.write_text(yaml.safe_dump({
        '$machine_speed': {'steps_per_s': recorded, 'follow': ['samples_per_s', 'train_time']},
        'Check': {'$index': ['$partition', 'image', 'num_nodes'],
                  'sim:cluster': {'host': {1: {'samples_per_s': [1000, -0.5, None, 'samples/s'],
                                               'train_time': [4.0, None, 1.0, 's'],
                                               'peak_host_memory': [0.6, -0.5, 0.5, 'GB'],
                                               'communication_efficiency': [80, -0.5, None, '%']}}}},
    }))
    return str(path)


def test_rates_follow_the_speed_times_go_against_it_and_the_rest_stays(tmp_path):
    path = write_references(tmp_path / 'sim.yaml')
    half = references.at_machine_speed(path, 'Check', KEYS, 25.0)
    assert half == {'samples_per_s': (500.0, -0.5, None, 'samples/s'), 'train_time': (8.0, None, 1.0, 's'),
                    'peak_host_memory': (0.6, -0.5, 0.5, 'GB'), 'communication_efficiency': (80, -0.5, None, '%')}


def test_no_recorded_speed_or_no_entry_leaves_the_references_as_they_are(tmp_path):
    path = tmp_path / 'sim.yaml'
    write_references(path)
    plain = yaml.safe_load(path.read_text())
    del plain['$machine_speed']
    path.write_text(yaml.safe_dump(plain))
    assert references.at_machine_speed(str(path), 'Check', KEYS, 25.0) is None
    assert references.at_machine_speed(str(tmp_path / 'absent.yaml'), 'Check', KEYS, 25.0) is None
    assert references.at_machine_speed(write_references(tmp_path / 'x.yaml'), 'Check',
                                       {**KEYS, 'num_nodes': 8}, 25.0) is None


def test_the_simulated_references_record_their_speed_and_follow_only_the_training_rates():
    """Loopback bandwidth did not halve on the half-speed machine (the interconnect passed there),
    so it does not follow; every followed figure is a check's figure with a reference."""
    loaded = yaml.safe_load(open(SIM_REFERENCES))
    recorded = loaded['$machine_speed']
    assert recorded['steps_per_s'] > 0
    judged = {var for check, refs in loaded.items() if not check.startswith('$')
              for var in refs['sim:cluster']['host'][1]}
    assert set(recorded['follow']) <= judged
    assert not {'busbw', 'latency', 'slowest_pair_bw', 'busbw_of_limit'} & set(recorded['follow'])


def passes(value, reference):
    ref, lower, upper, _ = reference
    try:
        sn.evaluate(sn.assert_reference(value, ref, lower, upper))
        return True
    except SanityError:
        return False


@settings(max_examples=300, deadline=None)
@given(machine=st.floats(0.25, 4.0), noise=st.floats(0.7, 1.3), slowdown=st.floats(0.05, 0.45))
def test_healthy_runs_pass_at_any_speed_and_a_halved_program_fails(tmp_path_factory, machine, noise, slowdown):
    """Known truth: the machine runs `machine` times as fast as when the references were measured,
    and a run's figures are the references' times that, with `noise` of a healthy run; a
    program `slowdown` times as fast on the same machine (more than halved) must fail."""
    path = write_references(tmp_path_factory.mktemp('refs') / 'sim.yaml', recorded=50.0)
    scaled = references.at_machine_speed(path, 'Check', KEYS, 50.0 * machine)
    healthy_rate, healthy_time = 1000 * machine * noise, 4.0 / machine / noise
    assert passes(healthy_rate, scaled['samples_per_s']) and passes(healthy_time, scaled['train_time'])
    assert not passes(healthy_rate * slowdown / noise, scaled['samples_per_s'])
    assert not passes(healthy_time / slowdown * noise, scaled['train_time'])


def fake_python(tmp_path, prints):
    """An interpreter stand-in for `python -m mlcheck.simulated.speed` that prints `prints` and
    counts its calls in calls.txt."""
    script = tmp_path / 'python'
    script.write_text(f'#!/bin/sh\necho x >> {tmp_path}/calls.txt\necho {prints}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_a_recent_measurement_is_reused_and_an_old_one_measured_again(tmp_path):
    environ = {'XDG_CACHE_HOME': str(tmp_path)}
    python = fake_python(tmp_path, '42.5')
    assert speed.now(environ, python, clock=lambda: 1000.0) == 42.5
    assert speed.now(environ, python, clock=lambda: 1000.0 + speed.FRESH_S - 1) == 42.5
    assert len((tmp_path / 'calls.txt').read_text().split()) == 1
    assert json.loads((tmp_path / 'mlcheck' / speed.SPEED_FILE).read_text())['steps_per_s'] == 42.5
    assert speed.now(environ, python, clock=lambda: 1000.0 + speed.FRESH_S + 1) == 42.5
    assert len((tmp_path / 'calls.txt').read_text().split()) == 2


def test_a_failed_measurement_is_one_line_naming_it(tmp_path):
    python = tmp_path / 'python'
    python.write_text('#!/bin/sh\necho "ModuleNotFoundError: No module named torch" >&2\nexit 1\n')
    python.chmod(0o755)
    with pytest.raises(RuntimeError, match=r'measuring the machine speed \(.*\) failed: .*No module named torch'):
        speed.now({'XDG_CACHE_HOME': str(tmp_path)}, str(python))


def test_the_workload_measures_a_positive_rate():
    assert speed.measure(repeats=1, seconds=0.05) > 0


def test_the_speed_file_is_the_measuring_users_own(tmp_path, monkeypatch):
    """Issue 37 item 3: in the user's cache directory, not a shared one; a file there that another
    user owns is not read (measured again instead)."""
    environ = {'HOME': str(tmp_path)}
    assert speed.speed_file(environ) == str(tmp_path / '.cache' / 'mlcheck' / 'speed.json')
    python = fake_python(tmp_path, '42.5')
    assert speed.now(environ, python, clock=lambda: 1000.0) == 42.5
    assert speed.last(environ)['steps_per_s'] == 42.5
    assert stat.S_IMODE(os.stat(tmp_path / '.cache' / 'mlcheck').st_mode) & 0o077 == 0
    monkeypatch.setattr(os, 'getuid', lambda: os.stat(speed.speed_file(environ)).st_uid + 1)
    with pytest.raises(PermissionError):
        speed.last(environ)
    assert speed.now(environ, python, clock=lambda: 1001.0) == 42.5
    assert len((tmp_path / 'calls.txt').read_text().split()) == 2


def write_loader_references(path, loader=2000.0, job_then=20.0):
    path.write_text(yaml.safe_dump({
        '$machine_speed': {'steps_per_s': 50.0, 'follow': ['images_per_s'],
                           'follow_in_job': ['loader_images_per_s']},
        'Check': {'$index': ['$partition', 'image', 'num_nodes'],
                  'sim:cluster': {'host': {1: {'images_per_s': [100, -0.5, None, 'images/s'],
                                               'loader_images_per_s': [loader, -0.5, None, 'images/s'],
                                               'job_speed': [job_then, None, None, 'steps/s']}}}},
    }))
    return str(path)


def test_the_loader_follows_the_speed_read_in_its_job_the_training_the_runs(tmp_path):
    """Issue 38: the loader's reference follows the workload read in its own job beside it
    (src/pytorch/speed_workload.py, job_speed), the training figures the run's reading; without a
    reading in the job (or one recorded in the entry) the loader follows the run's as before."""
    path = write_loader_references(tmp_path / 'sim.yaml')
    scaled = references.at_machine_speed(path, 'Check', KEYS, 25.0, job_speed=10.0)
    assert scaled['images_per_s'][0] == 50.0 and scaled['loader_images_per_s'][0] == 1000.0
    assert scaled['job_speed'] == (20.0, None, None, 'steps/s')
    assert references.at_machine_speed(path, 'Check', KEYS, 25.0)['loader_images_per_s'][0] == 1000.0
    assert references.at_machine_speed(path, 'Check', KEYS, 100.0)['loader_images_per_s'][0] == 4000.0
    # a loader halved while the job's cores kept their speed fails; one that lost what the cores
    # lost passes
    busy = references.at_machine_speed(path, 'Check', KEYS, 50.0, job_speed=12.0)['loader_images_per_s']
    assert passes(2000.0 * 12 / 20 * 0.9, busy) and not passes(2000.0 * 12 / 20 * 0.45, busy)


def test_the_simulated_loader_references_record_the_speed_in_their_job():
    loaded = yaml.safe_load(open(SIM_REFERENCES))
    assert loaded['$machine_speed']['follow_in_job'] == ['loader_images_per_s']
    assert 'loader_images_per_s' not in loaded['$machine_speed']['follow']
    for entry in loaded['CIFAR100ResNetCheck']['sim:cluster']['host'].values():
        assert entry['job_speed'][0] > 0 and entry['job_speed'][1:3] == [None, None]
