"""The programs and the judging side agree (issue 21): what one side writes, the other reads back.

The programs (src/pytorch, run inside the images) and mlcheck share src/pytorch/mlcheck_contract.py
for the fact prefix, the fault grammar, the waits and the cpulist format. Each test here feeds
what one side produces to the other side's own entry point, so a second copy on either side
that drifted from the first fails here.
"""

import argparse
import contextlib
import io
import os
import pathlib
import re
import shlex
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st

import ddp_common
import gpu_locality
import mlcheck_contract
from mlcheck import contract
from mlcheck.errors import ConfigError
from mlcheck.judging import locality, output
from mlcheck.placement import discover
from mlcheck.placement.launch import Waits

REPO = pathlib.Path(__file__).resolve().parent.parent
BIG_WORLD = 10 ** 100       # any rank is in it


def test_both_sides_use_the_one_file():
    assert os.path.samefile(contract.PATH, mlcheck_contract.__file__)
    assert contract.parse_fault is mlcheck_contract.parse_fault
    assert discover.parse_cpulist is gpu_locality.parse_cpulist


def test_the_fact_prefix_is_written_in_one_place():
    """A program or judging module spelling the prefix itself is a second copy to drift."""
    spelled = re.compile(r'''['"]MLCHECK ''')
    found = [str(path.relative_to(REPO)) for tree in ('mlcheck', 'src', 'bench')
             for path in (REPO / tree).rglob('*.py') if spelled.search(path.read_text())]
    assert found == ['src/pytorch/mlcheck_contract.py']


json_values = st.recursive(st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8)
                           | st.floats(allow_nan=False, allow_infinity=False),
                           lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@settings(max_examples=100, deadline=None)
@given(event=st.sampled_from(sorted(contract.EVENTS)),
       fields=st.dictionaries(st.text(max_size=8).filter(lambda k: k != 'event'), json_values, max_size=4),
       task=st.none() | st.integers(0, 20000))
def test_a_fact_a_program_prints_is_the_fact_judging_reads(event, fields, task):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        ddp_common.emit(event, **fields)
    text = printed.getvalue()
    if task is not None:        # as srun --label prefixes it
        text = f'{task}: {text}'
    run = output.parse(text, labelled=task is not None)
    expected = {'event': event, **fields, **({} if task is None else {'task': task})}
    assert run.facts == [expected] and not run.malformed


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(sorted(contract.FAULT_KINDS)), rank=st.integers(0, 10 ** 6),
       epoch=st.integers(0, 10 ** 4))
def test_a_fault_the_launcher_accepts_is_the_fault_the_programs_inject(kind, rank, epoch):
    spec = contract.format_fault(kind, rank, epoch)
    Waits(fault=spec).check(world_size=rank + 1)
    with pytest.raises(ConfigError, match=f'rank {rank} is not in a world of {rank} ranks'):
        Waits(fault=spec).check(world_size=rank)
    env = {name: shlex.split(value)[0] for name, value in Waits(fault=spec).exports().items()}
    with mock.patch.dict(os.environ, env):
        fault = ddp_common.add_wait_arguments(argparse.ArgumentParser()).parse_args([]).fault
    expected_epoch = epoch if 'epoch' in contract.FAULT_KINDS[kind] else None
    assert (fault.kind, fault.rank, fault.epoch) == (kind, rank, expected_epoch)


def accepted_by_launcher(spec):
    try:
        Waits(fault=spec).check(world_size=BIG_WORLD)
        return True
    except ConfigError:
        return False


def accepted_by_program(spec):
    try:
        ddp_common.Fault.parse(spec)
        return True
    except argparse.ArgumentTypeError:
        return False


fault_kinds = st.sampled_from([*contract.FAULT_KINDS, 'hang', 'crash ', 'x', ''])
fault_values = st.lists(st.sampled_from(['0', '7', '12', '-1', ' 3', '', 'x', '\u0663', '\u00b2']), max_size=3)


@settings(max_examples=200, deadline=None)
@given(spec=st.tuples(fault_kinds, fault_values).map(lambda kv: ':'.join([kv[0], *kv[1]])).filter(bool))
def test_the_launcher_and_the_programs_accept_the_same_faults(spec):
    """A fault the launcher lets through but the ranks refuse (or the reverse) fails late, on
    the nodes; Arabic-Indic or superscript digits included. (An empty one is no fault to both.)"""
    assert accepted_by_launcher(spec) == accepted_by_program(spec)


