"""The JSON Schema of a partition's site settings, `extras: {'mlcheck': {...}}`, and its checking.

Adding a key is one entry under SCHEMA['properties'] (its type, its constraints and a
description); PartitionSettings then takes it, and docs/sites.md's key table is generated from it:

    python -m mlcheck.site.schema            # print the table
    python -m mlcheck.site.schema --write    # rewrite it in docs/sites.md

Errors stay one line naming the partition and the key: `partition lumi:standard-g
extras.mlcheck.node_counts[1]: expected int, got str '2'`. What a schema cannot say (a topology
whose GPUs do not fit its domains, a regular expression that does not compile) is checked where
the value is used (mlcheck.placement.topology, mlcheck.site.settings).
"""

import os

import jsonschema

from mlcheck import REPO, generated_docs
from mlcheck.errors import ConfigError

STRING_LIST = {'type': 'array', 'items': {'type': 'string'}}
ENV_NAME = '^[A-Za-z_][A-Za-z0-9_]*$'
ENV_VALUES = {'type': 'object', 'propertyNames': {'pattern': ENV_NAME}, 'additionalProperties': {'type': 'string'}}

TOPOLOGY = {
    'type': 'object',
    'description': '`cores_per_domain`; `gpu_domains[i]`, the CPU domain nearest GPU i; '
                   '`reserved_cores_per_domain` (offsets kept for the system); optional `cores_per_node`',
    'required': ['cores_per_domain', 'gpu_domains'],
    'additionalProperties': False,
    'properties': {
        'cores_per_domain': {'type': 'integer', 'minimum': 1},
        'gpu_domains': {'type': 'array', 'items': {'type': 'integer', 'minimum': 0}, 'minItems': 1},
        'reserved_cores_per_domain': {'type': 'array', 'items': {'type': 'integer', 'minimum': 0}},
        'cores_per_node': {'type': 'integer', 'minimum': 0},
    },
}

IMAGE_ENTRY = {
    # a plain string is a path, a glob, a runtime's reference or 'host'; a mapping adds settings
    'type': ['string', 'object'],
    'required': ['path'],
    'additionalProperties': False,
    'properties': {
        'path': {'type': 'string'},
        'env_vars': ENV_VALUES,
        'python': {'type': 'string'},
        'rank_prelude': {'type': 'string'},
        'expected_failure': {'type': 'string', 'minLength': 1},
    },
}

# the dotted keys of an EDF's [annotations], e.g. com.hooks.aws_ofi_nccl.enabled (TOML bare keys)
ANNOTATION_KEY = r'^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$'

EDF = {
    'type': 'object',
    'additionalProperties': False,
    'properties': {
        'env': ENV_VALUES,
        'annotations': {'type': 'object', 'propertyNames': {'pattern': ANNOTATION_KEY},
                        'additionalProperties': {'type': 'string'}},
    },
    'description': "the Container Engine's environment definition (`ContainerEngine` partitions "
                   'only): `env`, variables that win over the image\'s, and `annotations` (hooks, '
                   "e.g. `com.hooks.aws_ofi_nccl.enabled`); an image entry's `env_vars` join `env`",
}

# A host layer candidate's name: a word of `-S compare_layers=NAME`, recorded in run_settings
# (whose fields are split by ';' and perf log fields by '|')
LAYER_NAME = r'^[A-Za-z0-9][A-Za-z0-9._+-]*$'
HOST_LAYER = {
    'type': 'object',
    'additionalProperties': False,
    'minProperties': 1,
    'properties': {
        'binds': STRING_LIST,
        'env_vars': ENV_VALUES,
        'annotations': EDF['properties']['annotations'],
    },
}

# The checks' `checks_key`s (checks/*.py): the keys of extras.mlcheck.checks, so that a mistyped
# one (`cifar-100`) is an error, not a check silently run with its defaults. Listed here, not read
# from the checks, because the config is loaded before (and without) the ReFrame checks;
# tests/test_site_schema.py ties the list to the checks.
CHECK_KEYS = ('cifar100', 'interconnect', 'mnist')
KNOB_VALUES = {'type': 'object', 'additionalProperties': {'type': ['string', 'integer', 'number', 'boolean']}}

SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'required': ['topology'],
    'additionalProperties': False,
    'properties': {
        'topology': TOPOLOGY,
        'gpu_vendor': {
            'enum': ['amd', 'nvidia', 'stand-in', 'none'], 'default': 'none',
            'description': '`amd` (ROCR_VISIBLE_DEVICES, private MIOpen cache), `nvidia` '
                           '(CUDA_VISIBLE_DEVICES), `stand-in` (GPUs that Slurm schedules but the '
                           'ranks train on CPUs: the simulated partition) or `none`'},
        'binding': {
            'enum': ['by_gpu', 'by_domain'], 'default': 'by_gpu',
            'description': 'how tasks meet GPUs (docs/placement.md): `by_gpu`, task i drives GPU i on '
                           'the cores nearest it; `by_domain`, task i runs on CPU domain i and drives '
                           'its GPU (`--gpu-bind=map_gpu`); `-S binding=` for one run'},
        'gpu_task_sharing': {
            'type': 'boolean', 'default': False,
            'description': '`--gres-flags=allow-task-sharing` with `by_domain` (Slurm >= 23.11), so '
                           "NCCL/RCCL still reaches the node's other GPUs"},
        'slow_rank_fraction': {
            'type': 'number', 'minimum': 0, 'maximum': 1, 'default': 0.8,
            'description': "a rank training alone below this fraction of the ranks' upper quartile "
                           'fails the check (0: off); `-S slow_rank_fraction=` for one run (docs/per-rank.md)'},
        'ab_threshold': {
            'type': 'number', 'exclusiveMinimum': 0, 'maximum': 1, 'default': 0.05,
            'description': "the A/B verdict's threshold on B/A (`-S compare_with=`, docs/ab-images.md): "
                           'the smallest change that matters, at least what an A=A control on this '
                           'partition says it supports with `ab_rounds` rounds, with its figures beside it'},
        'ab_threshold_ceiling': {
            'type': 'number', 'exclusiveMinimum': 0, 'maximum': 1, 'default': 0.1,
            'description': 'the most the A/B threshold may be, an A=A control\'s included: a partition '
                           'noisier than this is inconclusive rather than blind to a larger slowdown'},
        'machine_speed': {
            'anyOf': [{'type': 'number', 'exclusiveMinimum': 0}, {'enum': ['measured']}],
            'description': "this machine's rate now of the workload whose rate the references file "
                           'records as `$machine_speed`; the references of the figures it names '
                           'follow the ratio (the simulated partition, whose cores are whatever '
                           'machine runs it: mlcheck.simulated.speed); `measured`: measured when '
                           "the first test of the partition is set up, not when the config is "
                           'loaded; real sites leave it out'},
        'gpu_peak_tflops': {
            'type': 'object', 'additionalProperties': False, 'default': {},
            'properties': {key: {'type': 'number', 'exclusiveMinimum': 0} for key in ('fp32', 'bf16')},
            'description': "one GPU's peak TFLOP/s (dense; an MI250X's GCD, not its package) at the "
                           'precision training uses: `fp32` (where cuDNN runs fp32 convolutions as '
                           'TF32, its default in torch, the TF32 tensor-core peak) and `bf16` '
                           '(autocast, `-S amp=true`); the CIFAR-100 check reports model FLOP/s as a '
                           "percentage of it, and not at all without it; cite the vendor's source "
                           'beside each number'},
        'node_counts': {
            'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 1, 'default': [1],
            'description': 'node counts to test'},
        'max_nodes': {
            'type': 'integer', 'minimum': 1,
            'description': 'the most nodes one job can get; `-P num_nodes` beyond it is an error at setup'},
        'images': {
            'type': 'array', 'items': IMAGE_ENTRY, 'default': [],
            'description': 'image paths or globs (the test name is the file name without `.sif`), '
                           "runtime references (Shifter's `docker:...`), `host` for the partition's "
                           "own Python; or entries `{'path': ..., 'env_vars': {...}, 'python': ..., "
                           "'rank_prelude': ..., 'expected_failure': REASON}`; an image given with "
                           '`-P image=PATH` is named the same way, so it shares the references and '
                           'history of the configured image of that name, and one without references '
                           'names its figures `... not judged` in ReFrame\'s output'},
        'container_binds': {
            **STRING_LIST, 'default': [],
            'description': '`path` or `host:container` binds'},
        'container_options': {
            **STRING_LIST, 'default': [],
            'description': "extra options of the container command (Perlmutter: `--module=gpu,nccl-plugin`)"},
        'edf': EDF,
        'host_layer_candidates': {
            'type': 'object', 'default': {},
            'propertyNames': {'pattern': LAYER_NAME},
            'additionalProperties': HOST_LAYER,
            'description': "candidate host layers by name, each compared with the partition's current "
                           'one by `-S compare_layers=NAME` (docs/ab-images.md): `binds` (`path` or '
                           '`host:container`, added to `container_binds`, replacing one to the same '
                           'container path), `env_vars` (over the image\'s and `edf.env`), and on a '
                           '`ContainerEngine` partition `annotations` (over `edf.annotations`)'},
        'datasets': {
            'type': 'object', 'additionalProperties': {'type': 'string'}, 'default': {},
            'description': 'staged dataset directories by name (`mnist`: the directory holding '
                           '`MNIST/raw/`; `cifar100`: the one holding `cifar-100-python/`)'},
        'trusts_dataset_writers': {
            'type': 'boolean', 'default': False,
            'description': "the dataset directories' other writers are trusted (a group-writable "
                           'project directory): without it, a CIFAR-100 file owned by another user '
                           'or writable by its group or others is refused (docs/security.md)'},
        'trusts_perflog_writers': {
            'type': 'boolean', 'default': False,
            'description': "the perf log directory's other writers are trusted (a group's project "
                           'directory): without it, a perf log folder that another user can change '
                           '(owned by them, or writable by its group or others without the sticky '
                           'bit, up to /) is refused before the session runs (docs/security.md)'},
        'python': {
            'type': 'string', 'default': 'python3',
            'description': 'the interpreter inside the images'},
        'host_python': {
            'type': 'string', 'default': 'python3',
            'description': 'the interpreter of the image `host` (no container)'},
        'data_mount': {
            'type': 'string',
            'description': 'where the dataset directory is bound inside the images (default: its host path)'},
        'rank_prelude': {
            'type': 'string', 'default': '',
            'description': "shell code each rank runs first, as a user's shell would (no `set -eu`; "
                           '`source` works where `/bin/sh` is dash); a non-zero final status stops the '
                           'rank, saying so'},
        'miopen_cache_root': {
            'type': 'string', 'default': '/tmp',
            'description': "node-local directory for the ranks' private MIOpen caches (AMD)"},
        'net_plugin': {
            'type': 'object',
            'required': ['used_pattern', 'provider_pattern', 'provider'],
            'additionalProperties': False,
            'properties': {**{name: {'type': 'string'} for name in
                              ('used_pattern', 'provider_pattern', 'provider', 'fallback_pattern',
                               'network_pattern', 'network')},
                           'from_nodes': {'type': 'integer', 'minimum': 1}},
            'description': 'how NCCL/RCCL shows its network plugin: `used_pattern`, `provider_pattern` '
                           '(group `provider`), `provider`, optional `fallback_pattern`, '
                           '`network_pattern` (group `network`) and `network`, the network every '
                           'communicator must end on; `from_nodes` (2), the node count from which '
                           'the plugin must be in use (docs/interconnect.md)'},
        'checks': {
            'type': 'object',
            'properties': {key: KNOB_VALUES for key in CHECK_KEYS},
            'additionalProperties': False,
            'default': {},
            'description': 'per-check knobs under ' + ', '.join(f'`{key}`' for key in CHECK_KEYS)
                           + ", e.g. `cifar100`: `{'model': 'resnet152', 'epochs': 3}` (the `knobs` of "
                           '`checks/*.py`, each also settable with `-S`)'},
    },
}

