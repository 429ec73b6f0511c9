"""mlcheck.simulated.cluster: the simulated cluster's config files from settings alone (no root, nothing
started), against golden files that main's bin/simslurm wrote before the generation moved there,
and the facts that bin/simslurm and config/simulated.py share."""

import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import partition_entry
from mlcheck.simulated import cluster as simcluster
from mlcheck.simulated.processes import Sim
from mlcheck.placement.topology import NodeTopology
from mlcheck.site.settings import node_topology

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(REPO, 'tests', 'data', 'simslurm')
SCRIPT = os.path.join(REPO, 'mlcheck', 'simulated', 'cluster.py')
PASSWORD = 'examplepassword0123456789abcd'
# the inputs of each golden directory (made by main's bin/simslurm with these settings)
CASES = {
    '2nodes': dict(cpus=2, memory_mb=1024),
    '4nodes': dict(cpus=8, memory_mb=512, nodes=4, directory='/tmp/sim4', ctld_port=7817,
                   slurmd_port_base=18001, dbd_port=7819, groups=('root', 'staff')),
}


def golden(case, name):
    with open(os.path.join(GOLDEN, case, name)) as f:
        return f.read()


@pytest.mark.parametrize('case', CASES)
def test_files_are_those_main_wrote(case):
    files = simcluster.config_files(simcluster.Settings(db_password=PASSWORD, **CASES[case]))
    assert sorted(files) == sorted(os.listdir(os.path.join(GOLDEN, case)))
    for name, text in files.items():
        assert text == golden(case, name), name


def test_the_script_writes_them_with_the_systems_python_alone(tmp_path):
    """As bin/simslurm runs it: `python3 -I`, no venv or PYTHONPATH, mlcheck not importable."""
    (tmp_path / 'pw').write_text(PASSWORD)
    out = tmp_path / 'out'
    out.mkdir()
    c = CASES['4nodes']
    subprocess.run([sys.executable, '-I', SCRIPT, 'generate', str(out), '--nodes', '4', '--dir', c['directory'],
                    '--ctld-port', '7817', '--slurmd-port-base', '18001', '--dbd-port', '7819',
                    '--cpus', '8', '--memory-mb', '512', '--allow-groups', 'root,staff', '--db-password-file', str(tmp_path / 'pw')],
                   check=True, cwd=tmp_path, env={'PATH': os.environ['PATH']})
    for name in os.listdir(out):
        assert (out / name).read_text() == golden('4nodes', name), name
        assert (out / name).stat().st_mode & 0o777 == 0o600   # slurmdbd.conf holds the password


def test_an_unreadable_password_file_gives_an_empty_password(tmp_path):
    """As $(cat FILE 2>/dev/null) did: `status` as another user cannot read it."""
    assert simcluster.read_password(str(tmp_path / 'missing')) == ''
    (tmp_path / 'pw').write_text('secret\n\n')
    assert simcluster.read_password(str(tmp_path / 'pw')) == 'secret'


def gres_cores(text):
    """{device: [core, ...]} of gres.conf's Name=gpu lines."""
    found = {}
    for dev, spec in re.findall(r'^Name=gpu File=(\S+) Cores=(\S+)$', text, re.M):
        first, _, last = spec.partition('-')
        found[dev] = list(range(int(first), int(last or first) + 1))
    return found


def test_gres_conf_matches_the_partitions_topology():
    """Slurm's GPU locality (gres.conf) and what the checks expect of it (the partition's
    topology, as mlcheck reads it) name the same cores for every GPU."""
    topology = partition_entry('simulated', 'sim:cluster')['extras']['mlcheck']['topology']
    topo = node_topology(topology, 'sim:cluster')
    cores = gres_cores(simcluster.gres_conf())
    assert list(cores) == list(simcluster.GPU_DEVICES)
    assert [cores[dev] for dev in simcluster.GPU_DEVICES] == [list(topo.cores_of_gpu(i)) for i in range(topo.gpus_per_node)]
    assert cores == {'/dev/fakegpu0': [1], '/dev/fakegpu1': [0]}


def test_the_partition_is_slurms():
    entry = partition_entry('simulated', 'sim:cluster')
    conf = simcluster.slurm_conf(simcluster.Settings(cpus=2, memory_mb=1024, db_password=''))
    [name] = re.findall(r'^PartitionName=(\S+) ', conf, re.M)
    assert entry['access'] == [f'--partition={name}']


@settings(max_examples=50, deadline=None)
@given(cores_per_domain=st.integers(1, 16), domains=st.lists(st.integers(0, 7), min_size=2, max_size=2))
def test_gres_cores_are_those_of_each_gpus_domain(cores_per_domain, domains):
    topology = {'cores_per_domain': cores_per_domain, 'gpu_domains': domains}
    topo = NodeTopology(cores_per_domain=cores_per_domain, gpu_domains=tuple(domains))
    cores = gres_cores(simcluster.gres_conf(topology))
    assert [cores[dev] for dev in simcluster.GPU_DEVICES] == [
        [d * cores_per_domain + i for i in range(cores_per_domain)] for d in domains]
    if len(set(domains)) == len(domains):     # one GPU per domain: it gets the whole domain
        assert [cores[dev] for dev in simcluster.GPU_DEVICES] == [list(topo.cores_of_gpu(i)) for i in range(2)]


def test_a_topology_with_another_gpu_count_is_refused():
    with pytest.raises(ValueError, match='the topology has 3 GPUs, but there are 2 stand-in devices'):
        simcluster.gres_conf({'cores_per_domain': 1, 'gpu_domains': [0, 1, 2]})


