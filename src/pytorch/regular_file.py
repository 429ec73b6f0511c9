"""Reading a file that others may have planted, without hanging or filling memory (issue 48).

A name in a shared directory can be a FIFO (open() waits for a writer for ever), a link to
/dev/zero (read() never ends) or a link to a file the reader should not take. So a file is
opened without following a link (O_NOFOLLOW), non-blocking (a FIFO opens at once), and read only
if it is a regular file of at most `max_bytes`, checked on the open file. The CIFAR-100 and MNIST
readers, the perf log reader and the references reader all read this way. Standard library only:
the programs import it inside the images, and mlcheck loads it by path (mlcheck.contract).
"""

import os
import stat


class NotRegular(ValueError):
    """The file cannot be read as a regular file within its size: its message says why."""


class TooLarge(NotRegular):
    """A regular file larger than the bytes taken; `size`: its size."""

    def __init__(self, size, max_bytes):
        super().__init__(f'it holds {size} bytes, more than the {max_bytes} taken')
        self.size = size


def _opened(path, dir_fd):
    """(a stream of `path`, its os.stat_result), opened without following a link, non-blocking;
    NotRegular where it is a link or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == 40:          # ELOOP: the name is a symbolic link
            raise NotRegular('it is a symbolic link, not followed') from None
        raise
    stream = open(fd, 'rb')
    info = os.fstat(fd)              # of the file read, whatever the name points at later
    if not stat.S_ISREG(info.st_mode):
        stream.close()
        raise NotRegular(f'it is not a regular file (mode {info.st_mode:o})')
    return stream, info


def read_regular(path, max_bytes, dir_fd=None, with_stat=False):
    """The bytes of `path` (relative to `dir_fd` if given); NotRegular for a link, a FIFO, a
    device, a file larger than `max_bytes` (TooLarge) or one that grows while read; OSError where
    it cannot be opened for another reason (FileNotFoundError for none). With `with_stat`:
    (bytes, its os.stat_result)."""
    stream, info = _opened(path, dir_fd)
    with stream:
        if info.st_size > max_bytes:
            raise TooLarge(info.st_size, max_bytes)
        content = stream.read(info.st_size + 1)
    if len(content) > info.st_size:
        raise NotRegular('it grew while it was read')
    return (content, info) if with_stat else content


def read_start(path, length):
    """At most the first `length` bytes of `path`, opened as read_regular opens it: a file's
    header, without reading the rest."""
    stream, _ = _opened(path, None)
    with stream:
        return stream.read(length)
