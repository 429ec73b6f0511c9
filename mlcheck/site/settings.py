"""Site knowledge of one partition, read from its ReFrame config entry `extras: {'mlcheck': {...}}`.

Everything a site differs in lives there: node topology, GPU vendor, node counts to test, images,
container binds, datasets, the Python inside the images, the network plugin's log lines.
The keys and their types are mlcheck.site.schema's; a typo or a wrong type is a one-line error
naming the partition and the key.
"""

import fnmatch
import glob
import os
import re
from dataclasses import dataclass, field

from mlcheck.site import schema as site_schema
from mlcheck.errors import ConfigError
from mlcheck.data.unbuilt import unbuilt_reason
from mlcheck.placement.launch import Layout
from mlcheck.placement.topology import NodeTopology, check_binding_style

# What a GPU vendor's runtime needs per rank: the variables that make exactly one GPU visible,
# and whether MIOpen (AMD) needs a private cache directory.
GPU_VENDORS = {
    'amd': {'visible_devices_vars': ['ROCR_VISIBLE_DEVICES'], 'miopen_cache': True},
    'nvidia': {'visible_devices_vars': ['CUDA_VISIBLE_DEVICES'], 'miopen_cache': False},
    'none': {'visible_devices_vars': [], 'miopen_cache': False},
}
# GPUs that Slurm schedules and binds (gres with stand-in device files), while the ranks train on
# CPUs: the simulated partition
STAND_IN_GPUS = 'stand-in'
GPU_VENDORS[STAND_IN_GPUS] = {'visible_devices_vars': ['CUDA_VISIBLE_DEVICES'], 'miopen_cache': False}
HOST_IMAGE = 'host'   # the image name of "no container": the partition's own Python
IMAGE_SUFFIXES = ('.sif', '.sqfs', '.squashfs', '.sqsh', '.img')
EDF_RUNTIME = 'ContainerEngine'   # the container platform that reads extras.mlcheck.edf


class ImageUnavailable(ConfigError):
    """A configured image whose build recorded why it could not run here: its checks skip."""


@dataclass(frozen=True)
class NetPlugin:
    """How the NCCL/RCCL network plugin shows, in NCCL_DEBUG=INFO output, that it was used."""
    used_pattern: str         # a line every rank prints when the plugin is loaded
    provider_pattern: str     # a line naming the libfabric provider, in group 'provider'
    provider: str             # the provider expected, e.g. 'cxi'
    # NCCL's words for "no plugin, my own network", which explain a wrong network
    fallback_pattern: str = (r'No plugin found \(libnccl-net\.so\), using internal implementation'
                             r'|Could not find: libnccl-net\.so\.?(?: Using internal network plugin\.)?')
    # the network each communicator finally used, in group 'network'
    network_pattern: str = r'NCCL INFO Using network (?P<network>.*\S)'
    network: str = None       # a regular expression the used network's name must match in full
    # From this many nodes on the ranks must use the plugin. On fewer, NCCL sends nothing over
    # the network (one node: its GPUs' own links) and the plugin may not initialise at all:
    # see the site configs (config/frontier.py) for why.
    from_nodes: int = 2

    @classmethod
    def from_config(cls, entry, where):
        """From a schema-checked entry; the patterns must compile (provider's with its group)."""
        for key, value in entry.items():
            if key.endswith('_pattern'):
                try:
                    compiled = re.compile(value)
                except re.error as err:
                    raise ConfigError(f'{where}.{key}: bad regular expression {value!r}: {err}')
                for name in ('provider', 'network'):
                    if key == f'{name}_pattern' and name not in compiled.groupindex:
                        raise ConfigError(f"{where}.{key}: {value!r} needs a group named {name!r}")
        if 'network' in entry:
            try:
                re.compile(entry['network'])
            except re.error as err:
                raise ConfigError(f'{where}.network: bad regular expression {entry["network"]!r}: {err}')
        return cls(**entry)


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


