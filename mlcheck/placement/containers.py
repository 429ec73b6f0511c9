"""Container platforms, by the name a partition gives in its `container_platforms` config.

ReFrame creates only its own platforms (Docker, Singularity, Apptainer, Sarus, Shifter) from
that name; the ones defined here are created by `platform_for` like them, so a partition that
names `Charliecloud` gets it with no change to any check. A name defined here wins over ReFrame's.
"""

import shlex

import reframe.core.containers as reframe_containers
from reframe.core.containers import ContainerPlatform


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
        binds = list(self.mount_points)
        if self.mount_stagedir:
            binds.append((stagedir, self.mount_stagedir))
        options = [shlex.quote(f'--bind={src}:{dst}') for src, dst in binds]
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


PLATFORMS = {cls.__name__.lower(): cls for cls in (Charliecloud, Shifter)}   # names as ReFrame's: any case


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
