"""Issue 48, the re-check's bypasses (/tmp/sec48 of the red team): records, files and links that
others write neither run code when a printed command is pasted, nor forge a line, nor write
outside where the user asked, nor stop or hang every report. Each test was seen failing on
8e9d6a4 first (tests/test_data_from_others.py holds the first round's)."""

import ctypes
import dataclasses
import json
import os
import random
import re
import shlex
import shutil
import signal
import sqlite3
import threading
import time

import pytest

from command_line import run_main
from mlcheck import REPO
from mlcheck.commands import baseline, nodes, report
from mlcheck.errors import ConfigError, InputError
from mlcheck.figures import stack
from mlcheck.history import hostlist
from mlcheck.history.perflog import read_perflog
from node_sessions import session
from mlcheck.history import cells
from perflogs import BASELINE, samples, write_perflog
from results_databases import new_session, store, sweep
from scenario_bank import Fault, build

CONFIG = os.path.join(REPO, 'config', 'simulated.py')

# a shell command after a `;`: run by whoever pastes the printed line
EVIL_IMAGE = '0;touch /tmp/mlcheck-pwned;'


def _upgrade_with_image(image):
    """Before and after of an upgrade whose nid001 got slower, its image named `image`."""
    before, after = build(random.Random(1), [Fault('node', 'nid001', 0.25)], noise=0.01, recorded=False)
    named = lambda s: dataclasses.replace(s, image=image, name=s.name.replace(s.image, image))
    return ([named(s) for s in before if s.var != cells.RANK_VAR],
            [named(s) for s in after if s.var != cells.RANK_VAR])


def test_a_separating_command_never_prints_an_image_that_the_shell_would_run(tmp_path, capsys):
    """Item 1: `-P image=0;touch ...;` was printed as it was stored."""
    before, after = _upgrade_with_image(EVIL_IMAGE)
    logs = [write_perflog(tmp_path / 'b.log', before), write_perflog(tmp_path / 'a.log', after)]
    _, out, _ = run_main(capsys, report.main, *logs)
    separating = [line.split('to separate them: ')[1] for line in out.splitlines() if 'to separate them: ' in line]
    assert separating, out
    for line in separating:
        assert 'touch' not in line.split(' (')[0] or 'no command printed' in line, line
        assert f"image {EVIL_IMAGE!r} of the data is not a plain name" in line, line


def test_a_separating_command_is_quoted_word_by_word(tmp_path, capsys):
    """A plain image still gets its command, which the shell splits into the words meant."""
    before, after = _upgrade_with_image('torch-2.12.0')
    logs = [write_perflog(tmp_path / 'b.log', before), write_perflog(tmp_path / 'a.log', after)]
    _, out, _ = run_main(capsys, report.main, *logs)
    [line] = [line.split('to separate them: ')[1] for line in out.splitlines() if 'to separate them: ' in line]
    command = shlex.split(line.split(' (')[0])
    assert command[:4] == ['reframe', '-c', 'checks/', '-r'] and 'image=torch-2.12.0' in command, line


# --- records from a results database that others write ---------------------------------------------

NOW = time.time()
GOOD, NEWER = new_session(), new_session()


@pytest.fixture(scope='module')
def stored(tmp_path_factory):
    """A database ReFrame wrote: one six-node sweep, and a newer one (two nodes) to spoil."""
    folder = tmp_path_factory.mktemp('stored')
    path, _ = store(folder, sweep(GOOD, NOW - 3600, (100.0, 101.0, 99.0, 100.5, 99.5, 100.2)),
                    sweep(NEWER, NOW - 60))
    os.remove(folder / '.db.lock')    # ReFrame's own, from writing
    return path


@pytest.fixture
def database(stored, tmp_path):
    path = tmp_path / 'results.db'
    shutil.copy(stored, path)
    return path


def changed(path, session, change, text=None):
    """The stored run report of `session` changed by change(report), or replaced by `text`."""
    with sqlite3.connect(path) as db:
        (blob,) = db.execute('SELECT json_blob FROM sessions WHERE uuid = ?', (session,)).fetchone()
        report = json.loads(blob)
        change(report)
        db.execute('UPDATE sessions SET json_blob = ? WHERE uuid = ?', (text or json.dumps(report), session))
    db.close()


FORGED = 'scontrol update NodeName=nid[001-999] State=RESUME'


def forge(report):
    """mk8.py's: each text field of each test case holding a line break, a tab or an escape."""
    for case in report['runs'][0]['testcases']:
        case['name'] += f'\n{FORGED}\n\tfake\x0bvt'
        case['fail_reason'] = 'sanity\tx\x1b]52;c;aWQ=\x07 tab'
        case['image'], case['partition'] = 'host\nIMAGE-LINE', 'cluster\nPART-LINE'
        case['software_stack'] = 'torch=1\n\x1b[31mRED'
        case['result'], case['fail_phase'] = 'fail', 'sanity'


def test_no_data_value_starts_a_line_of_any_output(database, tmp_path, capsys):
    """Item 2: a newline in a stored test name wrote a stand-alone RESUME line to stdout and nodes.md."""
    changed(database, NEWER, forge)
    code, out, err = run_main(capsys, nodes.main, 'latest', '--db', str(database), '-C', CONFIG,
                              '-o', str(tmp_path / 'out'))
    code2, out2, err2 = run_main(capsys, report.main, GOOD, 'latest', '--db', str(database), '-C', CONFIG,
                                 '-o', str(tmp_path / 'rep'))
    written = (tmp_path / 'out' / 'nodes.md').read_text() + (tmp_path / 'rep' / 'report.md').read_text()
    for text in (out, err, out2, err2, written):
        for line in text.splitlines():
            assert not line.lstrip('- *`').startswith((FORGED, 'PART-LINE', 'IMAGE-LINE', 'RED', 'fake')), line
        assert '\tfake' not in text and '\x1b' not in text
    assert '\\x0a' + FORGED in out + written      # said, escaped


# --- files written where the user asked, never through a link ---------------------------------------

class Hung(Exception):
    """Not an OSError (as TimeoutError is), which the code under test may catch and go on."""