TYPE_WORDS = {'string': 'str', 'integer': 'int', 'number': 'number', 'boolean': 'bool',
              'array': 'list', 'object': 'mapping', 'null': 'None'}


# Python config files write lists as tuples too; a bool is no integer, nor 3.0 one
TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many({
    'array': lambda _, value: isinstance(value, (list, tuple)),
    'integer': lambda _, value: isinstance(value, int) and not isinstance(value, bool),
})
Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=TYPES)


def keys():
    """The keys a partition's extras.mlcheck may have."""
    return set(SCHEMA['properties'])


def validate(entry, where, schema=SCHEMA):
    """A ConfigError, one line naming `where` and the key, unless `entry` fits `schema`."""
    errors = list(Validator(schema).iter_errors(entry))
    if errors:
        error = min(errors, key=lambda e: (len(e.absolute_path), e.validator != 'required'))
        raise ConfigError(f'{where}{location(error.absolute_path)}: {explain(error)}')
    return entry


def location(path):
    return ''.join(f'[{part}]' if isinstance(part, int) else f'.{part}' for part in path)


def explain(error):
    """An error of jsonschema in words of this project."""
    value, kind = error.instance, error.validator
    if kind == 'additionalProperties' and isinstance(error.schema.get('properties'), dict):
        unknown = sorted(set(value) - set(error.schema['properties']))
        return f'unknown key(s) {", ".join(unknown)}; allowed: {", ".join(sorted(error.schema["properties"]))}'
    if kind == 'required':
        missing = sorted(set(error.validator_value) - set(value))
        return f'missing required key(s) {", ".join(missing)}'
    if kind == 'type':
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f'expected {" or ".join(TYPE_WORDS[k] for k in kinds)}, got {type(value).__name__} {value!r}'
    if kind == 'anyOf':
        return f'expected {accepted(error.schema)}, got {type(value).__name__} {value!r}'
    if kind == 'enum':
        return f'{value!r} is not one of {", ".join(map(str, error.validator_value))}'
    if kind == 'minimum':
        return f'{value!r} is less than {error.validator_value}'
    if kind == 'exclusiveMinimum':
        return f'{value!r} is not more than {error.validator_value}'
    if kind == 'maximum':
        return f'{value!r} is more than {error.validator_value}'
    if kind in ('minItems', 'minLength'):
        return f'empty; give at least {error.validator_value}'
    if kind == 'pattern' and error.validator_value == ANNOTATION_KEY:
        return f'{value!r} is not an annotation key (dotted words of letters, digits, _ and -)'
    if kind == 'pattern' and error.validator_value == LAYER_NAME:
        return f'{value!r} is not a layer name (a letter or digit, then letters, digits, ., _, + and -)'
    if kind == 'pattern':
        return f'{value!r} is not a variable name'
    if kind == 'minProperties':
        return 'empty; give at least one of its keys'
    return error.message


