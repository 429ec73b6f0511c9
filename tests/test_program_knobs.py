"""One default per knob: each check's knobs against its program's arguments (src/pytorch/program_knobs.py
makes both), help on every program flag, the settings a program states it ran judged against
those asked, -S names no check knows refused, and the report's defaults without ReFrame."""

import argparse
import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import types

import pytest

from conftest import REPO
from ddp_common import load_program
from perflogs import BASELINE, SLOWED, samples, write_perflog
from reframe_runner import run_reframe
from saved_outputs import SIM_OUT, fact_line, saved
from mlcheck.errors import ConfigError
from mlcheck.harness import knob_table
from mlcheck.harness.knobs import Knob, program_knobs, refuse_unknown_variables
from mlcheck.judging import output, stated_settings

CHECKS = {check.__name__: check for check in knob_table.check_classes()}
PROGRAMS = {name: load_program(str(check.script).removeprefix('pytorch/')) for name, check in CHECKS.items()}
TABLES = {'MNISTDistributedCheck': program_knobs.MNIST, 'CIFAR100ResNetCheck': program_knobs.CIFAR100,
          'InterconnectCheck': program_knobs.INTERCONNECT}


def drifts(knobs, parser):
    """One line per flag of `knobs` that `parser` lacks, or takes with another default or choices."""
    actions = {flag: action for action in parser._actions for flag in action.option_strings}
    found = []
    for name, knob in knobs.items():
        for flag in knob.flags(name):
            action = actions.get(flag)
            if action is None:
                found.append(f'{name}: the program has no {flag}')
            elif action.default != knob.default or type(action.default) is not knob.kind:
                found.append(f'{name}: {flag} defaults to {action.default!r}, the check to {knob.default!r}')
            elif tuple(action.choices or ()) != tuple(knob.choices):
                found.append(f'{name}: {flag} takes {action.choices}, the check {knob.choices}')
    return found


@pytest.mark.parametrize('check', CHECKS)
def test_every_check_knob_is_its_programs_argument_with_the_same_default(check):
    assert drifts(CHECKS[check].knobs, PROGRAMS[check].get_args_parser()) == []


def test_a_drifted_default_or_a_missing_flag_is_found():
    """The drifts of issue 40 (warmup_steps 10 in the check, 5 in the program; data device/loader)."""
    parser = PROGRAMS['CIFAR100ResNetCheck'].get_args_parser()
    knobs = dict(CHECKS['CIFAR100ResNetCheck'].knobs)
    knobs['warmup_steps'] = dataclasses.replace(knobs['warmup_steps'], default=5)
    knobs['data'] = dataclasses.replace(knobs['data'], default='loader')
    knobs['workers'] = dataclasses.replace(knobs['workers'], flag='--loader-workers')
    assert drifts(knobs, parser) == ['warmup_steps: --warmup-steps defaults to 10, the check to 5',
                                     'workers: the program has no --loader-workers',
                                     "data: --data defaults to 'device', the check to 'loader'"]
    hand_written = argparse.ArgumentParser()
    hand_written.add_argument('--p2p-bytes', type=int, default=None)
    assert drifts({'p2p_bytes': program_knobs.INTERCONNECT['p2p_bytes']}, hand_written) == [
        'p2p_bytes: --p2p-bytes defaults to None, the check to 268435456']


@pytest.mark.parametrize('check', CHECKS)
def test_every_program_flag_says_what_it_is(check):
    parser = PROGRAMS[check].get_args_parser()
    assert [action.option_strings for action in parser._actions if not action.help] == []


@pytest.mark.parametrize('check', CHECKS)
def test_a_program_run_by_hand_runs_the_checks_defaults(check):
    """No arguments (MNIST's required --data-dir aside): the settings it states are the check's defaults."""
    args = PROGRAMS[check].get_args_parser().parse_args(['--data-dir', 'x'] if 'MNIST' in check else [])
    table = TABLES[check]
    assert program_knobs.stated(args, table) == {name: knob.default for name, knob in table.items()}
    assert set(table) <= set(CHECKS[check].knobs)


def test_a_program_refuses_a_bad_knob_value_as_the_check_does(capsys):
    with pytest.raises(SystemExit):
        PROGRAMS['InterconnectCheck'].get_args_parser().parse_args(['--slowdown', '1'])
    assert "--slowdown='1': expected a number >= 0 and < 1" in capsys.readouterr().err


def test_a_bool_knob_whose_default_is_true_is_turned_off_by_its_no_flag():
    augment = program_knobs.CIFAR100['augment']
    assert augment.arguments('augment', False) == ['--no-augment']
    assert augment.arguments('augment', True) == ['--augment']
    parser = PROGRAMS['CIFAR100ResNetCheck'].get_args_parser()
    assert parser.parse_args(['--no-augment']).augment is False and parser.parse_args([]).augment is True


# --- the settings a program states it ran (rank 0's `settings` fact) -----------------------

ASKED = {'epochs': 3, 'batch_size': 64}


def with_settings(**stated):
    return saved(SIM_OUT) + fact_line({'event': 'settings', **stated}, task=0)


def test_the_settings_asked_and_stated_pass():
    assert stated_settings.problems(output.parse(with_settings(epochs=3, batch_size=64)), ASKED) == []


