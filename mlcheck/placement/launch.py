"""How a training job is launched: task layout, srun options, and the environment of the ranks.

Job-wide values are exported by the job script; per-rank values (RANK, LOCAL_RANK, the one
visible GPU, the MIOpen cache) are set by src/launch/rank-env.sh in each task.
"""

from dataclasses import dataclass

from mlcheck import contract
from mlcheck.errors import ConfigError
from mlcheck.placement.topology import cores_to_mask

RANK_WRAPPER = 'launch/rank-env.sh'   # relative to the checks' source directory (src/)

# The first node of the allocation, as Slurm itself expands the node list.
MASTER_ADDR = '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
# A port per job: two jobs sharing a node collide only if their ids differ by a multiple of
# the range. The range stays below Linux's ephemeral ports (32768-60999).
MASTER_PORT_BASE, MASTER_PORT_RANGE = 10000, 20000
MASTER_PORT = f'$(( {MASTER_PORT_BASE} + SLURM_JOB_ID % {MASTER_PORT_RANGE} ))'


@dataclass(frozen=True)
class Layout:
    num_nodes: int
    tasks_per_node: int
    cores_per_task: int
    masks: tuple          # masks[i]: hex CPU mask of local task i
    gpus: tuple = ()      # gpus[i]: the GPU local task i drives (default: GPU i)
    style: str = 'by_gpu'         # mlcheck.placement.topology.BINDING_STYLES
    gpu_task_sharing: bool = False   # every task may reach all GPUs of the node (NCCL's P2P)
    gpus_per_task: int = 1        # >1: one process drives GPUs i*n..i*n+n-1 (DataParallel)

    @classmethod
    def for_nodes(cls, topology, num_nodes, tasks_per_node=None, style='by_gpu',
                  gpu_task_sharing=False, gpus_per_task=1):
        """One task per GPU on every node, each bound to the cores nearest its GPU; or, with
        `gpus_per_task` > 1, tasks of several consecutive GPUs, each bound to all their cores."""
        if gpus_per_task == 1:
            tasks = tasks_per_node or topology.gpus_per_node
            gpus = topology.gpus_of_tasks(style, tasks)
            return cls(num_nodes=num_nodes, tasks_per_node=tasks,
                       cores_per_task=topology.cores_per_task(tasks),
                       masks=tuple(cores_to_mask(topology.cores_of_gpu(g)) for g in gpus),
                       gpus=tuple(gpus), style=style, gpu_task_sharing=gpu_task_sharing)
        tasks = tasks_per_node or topology.gpus_per_node // gpus_per_task
        topology.check_fits(tasks * gpus_per_task)
        cores = [topology.cores_of_gpus(range(t * gpus_per_task, (t + 1) * gpus_per_task))
                 for t in range(tasks)]
        if len({len(c) for c in cores}) != 1:
            raise ConfigError(f'{topology.where}: tasks of {gpus_per_task} GPUs get unequal core '
                              f'counts {sorted({len(c) for c in cores})}')
        return cls(num_nodes=num_nodes, tasks_per_node=tasks, cores_per_task=len(cores[0]),
                   masks=tuple(map(cores_to_mask, cores)),
                   gpus=tuple(t * gpus_per_task for t in range(tasks)), style=style,
                   gpu_task_sharing=gpu_task_sharing, gpus_per_task=gpus_per_task)

    @property
    def num_tasks(self):
        return self.num_nodes * self.tasks_per_node

    @property
    def gpus_per_node(self):
        return self.tasks_per_node * self.gpus_per_task

    @property
    def slurm_binds_gpus(self):
        """Slurm, not the rank wrapper, gives each task its GPU (--gpu-bind); a task of several
        GPUs gets them from the rank wrapper, as --gpu-bind=map_gpu maps one GPU per task."""
        return self.style == 'by_domain' and self.gpus_per_task == 1

    def srun_options(self):
        # --label prefixes every output line with its task id, so each line is attributable;
        # --kill-on-bad-exit ends the whole step as soon as one rank fails, instead of leaving
        # the others blocked until a timeout or the job's time limit
        options = ['--label', '--kill-on-bad-exit=1', f'--cpu-bind=mask_cpu:{",".join(self.masks)}']
        if self.slurm_binds_gpus:
            # Slurm accepts map_gpu:, not map: ("Invalid --gpu-bind argument" on 22.05)
            options.append(f'--gpu-bind=map_gpu:{",".join(map(str, self.gpus))}')
            if self.gpu_task_sharing:
                # without it (Slurm >= 23.11 with cgroups) a task sees only its own GPU, and
                # NCCL/RCCL cannot reach the others on the node directly
                options.append('--gres-flags=allow-task-sharing')
        return options


