"""Site knowledge of one partition, read from its ReFrame config entry `extras: {'mlcheck': {...}}`:
its topology and GPUs here, its images (site.images), datasets (site.data) and network plugin
(site.network) in modules of their own, composed by PartitionSettings.

Everything a site differs in lives there: node topology, GPU vendor, node counts to test, images,
container binds, datasets, the Python inside the images, the network plugin's log lines.
The keys and their types are mlcheck.site.schema's; a typo or a wrong type is a one-line error
naming the partition and the key.
"""

from dataclasses import dataclass, field

from mlcheck.site import schema as site_schema
from mlcheck.site.data import DataSettings
from mlcheck.site.images import EDF_RUNTIME, ImageEntry, ImageSettings, reads_edf
from mlcheck.site.layers import CURRENT, HostLayer, LayerSettings
from mlcheck.site.network import NetPlugin
from mlcheck.errors import ConfigError
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


def node_topology(entry, where):
    """The NodeTopology of a config mapping (`topology`); every problem is a one-line ConfigError
    naming `where`."""
    site_schema.validate(entry, where, site_schema.TOPOLOGY)
    topo = NodeTopology(cores_per_domain=entry['cores_per_domain'], gpu_domains=tuple(entry['gpu_domains']),
                        reserved_cores_per_domain=tuple(entry.get('reserved_cores_per_domain', ())),
                        cores_per_node=entry.get('cores_per_node', 0), where=where)
    topo.validate()
    return topo


@dataclass(frozen=True)
class PartitionSettings(ImageSettings, DataSettings, LayerSettings):
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
    host_layer_candidates: dict = field(default_factory=dict)   # name -> HostLayer
    host_layer: HostLayer = CURRENT   # the candidate run over the partition's (with_host_layer)
    datasets: dict = field(default_factory=dict)
    trusts_dataset_writers: bool = False   # a dataset file others can write is read all the same
    trusts_perflog_writers: bool = False   # a perf log folder others can change is written all the same
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
    machine_speed: float = None    # the references' machine speed now (mlcheck.simulated.speed)
    ab_threshold: float = 0.05     # the A/B verdict's threshold (mlcheck.ab.rule), from an A=A control
    ab_threshold_ceiling: float = 0.1

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
        layers = {name: HostLayer.from_config(name, layer)
                  for name, layer in entry.get('host_layer_candidates', {}).items()}
        edf_keys = (['edf'] if 'edf' in entry else []) + [
            f'host_layer_candidates.{layer.name}.annotations' for layer in layers.values() if layer.annotations]
        if edf_keys and not reads_edf(container_runtime):
            raise ConfigError(f'{where}.{edf_keys[0]}: only a partition whose container_platforms type is '
                              f'{EDF_RUNTIME} reads an environment definition (this one has '
                              f'{container_runtime or "none"})')
        return cls(
            partition=partition,
            topology=node_topology(entry['topology'], f'{where}.topology'),
            gpu_vendor=entry.get('gpu_vendor', cls.gpu_vendor),
            node_counts=counts,
            max_nodes=max_nodes,
            container_runtime=container_runtime or None,
            images=tuple(map(ImageEntry.from_config, entry.get('images', ()))),
            container_binds=tuple(entry.get('container_binds', ())),
            container_options=tuple(entry.get('container_options', ())),
            edf={table: dict(values) for table, values in entry.get('edf', {}).items()},
            host_layer_candidates=layers,
            datasets=dict(entry.get('datasets', {})),
            trusts_dataset_writers=entry.get('trusts_dataset_writers', False),
            trusts_perflog_writers=entry.get('trusts_perflog_writers', False),
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
            machine_speed=entry.get('machine_speed'),
            ab_threshold=float(entry.get('ab_threshold', cls.ab_threshold)),
            ab_threshold_ceiling=float(entry.get('ab_threshold_ceiling', cls.ab_threshold_ceiling)),
        )

    @property
    def reads_edf(self):
        """Whether the partition's container runtime reads an environment definition (an EDF)."""
        return reads_edf(self.container_runtime)

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

