"""-S compare_with in dry runs of the sites' configs: the job runs rounds of steps of both images,
A B B A, each through the site's own container runtime with the image's own settings (LUMI's
Singularity with each image's RCCL variables, Alps's Container Engine with one EDF per image,
Pyxis's --container-image), and an image the partition does not know is refused at setup.
-S compare_layers: the same rounds of one image, B with a candidate host layer's binds,
variables and annotations (config/lumi.py, config/alps.py) and A without them; an unknown
candidate, both knobs at once and a malformed candidate are one-line errors.
"""

import copy
import glob
import json
import pathlib
import re
import subprocess
import tempfile
import tomllib

import pytest

from conftest import partition_entry, srun_line
from mlcheck.ab import rounds
from mlcheck.data.staging import stage_mnist
from mlcheck.errors import ConfigError
from mlcheck.site.settings import PartitionSettings
from reframe_runner import NEW_IMAGE, OLD_IMAGE, dry_run_scripts, lumi_config_under, run_reframe

OTHER_NGC = 'nvcr.io#nvidia/pytorch:25.10-py3'
STEPS = ['a 0', 'b 1', 'b 2', 'a 3']       # 2 rounds: A B, B A


def step_functions(script):
    """{'a' | 'b': the body of the function running that side's step}."""
    return dict(re.findall(r'^mlcheck_ab_step_(a|b)\(\) \{\n(.*?)\n\}$', script, re.M | re.S))


def steps_run(script):
    """The steps the job's rounds run, in order ('a 0': side A's step function, step index 0):
    the script's rounds run in bash, each step function a stub that says its side and index."""
    rounds_part = script[script.index(f'{rounds.RUN}() {{'):script.rindex('\ndone') + len('\ndone')]
    stubs = 'mlcheck_ab_step_a() { echo "a $1"; }\nmlcheck_ab_step_b() { echo "b $1"; }\n'
    with tempfile.TemporaryDirectory() as where:
        subprocess.run(['bash', '-c', stubs + rounds_part], cwd=where, check=True)
        said = [pathlib.Path(path).read_text().strip() for path in glob.glob(f'{where}/ab/r*.out')]
    return sorted(said, key=lambda step: int(step.split()[1]))


def recorded_settings(stagedir):
    return json.loads((stagedir / '.rfm_testcase.json').read_text())['run_settings']


def ab_script(config, system, tmp, *args):
    scripts = dry_run_scripts(config, system, tmp, '-n', 'MNIST', '-P', 'num_nodes=2',
                              '-S', 'ab_rounds=2', *args)
    (script, stagedir), = scripts.values()
    assert steps_run(script) == STEPS
    # the site's launcher line, with the job's masks, runs every step
    assert srun_line(script).endswith(' "$@"') and '--cpu-bind=mask_cpu:' in srun_line(script)
    return script, stagedir


def test_lumi_steps_run_each_image_with_its_own_rccl_settings(tmp_path):
    config = lumi_config_under(tmp_path)
    script, _ = ab_script(config, 'lumi:standard-g', tmp_path, '-P', f'image={tmp_path / NEW_IMAGE}',
                          '-S', f'compare_with={tmp_path / OLD_IMAGE}')
    steps = step_functions(script)
    assert 'singularity exec' in steps['a'] and str(tmp_path / OLD_IMAGE) in steps['a']
    assert str(tmp_path / NEW_IMAGE) in steps['b'] and str(tmp_path / OLD_IMAGE) not in steps['b']
    # each image's own variables (config/lumi.py) in its steps only, none job-wide
    assert script.count('NCCL_NET_GDR_LEVEL') == 1 and "export NCCL_NET_GDR_LEVEL='PHB'" in steps['a']
    assert script.count('FI_MR_CACHE_MONITOR') == 1 and 'FI_MR_CACHE_MONITOR' in steps['b']
    assert all(' --epochs 2 ' in steps[side] and '--epochs 10' not in steps[side] for side in 'ab')


