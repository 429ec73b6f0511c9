"""The CIFAR-100 program's two data paths, and the loader timed alone.

- loader: torchvision's CIFAR100 dataset and a DataLoader; each image is cropped, flipped, made a
  tensor and normalised in the loader's worker processes (the seeds' code path).
- device: the training set, decoded once by the same torchvision reader, kept as uint8 on the
  rank's device (50,000 x 3 x 32 x 32 bytes: 150 MB); each batch is cropped, flipped and
  normalised there (augment_on_device). Each pass reshuffles which images a rank gets (RankShare,
  as DistributedSampler), so every rank holds the whole set, not a fixed share of it.

Both paths draw the same samples per pass (the same sampler), the same augmentation
distribution (RandomCrop(32, padding=4) with zero padding, then a flip with probability 1/2)
and normalise with the same mean and deviation. Standard library, torch and torchvision only.
"""

import copy
import hashlib
import io
import itertools
import os
import pickle
import sys
import time

import torch
from torchvision import datasets, transforms

from regular_file import NotRegular, read_regular  # src/pytorch, on the programs' sys.path

MEAN, STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)
NUM_CLASSES = 100
SIZE, PADDING = 32, 4


# The files a site may stage, by MD5 (the digest torchvision records): the published archive's,
# from torchvision's own lists, and those of the stand-in that `python -m mlcheck.data.staging
# cifar100` generates (its seed is fixed, so are its bytes; tests/test_cifar100.py checks them).
PUBLISHED_MD5 = {**dict(datasets.CIFAR100.train_list + datasets.CIFAR100.test_list),
                 datasets.CIFAR100.meta['filename']: datasets.CIFAR100.meta['md5']}
STAND_IN_MD5 = {'train': 'afb718cf16b0fd193670a26bb8ce00d1', 'test': '1342bd60820effb8c01949219984ab88',
                'meta': '223f53c88f4ac78dc6654682bc4dc603'}
# The most bytes each file may have: the published one's pixels (50,000 and 10,000 images of 3,072
# bytes) and labels, with room for its names; the stand-in is smaller. Nothing is read past this:
# a dataset file that is /dev/zero or grows without end must not fill every rank's memory.
MAX_BYTES = {'train': 160_000_000, 'test': 32_000_000, 'meta': 64_000}
# set in the job script where the site config trusts the dataset's other writers
# (extras.mlcheck.trusts_dataset_writers: a group-writable project directory)
TRUST_VARIABLE = 'MLCHECK_TRUSTS_DATASET_WRITERS'


class CIFARUnpickler(pickle.Unpickler):
    """Unpickles what CIFAR-100's files hold: dicts, lists, strings, numbers and numpy arrays.
    Any other global a pickle names (os.system, say) is refused: a file planted in the dataset
    directory cannot run code in the ranks."""
    ALLOWED = {('numpy', 'ndarray'), ('numpy', 'dtype'), ('_codecs', 'encode'),   # protocol 2 bytes
               ('numpy.core.multiarray', '_reconstruct'),     # numpy 1 (the published files)
               ('numpy._core.multiarray', '_reconstruct')}    # numpy 2 (the stand-in)

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f'{module}.{name} is not part of the CIFAR-100 format')
        return super().find_class(module, name)


def read_cifar_file(path, trusted=None):
    """The data of one CIFAR-100 file, read once: refused (SystemExit, one line) if it is not a
    regular file (a link, a FIFO, a device) or larger than MAX_BYTES, if others than its
    owner, root or this user can write it (unless `trusted`, default: $MLCHECK_TRUSTS_DATASET_WRITERS),
    if its MD5 is neither the published file's nor the stand-in's, or if it names anything
    but the format's types."""
    if trusted is None:
        trusted = bool(os.environ.get(TRUST_VARIABLE))
    name = os.path.basename(path)
    # not through a link (to /dev/zero, say), and never waiting on a FIFO: every rank would hang
    try:
        content, info = read_regular(path, MAX_BYTES.get(name, 0), with_stat=True)
    except NotRegular as err:
        sys.exit(f'CIFAR-100 file {path} is not a regular file of at most {MAX_BYTES.get(name, 0)} '
                 f'bytes ({err}): not read; stage it again')
    except OSError as err:
        sys.exit(f'CIFAR-100 file {path} cannot be opened ({err.strerror}; a link is not followed): '
                 'stage it again')
    if not trusted and (info.st_uid not in (0, os.getuid()) or info.st_mode & 0o022):
        sys.exit(f'CIFAR-100 file {path} can be written by others (owner uid {info.st_uid}, '
                 f'mode {info.st_mode & 0o777:o}): not read; stage it privately, or set '
                 'extras.mlcheck.trusts_dataset_writers if the site trusts them')
    digest = hashlib.md5(content, usedforsecurity=False).hexdigest()
    if digest not in (PUBLISHED_MD5.get(name), STAND_IN_MD5.get(name)):
        sys.exit(f'CIFAR-100 file {path} is neither the published file nor the generated stand-in '
                 f'(MD5 {digest}): stage it again')
    try:
        return CIFARUnpickler(io.BytesIO(content), encoding='latin1').load()
    except (pickle.UnpicklingError, EOFError, ValueError) as err:
        sys.exit(f'CIFAR-100 file {path} cannot be read: {err}')


