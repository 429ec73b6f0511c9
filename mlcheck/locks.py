"""A lock file that only its owners can hold, waited for with a deadline (issue 48, item 6).

flock needs no write access: anyone who can open a lock file for reading can hold it, and a
writer waiting on it then waits for ever without a word. So a lock file is created 0600 or 0660
(never through a link), and a wait ends after `wait_s` with one line naming the lock. Standard
library only: bin/simslurm takes its lock here too.
"""

import fcntl
import os
import time


class LockBusy(Exception):
    """The lock stayed held past the deadline: its message names the lock and the wait."""


def hold(path, wait_s, mode=0o600, what='the lock', dir_fd=None, shown=None):
    """The descriptor of `path` once flock'ed (not inherited by children; closing it releases
    the lock); LockBusy after `wait_s` seconds of another holder, or where it cannot be opened
    (a link, which is not followed). A new lock file gets `mode` from the start, an existing one
    of ours is brought back to it. `path` relative to `dir_fd` if given, said as `shown`."""
    shown = shown or path
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    except OSError as err:
        raise LockBusy(f'{what} {shown} cannot be opened ({err.strerror}; a link is not followed): '
                       'remove it if it is a link') from None
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, mode)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(f'{what} {shown} has been held by another process for {wait_s:g} s; '
                                   'wait for it to finish, or find it with: fuser -v ' + shown) from None
                time.sleep(0.1)
    except BaseException:
        os.close(fd)
        raise
