"""The simulated cluster's job accounting: a MariaDB server of its own (datadir and socket under
SIMSLURM_DIR/db, no TCP) and slurmdbd, with the cluster registered (bin/simslurm up and down).
Standard library only: bin/simslurm runs this with the system's python3.
"""

import os
import pwd
import shutil
import subprocess

from mlcheck.simulated.cluster import ACCT_DB, ACCT_DB_USER, CLUSTER, read_password
from mlcheck.simulated.processes import (Failure, own_file, port_owner, remove_files, say, show_log_tail,
                                         stop_pids, succeeds, wait_until)


def db_client(sim, command, *args):
    """A MariaDB program with the cluster's options (its socket)."""
    return [command, f"--defaults-file={sim.path('DB_CNF')}", *args]


def chown(path, user):
    """`path` given to `user`: the path itself, never what a link there points at."""
    os.chown(path, *pwd_ids(user), follow_symlinks=False)


def pwd_ids(user):
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def start_mariadb(sim):
    """MariaDB in its own datadir, as the mysql user (it refuses to run as root), with no network:
    slurmdbd reaches it through the socket. mariadb-install-db runs once; its marker says it
    finished."""
    if sim.daemon_pid('mariadbd'):
        return
    log, data = sim.path('MARIADBD_LOG'), sim.path('DB_DATA')
    own_file(log, 'mysql')
    installed = os.path.join(sim.path('DB_DIR'), 'installed')
    if not os.path.exists(installed):
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data, mode=0o700)
        os.chmod(data, 0o700)
        chown(data, 'mysql')
        with open(log, 'ab') as out:
            done = succeeds(db_client(sim, 'mariadb-install-db', '--auth-root-authentication-method=socket',
                                      '--skip-test-db'), stdout=out, stderr=out)
        if not done:
            show_log_tail(log)
            raise Failure(f'mariadb-install-db failed to create the accounting database in {data}; see {log}')
        own_file(installed)
    # mariadbd stays in the foreground: setsid -f detaches it from us
    with open(log, 'ab') as out:
        succeeds([*sim.daemon_env(), 'setsid', '-f', 'mariadbd', f"--defaults-file={sim.path('DB_CNF')}"],
                 stdout=out, stderr=out)
    if wait_until(lambda: succeeds(db_client(sim, 'mariadb-admin', '--silent', 'ping'))
                  and sim.daemon_pid('mariadbd'), 30):
        say(f"started mariadbd (pid {sim.daemon_pid('mariadbd')})")
        return
    show_log_tail(log)
    raise Failure(f'mariadbd did not come up within 30 s; see {log}')


def setup_sql(password):
    """The accounting database and slurmdbd's user, with the password of its config; idempotent."""
    return (f"CREATE DATABASE IF NOT EXISTS {ACCT_DB};\n"
            f"CREATE USER IF NOT EXISTS '{ACCT_DB_USER}'@'localhost';\n"
            f"ALTER USER '{ACCT_DB_USER}'@'localhost' IDENTIFIED BY '{password}';\n"
            f"GRANT ALL ON {ACCT_DB}.* TO '{ACCT_DB_USER}'@'localhost';\n")


def setup_database(sim):
    """setup_sql, as root through the socket (unix_socket authentication)."""
    sql = setup_sql(read_password(sim.path('DB_PASSWORD_FILE')))
    if not succeeds(db_client(sim, 'mariadb', '-u', 'root'), input=sql.encode(), stdin=None,
                    stdout=None, stderr=None):
        raise Failure(f"could not create database {ACCT_DB} and its user {ACCT_DB_USER} in the MariaDB of "
                      f"{sim.path('DB_DIR')}; see {sim.path('MARIADBD_LOG')}")


def start_slurmdbd(sim):
    """slurmdbd, then the cluster registered in its database before slurmctld needs it (no
    associations are enforced: jobs need no account)."""
    log, port = sim.path('DBD_LOG'), sim.settings['DBD_PORT']
    if not sim.daemon_pid('slurmdbd'):
        sim.start_daemon('slurmdbd', 'slurmdbd', '', log,
                         ['env', f"MYSQL_UNIX_PORT={sim.path('DB_SOCKET')}", 'slurmdbd'])

    def listening():
        owner = port_owner(port)
        if owner and owner[0] == 'slurmdbd':
            return True
        if not sim.daemon_pid('slurmdbd'):
            show_log_tail(log)
            raise Failure(f'slurmdbd died; see {log}')
        return False

    if not wait_until(listening, 30):
        show_log_tail(log)
        raise Failure(f'slurmdbd did not listen on port {port} within 30 s; see {log}')
    try:
        proc = subprocess.run(['sacctmgr', '-n', '-P', 'list', 'cluster', 'format=cluster'], timeout=30,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        clusters, ok = proc.stdout.rstrip('\n'), proc.returncode == 0
    except subprocess.TimeoutExpired as err:
        clusters, ok = (err.output or b'').decode(errors='replace').rstrip('\n'), False
    if not ok:
        raise Failure(f'sacctmgr cannot reach slurmdbd: {clusters}; see {log}')
    if CLUSTER not in clusters.splitlines():
        if not succeeds(['sacctmgr', '-i', 'add', 'cluster', CLUSTER], timeout=30, stderr=None):
            raise Failure(f"sacctmgr could not register cluster '{CLUSTER}' with slurmdbd; see {log}")
        say(f'registered cluster {CLUSTER} in the accounting database')


def stop_accounting(sim):
    """slurmdbd and MariaDB at once (each takes a second or two): slurmdbd has nothing left to
    write once slurmctld is gone, and MariaDB shuts down cleanly on SIGTERM."""
    daemons = [(name, pid) for name in ('slurmdbd', 'mariadbd') if (pid := sim.daemon_pid(name))]
    if daemons:
        stop_pids(daemons)
    remove_files(sim.path('DBD_PIDFILE'))