class StagedCIFAR100(datasets.CIFAR100):
    """torchvision's CIFAR100 dataset (its images, targets, classes and transforms) over the files
    of a staged directory as read_cifar_file reads them, not by torchvision's pickle.load: the
    real files or the generated stand-in in the same format."""

    def __init__(self, root, train=True, transform=None, target_transform=None):
        datasets.VisionDataset.__init__(self, root, transform=transform, target_transform=target_transform)
        self.train = train
        folder = os.path.join(self.root, self.base_folder)
        entry = read_cifar_file(os.path.join(folder, 'train' if train else 'test'))
        # rows of 3072 bytes (red, green, blue planes) -> (N, 32, 32, 3), as torchvision does
        self.data = entry['data'].reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))
        self.targets = list(entry['fine_labels'])
        self.classes = read_cifar_file(os.path.join(folder, 'meta'))[self.meta['key']]
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}


def loader_transform(augment=True):
    """The loader path's per-image augmentation and normalisation (PIL image -> tensor)."""
    crop_and_flip = [transforms.RandomCrop(SIZE, padding=PADDING),
                     transforms.RandomHorizontalFlip()] if augment else []
    return transforms.Compose([*crop_and_flip, transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


def training_set(args, samples_needed, augment=True):
    """The training set: the staged CIFAR-100, transformed as the loader path does, or with
    --synthetic random normalised images (no augmentation)."""
    if args.synthetic:
        generator = torch.Generator().manual_seed(args.seed)
        images = torch.randn(samples_needed, 3, SIZE, SIZE, generator=generator)
        labels = torch.randint(0, NUM_CLASSES, (samples_needed,), generator=generator)
        return torch.utils.data.TensorDataset(images, labels)
    if not args.data_dir or not os.path.isdir(os.path.join(args.data_dir, 'cifar-100-python')):
        sys.exit(f'CIFAR-100 data not found: {args.data_dir}/cifar-100-python does not exist '
                 f'(stage it, or use --synthetic)')
    return StagedCIFAR100(args.data_dir, train=True, transform=loader_transform(augment))


def augment_on_device(images, generator):
    """uint8 images (N, 3, 32, 32) on a device -> float, randomly cropped from the image padded
    by 4 zero pixels (both offsets uniform in 0..8, as RandomCrop), flipped left-right with
    probability 1/2 (as RandomHorizontalFlip), scaled to [0, 1] and normalised (as ToTensor and
    Normalize). The random numbers come from `generator`, on the images' device."""
    count, device = len(images), images.device
    padded = torch.nn.functional.pad(images, (PADDING,) * 4)
    top, left = (torch.randint(0, 2 * PADDING + 1, (count,), device=device, generator=generator)
                 for _ in range(2))
    flip = torch.rand(count, device=device, generator=generator) < 0.5
    offsets = torch.arange(SIZE, device=device)
    rows = (top[:, None] + offsets)[:, None, :, None]
    # a flipped crop reads its columns right to left
    columns = torch.where(flip[:, None], left[:, None] + offsets.flip(0), left[:, None] + offsets)
    crops = padded[torch.arange(count, device=device)[:, None, None, None],
                   torch.arange(3, device=device)[None, :, None, None], rows, columns[:, None, None, :]]
    return normalise(crops)


def normalise(images):
    """uint8 images (N, 3, H, W) -> float, as ToTensor and Normalize do."""
    mean = torch.tensor(MEAN, device=images.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=images.device).view(1, 3, 1, 1)
    return (images.float() / 255 - mean) / std


class DeviceImages:
    """The training set on the rank's device, and endless streams of its augmented batches."""

    def __init__(self, dataset, device, augment=True):
        self.synthetic = isinstance(dataset, torch.utils.data.TensorDataset)
        if self.synthetic:      # --synthetic: made normalised, no augmentation
            self.images, self.labels = (t.to(device) for t in dataset.tensors)
        else:   # torchvision's reader decoded the pickle into (N, 32, 32, 3) uint8
            self.images = torch.from_numpy(dataset.data).to(device).permute(0, 3, 1, 2).contiguous()
            self.labels = torch.tensor(dataset.targets, device=device)
        self.augment, self.device = augment, device

    def __len__(self):
        return len(self.labels)

    def batches(self, sampler, batch, seed):
        """Batches of `batch` in `sampler`'s order, a new pass (sampler.set_epoch) when one runs
        out, short last batches dropped (as the loader's drop_last); augmentation draws from a
        generator of its own seeded with `seed`, so two streams leave each other's draws alone."""
        generator = torch.Generator(device=self.device).manual_seed(seed)
        for data_pass in itertools.count():
            sampler.set_epoch(data_pass)
            order = torch.tensor(list(sampler), device=self.device)
            for start in range(0, len(order) - batch + 1, batch):
                chosen = order[start:start + batch]
                images = self.images[chosen]
                yield self.prepare(images, generator), self.labels[chosen]

    def prepare(self, images, generator):
        """A batch as the model takes it: augmented and normalised, as the loader path's."""
        if self.synthetic:
            return images
        if self.augment:
            return augment_on_device(images, generator)
        return normalise(images)


def private_stream(device_images, sampler, batch, seed):
    """A stream on the device path with a copy of `sampler`: the main stream's order is untouched."""
    return device_images.batches(copy.copy(sampler), batch, seed)


def time_loader(batches, steps, warmup=3):
    """The loader alone, no model: images/s of `steps` batches of the stream `batches` (a
    private stream on the loader path), after `warmup` untimed ones (its workers starting)."""
    for _ in range(warmup):
        next(batches)
    samples, start = 0, time.perf_counter()
    for _ in range(steps):
        samples += len(next(batches)[1])
    seconds = time.perf_counter() - start
    return {'steps': steps, 'samples': samples, 'seconds': seconds,
            'images_per_s': samples / seconds if seconds > 0 else 0.0}
