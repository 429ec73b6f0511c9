"""The simulated Slurm cluster's shape, paths and configuration files, in one place.

bin/simslurm runs the cluster; config/simulated.py describes it to ReFrame. What both need to
agree on lives here: the node names and ports, the partition, each node's GPU slots and the cores
nearest them (the partition's topology and gres.conf's Cores=), and the files under SIMSLURM_DIR.

The config files are pure text from settings (node count, ports, directory, CPUs, memory, the
database password): mlcheck.simulated.install (bin/simslurm up) measures what it must, generates
them in memory, compares them with the installed ones and installs those that changed; this file
run as a script (the system's python3 is enough: stdlib only, `python3 -I`) writes them into a
directory. The tests compare them with golden files (tests/data/simslurm/) without root or a
running cluster.

    python3 -I mlcheck/simulated/cluster.py generate OUTDIR --nodes 2 --cpus 2 --memory-mb 1024 ...
"""

import argparse
import grp
import os
import pwd
import re
from dataclasses import dataclass

DEFAULT_DIR = '/var/lib/mlcheck/simslurm'
DEFAULT_NODES = 2
DEFAULT_CTLD_PORT = 6817
DEFAULT_SLURMD_PORT_BASE = 17001     # nidNNN listens on base + NNN - 1
DEFAULT_DBD_PORT = 6819
CLUSTER = 'sim'
PARTITION = 'sim'
ACCT_DB = 'slurm_acct_db'
ACCT_DB_USER = 'slurmdbd'
# the first line of every file bin/simslurm writes: it overwrites no file without it
MARKER = '# managed by bin/simslurm'
# GPU slot i of every node: its stand-in device (a copy of /dev/null) and the CPU domain nearest
# it, GPU 0 by core 1 and GPU 1 by core 0, numbered across the cores as LUMI-G's GCDs are across
# its CCDs. config/simulated.py's partition takes its topology from here.
GPU_DEVICES = ('/dev/fakegpu0', '/dev/fakegpu1')
TOPOLOGY = {'cores_per_domain': 1, 'gpu_domains': [1, 0]}
# the partition's longest job: a job of the suite asks for 30 minutes at most
# (mlcheck/harness/config.py), and none may hold the machine's cores for good
MAX_TIME = '02:00:00'
# `up` writes the running cluster's node count there, so no later shell must export SIMSLURM_NODES
NODES_FILE = 'nodes'


def node_names(nodes):
    return [f'nid{i:03d}' for i in range(1, nodes + 1)]


def node_ports(nodes, port_base):
    """{node name: its slurmd's port}: nidNNN listens on port_base + NNN - 1."""
    return {name: port_base + i for i, name in enumerate(node_names(nodes))}


def gpu_cores(topology=TOPOLOGY):
    """gres.conf's Cores= of each GPU slot: the cores of its domain ('1', or '8-15')."""
    size = topology['cores_per_domain']
    spans = [(domain * size, domain * size + size - 1) for domain in topology['gpu_domains']]
    return [str(first) if first == last else f'{first}-{last}' for first, last in spans]


def paths(directory):
    """The files and folders of a cluster in `directory` (SIMSLURM_DIR), by name; %n stands for a
    node's name, as in slurm.conf."""
    run, log, db = f'{directory}/run', f'{directory}/log', f'{directory}/db'
    return {
        'STATE_DIR': f'{directory}/state', 'RUN_DIR': run, 'LOG_DIR': log,
        'SPOOL_DIR': f'{directory}/spool/%n', 'NODES_FILE': f'{directory}/{NODES_FILE}',
        'CTLD_PIDFILE': f'{run}/slurmctld.pid', 'SLURMD_PIDFILE': f'{run}/slurmd-%n.pid',
        'DBD_PIDFILE': f'{run}/slurmdbd.pid',
        'CTLD_LOG': f'{log}/slurmctld.log', 'SLURMD_LOG': f'{log}/slurmd-%n.log',
        'DBD_LOG': f'{log}/slurmdbd.log', 'MARIADBD_LOG': f'{log}/mariadbd.log',
        # MariaDB of the accounting: config, password of slurmdbd's database user, datadir and
        # socket (the last two owned by the mysql user it runs as)
        'DB_DIR': db, 'DB_CNF': f'{db}/my.cnf', 'DB_PASSWORD_FILE': f'{db}/slurmdbd.password',
        'DB_DATA': f'{db}/data', 'DB_RUN': f'{db}/run', 'DB_SOCKET': f'{db}/run/mariadbd.sock',
        'MARIADBD_PIDFILE': f'{db}/run/mariadbd.pid',
    }


