"""The A/B job's rounds (mlcheck.ab.rounds): the balanced order, the rounds loop of the job
script run in bash (each step a port of its own, the job stopped at the look that decides), the
look between rounds (mlcheck.ab.look), and the steps read back from their files, a step that
failed or never finished named, and only whole rounds paired."""

import subprocess

from mlcheck.ab import look, rounds
from mlcheck.figures import directions
from mlcheck.harness import ab_rounds
from saved_outputs import fact_line


def run_rounds(tmp_path, most, looks, decides_at=None, fails=''):
    """The job's rounds run in bash, each step function a stub that says its side and index (the
    step of `fails`, e.g. 'b 3', exits 1), the look a stub that says `stop` at `decides_at`:
    [(file, what the step said, its exit status)] in the order the steps ran."""
    stubs = [f'mlcheck_ab_step_{side}() {{ echo "{side} $1"; [ "{side} $1" != "{fails}" ]; }}' for side in 'ab']
    look = f'look() {{ echo looked "$1" >>ab/seen; [ "$1" = "{decides_at}" ] && echo stop || echo "go on"; }}'
    subprocess.run(['bash', '-c', '\n'.join([*stubs, look, *rounds.round_lines(most, looks, 'look')])],
                   cwd=tmp_path, check=True)
    ran = [(path.name, path.read_text().strip(), (path.with_suffix('.status')).read_text().strip())
           for path in (tmp_path / rounds.DIR).glob('r*.out')]
    return sorted(ran, key=lambda step: int(step[1].split()[1]))


def test_rounds_alternate_which_image_goes_first_each_step_with_a_port_of_its_own(tmp_path):
    assert [side for _, side in rounds.order(3)] == ['A', 'B', 'B', 'A', 'A', 'B']
    assert run_rounds(tmp_path, 3, (), fails='b 2') == [
        ('r01-A.out', 'a 0', '0'), ('r01-B.out', 'b 1', '0'), ('r02-B.out', 'b 2', '1'),
        ('r02-A.out', 'a 3', '0'), ('r03-A.out', 'a 4', '0'), ('r03-B.out', 'b 5', '0')]


def test_the_job_stops_at_the_look_that_decides(tmp_path):
    ran = run_rounds(tmp_path, 30, (6, 12), decides_at=12)
    assert len(ran) == 24 and rounds.rounds_run(tmp_path) == 12
    assert (tmp_path / rounds.DIR / 'seen').read_text().split('\n')[:-1] == ['looked 6', 'looked 12']


def test_a_job_never_decided_runs_its_most_rounds(tmp_path):
    assert len(run_rounds(tmp_path, 14, (6, 12))) == 28 and rounds.rounds_run(tmp_path) == 14


def write_step(stage, round_, side, status, rate=None):
    path = stage / rounds.stem(round_, side)
    path.parent.mkdir(exist_ok=True)
    facts = fact_line({'event': 'result', 'rank': 0, 'samples_per_s': rate}, task=0) if rate else ''
    path.with_suffix('.out').write_text(facts)
    if status is not None:
        path.with_suffix('.status').write_text(f'{status}\n')


def test_steps_are_read_back_with_their_status_and_only_whole_rounds_pair(tmp_path):
    write_step(tmp_path, 1, 'A', 0, 100.0)
    write_step(tmp_path, 1, 'B', 0, 90.0)
    write_step(tmp_path, 2, 'B', 1)               # failed
    write_step(tmp_path, 2, 'A', 0, 101.0)
    write_step(tmp_path, 3, 'A', None, 99.0)      # the job ended before its status was written
    steps = rounds.read_steps(tmp_path, 3, {'A': 'old', 'B': 'new'})   # round 3's B never ran
    assert [rounds.step_problem(s) for s in steps] == [
        '', '', 'round 2 new: exit status 1', '', 'round 3 old: did not finish (no exit status)',
        'round 3 new: did not finish (no exit status)']
    rates = rounds.paired_rates(steps, lambda step: step.run.result_value('samples_per_s'))
    assert rates == ([100.0], [90.0])


def test_the_ab_figures_say_which_way_is_better():
    assert set(ab_rounds.FIGURES) <= set(directions.BETTER)


