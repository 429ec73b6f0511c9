"""Container platforms, by the name a partition gives in its `container_platforms` config.

ReFrame creates only its own platforms (Docker, Singularity, Apptainer, Sarus, Shifter) from
that name; the ones defined here are created by `platform_for` like them, so a partition that
names `Charliecloud` gets it with no change to any check. A name defined here wins over ReFrame's.

Two of them are Slurm plugins rather than commands: Pyxis and CSCS's Container Engine take srun
options, so their launch command is those options followed by the ranks' command, and srun's
own options (the tasks' CPU masks among them) stay as they are.
"""

import json
import os
import shlex

import reframe.core.containers as reframe_containers
import reframe.utility.typecheck as typ
from reframe.core.builtins import variable
from reframe.core.containers import ContainerPlatform

from mlcheck.errors import ConfigError


def binds(platform, stagedir):
    """(host, container) pairs: the platform's mount points, then the stage directory."""
    pairs = list(platform.mount_points)
    if platform.mount_stagedir:
        pairs.append((stagedir, platform.mount_stagedir))
    return pairs


class Charliecloud(ContainerPlatform):
    """Charliecloud's `ch-run`: runs a directory or SquashFS image unprivileged.

    It passes the job's environment through to the command, needs USER set, and binds only onto
    directories that exist in the image (it cannot create them in a read-only image), so images
    carry the mount points, /rfm_workdir among them.
    """

    def emit_prepare_commands(self, stagedir):
        # batch jobs started without a login shell may lack USER; ch-run refuses to start then
        return ['export USER="${USER:-$(id -un)}"']

    def launch_command(self, stagedir):
        options = [shlex.quote(f'--bind={src}:{dst}') for src, dst in binds(self, stagedir)]
        if self.workdir:
            options.append(shlex.quote(f'--cd={self.workdir}'))
        options += self.options
        # a directory image has no default command: ch-run then reports that none was given
        return ' '.join(['ch-run', *options, shlex.quote(self.image), '--', self.command or ''])


class Shifter(ContainerPlatform):
    """NERSC's `shifter`: `shifter --image=TYPE:IMAGE --volume=SRC:DST [options] command`.

    ReFrame's own Shifter backend writes Sarus's syntax (`shifter run --mount=...`), which the
    shifter command does not take, so this one replaces it. Shifter keeps the environment and the
    working directory (the global file systems, where the stage directory is, are mounted), so
    the stage directory is neither bound nor entered.
    """

    def emit_prepare_commands(self, stagedir):
        return []     # images are pulled beforehand, with shifterimg on a login node

    def launch_command(self, stagedir):
        options = [shlex.quote(f'--image={self.image}')]
        options += [shlex.quote(f'--volume={src}:{dst}') for src, dst in self.mount_points]
        options += self.options
        return ' '.join(['shifter', *options, self.command or ''])


class Pyxis(ContainerPlatform):
    """NVIDIA's Pyxis, the Slurm SPANK plugin that runs each task in an Enroot container:
    `srun --container-image=IMAGE --container-mounts=SRC:DST,... --container-workdir=DIR command`
    (https://github.com/NVIDIA/pyxis, README "Usage"). IMAGE is an Enroot URI
    ([USER@][REGISTRY#]IMAGE[:TAG], e.g. nvcr.io#nvidia/pytorch:25.11-py3) or a squashfs file.
    Enroot imports a registry image on the node itself, so nothing is pulled beforehand.
    """

    def emit_prepare_commands(self, stagedir):
        return []

    def image_warning(self):
        """One line where the image is a Docker-style reference to a registry other than Docker
        Hub (`nvcr.io/nvidia/pytorch:25.11-py3`): Enroot reads the part before the first `/` as a
        Docker Hub namespace, and the import fails on every node (401 from Docker Hub); else None."""
        meant = enroot_uri_meant(self.image)
        return (f'image {self.image}: Enroot reads this as a Docker Hub image; a registry other '
                f'than Docker Hub is written {meant}') if meant else None

    def launch_command(self, stagedir):
        mounts = [f'{src}:{dst}' for src, dst in binds(self, stagedir)]
        for mount in mounts:
            if ',' in mount:    # the separator of --container-mounts: it cannot be escaped
                raise ConfigError(f'Pyxis cannot mount {mount!r}: --container-mounts separates '
                                  f'mounts with commas')
        options = [f'--container-image={self.image}']
        if mounts:
            options.append(f'--container-mounts={",".join(mounts)}')
        if self.workdir:
            options.append(f'--container-workdir={self.workdir}')
        return ' '.join([*map(shlex.quote, options), *self.options, self.command or ''])


