"""What a partition declares about its images: the entries of extras.mlcheck.images (a path, a
glob or 'host', each with what differs for it), how an image is named, and where an image is
resolved to a path, with its Python, prelude and environment definition (ImageSettings, a part
of PartitionSettings).
"""

import fnmatch
import glob
import os
from dataclasses import dataclass, field

from mlcheck.data.unbuilt import unbuilt_reason
from mlcheck.errors import ConfigError
from mlcheck.visible import control_characters, visible

HOST_IMAGE = 'host'   # the image name of "no container": the partition's own Python
IMAGE_SUFFIXES = ('.sif', '.sqfs', '.squashfs', '.sqsh', '.img')
EDF_RUNTIME = 'ContainerEngine'   # the container platform that reads extras.mlcheck.edf


def reads_edf(container_runtime):
    """Whether a partition of this container platform (ReFrame's name; None: none) reads an EDF."""
    return (container_runtime or '').lower() == EDF_RUNTIME.lower()


def check_loggable(text, what):
    """A ConfigError unless `text` (an image, -S compare_with or compare_layers) can go into a
    perf log line as it is: ReFrame logs it unescaped, '|' splits the line's fields and a line
    break starts another line; a control character (the line separators that Python's
    splitlines() also splits at among them) is refused too: the report prints it (issue 48)."""
    found = control_characters(str(text))
    if '|' in str(text) or found:
        raise ConfigError(f"{what} {visible(repr(str(text)))}: a '|', a line break or a control character "
                          f"cannot be logged (perf log fields are separated by |, lines by newlines)"
                          + (f'; it holds {found}' if found else ''))


class ImageUnavailable(ConfigError):
    """A configured image whose build recorded why it could not run here: its checks skip."""


@dataclass(frozen=True)
class ImageEntry:
    """One entry of extras.mlcheck.images: a path, a glob or 'host', and what differs for the
    images it names (a plain string in config is an entry with nothing of its own)."""
    path: str
    env_vars: dict = field(default_factory=dict)   # exported in the job script, literally
    python: str = None          # None: the partition's python (host_python for 'host')
    rank_prelude: str = None    # None: the partition's rank_prelude
    expected_failure: str = ''  # why its runs are known to fail: reported as expected failures

    @classmethod
    def from_config(cls, entry):
        """From a schema-checked entry of extras.mlcheck.images."""
        return cls(path=entry) if isinstance(entry, str) else cls(**entry)

    def names(self, image_path):
        """Whether this entry names the image at `image_path` (None: the partition's Python)."""
        if image_path is None:
            return self.path == HOST_IMAGE
        return self.path == image_path or (glob.has_magic(self.path)
                                           and fnmatch.fnmatchcase(image_path, self.path))


