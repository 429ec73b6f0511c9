"""A trial run of the new stack inside the "before" selection (issue 30): two runs of torch 2.9.1
at ~9,128 samples/s and one smoke run of torch 2.10.0 at 7,000 before, three of 2.10.0 at ~7,003
after read "-16.8 %, within noise"; without the trial run it is -23.3 %, a REGRESSION."""

from command_line import run_report
from mlcheck.figures import stack
from mlcheck.history import compare
from mlcheck.history.samples import Sample
from perflogs import write_perflog

OLD, NEW = (stack.encode({'image': 'pytorch.sif', 'torch': torch}) for torch in ('2.9.1', '2.10.0'))


def mnist(runs, start):
    return [Sample(partition='sim:cluster', name='MNISTDistributedCheck %image=pytorch %num_nodes=2',
                   image='pytorch', num_nodes=2, var='samples_per_s', value=value, unit='samples/s',
                   time=start + 60 * i, jobid=str(int(start) + i), result='pass', settings='epochs=3',
                   stack=on) for i, (value, on) in enumerate(runs)]


def report(tmp_path, capsys, before, after):
    code, out, _ = run_report(capsys, write_perflog(tmp_path / 'before.log', before),
                              write_perflog(tmp_path / 'after.log', after))
    rows = [line for line in out.splitlines() if line.startswith('sim:cluster')]
    return code, rows, out


AFTER = [(7010, NEW), (6995, NEW), (7004, NEW)]


def test_a_trial_run_of_the_new_stack_is_left_out_of_before(tmp_path, capsys):
    before = mnist([(9120, OLD), (9136, OLD), (7000, NEW)], 0)
    code, rows, out = report(tmp_path, capsys, before, mnist(AFTER, 1e6))
    assert len(rows) == 1 and rows[0].endswith(compare.REGRESSION) and '-23.3%' in rows[0]
    assert code == 1
    assert ("left out of before: 1 run(s) of MNISTDistributedCheck %image=pytorch %num_nodes=2 "
            "[epochs=3] on after's stack (image pytorch.sif, torch 2.10.0)") in out


def test_one_stack_a_side_is_compared_as_before(tmp_path, capsys):
    code, rows, out = report(tmp_path, capsys, mnist([(9120, OLD), (9136, OLD)], 0), mnist(AFTER, 1e6))
    assert rows[0].endswith(compare.REGRESSION) and 'left out of before' not in out


def test_nothing_is_left_out_when_before_ran_only_the_stack_after_ran(tmp_path, capsys):
    code, rows, out = report(tmp_path, capsys, mnist([(7000, NEW), (7008, NEW)], 0), mnist(AFTER, 1e6))
    assert code == 0 and 'left out of before' not in out


def test_the_majority_of_before_on_after_s_stack_is_the_baseline(tmp_path, capsys):
    """Issue 35 item 6: before holds one run of last month's stack and four of the current one;
    the upgrade changed what the stack does not record (firmware) and after is 23 % slower. The
    four were dropped as a trial and after compared with the old run alone: 'unchanged', exit 0."""
    before = mnist([(7000, OLD)] + [(v, NEW) for v in (9120, 9136, 9128, 9131)], 0)
    # five runs after, as the gate is measured (--repeat 5): the old run's 7,000 among before's
    # widens its spread to 9 %, and against it three runs 19.5 % slower are within the chance of
    # a report (compare.judge_together: t 3.0 on 6 degrees of freedom)
    after = mnist([(7010, NEW), (6995, NEW), (7004, NEW), (7001, NEW), (6998, NEW)], 1e6)
    code, rows, out = report(tmp_path, capsys, before, after)
    assert code == 1 and rows[0].endswith(compare.REGRESSION)
    assert 'left out of before' not in out


def test_a_minority_on_after_s_stack_that_ran_first_is_no_trial(tmp_path, capsys):
    """A run of after's stack older than the others is not a trial of the new stack: the stack
    was rolled back and forward again, and it belongs to the baseline."""
    before = mnist([(7000, NEW), (9120, OLD), (9136, OLD)], 0)
    code, rows, out = report(tmp_path, capsys, before, mnist(AFTER, 1e6))
    assert 'left out of before' not in out
