"""Container images for the simulated partition, built from Debian's packages and PyPI.

Each `config/images/<name>/requirements.txt` is one image: Debian 12 (debootstrap minbase with python3)
and a venv at /opt/venv holding those pins, as a directory that Charliecloud's `ch-run` runs
unprivileged. The wheels are fetched by the host's pip (its indexes, certificates and local
package directories), so nothing inside the image needs the network.

Images are built once into the image cache (MLCHECK_IMAGE_CACHE, default /var/cache/mlcheck/images,
outside any checkout so that a fresh clone finds them); a second run builds nothing. The cache is
keyed by content: the image of a recipe lives in `<cache>/<key>/<name>`, the key a digest of the
recipe and the build steps. A changed recipe (another checkout's, or a later commit's) is built
beside the other images, and no image is ever removed or rebuilt in place: jobs of another
checkout may be running from it. An image of the same recipe in the earlier layout
(`<cache>/<name>`) is reused through hard links (no extra space; `list` shows such leftovers).
An image that cannot be built (no root, too little disk, a failed step) gets `<name>.unbuilt`
beside its keyed path, holding the reason; nothing is at that path, so its checks skip, saying why.

    python -m mlcheck.data.images build [NAME ...]    # build what is missing or out of date
    python -m mlcheck.data.images list                # each image: built, or why not
"""

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time

from mlcheck import REPO
from mlcheck.data.unbuilt import UNBUILT_SUFFIX, unbuilt_reason

RECIPES = os.path.join(REPO, 'config', 'images')
IMAGE_CACHE = os.environ.get('MLCHECK_IMAGE_CACHE', '/var/cache/mlcheck/images')

DEBIAN_SUITE, DEBIAN_MIRROR = 'bookworm', 'http://deb.debian.org/debian'
VENV_PYTHON = '/opt/venv/bin/python'
# ch-run binds only onto directories that exist in the (read-only) image: the stage directory
# (ReFrame's /rfm_workdir) and the dataset directory get theirs here
DATA_MOUNT = '/mlcheck/data'
MOUNT_POINTS = ('/rfm_workdir', DATA_MOUNT)
# ch-run binds the host's name resolution over these only if the image has them: without them
# the ranks cannot resolve the nodes' names (nid001, ...) and the rendezvous times out
HOST_FILES = ('/etc/hosts', '/etc/resolv.conf')
STAMP = '.mlcheck-image'      # inside a built image: the build steps' version and the recipe
BUILD_STEPS_VERSION = 2       # raise when build() changes, so that cached images are rebuilt
# a CUDA build of torch: ~4 GB of wheels plus ~6 GB installed, with room to spare
SPACE_NEEDED_GB = 14


class CannotBuild(Exception):
    """A reason this machine cannot build an image (its checks are skipped, saying why)."""


def recipe_names():
    """Names of the images that have a recipe, sorted."""
    if not os.path.isdir(RECIPES):
        return []
    return sorted(name for name in os.listdir(RECIPES)
                  if os.path.isfile(os.path.join(RECIPES, name, 'requirements.txt')))


def recipe_key(name):
    """The cache key of image `name`: a digest of its recipe and of the build steps."""
    return hashlib.sha256(stamp_text(name).encode()).hexdigest()[:16]


def image_path(name, cache=IMAGE_CACHE):
    """Where the image of `name`'s recipe, as it is in this checkout, is built (its file name
    stays `name`: that is how the checks name it)."""
    return os.path.join(cache, recipe_key(name), name)


def earlier_layout_path(name, cache=IMAGE_CACHE):
    """Where images were built before the cache was keyed by content."""
    return os.path.join(cache, name)


def read_recipe(name):
    with open(os.path.join(RECIPES, name, 'requirements.txt')) as f:
        return f.read()


def stamp_text(name):
    return f'mlcheck image build steps {BUILD_STEPS_VERSION}\n{read_recipe(name)}'


def has_stamp_of(path, name):
    """Was the image at `path` built by the current build steps from `name`'s recipe as it is now?"""
    try:
        with open(os.path.join(path, STAMP)) as f:
            return f.read() == stamp_text(name)
    except OSError:
        return False


def is_current(name, cache=IMAGE_CACHE):
    """Is the image of `name`'s current recipe built?"""
    return has_stamp_of(image_path(name, cache), name)