@dataclass(frozen=True)
class PartitionSettings:
    partition: str                 # system:partition, for messages
    topology: NodeTopology
    gpu_vendor: str = 'none'
    node_counts: tuple = (1,)
    max_nodes: int = None          # the most nodes one job can get in the partition
    container_runtime: str = None  # ReFrame's container platform name, None: host Python
    images: tuple = ()             # ImageEntry of each path or glob of images
    container_binds: tuple = ()    # 'path' or 'host_path:container_path'
    container_options: tuple = ()  # extra options of the container runtime's command
    edf: dict = field(default_factory=dict)   # the Container Engine's env and annotations
    datasets: dict = field(default_factory=dict)
    python: str = 'python3'        # the interpreter inside the images
    host_python: str = 'python3'   # the interpreter of image 'host' (no container)
    data_mount: str = None         # where datasets are bound in the images; None: at their host path
    rank_prelude: str = ''         # shell code run in each rank before Python
    miopen_cache_root: str = '/tmp'
    net_plugin: NetPlugin = None
    checks: dict = field(default_factory=dict)   # check name -> {variable: value}
    binding: str = 'by_gpu'        # how tasks meet GPUs: topology.BINDING_STYLES
    gpu_task_sharing: bool = False # --gres-flags=allow-task-sharing with --gpu-bind (Slurm >= 23.11)
    slow_rank_fraction: float = 0.8   # a rank alone below this of the ranks' upper quartile fails
    gpu_peak_tflops: dict = field(default_factory=dict)   # precision -> one GPU's peak TFLOP/s

    @classmethod
    def from_extras(cls, partition, extras, container_runtime=None):
        where = f'partition {partition} extras.mlcheck'
        if 'mlcheck' not in (extras or {}):
            raise ConfigError(f'{where}: missing; this partition has no settings for these checks')
        entry = site_schema.validate(extras['mlcheck'], where)
        counts = tuple(entry.get('node_counts', [1]))
        max_nodes = entry.get('max_nodes')
        if max_nodes is not None and max_nodes < max(counts):
            raise ConfigError(f'{where}.max_nodes: {max_nodes} is less than the largest of '
                              f'node_counts, {max(counts)}')

        plugin = entry.get('net_plugin')
        if 'edf' in entry and (container_runtime or '').lower() != EDF_RUNTIME.lower():
            raise ConfigError(f'{where}.edf: only a partition whose container_platforms type is '
                              f'{EDF_RUNTIME} reads an environment definition (this one has '
                              f'{container_runtime or "none"})')
        return cls(
            partition=partition,
            topology=NodeTopology.from_config(entry['topology'], f'{where}.topology'),
            gpu_vendor=entry.get('gpu_vendor', cls.gpu_vendor),
            node_counts=counts,
            max_nodes=max_nodes,
            container_runtime=container_runtime or None,
            images=tuple(map(ImageEntry.from_config, entry.get('images', ()))),
            container_binds=tuple(entry.get('container_binds', ())),
            container_options=tuple(entry.get('container_options', ())),
            edf={table: dict(values) for table, values in entry.get('edf', {}).items()},
            datasets=dict(entry.get('datasets', {})),
            python=entry.get('python', cls.python),
            host_python=entry.get('host_python', cls.host_python),
            data_mount=entry.get('data_mount'),
            rank_prelude=entry.get('rank_prelude', ''),
            miopen_cache_root=entry.get('miopen_cache_root', cls.miopen_cache_root),
            net_plugin=NetPlugin.from_config(plugin, f'{where}.net_plugin') if plugin else None,
            checks={name: dict(values) for name, values in entry.get('checks', {}).items()},
            binding=entry.get('binding', cls.binding),
            gpu_task_sharing=entry.get('gpu_task_sharing', cls.gpu_task_sharing),
            slow_rank_fraction=float(entry.get('slow_rank_fraction', cls.slow_rank_fraction)),
            gpu_peak_tflops={key: float(value) for key, value in entry.get('gpu_peak_tflops', {}).items()},
        )

    @property
    def vendor(self):
        return GPU_VENDORS[self.gpu_vendor]

    @property
    def stand_in_gpus(self):
        """The GPUs are stand-ins (the simulated partition): no rank ever uses one."""
        return self.gpu_vendor == STAND_IN_GPUS

    @property
    def has_gpus(self):
        """The ranks train on GPUs."""
        return self.gpu_vendor not in ('none', STAND_IN_GPUS)

    @property
    def slurm_gpus(self):
        """Slurm schedules GPUs here: jobs ask for them, and --gpu-bind works."""
        return self.gpu_vendor != 'none'

    def layout(self, num_nodes, binding='', tasks_per_node=None, gpus_per_task=1):
        """The task layout of a job of `num_nodes` nodes, in the partition's binding style
        unless `binding` (-S binding=STYLE) names another; one task per GPU unless the check
        asks for another shape (DistributedLaunchCheck.task_shape)."""
        style = check_binding_style(binding, f'binding={binding}') if binding else self.binding
        if style == 'by_domain' and not self.slurm_gpus:
            raise ConfigError(f'binding {style!r} needs GPUs that Slurm schedules, and partition '
                              f'{self.partition} has gpu_vendor {self.gpu_vendor!r}')
        return Layout.for_nodes(self.topology, num_nodes, tasks_per_node, style=style,
                                gpu_task_sharing=self.gpu_task_sharing, gpus_per_task=gpus_per_task)

    def check_node_count(self, num_nodes):
        """A ConfigError unless a job of `num_nodes` nodes fits the partition."""
        if num_nodes < 1:
            raise ConfigError(f'num_nodes={num_nodes}: a job needs at least one node')
        if self.max_nodes is not None and num_nodes > self.max_nodes:
            raise ConfigError(f'num_nodes={num_nodes} does not fit partition {self.partition}: a job '
                              f'there gets at most {self.max_nodes} nodes (extras.mlcheck.max_nodes)')

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
        known = self.image_paths()
        given = image_given_by_path(image)
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

    def edf_for(self, image_path):
        """The environment definition's tables for the image at `image_path`: the partition's
        `env` with the image entry's own variables over it, and its `annotations`."""
        env = {**self.edf.get('env', {}), **self.image_entry(image_path).env_vars}
        return {'env': env, 'annotations': dict(self.edf.get('annotations', {}))}

    def data_path_for(self, image_path, data_dir):
        """Where the ranks see dataset directory `data_dir`."""
        return data_dir if image_path is None or not self.data_mount else self.data_mount

    def bind_mounts(self, data_dir):
        """(host path, container path) pairs: the configured binds, and the dataset directory
        (if not None)."""
        pairs = []
        for bind in self.container_binds:
            src, _, dst = bind.partition(':')
            pairs.append((src, dst or src))
        if data_dir:
            pairs.append((data_dir, self.data_mount or data_dir))
        return pairs

    def dataset_dir(self, name, override='', must_contain=''):
        """The staged directory of dataset `name`, checked to exist (and to hold `must_contain`)."""
        path = override or self.datasets.get(name)
        source = self.dataset_source(name, override)
        if not path:
            raise ConfigError(f'no {name} dataset is configured: set extras.mlcheck.datasets.{name} '
                              f'of partition {self.partition} or pass -S data_dir=DIR')
        if not os.path.isdir(path):
            raise ConfigError(f'{name} dataset directory not found: {path} (from {source})')
        if must_contain and not os.path.exists(os.path.join(path, must_contain)):
            raise ConfigError(f'{name} dataset directory {path} does not hold {must_contain} '
                              f'(from {source})')
        return path

    def dataset_source(self, name, override=''):
        """Where the directory of dataset `name` was given, for messages."""
        return '-S data_dir' if override else f'extras.mlcheck.datasets.{name} of partition {self.partition}'


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


def image_given_by_path(image):
    """The path an image was given by with -P, else None (a configured name)."""
    return getattr(image, 'path', None) or (image if '/' in image else None)