def test_alps_writes_one_environment_definition_per_image(tmp_path):
    script, stagedir = ab_script('alps', 'daint:normal', tmp_path, '-S', f'compare_with={OTHER_NGC}')
    steps = step_functions(script)
    for side, image in (('A', OTHER_NGC), ('B', 'nvcr.io#nvidia/pytorch:25.11-py3')):
        edf = stagedir / f'rfm_env_{side}.toml'
        assert f'--environment={edf}' in steps[side.lower()]
        assert tomllib.loads(edf.read_text())['image'] == image


def test_pyxis_steps_name_each_image(tmp_path):
    steps = step_functions(ab_script('dgx', 'dgx:batch', tmp_path, '-S', f'compare_with={OTHER_NGC}')[0])
    assert f'--container-image={OTHER_NGC}' in steps['a']
    assert '--container-image=nvcr.io#nvidia/pytorch:25.11-py3' in steps['b']


def test_an_image_the_partition_does_not_know_is_refused_at_setup(tmp_path):
    stage_mnist(str(tmp_path / 'data'))
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', 'image=host', '-S', f'data_dir={tmp_path / "data"}', '-S', 'compare_with=torch-0.1')
    assert done.returncode != 0
    reasons = [line for line in done.stdout.splitlines() if 'compare_with' in line and 'Reason' in line]
    assert reasons and "image 'torch-0.1' is not configured for partition sim:cluster" in reasons[0], done.stdout


def test_each_check_runs_its_own_short_steps(tmp_path):
    scripts = dry_run_scripts('simulated', 'sim:cluster', tmp_path, '-P', 'num_nodes=2', '-P', 'image=host',
                              '-S', 'compare_with=host', '-S', 'ab_rounds=6')     # a control: 6 at least
    # the training checks' steps time no rank alone: a slow rank slows both images alike
    short = {'MNISTDistributedCheck': ['--epochs 2 --batch-size 64 --solo-steps 0 --ranks-per-node 2 --steps 20'],
             'CIFAR100ResNetCheck': ['--epochs 2 --steps 20', '--solo-steps 0'],
             'InterconnectCheck': ['--max-iters 20 --blocks 3']}
    for (check, _), (script, stagedir) in scripts.items():
        assert steps_run(script) == [f'{side.lower()} {i}' for i, (_, side) in enumerate(rounds.order(6))]
        assert all(words in body for body in step_functions(script).values() for words in short[check])
        # the job's looks read the check's main rate at the partition's threshold, and its time
        # limit follows the rounds: 5 minutes and 60 s for each of the 2 x 6 steps and 2 warm-up steps
        fact = {'MNISTDistributedCheck': 'samples_per_s', 'CIFAR100ResNetCheck': 'samples_per_s',
                'InterconnectCheck': 'busbw'}[check]
        assert f' -m mlcheck.ab.look --fact {fact} --threshold 0.03 --most 6 --false-slower 0.05 ' in script
        assert '#SBATCH --time=0:19:0' in script
        # recorded with every figure, the comparison and not the rounds (a most), so that A/B
        # runs of one pair are compared whatever their rounds
        recorded = recorded_settings(stagedir)
        assert recorded.endswith(';compare_with=host'), recorded


LAYER = 'aws-ofi-nccl'      # the candidate host layer of config/lumi.py and config/alps.py


def test_lumi_layer_steps_bind_the_candidate_in_side_b_only(tmp_path):
    config = lumi_config_under(tmp_path)
    image, plugin = tmp_path / NEW_IMAGE, tmp_path / 'appl/local/mlcheck/candidates/aws-ofi-nccl'
    script, stagedir = ab_script(config, 'lumi:standard-g', tmp_path, '-P', f'image={image}',
                                 '-S', f'compare_layers={LAYER}')
    steps = step_functions(script)
    # one image, both sides; its own variables in both steps, the candidate's in B's only
    assert all(f'singularity exec' in steps[side] and str(image) in steps[side] for side in 'ab')
    assert all('FI_MR_CACHE_MONITOR' in steps[side] for side in 'ab')
    assert f'-B"{plugin}:{plugin}"' in steps['b'] and f"export NCCL_NET_PLUGIN='{plugin}/lib/librccl-net.so'" in steps['b']
    assert str(plugin) not in steps['a'] and 'NCCL_NET_PLUGIN' not in steps['a']
    # the current layer's binds stay on both sides
    assert all('-B"/opt/cray:/opt/cray"' in steps[side] for side in 'ab')
    assert recorded_settings(stagedir).endswith(f';compare_layers={LAYER}')


