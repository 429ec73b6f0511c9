"""Recording references from a good run, on the real perf log of data/perflogs (see test_history)."""

import dataclasses
import fcntl
import os
import pathlib
import stat
import statistics
import threading

import pytest
import yaml

from command_line import one_line_error, run_main
from conftest import REPO, sha256
from mlcheck.commands import baseline
from mlcheck.history.samples import Sample
from perflogs import BASELINE, CAMPAIGN, SESSIONS, as_run, samples, spec, write_perflog

SIM_REFERENCES = f'{REPO}/config/references/sim.yaml'


def record(tmp_path, capsys, *args):
    return run_main(capsys, baseline.main, *args, '--references-dir', str(tmp_path))


def record_error(tmp_path, capsys, *args):
    """The one-line error with which mlcheck.commands.baseline refuses `args`."""
    return one_line_error(capsys, baseline.main, *args, '--references-dir', str(tmp_path))


def entry_of(path, nodes=1):
    return yaml.safe_load(path.read_text())['MNISTDistributedCheck']['sim:cluster']['host'][nodes]


def test_new_file_holds_the_medians_of_the_rates(tmp_path, capsys):
    code, out, _ = record(tmp_path, capsys, spec(BASELINE))
    assert code == 0 and f'references written: {tmp_path / "sim.yaml"}' in out
    median = {var: float(f'{statistics.median(s.value for s in samples(BASELINE) if s.var == var):.4g}')
              for var in ('samples_per_s', 'samples_per_s_per_gpu')}
    text = (tmp_path / 'sim.yaml').read_text()
    assert yaml.safe_load(text)['MNISTDistributedCheck']['$index'] == ['$partition', 'image', 'num_nodes']
    assert entry_of(tmp_path / 'sim.yaml') == {
        'samples_per_s': [median['samples_per_s'], -0.1, None, 'samples/s'],
        'samples_per_s_per_gpu': [median['samples_per_s_per_gpu'], -0.1, None, 'samples/s']}
    assert text.startswith(f'# baseline: sim:cluster MNISTDistributedCheck host 1 node(s): '
                           f'median of 5 run(s) of {spec(BASELINE)} (')


def test_existing_bounds_comments_and_other_entries_stay(tmp_path, capsys):
    (tmp_path / 'sim.yaml').write_text(open(SIM_REFERENCES).read())
    code, _, _ = record(tmp_path, capsys, spec(BASELINE), '--var', 'samples_per_s', '--var', 'train_time')
    assert code == 0
    text = (tmp_path / 'sim.yaml').read_text()
    assert text.startswith(open(SIM_REFERENCES).read().split('\nMNIST')[0])   # the comments
    entry = entry_of(tmp_path / 'sim.yaml')
    assert entry['samples_per_s'][1:] == [-0.5, None, 'samples/s']
    assert entry['train_time'][1:] == [None, 1.0, 's']
    configured = pathlib.Path(SIM_REFERENCES)
    # --var adds to the default set (once it replaced it): the per-GPU rate is recorded too, and a
    # variable the selection does not hold keeps its entry
    assert entry['samples_per_s_per_gpu'][0] != entry_of(configured)['samples_per_s_per_gpu'][0]
    assert entry['slowest_rank_fraction'] == entry_of(configured)['slowest_rank_fraction']
    assert entry_of(tmp_path / 'sim.yaml', nodes=2) == entry_of(configured, nodes=2)


def test_images_that_share_references_through_an_anchor_change_one_at_a_time(tmp_path, capsys):
    """sim.yaml gives every image the host's references with `*anchor`; recording the host's
    must leave the images' as they were."""
    (tmp_path / 'sim.yaml').write_text(open(SIM_REFERENCES).read())
    assert '*mnist' in open(SIM_REFERENCES).read()
    code, _, _ = record(tmp_path, capsys, spec(BASELINE), '--var', 'samples_per_s')
    assert code == 0
    written = yaml.safe_load((tmp_path / 'sim.yaml').read_text())['MNISTDistributedCheck']['sim:cluster']
    configured = yaml.safe_load(open(SIM_REFERENCES))['MNISTDistributedCheck']['sim:cluster']
    assert written['host'][1]['samples_per_s'] != configured['host'][1]['samples_per_s']
    assert written['torch-2.14.1'] == configured['torch-2.14.1']


def test_recording_again_replaces_its_own_provenance_line(tmp_path, capsys):
    record(tmp_path, capsys, spec(BASELINE))
    record(tmp_path, capsys, spec(BASELINE))
    assert (tmp_path / 'sim.yaml').read_text().count('# baseline: ') == 1