def reuse_earlier_layout(name, cache):
    """Give the image of the same recipe built in the earlier layout its keyed path, as hard
    links (no copy of the data; the earlier path stays, for the jobs that use it). True if done."""
    earlier, final = earlier_layout_path(name, cache), image_path(name, cache)
    if not has_stamp_of(earlier, name):
        return False
    os.makedirs(os.path.dirname(final), exist_ok=True)
    partial = final + '.partial'
    shutil.rmtree(partial, ignore_errors=True)
    run(['cp', '-al', earlier, partial], f'linking {earlier}')
    os.rename(partial, final)
    say(f'{name}: the image built from the same recipe at {earlier} is now also {final} '
        f'(hard links, no extra space)')
    return True


def say(text):
    print(f'images: {text}', flush=True)


def gigabytes(nbytes):
    return f'{nbytes / 1e9:.1f} GB'


def disk_usage(path):
    """Bytes used under `path` (du, which counts hard-linked files once)."""
    out = subprocess.run(['du', '-sb', path], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def run(command, what, env=None):
    """Run a build step; a failure raises with the step's name and the end of its output."""
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ['no output']
        raise RuntimeError(f'{what} failed (exit {done.returncode}): {tail[0]}')
    return done.stdout


def ch_run_env():
    """The environment for ch-run during a build: USER set (ch-run needs it), no pip settings
    of the host (pip in the image installs from the downloaded wheels only)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('PIP_')}
    env.setdefault('USER', 'root')
    env['PIP_CONFIG_FILE'] = os.devnull
    return env


def check_can_build(cache):
    """Raise CannotBuild unless this machine can build images into `cache`."""
    if os.geteuid() != 0:
        raise CannotBuild('building needs root (debootstrap); run bin/setup as root')
    for tool, package in (('debootstrap', 'debootstrap'), ('ch-run', 'charliecloud-runtime')):
        if shutil.which(tool) is None:
            raise CannotBuild(f'{tool} is not installed (Debian package {package})')
    free = shutil.disk_usage(cache).free
    if free < SPACE_NEEDED_GB * 1e9:
        raise CannotBuild(f'only {gigabytes(free)} free in {cache}; an image needs about '
                          f'{SPACE_NEEDED_GB} GB')


def base_root_path(cache=IMAGE_CACHE):
    return os.path.join(cache, f'.base-{DEBIAN_SUITE}')


def base_root(cache):
    """A minimal Debian root with python3, made once and copied for every image."""
    base = base_root_path(cache)
    if os.path.isfile(os.path.join(base, 'usr', 'bin', 'python3')):
        return base
    partial = base + '.partial'
    shutil.rmtree(partial, ignore_errors=True)
    started = time.monotonic()
    say(f'debootstrap {DEBIAN_SUITE} (minbase, python3) into {base}')
    run(['debootstrap', '--variant=minbase', '--include=python3,python3-venv,python3-pip',
         DEBIAN_SUITE, partial, DEBIAN_MIRROR], 'debootstrap')
    shutil.rmtree(base, ignore_errors=True)
    os.rename(partial, base)
    say(f'base root: {time.monotonic() - started:.0f} s, {gigabytes(disk_usage(base))}')
    return base


def python_version(root, env):
    """major.minor of python3 in the image root `root`."""
    code = 'import sys; print("%d.%d" % sys.version_info[:2])'
    return run(['ch-run', root, '--', 'python3', '-c', code], 'python3 in the image', env=env).strip()


def build(name, cache=IMAGE_CACHE):
    """Build image `name` into `cache`; returns (seconds, bytes)."""
    started = time.monotonic()
    recipe = read_recipe(name)
    base = base_root(cache)
    env = ch_run_env()
    host_python, image_python = '%d.%d' % sys.version_info[:2], python_version(base, env)
    if image_python != host_python:
        raise CannotBuild(f'the image has Python {image_python} but the host pip that '
                          f'fetches its wheels runs {host_python}')

    final = image_path(name, cache)
    if os.path.exists(final):     # never removed: a job may be running from it
        raise RuntimeError(f'{final} exists but is not a finished build of its recipe; '
                           f'remove it by hand once no job uses it')
    os.makedirs(os.path.dirname(final), exist_ok=True)
    partial, wheels = final + '.partial', os.path.join(os.path.dirname(final), f'.wheels-{name}')
    shutil.rmtree(partial, ignore_errors=True)
    say(f'{name}: copying the base root')
    run(['cp', '-a', '--reflink=auto', base, partial], 'copying the base root')
    for directory in (*MOUNT_POINTS, '/wheels'):
        os.makedirs(partial + directory, exist_ok=True)
    for path in HOST_FILES:
        open(partial + path, 'a').close()

    say(f'{name}: fetching wheels with the host pip into {wheels}')
    os.makedirs(wheels, exist_ok=True)
    requirements = os.path.join(wheels, 'requirements.txt')
    with open(requirements, 'w') as f:
        f.write(recipe)
    run([sys.executable, '-m', 'pip', 'download', '-q', '--disable-pip-version-check',
         '--only-binary=:all:', '--dest', wheels, '-r', requirements], 'pip download')

    say(f'{name}: installing into /opt/venv')
    in_image = ['ch-run', '-w', f'--bind={wheels}:/wheels', partial, '--']
    run([*in_image, 'python3', '-m', 'venv', '/opt/venv'], 'creating the venv', env=env)
    run([*in_image, VENV_PYTHON, '-m', 'pip', 'install', '-q', '--disable-pip-version-check',
         '--no-index', '--find-links', '/wheels', '-r', '/wheels/requirements.txt'],
        'pip install in the image', env=env)
    versions = run(['ch-run', partial, '--', VENV_PYTHON, '-c',
                    'import torch, torchvision; print(torch.__version__, torchvision.__version__)'],
                   'importing torch in the image', env=env).strip()
    os.rmdir(partial + '/wheels')
    with open(os.path.join(partial, STAMP), 'w') as f:
        f.write(stamp_text(name))

    os.rename(partial, final)
    shutil.rmtree(wheels, ignore_errors=True)   # the image is the cache
    seconds, size = time.monotonic() - started, disk_usage(final)
    say(f'{name}: built in {seconds:.0f} s, {gigabytes(size)} (torch, torchvision: {versions})')
    return seconds, size


@contextlib.contextmanager
def cache_lock(cache):
    """One build at a time per cache (bin/run-suite and bin/run-tests may start together)."""
    with open(os.path.join(cache, '.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def record_unbuilt(name, reason, cache):
    os.makedirs(os.path.dirname(image_path(name, cache)), exist_ok=True)
    with open(image_path(name, cache) + UNBUILT_SUFFIX, 'w') as f:
        f.write(reason + '\n')


def build_missing(names, cache=IMAGE_CACHE):
    """Build each image not yet current; returns the number that failed for a reason other
    than the machine's (those are errors; a machine that cannot build is not)."""
    started = time.monotonic()
    failed = 0
    try:
        os.makedirs(cache, exist_ok=True)
    except OSError as err:
        for name in names:
            say(f'{name}: not built: cannot create {cache}: {err.strerror}')
        return 0
    with cache_lock(cache):
        for name in names:
            if is_current(name, cache):
                say(f'{name}: cached, {gigabytes(disk_usage(image_path(name, cache)))} in {cache}')
                continue
            try:
                if not reuse_earlier_layout(name, cache):
                    check_can_build(cache)
                    build(name, cache)
            except CannotBuild as err:
                reason = str(err)
            except (RuntimeError, OSError) as err:
                reason, failed = str(err), failed + 1
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(image_path(name, cache) + UNBUILT_SUFFIX)
                continue
            record_unbuilt(name, reason, cache)
            say(f'{name}: not built: {reason}; its checks will be skipped, the host ones still run')
    say(f'{len(names)} image(s) ready or accounted for in {time.monotonic() - started:.0f} s; '
        f'{cache} holds {gigabytes(disk_usage(cache))}, {gigabytes(shutil.disk_usage(cache).free)} free')
    return failed


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m mlcheck.data.images', description=__doc__.split('\n')[0])
    parser.add_argument('action', choices=['build', 'list'])
    parser.add_argument('names', nargs='*', metavar='NAME', help='images to build (default: all recipes)')
    args = parser.parse_args(argv)
    known = recipe_names()
    unknown = sorted(set(args.names) - set(known))
    if unknown:
        parser.error(f'no recipe config/images/{unknown[0]}/requirements.txt (recipes: {", ".join(known)})')
    names = args.names or known
    if args.action == 'list':
        for name in names:
            path = image_path(name)
            state = 'built' if is_current(name) else f'not built: {unbuilt_reason(path) or "never tried"}'
            print(f'{name}\t{path}\t{state}')
        for name in known:
            earlier = earlier_layout_path(name)
            if os.path.isfile(os.path.join(earlier, STAMP)):
                print(f'{name}\t{earlier}\tearlier cache layout: kept for the jobs of older '
                      f'checkouts; remove it by hand once none uses it')
        return 0
    return 1 if build_missing(names) else 0


if __name__ == '__main__':
    sys.exit(main())