def test_alps_layer_writes_the_candidate_into_side_bs_environment_definition_only(tmp_path):
    script, stagedir = ab_script('alps', 'daint:normal', tmp_path, '-S', f'compare_layers={LAYER}')
    steps = step_functions(script)
    edf = {side: tomllib.loads((stagedir / f'rfm_env_{side}.toml').read_text()) for side in 'AB'}
    assert all(f'--environment={stagedir / f"rfm_env_{side}.toml"}' in steps[side.lower()] for side in 'AB')
    assert edf['A']['image'] == edf['B']['image'] == 'nvcr.io#nvidia/pytorch:25.11-py3'
    plugin = '/capstor/store/cscs/mlcheck/candidates/aws-ofi-nccl'
    assert f'{plugin}:{plugin}' in edf['B']['mounts'] and f'{plugin}:{plugin}' not in edf['A']['mounts']
    assert edf['B']['env']['NCCL_NET_PLUGIN'] == f'{plugin}/lib/libnccl-net.so' and 'NCCL_NET_PLUGIN' not in edf['A']['env']
    hooks = {side: edf[side]['annotations']['com']['hooks'] for side in 'AB'}
    assert hooks['A']['aws_ofi_nccl']['enabled'] == 'true' and 'cxi' not in hooks['A']
    assert hooks['B']['aws_ofi_nccl']['enabled'] == 'false' and hooks['B']['cxi']['enabled'] == 'true'
    # the partition's own [env] on both sides
    assert edf['A']['env']['NCCL_NET'] == edf['B']['env']['NCCL_NET'] == 'AWS Libfabric'
    assert recorded_settings(stagedir).endswith(f';compare_layers={LAYER}')


def refusal(tmp_path, *knobs):
    """The one line saying why a LUMI dry run with `knobs` stopped at setup."""
    stage_mnist(str(tmp_path / 'data'))
    config = lumi_config_under(tmp_path)
    done = run_reframe(config, tmp_path / 'rfm', '--system', 'lumi:standard-g', '--dry-run', '-n', 'MNIST',
                       '-P', 'num_nodes=2', '-P', f'image={tmp_path / NEW_IMAGE}',
                       '-S', f'data_dir={tmp_path / "data"}', *knobs)
    assert done.returncode != 0
    reasons = [line for line in done.stdout.splitlines() if 'Reason' in line and '-S compare_' in line]
    assert reasons, done.stdout[-3000:]
    return reasons[0]


def test_an_unknown_layer_is_refused_at_setup_naming_the_declared_ones(tmp_path):
    assert ("-S compare_layers=aws-ofi-rccl-2: partition lumi:standard-g declares no host layer "
            "'aws-ofi-rccl-2' (extras.mlcheck.host_layer_candidates: aws-ofi-nccl)"
            in refusal(tmp_path, '-S', 'compare_layers=aws-ofi-rccl-2'))


def test_an_image_and_a_layer_comparison_at_once_are_refused_at_setup(tmp_path):
    assert (f'-S compare_with={tmp_path / OLD_IMAGE} -S compare_layers={LAYER}: one comparison a run'
            in refusal(tmp_path, '-S', f'compare_with={tmp_path / OLD_IMAGE}', '-S', f'compare_layers={LAYER}'))