def running_nodes(environ=os.environ):
    """Nodes of the running cluster, from SIMSLURM_DIR/nodes (DEFAULT_NODES if no cluster has been
    started here). ValueError if the file holds no count."""
    path = os.path.join(environ.get('SIMSLURM_DIR') or DEFAULT_DIR, NODES_FILE)   # empty: unset, as in bash
    try:
        with open(path) as f:
            return int(f.read())
    except FileNotFoundError:
        return DEFAULT_NODES
    except (OSError, ValueError) as err:
        raise ValueError(f'{path}: not a node count written by bin/simslurm up ({err}); '
                         f'run bin/simslurm up again') from None


@dataclass(frozen=True)
class Settings:
    """What the config files depend on: bin/simslurm's SIMSLURM_* settings and the host's CPUs
    (as slurmd -C counts them) and memory (MB per node)."""
    cpus: int
    memory_mb: int
    db_password: str
    nodes: int = DEFAULT_NODES
    directory: str = DEFAULT_DIR
    ctld_port: int = DEFAULT_CTLD_PORT
    slurmd_port_base: int = DEFAULT_SLURMD_PORT_BASE
    dbd_port: int = DEFAULT_DBD_PORT
    # who may submit to the partition (its jobs weigh 100 times other work): root's group and
    # the group of whoever ran `sudo bin/simslurm up`
    groups: tuple = ('root',)


HEADER = f"{MARKER} -- regenerated by 'bin/simslurm up'; edits are overwritten."


def slurm_conf(s):
    p = paths(s.directory)
    nodes = [f'NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs={s.cpus} '
             f'RealMemory={s.memory_mb} Gres=gpu:{len(GPU_DEVICES)} State=UNKNOWN'
             for name, port in node_ports(s.nodes, s.slurmd_port_base).items()]
    return f"""{HEADER}
# simslurm-dir: {s.directory}
# A simulated cluster: every node is a slurmd on localhost with its own port.
ClusterName={CLUSTER}
SlurmctldHost=localhost
SlurmctldPort={s.ctld_port}
# No daemon on every address of the machine (slurm.conf(5) of Slurm 22.05):
# slurmctld, the slurmd's, slurmstepd and srun bind to what this machine's
# name resolves to (Slurm's slurm_setup_addr: gethostname()), a loopback
# address where /etc/hosts says so, as on Debian ('up' says when it is not).
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
# No cgroups on this machine: track processes via /proc, bind with sched_setaffinity.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
# Cores are the unit of allocation, so two 1-core tasks share one node.
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# A batch job starts when submitted: by default Slurm may put off scheduling it by
# up to 3 s (slurm.conf(5), batch_sched_delay); jobs here waited 1-3 s, 98 s over
# the 56 jobs of a full test run.
SchedulerParameters=batch_sched_delay=0
# Nodes that come back (e.g. after down/up) return to service by themselves.
ReturnToService=2
# Job accounting through slurmdbd, as at real sites: sacct knows every job's
# state, exit code and times. No usage sampling of the steps (no MaxRSS etc.).
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={s.dbd_port}
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=10
KillWait=2
InactiveLimit=0
Waittime=0
# Finished jobs stay in squeue for 5 minutes (Slurm's default); sacct keeps them.
MinJobAge=300
MailProg=/bin/true
StateSaveLocation={p['STATE_DIR']}
SlurmdSpoolDir={p['SPOOL_DIR']}
SlurmctldPidFile={p['CTLD_PIDFILE']}
SlurmdPidFile={p['SLURMD_PIDFILE']}
SlurmctldLogFile={p['CTLD_LOG']}
SlurmdLogFile={p['SLURMD_LOG']}
SlurmctldDebug=info
SlurmdDebug=info
""" + ''.join(line + '\n' for line in nodes) + \
        (f"PartitionName={PARTITION} Nodes=ALL Default=YES AllowGroups={','.join(s.groups)} "
         f'MaxTime={MAX_TIME} State=UP\n')