def within(seconds, run):
    """run(), or Hung where it hangs past `seconds` (a FIFO opened for reading)."""
    def alarm(*_):
        raise Hung(f'hung for {seconds} s')
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        return run()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_report_files_are_never_written_through_a_planted_link(tmp_path, capsys):
    """Item 3: report.md, nodes.md and the PNGs went through links in -o DIR; a dangling one
    created its target."""
    before = samples(BASELINE)
    logs = [write_perflog(tmp_path / 'b.log', before), write_perflog(tmp_path / 'a.log', before)]
    out, victims = tmp_path / 'out', tmp_path / 'victims'
    out.mkdir(), victims.mkdir()
    (victims / 'kept').write_text('mine\n')
    (out / 'report.md').symlink_to(victims / 'kept')
    (out / 'scaling-sim-cluster-MNISTDistributedCheck.png').symlink_to(victims / 'made')
    (out / 'nodes.md').symlink_to(victims / 'made2')
    run_main(capsys, report.main, *logs, '-o', str(out))
    run_main(capsys, nodes.main, logs[1], '-o', str(out))
    assert sorted(p.name for p in victims.iterdir()) == ['kept'] and (victims / 'kept').read_text() == 'mine\n'
    assert not any(p.is_symlink() for p in out.iterdir())
    assert (out / 'report.md').read_text().startswith('# Performance')


def _refs_record(refs, capsys):
    from perflogs import BASELINE, spec
    return run_main(capsys, baseline.main, spec(BASELINE), '--references-dir', str(refs))


def test_a_references_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path, capsys):
    """Item 3: a FIFO named sim.yaml hung mlcheck-baseline for ever."""
    os.mkfifo(tmp_path / 'sim.yaml')
    code, out, err = within(10, lambda: _refs_record(tmp_path, capsys))
    assert code == 2 and 'is not a regular file' in err and err.count('\n') == 1, err


def test_a_references_lock_that_is_a_link_is_one_line(tmp_path, capsys):
    """Item 3: a co-writer's link at .sim.yaml.lock gave an internal error (ELOOP)."""
    (tmp_path / '.sim.yaml.lock').symlink_to(tmp_path / 'elsewhere')
    code, out, err = _refs_record(tmp_path, capsys)
    assert code == 2 and 'the references lock' in err and 'a link is not followed' in err, err
    assert not (tmp_path / 'elsewhere').exists()


def test_no_set_id_bit_of_the_old_file_is_copied(tmp_path, capsys):
    """Item 3: mode 6777 of a planted sim.yaml was given to the new file."""
    (tmp_path / 'sim.yaml').write_text('# references\n')
    os.chmod(tmp_path / 'sim.yaml', 0o6777)
    code, _, err = _refs_record(tmp_path, capsys)
    assert code == 0, err
    assert os.stat(tmp_path / 'sim.yaml').st_mode & 0o7000 == 0


def test_swapping_a_folder_for_a_link_mid_way_writes_nothing_outside(tmp_path, capsys):
    """Item 3: sim.yaml -> sub/sim.yaml with sub swapped (renameat2) between a real folder and a
    link out: the check passed on the folder, the write went through the link (4 in 30 runs)."""
    libc = ctypes.CDLL(None, use_errno=True)
    refs, outside = tmp_path / 'refs', tmp_path / 'outside'
    refs.mkdir(), outside.mkdir(), (refs / 'inner').mkdir()
    (refs / 'inner' / 'sim.yaml').write_text('{}\n')
    (refs / 'sim.yaml').symlink_to('sub/sim.yaml')
    (refs / 'sub').symlink_to(outside)
    os.rename(refs / 'inner', refs / 'real')
    (refs / 'sub').rename(refs / 'link')
    (refs / 'real').rename(refs / 'sub')      # sub: the real folder; link: the way out
    stop = threading.Event()

    def swap():
        while not stop.is_set():
            libc.renameat2(-100, str(refs / 'sub').encode(), -100, str(refs / 'link').encode(), 2)
    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        for _ in range(30):
            _refs_record(refs, capsys)
    finally:
        stop.set()
        swapper.join()
    assert list(outside.iterdir()) == []


# --- data that stopped or hung every report ---------------------------------------------------------

@pytest.mark.parametrize('spoil, said', [
    (lambda r: None, 'RecursionError'),           # the JSON text replaced: 100,000 lists deep
    (lambda r: r['runs'][0]['testcases'][0].update(num_nodes=float('inf')), 'OverflowError'),
], ids=['nested-json', 'num-nodes-infinity'])
def test_a_spoiled_newest_session_is_named_not_the_end_of_every_report(database, capsys, spoil, said):
    """Item 4: JSON nested deep (RecursionError) and `num_nodes: Infinity` (OverflowError) were
    internal errors of mlcheck-nodes, -report and -baseline."""
    text = '[' * 100_000 + ']' * 100_000 if said == 'RecursionError' else None
    changed(database, NEWER, spoil, text)
    code, out, err = run_main(capsys, nodes.main, 'latest', '--db', str(database), '-C', CONFIG)
    # named and left out, or, where it is the newest session, `latest` refused naming it (U1)
    assert 'internal error' not in err and said in err and ('left out' in err or code == 2), err
    code, out, err = run_main(capsys, report.main, GOOD, 'latest', '--db', str(database), '-C', CONFIG)
    assert 'internal error' not in err, err


def test_a_test_case_id_of_5000_digits_is_not_read(database, capsys):
    """Item 4: int() of a 5000-digit run index raised ValueError in a period's selection."""
    with sqlite3.connect(database) as db:
        db.execute("UPDATE testcases SET uuid = ? WHERE rowid = (SELECT max(rowid) FROM testcases)",
                   (f'{NEWER}:{"9" * 5000}:0',))
    db.close()
    day = time.strftime('%Y%m%d', time.localtime(NOW - 86400))
    code, out, err = run_main(capsys, nodes.main, f'{day}:now', '--db', str(database), '-C', CONFIG)
    assert 'internal error' not in err and code in (0, 1), err


