"""Check knobs: -S text and config values parsed at setup, bad ones named in one line."""

import pathlib

import pytest

from conftest import REPO
from mlcheck.errors import ConfigError
import reframe as rfm

from mlcheck.harness import knob_table
from mlcheck.harness.knobs import Knob, Unset, declare_knobs, knob_arguments, knob_values, program_knobs

EPOCHS = Knob(3, minimum=1)
THROTTLE = Knob(0.0, minimum=0, below=1)
FRACTION = Knob(0.8, minimum=0, maximum=1)
MODEL = Knob('resnet152', choices=('resnet18', 'resnet152'))
AMP = Knob(False)


@pytest.mark.parametrize('knob, given, value', [
    (EPOCHS, '4', 4), (EPOCHS, 4, 4), (THROTTLE, '0.5', 0.5), (THROTTLE, 0, 0.0), (FRACTION, '1', 1.0),
    (MODEL, 'resnet18', 'resnet18'), (AMP, 'true', True), (AMP, 'no', False), (AMP, True, True),
])
def test_good_values_take_the_knobs_type(knob, given, value):
    parsed = knob.parse(given, '-S x', from_text=True)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize('knob, given, message', [
    (EPOCHS, 'abc', "-S x='abc': expected an integer >= 1"),
    (EPOCHS, '2.5', "-S x='2.5': expected an integer >= 1"),
    (EPOCHS, '0', "-S x='0': expected an integer >= 1"),
    (EPOCHS, True, '-S x=True: expected an integer >= 1'),
    (EPOCHS, 3.0, '-S x=3.0: expected an integer >= 1'),
    (THROTTLE, '1', "-S x='1': expected a number >= 0 and < 1"),
    (THROTTLE, '-0.1', "-S x='-0.1': expected a number >= 0 and < 1"),
    (FRACTION, '1.5', "-S x='1.5': expected a number >= 0 and <= 1"),
    (FRACTION, 'fast', "-S x='fast': expected a number >= 0 and <= 1"),
    (MODEL, 'resnet34', "-S x='resnet34': expected one of resnet18, resnet152"),
    (MODEL, 18, '-S x=18: expected one of resnet18, resnet152'),
    (AMP, 'maybe', "-S x='maybe': expected true or false"),
    (AMP, 1, '-S x=1: expected true or false'),
    # not a number, or no finite one: `nan` passed every bound, and -S slow_rank_fraction=nan
    # turned the rule off
    (FRACTION, 'nan', "-S x='nan': expected a number >= 0 and <= 1"),
    (THROTTLE, 'NaN', "-S x='NaN': expected a number >= 0 and < 1"),
    (Knob(30.0, minimum=0), 'inf', "-S x='inf': expected a number >= 0"),
    (Knob(30.0), '-inf', "-S x='-inf': expected a number"),
    (Knob(30.0), float('nan'), '-S x=nan: expected a number'),
])
def test_bad_values_are_one_line_errors_saying_what_is_accepted(knob, given, message):
    with pytest.raises(ValueError) as err:
        knob.parse(given, '-S x', from_text=True)
    assert str(err.value) == message


def test_given_beats_configured_beats_default():
    knobs = {'epochs': EPOCHS, 'amp': AMP, 'model': MODEL}
    values = knob_values(knobs, {'epochs': '7', 'amp': None, 'model': None},
                         {'epochs': 5, 'amp': True}, 'partition p extras.mlcheck.checks.c')
    assert values == {'epochs': 7, 'amp': True, 'model': 'resnet152'}


def test_a_value_given_with_S_beats_the_config_even_when_it_is_the_default():
    """An unset variable holds Unset(default), so --describe shows the default; -S 3 still wins."""
    assert knob_values({'epochs': EPOCHS}, {'epochs': '3'}, {'epochs': 5}, 'c') == {'epochs': 3}
    assert knob_values({'epochs': EPOCHS}, {'epochs': Unset(3)}, {'epochs': 5}, 'c') == {'epochs': 5}
    assert knob_values({'epochs': EPOCHS}, {'epochs': Unset(3)}, {}, 'c') == {'epochs': 3}