def test_the_look_stops_the_job_when_b_is_slower_or_a_step_failed_and_goes_on_otherwise(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def look_at(round_):
        look.main([str(round_), '--fact', 'samples_per_s', '--threshold', '0.05', '--most', '30'])
        return capsys.readouterr().out.strip()
    for round_ in range(1, 7):      # A=A-like: B within 1 % of A
        write_step(tmp_path, round_, 'A', 0, 1000.0)
        write_step(tmp_path, round_, 'B', 0, 1000.0 + (-1) ** round_ * 10)
    assert look_at(6) == 'go on'
    for round_ in range(7, 13):     # B 20 % slower from round 7: 12 rounds find it
        write_step(tmp_path, round_, 'A', 0, 1000.0)
        write_step(tmp_path, round_, 'B', 0, 800.0)
    assert look_at(12) == 'stop'
    said = (tmp_path / look.LOOKS_FILE).read_text().splitlines()
    assert said[0].startswith('after round 6: ') and said[1].startswith('after round 12: ')
    assert ': slower; ' in said[1], said
    write_step(tmp_path, 13, 'A', 0, 1000.0)
    write_step(tmp_path, 13, 'B', 1)
    assert look_at(13) == 'stop' and 'round 13 B: exit status 1' in (tmp_path / look.LOOKS_FILE).read_text()


def test_a_step_whose_rate_is_0_is_a_failed_step_not_a_crash(tmp_path):
    write_step(tmp_path, 1, 'A', 0, 100.0)
    write_step(tmp_path, 1, 'B', 0)
    (tmp_path / rounds.DIR / 'r01-B.out').write_text(fact_line({'event': 'result', 'rank': 0, 'samples_per_s': 0.0}, task=0))
    steps = rounds.read_steps(tmp_path, 1, {'A': 'old', 'B': 'new'})
    a, b, failed = rounds.judged_rates(steps, 'samples_per_s')
    assert (a, b, failed) == ([], [], ['round 1 new: no finite samples_per_s above 0 in its output'])


def test_each_side_is_warmed_up_before_round_1_and_the_warm_up_is_no_round(tmp_path):
    """A cold image (page cache, a first-time load) slow in its first rounds only was `slower`
    12-25 % of the time (the red-team's K2): the job runs one untimed step of each side before
    round 1, on ports of its own, into files no round reads."""
    run_rounds(tmp_path, 2, ())
    warm = {path.name: path.read_text().strip() for path in (tmp_path / rounds.DIR).glob('warm-up-*.out')}
    assert warm == {'warm-up-A.out': 'a 4', 'warm-up-B.out': 'b 5'}
    # the warm-up ran first: its files are older than round 1's
    assert (tmp_path / rounds.DIR / 'warm-up-B.status').stat().st_mtime_ns <= \
        (tmp_path / rounds.DIR / 'r01-A.status').stat().st_mtime_ns
    assert rounds.rounds_run(tmp_path) == 2


def test_a_step_whose_rate_is_not_finite_is_a_failed_step_and_the_look_stops(tmp_path, monkeypatch, capsys):
    """`Infinity` in a step's result line crashed `python -m mlcheck.ab.look` (a traceback, no
    looks.txt, no stop): the step failed, the look says so and stops the job."""
    monkeypatch.chdir(tmp_path)
    for round_ in range(1, 7):
        write_step(tmp_path, round_, 'A', 0, 1000.0)
        write_step(tmp_path, round_, 'B', 0, 1000.0)
    (tmp_path / rounds.DIR / 'r04-B.out').write_text(
        fact_line({'event': 'result', 'rank': 0, 'samples_per_s': 1000.0}, task=0).replace('1000.0', 'Infinity'))
    look.main(['6', '--fact', 'samples_per_s', '--threshold', '0.03', '--most', '30'])
    assert capsys.readouterr().out.strip() == 'stop'
    assert 'round 4 B: no finite samples_per_s above 0 in its output' in (tmp_path / look.LOOKS_FILE).read_text()


def test_a_failed_warm_up_step_is_a_failed_step_named_and_the_look_stops(tmp_path, monkeypatch, capsys):
    """The second red-team's warmup-failed job: B's warm-up step exited 1 and no look nor verdict
    said so. An image whose first step fails has failed: the look stops and names it."""
    monkeypatch.chdir(tmp_path)
    for round_ in range(1, 7):
        write_step(tmp_path, round_, 'A', 0, 1000.0)
        write_step(tmp_path, round_, 'B', 0, 1000.0)
    for side, status in (('A', '0'), ('B', '1')):
        (tmp_path / rounds.DIR / f'{rounds.WARM_UP}-{side}.out').write_text('')
        (tmp_path / rounds.DIR / f'{rounds.WARM_UP}-{side}.status').write_text(status + '\n')
    look.main(['6', '--fact', 'samples_per_s', '--threshold', '0.03', '--most', '30'])
    assert capsys.readouterr().out.strip() == 'stop'
    assert 'warm-up B: exit status 1' in (tmp_path / look.LOOKS_FILE).read_text()
    assert rounds.warm_up_problems(tmp_path, {'A': 'old', 'B': 'new'}) == ['warm-up new: exit status 1']


def test_the_look_at_the_last_round_gives_the_verdict_not_the_job_goes_on(tmp_path, monkeypatch, capsys):
    """The look after the most rounds said 'undecided after 30 of up to 30 rounds; the job goes on'."""
    monkeypatch.chdir(tmp_path)
    for round_ in range(1, 9):
        write_step(tmp_path, round_, 'A', 0, 1000.0)
        write_step(tmp_path, round_, 'B', 0, 1000.0 * (0.9 if round_ % 2 else 1.1))
    look.main(['8', '--fact', 'samples_per_s', '--threshold', '0.03', '--most', '8'])
    said = (tmp_path / look.LOOKS_FILE).read_text()
    assert 'inconclusive' in said and 'goes on' not in said, said