def test_a_program_that_ran_other_settings_fails_naming_them():
    run = output.parse(with_settings(epochs=10, batch_size=64))
    assert stated_settings.problems(run, ASKED) == [
        'the program ran other settings than asked: epochs=10 where 3 was asked']
    run = output.parse(with_settings(epochs=3))
    assert stated_settings.problems(run, ASKED) == [
        'the program ran other settings than asked: no batch_size (asked 64)']


def test_a_program_that_states_no_settings_fails():
    assert stated_settings.problems(output.parse(saved(SIM_OUT)), ASKED) == [
        'the program stated no settings (no `settings` fact): what it ran is unknown']


# --- -S names no check knows ---------------------------------------------------------------

class Base:
    pass


def _check(name, **knobs):
    return type(name, (Base,), {'checks_key': name.lower(), 'knobs': knobs, 'common_knobs': {},
                                'partition_wide_knobs': {}})


def test_a_name_no_loaded_check_knows_is_refused_in_one_line():
    a, b = _check('A', epochs=Knob(3)), _check('B', steps=Knob(0))
    known = lambda cls: set(cls.knobs) | {'time_limit'}        # noqa: E731
    refuse_unknown_variables([(None, 'epochs', '2'), (None, 'steps', '1'), (None, 'time_limit', '1h'),
                              ('B', 'steps', '1')], Base, known)
    with pytest.raises(ConfigError) as err:
        refuse_unknown_variables([(None, 'epochs', '2'), (None, 'epoch', '2')], Base, known)
    assert str(err.value) == "-S epoch=2: no check of this run knows 'epoch'; their knobs: epochs, steps"
    with pytest.raises(ConfigError, match=r"^-S A.steps=1: no check of this run knows 'steps'; their knobs: epochs$"):
        refuse_unknown_variables([('A', 'steps', '1')], Base, known)
    del a, b


def test_a_mistyped_S_name_stops_the_session_before_any_job(tmp_path):
    """ReFrame alone warned that 'epoch' was not set and ran every case at epochs=3."""
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-n', 'MNIST', '-S', 'epoch=2')
    assert done.returncode != 0
    assert not list((tmp_path / 'rfm').rglob('rfm_job.sh')), 'no job script may be written'
    text = re.sub(r'\x1b\[[0-9;]*m', '', done.stdout + done.stderr)        # ReFrame's colours
    knobs = sorted({name for check in CHECKS.values()
                    for name in {**check.knobs, **check.common_knobs, **check.partition_wide_knobs}})
    assert 'epochs' in knobs and [line for line in text.splitlines() if 'ERROR' in line] == [
        "ERROR: run session stopped: force exit error: mlcheck: config error: -S epoch=2: no check of "
        f"this run knows 'epoch'; their knobs: {', '.join(knobs)}"]


# --- the report's defaults, generated, read without ReFrame --------------------------------

def test_the_reports_defaults_are_the_ones_generated_from_the_checks():
    assert pathlib.Path(knob_table.DEFAULTS).read_text() == knob_table.defaults_module(), \
        'run: python -m mlcheck.harness.knob_table --write'


def test_a_changed_default_changes_the_generated_defaults(monkeypatch):
    mnist = CHECKS['MNISTDistributedCheck']
    monkeypatch.setitem(mnist.knobs, 'epochs', dataclasses.replace(mnist.knobs['epochs'], default=11))
    assert pathlib.Path(knob_table.DEFAULTS).read_text() != knob_table.defaults_module()


def report_output(*args, without_reframe):
    """(exit status, stdout, stderr) of mlcheck-report in a new Python, ReFrame unimportable if asked."""
    hide = "import sys; sys.modules['reframe'] = None; " if without_reframe else ''
    code = (f'{hide}from mlcheck.commands import report; import sys; '
            f'sys.exit(report.main({list(args)!r}))')
    done = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, 'PYTHONPATH': REPO}, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_the_report_runs_on_perf_logs_without_reframe(tmp_path):
    """As on a laptop with the perf logs copied over (ReFrame's own period syntax, PATH@START:END,
    still needs ReFrame): the same report as with it."""
    logs = [write_perflog(tmp_path / f'{name}.log', samples(session))
            for name, session in (('before', BASELINE), ('after', SLOWED))]
    without = report_output(*logs, '-o', str(tmp_path / 'out'), without_reframe=True)
    assert without[0] == 1 and 'regression' in without[1] and without[2] == '', without[2]
    assert without == report_output(*logs, '-o', str(tmp_path / 'out'), without_reframe=False)


@pytest.mark.parametrize('name', ['MNISTDistributedCheck', 'CIFAR100ResNetCheck'])
def test_no_solo_phase_means_no_slow_rank_rule_and_the_ab_steps_run_none(name):
    """-S solo_steps=0 runs no rank alone: the check then expects no `solo` facts (a run without
    them would fail 'reported no solo throughput') and gives no per-rank figures; an A/B step runs
    none, as a slow rank slows both images' steps alike."""
    check = CHECKS[name]
    alone = check.times_ranks_alone
    assert alone(types.SimpleNamespace(solo_steps=check.knobs['solo_steps'].default, mode='ddp'))
    assert not alone(types.SimpleNamespace(solo_steps=0, mode='ddp'))
    assert check.ab_steps.knobs['solo_steps'] == 0
