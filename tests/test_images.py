"""Image recipes and the image build's bookkeeping: cached images, and machines that cannot build.
(The builds themselves run in bin/setup; the end-to-end tests run the checks in the images.)"""

import collections
import os
import re
import sys

import pytest

from mlcheck.data import images
from mlcheck.site.images import ImageEntry
from mlcheck.site.images import ImageUnavailable

REAL_BUILD = images.build


def test_every_recipe_pins_torch_and_torchvision_exactly():
    assert len(images.recipe_names()) >= 2
    pins = {}
    for name in images.recipe_names():
        lines = [l for l in images.read_recipe(name).splitlines() if l and not l.startswith('#')]
        assert all(re.fullmatch(r'[\w-]+==[\w.]+', l) for l in lines), (name, lines)
        pins[name] = dict(l.split('==') for l in lines)
        assert name == f"torch-{pins[name]['torch']}"    # the name says what differs
    # the images differ in their torch release, so comparing them means something
    assert len({p['torch'] for p in pins.values()}) == len(pins)


def test_an_image_is_current_only_for_its_recipe_and_build_steps(tmp_path):
    name = images.recipe_names()[0]
    path = images.image_path(name, str(tmp_path))
    os.makedirs(path)
    assert not images.is_current(name, str(tmp_path))                # never built
    stamp = tmp_path / path / images.STAMP
    stamp.write_text(images.stamp_text(name))
    assert images.is_current(name, str(tmp_path))
    stamp.write_text(images.stamp_text(name).replace('==', '>='))    # an older recipe
    assert not images.is_current(name, str(tmp_path))
    stamp.write_text(f'mlcheck image build steps {images.BUILD_STEPS_VERSION - 1}\n' + images.read_recipe(name))
    assert not images.is_current(name, str(tmp_path))


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A machine that could build: root, both tools, plenty of disk; tests take one away."""
    state = {'uid': 0, 'tools': {'debootstrap', 'ch-run'}, 'free': 100e9}
    monkeypatch.setattr(images.os, 'geteuid', lambda: state['uid'])
    monkeypatch.setattr(images.shutil, 'which', lambda tool: f'/usr/bin/{tool}' if tool in state['tools'] else None)
    usage = collections.namedtuple('usage', 'total used free')
    monkeypatch.setattr(images.shutil, 'disk_usage', lambda path: usage(0, 0, state['free']))
    monkeypatch.setattr(images, 'disk_usage', lambda path: 0)
    built = []
    monkeypatch.setattr(images, 'build', lambda name, cache: built.append(name))
    return state, built, str(tmp_path)


@pytest.mark.parametrize('change, reason', [
    (lambda s: s.update(uid=1000), 'building needs root (debootstrap); run bin/setup as root'),
    (lambda s: s['tools'].discard('ch-run'), 'ch-run is not installed (Debian package charliecloud-runtime)'),
    (lambda s: s.update(free=3.2e9), 'only 3.2 GB free in {cache}; an image needs about 14 GB'),
])
def test_a_machine_that_cannot_build_records_why_and_is_not_an_error(machine, capsys, change, reason):
    state, built, cache = machine
    change(state)
    name = images.recipe_names()[0]
    assert images.build_missing([name], cache) == 0
    assert built == []
    expected = reason.format(cache=cache)
    assert images.unbuilt_reason(images.image_path(name, cache)) == expected
    assert f'images: {name}: not built: {expected}; its checks will be skipped' in capsys.readouterr().out


def test_a_failed_build_is_an_error_and_a_later_build_clears_the_record(machine, monkeypatch):
    state, built, cache = machine
    name = images.recipe_names()[0]

    def fail(name, cache):
        raise RuntimeError('pip download failed (exit 1): No matching distribution found for torch==2.14.1')
    monkeypatch.setattr(images, 'build', fail)
    assert images.build_missing([name], cache) == 1
    assert images.unbuilt_reason(images.image_path(name, cache)).startswith('pip download failed')

    monkeypatch.setattr(images, 'build', lambda name, cache: built.append(name))
    assert images.build_missing([name], cache) == 0
    assert built == [name] and images.unbuilt_reason(images.image_path(name, cache)) is None


def test_unknown_image_name_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        images.main(['build', 'torch-0.1'])
    assert exit_.value.code == 2
    assert 'no recipe config/images/torch-0.1/requirements.txt (recipes: torch-2.14.1, torch-2.9.1)' in capsys.readouterr().err


# --- the cache keyed by recipe content -------------------------------------------------------

def fake_build(name, cache):
    """What a finished build leaves: the image at its keyed path, with its stamp."""
    path = images.image_path(name, cache)
    os.makedirs(path)
    with open(os.path.join(path, images.STAMP), 'w') as f:
        f.write(images.stamp_text(name))


def with_recipe(monkeypatch, name, recipe):
    real = images.read_recipe
    monkeypatch.setattr(images, 'read_recipe', lambda n: recipe if n == name else real(n))


def test_another_recipe_is_built_beside_the_image_in_use(machine, monkeypatch):
    """Two checkouts whose recipes differ: each has its own image, and neither build removes
    the other's (it used to be cache/NAME for both, rebuilt, and removed, by each in turn)."""
    state, built, cache = machine
    monkeypatch.setattr(images, 'build', fake_build)
    name = images.recipe_names()[0]
    assert images.build_missing([name], cache) == 0
    first = images.image_path(name, cache)
    in_use = os.path.join(first, 'file-a-job-reads')
    open(in_use, 'w').close()

    with_recipe(monkeypatch, name, images.read_recipe(name) + 'numpy==2.3.5\n')
    second = images.image_path(name, cache)
    assert second != first and os.path.basename(second) == name      # named as before
    assert images.build_missing([name], cache) == 0
    assert os.path.exists(in_use) and images.is_current(name, cache)
    monkeypatch.undo()
    assert images.is_current(name, cache) and images.image_path(name, cache) == first


