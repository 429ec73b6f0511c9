"""What `bin/simslurm up` sets up on the machine before a daemon starts: the config files of
mlcheck.simulated.cluster installed in /etc/slurm and SIMSLURM_DIR (never over a foreign one), the
directories and the database password, the stand-in GPU devices, and a warning when the machine's
name is not a loopback address. Standard library only: bin/simslurm runs this with the system's
python3.
"""

import base64
import contextlib
import os
import pwd
import re
import socket
import stat

from mlcheck.files import others_can_change
from mlcheck.simulated.cluster import GPU_DEVICES, MARKER, Settings, config_files, read_password
from mlcheck.simulated.processes import Failure, output_of, say, write_new

SLURM_CONF_PATH = '/etc/slurm/slurm.conf'
GRES_CONF_PATH = '/etc/slurm/gres.conf'
# slurmdbd reads it from slurm.conf's directory
SLURMDBD_CONF_PATH = '/etc/slurm/slurmdbd.conf'
# where a configless Slurm client (slurmd --conf-server, sackd) keeps the config its controller
# sent: a machine with one is a real cluster's node, whose commands a slurm.conf would take over
CONFIGLESS_CACHE = '/run/slurm/conf/slurm.conf'


def node_memory_mb(meminfo='/proc/meminfo'):
    """Memory per node: small, and never more than the machine has (slurmd drains a node whose
    RealMemory exceeds the physical memory)."""
    with open(meminfo) as f:
        total_kb = int(re.search(r'^MemTotal:\s+(\d+)', f.read(), re.M)[1])
    return min(max(total_kb // 1024 // 2, 1), 1024)


def node_cpus():
    """CPUs per node: what slurmd itself detects (slurmd -C), so that its hardware check passes.
    Not the CPUs we may run on: those shrink under a CPU mask (inside a job step), which would
    change the config. A CPU count alone, no sockets or threads: every CPU then counts as a core
    for CR_Core, also on hosts with 2 hyperthreads per core."""
    match = re.search(r'\sCPUs=(\d+)', output_of(['slurmd', '-C']) or '')
    return int(match[1]) if match else os.sysconf('SC_NPROCESSORS_CONF')


def installed_files(sim):
    """{installed path: (name in cluster.config_files, mode)}."""
    return {GRES_CONF_PATH: ('gres.conf', 0o644), SLURM_CONF_PATH: ('slurm.conf', 0o644),
            SLURMDBD_CONF_PATH: ('slurmdbd.conf', 0o600), sim.path('DB_CNF'): ('my.cnf', 0o644)}


class Config:
    """The config files of `sim` for the CPUs and memory measured here and its database password,
    generated afresh for every question (the password file appears during the first `up`)."""

    def __init__(self, sim, cpus, memory_mb):
        self.sim, self.cpus, self.memory_mb = sim, cpus, memory_mb

    def files(self):
        s = self.sim.settings
        return config_files(Settings(
            cpus=self.cpus, memory_mb=self.memory_mb, db_password=read_password(self.sim.path('DB_PASSWORD_FILE')),
            nodes=s['NODES'], directory=s['DIR'], ctld_port=s['CTLD_PORT'], slurmd_port_base=s['PORT_BASE'],
            dbd_port=s['DBD_PORT'], groups=s['GROUPS']))

    def _current(self, paths):
        files, where = self.files(), installed_files(self.sim)
        for path in paths:
            try:
                with open(path, 'rb') as f:
                    if f.read() != files[where[path][0]].encode():
                        return False
            except OSError:
                return False
        return True

    def is_current(self):
        """True if every installed file is the generated one."""
        return self._current(installed_files(self.sim))

    def dbd_is_current(self):
        return self._current([SLURMDBD_CONF_PATH, self.sim.path('DB_CNF')])

    def write(self):
        """Install the files that changed, each replacing the old one at once."""
        check_config_is_ours()
        check_no_other_cluster(self.sim)
        if self.is_current():
            return
        os.makedirs(os.path.dirname(SLURM_CONF_PATH), exist_ok=True)
        files = self.files()
        for path, (name, mode) in installed_files(self.sim).items():
            install_file(files[name], path, mode)
        say(f'wrote {SLURM_CONF_PATH} and {SLURMDBD_CONF_PATH}')


def install_file(text, dest, mode):
    """`text` replaces `dest` at once, with `mode` from the start (slurmdbd.conf holds a password)."""
    write_new(dest, text, mode)


def written_by_us(path):
    """True if `path` starts with bin/simslurm's marker line, None if there is no such file."""
    try:
        with open(path, errors='replace') as f:
            return f.readline().startswith(MARKER)
    except FileNotFoundError:
        return None


def check_config_is_ours():
    """Fail unless slurm.conf, slurmdbd.conf and gres.conf are absent or were written by bin/simslurm,
    and the machine is no configless Slurm client (CONFIGLESS_CACHE)."""
    if os.path.exists(CONFIGLESS_CACHE) and not written_by_us(SLURM_CONF_PATH):
        raise Failure(f'{CONFIGLESS_CACHE} exists: this machine is a node of a configless Slurm cluster, '
                      f'whose commands {SLURM_CONF_PATH} would redirect to the simulated one; run bin/simslurm '
                      'on a machine of its own')
    for conf in (SLURM_CONF_PATH, SLURMDBD_CONF_PATH, GRES_CONF_PATH):
        if written_by_us(conf) is False:
            raise Failure(f"{conf} exists and was not written by simslurm (no '{MARKER}' first line); refusing to "
                          f"overwrite a real site config; move it away (mv {conf} {conf}.orig) if this machine should "
                          f"run the simulated cluster")


def check_no_other_cluster(sim):
    """Refuse to repoint slurm.conf while a cluster of another SIMSLURM_DIR still runs on it."""
    try:
        with open(SLURM_CONF_PATH) as f:
            other = next((line[len('# simslurm-dir: '):].rstrip('\n') for line in f
                          if line.startswith('# simslurm-dir: ')), '')
    except OSError:
        return
    if other and other != sim.dir and sim.at(other).daemon_pid('slurmctld'):
        raise Failure(f'a simslurm cluster with SIMSLURM_DIR={other} is running; stop it first: '
                      f'SIMSLURM_DIR={other} bin/simslurm down')


def make_dirs(sim, owner=None):
    """SIMSLURM_DIR's folders, and the database password (made once). `owner`: (uid, gid) of the
    folder MariaDB writes its socket in, the mysql user's by default."""
    for name in ('STATE_DIR', 'RUN_DIR', 'LOG_DIR'):
        os.makedirs(sim.path(name), exist_ok=True)
    os.chmod(sim.dir, 0o755)
    os.chmod(sim.path('LOG_DIR'), 0o755)
    for folder in [sim.path('SPOOL_DIR', node) for node in sim.nodes()] + [sim.path('DB_DIR')]:
        os.makedirs(folder, exist_ok=True)
        os.chmod(folder, 0o755)
    os.makedirs(sim.path('DB_RUN'), exist_ok=True)
    os.chmod(sim.path('DB_RUN'), 0o755)
    if owner is None:
        user = pwd.getpwnam('mysql')
        owner = user.pw_uid, user.pw_gid
    os.chown(sim.path('DB_RUN'), *owner, follow_symlinks=False)
    password = sim.path('DB_PASSWORD_FILE')
    if not os.path.exists(password) or os.path.getsize(password) == 0:
        write_new(password, re.sub('[^A-Za-z0-9]', '', base64.b64encode(os.urandom(24)).decode()), 0o600)


def claim_state_dir(directory, make=True):
    """SIMSLURM_DIR made if missing (with `make`; else None where it is missing), then required to
    be root's alone: a directory, not a link, owned by root and writable by no one else, below
    directories that only root can change (writable by others only with the sticky bit, as
    /var/tmp). Whoever prepared it otherwise could have root write through links in it, hand files
    to munge and mysql, swap MariaDB's config, or name a process of theirs in a pid file for root
    to restart. The path returned is the one checked: its real path (links of the folders above
    resolved), which the cluster then uses; lstat throughout, so the directory itself is judged
    as itself, a link refused, never by what it points at."""
    path = os.path.abspath(directory)
    if make:
        os.makedirs(path, mode=0o755, exist_ok=True)
    elif not os.path.lexists(path):
        return None
    found = others_can_change(path, {0})
    if found:
        folder, problem = found
        problem += ', not root' if problem.startswith('is owned by') else ''
        raise Failure(f'{folder} {problem}: SIMSLURM_DIR={path} is not root\'s alone, so the cluster '
                      'is not used there; remove it (or fix its owner and mode) or set SIMSLURM_DIR '
                      'to a directory that only root can write')
    return os.path.realpath(path)


def claimed(sim, make=False):
    """`sim` at its claimed state directory's real path (claim_state_dir), or None where the
    directory is missing and not `make`. Every subcommand of bin/simslurm starts here."""
    real = claim_state_dir(sim.dir, make)
    if real is None:
        return None
    return sim.at(real)


def purge(sim, hosts_file, devices=GPU_DEVICES):
    """Remove what `up` added to the machine (the cluster stopped first): the hosts file's lines
    with our mark, the config files that carry our marker line, the stand-in GPU devices (character
    devices 1,3 only). What it removed, one line each; SIMSLURM_DIR (logs, the accounting
    database) is left to the caller's choice."""
    from mlcheck.simulated.hosts import remove_our_lines
    removed = [f'{count} line(s) of {hosts_file}' for count in [remove_our_lines(hosts_file)] if count]
    for conf in (SLURM_CONF_PATH, SLURMDBD_CONF_PATH, GRES_CONF_PATH):
        if written_by_us(conf):
            os.remove(conf)
            removed.append(conf)
    for dev in devices:
        with contextlib.suppress(FileNotFoundError):
            info = os.lstat(dev)
            if stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 3):
                os.remove(dev)
                removed.append(dev)
    return removed


def gpu_devices_exist(devices=GPU_DEVICES):
    return all(is_char_device(dev) for dev in devices)


def is_char_device(path):
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def ensure_gpu_devices(devices=GPU_DEVICES):
    """Stand-in GPU devices: character devices like /dev/null (major 1, minor 3), which slurmd
    accepts as the File= of a GPU. Idempotent."""
    for dev in devices:
        if is_char_device(dev):
            continue
        if os.path.lexists(dev):      # not ours: left alone
            raise Failure(f'{dev} exists and is not a character device: not replaced by the stand-in '
                          f'GPU device; move it away if this machine should run the simulated cluster')
        try:
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            os.chmod(dev, 0o666)
        except OSError as err:
            raise Failure(f'could not create the stand-in GPU device {dev} (needs root)') from err


def first_address(name):
    """The first address of host `name` as `getent hosts` gives it (IPv6 first), or ''."""
    for family in (socket.AF_INET6, socket.AF_INET):
        try:
            return socket.getaddrinfo(name, None, family)[0][4][0]
        except (socket.gaierror, IndexError):
            continue
    return ''


def check_hostname_is_loopback(name=None, resolve=first_address):
    """The daemons listen on the address of this machine's name (NoInAddrAny): say so when that is
    not loopback, where other machines could reach them."""
    name = name or socket.gethostname()
    addr = resolve(name)
    if not (addr.startswith('127.') or addr == '::1'):
        say(f"warning: this machine's name {name} resolves to '{addr or 'nothing'}', not a loopback address: the "
            f'Slurm daemons listen there; map it to 127.0.1.1 in /etc/hosts to keep them local')