def test_latest_never_means_an_older_session_than_the_newest(database, capsys):
    """Item 4 and the security red-team's U1: the newest session's unknown data_version (or
    JSON that cannot be read) made `latest` take the newest readable session silently: last
    week's sweep judged, a node that failed the newest resumed, exit 0. Refused in one line,
    naming why and the newest readable session's id, which selects it."""
    for breaks in (lambda r: r['session_info'].update(data_version='9.9'),
                   lambda r: r['session_info'].update(uuid='not-this-one')):
        changed(database, NEWER, breaks)
        code, out, err = run_main(capsys, nodes.main, 'latest', '--db', str(database), '-C', CONFIG)
        assert code == 2 and err.count('\n') == 1 and 'its newest session (row ' in err, err
        assert "never means an older one: give the newest readable session by its id" in err, err
        older = err.split('by its id (')[1].split(')')[0]
        code, out, err = run_main(capsys, nodes.main, older, '--db', str(database), '-C', CONFIG)
        assert code in (0, 1) and '6 node(s): 6 healthy' in out, err     # GOOD's sweep, six nodes


def test_a_host_list_of_20000_brackets_is_bad_input():
    """Item 4: `n` and 20,000 `[1]` exceeded the recursion limit of the expansion."""
    with pytest.raises(InputError, match='bad host name'):
        hostlist.expand('n' + '[1]' * 20_000)


def test_one_bad_node_list_leaves_out_its_record_not_the_sweep(tmp_path, capsys):
    """Item 4: one record's unreadable node list stopped mlcheck-nodes for every node; it is
    named and left out, no node resumed, and the exit status is not 0."""
    found = session(4, 0.01, {}, random.Random(1))
    bad = dataclasses.replace(found[0], nodelist='nid[1-' + '9' * 20 + ']', name=found[0].name)
    log = write_perflog(tmp_path / 'sweep.log', found + [bad])
    code, out, err = run_main(capsys, nodes.main, log)
    assert code == 1 and 'record left out' in err, err
    assert 'record(s) left out: their node lists cannot be read' in out and 'State=RESUME' not in out


@pytest.mark.parametrize('plant', ['fifo', 'zero', 'fifo-h1'])
def test_a_planted_perf_log_file_hangs_nothing(tmp_path, capsys, plant):
    """Item 4: a FIFO *.log, a *.log -> /dev/zero link, a FIFO *.log.h1 in a perf log
    directory hung every command."""
    found = session(4, 0.01, {}, random.Random(1))
    write_perflog(tmp_path / 'a.log', found)
    planted = tmp_path / ('a.log.h1' if plant == 'fifo-h1' else 'b.log')
    os.mkfifo(planted) if plant.startswith('fifo') else planted.symlink_to('/dev/zero')
    code, out, err = within(20, lambda: run_main(capsys, nodes.main, str(tmp_path)))
    assert code in (0, 1) and '4 node(s): 4 healthy' in out, err


def test_a_carriage_return_splits_no_perf_log_record(tmp_path):
    """Item 5: a text stream read \\r as a newline, so a record with one became two bad lines."""
    found = session(4, 0.01, {}, random.Random(1))[:2]
    odd = [dataclasses.replace(s, stack='torch=2.9\rfake') for s in found]
    path = write_perflog(tmp_path / 'cr.log', odd)
    left_out = []
    read = read_perflog(path, left_out=left_out, with_failed=True)
    assert left_out == [] and len(read) == len(odd)


def test_a_text_setting_with_a_control_character_is_refused():
    """Item 5: stack._clean let \\r and other control characters through in -S string values."""
    from types import SimpleNamespace
    with pytest.raises(ConfigError, match='control character'):
        stack.settings_of(SimpleNamespace(model='resnet\r50'), ['model'])
    assert '\r' not in stack.encode({'torch': '2.9\rx\x1b[2K'})


# --- ReFrame's perf log and its lock ------------------------------------------------------------------

def test_a_perf_log_or_lock_that_is_a_link_is_refused_and_our_old_lock_tightened(tmp_path):
    """Item 6: ReFrame opens the log and `.X.lock` following links (a co-writer's dangling lock
    link made root create a file outside); an old 0664 lock stayed 0664, held by anyone."""
    from mlcheck.harness.config import checked_perflog_files
    (tmp_path / '.X.lock').symlink_to(tmp_path / 'outside')
    with pytest.raises(ConfigError, match='is a symbolic link'):
        checked_perflog_files(str(tmp_path), 'X')
    (tmp_path / 'Y.log').symlink_to(tmp_path / 'outside.log')
    with pytest.raises(ConfigError, match='is a symbolic link'):
        checked_perflog_files(str(tmp_path), 'Y')
    (tmp_path / '.Z.lock').touch()
    os.chmod(tmp_path / '.Z.lock', 0o664)
    checked_perflog_files(str(tmp_path), 'Z')
    assert os.stat(tmp_path / '.Z.lock').st_mode & 0o777 == 0o660
    assert not (tmp_path / 'outside').exists()


@pytest.mark.parametrize('prepared, refused', [
    (lambda d: d.chmod(0o775), 'is writable by others (mode 775)'),       # a group's project folder
    (lambda d: d.chmod(0o1777), 'is writable by others (mode 1777)'),     # sticky, but the log's own
    (lambda d: os.chown(d, 65534, 65534), 'is owned by uid 65534'),      # another user's folder
    (lambda d: (d.chmod(0o755), d.parent.chmod(0o777)), 'is writable by others (mode 777)'),  # above
    (lambda d: d.chmod(0o755), None),
    (lambda d: (d.chmod(0o755), d.parent.chmod(0o1777)), None),          # below a sticky /tmp
])
def test_b9_a_perf_log_folder_others_can_change_is_refused_unless_trusted(tmp_path, prepared, refused):
    """Issue 48, B9: the check at setup races ReFrame's open at the performance stage (it follows
    links), so a folder another user can change is refused, up to /; a site that trusts its
    project group says so."""
    from mlcheck.harness.config import checked_perflog_files
    folder = tmp_path / 'top' / 'perflogs'
    folder.mkdir(parents=True)
    prepared(folder)
    try:
        if refused is None:
            checked_perflog_files(str(folder), 'X')
        else:
            with pytest.raises(ConfigError, match=re.escape(refused)) as err:
                checked_perflog_files(str(folder), 'X')
            assert 'trusts_perflog_writers' in str(err.value) and '\n' not in str(err.value)
            checked_perflog_files(str(folder), 'X', trusted=True)
    finally:
        folder.parent.chmod(0o755)