def test_a_failed_build_of_a_changed_recipe_skips_its_checks_saying_why(machine, monkeypatch, sim):
    """It used to leave the old image at the same path, which then ran instead of being skipped."""
    state, built, cache = machine
    monkeypatch.setattr(images, 'build', fake_build)
    name = images.recipe_names()[0]
    images.build_missing([name], cache)
    old = images.image_path(name, cache)

    def fail(name, cache):
        raise RuntimeError('pip download failed (exit 1): No matching distribution found for numpy==9')
    monkeypatch.setattr(images, 'build', fail)
    with_recipe(monkeypatch, name, images.read_recipe(name) + 'numpy==9\n')
    assert images.build_missing([name], cache) == 1
    new = images.image_path(name, cache)
    assert os.path.isdir(old) and not os.path.exists(new)            # the old one kept, unused
    settings = sim.__class__(**{**sim.__dict__, 'images': (ImageEntry.from_config(new),)})
    with pytest.raises(ImageUnavailable, match=f'image {name} was not built on this machine: '
                                               f'pip download failed'):
        settings.resolve_image(name)


def test_a_partly_present_image_is_never_removed(machine, monkeypatch):
    state, built, cache = machine
    name = images.recipe_names()[0]
    os.makedirs(images.image_path(name, cache))
    monkeypatch.setattr(images, 'base_root', lambda cache: cache)
    monkeypatch.setattr(images, 'python_version', lambda root, env: '%d.%d' % sys.version_info[:2])
    with pytest.raises(RuntimeError, match='exists but is not a finished build'):
        REAL_BUILD(name, cache)
    assert os.path.isdir(images.image_path(name, cache))


def test_an_image_of_the_same_recipe_in_the_earlier_layout_is_reused(machine):
    """A machine whose cache was filled before the keyed layout builds nothing: hard links."""
    state, built, cache = machine
    name = images.recipe_names()[0]
    earlier = images.earlier_layout_path(name, cache)
    os.makedirs(os.path.join(earlier, 'opt'))
    with open(os.path.join(earlier, images.STAMP), 'w') as f:
        f.write(images.stamp_text(name))
    with open(os.path.join(earlier, 'opt', 'torch.so'), 'w') as f:
        f.write('x')
    assert images.build_missing([name], cache) == 0
    assert built == [] and images.is_current(name, cache)
    linked = os.path.join(images.image_path(name, cache), 'opt', 'torch.so')
    assert os.path.samefile(linked, os.path.join(earlier, 'opt', 'torch.so'))
    assert os.path.isdir(earlier)                                     # its jobs may still use it
