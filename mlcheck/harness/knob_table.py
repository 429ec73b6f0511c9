"""docs/checks.md's tables of knobs, one per check, put together from the checks' `knobs` dicts,
and the defaults mlcheck-report fills in for runs recorded before a knob existed:

    python -m mlcheck.harness.knob_table            # print the tables
    python -m mlcheck.harness.knob_table --write    # rewrite them in docs/checks.md, and
                                                    # mlcheck/history/recorded_defaults.py

The checks are read as ReFrame loads them, under the simulated system (config/simulated.py): a
system with no mlcheck settings ends the loading with one line (mlcheck.harness.launch_check). Only the checks'
own `knobs` make the tables, so no site setting shows up in a default.
"""

import glob
import importlib.util
import json
import os
import sys

from mlcheck import REPO, generated_docs
from mlcheck.harness.knobs import TRUE
from mlcheck.harness.reframe_api import runtime_for

PAGE = os.path.join(REPO, 'docs', 'checks.md')
BEGIN = '<!-- knob tables: generated from the checks (python -m mlcheck.harness.knob_table --write) -->\n'
END = '<!-- end of generated knob tables -->\n'
DEFAULTS = os.path.join(REPO, 'mlcheck', 'history', 'recorded_defaults.py')


def check_classes():
    """The check classes of checks/*.py that have knobs, in file order."""
    runtime_for(os.path.join(REPO, 'config', 'simulated.py'), 'sim')
    classes = []
    for path in sorted(glob.glob(os.path.join(REPO, 'checks', '*.py'))):
        name = 'mlcheck_checks.' + os.path.basename(path)[:-3]
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module      # ReFrame finds a class's file through its module
            spec.loader.exec_module(module)
        classes += [cls for cls in vars(module).values()
                    if isinstance(cls, type) and cls.__module__ == name and getattr(cls, 'checks_key', '')]
    return classes


def recorded_defaults():
    """{check: {knob: what a run recorded before the knob existed ran, as a run records it}} of
    the checks' figure settings (mlcheck.history.settings): the knob's default, or its
    `before_it_existed`."""
    from mlcheck.figures.stack import settings_of

    def ran(knob):
        return knob.default if knob.before_it_existed is None else knob.before_it_existed
    return {cls.__name__: dict(item.split('=', 1) for item in settings_of(
                type('Defaults', (), {n: ran(k) for n, k in cls.knobs.items()}),
                [n for n in cls.figure_settings if n in cls.knobs]).split(';') if item)
            for cls in check_classes()}


def defaults_module():
    """The text of DEFAULTS: recorded_defaults() as a module the report imports without ReFrame."""
    return ('"""What a run recorded before a knob existed ran: {check: {knob: value as a run records\n'
            'it}} (mlcheck.history.settings). Generated from the checks by `python -m\n'
            'mlcheck.harness.knob_table --write` (a test ties the two); mlcheck-report reads it, where\n'
            'ReFrame may not be installed. Do not edit."""\n\n'
            f'RECORDED_DEFAULTS = {json.dumps(recorded_defaults(), indent=4)}\n')


def shown(value):
    """A default as -S writes it."""
    return TRUE[0] if value is True else 'false' if value is False else str(value)


def table(cls):
    """The knobs of one check: its own, those of its kind, those defaulting to the partition's."""
    rows = [f'### {cls.__name__}: `-S <knob>=<value>`, or `extras.mlcheck.checks.{cls.checks_key}.<knob>`', '',
            '| knob | default | accepts | meaning | program flag |', '|---|---|---|---|---|']
    partition_wide = getattr(cls, 'partition_wide_knobs', {})
    for name, knob in {**cls.knobs, **cls.common_knobs, **partition_wide}.items():
        default = (f'`extras.mlcheck.{name}` (unset there: `{shown(knob.default)}`)' if name in partition_wide
                   else f'`{shown(knob.default)}`')
        flags = ' '.join(f'`{flag}`' for flag in knob.flags(name))
        when = (' when true' + (', `--no-' + knob.flags(name)[0][2:] + '` when false' if knob.default else '')
                if knob.kind is bool else f' when not {knob.default}' if knob.omit_default else '')
        flag = f'{flags}{when}' if flags else 'none' if name in cls.knobs else 'none (the launch)'
        rows.append(f'| `{name}` | {default} | {knob.accepts()} | {knob.help} | {flag} |')
    return '\n'.join(rows) + '\n'


def tables():
    return '\n'.join(table(cls) for cls in check_classes())


def page_with_tables(text):
    """`text` (docs/checks.md) with the tables between the markers replaced by tables()."""
    return generated_docs.with_section(text, BEGIN, END, tables())


if __name__ == '__main__':
    generated_docs.main(PAGE, BEGIN, END, tables)
    if sys.argv[1:] == ['--write']:
        with open(DEFAULTS, 'w') as f:
            f.write(defaults_module())
