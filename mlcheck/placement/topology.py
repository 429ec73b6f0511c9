"""Node topology (which cores sit next to which GPU) and the CPU masks derived from it.

A node's cores are grouped in equal CPU domains (an L3/CCD, or a NUMA domain), numbered
from 0 with consecutive core ids. Each GPU is attached to one domain. A few cores of each
domain may be reserved for the system (LUMI-G keeps core 0 of every CCD). The cores a GPU
gets are the unreserved cores of its domain, split evenly among the GPUs sharing it.
"""

from dataclasses import dataclass

from mlcheck.errors import ConfigError


@dataclass(frozen=True)
class NodeTopology:
    cores_per_domain: int
    gpu_domains: tuple            # gpu_domains[i]: the domain closest to GPU i
    reserved_cores_per_domain: tuple = ()   # offsets inside each domain
    cores_per_node: int = 0       # 0: as many as the domains that GPUs use
    where: str = 'topology'       # names the config entry in error messages

    @property
    def gpus_per_node(self):
        return len(self.gpu_domains)

    def validate(self):
        """What a schema cannot say: the GPUs' domains fit the node, and each GPU gets a core
        (one-line ConfigErrors naming `where`)."""
        bad = [r for r in self.reserved_cores_per_domain if not 0 <= r < self.cores_per_domain]
        if bad:
            raise ConfigError(f'{self.where}.reserved_cores_per_domain: offset(s) {bad} outside a '
                              f'domain of {self.cores_per_domain} cores')

        if self.cores_per_node:
            domains = self.cores_per_node // self.cores_per_domain
            if max(self.gpu_domains) >= domains:
                raise ConfigError(
                    f'{self.where}: gpu_domains {list(self.gpu_domains)} name domain '
                    f'{max(self.gpu_domains)}, but {self.cores_per_node} cores per node in '
                    f'domains of {self.cores_per_domain} give only {domains} domains (0-{domains - 1})')

        free = self.cores_per_domain - len(set(self.reserved_cores_per_domain))
        for domain in set(self.gpu_domains):
            sharing = self.gpu_domains.count(domain)
            if free < sharing:
                raise ConfigError(
                    f'{self.where}: domain {domain} has {free} unreserved core(s) for '
                    f'{sharing} GPUs; every GPU needs at least one core')

    def cores_of_gpu(self, gpu):
        """The cores that the task driving GPU `gpu` may run on."""
        domain = self.gpu_domains[gpu]
        first = domain * self.cores_per_domain
        reserved = set(self.reserved_cores_per_domain)
        free = [first + off for off in range(self.cores_per_domain) if off not in reserved]

        # GPUs sharing a domain split its free cores into equal consecutive blocks, in GPU order
        sharers = [g for g, d in enumerate(self.gpu_domains) if d == domain]
        share = len(free) // len(sharers)
        index = sharers.index(gpu)
        return free[index * share:(index + 1) * share]

    def cores_of_gpus(self, gpus):
        """The cores of a task driving all of `gpus` (one process over several GPUs): the union."""
        return sorted({core for gpu in gpus for core in self.cores_of_gpu(gpu)})

    def cores_per_task(self, tasks_per_node):
        self.check_fits(tasks_per_node)
        counts = {len(self.cores_of_gpu(g)) for g in range(tasks_per_node)}
        if len(counts) != 1:
            raise ConfigError(f'{self.where}: GPUs get unequal core counts {sorted(counts)}; '
                              f'one --cpus-per-task cannot describe them')
        return counts.pop()

    def check_fits(self, tasks_per_node):
        if not isinstance(tasks_per_node, int) or tasks_per_node < 1:
            raise ConfigError(f'{self.where}: tasks per node must be a positive integer, '
                              f'got {tasks_per_node!r}')
        if tasks_per_node > self.gpus_per_node:
            raise ConfigError(f'{self.where}: {tasks_per_node} tasks per node do not fit '
                              f'{self.gpus_per_node} GPUs per node (one task per GPU)')

    def gpus_of_tasks(self, style, tasks_per_node):
        """GPU driven by each local task under binding `style` (see BINDING_STYLES).

        by_gpu: task i drives GPU i. by_domain: tasks follow the CPU domains in order (and the
        GPUs sharing a domain in their order), so task i drives the GPU attached to the i-th
        domain: the inverse of gpu_domains, which srun applies with --gpu-bind=map_gpu.
        """
        self.check_fits(tasks_per_node)
        gpus = range(self.gpus_per_node)
        if style == 'by_domain':
            gpus = sorted(gpus, key=lambda g: (self.gpu_domains[g], g))
        return list(gpus)[:tasks_per_node]


# How tasks meet GPUs; both bind each task to the cores of its GPU's domain.
BINDING_STYLES = {
    'by_gpu': 'task i drives GPU i, bound to the cores nearest it (--cpu-bind=mask_cpu)',
    'by_domain': 'task i runs on CPU domain i and drives the GPU attached to it '
                 '(--cpu-bind=mask_cpu, --gpu-bind=map_gpu)',
}


def check_binding_style(style, where):
    if style not in BINDING_STYLES:
        raise ConfigError(f'{where}: unknown binding style {style!r}; one of '
                          f'{", ".join(BINDING_STYLES)}')
    return style


def cores_to_mask(cores):
    return hex(sum(1 << c for c in cores))


def mask_to_cores(mask):
    value = int(mask, 16)
    return [bit for bit in range(value.bit_length()) if value >> bit & 1]