def test_the_perf_log_directory_is_where_reframe_writes(tmp_path):
    """The directory the check guards is the one ReFrame's filelog handler writes (its prefix and
    --perflogdir's basedir), read from a loaded site config."""
    from mlcheck.harness.config import perflog_directories
    from mlcheck.harness.reframe_api import runtime_for
    rt = runtime_for(CONFIG, 'sim')
    [directory] = perflog_directories(rt.site_config, rt.system.prefix, 'sim', 'cluster')
    assert directory.endswith('/sim/cluster') and os.path.isabs(directory)


# --- smaller residues ---------------------------------------------------------------------------------

def test_a_wal_database_gets_no_file_beside_it(database, capsys):
    """Item 7: read-only sqlite still made a -shm file beside a WAL-mode database (through a
    planted link too)."""
    with sqlite3.connect(database) as db:
        db.execute('PRAGMA journal_mode=WAL')
    db.close()
    assert database.read_bytes()[18:20] == b'\x02\x02'
    (database.parent / 'results.db-shm').symlink_to(database.parent / 'made')
    code, out, err = run_main(capsys, nodes.main, 'latest', '--db', str(database), '-C', CONFIG)
    assert code in (0, 1), err
    assert sorted(p.name for p in database.parent.iterdir()) == ['results.db', 'results.db-shm']
    assert not (database.parent / 'made').exists()


def test_a_digits_only_selection_says_which_session_it_took(database, capsys):
    """Item 7: `mlcheck-nodes 20261127`, a date without its :END, silently took a session whose
    id starts with those digits."""
    digits = '20261127' + NEWER[8:]
    changed(database, NEWER, lambda r: r['session_info'].update(uuid=digits))
    with sqlite3.connect(database) as db:
        db.execute('UPDATE sessions SET uuid = ? WHERE uuid = ?', (digits, NEWER))
    db.close()
    code, out, err = run_main(capsys, nodes.main, '20261127', '--db', str(database), '-C', CONFIG)
    assert f"selection '20261127' (digits only) is taken as the start of session {digits}" in err, err


def test_a_huge_bad_host_name_is_said_in_a_short_line():
    """Item 7: the bad-host-name error printed a 10 MB name."""
    with pytest.raises(InputError) as refused:
        hostlist.checked('x;' * 5_000_000, 'somewhere')
    assert len(str(refused.value)) < 300


def test_up_removes_the_old_lock_file_only_where_it_is_ours(tmp_path):
    """Item 7: /run/lock/simslurm.lock of before issue 48 stayed."""
    from mlcheck.simulated.simslurm import remove_old_lock
    old = tmp_path / 'simslurm.lock'
    old.touch()
    assert remove_old_lock(str(old)) and not old.exists()
    old.symlink_to(tmp_path / 'elsewhere')
    (tmp_path / 'elsewhere').touch()
    assert not remove_old_lock(str(old)) and old.is_symlink()


# --- the security re-read's bypasses (B-items of /tmp/sec-48), each seen failing on 3b38536 first ---

def _sweep_directory(tmp_path):
    """A perf log directory holding one healthy four-node sweep: its folder and the log."""
    logs = tmp_path / 'logs'
    logs.mkdir()
    return logs, write_perflog(logs / 'sweep.log', session(4, 0.01, {}, random.Random(1)))


def test_a_perflog_file_name_with_a_newline_forges_no_line(tmp_path, capsys):
    """B1: file names holding '\\n' (one with a bad line, a FIFO) printed their own stand-alone
    `scontrol update` lines on stderr and in nodes.md."""
    logs, good = _sweep_directory(tmp_path)
    header = open(good).readline()
    (logs / f'x\n{FORGED}\n.log').write_text(header + 'a|b\n')
    os.mkfifo(logs / 'y\nscontrol update NodeName=ALL State=DRAIN\n.log')
    code, out, err = within(20, lambda: run_main(capsys, nodes.main, str(logs), '-o', str(tmp_path / 'out')))
    code2, out2, err2 = within(20, lambda: run_main(capsys, report.main, str(logs), good,
                                                    '-o', str(tmp_path / 'rep')))
    written = ''.join(p.read_text() for p in (tmp_path / 'out' / 'nodes.md', tmp_path / 'rep' / 'report.md')
                      if p.exists())
    assert 'internal error' not in err + err2, err + err2
    for text in (out, err, out2, err2, written):
        for line in text.splitlines():
            assert not line.lstrip('- *`').startswith(('scontrol update NodeName=nid[001',
                                                       'scontrol update NodeName=ALL', '.log')), line
    assert f'x\\x0a{FORGED}\\x0a.log:2' in err and f'x\\x0a{FORGED}\\x0a.log:2' in written   # named, escaped
    assert 'y\\x0ascontrol update NodeName=ALL State=DRAIN\\x0a.log is not read' in err + err2


def test_a_perflog_directory_nested_1500_deep_is_searched_to_a_depth_and_says_so(tmp_path, capsys):
    """B2: 1,500 nested folders gave RecursionError (os.walk) in every report."""
    logs, good = _sweep_directory(tmp_path)
    deep = logs
    for _ in range(1500):
        deep = deep / 'd'
        os.mkdir(deep)
    try:
        code, out, err = run_main(capsys, nodes.main, str(logs))
    finally:
        while deep != logs:       # from the bottom: shutil.rmtree (pytest's clean-up) recurses
            os.rmdir(deep)
            deep = deep.parent
    assert code in (0, 1) and '4 node(s): 4 healthy' in out, err
    assert 'internal error' not in err and 'not searched' in err and len(err) < 2000, err


