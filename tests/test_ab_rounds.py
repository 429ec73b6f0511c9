"""The A/B job's rounds (mlcheck.ab.rounds): the balanced order, and the steps read back from
their files, a step that failed or never finished named, and only whole rounds paired."""

from mlcheck.ab import rounds
from mlcheck.figures import directions
from mlcheck.harness import ab_rounds
from saved_outputs import fact_line


def test_rounds_alternate_which_image_goes_first():
    assert [side for _, side in rounds.order(3)] == ['A', 'B', 'B', 'A', 'A', 'B']
    assert rounds.round_lines(1)[1:] == [
        'mlcheck_ab_step_a 0 >ab/r01-A.out 2>ab/r01-A.err; echo $? >ab/r01-A.status',
        'mlcheck_ab_step_b 1 >ab/r01-B.out 2>ab/r01-B.err; echo $? >ab/r01-B.status']


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