def enroot_uri_meant(image):
    """The Enroot URI ([USER@][REGISTRY#]IMAGE[:TAG], as Pyxis takes it: above) that a Docker-style
    reference `REGISTRY/IMAGE[:TAG]` means, or None for what Enroot reads as written: a file, a
    URI with `#`, or a name whose first part is no registry host (no `.` or `:`, not localhost)."""
    if not image or image.startswith(('/', './', '../')) or '#' in image or image.endswith('.sqsh'):
        return None
    user, at, rest = image.partition('@')
    if not at or '/' in user:
        user, at, rest = '', '', image
    host, slash, path = rest.partition('/')
    if slash and ('.' in host or ':' in host or host == 'localhost'):
        return f'{user}{at}{host}#{path}'
    return None


class ContainerEngine(ContainerPlatform):
    """CSCS's Container Engine on Alps: `srun --environment=FILE command`, FILE an environment
    definition (EDF, TOML) naming the image, mounts, workdir, variables and hook annotations
    (https://docs.cscs.ch/software/container-engine/edf/). As CSCS's own test suite does
    (eth-cscs/cscs-reframe-tests, checks/mixins/container_engine.py), each test writes its EDF
    into its stage directory, mounted at /rfm_workdir.

    Values are written as given, so `${VAR}` is expanded by the engine from the job's environment
    (`$${VAR}` keeps it literal). Variables of [env] win over the image's own, which win over the
    job's (EDF reference, "Environment variable expansion"): site settings the image must not
    override belong in `env`.
    """
    FILE = 'rfm_env.toml'   # the name CSCS's mixin gives it

    env = variable(typ.Dict[str, str], value={})            # the EDF's [env] table
    annotations = variable(typ.Dict[str, str], value={})    # its [annotations], dotted keys

    def emit_prepare_commands(self, stagedir):
        return []     # the engine pulls or opens the image itself

    def launch_command(self, stagedir):
        path = os.path.join(stagedir, self.FILE)
        with open(path, 'w') as f:
            f.write(self.environment_definition(stagedir))
        return ' '.join([shlex.quote(f'--environment={path}'), *self.options, self.command or ''])

    def environment_definition(self, stagedir):
        """The EDF's text: TOML basic strings (toml_string)."""
        mounts = ', '.join(toml_string(f'{src}:{dst}') for src, dst in binds(self, stagedir))
        lines = [f'image = {toml_string(self.image)}', f'mounts = [{mounts}]']
        if self.workdir:
            lines.append(f'workdir = {toml_string(self.workdir)}')
        for table, entries in (('env', self.env), ('annotations', self.annotations)):
            if entries:
                lines += ['', f'[{table}]', *(f'{key} = {toml_string(value)}'
                                              for key, value in entries.items())]
        return '\n'.join(lines) + '\n'


def toml_string(value):
    """`value` as a TOML basic string: JSON's escapes are TOML's, but not its \\ud83d\\ude00 for a
    character beyond the BMP (an emoji in an image path: TOML takes no surrogates), so such
    characters stay as they are; DEL, which TOML refuses raw, is escaped."""
    return json.dumps(str(value), ensure_ascii=False).replace('\x7f', '\\u007f')


PLATFORMS = {cls.__name__.lower(): cls for cls in (Charliecloud, Shifter, Pyxis, ContainerEngine)}   # names as ReFrame's: any case


def platform_for(name):
    """A new container platform of the configured `name`: ours, else one of ReFrame's."""
    if name.lower() in PLATFORMS:
        return PLATFORMS[name.lower()]()
    return ContainerPlatform.create(name)   # ValueError for a name nobody knows


def known_platforms():
    """Names of every platform `platform_for` can create."""
    reframe_ones = [cls.__name__ for cls in vars(reframe_containers).values()
                    if isinstance(cls, type) and issubclass(cls, ContainerPlatform)
                    and cls is not ContainerPlatform]
    return sorted({*reframe_ones, *(cls.__name__ for cls in PLATFORMS.values())})
