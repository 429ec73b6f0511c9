"""The upgrade report: what it says changed in the software stack, like-with-like comparison of
settings, the order of its Markdown, and its plots.

The perf logs here are the real repetitions of data/perflogs (see test_history), written again
in the current perf log format as if they had run in two images at 1 and 2 nodes, with the
settings and software stack that the checks now record.
"""

import dataclasses
import os
import subprocess

from command_line import run_report
from mlcheck.history import compare
from mlcheck.figures import stack
from mlcheck.history.samples import Sample
from mlcheck.history.selection import load, parse_selection
from perflogs import BASELINE, CAMPAIGN, SLOWED, UNCHANGED, as_run, samples, spec, write_perflog

LUMI_STACK = {'torch': '2.6.0+rocm6.2.4', 'torchvision': '0.21.0+rocm6.2.4', 'rocm': '6.2.41134',
              'nccl': '2.20.5+hip6.2', 'net_plugin': 'aws-ofi-rccl 1.4.0', 'libfabric': '1.15.2',
              'gpu_driver': 'amdgpu 6.3.6', 'kernel': '5.14.21-150500.55.49_13.0.56-cray_shasta_c',
              'slurm': '23.02.7', 'image': '9876543210 bytes modified 2026-10-01T08:00:00Z'}
UPGRADED = {**LUMI_STACK, 'nccl': '2.22.3+hip6.2', 'net_plugin': 'aws-ofi-nccl 1.18.0',
            'slurm': '24.05.3'}


def upgrade(tmp_path, after_stack=UPGRADED, after_session=UNCHANGED[0], settings='epochs=3'):
    """Perf logs before and after an upgrade of two images at 1 and 2 nodes."""
    runs = [('torch-2.14.1', 1, 1.0), ('torch-2.14.1', 2, 1.7), ('torch-2.9.1', 1, 0.8),
            ('torch-2.9.1', 2, 1.4)]
    before = [s for image, nodes, f in runs
              for s in as_run(samples(BASELINE), image, nodes, f, facts=LUMI_STACK)]
    after = [s for image, nodes, f in runs
             for s in as_run(samples(after_session), image, nodes, f, settings=settings,
                             facts=after_stack if image == 'torch-2.14.1' else LUMI_STACK)]
    return (write_perflog(tmp_path / 'before.log', before),
            write_perflog(tmp_path / 'after.log', after))


# --- the software stack ------------------------------------------------------------------------

def test_stack_facts_round_trip_through_the_perf_log_field():
    assert stack.decode(stack.encode(LUMI_STACK)) == LUMI_STACK
    assert stack.decode('') == {} and stack.encode({'torch': 'a|b;c=d'}) == 'torch=a b c d'


def test_a_changed_stack_is_one_line_per_image(tmp_path, capsys):
    before, after = upgrade(tmp_path)
    code, out, _ = run_report(capsys, before, after, '-o', str(tmp_path / 'report'))
    assert code == 0
    line = ('RCCL 2.20.5+hip6.2 -> 2.22.3+hip6.2; aws-ofi-rccl 1.4.0 -> aws-ofi-nccl 1.18.0; '
            'Slurm 23.02.7 -> 24.05.3')
    assert f'stack of torch-2.14.1 on sim:cluster: {line}' in out
    assert 'stack of torch-2.9.1' not in out
    text = (tmp_path / 'report' / 'report.md').read_text()
    assert f'- **torch-2.14.1** on sim:cluster: {line}' in text


def test_an_identical_stack_says_nothing_changed(tmp_path, capsys):
    before, after = upgrade(tmp_path, after_stack=LUMI_STACK)
    code, out, _ = run_report(capsys, before, after, '-o', str(tmp_path / 'report'))
    assert code == 0 and 'stack of' not in out
    assert 'Nothing that both sides recorded changed.' in (tmp_path / 'report' / 'report.md').read_text()