@dataclass(frozen=True)
class Waits:
    """How long ranks wait for each other, and a fault to inject (tests of failure reports).

    The training scripts read these from the environment (MLCHECK_*) as their defaults.
    """
    rendezvous_timeout: float = contract.RENDEZVOUS_TIMEOUT   # all ranks join the process group
    collective_timeout: float = contract.COLLECTIVE_TIMEOUT   # each collective (gloo, NCCL watchdog)
    fault: str = ''                                           # e.g. crash:1:2; see docs/faults.md

    def check(self, world_size):
        """A ConfigError for a timeout or fault that cannot work in a world of `world_size`."""
        for name in ('rendezvous_timeout', 'collective_timeout'):
            if not getattr(self, name) > 0:
                raise ConfigError(f'{name}={getattr(self, name)}: must be a positive number of seconds')
        if self.fault:
            try:
                _, rank, _ = contract.parse_fault(self.fault)
            except contract.FaultError:
                raise ConfigError(f'fault={self.fault!r}: expected {contract.FAULT_FORMS}') from None
            if rank >= world_size:
                raise ConfigError(f'fault={self.fault!r}: rank {rank} is not in a world of {world_size} ranks')
        return self

    def exports(self):
        env = {contract.RENDEZVOUS_TIMEOUT_VAR: f'{self.rendezvous_timeout:g}',
               contract.COLLECTIVE_TIMEOUT_VAR: f'{self.collective_timeout:g}'}
        if self.fault:
            env[contract.FAULT_VAR] = shell_quote(self.fault)
        return env


def job_exports(settings, layout, waits=Waits(), image_path=None):
    """Job script lines exporting the variables of all ranks running in the image at `image_path`
    (None: the partition's own Python). Site-wide ones come from the partition; the image's own
    (and a candidate host layer's) come last, so that they win.

    They go into the script as they are (prerun commands): ReFrame would run any `$(...)` in
    its own env_vars on the submitting host.
    """
    vendor = settings.vendor
    env = {
        'MASTER_ADDR': MASTER_ADDR,
        'MASTER_PORT': MASTER_PORT,
        'OMP_NUM_THREADS': str(layout.cores_per_task),
        # INFO makes NCCL/RCCL name the network plugin and provider, which sanity reads
        'NCCL_DEBUG': 'INFO',
        'NCCL_DEBUG_SUBSYS': 'INIT,NET',
        # under --gpu-bind Slurm sets these variables itself, per task
        'MLCHECK_VISIBLE_DEVICES_VARS': '' if layout.slurm_binds_gpus
                                        else ' '.join(vendor['visible_devices_vars']),
        **waits.exports(),
    }
    if layout.gpus_per_task > 1:
        env['MLCHECK_GPUS_PER_TASK'] = str(layout.gpus_per_task)
    if settings.has_gpus:
        # a collective that times out aborts the NCCL/RCCL communicator and ends the rank with
        # the reason, instead of leaving it blocked on the GPU
        env['TORCH_NCCL_ASYNC_ERROR_HANDLING'] = '1'
    if vendor['miopen_cache']:
        env['MLCHECK_MIOPEN_CACHE_ROOT'] = shell_quote(settings.miopen_cache_root)
    if settings.trusts_dataset_writers:     # read by the CIFAR-100 program (cifar_data.py)
        env['MLCHECK_TRUSTS_DATASET_WRITERS'] = '1'
    prelude = settings.rank_prelude_for(image_path)
    if prelude:
        env['MLCHECK_RANK_PRELUDE'] = shell_quote(prelude)
    env.update({name: shell_quote(value) for name, value in settings.image_env(image_path).items()})
    return [f'export {name}={value}' for name, value in env.items()]


def rank_command(python, script, args, srcdir='.'):
    """The command every task runs: the rank wrapper, then `python` on the training script."""
    return ['sh', f'{srcdir}/{RANK_WRAPPER}', python, '-u', f'{srcdir}/{script}', *args]


def shell_quote(text):
    """Single-quote `text` for a POSIX shell (ReFrame writes env values verbatim)."""
    return "'" + text.replace("'", "'\\''") + "'"
