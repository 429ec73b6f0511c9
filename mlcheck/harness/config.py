"""ReFrame configuration pieces shared by every site file in config/.

A site file describes its systems and partitions (site knowledge) and takes the rest from here,
so every site writes the same perf log format and keeps its results database the same way.

Environment variables:
  RFM_SQLITE_DB_FILE            ReFrame's own: the results database, instead of the site's default
  MLCHECK_REFERENCES_DIR        where <system>.yaml references are read (default: config/references)
  MLCHECK_DRY_RUN_PERFLOG_DIR   where dry runs write their perf logs (default: ~/.cache/mlcheck/dry-run-perflogs)
"""

import os
import runpy
import stat
import sys

from mlcheck import REPO

CONFIG_DIR = os.path.join(REPO, 'config')

# One perf log line per performance value (perflog_multiline), with what identifies it:
# where, which check and image, how many nodes and tasks, which job on which nodes.
PERFLOG_FIELDS = (
    '%(check_job_completion_time)s|reframe %(version)s|%(check_system)s:%(check_partition)s|'
    '%(check_name)s|%(check_image)s|%(check_num_nodes)s|%(check_num_tasks)s|'
    '%(check_jobid)s|%(check_job_nodelist)s|'
)
# then what the value depends on: the run's settings, its software stack (mlcheck.figures.stack)
# and the machine's speed its references were brought to, where the partition measures it
PERFVAR_FIELDS = ('%(check_perf_var)s|%(check_perf_value)s|%(check_perf_unit)s|%(check_perf_ref)s|'
                  '%(check_perf_lower_thres)s|%(check_perf_upper_thres)s|%(check_perf_result)s|'
                  '%(check_run_settings)s|%(check_software_stack)s|%(check_machine_speed)s')
# The header ReFrame writes for these fields; mlcheck.history.perflog reads perf logs by it.
PERFLOG_HEADER = ('job_completion_time|reframe version|system:partition|name|image|num_nodes|'
                  'num_tasks|jobid|job_nodelist|perf_var|perf_value|perf_unit|perf_ref|'
                  'perf_lower_thres|perf_upper_thres|perf_result|run_settings|software_stack|'
                  'machine_speed')
PERFLOG_PREFIX = '%(check_system)s/%(check_partition)s'


def invoked_as_dry_run(argv=None):
    """Whether reframe was started with --dry-run (or an abbreviation of it, which argparse takes).

    The config file is loaded by the reframe process itself, so its command line is sys.argv.
    """
    args = sys.argv[1:] if argv is None else argv
    return any(len(arg) >= 4 and '--dry-run'.startswith(arg) for arg in args)


def given_prefix(argv=None, environ=os.environ):
    """The prefix the reframe command line gives (--prefix DIR, --prefix=DIR or an abbreviation
    down to --pre, which argparse takes), else RFM_PREFIX, else None."""
    args = sys.argv[1:] if argv is None else argv
    given = None
    for i, arg in enumerate(args):
        name, _, value = arg.partition('=')
        if len(name) >= 5 and '--prefix'.startswith(name):
            given = value if value else (args[i + 1] if i + 1 < len(args) else None)
    return given or environ.get('RFM_PREFIX') or None


def log_file(system_prefix, argv=None, environ=os.environ):
    """ReFrame's debug log: reframe.log in the run's prefix (given_prefix(), else the system's), as
    stage, output and perf logs go there, from whatever directory reframe starts in; where that
    directory does not exist yet (a site's first run), the current directory's. ReFrame opens the
    log before it makes any directory, and loading a config writes nothing."""
    prefix = os.path.abspath(given_prefix(argv, environ) or system_prefix)
    return os.path.join(prefix, 'reframe.log') if os.path.isdir(prefix) else 'reframe.log'


def dry_run_perflog_dir(environ=os.environ):
    """The user's own cache ($XDG_CACHE_HOME, else ~/.cache), not a folder of a predictable name
    in the shared /tmp, which another user could make first (issue 48)."""
    cache = environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return environ.get('MLCHECK_DRY_RUN_PERFLOG_DIR') or os.path.join(cache, 'mlcheck', 'dry-run-perflogs')


