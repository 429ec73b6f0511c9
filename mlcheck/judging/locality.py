"""CPU-GPU placement judged against the hardware, from what each rank read at run time.

The masks a check asks for come from the configured topology, so a rank on the asked-for cores
proves only that Slurm applied them. Each rank also reports the CPUs local to its GPU, read from
sysfs through the GPU's PCI address (src/pytorch/gpu_locality.py): a rank with a core outside
them sits on the wrong cores for this node, whatever the config says. That locality is as fine
as the hardware reports it: a NUMA domain (on LUMI-G, two CCDs), not an L3 domain.
"""

from mlcheck.contract import format_cpulist
from mlcheck.judging.rank_lists import rank_list


def cores_local_to_gpu(run, expect):
    """Every core of every rank is local to the GPU that rank drives. A rank driving several
    GPUs runs on the cores of all of them, and reports the locality of its first only."""
    if expect.gpus_per_rank > 1:
        return []
    found = []
    for rank, fact in sorted(run.by_rank('rank').items()):
        local = fact.get('gpu_local_cpus')
        cores = fact.get('affinity')
        if not isinstance(local, list) or not isinstance(cores, list):
            continue
        if not set(cores) <= set(local):
            numa = fact.get('gpu_numa_node')
            domain = f'NUMA node {numa}: ' if isinstance(numa, int) and numa >= 0 else ''
            found.append(f'rank {rank} on {fact.get("node")} runs on cores {format_cpulist(cores)}, not all '
                         f'local to its GPU {fact.get("gpu_pci")} ({domain}cores {format_cpulist(local)})')
    return found


def gpus_given_by_slurm(run, expect):
    """Where Slurm reports the GPUs of each task (SLURM_STEP_GPUS), the GPU the binding meant
    for the task is among them."""
    found = []
    for rank, fact in sorted(run.by_rank('rank').items()):
        given, local = fact.get('slurm_step_gpus'), fact.get('local_rank')
        if given is None or not isinstance(local, int) or not 0 <= local < len(expect.gpus_of_tasks):
            continue
        meant = expect.gpus_of_tasks[local]
        if not isinstance(given, list) or meant not in given:
            found.append(f'rank {rank} (local rank {local} on {fact.get("node")}) was given GPU(s) '
                         f'{given} by Slurm, expected GPU {meant}')
    return found


def unread_note(run):
    """One line on the ranks whose GPU locality could not be read, or None: said, never failed."""
    reasons = {}
    for rank, fact in sorted(run.by_rank('rank').items()):
        if 'gpu_locality_unread' in fact:
            reasons.setdefault(fact['gpu_locality_unread'], []).append(rank)
    if not reasons:
        return None
    why = '; '.join(f'{rank_list(ranks)}: {reason}' for reason, ranks in reasons.items())
    return (f'GPU locality could not be read ({why}); CPU placement was checked against the '
            f'configured topology only')
