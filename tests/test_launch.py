"""The environment a rank receives: job-wide exports (as ReFrame writes them) + rank-env.sh.

Runs the real wrapper under the real `scontrol` (with a minimal slurm.conf, which is all that
`scontrol show hostnames` needs) with the variables srun gives a task, and reads `env`.
"""

import os
import stat
import subprocess

import pytest

from conftest import REPO, partition_entry
from mlcheck.placement import launch
from mlcheck.errors import ConfigError

WRAPPER = os.path.join(REPO, 'src', launch.RANK_WRAPPER)


def rank_environment(settings, partition_env, task, tmp_path, job_id=4242, nodelist='nid[005001-005002]',
                     extra=None, waits=launch.Waits(), shell='sh', layout=None):
    """`env` as seen by task (node, local id) of a 2-node job on `settings`' partition (or of
    a job of `layout`)."""
    layout = layout or settings.layout(num_nodes=2)
    node, local = task
    conf = tmp_path / 'slurm.conf'
    conf.write_text('ClusterName=unit\nSlurmctldHost=localhost\n')
    # as the job script has them: the partition's env_vars, then the check's exports
    script = ''.join(f'export {k}={v}\n' for k, v in partition_env)
    script += ''.join(f'{line}\n' for line in launch.job_exports(settings, layout, waits))
    script += f'exec {shell} {WRAPPER} env\n'
    slurm = {
        'SLURM_CONF': str(conf), 'SLURM_JOB_ID': str(job_id), 'SLURM_JOB_NODELIST': nodelist,
        'SLURM_PROCID': str(node * layout.tasks_per_node + local), 'SLURM_LOCALID': str(local),
        'SLURM_NODEID': str(node), 'SLURM_NTASKS': str(layout.num_tasks),
    }
    base = {'PATH': os.environ['PATH'], 'HOME': str(tmp_path), **slurm, **(extra or {})}
    done = subprocess.run(['bash', '-c', script], env=base, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return dict(line.split('=', 1) for line in done.stdout.splitlines() if '=' in line)


def lumi_env(lumi, task, tmp_path, **kw):
    partition_env = partition_entry('lumi', 'lumi:standard-g')['env_vars']
    root = tmp_path / 'tmp'
    root.mkdir(exist_ok=True)
    settings = lumi.__class__(**{**lumi.__dict__, 'miopen_cache_root': str(root)})
    return rank_environment(settings, partition_env, task, tmp_path, **kw)


def test_the_miopen_cache_root_is_exported_quoted(lumi, tmp_path):
    """Issue 48 item 10: a cache root with a space (on 42e5ead `export MLCHECK_MIOPEN_CACHE_ROOT=/a b`
    exported '/a' and tried to run 'b')."""
    root = tmp_path / 'node local'
    root.mkdir()
    settings = lumi.__class__(**{**lumi.__dict__, 'miopen_cache_root': str(root)})
    env = rank_environment(settings, [], (0, 0), tmp_path)
    assert env['MLCHECK_MIOPEN_CACHE_ROOT'] == str(root)
    assert env['MIOPEN_USER_DB_PATH'].startswith(f'{root}/miopen-uid')


def test_lumi_rank_gets_layout_gpu_and_network_settings(lumi, tmp_path):
    env = lumi_env(lumi, (1, 3), tmp_path, extra={'WITH_CONDA': 'export CONDA_ACTIVATED=yes'})
    assert (env['RANK'], env['LOCAL_RANK'], env['WORLD_SIZE']) == ('11', '3', '16')
    assert env['ROCR_VISIBLE_DEVICES'] == '3'          # exactly one GCD: the one its mask is for
    assert 'CUDA_VISIBLE_DEVICES' not in env
    assert env['MASTER_ADDR'] == 'nid005001'           # first node, expanded by Slurm itself
    assert env['OMP_NUM_THREADS'] == '7'
    assert env['NCCL_DEBUG'] == 'INFO'
    assert env['NCCL_SOCKET_IFNAME'] == 'hsn0,hsn1,hsn2,hsn3'
    assert 'NCCL_NET_GDR_LEVEL' not in env             # each image generation sets its own
    assert env['CONDA_ACTIVATED'] == 'yes'             # the site's prelude ran in the rank


@pytest.mark.parametrize('shell', ['dash', 'bash'])
@pytest.mark.parametrize('binding', ['by_gpu', 'by_domain'])
@pytest.mark.parametrize('per_task, task, visible', [(8, 0, '0,1,2,3,4,5,6,7'), (4, 1, '4,5,6,7'),
                                                     (1, 5, '5')])
def test_a_rank_of_several_gcds_sees_exactly_them(lumi, tmp_path, shell, binding, per_task, task, visible):
    """-S mode=dp: one task driving every GCD of the node sees all eight, under either binding
    (--gpu-bind maps one GPU per task, so the rank wrapper names them)."""
    layout = lumi.layout(1, binding, tasks_per_node=8 // per_task, gpus_per_task=per_task)
    env = lumi_env(lumi, (0, task), tmp_path, shell=shell, layout=layout)
    if per_task == 1 and binding == 'by_domain':
        assert 'ROCR_VISIBLE_DEVICES' not in env       # Slurm sets it per task (--gpu-bind)
    else:
        assert env['ROCR_VISIBLE_DEVICES'] == visible
    assert env['OMP_NUM_THREADS'] == str(7 * per_task)


def conda_like_activate(tmp_path):
    """An activate script as conda's: it reads unset variables (PS1) and takes an argument."""
    script = tmp_path / 'activate'
    script.write_text('if [ -n "$PS1" ]; then PS1="($1) $PS1"; fi\nexport CONDA_ACTIVATED="$1"\n')
    return script


@pytest.mark.parametrize('shell', ['dash', 'bash'])
def test_lumi_prelude_runs_as_in_a_users_shell(lumi, tmp_path, shell):
    """`source` and unset variables, as LUMI's $WITH_CONDA does: under nounset every rank died
    (PS1: unbound variable), and dash knew no `source`."""
    activate = conda_like_activate(tmp_path)
    env = lumi_env(lumi, (0, 0), tmp_path, shell=shell, extra={'WITH_CONDA': f'source {activate} pytorch'})
    assert env['CONDA_ACTIVATED'] == 'pytorch'
    assert 'PS1' not in env


@pytest.mark.parametrize('shell', ['dash', 'bash'])
def test_failing_prelude_is_named(lumi, tmp_path, shell):
    with pytest.raises(AssertionError, match="rank-env.sh: error: the site's rank_prelude failed "
                                             "with exit status 3"):
        lumi_env(lumi, (0, 0), tmp_path, shell=shell, extra={'WITH_CONDA': 'x=1; (exit 3)'})


def test_master_port_differs_between_jobs_and_avoids_ephemeral_ports(lumi, tmp_path):
    ports = {int(lumi_env(lumi, (0, 0), tmp_path, job_id=j)['MASTER_PORT']) for j in (7, 8, 123456)}
    assert len(ports) == 3
    assert all(launch.MASTER_PORT_BASE <= p < 32768 for p in ports)


def test_master_is_first_node_of_a_list_with_several_ranges(lumi, tmp_path):
    env = lumi_env(lumi, (0, 0), tmp_path, nodelist='nid[007001,007003-007004],nid009000')
    assert env['MASTER_ADDR'] == 'nid007001'


def test_miopen_cache_is_private_per_user_job_and_node(lumi, tmp_path):
    env = lumi_env(lumi, (1, 0), tmp_path)
    cache = env['MIOPEN_USER_DB_PATH']
    assert env['MIOPEN_CUSTOM_CACHE_DIR'] == cache
    assert os.path.basename(cache) == f'miopen-uid{os.getuid()}-job4242-node1'
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_miopen_cache_planted_as_a_link_is_refused(lumi, tmp_path):
    root = tmp_path / 'tmp'
    root.mkdir()
    (root / f'miopen-uid{os.getuid()}-job4242-node0').symlink_to(tmp_path)
    with pytest.raises(AssertionError, match='is missing, a link or not owned'):
        lumi_env(lumi, (0, 0), tmp_path)


def test_simulated_rank_gets_no_gpu_variables_from_the_wrapper(sim, tmp_path):
    """Slurm's --gpu-bind sets them there (by_domain binding), not the wrapper."""
    partition_env = partition_entry('simulated', 'sim:cluster')['env_vars']
    env = rank_environment(sim, partition_env, (1, 1), tmp_path, nodelist='nid[001-002]')
    assert (env['RANK'], env['LOCAL_RANK'], env['WORLD_SIZE']) == ('3', '1', '4')
    assert env['MASTER_ADDR'] == 'nid001' and env['GLOO_SOCKET_IFNAME'] == 'lo'
    assert env['OMP_NUM_THREADS'] == '1'
    assert not {'ROCR_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES', 'MIOPEN_USER_DB_PATH'} & set(env)


def test_wrapper_refuses_to_run_outside_srun(tmp_path):
    done = subprocess.run(['sh', WRAPPER, 'true'], env={'PATH': os.environ['PATH']},
                          capture_output=True, text=True)
    assert done.returncode != 0 and 'SLURM_PROCID is not set' in done.stderr


def test_rank_command_runs_the_script_through_the_wrapper():
    command = launch.rank_command('/opt/venv/bin/python', 'pytorch/mnist/mnist_DDP.py', ['--epochs', '1'])
    assert command[:2] == ['sh', './launch/rank-env.sh']
    assert command[2:] == ['/opt/venv/bin/python', '-u', './pytorch/mnist/mnist_DDP.py', '--epochs', '1']


def test_waits_and_fault_reach_the_ranks(sim, tmp_path):
    """Timeouts (and a fault, when asked for) are exported for the training script to read."""
    partition_env = partition_entry('simulated', 'sim:cluster')['env_vars']
    waits = launch.Waits(rendezvous_timeout=20, collective_timeout=7.5, fault='crash:1:2')
    env = rank_environment(sim, partition_env, (0, 1), tmp_path, nodelist='nid[001-002]', waits=waits)
    assert env['MLCHECK_RENDEZVOUS_TIMEOUT'] == '20' and env['MLCHECK_COLLECTIVE_TIMEOUT'] == '7.5'
    assert env['MLCHECK_FAULT'] == 'crash:1:2'
    assert 'TORCH_NCCL_ASYNC_ERROR_HANDLING' not in env          # gloo: the timeout is enough
    normal = rank_environment(sim, partition_env, (0, 1), tmp_path, nodelist='nid[001-002]')
    assert 'MLCHECK_FAULT' not in normal and normal['MLCHECK_COLLECTIVE_TIMEOUT'] == '300'


def test_nccl_ranks_abort_on_a_timed_out_collective(lumi, tmp_path):
    assert lumi_env(lumi, (0, 0), tmp_path)['TORCH_NCCL_ASYNC_ERROR_HANDLING'] == '1'


@pytest.mark.parametrize('waits, message', [
    (launch.Waits(fault='crash:1'), "fault='crash:1': expected crash:RANK:EPOCH"),
    (launch.Waits(fault='explode:0:1'), "fault='explode:0:1': expected"),
    (launch.Waits(fault='hang-rendezvous:4'), "fault='hang-rendezvous:4': rank 4 is not in a world of 4 ranks"),
    (launch.Waits(collective_timeout=0), 'collective_timeout=0: must be a positive number of seconds'),
])
def test_bad_waits_are_one_line_errors(waits, message):
    with pytest.raises(ConfigError) as err:
        waits.check(world_size=4)
    assert message in str(err.value)


def test_good_faults_are_accepted():
    for fault in ('crash:3:2', 'hang-rendezvous:0', 'hang-collective:1:1', ''):
        launch.Waits(fault=fault).check(world_size=4)