def test_dry_run_writes_nothing(tmp_path, capsys):
    code, out, _ = record(tmp_path, capsys, spec(BASELINE), '--dry-run')
    assert code == 0 and 'would be:' in out and 'samples_per_s: [' in out
    assert list(tmp_path.iterdir()) == []


def test_references_of_another_layout_are_left_alone(tmp_path, capsys):
    path = tmp_path / 'sim.yaml'
    path.write_text("MNISTDistributedCheck:\n  $index: ['$partition', 'num_tasks']\n")
    before = sha256(path)
    err = record_error(tmp_path, capsys, spec(BASELINE))
    assert "references of MNISTDistributedCheck are not indexed by ['$partition', 'image', " in err
    assert sha256(path) == before


def test_unreadable_references_are_left_alone(tmp_path, capsys):
    path = tmp_path / 'sim.yaml'
    path.write_text('MNISTDistributedCheck: [unclosed\n')
    before = sha256(path)
    assert f'references file {path} cannot be read' in record_error(tmp_path, capsys, spec(BASELINE))
    assert sha256(path) == before


def test_selection_without_rates(tmp_path, capsys):
    err = record_error(tmp_path, capsys, spec(BASELINE), '--var', 'bandwidth')
    assert 'holds no value of bandwidth' in err


def test_missing_perf_log(tmp_path, capsys):
    assert 'perf log not found: ' in record_error(tmp_path, capsys, CAMPAIGN + '.gone')


def test_tolerance_as_a_person_types_it(tmp_path, capsys):
    assert record(tmp_path, capsys, spec(BASELINE), '--tolerance', '15%')[0] == 0
    assert entry_of(tmp_path / 'sim.yaml')['samples_per_s'][1] == -0.15


@pytest.mark.parametrize('typed', ['-0.1', '10', '0', 'ten'])
def test_tolerance_that_is_no_bound_is_refused(tmp_path, capsys, typed):
    err = record_error(tmp_path, capsys, spec(BASELINE), '--tolerance', typed)
    assert f'--tolerance {typed}: expected a fraction between 0 and 1' in err
    assert list(tmp_path.iterdir()) == []


def test_runs_of_two_settings_make_no_reference(tmp_path, capsys):
    """3 and 10 epochs of one test in one selection: a median of both would be neither's."""
    mixed = write_perflog(tmp_path / 'mixed.log', as_run(samples(BASELINE), 'host', 1) +
                          as_run(samples(BASELINE), 'host', 1, settings='epochs=10'))
    refs = tmp_path / 'refs'
    code, _, err = record(refs, capsys, mixed)
    assert code == 2 and err.count('\n') == 1
    assert 'MNISTDistributedCheck host 1 node(s) on sim:cluster ran with 2 settings (epochs=10 | epochs=3)' in err
    assert not refs.exists()


def test_the_settings_are_written_beside_the_reference(tmp_path, capsys):
    log = write_perflog(tmp_path / 'one.log', as_run(samples(BASELINE), 'host', 1))
    refs = tmp_path / 'refs'
    assert record(refs, capsys, log)[0] == 0
    assert f'median of 5 run(s) of {log} (' in (refs / 'sim.yaml').read_text()
    assert ') with epochs=3\n' in (refs / 'sim.yaml').read_text()


def test_every_comment_of_the_real_references_file_is_kept(tmp_path, capsys):
    """Once every comment below the top (the interconnect's measurement note) was dropped."""
    original = open(SIM_REFERENCES).read()
    (tmp_path / 'sim.yaml').write_text(original)
    assert record(tmp_path, capsys, spec(BASELINE))[0] == 0
    written = (tmp_path / 'sim.yaml').read_text()
    comments = [line.strip() for line in original.splitlines() if line.strip().startswith('#')]
    assert comments and all(c in written for c in comments)
    # the checks the baseline did not touch keep their text, anchors included
    for check in ('CIFAR100ResNetCheck:', 'InterconnectCheck:'):
        block = original.split(check)[1].split('\n\n')[0]
        assert check + block in written
    assert yaml.safe_load(written)['InterconnectCheck'] == yaml.safe_load(original)['InterconnectCheck']


def test_a_file_read_and_written_unchanged_is_the_same_text():
    from mlcheck.files import Directory
    references, data = baseline.read_references(Directory(os.path.dirname(SIM_REFERENCES)),
                                                os.path.basename(SIM_REFERENCES))
    assert baseline.render(references, data) == open(SIM_REFERENCES).read()


