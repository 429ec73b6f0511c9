"""The upgrade report's likely cause (mlcheck.history.causes): which layer broke, or `cannot
tell`, on generated before/after runs of the suite's matrix (tests/layer_matrices: MNIST,
CIFAR-100, interconnect x 3 images x 1, 2 and 4 nodes) with one cause of known truth."""

import dataclasses
import random

from hypothesis import given, settings, strategies as st

from command_line import run_report
from layer_matrices import IMAGES, draw_case, matrix, outcome
from mlcheck.history import causes, compare
from perflogs import write_perflog


def report_of(tmp_path, capsys, cause, target=None, effect=0.3, noise=0.02, seed=1, markdown=False,
              **shape):
    """(exit status, stdout, report.md or None) of mlcheck-report on perf logs of the generated
    runs (report.md and its plots only if `markdown`: they take seconds)."""
    before, after = matrix(random.Random(seed), cause, effect, noise, 4, target=target, **shape)
    code, out, _ = run_report(capsys, write_perflog(tmp_path / 'before.log', before),
                              write_perflog(tmp_path / 'after.log', after),
                              *(['-o', str(tmp_path / 'report')] if markdown else []))
    return code, out, (tmp_path / 'report' / 'report.md').read_text() if markdown else None


def likely(out):
    return [line for line in out.splitlines() if line.startswith('likely cause: ')]


# --- the done-when cases, through the report's perf logs ------------------------------------------

def test_every_image_slower_at_several_nodes_only_is_the_fabric(tmp_path, capsys):
    code, out, text = report_of(tmp_path, capsys, 'fabric', markdown=True)
    assert code == 1
    [line] = likely(out)
    assert line.startswith('likely cause: fabric: every image slower at 2 and 4 nodes (-')
    assert 'unchanged at 1 node; busbw across nodes -' in line and 'within a node unchanged' in line
    assert 'libfabric 1.20.1 -> 1.22.0 in every image' in line
    assert f'## Likely cause\n\n- {line}\n' in text
    assert text.index('## Likely cause') < text.index('## Regressions')


def test_one_image_slower_at_every_node_count_is_that_image(tmp_path, capsys):
    code, out, _ = report_of(tmp_path, capsys, 'image', 'torch-2.9.1')
    assert code == 1
    [line] = likely(out)
    assert line.startswith('likely cause: image torch-2.9.1: only torch-2.9.1 slower, at 1, 2 and 4 nodes')
    assert 'torch 2.9.1 -> 2.9.1.post1' in line


def test_every_image_slower_at_every_node_count_is_the_host_stack(tmp_path, capsys):
    code, out, _ = report_of(tmp_path, capsys, 'host stack')
    assert code == 1
    [line] = likely(out)
    assert line.startswith('likely cause: host stack: every image slower at every node count, 1 node too')


def test_a_single_image_at_a_single_node_count_cannot_tell(tmp_path, capsys):
    code, out, _ = report_of(tmp_path, capsys, 'host stack', images=IMAGES[:1], counts=(2,))
    assert code == 1
    [line] = likely(out)
    assert line.startswith('likely cause: cannot tell: ')
    assert 'run a second image at 2 nodes' in line and 'run torch-2.9.1 at 1 node' in line


def test_nothing_slower_says_so_and_passes(tmp_path, capsys):
    code, out, _ = report_of(tmp_path, capsys, 'host stack', effect=0.0, noise=0.005)
    assert code == 0 and likely(out) == []
    assert out.startswith('no likely cause: nothing got slower or failed\n')


# --- the other layers, on the generated samples ------------------------------------------------

def causes_of(cause, target=None, effect=0.3, noise=0.02, seed=1, **shape):
    before, after = matrix(random.Random(seed), cause, effect, noise, 4, target=target, **shape)
    return [c.line() for c in causes.likely_causes(compare.compare(before, after), before, after)]


def test_one_node_slower_alone_and_in_every_run_with_it_is_that_node():
    [line] = causes_of('node', 'nid003', sweep=True)
    assert line.startswith('likely cause: node nid003: runs on nid003 alone slower (-')
    assert 'on nid001, nid002, nid004 alone unchanged' in line