def gres_conf(topology=TOPOLOGY):
    """The GPU slots of every node; AutoDetect=off: there is no GPU library to ask."""
    cores = gpu_cores(topology)
    if len(cores) != len(GPU_DEVICES):
        raise ValueError(f'the topology has {len(cores)} GPUs, but there are {len(GPU_DEVICES)} '
                         f'stand-in devices {GPU_DEVICES}')
    return ''.join([f'{HEADER}\n', 'AutoDetect=off\n',
                    *(f'Name=gpu File={dev} Cores={c}\n' for dev, c in zip(GPU_DEVICES, cores))])


def slurmdbd_conf(s):
    """slurmdbd's config: it holds the database password, so slurmdbd insists on mode 0600 and
    the owner SlurmUser (root here, as in slurm.conf)."""
    p = paths(s.directory)
    return f"""{HEADER}
# simslurm-dir: {s.directory}
AuthType=auth/munge
DbdHost=localhost
DbdPort={s.dbd_port}
# slurmdbd too binds to what this machine's name resolves to, not to every address
CommunicationParameters=NoInAddrAny
SlurmUser=root
PidFile={p['DBD_PIDFILE']}
LogFile={p['DBD_LOG']}
DebugLevel=info
# MariaDB of this cluster, over its socket (MYSQL_UNIX_PORT in slurmdbd's environment)
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc={ACCT_DB}
StorageUser={ACCT_DB_USER}
StoragePass={s.db_password}
"""


def my_cnf(s):
    """MariaDB's options, for the server, mariadb-install-db and the clients. No TCP at all:
    slurmdbd and bin/simslurm connect through the socket."""
    p = paths(s.directory)
    return f"""{HEADER}
[client]
socket={p['DB_SOCKET']}
[mysqld]
user=mysql
datadir={p['DB_DATA']}
socket={p['DB_SOCKET']}
pid-file={p['MARIADBD_PIDFILE']}
log-error={p['MARIADBD_LOG']}
skip-networking
# a few thousand small job records: far below what Slurm recommends for a
# site (slurmdbd logs "Database settings not recommended values"), but small
innodb_buffer_pool_size=32M
innodb_log_file_size=16M
# as Slurm's accounting guide recommends for slurmdbd's long transactions
innodb_lock_wait_timeout=900
"""


def config_files(s):
    """{file name: text} of the four files bin/simslurm installs."""
    return {'slurm.conf': slurm_conf(s), 'gres.conf': gres_conf(),
            'slurmdbd.conf': slurmdbd_conf(s), 'my.cnf': my_cnf(s)}


def settings_from_env(environ):
    """bin/simslurm's settings from its SIMSLURM_* variables, an empty one as unset (bash's
    ${VAR:-default}): {'NODES': 2, 'DIR': ..., 'CTLD_PORT', 'PORT_BASE', 'DBD_PORT', 'TIMEOUT'}.
    ValueError naming the variable that is wrong, and what would do."""
    def number(var, default, low=0, high=None, wrong='is not a number'):
        """The whole number in `var` (or `default`), between `low` and `high`; else ValueError
        "VAR='raw' `wrong`"."""
        raw = environ.get(var) or str(default)
        if not re.fullmatch('[0-9]+', raw) or int(raw) < low or (high is not None and int(raw) > high):
            raise ValueError(f"{var}='{raw}' {wrong}")
        return int(raw)

    nodes = number('SIMSLURM_NODES', DEFAULT_NODES, 1, 999,
                   f'is not a number between 1 and 999; set it to e.g. {DEFAULT_NODES}')
    ctld = number('SIMSLURM_CTLD_PORT', DEFAULT_CTLD_PORT, 1, 65535,
                  f'is not a valid port; set it to e.g. {DEFAULT_CTLD_PORT}')
    base = number('SIMSLURM_SLURMD_PORT_BASE', DEFAULT_SLURMD_PORT_BASE, 1, 65535 - nodes + 1,
                  f'is not a valid port base for {nodes} nodes; set it to e.g. {DEFAULT_SLURMD_PORT_BASE}')
    slurmd_ports = range(base, base + nodes)
    if ctld in slurmd_ports:
        raise ValueError(f'SIMSLURM_CTLD_PORT={ctld} lies inside the slurmd port range {base}-{base + nodes - 1}; '
                         f'choose ports that do not overlap')
    dbd = number('SIMSLURM_DBD_PORT', DEFAULT_DBD_PORT, 1, 65535,
                 f'is not a valid port; set it to e.g. {DEFAULT_DBD_PORT}')
    if dbd == ctld or dbd in slurmd_ports:
        raise ValueError(f'SIMSLURM_DBD_PORT={dbd} is the slurmctld port or inside the slurmd port range '
                         f'{base}-{base + nodes - 1}; choose ports that do not overlap')
    timeout = number('SIMSLURM_TIMEOUT', 30, wrong='is not a number of seconds')
    directory = environ.get('SIMSLURM_DIR') or DEFAULT_DIR
    if not directory.startswith('/'):
        raise ValueError(f"SIMSLURM_DIR='{directory}' must be an absolute path")
    return {'NODES': nodes, 'DIR': directory, 'CTLD_PORT': ctld, 'PORT_BASE': base, 'DBD_PORT': dbd,
            'TIMEOUT': timeout, 'GROUPS': partition_groups(environ)}