def test_stack_facts_of_a_real_lumi_job():
    """The rank line and RCCL's own lines of a real LUMI job: the loaded library is taken."""
    from conftest import DATA
    from mlcheck.judging import output
    run_output = output.read(os.path.join(DATA, 'lumi_standard-g_2nodes.out'), labelled=True)
    facts = stack.of_run(run_output)
    assert facts['torch'] == '2.6.0+rocm6.2.4' and facts['torchvision'] == '0.21.0+rocm6.2.4'
    assert facts['nccl'] == '2.20.5+hip6.2' and facts['net_plugin'] == 'aws-ofi-rccl 1.4.0'
    newer = output.parse('0: x NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.18.0\n'
                         '0: x NCCL INFO NET/OFI Using Libfabric version 2.3\n'
                         + subprocess.run(['bash', '-c', stack.job_fact_command()],
                                          capture_output=True, text=True).stdout)
    slurm = subprocess.run(['srun', '--version'], capture_output=True, text=True).stdout.split()[-1]
    assert stack.of_run(newer) == {'net_plugin': 'aws-ofi-nccl 1.18.0', 'libfabric': '2.3',
                                   'slurm': slurm}


def test_image_identity_is_size_and_time_not_a_hash(tmp_path):
    image = tmp_path / 'new.sif'
    image.write_bytes(b'x' * 1000)
    os.utime(image, (0, 86400))
    assert stack.image_identity(image) == '1000 bytes modified 1970-01-02T00:00:00Z'


# --- like with like ----------------------------------------------------------------------------

def test_runs_of_other_settings_are_not_compared(tmp_path, capsys):
    """3 epochs before, 10 after (and slower): no verdict mixes them, nor passes them as
    unchanged; the gate fails, saying the settings differ, with each side's settings."""
    before, after = upgrade(tmp_path, after_session=SLOWED, settings='epochs=10')
    code, out, _ = run_report(capsys, before, after)
    table = [line for line in out.splitlines() if line.startswith('sim:cluster')]
    assert {line.rsplit('  ', 1)[-1].strip() for line in table} == {compare.OTHER_SETTINGS, 'only after'}
    assert all('[epochs=3]' in line for line in table if compare.OTHER_SETTINGS in line)
    assert all('[epochs=10]' in line for line in table if 'only after' in line)
    assert code == 1 and 'REGRESSION' not in out
    assert '12 OTHER SETTINGS AFTER: ran after only with other settings' in out


def test_an_older_perf_log_without_settings_is_never_taken_for_the_one_known():
    """Once taken to be of the one setting known elsewhere (issue 18.12: 3 epochs before read as
    the 10 after, +236 % REGRESSION): now a group of its own, never compared with a known one."""
    old = samples(BASELINE)
    new = [dataclasses.replace(s, settings='epochs=3') for s in samples(SLOWED)]
    verdicts = {c.key: c.verdict for c in compare.compare(old, new)}
    assert {key[3] for key in verdicts} == {'', 'epochs=3'}
    assert verdicts[('sim:cluster', old[0].name, 'samples_per_s', '')] == compare.OTHER_SETTINGS
    assert verdicts[('sim:cluster', old[0].name, 'samples_per_s', 'epochs=3')] == compare.ONLY_AFTER


# --- the Markdown ------------------------------------------------------------------------------

def test_markdown_starts_with_what_to_act_on(tmp_path, capsys):
    before, after = upgrade(tmp_path, after_session=SLOWED)
    code, out, _ = run_report(capsys, before, after, '-o', str(tmp_path / 'report'))
    assert code == 1
    text = (tmp_path / 'report' / 'report.md').read_text()
    order = [text.index(h) for h in ('**', '## Regressions', '## Improvements',
                                     '## What changed in the software stack', '## Everything else')]
    assert order == sorted(order)
    regressions = text.split('## Regressions')[1].split('## Improvements')[0]
    assert regressions.count('| REGRESSION |') == 12      # 3 variables of 4 tests