@pytest.mark.parametrize('site, partition, runtime, candidates, message', [
    ('lumi', 'lumi:standard-g', 'Singularity', {'new': {'bind': ['/opt/x']}},
     'host_layer_candidates.new: unknown key(s) bind; allowed: annotations, binds, env_vars'),
    ('lumi', 'lumi:standard-g', 'Singularity', {'new;plugin': {'binds': ['/opt/x']}},
     "host_layer_candidates: 'new;plugin' is not a layer name"),
    ('lumi', 'lumi:standard-g', 'Singularity', {'new': {'env_vars': {'NCCL_NET_PLUGIN': 1}}},
     'host_layer_candidates.new.env_vars.NCCL_NET_PLUGIN: expected str, got int 1'),
    ('lumi', 'lumi:standard-g', 'Singularity', {'new': {}}, 'host_layer_candidates.new: empty'),
    ('lumi', 'lumi:standard-g', 'Singularity', {'new': {'annotations': {'com.hooks.cxi.enabled': 'true'}}},
     'host_layer_candidates.new.annotations: only a partition whose container_platforms type is ContainerEngine'),
    ('alps', 'daint:normal', 'ContainerEngine', {'new': {'binds': '/opt/x'}},
     'host_layer_candidates.new.binds: expected list, got str'),
])
def test_a_malformed_candidate_is_a_one_line_config_error(site, partition, runtime, candidates, message):
    extras = copy.deepcopy(partition_entry(site, partition)['extras'])
    extras['mlcheck']['host_layer_candidates'] = candidates
    with pytest.raises(ConfigError) as err:
        PartitionSettings.from_extras(partition, extras, runtime)
    assert str(err.value).startswith(f'partition {partition} extras.mlcheck.') and '\n' not in str(err.value)
    assert message in str(err.value), str(err.value)


def test_a_candidate_replaces_the_bind_to_its_container_path_and_the_variables_it_names():
    extras = copy.deepcopy(partition_entry('lumi', 'lumi:standard-g')['extras'])
    extras['mlcheck']['host_layer_candidates'] = {'cray-next': {
        'binds': ['/opt/cray-next:/opt/cray'], 'env_vars': {'FI_MR_CACHE_MONITOR': 'memhooks'}}}
    current = PartitionSettings.from_extras('lumi:standard-g', extras, 'Singularity')
    layered = current.with_host_layer('cray-next')
    assert ('/opt/cray-next', '/opt/cray') in layered.bind_mounts(None)
    assert ('/opt/cray', '/opt/cray') not in layered.bind_mounts(None)
    assert ('/var/spool/slurmd', '/var/spool/slurmd') in layered.bind_mounts(None)
    image = '/appl/local/laifs/containers/lumi-multitorch-x/lumi-multitorch-full-x.sif'
    assert current.image_env(image) == {'FI_MR_CACHE_MONITOR': 'userfaultfd'}
    assert layered.image_env(image) == {'FI_MR_CACHE_MONITOR': 'memhooks'}


def test_only_a_container_engine_partition_reads_an_environment_definition():
    # one predicate: the schema's refusal of EDF keys and the tables a platform is given both ask it
    lumi = PartitionSettings.from_extras('lumi:standard-g', partition_entry('lumi', 'lumi:standard-g')['extras'],
                                         'Singularity')
    assert not lumi.reads_edf and not lumi.with_host_layer(LAYER).reads_edf
    extras = copy.deepcopy(partition_entry('alps', 'daint:normal')['extras'])
    del extras['mlcheck']['edf']     # no tables of its own: still read, with each image's variables
    assert PartitionSettings.from_extras('daint:normal', extras, 'ContainerEngine').reads_edf
    assert PartitionSettings.from_extras('daint:normal', extras, 'containerengine').reads_edf


def test_a_control_of_fewer_rounds_than_the_first_look_is_refused_at_setup(tmp_path):
    """An A=A control at ab_rounds=5 was `slower` or `faster`, so failed, 9-10 % of the time
    (one look of 5 rounds with the whole 5 % a side): a control needs the first look's rounds."""
    stage_mnist(str(tmp_path / 'data'))
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', 'image=host', '-S', f'data_dir={tmp_path / "data"}', '-S', 'compare_with=host',
                       '-S', 'ab_rounds=5')
    assert done.returncode != 0
    reasons = [line for line in done.stdout.splitlines() if 'ab_rounds' in line and 'Reason' in line]
    assert reasons and '-S ab_rounds=5: an A=A control needs at least 6 rounds' in reasons[0], done.stdout
