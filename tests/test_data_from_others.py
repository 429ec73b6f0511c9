"""Issue 48, items 7, 8 and 9: data that others write (perf logs, node lists, images) neither
stops a report nor drives the terminal. Each test failed on 42e5ead."""

import dataclasses
import random
import subprocess
import sys

import pytest

from command_line import run_main
from mlcheck import REPO
from mlcheck.commands import nodes, report
from mlcheck.errors import ConfigError, InputError
from mlcheck.history import hostlist
from mlcheck.history.perflog import read_perflog
from mlcheck.site.images import image_parameter
from node_sessions import session
from perflogs import BASELINE, samples, write_perflog

# erase the line, then OSC 52: set the terminal's clipboard to "echo hi" (base64)
HOSTILE = '\x1b[2K\x1b]52;c;ZWNobyBoaQ==\x07'


def test_a_non_ascii_digit_in_a_node_list_is_bad_input():
    """int() reads '²' as no digit but str.isdigit() says it is one: an internal error."""
    with pytest.raises(InputError, match=r"bad range '1-²'"):
        hostlist.expand('nid[1-²]')


@pytest.mark.parametrize('nodelist', ['nid[0-999999999]', 'a[1-1000]b[1-1000]'])
def test_a_huge_node_range_is_refused_at_once(nodelist):
    """Expanded name by name it took minutes and gigabytes (in a child with 2 GB and 10 s)."""
    code = f'''
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
sys.path.insert(0, {REPO!r})
from mlcheck.history import hostlist
from mlcheck.errors import InputError
try:
    hostlist.expand({nodelist!r})
except InputError as err:
    print(err)
'''
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=10)
    assert f'names more than {hostlist.MAX_HOSTS} hosts' in done.stdout, done.stderr


def test_a_large_node_list_expands_in_linear_time():
    """50,000 names: the duplicate check was a list scan, 1.25e9 comparisons."""
    code = f'import sys; sys.path.insert(0, {REPO!r}); from mlcheck.history import hostlist; ' \
           "print(len(hostlist.expand('nid[00001-50000]')))"
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=10)
    assert done.stdout == '50000\n', done.stderr


def test_a_perf_log_line_is_split_at_newlines_only(tmp_path):
    """Item 9: str.splitlines also splits at \\x1c, \\x85, \\u2028 and five more, so a run whose
    image held one became unreadable lines."""
    found = samples(BASELINE)[:3]
    odd = [dataclasses.replace(s, image=f'torch\x1c2.9\u2028x\x85y') for s in found]
    path = write_perflog(tmp_path / 'odd.log', odd)
    left_out = []
    read = read_perflog(path, left_out=left_out)
    assert left_out == [] and [s.image for s in read] == [s.image for s in odd]


@pytest.mark.parametrize('image', ['img\u2028x', 'img\x1cx', 'img\x85x', 'img\x1b[2Kx', 'a|b', 'a\nb'])
def test_an_image_with_a_line_separator_or_a_control_character_is_refused(sim, image):
    with pytest.raises(ConfigError, match='cannot be logged'):
        sim.resolve_image(image_parameter(image))
    with pytest.raises(ConfigError, match='cannot be logged'):
        sim.resolve_image(image_parameter(f'/images/{image}/torch'))


def test_what_the_commands_print_and_write_shows_control_characters_escaped(tmp_path, capsys):
    """Item 8: an image name from a perf log holding terminal escapes, through mlcheck-report
    (stdout, report.md) and mlcheck-nodes (stdout, nodes.md)."""
    before = samples(BASELINE)
    after = [dataclasses.replace(s, image=HOSTILE + s.image, name=s.name.replace(s.image, HOSTILE + s.image))
             for s in before]
    logs = [write_perflog(tmp_path / 'before.log', before), write_perflog(tmp_path / 'after.log', after)]
    _, out, err = run_main(capsys, report.main, *logs, '-o', str(tmp_path / 'report'))
    sweep = [dataclasses.replace(s, image=HOSTILE, name=s.name.replace('host', HOSTILE), problem=HOSTILE)
             for s in session(4, 0.01, {}, random.Random(1))]
    _, out2, err2 = run_main(capsys, nodes.main, write_perflog(tmp_path / 'sweep.log', sweep),
                             '-o', str(tmp_path / 'nodes'))
    written = (tmp_path / 'report' / 'report.md').read_text() + (tmp_path / 'nodes' / 'nodes.md').read_text()
    for text in (out, err, out2, err2, written):
        assert '\x1b' not in text and '\x07' not in text
    assert '\\x1b]52;c;' in out + err + written and '\\x1b]52;c;' in out2 + err2


@pytest.mark.parametrize('knob', ['compare_with', 'compare_layers'])
def test_a_comparison_with_a_control_character_is_refused(sim, knob):
    """-S compare_with / compare_layers are logged as the run's comparison, unescaped."""
    from types import SimpleNamespace
    from mlcheck.harness.ab_rounds import ABRounds
    check = SimpleNamespace(**{'compare_with': '', 'compare_layers': '', knob: 'x\u2028y'},
                            ab_steps=object(), settings=sim)
    check.comparison = f'{knob}={getattr(check, knob)}'
    with pytest.raises(ConfigError, match=f'-S {knob} .*cannot be logged'):
        ABRounds.ab_sides(check, 'host')
