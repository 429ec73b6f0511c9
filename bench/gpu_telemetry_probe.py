"""One GPU read every way the training programs' sampler can read it, side by side, idle and
under load: torch's accessors (raw and as TorchSource scales them), NVML's raw answers through
pynvml (bench/nvml_raw.py: milliwatts, bytes, the clock-event reasons bitmask) and each
nvidia-smi command that gpu_sources.tool_candidates builds (raw CSV kept, and as read_nvidia_smi
reads it); then the
whole Sampler once on the tool path, as on an image whose torch has no NVML; and what one read
of each part of a sample costs (the GPU through torch, through nvidia-smi, the host memory).

    python bench/gpu_telemetry_probe.py OUT_DIR > probe.jsonl

OUT_DIR gets the tools' raw outputs (nvidia_smi_<query>_<phase>.csv). Needs one CUDA GPU.
"""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / 'src' / 'pytorch'),
                str(Path(__file__).resolve().parent)]
import gpu_readers  # noqa: E402
import gpu_sources  # noqa: E402
import nvml_raw  # noqa: E402
import telemetry  # noqa: E402

SAMPLES = 5
TIMED_READS = 20


def busy(device, stop):
    """bf16 matrix products back to back until `stop`: a GPU drawing near its full power."""
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    while not stop.is_set():
        for _ in range(20):
            a @ b
        torch.cuda.synchronize(device)


def torch_raw(device):
    raw = {}
    for accessor in ('power_draw', 'utilization', 'temperature', 'clock_rate'):
        try:
            raw[accessor] = getattr(torch.cuda, accessor)(device)
        except Exception as err:
            raw[accessor] = f'error: {err}'
    return raw


def tool_readings(index, out, phase, first):
    readings = []
    for name, command, reader in gpu_sources.tool_candidates(index):
        query = 'with_throttle' if gpu_readers.NVIDIA_THROTTLE_FIELD in command[-1] else 'without_throttle'
        done = subprocess.run(command, capture_output=True, text=True, timeout=gpu_sources.TOOL_TIMEOUT)
        if first:
            (out / f'{name.replace("-", "_")}_{query}_{phase}.csv').write_text(done.stdout + done.stderr)
        readings.append({'tool': name, 'query': query, 'exit': done.returncode,
                         'reading': reader(done.stdout).get(index) if done.returncode == 0 else None})
    return readings


def read_ms(read):
    took = []
    for _ in range(TIMED_READS):
        start = time.perf_counter()
        read()
        took.append((time.perf_counter() - start) * 1e3)
    return sorted(took)[len(took) // 2]


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device('cuda', 0)
    index = gpu_sources.node_gpu_index(device)
    print(json.dumps({'event': 'device', 'name': torch.cuda.get_device_name(device), 'torch': torch.__version__,
                      'cuda': torch.version.cuda, 'index': index}), flush=True)
    stop = threading.Event()
    for phase in ('idle', 'loaded'):
        if phase == 'loaded':
            busy_thread = threading.Thread(target=busy, args=(device, stop), daemon=True)
            busy_thread.start()
            time.sleep(5)       # power and clocks settle
        for sample in range(SAMPLES):
            print(json.dumps({'event': 'sample', 'phase': phase, 'torch_raw': torch_raw(device),
                              'torch_source': gpu_sources.TorchSource(device).read(),
                              'nvml_raw': nvml_raw.read(index),
                              'tools': tool_readings(index, out, phase, sample == 0)}), flush=True)
            time.sleep(1)

    # what each part of one sample costs, under load (median of TIMED_READS reads, in ms)
    tool = gpu_sources.ToolSource(*gpu_sources.tool_candidates(index)[0], index)
    costs = {name: read_ms(read) for name, read in (('torch', gpu_sources.TorchSource(device).read),
                                                    ('nvidia-smi', tool.read),
                                                    ('host_memory', telemetry.host_resident_bytes))}
    # the host memory again with 4 data-loader workers alive, as the CIFAR-100 program has them
    workers = iter(torch.utils.data.DataLoader(range(1000), batch_size=10, num_workers=4, persistent_workers=True))
    next(workers)
    costs['host_memory_with_4_workers'] = read_ms(telemetry.host_resident_bytes)
    print(json.dumps({'event': 'read_ms', **costs}), flush=True)

    # the whole sampler on the tool path, still under load
    class NoTorchAccessors:
        def __init__(self, device):
            raise RuntimeError('torch accessors left out by the probe')
    gpu_sources.TorchSource = NoTorchAccessors
    sampler = telemetry.Sampler(device, 0.5).start()
    time.sleep(6)
    print(json.dumps({'event': 'sampler_on_tool', **sampler.stop().fields()}), flush=True)
    stop.set()
    busy_thread.join()       # CUDA work still running at exit aborts the interpreter


if __name__ == '__main__':
    main()