@pytest.mark.parametrize('content', ['', 'hello\n', 'SQLite format 3\0\n'], ids=['empty', 'foreign', 'database'])
def test_one_foreign_perflog_in_a_directory_is_left_out_not_the_end_of_every_report(tmp_path, capsys, content):
    """B5: an empty or foreign *.log in a perf log directory stopped every report (exit 2); given
    alone, it is still refused in one line."""
    logs, good = _sweep_directory(tmp_path)
    (logs / 'zz.log').write_text(content)
    code, out, err = run_main(capsys, nodes.main, str(logs))
    assert code in (0, 1) and '4 node(s): 4 healthy' in out, err
    assert f'{logs / "zz.log"}' in err and 'left out' in err, err
    code, out, err = run_main(capsys, report.main, str(shutil.copy(good, tmp_path / 'before.log')), str(logs))
    assert code in (0, 1) and 'error' not in err, err     # (the same records twice are refused)
    code, out, err = run_main(capsys, nodes.main, str(logs / 'zz.log'))
    assert code == 2 and err.count('\n') == 1 and 'zz.log' in err, err


@pytest.mark.parametrize('field, value, said', [
    ('name', 123, 'its name is int'), ('system', ['x'], 'its system is list'),
    ('partition', None, 'its partition is NoneType'),
    ('job_completion_time_unix', 'x', "its job_completion_time_unix 'x' is not a finite number"),
    ('job_completion_time_unix', float('inf'), 'its job_completion_time_unix inf is not a finite number'),
    ('perfvalues', {'sim:cluster:samples_per_s': [1.0, 'x', None, None, 'u']},
     "its sim:cluster:samples_per_s reference 'x' is not a finite number"),
    ('perfvalues', {'sim:cluster:samples_per_s': [1.0, 1.0, None, None, 5]},
     'its sim:cluster:samples_per_s unit is int'),
], ids=['name', 'system', 'partition', 'time-text', 'time-inf', 'reference-text', 'unit-number'])
def test_a_database_test_case_of_a_wrong_type_is_named_and_left_out(database, tmp_path, capsys, field, value, said):
    """B3: `name: 123` or `job_completion_time_unix: "x"` in the newest session gave internal
    errors (exit 3) in mlcheck-nodes, -report and -baseline."""
    changed(database, NEWER, lambda r: r['runs'][0]['testcases'][0].update({field: value}))
    code, out, err = run_main(capsys, nodes.main, 'latest', '--db', str(database), '-C', CONFIG)
    assert 'internal error' not in err and 'left out' in err and said in err, err
    code, out, err = run_main(capsys, report.main, GOOD, 'latest', '--db', str(database), '-C', CONFIG)
    assert 'internal error' not in err and 'left out' in err, err
    code, out, err = run_main(capsys, baseline.main, 'latest', '--db', str(database), '-C', CONFIG,
                              '--references-dir', str(tmp_path), '--dry-run')
    assert 'internal error' not in err, err


def test_the_causes_separating_command_excludes_no_node_named_like_the_partition(tmp_path, capsys):
    """B10: nid001 renamed `cluster` (the records' partition) passed as `-J exclude=cluster`,
    which Slurm may read as every node of the partition."""
    before, after = build(random.Random(1), [Fault('node', 'nid001', 0.25)], noise=0.01, recorded=False)
    named = lambda s: dataclasses.replace(s, nodelist=s.nodelist.replace('nid001', 'cluster'))
    logs = [write_perflog(tmp_path / 'b.log', [named(s) for s in before if s.var != cells.RANK_VAR]),
            write_perflog(tmp_path / 'a.log', [named(s) for s in after if s.var != cells.RANK_VAR])]
    _, out, _ = run_main(capsys, report.main, *logs)
    assert 'node cluster' in out, out          # the data names it as the likely cause
    assert 'exclude=cluster' not in out and 'nodelist=cluster' not in out, out
    assert "'cluster' is a partition's name" in out, out


def test_a_rewritten_baseline_references_file_keeps_no_execute_nor_other_write_bit(tmp_path, capsys):
    """B11: a co-writer's sim.yaml of mode 4777 was rewritten -rwxrwxrwx."""
    (tmp_path / 'sim.yaml').write_text('# references\n')
    os.chmod(tmp_path / 'sim.yaml', 0o4777)
    code, _, err = _refs_record(tmp_path, capsys)
    assert code == 0, err
    assert os.stat(tmp_path / 'sim.yaml').st_mode & 0o7777 == 0o664


def _laughs(levels=10):
    """A 'billion laughs' references file: each level ten aliases of the level above."""
    return 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n' + ''.join(
        f'a{n}: &a{n} [{", ".join([f"*a{n - 1}"] * 10)}]\n' for n in range(1, levels))


@pytest.mark.parametrize('text, said', [
    (_laughs(), 'values, more than 100,000: refused, not built'),
    ('a: &a [x, *a]\n', 'an alias inside its own anchor'),
    ('[' * 5000 + ']' * 5000 + '\n', 'cannot be read'),
    ('{}\n', 'cannot rewrite it keeping its text'),
], ids=['billion-laughs', 'recursive', 'nested', 'flow-mapping'])
def test_a_baseline_references_file_of_aliases_or_odd_yaml_is_refused_in_one_line(tmp_path, capsys, text, said):
    """B8: a 702-byte references file of nested aliases hung mlcheck-baseline, memory growing; a
    file of `{}` alone was an internal error (ParserError of the rewritten text)."""
    (tmp_path / 'sim.yaml').write_text(text)
    code, out, err = within(20, lambda: _refs_record(tmp_path, capsys))
    assert code == 2 and err.count('\n') == 1 and said in err, err
    assert (tmp_path / 'sim.yaml').read_text() == text