def test_tests_that_cannot_be_judged_are_one_line(tmp_path, capsys):
    before, after = upgrade(tmp_path)
    one = write_perflog(tmp_path / 'one.log', [s for s in load(parse_selection(after))
                                               if s.jobid == samples(UNCHANGED[0])[0].jobid])
    code, out, _ = run_report(capsys, before, one, '-o', str(tmp_path / 'report'))
    text = (tmp_path / 'report' / 'report.md').read_text()
    # one run after against five before: judged against the spread before, and said so once
    [line] = [l for l in text.splitlines() if l.startswith('- ') and 'too few repetitions' in l]
    assert line.startswith('- 4 test(s) with too few repetitions on one side')
    assert text.count('(before only) |') == 12
    # one run on both sides: shown with its change, in one line with the advice
    first = write_perflog(tmp_path / 'first.log', [s for s in load(parse_selection(before))
                                                   if s.jobid == samples(BASELINE)[0].jobid])
    code, out, _ = run_report(capsys, first, one, '-o', str(tmp_path / 'report'))
    text = (tmp_path / 'report' / 'report.md').read_text()
    assert text.count('| too few repetitions |') + text.count(f'| {compare.TOO_FEW_WORSE} |') == 12
    [line] = [l for l in text.splitlines() if l.startswith('- ') and 'too few repetitions' in l]
    assert line.startswith('- 12 with too few repetitions') and '--repeat 3' in line


def test_tests_without_a_reference_are_one_line(tmp_path, capsys):
    before, after = upgrade(tmp_path)
    found = load(parse_selection(after))
    unreferenced = write_perflog(tmp_path / 'unreferenced.log',
                                 [dataclasses.replace(s, reference=(0, None, None)) for s in found])
    code, out, _ = run_report(capsys, before, unreferenced)
    [line] = [l for l in out.splitlines() if 'without a reference' in l]
    assert line.startswith('4 test(s) ran without a reference')


# --- the plots ---------------------------------------------------------------------------------

def test_one_scaling_and_one_time_figure_per_check(tmp_path, capsys):
    before, after = upgrade(tmp_path, after_session=SLOWED)
    run_report(capsys, before, after, '-o', str(tmp_path / 'report'))
    assert sorted(p.name for p in (tmp_path / 'report').glob('*.png')) == [
        'scaling-sim-cluster-MNISTDistributedCheck.png', 'time-sim-cluster-MNISTDistributedCheck.png']


def test_a_perf_log_moved_aside_for_the_new_header_is_still_read(tmp_path, capsys):
    """ReFrame moves a perf log whose header changed to <name>.log.h0; a directory selection
    still reads it (and skips one too old to hold an image and node count)."""
    logs = tmp_path / 'perflogs' / 'sim' / 'cluster'
    logs.mkdir(parents=True)
    with open(CAMPAIGN) as f:
        text = f.read()
    (logs / 'MNISTDistributedCheck.log.h0').write_text(text)
    (logs / 'MNISTDistributedCheck.log.h1').write_text('job_completion_time|name|perf_value\n')
    write_perflog(logs / 'MNISTDistributedCheck.log', as_run(samples(SLOWED), 'host', 1))
    period = f"{BASELINE['start']}:{BASELINE['end']}"
    code, out, err = run_report(capsys, f'{tmp_path / "perflogs"}@{period}', spec(SLOWED))
    assert err == '' and '3 regression(s)' in out


def test_the_per_repetition_panels_share_one_relative_scale():
    """Issue 49 (new-user trial): each panel's own y range made -3 % in one panel look like -41 %
    in another. Every panel now spans the same share of its mean before."""
    from mlcheck.history import plots

    def runs(values):
        return [Sample('sim:cluster', 'T', 'host', 1, 'x', v, 'samples/s', 1.8e9 + i) for i, v in enumerate(values)]
    panels = [('small change', 'host', {'before': runs([1000, 1002]), 'after': runs([970, 971])}),
              ('large change', 'host', {'before': runs([10, 10]), 'after': runs([5.9, 6.0])})]
    (low_a, high_a), (low_b, high_b) = plots.relative_limits(panels)
    assert abs(high_a / 1001 - high_b / 10) < 1e-9 and abs(low_a / 1001 - low_b / 10) < 1e-9
    assert low_b < 5.9 and low_a < 970 * 0.7       # the -41 % fits, and -3 % looks like -3 %
