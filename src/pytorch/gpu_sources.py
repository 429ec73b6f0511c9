"""Where a rank's GPU readings come from: torch's own accessors, else a vendor tool on PATH
(gpu_source picks the most portable that answers). Imported by telemetry.py inside the images.
"""

import os
import shutil
import subprocess

import torch

from gpu_readers import (NVIDIA_QUERY, NVIDIA_THROTTLE_FIELD, ROCM_SMI_ARGS, _known, _positive,
                         nvidia_throttle, read_amd_smi, read_nvidia_smi, read_rocm_smi)

TOOL_TIMEOUT = 10          # seconds one call of a vendor tool may take


# --- sources: each answers read() with one reading of this rank's GPU, or raises

def nvml_throttle_reader(device):
    """A function that reads this GPU's slowdowns from NVML's clock-event reasons, through NVIDIA's
    pynvml (which torch's own accessors use on CUDA builds), or None where it cannot."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(node_gpu_index(device))
        # named ...ThrottleReasons before NVML 12
        get = getattr(pynvml, 'nvmlDeviceGetCurrentClocksEventReasons', None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        get(handle)
    except Exception:
        return None
    return lambda: nvidia_throttle(get(handle), f'NVML {get(handle):#x}')


class TorchSource:
    """torch.cuda's accessors; those that raise on this build or GPU are left out. They give no
    throttle: on CUDA builds NVML's clock-event reasons are read beside them where pynvml answers,
    and where nothing can, `throttle_not_checked` says why."""
    name = 'torch'
    # power_draw is NVML's milliwatts on CUDA builds but amdsmi's socket power in watts on ROCm
    # builds, 0 where amdsmi says N/A (torch/cuda/__init__.py, _get_amdsmi_power_draw, torch 2.14)
    ACCESSORS = {'power_w': ('power_draw', 1 if torch.version.hip else 1e-3),
                 'utilization': ('utilization', 1), 'temperature_c': ('temperature', 1),
                 'clock_mhz': ('clock_rate', 1)}

    def __init__(self, device):
        self.device = device
        self.working = {}
        for field, (accessor, scale) in self.ACCESSORS.items():
            function = getattr(torch.cuda, accessor, None)
            try:
                function(device)
            except Exception:       # no NVML/amdsmi, or this GPU does not tell
                continue
            self.working[field] = (function, scale)
        if 'power_w' not in self.working:
            raise RuntimeError('torch.cuda.power_draw does not answer here')
        self.throttle = None if torch.version.hip else nvml_throttle_reader(device)
        self.throttle_not_checked = None if self.throttle else (
            "torch's amdsmi accessors give no throttle status" if torch.version.hip
            else "torch's accessors give no clock-event reasons and pynvml does not answer")

    def read(self):
        reading = {field: _positive(function(self.device) * scale) if field == 'power_w'
                   else function(self.device) * scale
                   for field, (function, scale) in self.working.items()}
        if self.throttle:
            reading['throttle'] = self.throttle()
        return _known(reading)


class ToolSource:
    """A vendor tool, called once per sample, its reading of GPU `index` (the node's number)."""

    def __init__(self, name, command, reader, index):
        self.name, self.command, self.reader, self.index = name, command, reader, index
        self.read()         # raises if the tool does not answer for this GPU
        self.throttle_not_checked = (
            None if name == 'amd-smi' or (name == 'nvidia-smi' and NVIDIA_THROTTLE_FIELD in command[-1])
            else f'{name} was asked for no throttle reasons' if name == 'nvidia-smi'
            else f'{name} gives no throttle status')

    def read(self):
        done = subprocess.run(self.command, capture_output=True, text=True, timeout=TOOL_TIMEOUT)
        if done.returncode != 0:
            raise RuntimeError(f'{self.command[0]} exited {done.returncode}: '
                               f'{(done.stderr or done.stdout).strip()[:120]}')
        readings = self.reader(done.stdout)
        if self.index not in readings:
            raise RuntimeError(f'{self.command[0]} reports no GPU {self.index}')
        return readings[self.index]


def node_gpu_index(device):
    """This rank's GPU as the node's tools number it: the first id of the visible-devices
    variable that selected it, else torch's index."""
    for name in ('ROCR_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES'):
        ids = [i for i in os.environ.get(name, '').split(',') if i.strip()]
        if ids and device.index is not None and device.index < len(ids) and ids[device.index].isdigit():
            return int(ids[device.index])
    return device.index or 0


def tool_candidates(index, which=shutil.which):
    """(name, command, reader) of the vendor tools found on PATH, most portable first."""
    candidates = []
    if which('amd-smi'):
        candidates.append(('amd-smi', [which('amd-smi'), 'metric', '--json'], read_amd_smi))
    if which('rocm-smi'):
        candidates.append(('rocm-smi', [which('rocm-smi'), *ROCM_SMI_ARGS], read_rocm_smi))
    if which('nvidia-smi'):
        query = [which('nvidia-smi'), '--format=csv', f'--id={index}']
        candidates.append(('nvidia-smi', [*query, '--query-gpu=' + ','.join(
            [*NVIDIA_QUERY, NVIDIA_THROTTLE_FIELD])], read_nvidia_smi))
        # a driver that no longer knows the throttle field refuses the whole query
        candidates.append(('nvidia-smi', [*query, '--query-gpu=' + ','.join(NVIDIA_QUERY)],
                           read_nvidia_smi))
    return candidates


def gpu_source(device, which=shutil.which):
    """(source, None), or (None, why no GPU telemetry can be read for this rank)."""
    if device.type != 'cuda':
        return None, f'the rank trains on {device.type}: no GPU to read'
    tried = []
    try:
        return TorchSource(device), None
    except Exception as err:
        tried.append(f'torch: {err}')
    index = node_gpu_index(device)
    for name, command, reader in tool_candidates(index, which):
        try:
            return ToolSource(name, command, reader, index), None
        except Exception as err:
            tried.append(f'{name}: {str(err)[:120]}')
    if len(tried) == 1:
        tried.append('no amd-smi, rocm-smi or nvidia-smi on PATH')
    return None, '; '.join(tried)
