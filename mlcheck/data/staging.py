"""Stage training data in its real on-disk format, for machines that cannot download it.

MNIST: scikit-learn ships a real handwritten-digits set (1797 images of 8x8 pixels). Each digit
is scaled to 20x20 and centred in a 28x28 frame, as MNIST's digits are, and written as MNIST's
IDX files under DEST/MNIST/raw/, where torchvision's MNIST loader reads them.

CIFAR-100: no copy ships anywhere, so a small set is generated: each of the 100 classes is a
random smooth colour pattern, each image that pattern shifted and with noise, so a network can
learn it. It is written in CIFAR-100's own python-pickle format (DEST/cifar-100-python/train,
test, meta), where torchvision's CIFAR100 loader reads it.

    python -m mlcheck.data.staging mnist|cifar100 DEST
"""

import argparse
import os
import pickle
import shutil
import struct
import sys
import tempfile

import numpy as np

from mlcheck.data.datasets import IDX_UBYTE, MNIST_FILES   # torchvision's names, the IDX type code

TEST_FRACTION = 1 / 6   # MNIST's own split is 60000 / 10000
DIGIT_SIZE, FRAME_SIZE = 20, 28


def write_idx(path, array):
    """IDX: two zero bytes, the type code, the number of dimensions, big-endian sizes, the data."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    with open(path, 'wb') as out:
        out.write(struct.pack('>BBBB', 0, 0, IDX_UBYTE, array.ndim))
        out.write(struct.pack(f'>{array.ndim}I', *array.shape))
        out.write(array.tobytes())


def digits_as_mnist(seed=0):
    """(train_images, train_labels, test_images, test_labels) as uint8 arrays shaped like MNIST."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    frames = np.zeros((len(digits.images), FRAME_SIZE, FRAME_SIZE), dtype=np.uint8)
    offset = (FRAME_SIZE - DIGIT_SIZE) // 2
    for i, image in enumerate(digits.images):          # pixel values are 0..16
        small = Image.fromarray(np.uint8(image * 255 / 16))
        big = small.resize((DIGIT_SIZE, DIGIT_SIZE), Image.BILINEAR)
        frames[i, offset:offset + DIGIT_SIZE, offset:offset + DIGIT_SIZE] = np.asarray(big)

    order = np.random.default_rng(seed).permutation(len(frames))
    n_test = int(len(frames) * TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    labels = digits.target.astype(np.uint8)
    return frames[train], labels[train], frames[test], labels[test]


def stage_mnist(dest):
    """Write the digits as MNIST under dest/MNIST/raw; a complete earlier staging is kept."""
    def write(tmp):
        train_x, train_y, test_x, test_y = digits_as_mnist()
        for split, (x, y) in {'train': (train_x, train_y), 'test': (test_x, test_y)}.items():
            images, labels = MNIST_FILES[split]
            write_idx(os.path.join(tmp, images), x)
            write_idx(os.path.join(tmp, labels), y)

    names = [name for pair in MNIST_FILES.values() for name in pair]
    return _stage(os.path.join(dest, 'MNIST', 'raw'), names, write)


CIFAR100_CLASSES, CIFAR100_COARSE = 100, 20
CIFAR_SIZE = 32


def generated_cifar100(train_per_class=50, test_per_class=10, seed=0):
    """{'train': (images, fine labels), 'test': ...}: uint8 images N x 32 x 32 x 3 (HWC)."""
    rng = np.random.default_rng(seed)
    # a smooth pattern per class: random 4x4 colours, scaled up by repetition and blurred
    coarse = rng.uniform(40, 215, size=(CIFAR100_CLASSES, 4, 4, 3))
    patterns = coarse.repeat(8, axis=1).repeat(8, axis=2)
    patterns = (patterns + np.roll(patterns, 4, axis=1) + np.roll(patterns, 4, axis=2)) / 3
    sets = {}
    for split, per_class in (('train', train_per_class), ('test', test_per_class)):
        labels = np.repeat(np.arange(CIFAR100_CLASSES), per_class)
        rng.shuffle(labels)
        shifts = rng.integers(-3, 4, size=(len(labels), 2))
        images = np.stack([np.roll(patterns[c], tuple(shift), axis=(0, 1)) for c, shift in zip(labels, shifts)])
        images = images + rng.normal(0, 25, size=images.shape)
        sets[split] = (np.clip(images, 0, 255).astype(np.uint8), labels)
    return sets


def stage_cifar100(dest):
    """Write the generated set as CIFAR-100's pickles under dest/cifar-100-python."""
    def write(tmp):
        for split, (images, labels) in generated_cifar100().items():
            entry = {  # the keys and layouts of the published files
                'filenames': [f'generated_{split}_{i:05d}.png' for i in range(len(labels))],
                'batch_label': f'generated {split} set',
                'fine_labels': [int(c) for c in labels],
                'coarse_labels': [int(c) % CIFAR100_COARSE for c in labels],
                # rows of 3072 bytes: the red plane, then green, then blue, each row-major
                'data': images.transpose(0, 3, 1, 2).reshape(len(labels), -1),
            }
            with open(os.path.join(tmp, split), 'wb') as out:
                pickle.dump(entry, out, protocol=2)
        meta = {'fine_label_names': [f'class_{i:02d}' for i in range(CIFAR100_CLASSES)],
                'coarse_label_names': [f'superclass_{i:02d}' for i in range(CIFAR100_COARSE)]}
        with open(os.path.join(tmp, 'meta'), 'wb') as out:
            pickle.dump(meta, out, protocol=2)

    return _stage(os.path.join(dest, 'cifar-100-python'), ['train', 'test', 'meta'], write)


def _stage(target, names, write):
    """Run write(tmpdir) and move the result to target; a complete earlier staging is kept."""
    if all(os.path.isfile(os.path.join(target, name)) for name in names):
        return target, False
    os.makedirs(os.path.dirname(target), exist_ok=True)
    # write beside the target and rename, so a run never sees half-written files
    tmp = tempfile.mkdtemp(prefix='.staging-', dir=os.path.dirname(target))
    try:
        write(tmp)
        os.chmod(tmp, 0o755)
        if os.path.isdir(target):
            shutil.rmtree(target)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target, True


STAGERS = {'mnist': stage_mnist, 'cifar100': stage_cifar100}


def main(argv=None):
    parser = argparse.ArgumentParser(description='Stage datasets in their real formats.')
    parser.add_argument('dataset', choices=sorted(STAGERS))
    parser.add_argument('dest', help='directory to stage into (DEST/MNIST/raw, DEST/cifar-100-python)')
    args = parser.parse_args(argv)
    target, written = STAGERS[args.dataset](args.dest)
    print(f'{args.dataset}: {"staged" if written else "already staged"} in {target}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