def test_b4_a_test_named_longer_than_a_file_name_still_gets_its_verdict_and_files(tmp_path, capsys):
    """Issue 48, B4: a test whose image is a long path made `-o` fail with ENAMETOOLONG (the
    plots are named after the test) before the verdict was printed. The names are cut short
    with a digest; both commands print their verdict and write their files."""
    image = '/proj/images/' + 'a-very-long-directory-name/' * 12 + 'torch.sif'
    long = lambda found: [dataclasses.replace(s, name=s.name.replace('%image=host', f'%image={image}'),
                                              image=image) for s in found]
    swept = long(session(8, 0.01, {}, random.Random(1)))
    code, out, err = run_main(capsys, nodes.main, str(write_perflog(tmp_path / 'sweep.log', swept)),
                              '-o', str(tmp_path / 'vet'))
    assert code == 0 and 'healthy (8)' in out and 'summary: ' in out, (out, err)
    assert all(len(name) <= 255 for name in os.listdir(tmp_path / 'vet'))
    before, after = (long(side) for side in build(random.Random(2), [], repetitions=(2, 2)))
    code, out, err = run_main(capsys, report.main, str(write_perflog(tmp_path / 'b.log', before)),
                              str(write_perflog(tmp_path / 'a.log', after)), '-o', str(tmp_path / 'report'))
    assert code in (0, 1) and 'report.md' in out, (out, err)
    assert all(len(name) <= 255 for name in os.listdir(tmp_path / 'report'))


# --- B6: a total byte budget for a selection's perf logs ---------------------------------------------

def _over_budget_said(err, logs):
    return err.count('\n') == 1 and f'perf logs {logs}' in err and 'bytes' in err and 'budget' in err


def test_b6_perf_logs_past_the_byte_budget_are_refused_in_one_line_by_every_command(tmp_path, capsys, monkeypatch):
    """Issue 48, B6: each perf log was read up to 4 GiB, but a directory of many had no bound in
    all, so a colleague's huge files stalled or exhausted every report. Past the budget (lowered
    here to the directory's bytes less one) each command refuses in one line (exit 2) naming the
    directory, its bytes and the budget; nothing is judged on part of the logs."""
    from mlcheck.history import perflog
    logs, good = _sweep_directory(tmp_path)
    write_perflog(logs / 'other.log', session(4, 0.01, {}, random.Random(2)))
    total = sum(p.stat().st_size for p in logs.iterdir())
    monkeypatch.setattr(perflog, 'PERFLOG_BUDGET_BYTES', total - 1, raising=False)
    for command, *more in [(nodes.main,), (report.main, good), (baseline.main, '-C', CONFIG, '--dry-run',
                                                               '--references-dir', str(tmp_path))]:
        code, out, err = run_main(capsys, command, str(logs), *more)
        assert code == 2 and _over_budget_said(err, logs) and f'{total:,} bytes' in err, (command, err)
        assert 'subfolder' in err, err
    monkeypatch.setattr(perflog, 'PERFLOG_BUDGET_BYTES', total)
    code, out, err = run_main(capsys, nodes.main, str(logs))
    assert code in (0, 1) and '4 node(s): 4 healthy' in out, err


def test_b6_the_budget_is_counted_before_anything_is_read(tmp_path, capsys):
    """At the real budget, sparse perf logs of 1.5 GiB each (no block written, each under the
    4 GiB one file may hold) are refused at once: sizes are added up before any file is read."""
    from mlcheck.history import perflog
    logs, good = _sweep_directory(tmp_path)
    header = open(good).readline()
    count = perflog.PERFLOG_BUDGET_BYTES // (3 << 29) + 1
    for n in range(count):
        with open(logs / f'huge{n}.log', 'w') as f:
            f.write(header)
            f.truncate(3 << 29)
    code, out, err = within(10, lambda: run_main(capsys, nodes.main, str(logs)))
    assert code == 2 and _over_budget_said(err, logs), err


def test_b6_a_perf_log_that_grows_after_the_count_is_refused_not_read_in_part(tmp_path, capsys, monkeypatch):
    """A log that a co-writer grows (or swaps) between the count and its read does not pass the
    budget either: the reading stops the selection in one line, judging nothing."""
    from mlcheck.history import perflog
    logs, good = _sweep_directory(tmp_path)
    write_perflog(logs / 'other.log', session(4, 0.01, {}, random.Random(2)))
    total = sum(p.stat().st_size for p in logs.iterdir())
    monkeypatch.setattr(perflog, 'PERFLOG_BUDGET_BYTES', total - 1)
    monkeypatch.setattr(perflog, '_regular_size', lambda path: 1)     # counted small, read large
    code, out, err = run_main(capsys, nodes.main, str(logs))
    assert code == 2 and _over_budget_said(err, logs), err


# --- the checks' own read of the references file (mlcheck.judging.references) ------------------------

REFERENCES = """\
Check:
  $index: [$partition, image, num_nodes]
  sim:cluster:
    host:
      1:
        samples_per_s: [100.0, -0.1, null, samples/s]
"""
REFERENCE_KEYS = {'$partition': 'sim:cluster', 'image': 'host', 'num_nodes': 1}


def _judged(path):
    from mlcheck.judging import references
    return references.unjudged(str(path), 'Check', REFERENCE_KEYS, ['samples_per_s'])


def test_a_references_file_swapped_for_a_fifo_after_its_check_hangs_no_test(tmp_path, monkeypatch):
    """Issue 48: references._load checked isfile() then open()ed the name, so a co-writer who
    swapped the file for a FIFO in between hung the test (here the swap is made by answering the
    check as the regular file would). It is opened non-blocking, without following a link, and
    refused in one line unless a regular file."""
    from mlcheck.judging import references
    os.mkfifo(tmp_path / 'sim.yaml')
    monkeypatch.setattr(references.os.path, 'isfile', lambda path: True)
    with pytest.raises(InputError, match='is not a regular file') as err:
        within(10, lambda: _judged(tmp_path / 'sim.yaml'))
    assert '\n' not in str(err.value)


