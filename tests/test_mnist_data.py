"""The MNIST program reads its IDX files itself (no torchvision import on any rank, issue 38):
every sample is the tensor and label torchvision's MNIST with ToTensor and Normalize gives, and
a file that is not what its header says ends the program in one line."""

import importlib.util
import os

import pytest
import torch
from torchvision import datasets, transforms

from conftest import REPO

MNIST_DIR = os.environ.get('MLCHECK_DATA_DIR', os.path.join(REPO, 'var', 'data'))
RAW = os.path.join(MNIST_DIR, 'MNIST', 'raw')


def program():
    spec = importlib.util.spec_from_file_location('mnist_ddp', os.path.join(REPO, 'src', 'pytorch', 'mnist', 'mnist_DDP.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not os.path.isdir(RAW), reason=f'no staged MNIST in {RAW} (bin/setup stages it)')
@pytest.mark.parametrize('train', [True, False])
def test_every_sample_is_torchvisions(train):
    mnist = program()
    ours = mnist.MNISTImages(RAW, train)
    theirs = datasets.MNIST(MNIST_DIR, train=train, download=False, transform=transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((mnist.MNIST_MEAN,), (mnist.MNIST_STD,))]))
    assert len(ours) == len(theirs)
    assert torch.equal(ours.targets, theirs.targets)
    step = max(1, len(ours) // 500)
    for index in range(0, len(ours), step):
        image, label = ours[index]
        expected, expected_label = theirs[index]
        assert label == expected_label and image.dtype == expected.dtype
        assert torch.equal(image, expected), index


def test_a_file_unlike_its_header_is_one_line(tmp_path):
    mnist = program()
    good = bytes([0, 0, 8, 1]) + (3).to_bytes(4, 'big') + bytes([1, 2, 3])
    (tmp_path / 'labels').write_bytes(good)
    assert mnist.read_idx(str(tmp_path / 'labels'), 1).tolist() == [1, 2, 3]
    for name, data in [('short', good[:-1]), ('type', bytes([0, 0, 9, 1]) + good[4:]), ('dims', good)]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(SystemExit, match=f'{tmp_path / name}: '):
            mnist.read_idx(str(tmp_path / name), 3 if name == 'dims' else 1)


@pytest.mark.parametrize('plant', ['fifo', 'zero'])
def test_a_planted_file_hangs_no_rank(tmp_path, plant):
    """Issue 48 re-check, item 4: read_idx opened a FIFO (every rank waited for a writer) and
    read a link to /dev/zero without end; now neither is read (seen failing on 8e9d6a4)."""
    path = tmp_path / 'train-images-idx3-ubyte'
    os.mkfifo(path) if plant == 'fifo' else path.symlink_to('/dev/zero')
    with pytest.raises(SystemExit, match='not read'):
        program().read_idx(str(path), 3)


def test_the_rank_line_names_torchvision_without_importing_it():
    """The `rank` fact's torchvision (a stack fact the report compares) as torchvision.__version__
    says it, build suffix included, read without the 2-5 s import."""
    import subprocess
    import sys
    found = subprocess.run([sys.executable, '-c', 'import sys; sys.path.insert(0, sys.argv[1]); import ddp_common; '
                            'print(ddp_common.torchvision_version(), "torchvision" in sys.modules)',
                            os.path.join(REPO, 'src', 'pytorch')], capture_output=True, text=True, check=True)
    import torchvision
    assert found.stdout.split() == [torchvision.__version__, 'False']
