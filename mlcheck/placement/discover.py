"""The `topology` entry of the node this runs on, derived from the hardware (sysfs).

    python -m mlcheck.placement.discover [--sysfs DIR]

CPU domains are the NUMA nodes, or the L3 groups where each GPU's local CPUs are exactly one.
Linux publishes a GPU's locality per NUMA node, so on a node whose NUMA nodes hold several L3
groups (LUMI-G: two CCDs each) the entry is at NUMA level: coarser than a site's documented one,
and still correct.
Cores the job may not use are the online cores outside this process's CPU affinity: run it in a
job step that holds a whole node (`srun -N1 --exclusive python -m mlcheck.placement.discover`)
to see the site's reserved cores. GPUs are numbered in PCI bus order, as ROCm numbers them and
CUDA does with CUDA_DEVICE_ORDER=PCI_BUS_ID.
"""

import argparse
import glob
import os
import sys

from mlcheck.contract import parse_cpulist

GPU_VENDORS = {'0x10de': 'nvidia', '0x1002': 'amd'}
GPU_CLASSES = ('0x0300', '0x0302', '0x0380')   # VGA, 3D controller (NVIDIA), display (AMD MI)


def read(path):
    with open(path) as f:
        return f.read().strip()


def physical_cores(sysfs, cpus):
    """The first hardware thread of each core among `cpus` (SMT siblings dropped)."""
    cores = []
    for cpu in cpus:
        path = f'{sysfs}/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list'
        siblings = parse_cpulist(read(path)) if os.path.exists(path) else [cpu]
        if min(siblings) == cpu:
            cores.append(cpu)
    return cores


def groups(sysfs, pattern, cpus):
    """Distinct CPU groups (as sorted tuples of cores) from the files matching `pattern`."""
    found = {tuple(c for c in parse_cpulist(read(path)) if c in cpus)
             for path in glob.glob(f'{sysfs}/{pattern}')}
    return sorted(g for g in found if g)


def gpus(sysfs):
    """[(pci address, vendor, local cores or None)] of the node's GPUs, in PCI bus order."""
    found = []
    for device in sorted(glob.glob(f'{sysfs}/bus/pci/devices/*')):
        try:
            vendor, klass = read(f'{device}/vendor'), read(f'{device}/class')
        except OSError:
            continue
        if vendor in GPU_VENDORS and klass.startswith(GPU_CLASSES):
            local = f'{device}/local_cpulist'
            found.append((os.path.basename(device), GPU_VENDORS[vendor],
                          parse_cpulist(read(local)) if os.path.exists(local) else None))
    return found


def derive(sysfs='/sys', allowed=None):
    """(topology entry or None, lines of explanation) for the node whose sysfs is `sysfs`;
    `allowed`: the CPUs jobs may use (default: this process's affinity)."""
    online = parse_cpulist(read(f'{sysfs}/devices/system/cpu/online'))
    cores = physical_cores(sysfs, online)
    allowed = set(os.sched_getaffinity(0) if allowed is None else allowed)
    notes = []
    l3 = groups(sysfs, 'devices/system/cpu/cpu*/cache/index3/shared_cpu_list', cores)
    numa = groups(sysfs, 'devices/system/node/node*/cpulist', cores) or [tuple(cores)]
    gpu_list = gpus(sysfs)
    local = [set(c for c in (cpus or cores) if c in cores) for _, _, cpus in gpu_list]

    # L3 domains only where the hardware says which one each GPU is near
    at_l3 = bool(gpu_list) and all(tuple(sorted(near)) in l3 for near in local)
    domains, level = (l3, 'L3') if at_l3 else (numa, 'NUMA node')
    sizes = {len(d) for d in domains}
    notes.append(f'{len(cores)} cores ({len(online)} CPUs online) in {len(domains)} {level} domain(s) '
                 f'of {"/".join(map(str, sorted(sizes)))} cores')
    if len(sizes) != 1 or any(d != tuple(range(d[0], d[0] + len(d))) for d in domains):
        notes.append('domains are not equal blocks of consecutive core ids: the topology entry '
                     'cannot describe this node')
        return None, notes
    size = sizes.pop()
    order = sorted(domains)
    reserved = sorted({c - d[0] for d in order for c in d if c not in allowed})
    entry = {'cores_per_node': len(cores), 'cores_per_domain': size}
    if not gpu_list:
        notes.append(f'no GPUs on this node (no NVIDIA or AMD display device in {sysfs}/bus/pci/devices): '
                     'gpu_domains cannot be derived')
        return None, notes
    gpu_domains = []
    for (pci, vendor, cpus), near in zip(gpu_list, local):
        hits = [i for i, d in enumerate(order) if set(d) <= near]
        if cpus is None or len(hits) != 1:
            what = 'no local_cpulist' if cpus is None else f'local to {len(hits)} domains'
            notes.append(f'GPU {pci} ({vendor}): {what}; its domain is a guess (0)')
            hits = [0]
        gpu_domains.append(hits[0])
        notes.append(f'GPU {len(gpu_domains) - 1}: {pci} ({vendor}), domain {hits[0]}')
    entry['gpu_domains'] = gpu_domains
    if reserved:
        entry['reserved_cores_per_domain'] = reserved
        notes.append(f'cores outside this process\'s affinity, per domain: {reserved}')
    return entry, notes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--sysfs', default='/sys', help='root of the sysfs tree to read (default /sys)')
    parser.add_argument('--allowed', type=parse_cpulist, default=None, metavar='CPULIST',
                        help="CPUs jobs may use, e.g. 1-7,9-15 (default: this process's affinity "
                             "when reading /sys, else every online CPU)")
    args = parser.parse_args(argv)
    try:
        allowed = args.allowed
        if allowed is None and os.path.realpath(args.sysfs) != '/sys':
            allowed = parse_cpulist(read(f'{args.sysfs}/devices/system/cpu/online'))
        entry, notes = derive(args.sysfs, allowed)
    except (OSError, ValueError) as err:
        sys.exit(f'discover: cannot read the node\'s topology from {args.sysfs}: {err}')
    for note in notes:
        print(f'# {note}')
    if entry is not None:
        print(f"'topology': {entry!r},")
    return 0


if __name__ == '__main__':
    sys.exit(main())