@pytest.mark.parametrize('target', ['absolute', 'dotdot'])
def test_a_references_link_out_of_its_directory_is_refused_not_read(tmp_path, target):
    """Issue 48, item 3's rule on the checks' side: `sim.yaml` a link to a file outside the
    references directory was read (and judged by); now refused in one line."""
    refs, outside = tmp_path / 'refs', tmp_path / 'outside.yaml'
    refs.mkdir()
    outside.write_text(REFERENCES)
    (refs / 'sim.yaml').symlink_to(outside if target == 'absolute' else '../outside.yaml')
    with pytest.raises(InputError, match='is a link to .*outside') as err:
        _judged(refs / 'sim.yaml')
    assert '\n' not in str(err.value)


def test_a_references_link_inside_its_directory_is_followed_and_an_absent_file_is_none(tmp_path):
    from mlcheck.judging import references
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / 'real.yaml').write_text(REFERENCES)
    (tmp_path / 'sim.yaml').symlink_to('sub/real.yaml')
    assert _judged(tmp_path / 'sim.yaml') is None           # every figure judged
    assert _judged(tmp_path / 'absent.yaml')[1].startswith('no references file')
    assert references.at_machine_speed(str(tmp_path / 'absent' / 'x.yaml'), 'Check', REFERENCE_KEYS, 1.0) is None


def test_a_references_link_out_of_its_directory_fails_the_checks_at_setup_in_one_line(tmp_path):
    """The checks handed ReFrame the references file by name (`$ref`), which it opens following
    a link: one out of the references directory was read and judged by. Now each test fails at
    setup saying why (at init, ReFrame would drop the tests and pass an empty session)."""
    from reframe_runner import report_cases, run_reframe
    refs = tmp_path / 'refs'
    refs.mkdir()
    (tmp_path / 'outside.yaml').write_text(open(os.path.join(REPO, 'config', 'references', 'sim.yaml')).read())
    (refs / 'sim.yaml').symlink_to('../outside.yaml')
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-n', 'MNIST', '-P', 'image=host',
                       '-P', 'num_nodes=1', env={'MLCHECK_REFERENCES_DIR': str(refs)}, judged=False)
    assert done.returncode != 0 and 'Traceback' not in done.stdout + done.stderr, done.stdout
    failures = {(case['fail_phase'], case['fail_reason']) for case in report_cases(tmp_path / 'rfm')}
    assert failures == {('setup', f'config error: references file {refs / "sim.yaml"} is a link to '
                                  f'../outside.yaml, outside {refs}: not followed, no references read '
                                  'or written; replace the link with the file')}, failures


# --- ReFrame's results database lock ---------------------------------------------------------------

def test_the_results_database_lock_is_no_link_and_ours_is_held_by_owner_and_group_only(tmp_path):
    """ReFrame stores each session under `.db.lock` beside the database (fasteners, opened 'a+'
    following links, created with the database's mode, 644 by default): anyone who can read it can
    flock() it and stall every session's end without a word, and a link there is followed. At
    setup a link is replaced by a lock of ours (the store at the session's end would follow it,
    whatever the tests did) and refused in one line; a lock of ours (old, or made here where
    there is none) is brought to 0660."""
    from mlcheck.harness.config import checked_database_lock
    db = tmp_path / 'db' / 'results.db'
    db.parent.mkdir()
    (db.parent / '.db.lock').symlink_to(tmp_path / 'outside')
    with pytest.raises(ConfigError, match='was a symbolic link .* replaced by a lock of ours') as err:
        checked_database_lock(str(db))
    assert '\n' not in str(err.value) and not (tmp_path / 'outside').exists()
    assert not (db.parent / '.db.lock').is_symlink()
    assert os.stat(db.parent / '.db.lock').st_mode & 0o777 == 0o660
    os.chmod(db.parent / '.db.lock', 0o644)
    checked_database_lock(str(db))
    assert os.stat(db.parent / '.db.lock').st_mode & 0o777 == 0o660
    _store_lock_taken(db)                              # as ReFrame stores a session
    assert not (tmp_path / 'outside').exists()
    fresh = tmp_path / 'new' / 'results.db'           # no database yet: the lock is made ours
    checked_database_lock(str(fresh))
    assert os.stat(fresh.parent / '.db.lock').st_mode & 0o777 == 0o660


def _store_lock_taken(db):
    """ReFrame's lock on the database `db` taken and let go, as its storage takes it to store a
    session (reframe.utility.osext.ReadWriteFileLock, the database's default mode 644)."""
    from reframe.utility.osext import ReadWriteFileLock
    with ReadWriteFileLock(str(db.parent / '.db.lock'), 0o644).write_lock():
        pass


def test_reframes_store_opens_a_database_lock_link(tmp_path):
    """Why the link is replaced: ReFrame's lock, taken with no check before, creates the link's
    target (here as the runner; root's on a shared node)."""
    (tmp_path / '.db.lock').symlink_to(tmp_path / 'made')
    _store_lock_taken(tmp_path / 'results.db')
    assert (tmp_path / 'made').exists()


def test_a_database_lock_link_is_replaced_at_the_checks_setup(tmp_path):
    """In a ReFrame session (a dry run: it stores nothing, so the link's effect is shown in
    the test above), each check's setup replaces a co-writer's `.db.lock` link beside the
    results database before the session's end would store through it, and fails in one line."""
    from reframe_runner import report_cases, run_reframe
    prefix, outside = tmp_path / 'rfm', tmp_path / 'outside'
    prefix.mkdir()
    (prefix / '.db.lock').symlink_to(outside)
    done = run_reframe('simulated', prefix, '--dry-run', '-n', 'MNIST', '-P', 'image=host',
                       '-P', 'num_nodes=1', judged=False)
    assert not outside.exists() and not (prefix / '.db.lock').is_symlink(), done.stdout
    assert os.stat(prefix / '.db.lock').st_mode & 0o777 == 0o660
    reasons = {case['fail_reason'] for case in report_cases(prefix)}
    assert reasons == {f'config error: results database lock {prefix / ".db.lock"} was a symbolic link '
                       f'to {outside}, which ReFrame would open following it: replaced by a lock of '
                       'ours; not run'}, reasons