class ImageSettings:
    """The image methods of PartitionSettings (its fields images, container_runtime, python,
    host_python, rank_prelude, edf, host_layer, partition)."""

    def image_paths(self):
        """{image name: path} of the configured images; globs are expanded now.

        A glob that matches nothing stays, under its own pattern, so that running it
        names the pattern instead of silently testing fewer images. The entry 'host' (and a
        partition without a container runtime) is the partition's own Python, path None.
        """
        if not self.container_runtime:
            return {HOST_IMAGE: None}
        found = {}
        for entry in self.images:
            if entry.path == HOST_IMAGE:
                found[HOST_IMAGE] = None
                continue
            matches = sorted(glob.glob(entry.path)) if glob.has_magic(entry.path) else [entry.path]
            for path in matches or [entry.path]:
                found[image_name(path)] = path
        return found

    def image_entry(self, image_path):
        """The first configured entry naming the image at `image_path` (None: the partition's
        Python); an image given by path with -P takes the entry of a glob it matches."""
        return next((e for e in self.images if e.names(image_path)),
                    ImageEntry(HOST_IMAGE if image_path is None else image_path))

    def resolve_image(self, image):
        """The image path for a parameter value (a configured name, or a path given with -P);
        None for the partition's own Python."""
        where = f'partition {self.partition}'
        given = image_given_by_path(image)
        check_loggable(given or image, 'image')
        known = self.image_paths()
        if given is None and image in known:
            path = known[image]
            if path is None:
                return None
        elif given is not None and self.container_runtime:
            path = given
        elif not self.container_runtime:
            raise ConfigError(f'{where} has no container runtime, so image {image!r} cannot '
                              f'run there (its only image is {HOST_IMAGE!r})')
        else:
            raise ConfigError(f'image {image!r} is not configured for {where} '
                              f'(configured: {", ".join(sorted(known)) or "none"})')
        if glob.has_magic(path):
            raise ConfigError(f'no image matches {path} (extras.mlcheck.images of {where})')
        if is_image_file(path) and not os.path.exists(path):
            reason = unbuilt_reason(path)
            if reason:
                raise ImageUnavailable(f'image {image_name(path)} was not built on this machine: {reason}')
            raise ConfigError(f'image not found: {path} (for {where})')
        return path

    def python_for(self, image_path):
        """The interpreter the ranks run: the image entry's, else the images' one, or the
        host's for no image."""
        return (self.image_entry(image_path).python
                or (self.host_python if image_path is None else self.python))

    def rank_prelude_for(self, image_path):
        prelude = self.image_entry(image_path).rank_prelude
        return self.rank_prelude if prelude is None else prelude

    def image_env(self, image_path):
        """The variables of the image at `image_path`: its entry's, with those of the host layer
        run over the partition's (a candidate of -S compare_layers) over them."""
        return {**self.image_entry(image_path).env_vars, **self.host_layer.env_vars}

    def edf_for(self, image_path):
        """The environment definition's tables for the image at `image_path`: the partition's
        `env` with the image's own variables over it, and its `annotations` with the host layer's
        over them."""
        env = {**self.edf.get('env', {}), **self.image_env(image_path)}
        return {'env': env, 'annotations': {**self.edf.get('annotations', {}), **self.host_layer.annotations}}


def is_image_file(path):
    """An absolute path names an image file or directory; anything else is a reference that the
    container runtime resolves itself (e.g. Shifter's docker:nersc/pytorch:24.06.01)."""
    return os.path.isabs(path)


def image_name(path):
    """An image's name in test names and references: its file name without the image suffix."""
    name = os.path.basename(path.rstrip('/'))
    for suffix in IMAGE_SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


class ImageByPath(str):
    """An image given by path (-P image=PATH): a str equal to its name, as a configured image
    is named, so that its references, perf log lines, history and test name are those of the
    same image configured by path; the path it was given by is kept in `.path`."""

    def __new__(cls, path):
        image = super().__new__(cls, image_name(path))
        image.path = path
        return image

    def __reduce__(self):                # copies (ReFrame deep-copies parameter values) keep the path
        return type(self), (self.path,)


def image_parameter(value):
    """A value of the `image` parameter as given with -P: a name, or a path (containing '/')."""
    return ImageByPath(value) if '/' in value else value


class GivenImages:
    """The values of -P image of one session, each checked as it is given: a path that does not
    exist (and was not left unbuilt here, whose tests are skipped saying why) is refused, and so
    is a second value of an image's name (`/a/new.sif` and `/b/new.sif` are both `new`: their
    tests would share a name, and their references and history)."""

    def __init__(self):
        self.given = {}     # image name: the value that named it

    def add(self, value):
        image = image_parameter(value)
        if is_image_file(value) and not os.path.exists(value) and not unbuilt_reason(value):
            raise ConfigError(f'image not found: {value} (-P image)')
        earlier = self.given.setdefault(str(image), value)
        if earlier != value:
            raise ConfigError(f'-P image: {earlier} and {value} are both named {image} (an image '
                              f'is named by its file name): give one of them another name')
        return image


def image_given_by_path(image):
    """The path an image was given by with -P, else None (a configured name)."""
    return getattr(image, 'path', None) or (image if '/' in image else None)