def accepted(prop):
    """What a key accepts, in words: `a` or `b`, a type, or either of its alternatives."""
    if 'anyOf' in prop:
        return ' or '.join(map(accepted, prop['anyOf']))
    return (' or '.join(f'`{v}`' for v in prop['enum']) if 'enum' in prop
            else TYPE_WORDS[prop['type']] if isinstance(prop.get('type'), str) else '')


def readme_table():
    """docs/sites.md's table of the keys, from the schema."""
    rows = ['| key | accepts | default | meaning |', '|---|---|---|---|']
    for name, prop in SCHEMA['properties'].items():
        accepts = accepted(prop)
        if prop.get('type') == 'array' and isinstance(prop['items'].get('type'), str):
            accepts = f'list of {TYPE_WORDS[prop["items"]["type"]]}'
        required = name in SCHEMA['required']
        default = 'required' if required else f'`{prop["default"]!r}`' if 'default' in prop else 'none'
        rows.append(f'| `{name}` | {accepts} | {default} | {prop["description"]} |')
    return '\n'.join(rows) + '\n'


KEY_TABLE_PAGE = os.path.join(REPO, 'docs', 'sites.md')
BEGIN = '<!-- extras.mlcheck keys: generated from mlcheck/site/schema.py (python -m mlcheck.site.schema --write) -->\n'
END = '<!-- end of generated key table -->\n'


def readme_with_table(text):
    """`text` (docs/sites.md) with the table between the markers replaced by readme_table()."""
    return generated_docs.with_section(text, BEGIN, END, readme_table())


if __name__ == '__main__':
    generated_docs.main(KEY_TABLE_PAGE, BEGIN, END, readme_table)
