"""What a staged dataset must look like, checked before a job is submitted (standard library only).

A directory that exists but holds missing, truncated or foreign files would otherwise make
every rank fail as it starts to read; here it is one line naming the file.
"""

import math
import os
import struct

from mlcheck.errors import ConfigError

# torchvision's MNIST file names under DIR/MNIST/raw: (images, labels) per split
MNIST_FILES = {
    'train': ('train-images-idx3-ubyte', 'train-labels-idx1-ubyte'),
    'test': ('t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'),
}
IDX_UBYTE = 0x08


def idx_problem(path, ndim):
    """Why `path` is not an IDX file of unsigned bytes in `ndim` dimensions, or None."""
    if not os.path.isfile(path):
        return 'is missing'
    size = os.path.getsize(path)
    with open(path, 'rb') as stream:
        header = stream.read(4 + 4 * ndim)
    if len(header) < 4 + 4 * ndim:
        return f'is corrupt: {size} bytes, shorter than its IDX header'
    if header[:4] != bytes([0, 0, IDX_UBYTE, ndim]):
        return (f'is corrupt: header {header[:4].hex()} is not that of IDX unsigned bytes in '
                f'{ndim} dimension(s) ({bytes([0, 0, IDX_UBYTE, ndim]).hex()})')
    shape = struct.unpack(f'>{ndim}I', header[4:])
    expected = len(header) + math.prod(shape)
    if size != expected:
        return f'is corrupt: {size} bytes, but its header ({"x".join(map(str, shape))}) needs {expected}'
    return None


def check_mnist(root, source):
    """A ConfigError naming the first MNIST file under `root`/MNIST/raw that is missing or corrupt."""
    for images, labels in MNIST_FILES.values():
        for name, ndim in ((images, 3), (labels, 1)):
            path = os.path.join(root, 'MNIST', 'raw', name)
            problem = idx_problem(path, ndim)
            if problem:
                raise ConfigError(f'mnist dataset file {path} {problem} (from {source})')
