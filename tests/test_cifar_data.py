"""The CIFAR-100 program's device data path against its loader path (src/pytorch/cifar/cifar_data.py):
each crop and flip is torchvision's, drawn from the same distribution, and the two paths train
the same model to the same loss curve."""

import math

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as F
from scipy import stats
from torchvision import transforms

from ddp_common import load_program
from test_rank_share import run_ranks

cifar_data = load_program('cifar/cifar_data.py')
OFFSETS = 2 * cifar_data.PADDING + 1      # 0..8 for each of top and left


def position_image():
    """A uint8 image (3, 32, 32) whose red is its row + 1 and green its column + 1 (0 is padding)."""
    rows, columns = torch.meshgrid(torch.arange(32), torch.arange(32), indexing='ij')
    return torch.stack([rows + 1, columns + 1, torch.full((32, 32), 7)]).to(torch.uint8)


def draws_of(crops):
    """(top, left, flipped) of each crop (N, 3, 32, 32) of position_image(), read from its pixels:
    the middle pixel lies inside the image at every offset."""
    red, green = crops[:, 0].long(), crops[:, 1].long()
    flipped = green[:, 16, 17] < green[:, 16, 16]
    middle_column = torch.where(flipped, green[:, 16, 15], green[:, 16, 16])   # unflipped, col 16
    return (red[:, 16, 16] - 13).numpy(), (middle_column - 13).numpy(), flipped.numpy()


def unnormalise(batch):
    mean = torch.tensor(cifar_data.MEAN).view(1, 3, 1, 1)
    std = torch.tensor(cifar_data.STD).view(1, 3, 1, 1)
    return torch.round((batch * std + mean) * 255).to(torch.uint8)


def device_crops(count, seed=0, augment=cifar_data.augment_on_device):
    generator = torch.Generator().manual_seed(seed)
    return unnormalise(augment(position_image().expand(count, -1, -1, -1).contiguous(), generator))


def torchvision_crops(count, seed=0):
    torch.manual_seed(seed)
    pipeline = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip()])
    return torch.stack([pipeline(position_image()) for _ in range(count)])


def cells(draws):
    """Counts of the 9 x 9 x 2 (top, left, flip) cells."""
    top, left, flipped = draws
    return np.bincount((top * OFFSETS + left) * 2 + flipped, minlength=OFFSETS * OFFSETS * 2)


def same_distribution(a, b):
    """The p-value that two samples of (top, left, flip) cells come from one distribution."""
    return stats.chi2_contingency(np.stack([cells(a), cells(b)]))[1]


def test_each_device_crop_is_torchvisions_crop_and_flip_at_its_offsets():
    image = position_image()
    crops = device_crops(400)
    for crop, top, left, flipped in zip(crops, *draws_of(crops)):
        expected = F.crop(F.pad(image, [4]), int(top), int(left), 32, 32)
        assert torch.equal(crop, F.hflip(expected) if flipped else expected)


def test_the_device_path_normalises_as_totensor_and_normalize():
    image = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    expected = transforms.Normalize(cifar_data.MEAN, cifar_data.STD)(image.float() / 255)
    assert torch.allclose(cifar_data.normalise(image), expected, atol=1e-6)


def test_the_offsets_and_flips_draw_from_torchvisions_distribution():
    """Every one of the 162 (top, left, flip) cells: the device path's draws against
    torchvision's RandomCrop(32, padding=4) + RandomHorizontalFlip, and both against uniform."""
    device, reference = draws_of(device_crops(16200)), draws_of(torchvision_crops(3240))
    assert same_distribution(device, reference) > 1e-3
    for draws in (device, reference):
        assert stats.chisquare(cells(draws))[1] > 1e-3
        assert set(draws[0]) == set(draws[1]) == set(range(OFFSETS))


def test_a_biased_augmentation_is_told_apart():
    """The same test on broken augmentations: the last offset never drawn, or flips at 70 %."""
    def patched(name, change):
        def augment(images, generator):
            real = getattr(torch, name)
            setattr(torch, name, lambda *a, **k: change(real, *a, **k))
            try:
                return cifar_data.augment_on_device(images, generator)
            finally:
                setattr(torch, name, real)
        return augment

    offsets_short = patched('randint', lambda real, low, high, *a, **k: real(low, high - 1, *a, **k))
    flips_often = patched('rand', lambda real, *a, **k: real(*a, **k) * (5 / 7))
    reference = draws_of(torchvision_crops(3240))
    for broken in (offsets_short, flips_often):
        assert same_distribution(draws_of(device_crops(16200, augment=broken)), reference) < 1e-6


def loss_curve(data, data_dir, *extra):
    run = run_ranks('cifar/train_cifar100.py', '--data', data, '--data-dir', data_dir, *extra,
                    '--model', 'resnet18', '--workers', '0', '--batch-size', '8', '--epochs', '3',
                    '--steps', '3', '--warmup-steps', '1', '--solo-steps', '1', '--loader-steps', '2')
    assert run.by_rank('loader')[0]['images_per_s'] > 0      # (rank 0's output)
    assert run.result()['data'] == data
    return [s['loss'] for s in sorted(run.events('summary'), key=lambda s: s['epoch'])]


def test_both_paths_train_two_gloo_ranks_to_the_same_loss_curve(tmp_path):
    """Same samples per pass (the sampler), same model (the seed), same normalisation: without
    random crops the two paths see the same batches, so their loss curves agree to float noise;
    with them the device path still trains."""
    from mlcheck.data import staging
    staging.stage_cifar100(str(tmp_path))
    device, loader = (loss_curve(data, str(tmp_path), '--no-augment') for data in ('device', 'loader'))
    assert all(math.isfinite(loss) for loss in device + loader)
    assert device == pytest.approx(loader, rel=1e-4)
    assert all(math.isfinite(loss) for loss in loss_curve('device', str(tmp_path), '--augment'))
