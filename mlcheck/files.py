"""Reading and writing files in a directory that others may write too (issue 48): report
folders (-o DIR), the references directory, perf log directories.

The directory is opened once; every name in it is then taken relative to that descriptor, so
swapping a folder above for a link mid-way (renameat2) moves nothing. A file is replaced by a
private scratch file made in the directory (O_EXCL | O_NOFOLLOW), synced, renamed over the name:
a planted link at the name is replaced, never written through, and a dangling one creates nothing
elsewhere. A file is read as src/pytorch/regular_file.py reads (no link, no FIFO, a size cap).
"""

import contextlib
import os
import secrets
import stat

from mlcheck.contract import program_module
from mlcheck.errors import InputError

_regular = program_module('regular_file')
NotRegular, TooLarge = _regular.NotRegular, _regular.TooLarge
read_regular, read_start = _regular.read_regular, _regular.read_start


def others_can_change(path, owners):
    """(folder, what is wrong) of the first folder, from `path` up to /, that someone not in
    `owners` (uids) could change, or None: each folder that exists, of the path as given and of
    its real path, must be owned by one of them and writable by no one else, unless sticky (as
    /tmp: another user cannot rename what is not theirs there); `path` itself must not be a link.
    Whoever can change a folder can swap what lies below it for a link."""
    path = os.path.abspath(path)
    folders = []
    for start in dict.fromkeys([path, os.path.realpath(path)]):
        folders.append(start)
        while folders[-1] != '/':
            folders.append(os.path.dirname(folders[-1]))
    for folder in dict.fromkeys(folders):
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            continue            # made by the runner, who then owns it
        if folder == path and stat.S_ISLNK(info.st_mode):
            return folder, 'is a symbolic link'
        if stat.S_ISLNK(info.st_mode):
            continue            # a link above: its target's folders are checked as the real path's
        sticky = folder != path and info.st_mode & stat.S_ISVTX
        problem = (f'is owned by uid {info.st_uid}' if info.st_uid not in owners else
                   f'is writable by others (mode {stat.S_IMODE(info.st_mode):o})'
                   if info.st_mode & 0o022 and not sticky else
                   'is not a directory' if not stat.S_ISDIR(info.st_mode) else '')
        if problem:
            return folder, problem
    return None


class Directory:
    """A directory opened once (the path as given, a link to it followed: it is the user's)."""

    def __init__(self, path, make=False, what='directory', fd=None):
        self.path, self.what = path, what
        if fd is not None:
            self.fd = fd
            return
        try:
            if make:
                os.makedirs(path, exist_ok=True)
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as err:
            raise InputError(f'{what} {path} cannot be opened ({err.strerror})') from None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        os.close(self.fd)

    def below(self, name):
        """The sub-directory `name`, opened without following a link (OSError otherwise)."""
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
        return Directory(self.shown(name), what=self.what, fd=fd)

    def shown(self, name):
        return os.path.join(self.path, name)

    def read(self, name, max_bytes):
        """The bytes of `name` (a regular file, not a link, at most `max_bytes`); None if absent."""
        try:
            return read_regular(name, max_bytes, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except NotRegular as err:
            raise InputError(f'{self.shown(name)} is not read: {err}') from None
        except OSError as err:
            raise InputError(f'{self.shown(name)} cannot be read ({err.strerror})') from None

    def replace(self, name, data, mode=None):
        """`name` holds `data` (bytes) in one step; its mode `mode & 0o777` (no set-id bit is ever
        copied), else what open() makes under the umask."""
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        scratch = f'.{name}.{secrets.token_hex(4)}'
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=self.fd)
        try:
            with os.fdopen(fd, 'wb') as stream:
                stream.write(data)
                stream.flush()
                os.fchmod(stream.fileno(), mode & 0o777)
                os.fsync(stream.fileno())
            os.replace(scratch, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(scratch, dir_fd=self.fd)
            raise
        os.fsync(self.fd)       # the rename itself survives a crash

    def written_by(self, name, draw):
        """`name` holding what draw(stream) writes (a figure's PNG: savefig takes a stream),
        written as replace() writes."""
        import io
        buffer = io.BytesIO()
        draw(buffer)
        self.replace(name, buffer.getvalue())
