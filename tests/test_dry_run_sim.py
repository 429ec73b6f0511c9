"""The job scripts generated for the simulated partition: the host's Python and Charliecloud images."""

import os
import re
import sys

import pytest

from conftest import REPO, partition_entry, srun_line
from mlcheck.data import images
from reframe_runner import NO_SOLO, report_cases, run_reframe

# where the partition's data is: var/data of the checkout, unless MLCHECK_DATA_DIR says otherwise
DATA = partition_entry('simulated', 'sim:cluster')['extras']['mlcheck']['datasets']['mnist']


@pytest.fixture(scope='module')
def sim_scripts(tmp_path_factory):
    """{(check, image, num_nodes): (job script, stage directory)} of a dry run in the host's
    Python and in an image given by path (an empty directory: a dry run only writes the script)."""
    tmp = tmp_path_factory.mktemp('sim')
    image = tmp / 'torch-test'
    image.mkdir()
    done = run_reframe('simulated', tmp / 'rfm', '--dry-run', '-P', f'image=host,{image}')
    assert done.returncode == 0, done.stdout + done.stderr
    scripts = {}
    for case in report_cases(tmp / 'rfm'):
        with open(f"{case['stagedir']}/rfm_job.sh") as f:
            scripts[case['name'].split()[0], case['image'], case['num_nodes']] = f.read(), case['stagedir']
    return image, tmp, scripts


def test_every_check_in_host_and_image_at_each_node_count(sim_scripts):
    image, _, scripts = sim_scripts
    # an image given by path is named by its file name, as a configured one is
    assert sorted(scripts) == [(check, name, nodes)
                               for check in ('CIFAR100ResNetCheck', 'InterconnectCheck',
                                             'MNISTDistributedCheck')
                               for name in sorted(['host', image.name]) for nodes in (1, 2)]


def test_interconnect_runs_in_charliecloud_with_the_stage_bound_and_no_data(sim_scripts):
    image, _, scripts = sim_scripts
    job, stagedir = scripts['InterconnectCheck', image.name, 2]
    launch, container = srun_line(job).split(' ch-run ', 1)
    assert launch == ('srun --cpus-per-task=1 --label --kill-on-bad-exit=1 --cpu-bind=mask_cpu:0x1,0x2 '
                      '--gpu-bind=map_gpu:1,0')
    binds, rest = container.split(' --cd=/rfm_workdir ')
    assert binds.split() == [f'--bind={stagedir}:/rfm_workdir']
    # the simulated partition's sweep, from its config: up to 4 MiB
    assert rest.startswith(f'{image} -- sh ./launch/rank-env.sh {images.VENV_PYTHON} -u '
                           f'./pytorch/comm/collectives.py --min-bytes 8 --latency-bytes 8 '
                           f'--max-bytes 4194304 ')


@pytest.mark.parametrize('check, script', [('MNISTDistributedCheck', 'pytorch/mnist/mnist_DDP.py'),
                                           ('CIFAR100ResNetCheck', 'pytorch/cifar/train_cifar100.py')])
def test_ranks_run_in_charliecloud_with_stage_and_data_bound(sim_scripts, check, script):
    image, _, scripts = sim_scripts
    job, stagedir = scripts[check, image.name, 2]
    srun = srun_line(job)
    launch, container = srun.split(' ch-run ', 1)
    # srun binds each task, then ch-run execs inside the image (the mask survives the exec)
    # by_domain binding: core i, and the GPU slot attached to it (bin/simslurm's gres.conf)
    assert launch == ('srun --cpus-per-task=1 --label --kill-on-bad-exit=1 --cpu-bind=mask_cpu:0x1,0x2 '
                      '--gpu-bind=map_gpu:1,0')
    assert '#SBATCH --gpus-per-node=2\n' in job
    binds, rest = container.split(' --cd=/rfm_workdir ')
    assert binds.split() == [f'--bind={DATA}:{images.DATA_MOUNT}',
                             f'--bind={stagedir}:/rfm_workdir']
    assert rest.startswith(f'{image} -- sh ./launch/rank-env.sh {images.VENV_PYTHON} -u ./{script} '
                           f'--data-dir {images.DATA_MOUNT} ')
    # ch-run refuses to start without USER, which batch jobs may lack
    assert 'export USER="${USER:-$(id -un)}"\n' in job
    assert '#SBATCH --ntasks=4\n' in job and '#SBATCH --ntasks-per-node=2\n' in job


def test_host_runs_the_suites_python_on_the_data_where_it_is(sim_scripts):
    _, _, scripts = sim_scripts
    srun = srun_line(scripts['MNISTDistributedCheck', 'host', 1][0])
    assert 'ch-run' not in srun
    # the suite's venv (reframe runs it as python3, pytest perhaps as python)
    venv_python = re.escape(os.path.dirname(sys.executable)) + r'/python3?'
    assert re.search(f' sh ./launch/rank-env.sh {venv_python} -u ./pytorch/mnist/mnist_DDP.py '
                     f'--data-dir {re.escape(DATA)} --epochs 3 --batch-size 64 --ranks-per-node 2$', srun), srun