def perflog_prefix(dry_run=None):
    """Where the perf logs go, below the perf log directory (--perflogdir).

    A dry run logs every performance value as None. Its lines go to an absolute directory of their
    own (os.path.join drops the perf log directory before an absolute path), so that neither the
    configured nor a --perflogdir perf log ever holds them.
    """
    if dry_run is None:
        dry_run = invoked_as_dry_run()
    if dry_run:
        return os.path.join(dry_run_perflog_dir(), PERFLOG_PREFIX)
    return PERFLOG_PREFIX


# the mode of ReFrame's locks (a perf log's, the results database's): their owner and group, who
# write beside them, and no one else can hold them (flock() needs only a descriptor open to read)
REFRAME_LOCK_MODE = 0o660


def perflog_directories(site_config, system_prefix, system, partition):
    """The directories into which ReFrame's filelog perf log handlers of a session write a
    partition's logs, worked out as ReFrame does (reframe.core.logging._create_filelog_handler:
    the system's prefix, the basedir that --perflogdir sets, the prefix of check_system and
    check_partition); a handler whose prefix names other fields is skipped."""
    found = []
    handlers = site_config.get('logging/0/handlers_perflog') or []
    for i, handler in enumerate(handlers):
        where = f'logging/0/handlers_perflog/{i}'
        if handler.get('type') != 'filelog':
            continue
        basedir = os.path.abspath(os.path.join(system_prefix, os.path.expandvars(site_config.get(f'{where}/basedir'))))
        try:
            found.append(os.path.join(basedir, os.path.expandvars(site_config.get(f'{where}/prefix')) % {
                'check_system': system, 'check_partition': partition}))
        except (KeyError, TypeError, ValueError):
            continue
    return found


def checked_perflog_files(directory, basename, trusted=False):
    """Before a session appends to <directory>/<basename>.log under ReFrame's lock
    .<basename>.lock: a log or a lock that is a symbolic link is refused (ReFrame opens both
    following links, so a co-writer's dangling .X.lock made root create a file anywhere), and a
    lock of ours from before its mode was set (0664: anyone could hold it) is brought to
    REFRAME_LOCK_MODE. That check is at setup and ReFrame opens them at the performance stage,
    minutes later: unless the site trusts the logs' other writers (`trusted`,
    extras.mlcheck.trusts_perflog_writers: a group's project directory), the directory and every
    folder above it must be changeable by the runner (or root) alone, so that no one can plant a
    link in between (issue 48, B9). What ReFrame cannot be made to do: wait on its lock with a
    deadline (fasteners blocks for ever; a holder in the logs' group stalls the session's logging)."""
    from mlcheck.errors import ConfigError
    from mlcheck.files import others_can_change
    found = None if trusted else others_can_change(directory, {0, os.geteuid()})
    if found:
        raise ConfigError(f'perf log directory {directory}: {found[0]} {found[1]}, so another user '
                          'could swap the log or its lock for a link before ReFrame opens them '
                          '(it follows links): not run; make it yours alone, or set '
                          'extras.mlcheck.trusts_perflog_writers if the site trusts them')
    for name in (f'{basename}.log', f'.{basename}.lock'):
        path = os.path.join(directory, name)
        if _is_link(path):
            raise ConfigError(f'perf log file {path} is a symbolic link, which ReFrame would write '
                              'through: not run; remove the link')
        if name.endswith('.lock'):
            _bring_to_lock_mode(path)


