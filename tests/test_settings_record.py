"""A setting recorded on one side only (issue 30): a baseline recorded before the CIFAR-100 `mode`
knob existed lacks `mode=` in its records, and every row was OTHER SETTINGS AFTER although the
runs were the same. Absent on one side and what the other side ran before the knob existed, it
is the same setting; anything else still is not."""

import dataclasses

from command_line import run_report
from mlcheck.harness import knob_table
from mlcheck.history import compare, settings
from mlcheck.history.samples import Sample
from perflogs import write_perflog

OLD = 'model=resnet152;batch_size=128;epochs=3;steps=0;warmup_steps=10;workers=4;amp=False;channels_last=False'
NEW = ('model=resnet152;batch_size=128;epochs=3;steps=0;warmup_steps=10;workers=4;data=loader;'
       'augment=False;amp=False;channels_last=False;mode=ddp')


def cifar(settings_text, values, start=0.0):
    return [Sample(partition='sim:cluster', name='CIFAR100ResNetCheck %image=host %num_nodes=1',
                   image='host', num_nodes=1, var='images_per_s', value=v, unit='images/s',
                   time=start + 60 * i, jobid=str(i), result='pass', settings=settings_text)
            for i, v in enumerate(values)]


def verdicts(out):
    return {line.rsplit('  ', 1)[-1].strip() for line in out.splitlines() if line.startswith('sim:cluster')}


def test_a_baseline_recorded_before_the_knobs_compares_with_runs_at_what_ran_then(tmp_path, capsys):
    before = write_perflog(tmp_path / 'before.log', cifar(OLD, [200, 201, 199]))
    after = write_perflog(tmp_path / 'after.log', cifar(NEW, [200, 202, 198], 1e6))
    code, out, _ = run_report(capsys, before, after)
    assert verdicts(out) == {compare.UNCHANGED} and code == 0
    assert ('settings recorded on one side only (a knob newer than the runs), taken at their '
            'default: CIFAR100ResNetCheck augment=False, CIFAR100ResNetCheck data=loader, '
            'CIFAR100ResNetCheck mode=ddp') in out


def test_a_run_at_another_value_of_the_new_knob_is_still_other_settings(tmp_path, capsys):
    """The device data path did not exist before: runs of it are not the old runs."""
    before = write_perflog(tmp_path / 'before.log', cifar(OLD, [200, 201, 199]))
    after = write_perflog(tmp_path / 'after.log', cifar(NEW.replace('data=loader', 'data=device'),
                                                         [300, 301, 299], 1e6))
    code, out, _ = run_report(capsys, before, after)
    assert compare.OTHER_SETTINGS in verdicts(out) and code == 1


def test_the_filling_keeps_order_and_leaves_full_records_alone():
    mixed = cifar(OLD, [1.0]) + cifar(NEW, [2.0]) + [dataclasses.replace(cifar(OLD, [3.0])[0], settings='')]
    filled, said = settings.with_defaults(mixed, knob_table.recorded_defaults())
    assert [s.value for s in filled] == [1.0, 2.0, 3.0]
    assert filled[0].settings == NEW and filled[1] is mixed[1] and filled[2].settings == ''
    assert [name for _, name, _ in said] == ['augment', 'data', 'mode']