def test_sim_partition_names_charliecloud_and_every_recipe():
    entry = partition_entry('simulated', 'sim:cluster')
    assert entry['container_platforms'] == [{'type': 'Charliecloud'}]
    assert entry['extras']['mlcheck']['images'] == [
        'host', *(images.image_path(name) for name in images.recipe_names())]
    assert len(images.recipe_names()) >= 2


def test_unbuilt_image_is_skipped_with_its_reason_and_the_host_still_runs(cluster, tmp_path):
    image = tmp_path / 'torch-old'
    (tmp_path / 'torch-old.unbuilt').write_text('building needs root (debootstrap); run bin/setup as root\n')
    done = run_reframe('simulated', tmp_path / 'rfm', '-r', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', f'image=host,{image}', '-S', 'epochs=1', *NO_SOLO, judged=False)
    cases = {c['image']: c for c in report_cases(tmp_path / 'rfm')}
    assert cases[image.name]['result'] == 'skip' and set(cases) == {'host', image.name}
    # the host ran to the end; only its speed is judged against a reference, on shared cores
    assert cases['host']['fail_phase'] in (None, 'performance'), done.stdout[-3000:]
    assert ('image torch-old was not built on this machine: building needs root (debootstrap); '
            'run bin/setup as root') in done.stdout


def test_unknown_container_platform_is_a_one_line_error(tmp_path):
    config = tmp_path / 'bad.py'
    text = open(f'{REPO}/config/simulated.py').read()
    config.write_text(text.replace("{'type': 'Charliecloud'}", "{'type': 'Podmann'}").replace(
        'REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))', f'REPO = {REPO!r}'))
    image = tmp_path / 'img'
    image.mkdir()
    done = run_reframe(config, tmp_path / 'rfm', '--dry-run', '-n', 'MNIST', '-P', 'num_nodes=1',
                       '-P', f'image={image}')
    assert done.returncode != 0
    assert ("config error: partition sim:cluster container_platforms: unknown type 'Podmann' (known: "
            "Apptainer, Charliecloud, ContainerEngine, Docker, Pyxis, Sarus, Shifter, Singularity)") in done.stdout


def test_bad_knob_values_fail_at_setup_in_one_line_each(tmp_path):
    """A value ReFrame would turn into a traceback while loading (-S epochs=abc, -S
    slow_rank_fraction=abc), or one the training program would reject only after the job ran,
    fails the test at setup."""
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-P', 'image=host', '-P', 'num_nodes=1',
                       '-S', 'epochs=abc', '-S', 'CIFAR100ResNetCheck.model=resnet34',
                       '-S', 'MNISTDistributedCheck.batch_size=-1',
                       '-S', 'InterconnectCheck.collective_timeout=abc')
    assert done.returncode != 0 and 'Traceback' not in done.stdout + done.stderr
    failures = {case['name'].split()[0]: (case['fail_phase'], case['fail_reason'])
                for case in report_cases(tmp_path / 'rfm')}
    assert failures == {
        'MNISTDistributedCheck': ('setup', "config error: -S epochs='abc': expected an integer >= 1"),
        'CIFAR100ResNetCheck': ('setup', "config error: -S model='resnet34': expected one of "
                                         "resnet18, resnet50, resnet101, resnet152"),
        # a knob common to every check (the interconnect has no slow-rank rule: it trains nothing)
        'InterconnectCheck': ('setup', "config error: -S collective_timeout='abc': expected a number"),
    }


def test_knobs_out_of_order_or_not_finite_fail_at_setup(tmp_path):
    """-S slow_rank_fraction=nan turned the slow-rank rule off; -S min_bytes above max_bytes
    passed setup and failed in the job."""
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-P', 'image=host', '-P', 'num_nodes=1',
                       '-n', 'MNISTDistributedCheck|InterconnectCheck',
                       '-S', 'MNISTDistributedCheck.slow_rank_fraction=nan',
                       '-S', 'InterconnectCheck.min_bytes=4096', '-S', 'InterconnectCheck.max_bytes=1024')
    assert done.returncode != 0 and 'Traceback' not in done.stdout + done.stderr
    failures = {case['name'].split()[0]: (case['fail_phase'], case['fail_reason'])
                for case in report_cases(tmp_path / 'rfm')}
    assert failures == {
        'MNISTDistributedCheck': ('setup', "config error: -S slow_rank_fraction='nan': expected a number "
                                           ">= 0 and <= 1"),
        'InterconnectCheck': ('setup', 'config error: -S max_bytes=1024 is below -S min_bytes=4096: '
                                       'expected max_bytes >= min_bytes'),
    }


def test_a_knob_whose_default_is_the_partitions_fails_at_setup_in_one_line(tmp_path):
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-P', 'image=host', '-P', 'num_nodes=1',
                       '-n', 'MNIST', '-S', 'slow_rank_fraction=abc')
    assert done.returncode != 0 and 'Traceback' not in done.stdout + done.stderr
    [case] = report_cases(tmp_path / 'rfm')
    # extras.mlcheck.slow_rank_fraction
    assert (case['fail_phase'], case['fail_reason']) == (
        'setup', "config error: -S slow_rank_fraction='abc': expected a number >= 0 and <= 1")