@settings(max_examples=20, deadline=None)
@given(nodes=st.integers(1, 40), port_base=st.integers(7000, 60000),
       directory=st.sampled_from(['/var/lib/mlcheck/simslurm', '/tmp/a dir/with spaces', "/tmp/it's"]))
def test_simslurm_sees_the_nodes_and_paths_of_slurm_conf(nodes, port_base, directory):
    """bin/simslurm's node names, ports and pid files (its Sim, from the SIMSLURM_* settings) are
    those of the slurm.conf it installs."""
    s = simcluster.Settings(cpus=2, memory_mb=1024, db_password='', nodes=nodes, directory=directory,
                            slurmd_port_base=port_base)
    conf = simcluster.slurm_conf(s)
    declared = re.findall(r'^NodeName=(\S+) .* Port=(\d+) ', conf, re.M)
    [ctld_pidfile] = re.findall(r'^SlurmctldPidFile=(.*)$', conf, re.M)
    [slurmd_pidfile] = re.findall(r'^SlurmdPidFile=(.*)$', conf, re.M)
    sim = Sim(simcluster.settings_from_env({'SIMSLURM_NODES': str(nodes), 'SIMSLURM_DIR': directory,
                                            'SIMSLURM_SLURMD_PORT_BASE': str(port_base)}))
    assert [(node, str(sim.node_port(node))) for node in sim.nodes()] == declared
    assert len(declared) == nodes and declared[0] == ('nid001', str(port_base))
    assert sim.pidfile_of('slurmctld') == ctld_pidfile
    assert sim.pidfile_of('slurmd', 'nid001') == slurmd_pidfile.replace('%n', 'nid001')


@pytest.mark.parametrize('env, error', [
    ({}, None),
    ({'SIMSLURM_NODES': ''}, None),                 # empty counts as unset, as ${VAR:-default}
    ({'SIMSLURM_NODES': '0'}, "SIMSLURM_NODES='0' is not a number between 1 and 999; set it to e.g. 2"),
    ({'SIMSLURM_NODES': '2x'}, "SIMSLURM_NODES='2x' is not a number between 1 and 999"),
    ({'SIMSLURM_CTLD_PORT': '65536'}, "SIMSLURM_CTLD_PORT='65536' is not a valid port; set it to e.g. 6817"),
    ({'SIMSLURM_NODES': '3', 'SIMSLURM_SLURMD_PORT_BASE': '65534'},
     "SIMSLURM_SLURMD_PORT_BASE='65534' is not a valid port base for 3 nodes; set it to e.g. 17001"),
    ({'SIMSLURM_NODES': '2', 'SIMSLURM_SLURMD_PORT_BASE': '65534'}, None),
    ({'SIMSLURM_CTLD_PORT': '17002'},
     'SIMSLURM_CTLD_PORT=17002 lies inside the slurmd port range 17001-17002; choose ports that do not overlap'),
    ({'SIMSLURM_DBD_PORT': '6817'}, 'SIMSLURM_DBD_PORT=6817 is the slurmctld port or inside the slurmd port range '
                                    '17001-17002; choose ports that do not overlap'),
    ({'SIMSLURM_DBD_PORT': '17001'}, 'SIMSLURM_DBD_PORT=17001 is the slurmctld port'),
    ({'SIMSLURM_DBD_PORT': 'x'}, "SIMSLURM_DBD_PORT='x' is not a valid port; set it to e.g. 6819"),
    ({'SIMSLURM_TIMEOUT': '-1'}, "SIMSLURM_TIMEOUT='-1' is not a number of seconds"),
    ({'SIMSLURM_DIR': 'var/tmp'}, "SIMSLURM_DIR='var/tmp' must be an absolute path"),
])
def test_settings_from_env(env, error):
    """bin/simslurm's checks of its settings, with the messages it gave before they moved here."""
    if error is None:
        got = simcluster.settings_from_env(env)
        assert got['NODES'] == int(env.get('SIMSLURM_NODES') or 2) and got['DIR'] == '/var/lib/mlcheck/simslurm'
    else:
        with pytest.raises(ValueError) as raised:
            simcluster.settings_from_env(env)
        assert str(raised.value).startswith(error)


def test_bin_simslurm_holds_no_copy_of_the_facts():
    """The facts live in mlcheck/simulated/cluster.py alone: bin/simslurm's code (its comments and usage
    text aside) names no node pattern, device, default port or directory of its own."""
    with open(os.path.join(REPO, 'bin', 'simslurm')) as f:
        code = '\n'.join(line for line in f if not line.lstrip().startswith('#'))
    for fact in ('nid%03d', 'nid[0-9]', '/dev/fakegpu', 'GPU_CORES', 'slurm_acct_db', '/var/lib/mlcheck/simslurm',
                 '6817', '6819', '17001', 'PartitionName', 'ClusterName', 'slurmd-%n'):
        assert fact not in code, fact


def test_running_nodes(tmp_path):
    assert simcluster.running_nodes({'SIMSLURM_DIR': str(tmp_path)}) == simcluster.DEFAULT_NODES
    (tmp_path / 'nodes').write_text('4\n')
    assert simcluster.running_nodes({'SIMSLURM_DIR': str(tmp_path)}) == 4
    (tmp_path / 'nodes').write_text('four\n')
    with pytest.raises(ValueError, match=f'{tmp_path}/nodes: not a node count written by bin/simslurm up'):
        simcluster.running_nodes({'SIMSLURM_DIR': str(tmp_path)})
