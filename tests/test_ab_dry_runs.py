"""-S compare_with in dry runs of the sites' configs: the job runs rounds of steps of both images,
A B B A, each through the site's own container runtime with the image's own settings (LUMI's
Singularity with each image's RCCL variables, Alps's Container Engine with one EDF per image,
Pyxis's --container-image), and an image the partition does not know is refused at setup.
"""

import json
import re
import tomllib

from conftest import srun_line
from mlcheck.data.staging import stage_mnist
from reframe_runner import NEW_IMAGE, OLD_IMAGE, dry_run_scripts, lumi_config_under, run_reframe

OTHER_NGC = 'nvcr.io#nvidia/pytorch:25.10-py3'
STEPS = ['a 0', 'b 1', 'b 2', 'a 3']       # 2 rounds: A B, B A


def step_functions(script):
    """{'a' | 'b': the body of the function running that side's step}."""
    return dict(re.findall(r'^mlcheck_ab_step_(a|b)\(\) \{\n(.*?)\n\}$', script, re.M | re.S))


def steps_run(script):
    return re.findall(r'^mlcheck_ab_step_(\w \d+) >ab/r\d\d-[AB]\.out', script, re.M)


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
                              '-S', 'compare_with=host', '-S', 'ab_rounds=2')
    # the training checks' steps time no rank alone: a slow rank slows both images alike
    short = {'MNISTDistributedCheck': ['--epochs 2 --batch-size 64 --solo-steps 0 --ranks-per-node 2 --steps 20'],
             'CIFAR100ResNetCheck': ['--epochs 2 --steps 20', '--solo-steps 0'],
             'InterconnectCheck': ['--max-iters 20 --blocks 3']}
    for (check, _), (script, stagedir) in scripts.items():
        assert steps_run(script) == STEPS
        assert all(words in body for body in step_functions(script).values() for words in short[check])
        # recorded with every figure, so that A/B runs are compared only with their like
        recorded = json.loads((stagedir / '.rfm_testcase.json').read_text())['run_settings']
        assert recorded.endswith(';compare_with=host;ab_rounds=2'), recorded