def test_program_flags_come_from_the_knob_name_unless_given():
    knobs = {'batch_size': Knob(64), 'min_bytes': Knob(8, flag=('--min-bytes', '--latency-bytes')),
             'limit': Knob(0.0, flag=None), 'channels_last': Knob(False),
             'slowdown': Knob(0.0, omit_default=True), 'model': Knob('resnet18', flag='--arch')}
    values = dict(batch_size=32, min_bytes=16, limit=9.5, channels_last=True, slowdown=0.0, model='resnet50')
    assert knob_arguments(knobs, type('Check', (), values)) == [
        '--batch-size', '32', '--min-bytes', '16', '--latency-bytes', '16', '--channels-last', '--arch', 'resnet50']
    values.update(channels_last=False, slowdown=0.25)
    assert knob_arguments(knobs, type('Check', (), values)) == [
        '--batch-size', '32', '--min-bytes', '16', '--latency-bytes', '16', '--slowdown', '0.25', '--arch', 'resnet50']


def test_declared_knobs_are_reframe_variables_holding_their_default():
    class Check(rfm.RunOnlyRegressionTest):
        knobs = {'epochs': EPOCHS, 'amp': AMP}
        declare_knobs(locals(), knobs)
        declare_knobs(locals(), {'fraction': FRACTION}, partition_wide=True)

    variables = Check._rfm_var_space
    assert isinstance(variables['epochs'].default_value, Unset) and variables['epochs'].default_value.default == 3
    assert variables['amp'].default_value.__rfm_json_encode__() is False       # what --describe shows
    assert variables['fraction'].default_value is None       # the partition's, unknown until setup


def test_the_knob_tables_are_the_ones_generated_from_the_checks():
    page = pathlib.Path(knob_table.PAGE).read_text()
    assert knob_table.page_with_tables(page) == page, 'run: python -m mlcheck.harness.knob_table --write'


def test_configured_values_are_named_by_their_key():
    with pytest.raises(ConfigError, match=r"^partition p extras.mlcheck.checks.c.epochs='3': expected"):
        knob_values({'epochs': EPOCHS}, {}, {'epochs': '3'}, 'partition p extras.mlcheck.checks.c')
    with pytest.raises(ConfigError, match='^partition p extras.mlcheck.checks.c: unknown key.s. epoch; '
                                          'allowed: epochs$'):
        knob_values({'epochs': EPOCHS}, {}, {'epoch': 3}, 'partition p extras.mlcheck.checks.c')


SIZES = {'min_bytes': Knob(8, minimum=1), 'max_bytes': Knob(1 << 30, minimum=1, at_least='min_bytes')}


def test_a_knob_below_the_one_it_must_not_be_below_is_a_one_line_error():
    with pytest.raises(ConfigError) as err:
        knob_values(SIZES, {'min_bytes': '4096', 'max_bytes': '1024'}, {}, 'c')
    assert str(err.value) == "-S max_bytes=1024 is below -S min_bytes=4096: expected max_bytes >= min_bytes"
    with pytest.raises(ConfigError) as err:
        knob_values(SIZES, {'min_bytes': str(1 << 31)}, {}, 'c')
    assert str(err.value) == (f'max_bytes (default)={1 << 30} is below -S min_bytes={1 << 31}: '
                              f'expected max_bytes >= min_bytes')
    with pytest.raises(ConfigError, match=r'^c.max_bytes=16 is below -S min_bytes=32: '):
        knob_values(SIZES, {'min_bytes': '32'}, {'max_bytes': 16}, 'c')
    assert knob_values(SIZES, {'min_bytes': '1024', 'max_bytes': '1024'}, {}, 'c') == \
        {'min_bytes': 1024, 'max_bytes': 1024}


def test_a_relation_to_no_knob_is_the_checks_own_error():
    with pytest.raises(ValueError, match="knob max_bytes: at_least names no knob of the check, 'min_byte'"):
        knob_values({'max_bytes': Knob(1, at_least='min_byte')}, {}, {}, 'c')


def test_the_interconnect_sweep_declares_its_sizes_in_order():
    assert program_knobs.INTERCONNECT['max_bytes'].at_least == 'min_bytes'


def test_a_bad_value_is_named_by_where_it_was_given():
    with pytest.raises(ConfigError, match=r"^-S epochs='0': expected an integer >= 1$"):
        knob_values({'epochs': EPOCHS}, {'epochs': '0'}, {}, 'c')
