"""The schema of extras.mlcheck: every key's wrong type and a typo'd key are one-line errors naming
the partition and the key; docs/sites.md's key table is the one generated from the schema."""

import ast
import copy
import dataclasses
import pathlib

import pytest

from conftest import REPO, partition_entry
from mlcheck.site import schema as site_schema
from mlcheck.errors import ConfigError
from mlcheck.site.settings import GPU_VENDORS, PartitionSettings

WRONG = {'string': 3, 'integer': '8', 'number': 'high', 'array': 'x', 'object': ['x'],
         'boolean': 'yes'}


def lumi_mlcheck():
    return copy.deepcopy(partition_entry('lumi', 'lumi:standard-g')['extras']['mlcheck'])


def error_for(mlcheck):
    with pytest.raises(ConfigError) as err:
        PartitionSettings.from_extras('lumi:standard-g', {'mlcheck': mlcheck}, 'Singularity')
    return str(err.value)


def wrong_value(prop):
    if 'enum' in prop:
        return 'intel'
    if 'anyOf' in prop:
        return [wrong_value(alternative) for alternative in prop['anyOf'] if 'type' in alternative][0]
    kind = prop['type']
    return WRONG[kind if isinstance(kind, str) else 'boolean']


@pytest.mark.parametrize('key', sorted(site_schema.keys()))
def test_each_key_with_a_wrong_type_is_a_one_line_error_naming_partition_and_key(key):
    mlcheck = lumi_mlcheck()
    mlcheck[key] = wrong_value(site_schema.SCHEMA['properties'][key])
    message = error_for(mlcheck)
    assert message.startswith(f'partition lumi:standard-g extras.mlcheck.{key}: ')
    assert ('expected ' in message or 'is not one of' in message) and '\n' not in message


@pytest.mark.parametrize('key', sorted(site_schema.TOPOLOGY['properties']))
def test_each_topology_key_with_a_wrong_type_names_it(key):
    mlcheck = lumi_mlcheck()
    mlcheck['topology'][key] = 'x'
    assert error_for(mlcheck).startswith(f'partition lumi:standard-g extras.mlcheck.topology.{key}: expected ')


@pytest.mark.parametrize('where, change, message', [
    ('', lambda m: m.update(node_count=[1]), 'extras.mlcheck: unknown key(s) node_count; allowed: ab_threshold, ab_threshold_ceiling, binding, checks, '),
    ('topology', lambda m: m['topology'].update(gpus=8), 'extras.mlcheck.topology: unknown key(s) gpus; '),
    ('net_plugin', lambda m: m['net_plugin'].update(provder='cxi'), 'extras.mlcheck.net_plugin: unknown key(s) provder;'),
    ('images', lambda m: m.update(images=[{'path': '/a.sif', 'env': {}}]), 'extras.mlcheck.images[0]: unknown key(s) env;'),
    ('checks', lambda m: m['checks'].update(cifar100={'epochs': [3]}), 'extras.mlcheck.checks.cifar100.epochs: expected '),
    ('max_nodes', lambda m: m.update(max_nodes=True), "extras.mlcheck.max_nodes: expected int, got bool True"),
    # a mistyped check ran that check with its defaults (issue 18 item 7)
    ('checks', lambda m: m['checks'].update({'cifar-100': {'model': 'resnet50'}}),
     'extras.mlcheck.checks: unknown key(s) cifar-100; allowed: cifar100, interconnect, mnist'),
    ('checks', lambda m: m['checks'].update(interconect=m['checks'].pop('interconnect')),
     'extras.mlcheck.checks: unknown key(s) interconect; allowed: cifar100, interconnect, mnist'),
])
def test_typos_and_nested_values_name_their_key(where, change, message):
    mlcheck = lumi_mlcheck()
    change(mlcheck)
    assert message in error_for(mlcheck)


def test_the_check_keys_are_the_checks_checks_keys():
    declared = {node.value.value for path in pathlib.Path(REPO, 'checks').glob('*.py')
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'checks_key'}
    assert declared == set(site_schema.CHECK_KEYS)


def test_the_key_table_is_the_one_generated_from_the_schema():
    readme = pathlib.Path(site_schema.KEY_TABLE_PAGE).read_text()
    assert site_schema.readme_with_table(readme) == readme, 'run: python -m mlcheck.site.schema --write'


def test_schema_defaults_are_the_settings_defaults():
    fields = {f.name: f for f in dataclasses.fields(PartitionSettings)}
    for key, prop in site_schema.SCHEMA['properties'].items():
        if 'default' in prop:
            field = fields[key]
            default = field.default_factory() if field.default is dataclasses.MISSING else field.default
            assert default == (tuple(prop['default']) if isinstance(prop['default'], list) else prop['default']), key
    assert set(site_schema.SCHEMA['properties']['gpu_vendor']['enum']) == set(GPU_VENDORS)