def test_node_lists_longer_than_their_jobs_are_not_expanded(tmp_path, capsys):
    """The security red-team's U2: 270 records of a 90 KB perf log, each naming a different
    100,000 nodes, held mlcheck-report at 3.7 GB for over 10 minutes (each list was within the
    per-list bound, nothing bounded them together). A record's list names at most its job's
    nodes: such a record is named and left out at once, the others judged."""
    found = session(4, 0.01, {}, random.Random(1))
    hostile = [dataclasses.replace(found[0], nodelist=f'x{i}n[00000-99999]', jobid=str(90000 + i))
               for i in range(5)]
    log = write_perflog(tmp_path / 'sweep.log', found + hostile)
    code, out, err = within(30, lambda: run_main(capsys, nodes.main, log))
    assert code == 1 and "names more than 1 hosts (its job's num_nodes is 1)" in err, err
    assert '4 node(s)' in out and 'State=RESUME' not in out, out
    code, out, err = within(30, lambda: run_main(capsys, report.main, str(shutil.copy(log, tmp_path / 'copy.log')), log))
    # the test whose records the node-list budget took is not judged, never a pass (fourth pass, G1)
    assert code == 2 and 'NOT JUDGED: MNISTDistributedCheck' in out and 'internal error' not in err, (out, err)
    # ... and records whose num_nodes claims them (the re-check's R2: 20 of a different 100,000
    # each ran out of memory): past 300,000 names together the longest lists are left out,
    # named, the other records judged (the third pass: refusing the selection stopped every
    # DRAIN line of a shared perf log)
    claimed = [dataclasses.replace(s, num_nodes=100_000) for s in hostile * 4]
    claimed = [dataclasses.replace(s, nodelist=f'y{i}n[00000-99999]') for i, s in enumerate(claimed)]
    log = write_perflog(tmp_path / 'claimed.log', found + claimed)
    for main, argv in ((nodes.main, [log]), (report.main, [str(shutil.copy(log, tmp_path / 'c.log')), log])):
        code, out, err = within(30, lambda: run_main(capsys, main, *argv))
        assert code == (2 if main is report.main else 1), (out, err)
        assert '18 record(s) of 18 node list(s) naming 1,800,000 hosts left out' in err, err
        assert 'internal error' not in err and 'State=RESUME' not in out, out


def test_an_unreadable_failed_record_resumes_no_node(tmp_path, capsys):
    """The security re-check's N2: a failed pair run on nid001-002 whose line is garbled
    (num_nodes 'two') was left out and every node resumed, exit 1. Its nodes are unknown: no
    RESUME line, as for an unreadable node list."""
    from test_nodes import LINKS, NODES16, NOV, run_of_sweep, slurm_states
    found = run_of_sweep(NODES16[:8], NOV[24])
    pair = dataclasses.replace(found[0], name=LINKS.replace('=1', '=2'), num_nodes=2,
                               nodelist='nid[001-002]', value=None, result='fail', time=found[-1].time + 60)
    log = write_perflog(tmp_path / 'sweep.log', found + [pair])
    text = open(log).read().splitlines()
    text[-1] = text[-1].replace('|host|2|4|', '|host|two|4|')
    open(log, 'w').write('\n'.join(text) + '\n')
    drained = {n: ('IDLE+DRAIN', 'upgrade 2026-11', '2026-11-24T07:00:00') for n in NODES16[:8]}
    (tmp_path / 'states.txt').write_text(slurm_states(NODES16[:8], drained))
    code, out, err = run_main(capsys, nodes.main, log, '--slurm-states', str(tmp_path / 'states.txt'),
                              '--slurm-tz', 'UTC', '--resume-reason', 'upgrade 2026-11')
    assert code == 1 and "sweep.log:18: num_nodes: 'two'" in err and 'State=RESUME' not in out, (out, err)


def test_latest_refuses_where_which_session_is_newest_cannot_be_told(database, capsys):
    """The security re-check's N1: the newest session's start set to NULL sorted it last, and
    `latest` judged the older one, resuming a node that failed the newest, exit 0; two sessions
    of one start time are in no order either. Refused in one line."""
    for start in (None, 'same'):
        with sqlite3.connect(database) as db:
            if start is None:
                db.execute('UPDATE sessions SET session_start_unix = NULL WHERE uuid = ?', (NEWER,))
            else:
                db.execute('UPDATE sessions SET session_start_unix = (SELECT max(session_start_unix) '
                           'FROM sessions WHERE uuid != ?)', (NEWER,))
        db.close()
        code, out, err = run_main(capsys, nodes.main, 'latest', '--db', str(database), '-C', CONFIG)
        assert code == 2 and err.count('\n') == 1 and 'which session is newest cannot be told' in err, err


def test_latest_refuses_where_the_session_stored_last_did_not_start_last(database, capsys):
    """The third security pass's F1: a newest session whose start is -inf (or 0) sorted last, and
    `latest` took the older one silently (a node that failed the newest resumed, exit 0)."""
    for start in (float('-inf'), 0):
        with sqlite3.connect(database) as db:
            db.execute('UPDATE sessions SET session_start_unix = ? WHERE uuid = ?', (start, NEWER))
        db.close()
        code, out, err = run_main(capsys, nodes.main, 'latest', '--db', str(database), '-C', CONFIG)
        assert code == 2 and err.count('\n') == 1 and 'newest cannot be told' in err, err


def test_a_node_list_written_as_a_python_list_counts_against_the_budget(tmp_path, capsys):
    """The third security pass's F2: `['h0x[00000-99999]']` was skipped by the budget as
    unreadable, then expanded by the node reader: 12 such records passed the 1,000,000 bound."""
    found = session(4, 0.01, {}, random.Random(1))
    lists = [dataclasses.replace(found[0], num_nodes=100_000, nodelist=f"['h{i}x[00000-99999]']")
             for i in range(12)]
    log = write_perflog(tmp_path / 'sweep.log', found + lists)
    code, out, err = within(30, lambda: run_main(capsys, nodes.main, log))
    assert code == 1 and '10 record(s) of 10 node list(s) naming 1,000,000 hosts left out' in err, err
    assert '4 node(s)' in out and 'State=RESUME' not in out, out