def test_without_runs_on_one_node_alone_a_node_cannot_be_named():
    assert all(line.startswith('likely cause: cannot tell: ')
               for line in causes_of('node', 'nid003', sweep=False))


def test_the_loader_slower_and_training_not_much_is_the_data_path():
    [line] = causes_of('data path')
    assert line.startswith('likely cause: data path: loader_images_per_s -')


def test_without_the_loader_figure_a_cifar_only_loss_cannot_tell():
    lines = causes_of('data path', effect=0.5, with_loader=False)
    assert lines and all(line.startswith('likely cause: cannot tell: ') for line in lines)
    assert 'loader_images_per_s is not recorded' in lines[0]


def test_failures_count_as_a_loss():
    [line] = causes_of('image', 'torch-2.12.0', fail=True)
    assert line.startswith('likely cause: image torch-2.12.0: ') and '6 failed' in line


def test_placement_failures_are_the_binding():
    rng = random.Random(1)
    before, after = matrix(rng, 'image', 0.3, 0.02, 4, target='torch-2.12.0', fail=True)
    reason = 'sanity: rank 1 (local rank 1 on nid002) runs on cores [0, 1], expected [2, 3] (mask 0xc)'
    after = [dataclasses.replace(s, problem=reason) if s.value is None else s for s in after]
    found = causes.likely_causes(compare.compare(before, after), before, after)
    assert [c.layer for c in found] == ['binding']
    assert found[0].evidence.startswith('9 tests failed the placement sanity')
    # another failure is a loss of its runs, not the binding
    other = [dataclasses.replace(s, problem='sanity: no result line') for s in after]
    found = causes.likely_causes(compare.compare(before, other), before, other)
    assert [c.layer for c in found] == ['image torch-2.12.0']


def test_a_layer_that_fits_with_a_node_that_fits_too_cannot_tell():
    """1-node runs only, each image always on its own node: the image or its node."""
    before, after = matrix(random.Random(2), 'image', 0.3, 0.02, 4, target='torch-2.9.1', counts=(1,))
    pinned = lambda ss: [dataclasses.replace(s, nodelist=f'nid00{IMAGES.index(s.image) + 1}')
                         for s in ss]
    before, after = pinned(before), pinned(after)
    lines = [c.line() for c in causes.likely_causes(compare.compare(before, after), before, after)]
    assert len(lines) == 1 and lines[0].startswith('likely cause: cannot tell: image torch-2.9.1 or '
                                                   'node nid001: the runs fit each; run the checks')


def test_the_same_runs_on_several_nodes_name_the_image():
    """... and with the other images' runs on that node too, unchanged, it is the image."""
    before, after = matrix(random.Random(2), 'image', 0.3, 0.02, 4, target='torch-2.9.1', counts=(1,))
    pinned = lambda ss: [dataclasses.replace(s, nodelist='nid001') for s in ss]
    before, after = pinned(before), pinned(after)
    lines = [c.line() for c in causes.likely_causes(compare.compare(before, after), before, after)]
    assert len(lines) == 1 and lines[0].startswith('likely cause: image torch-2.9.1: ')


# --- the rule over generated cases of known truth ----------------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2 ** 32))
def test_never_a_wrong_layer(seed):
    rng = random.Random(seed)
    case = draw_case(rng)
    before, after = matrix(rng, **case)
    found = causes.likely_causes(compare.compare(before, after), before, after)
    assert outcome(found, case['cause'], case['target']) != 'wrong', (case, [c.line() for c in found])


def test_right_in_95_percent_of_clear_cases():
    """Effects of 10-50 %, noise of 1-3 %: the goal docs/performance-history.md states."""
    rng = random.Random(7)
    results = []
    for _ in range(200):
        case = draw_case(rng, effects=(0.10, 0.50), noises=(0.01, 0.03))
        before, after = matrix(rng, **case)
        found = causes.likely_causes(compare.compare(before, after), before, after)
        results.append(outcome(found, case['cause'], case['target']))
    assert results.count('wrong') == 0 and results.count('right') >= 0.95 * len(results)