def test_per_call_times_and_percentages_are_recorded_by_default(tmp_path, capsys):
    """The interconnect's latency (a per-call time) and busbw_of_limit (a percentage) were left
    out unless named, so a doubled latency passed; a run-length total still needs naming."""
    runs = [Sample('sim:cluster', 'InterconnectCheck %image=host %num_nodes=2', 'host', 2,
                   var, value, unit, 1.8e9 + i, settings='min_bytes=8')
            for i in range(3) for var, value, unit in (('busbw', 0.7 + i / 100, 'GB/s'),
                                                       ('latency', 1000 + i, 'us'),
                                                       ('busbw_of_limit', 78 + i, '%'))]
    runs += [dataclasses.replace(s, name=s.name.replace('Interconnect', 'MNISTDistributed'),
                                 var='train_time', unit='s') for s in runs[:1]]
    log = write_perflog(tmp_path / 'ic.log', runs)
    refs = tmp_path / 'refs'
    assert record(refs, capsys, log)[0] == 0
    written = yaml.safe_load((refs / 'sim.yaml').read_text())
    assert written['InterconnectCheck']['sim:cluster']['host'][2] == {
        'busbw': [0.71, -0.1, None, 'GB/s'], 'latency': [1001, None, 0.1, 'us'],
        'busbw_of_limit': [79, -0.1, None, '%']}
    assert 'MNISTDistributedCheck' not in written
    assert record(refs, capsys, log, '--var', 'train_time')[0] == 0
    assert 'train_time' in yaml.safe_load((refs / 'sim.yaml').read_text())['MNISTDistributedCheck']['sim:cluster']['host'][2]


def test_anchors_stay_where_the_written_values_do_not_differ(tmp_path, capsys):
    """Issue 30: one baseline expanded `host: &mnist` and its aliases into copies, so the next hand
    edit had to be made three times. The images whose values did not change keep sharing them."""
    (tmp_path / 'sim.yaml').write_text(open(SIM_REFERENCES).read())
    code, _, _ = record(tmp_path, capsys, spec(BASELINE), '--var', 'samples_per_s')
    text = (tmp_path / 'sim.yaml').read_text()
    assert code == 0
    # the host's entry changed: the two images still share theirs, under the file's anchor name
    assert 'torch-2.14.1: &mnist' in text and 'torch-2.9.1: *mnist' in text
    assert 'host: &cifar' in text and '&id0' not in text       # an untouched check keeps its text
    written = yaml.safe_load(text)['MNISTDistributedCheck']['sim:cluster']
    assert written['torch-2.14.1'] is written['torch-2.9.1']


def test_anchors_of_entries_all_unchanged_are_kept_on_their_first_entry(tmp_path, capsys):
    (tmp_path / 'sim.yaml').write_text(open(SIM_REFERENCES).read())
    code, _, _ = record(tmp_path, capsys, spec(BASELINE), '--var', 'samples_per_s', '-n', 'no such test')
    assert code == 2      # nothing recorded: the file as it was
    assert (tmp_path / 'sim.yaml').read_text() == open(SIM_REFERENCES).read()


def test_a_system_that_is_a_path_writes_nothing(tmp_path, capsys):
    """The system part of a perf log's partition goes into the file name: a path is refused."""
    outside = tmp_path / 'outside'
    hostile = [dataclasses.replace(s, partition=f'{outside}/x:cluster') for s in samples(BASELINE)]
    log = write_perflog(tmp_path / 'hostile.log', hostile)
    refs = tmp_path / 'refs'
    err = record_error(refs, capsys, log)
    assert f"system '{outside}/x' of the selection is not a plain name: no references written" in err
    assert not outside.exists() and not refs.exists()


def test_a_planted_link_beside_the_file_is_not_followed(tmp_path, capsys):
    """The old scratch name (sim.yaml.new) linked to a file elsewhere: that file stays as it was."""
    victim = tmp_path / 'victim'
    victim.write_text('mine\n')
    refs = tmp_path / 'refs'
    refs.mkdir()
    (refs / 'sim.yaml.new').symlink_to(victim)
    assert record(refs, capsys, spec(BASELINE))[0] == 0
    assert victim.read_text() == 'mine\n' and entry_of(refs / 'sim.yaml')


