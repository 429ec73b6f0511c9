"""Stage training data in its real on-disk format, for sites that cannot download MNIST.

scikit-learn ships a real handwritten-digits set (1797 images of 8x8 pixels). Each digit is
scaled to 20x20 and centred in a 28x28 frame, as MNIST's digits are, and written as MNIST's
IDX files under DEST/MNIST/raw/, where torchvision's MNIST loader reads them.

    python -m mlcheck.staging mnist DEST
"""

import argparse
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

from mlcheck.datasets import IDX_UBYTE, MNIST_FILES   # torchvision's names, the IDX type code

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
    raw = os.path.join(dest, 'MNIST', 'raw')
    names = [name for pair in MNIST_FILES.values() for name in pair]
    if all(os.path.isfile(os.path.join(raw, name)) for name in names):
        return raw, False

    train_x, train_y, test_x, test_y = digits_as_mnist()
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    # write beside the target and rename, so a run never sees half-written files
    tmp = tempfile.mkdtemp(prefix='.raw-', dir=os.path.dirname(raw))
    try:
        for split, (x, y) in {'train': (train_x, train_y), 'test': (test_x, test_y)}.items():
            images, labels = MNIST_FILES[split]
            write_idx(os.path.join(tmp, images), x)
            write_idx(os.path.join(tmp, labels), y)
        os.chmod(tmp, 0o755)
        if os.path.isdir(raw):
            shutil.rmtree(raw)
        os.rename(tmp, raw)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return raw, True


def main(argv=None):
    parser = argparse.ArgumentParser(description='Stage datasets in their real formats.')
    parser.add_argument('dataset', choices=['mnist'])
    parser.add_argument('dest', help='directory to stage into (MNIST goes to DEST/MNIST/raw)')
    args = parser.parse_args(argv)
    raw, written = stage_mnist(args.dest)
    print(f'{args.dataset}: {"staged" if written else "already staged"} in {raw}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