def test_throttle_slows_the_training_checks_and_never_reaches_the_interconnect(tmp_path):
    """-S throttle=F, as the docs write it for every check: the training programs take it; the
    collectives program rejects --throttle, and the interconnect check has no such setting."""
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-P', 'image=host', '-P', 'num_nodes=1',
                       '-S', 'throttle=0.2', '-S', 'throttle_rank=1')
    assert done.returncode == 0, done.stdout + done.stderr
    commands = {case['name'].split()[0]: srun_line(open(f"{case['stagedir']}/rfm_job.sh").read())
                for case in report_cases(tmp_path / 'rfm')}
    assert set(commands) == {'CIFAR100ResNetCheck', 'InterconnectCheck', 'MNISTDistributedCheck'}
    assert '--throttle' not in commands.pop('InterconnectCheck')
    for check, command in commands.items():
        assert command.endswith(' --throttle 0.2 --throttle-rank 1'), (check, command)
    # ReFrame's own word for a setting a test does not have
    assert ("test 'InterconnectCheck': the following variables were not set: 'throttle', "
            "'throttle_rank'") in done.stdout


def test_a_latency_message_smaller_than_one_element_is_refused_at_setup(tmp_path):
    """-S min_bytes=1 timed an all_reduce of an empty tensor as the latency."""
    run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-P', 'image=host', '-P', 'num_nodes=1',
                '-n', 'Interconnect', '-S', 'min_bytes=1')
    [case] = report_cases(tmp_path / 'rfm')
    assert (case['fail_phase'], case['fail_reason']) == (
        'setup', "config error: -S min_bytes='1': expected an integer >= 4")


def test_the_partition_takes_its_node_count_from_the_running_cluster(tmp_path):
    """After `SIMSLURM_NODES=4 bin/simslurm up`, a shell that did not export SIMSLURM_NODES
    runs 4-node jobs: the config reads the count `up` wrote to SIMSLURM_DIR/nodes (2 without one)."""
    state = tmp_path / 'simslurm'
    state.mkdir()
    (state / 'nodes').write_text('4\n')
    four = ('--dry-run', '-n', 'MNIST', '-P', 'image=host', '-P', 'num_nodes=4')
    done = run_reframe('simulated', tmp_path / 'up4', *four, env={'SIMSLURM_DIR': str(state)})
    assert done.returncode == 0, done.stdout[-2000:]
    [case] = report_cases(tmp_path / 'up4')
    assert case['num_nodes'] == 4
    none = run_reframe('simulated', tmp_path / 'none', *four, env={'SIMSLURM_DIR': str(tmp_path / 'no')})
    assert none.returncode != 0
    assert 'a job there gets at most 2 nodes' in none.stdout, none.stdout[-2000:]
    (state / 'nodes').write_text('four\n')
    bad = run_reframe('simulated', tmp_path / 'bad', *four, env={'SIMSLURM_DIR': str(state)})
    assert bad.returncode != 0
    assert f'mlcheck: config error: {state}/nodes: not a node count written by bin/simslurm up' in \
        bad.stdout + bad.stderr, bad.stdout[-2000:] + bad.stderr[-2000:]


@pytest.mark.parametrize('mode, tasks_line, srun_tail', [
    # dp: one task on both stand-in GPUs' cores, which the rank wrapper makes visible to it
    ('dp', '--cpus-per-task=2 --label --kill-on-bad-exit=1 --cpu-bind=mask_cpu:0x3 sh ', 'dp'),
    # single: one task on one stand-in GPU (by_domain: the GPU of domain 0), Slurm binding it
    ('single', '--cpus-per-task=1 --label --kill-on-bad-exit=1 --cpu-bind=mask_cpu:0x1 '
               '--gpu-bind=map_gpu:1 sh ', 'single')])
def test_cifar_one_process_modes_are_one_task_on_one_node(tmp_path, mode, tasks_line, srun_tail):
    done = run_reframe('simulated', tmp_path / 'rfm', '--dry-run', '-n', 'CIFAR', '-P', 'image=host',
                       '-P', 'num_nodes=1', '-S', f'mode={mode}')
    assert done.returncode == 0, done.stdout[-3000:]
    script = next((tmp_path / 'rfm' / 'stage').rglob('rfm_job.sh')).read_text()
    assert '#SBATCH --ntasks=1\n' in script and '#SBATCH --ntasks-per-node=1\n' in script
    assert f'#SBATCH --gpus-per-node={2 if mode == "dp" else 1}\n' in script
    assert srun_line(script).startswith(f'srun {tasks_line}')
    assert srun_line(script).endswith(f' --mode {srun_tail} --ranks-per-node 1')   # knobs' flags, then the launch's
    assert ('export MLCHECK_GPUS_PER_TASK=2\n' in script) == (mode == 'dp')