def test_the_file_keeps_its_mode_and_its_link(tmp_path, capsys):
    """A group-writable references file, reached through a link inside the references directory,
    under a private umask: it is replaced where the link points, the link stays, the mode stays
    0664; no scratch file is left."""
    refs = tmp_path / 'refs'
    shared = refs / 'project'
    shared.mkdir(parents=True)
    (shared / 'sim.yaml').write_text(open(SIM_REFERENCES).read())
    (shared / 'sim.yaml').chmod(0o664)
    (refs / 'sim.yaml').symlink_to('project/sim.yaml')
    old_umask = os.umask(0o077)
    try:
        assert record(refs, capsys, spec(BASELINE))[0] == 0
    finally:
        os.umask(old_umask)
    assert (refs / 'sim.yaml').is_symlink()
    assert stat.S_IMODE((shared / 'sim.yaml').stat().st_mode) == 0o664
    assert entry_of(shared / 'sim.yaml')['samples_per_s'][0] == entry_of(refs / 'sim.yaml')['samples_per_s'][0]
    assert sorted(p.name for p in shared.iterdir()) == ['sim.yaml']


@pytest.mark.parametrize('target', ['home/.bash_aliases', 'home/.bashrc'], ids=['dangling', 'existing'])
def test_a_references_link_out_of_the_directory_is_refused(tmp_path, capsys, target):
    """Issue 48 item 3 (failed on 42e5ead: the write went through a co-writer's link and created
    or replaced the runner's ~/.bash_aliases with keys from the perf log)."""
    home = tmp_path / 'home'
    home.mkdir()
    (home / '.bashrc').write_text('mine\n')
    refs = tmp_path / 'refs'
    refs.mkdir()
    (refs / 'sim.yaml').symlink_to(tmp_path / target)
    code, out, err = record(refs, capsys, spec(BASELINE))
    assert code == 2 and f'references file {refs / "sim.yaml"} is a link to {tmp_path / target}' in err
    assert sorted(p.name for p in home.iterdir()) == ['.bashrc'] and (home / '.bashrc').read_text() == 'mine\n'


def test_a_link_to_nothing_inside_the_directory_creates_nothing(tmp_path, capsys):
    refs = tmp_path / 'refs'
    refs.mkdir()
    (refs / 'sim.yaml').symlink_to('elsewhere.yaml')
    code, _, err = record(refs, capsys, spec(BASELINE))
    assert code == 2 and 'which is no file: no file is created through a link' in err
    assert sorted(p.name for p in refs.iterdir()) == ['sim.yaml']


def test_a_test_that_is_not_one_of_the_checks_writes_nothing(tmp_path, capsys):
    """Its name would become a top-level key of the references file (item 3)."""
    log = write_perflog(tmp_path / 'stranger.log', [
        dataclasses.replace(s, name=s.name.replace(s.check, 'Stranger')) for s in samples(BASELINE)])
    refs = tmp_path / 'refs'
    code, _, err = record(refs, capsys, log)
    assert code == 2 and "test 'Stranger' of the selection is not one of the checks" in err
    assert not refs.exists() or not list(refs.iterdir())