def _is_link(path):
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _bring_to_lock_mode(path):
    """A lock file of ours at `path` (not a link) of another mode brought to REFRAME_LOCK_MODE;
    another user's, or none, left as it is."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:            # none, not ours to read, or a link made since (ELOOP)
        return
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and \
                stat.S_IMODE(info.st_mode) != REFRAME_LOCK_MODE:
            os.fchmod(fd, REFRAME_LOCK_MODE)
    finally:
        os.close(fd)


def checked_database_lock(db_file):
    """Before a session is stored in the results database `db_file` (at its end, whatever its
    tests did): ReFrame opens the lock 'a+' following a link, made with the database's mode (644
    by default: anyone can flock() it and stall every session's end). A lock of ours is brought
    to REFRAME_LOCK_MODE, and one made here where there is none; a link there is replaced by a
    lock of ours (the store at the session's end would open it as root, creating its target),
    then refused in one line. What ReFrame cannot be made to do: wait on it with a deadline."""
    from mlcheck.errors import ConfigError
    from mlcheck.files import Directory
    from mlcheck.harness.reframe_api import database_lock
    path = database_lock(db_file)
    directory = os.path.dirname(path)
    if _is_link(path):
        target = os.readlink(path)
        try:
            with Directory(directory, what='results database directory') as place:
                place.replace('.db.lock', b'', REFRAME_LOCK_MODE)
            done = 'replaced by a lock of ours'
        except OSError as err:
            done = f'not replaced ({err.strerror}): ReFrame will open it at the session\'s end'
        raise ConfigError(f'results database lock {path} was a symbolic link to {target}, which '
                          f'ReFrame would open following it: {done}; not run')
    try:
        os.makedirs(directory, exist_ok=True)       # ReFrame makes it at the store anyway
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        _bring_to_lock_mode(path)                    # there already, or not ours to make
        return
    try:
        os.fchmod(fd, REFRAME_LOCK_MODE)
    finally:
        os.close(fd)


def logging_config(system_prefix):
    """The logging section of a site whose system writes under `system_prefix`."""
    return [{
        'handlers': [
            {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
            {'type': 'file', 'name': log_file(system_prefix), 'level': 'debug', 'append': False,
             'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s'},
        ],
        'handlers_perflog': [{
            'type': 'filelog',
            'prefix': perflog_prefix(),
            'level': 'info',
            'format': PERFLOG_FIELDS + PERFVAR_FIELDS,
            'datefmt': '%FT%T%:z',     # completion times with their UTC offset
            'append': True,
            # sessions that share a perf log (a project directory) append whole lines, one at a time;
            # the lock file (.<check>.lock beside the log): its owner and group (who write the logs) can
            # hold it, and no one else (flock needs only read access; issue 48)
            'locking_enable': True,
            'locking_file_mode': f'{REFRAME_LOCK_MODE:o}',
        }],
        'perflog_multiline': True,
    }]


def run_prefix(system):
    """Where ReFrame writes a site's stage and output directories and perf logs (a system's
    `prefix`; `--prefix` still overrides it): $MLCHECK_PREFIX, else the user's own
    ~/.local/share/mlcheck/<system>, beside the results database, so that `reframe -c checks/ -r`
    writes the same place from whatever directory staff start it in."""
    return (os.environ.get('MLCHECK_PREFIX')
            or os.path.join(os.path.expanduser('~'), '.local', 'share', 'mlcheck', system))


def storage_config(default_db_file):
    """ReFrame's results database, on: every session is stored, so --performance-compare,
    --list-stored-sessions and python -m mlcheck.commands.report can read it. RFM_SQLITE_DB_FILE, ReFrame's
    own variable, overrides the site's default path."""
    return [{'enable': True, 'sqlite_db_file': default_db_file}]


def references_dir():
    return os.environ.get('MLCHECK_REFERENCES_DIR') or os.path.join(CONFIG_DIR, 'references')


def references_file(system):
    """Performance references of a system: ReFrame's external YAML, indexed by
    partition, image and node count (see config/references/, written by mlcheck.commands.baseline)."""
    return os.path.join(references_dir(), f'{system}.yaml')


def slurm_gpu_partition(partition):
    """A partition of GPU nodes as every site here runs it: Slurm's srun, the builtin environment,
    at most 20 jobs at a time of at most 30 minutes, and GPUs asked per node (num_gpus_per_node
    fills ReFrame's documented `_rfm_gpu` resource); `partition` holds the site's own keys (name,
    access, container platform, environment, extras) and may override these."""
    return {'scheduler': 'slurm', 'launcher': 'srun', 'environs': ['builtin'], 'max_jobs': 20,
            'time_limit': '30m',
            'resources': [{'name': '_rfm_gpu', 'options': ['--gpus-per-node={num_gpus_per_node}']}],
            **partition}


def builtin_environment(target_systems):
    # the checks run in the image's (or host's) own Python; no compiler environment is needed
    return {'name': 'builtin', 'cc': 'cc', 'cxx': '', 'ftn': '', 'target_systems': target_systems}


def shared_part(name):
    """The names config/_<name>.py defines: a description several site files share (a node
    model), read from this checkout's config/ wherever the site file itself was loaded from."""
    return runpy.run_path(os.path.join(CONFIG_DIR, f'_{name}.py'))
