"""Image recipes and the image build's bookkeeping: cached images, and machines that cannot build.
(The builds themselves run in bin/setup; the end-to-end tests run the checks in the images.)"""

import collections
import re

import pytest

from mlcheck.data import images


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
    (tmp_path / name).mkdir()
    assert not images.is_current(name, str(tmp_path))                # never built
    stamp = tmp_path / name / images.STAMP
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