def test_a_lock_held_too_long_is_named(tmp_path, capsys, monkeypatch):
    """Item 6: a wait with a deadline, one line naming the lock (it waited for ever, silently)."""
    refs = tmp_path / 'refs'
    refs.mkdir()
    lock = os.open(refs / '.sim.yaml.lock', os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    monkeypatch.setattr(baseline, 'LOCK_WAIT_S', 0.3)
    try:
        code, _, err = record(refs, capsys, spec(BASELINE))
    finally:
        os.close(lock)
    assert code == 2 and f'the references lock {refs / ".sim.yaml.lock"} has been held by another process' in err
    assert stat.S_IMODE(os.stat(refs / '.sim.yaml.lock').st_mode) == 0o660


def test_a_concurrent_baseline_waits_for_the_lock(tmp_path, capsys):
    """While another baseline holds the system's lock, nothing is read or written."""
    refs = tmp_path / 'refs'
    refs.mkdir()
    lock = os.open(refs / '.sim.yaml.lock', os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    worker = threading.Thread(target=baseline.main, args=([spec(BASELINE), '--references-dir', str(refs)],))
    worker.start()
    worker.join(0.5)
    assert worker.is_alive() and not (refs / 'sim.yaml').exists()
    os.close(lock)
    worker.join(30)
    assert not worker.is_alive() and entry_of(refs / 'sim.yaml')


def test_a_system_the_config_lacks_writes_nothing(tmp_path, capsys):
    """A record from another site (a perf log copied over) names a system the config does not
    describe: refused, as no run here would read its references."""
    foreign = [dataclasses.replace(s, partition='elsewhere:cluster') for s in samples(BASELINE)]
    log = write_perflog(tmp_path / 'foreign.log', foreign)
    refs = tmp_path / 'refs'
    err = record_error(refs, capsys, log, '-C', f'{REPO}/config/simulated.py')
    assert "system 'elsewhere' of the selection is not a system of config " in err
    assert '(sim): no references written' in err and not refs.exists()


def test_figures_that_follow_the_machine_s_speed_are_written_at_the_file_s_speed(tmp_path, capsys):
    """Issue 38: a baseline of runs on a machine 1.25 times as fast as the one the file records
    (`$machine_speed`) wrote their rates as measured, so every later run was judged 25 % high.
    Now each value comes back from the speed its run recorded: rates at 1/1.25, times at 1.25
    times; a figure that does not follow the speed (a fraction) and a speedless run as measured."""
    (tmp_path / 'sim.yaml').write_text(open(SIM_REFERENCES).read())
    recorded = yaml.safe_load(open(SIM_REFERENCES).read())['$machine_speed']['steps_per_s']
    fast = 1.25 * recorded
    name = 'MNISTDistributedCheck %image=host %num_nodes=1'
    runs = [Sample('sim:cluster', name, 'host', 1, var, value, unit, 1.8e9 + i, settings='epochs=3',
                   machine_speed=fast)
            for i in range(3) for var, value, unit in (('samples_per_s', 1000.0, 'samples/s'),
                                                       ('train_time', 8.0, 's'),
                                                       ('slowest_rank_fraction', 0.9, 'fraction'))]
    code, out, _ = record(tmp_path, capsys, write_perflog(tmp_path / 'fast.log', runs), '--var', 'train_time')
    assert code == 0, out
    entry = entry_of(tmp_path / 'sim.yaml')
    assert entry['samples_per_s'][0] == 800 and entry['train_time'][0] == 10
    assert entry['slowest_rank_fraction'][0] == 0.9
    assert f"written at the file's {recorded} steps/s" in out and 'no recorded speed' not in out
    # the perf log reads the speed back (the line ReFrame writes holds it last)
    speedless = [dataclasses.replace(s, machine_speed=None, time=s.time + 100) for s in runs]
    code, out, _ = record(tmp_path, capsys, write_perflog(tmp_path / 'old.log', speedless), '--var', 'train_time')
    assert code == 0 and entry_of(tmp_path / 'sim.yaml')['samples_per_s'][0] == 1000
    assert '6 value(s) had no recorded speed' in out


def test_a_selection_with_a_failed_run_is_refused_unless_allowed(tmp_path, capsys):
    """Issue 49 (new-user trial): a failed repetition was recorded without a word, its passing
    repetitions becoming the references."""
    found = samples(BASELINE)
    failed = [dataclasses.replace(s, value=None, jobid='failed', time=s.time + 1) for s in found[:2]]
    log = write_perflog(tmp_path / 'with-failed.log', found + failed)
    err = record_error(tmp_path, capsys, log)
    assert "holds 1 failed run(s) of 1 test(s) (MNISTDistributedCheck" in err and '--allow-failed' in err
    assert not (tmp_path / 'sim.yaml').exists()
    code, out, _ = record(tmp_path, capsys, log, '--allow-failed')
    assert code == 0 and 'references written' in out


def test_a_reference_moving_more_than_its_noise_is_warned_of(tmp_path, capsys):
    """Issue 49: slowest_rank_fraction 0.95 -> 0.80 with 17 % noise was written without a word
    (here the quiet machine's baseline, 3.4 % noise, 30 % slower)."""
    found = samples(next(s for s in SESSIONS['quiet'] if s['kind'] == 'baseline2'))
    record(tmp_path, capsys, write_perflog(tmp_path / 'first.log', found))
    slower = [dataclasses.replace(s, value=0.7 * s.value) for s in found]
    code, out, _ = record(tmp_path, capsys, write_perflog(tmp_path / 'slower.log', slower))
    assert code == 0
    warned = [line for line in out.splitlines() if line.startswith('warning: the reference of ')]
    assert warned and all('(-30 %), more than 2 x its noise' in line for line in warned), out
    # recorded again unchanged: no warning
    code, out, _ = record(tmp_path, capsys, write_perflog(tmp_path / 'again.log', slower))
    assert code == 0 and 'warning' not in out
