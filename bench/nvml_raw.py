#!/usr/bin/env python3
"""One GPU as NVML answers it, raw: through NVIDIA's binding nvidia-ml-py (pynvml), the numbers
NVML returns (milliwatts, bytes, MHz, the clock-event reasons bitmask), each field alone so that
one unsupported call leaves the others. For fixtures beside nvidia-smi's CSV and torch's
accessors (bench/gpu_telemetry_probe.py, bench/gpu-session.sh); standard library and pynvml only.

    python bench/nvml_raw.py [INDEX] [PHASE]     # one JSON line
"""

import json
import sys
import time


def read(index=0):
    """{field: NVML's raw answer, or 'error: ...'} of GPU `index` (NVML's numbering)."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as err:        # no binding, no library, no GPU
        return {'error': f'{type(err).__name__}: {err}'}
    reasons = getattr(pynvml, 'nvmlDeviceGetCurrentClocksEventReasons', None) or \
        pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    supported = getattr(pynvml, 'nvmlDeviceGetSupportedClocksEventReasons', None) or \
        pynvml.nvmlDeviceGetSupportedClocksThrottleReasons
    calls = {
        'name': lambda: pynvml.nvmlDeviceGetName(handle),
        'driver': pynvml.nvmlSystemGetDriverVersion,
        'nvml_version': pynvml.nvmlSystemGetNVMLVersion,
        'power_mw': lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
        'enforced_power_limit_mw': lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle),
        'utilization_gpu': lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu,
        'utilization_memory': lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).memory,
        'memory_used_bytes': lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used,
        'memory_total_bytes': lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).total,
        'temperature_c': lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        'clock_graphics_mhz': lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_GRAPHICS),
        'clock_sm_mhz': lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        'clock_memory_mhz': lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        'max_clock_sm_mhz': lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
        'clocks_event_reasons': lambda: reasons(handle),
        'supported_clocks_event_reasons': lambda: supported(handle),
    }
    raw = {}
    for field, call in calls.items():
        try:
            value = call()
            raw[field] = value.decode() if isinstance(value, bytes) else value
        except Exception as err:
            raw[field] = f'error: {type(err).__name__}: {err}'
    return raw


if __name__ == '__main__':
    index = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    phase = sys.argv[2] if len(sys.argv) > 2 else None
    print(json.dumps({'event': 'nvml', 'phase': phase, 'time': time.time(), **read(index)}))
