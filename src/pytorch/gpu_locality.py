"""The CPUs local to a rank's GPU, read from the hardware at run time.

The GPU's PCI address comes from the GPU runtime (torch's device properties, the same for CUDA
and ROCm); the kernel publishes that device's locality in sysfs: `local_cpulist` (the CPUs of the
NUMA domain it is attached to) and `numa_node`. Runs inside the ranks, so standard library and
torch only; `sysfs` is a parameter so that tests can read saved trees.
"""

import os

from mlcheck_contract import parse_cpulist

SYSFS = '/sys'


def pci_address(device):
    """'0000:c1:00.0' for a torch GPU device (function 0: one PCI function per GPU)."""
    import torch
    props = torch.cuda.get_device_properties(device)
    return f'{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0'


def read_locality(pci, sysfs=SYSFS):
    """{'gpu_pci', 'gpu_local_cpus', 'gpu_numa_node'} of the PCI device `pci`; OSError or
    ValueError when sysfs does not tell (not mounted, hidden by the container, unreadable)."""
    device = os.path.join(sysfs, 'bus', 'pci', 'devices', pci.lower())
    with open(os.path.join(device, 'local_cpulist')) as f:
        cpus = parse_cpulist(f.read())
    if not cpus:
        raise ValueError(f'{device}/local_cpulist is empty')
    try:
        with open(os.path.join(device, 'numa_node')) as f:
            numa = int(f.read())
    except OSError:
        numa = -1
    return {'gpu_pci': pci.lower(), 'gpu_local_cpus': cpus, 'gpu_numa_node': numa}


def rank_fields(device, sysfs=SYSFS):
    """Fields of the `rank` fact: the GPU's locality, or why it cannot be read."""
    if device.type != 'cuda':
        return {'gpu_locality_unread': 'no GPU in use'}
    try:
        pci = pci_address(device)
    except (RuntimeError, AssertionError, AttributeError) as err:
        return {'gpu_locality_unread': f'no PCI address from the GPU runtime ({err})'}
    try:
        return read_locality(pci, sysfs)
    except (OSError, ValueError) as err:
        return {'gpu_pci': pci, 'gpu_locality_unread': f'sysfs does not tell ({err})'}


VISIBLE_DEVICES_VARS = ('CUDA_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES')


def gpu_selection():
    """Which GPUs this task was given: the node's GPU ids from Slurm (SLURM_STEP_GPUS, set per
    task under --gpu-bind) and the visible-device variables, as set by Slurm or the wrapper."""
    fields = {}
    value = os.environ.get('SLURM_STEP_GPUS', '')
    if value:
        try:
            fields['slurm_step_gpus'] = parse_cpulist(value)
        except ValueError:
            fields['slurm_step_gpus'] = value
    visible = {name: os.environ[name] for name in VISIBLE_DEVICES_VARS if name in os.environ}
    if visible:
        fields['visible_devices_env'] = visible
    return fields