def partition_groups(environ):
    """root, and the primary group of the user who ran `sudo bin/simslurm up` (SUDO_GID, SUDO_USER),
    where that group is the user's private group: named as the user, the user's own primary
    group, no other member listed, and no other local account's primary group. A shared group
    (`users`, which every account of many sites has; one an LDAP login node does not list) would
    give other users the partition and its hundred-fold CPU weight (issue 48's security
    red-team, U5 and its re-check); the user then runs the tests under sudo, as root."""
    groups = ['root']
    with_sudo, user = environ.get('SUDO_GID') or '', environ.get('SUDO_USER') or ''
    if with_sudo.isdecimal() and user:
        try:
            group, account = grp.getgrgid(int(with_sudo)), pwd.getpwnam(user)
        except KeyError:
            return tuple(groups)
        others = ({p.pw_name for p in pwd.getpwall() if p.pw_gid == group.gr_gid} | set(group.gr_mem)) - {user}
        if (group.gr_name == user and account.pw_gid == group.gr_gid and not others
                and re.fullmatch(r'[A-Za-z_][A-Za-z0-9_.-]*', user) and user != 'root'):
            groups.append(group.gr_name)
    return tuple(groups)


def read_password(path):
    """The database password in `path`, '' if it cannot be read (a user other than root asking
    for the status), without trailing newlines, as bash's $(cat FILE) gives it."""
    try:
        with open(path) as f:
            return f.read().rstrip('\n')
    except OSError:
        return ''


def write_files(outdir, files):
    """Each file, mode 0600 (slurmdbd.conf holds a password; bin/simslurm sets the final modes),
    into `outdir`, made private if it is new."""
    os.makedirs(outdir, mode=0o700, exist_ok=True)
    for name, text in files.items():
        fd = os.open(os.path.join(outdir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, 'w') as f:
            f.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='simcluster', description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    gen = sub.add_parser('generate', help='write slurm.conf, gres.conf, slurmdbd.conf, my.cnf into OUTDIR')
    gen.add_argument('outdir')
    gen.add_argument('--nodes', type=int, default=DEFAULT_NODES)
    gen.add_argument('--dir', default=DEFAULT_DIR)
    gen.add_argument('--ctld-port', type=int, default=DEFAULT_CTLD_PORT)
    gen.add_argument('--slurmd-port-base', type=int, default=DEFAULT_SLURMD_PORT_BASE)
    gen.add_argument('--dbd-port', type=int, default=DEFAULT_DBD_PORT)
    gen.add_argument('--cpus', type=int, required=True)
    gen.add_argument('--memory-mb', type=int, required=True)
    gen.add_argument('--allow-groups', default='root', help='who may submit, comma-separated')
    gen.add_argument('--db-password-file', help="default: the cluster's own (paths()['DB_PASSWORD_FILE'])")
    args = parser.parse_args(argv)
    password = read_password(args.db_password_file or paths(args.dir)['DB_PASSWORD_FILE'])
    settings = Settings(cpus=args.cpus, memory_mb=args.memory_mb, db_password=password,
                        nodes=args.nodes, directory=args.dir, ctld_port=args.ctld_port,
                        slurmd_port_base=args.slurmd_port_base, dbd_port=args.dbd_port,
                        groups=tuple(args.allow_groups.split(',')))
    write_files(args.outdir, config_files(settings))


if __name__ == '__main__':
    main()
