"""sysfs trees of GPU nodes built from their documented layouts, in the kernel's own file shapes
(devices/system/..., bus/pci/devices/ADDR -> devices/pci.../ADDR). Saved real trees are in
tests/data/sysfs: h100-vm (the lent H100 machine) and ci-2core (this CI machine, no GPU)."""

import os

SAVED = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'sysfs')


def span(cpus):
    return ','.join(f'{c}' for c in cpus)


def write_tree(root, cores, smt, numa_nodes, l3_size, gpus):
    """cores: physical cores 0..cores-1 (with `smt` threads each, sibling i + cores*k);
    numa_nodes: [list of cores]; gpus: [(pci address, vendor id, numa node)]."""
    def put(path, text):
        path = os.path.join(root, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text + '\n')

    def threads(core_list):
        return sorted(c + cores * k for c in core_list for k in range(smt))

    put('devices/system/cpu/online', f'0-{cores * smt - 1}')
    for cpu in range(cores * smt):
        core = cpu % cores
        put(f'devices/system/cpu/cpu{cpu}/topology/thread_siblings_list', span(threads([core])))
        first = core - core % l3_size
        put(f'devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_list',
            span(threads(range(first, first + l3_size))))
    for node, node_cores in enumerate(numa_nodes):
        put(f'devices/system/node/node{node}/cpulist', span(threads(node_cores)))
    os.makedirs(os.path.join(root, 'bus', 'pci', 'devices'), exist_ok=True)
    for pci, vendor, node in gpus:
        device = f'devices/pci{pci[:7]}/{pci}'
        put(f'{device}/vendor', vendor)
        put(f'{device}/class', '0x038000' if vendor == '0x1002' else '0x030200')
        put(f'{device}/numa_node', str(node))
        put(f'{device}/local_cpulist', span(threads(numa_nodes[node])))
        os.symlink(os.path.join('..', '..', '..', device), os.path.join(root, 'bus', 'pci', 'devices', pci))
    return str(root)


def lumi_g(root):
    """LUMI-G: 64 cores (2 threads each) in 8 CCDs, NUMA per quarter socket (NPS4: 2 CCDs
    each); GCD i at the PCI bus LUMI's documentation lists, near CCD [6,7,2,3,0,1,4,5][i]."""
    buses = ['c1', 'c6', 'c9', 'cc', 'd1', 'd6', 'd9', 'dc']
    ccds = [6, 7, 2, 3, 0, 1, 4, 5]
    return write_tree(root, cores=64, smt=2, l3_size=8,
                      numa_nodes=[list(range(16 * n, 16 * n + 16)) for n in range(4)],
                      gpus=[(f'0000:{bus}:00.0', '0x1002', ccd // 2) for bus, ccd in zip(buses, ccds)])


def two_socket_nvidia(root):
    """Two sockets of 32 cores (2 threads each, NUMA per socket), four NVIDIA GPUs: 0 and 1 on
    socket 0, 2 and 3 on socket 1, as `nvidia-smi topo -m` shows such nodes."""
    return write_tree(root, cores=64, smt=2, l3_size=32,
                      numa_nodes=[list(range(32)), list(range(32, 64))],
                      gpus=[('0000:17:00.0', '0x10de', 0), ('0000:65:00.0', '0x10de', 0),
                            ('0000:b1:00.0', '0x10de', 1), ('0000:ca:00.0', '0x10de', 1)])