timeouts = st.integers(1, 86400) | st.integers(1, 99999).map(lambda n: n / 10)


@settings(max_examples=100, deadline=None)
@given(rendezvous=timeouts, collective=timeouts)
def test_the_waits_the_launcher_exports_are_the_waits_the_programs_use(rendezvous, collective):
    with mock.patch.dict(os.environ, Waits(rendezvous, collective).exports()):
        args = ddp_common.add_wait_arguments(argparse.ArgumentParser()).parse_args([])
    assert (args.rendezvous_timeout, args.timeout, args.fault) == (rendezvous, collective, None)


def test_without_the_launcher_the_programs_wait_as_long_as_its_defaults():
    unset = {name: '' for name in Waits().exports()}
    with mock.patch.dict(os.environ, unset):
        for name in unset:
            del os.environ[name]
        args = ddp_common.add_wait_arguments(argparse.ArgumentParser()).parse_args([])
    assert (args.rendezvous_timeout, args.timeout) == (Waits().rendezvous_timeout, Waits().collective_timeout)


@settings(max_examples=100, deadline=None)
@given(cpus=st.sets(st.integers(0, 1023), max_size=64))
def test_a_cpulist_judging_writes_is_the_list_the_ranks_read(cpus):
    text = locality.format_cpulist(cpus)
    assert gpu_locality.parse_cpulist(text + '\n') == sorted(cpus)
    assert discover.parse_cpulist(text) == sorted(cpus)


def test_the_kernels_cpulist_format():
    assert gpu_locality.parse_cpulist('0-3,8,10-11\n') == [0, 1, 2, 3, 8, 10, 11]
    assert locality.format_cpulist([11, 0, 1, 2, 3, 8, 10]) == '0-3,8,10-11'


# --- event names and variables: both sides use only the contract's (issue 29) ------------------

EVENT_USE = re.compile(r"""\b(?:emit|by_rank|events|rank_events|positive|format_fact|fact_line)\(\s*['"]([a-z_]+)['"]""")
VARIABLE_USE = re.compile(r'\bMLCHECK_[A-Z_]+\b')
# MLCHECK_* variables of the suite's own tools (bin/setup, the commands), not of the programs
TOOL_VARIABLES = {'MLCHECK_DATA_DIR', 'MLCHECK_VENV', 'MLCHECK_IMAGE_CACHE', 'MLCHECK_REFERENCES_DIR',
                  'MLCHECK_DRY_RUN_PERFLOG_DIR', 'MLCHECK_CONDA_ENV', 'MLCHECK_PREFIX'}


def sources(*tops, suffixes=('.py', '.sh')):
    return [p for top in tops for p in pathlib.Path(REPO, top).rglob('*')
            if p.suffix in suffixes and '__pycache__' not in p.parts]


def test_every_event_written_or_read_is_the_contracts():
    used = {(p.name, name) for p in sources('src', 'mlcheck', 'checks')
            for name in EVENT_USE.findall(p.read_text())}
    assert {name for _, name in used} <= contract.EVENTS, sorted(
        (f, n) for f, n in used if n not in contract.EVENTS)
    emitted = {n for p in sources('src') for n in EVENT_USE.findall(p.read_text())}
    read = {n for p in sources('mlcheck') for n in EVENT_USE.findall(p.read_text())}
    assert {'rank', 'epoch', 'solo', 'done', 'telemetry'} <= emitted & read


def test_an_event_outside_the_contract_is_refused_where_it_is_written():
    with pytest.raises(ValueError, match="'epochs' is not an event of the contract"):
        mlcheck_contract.format_fact('epochs', rank=0)


def test_every_variable_the_programs_read_is_the_contracts_and_the_launcher_sets_them():
    programs = {v for p in sources('src') for v in VARIABLE_USE.findall(p.read_text())}
    launcher = {v for p in sources('mlcheck') for v in VARIABLE_USE.findall(p.read_text())} - TOOL_VARIABLES
    assert programs == contract.VARIABLES
    assert launcher <= contract.VARIABLES
