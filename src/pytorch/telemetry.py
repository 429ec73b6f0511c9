"""What a rank's GPU and host did while it trained, and a profiler trace on request.

Imported by the training programs (beside ddp_common.py), so it runs inside the container
images: standard library and torch only. See docs/telemetry.md.

A Sampler is a daemon thread that reads, every --telemetry-interval seconds over the timed
epochs, this rank's GPU through the most portable layer that answers:
  1. torch's own accessors (torch.cuda.power_draw, utilization, temperature, clock_rate: NVML on
     CUDA builds, amdsmi on ROCm builds), and torch.cuda.max_memory_reserved for memory;
  2. else the vendor tool in the image or on the node: `amd-smi metric --json`,
     `rocm-smi ... --json`, `nvidia-smi --query-gpu=... --format=csv`;
  3. else nothing, and the fact says why (`gpu_telemetry_unavailable`).
and the resident memory of the rank and its children (data-loader workers), from /proc.

The readers of the tools' output (read_rocm_smi, read_amd_smi, read_nvidia_smi) are plain
functions of the text, tested on recorded real outputs (tests/data/telemetry/).
A GPU whose tool gives no power (MI250X's secondary GCD: rocm-smi says `N/A (Secondary die)`,
the primary GCD reporting the package) reports no power: never zero, never a guess.
"""

import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import threading
import time

import torch

TOOL_TIMEOUT = 10          # seconds one call of a vendor tool may take
BUDGET = 50                # the sampler waits at least BUDGET times as long as a sample took
ROCM_SMI_ARGS = ['--showpower', '--showuse', '--showmeminfo', 'vram', '--showtemp', '--json']
NVIDIA_QUERY = ['index', 'power.draw', 'utilization.gpu', 'memory.used', 'temperature.gpu',
                'clocks.gr']
NVIDIA_THROTTLE_FIELD = 'clocks_throttle_reasons.active'
# clock-event reasons of NVML that mean the GPU was slowed against its will (nvmlClocksEventReasons:
# 0x1 idle, 0x2 application clocks and 0x4 the software power cap are how a GPU normally runs)
NVIDIA_THROTTLE_BITS = {0x8: 'hardware slowdown', 0x20: 'sync boost', 0x40: 'software thermal slowdown',
                        0x80: 'hardware thermal slowdown', 0x100: 'power brake'}


def add_arguments(parser):
    """--telemetry-interval and --profile-steps / --trace-dir of the training programs."""
    parser.add_argument('--telemetry-interval', type=float,
                        default=float(os.environ.get('MLCHECK_TELEMETRY_INTERVAL', '1')),
                        help='seconds between telemetry samples over the timed epochs (0: off)')
    parser.add_argument('--profile-steps', type=int,
                        default=int(os.environ.get('MLCHECK_PROFILE_STEPS', '0')),
                        help='steady-state steps to profile with torch.profiler after the timed '
                             'epochs, one Chrome trace per rank in --trace-dir (0: none)')
    parser.add_argument('--trace-dir', default='traces', help='where the profiler traces go')
    return parser


# --- readers of the vendor tools' output: {'power_w', 'utilization', 'memory_gb',
#     'temperature_c', 'clock_mhz', 'throttle'}, each absent where the tool gives none

def number(text):
    """A float from a tool's field ('237.0', '106.56 W', {'value': 42, 'unit': '%'}), or None
    for 'N/A', 'N/A (Secondary die)', '[N/A]', '[Not Supported]' and the like."""
    if isinstance(text, dict):
        text = text.get('value')
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str):
        return None
    head = text.strip().split(' ')[0]
    try:
        return float(head)
    except ValueError:
        return None


def _positive(value):
    """A power of 0 W is no reading: a GPU that trains draws power (rocm-smi's older layouts
    give the secondary die 0.0)."""
    return value if value else None


def _first(fields, *names):
    for name in names:
        value = number(fields.get(name))
        if value is not None:
            return value
    return None


def read_rocm_smi(text):
    """{gpu index: reading} from `rocm-smi --showpower --showuse --showmeminfo vram --showtemp
    --json`: keys 'card0', 'card1', ... (the power key changed name in ROCm 6)."""
    readings = {}
    for card, fields in json.loads(text).items():
        if not card.startswith('card') or not isinstance(fields, dict):
            continue        # a 'system' entry, when there is one
        reading = {'power_w': _positive(_first(fields, 'Average Graphics Package Power (W)',
                                               'Current Socket Graphics Package Power (W)')),
                   'utilization': _first(fields, 'GPU use (%)'),
                   'temperature_c': _first(fields, 'Temperature (Sensor junction) (C)',
                                           'Temperature (Sensor edge) (C)')}
        used = _first(fields, 'VRAM Total Used Memory (B)')
        reading['memory_gb'] = used / 1e9 if used is not None else None
        if 'Secondary die' in str(fields.get('Average Graphics Package Power (W)', '')):
            reading['power_note'] = 'secondary die: the package power is on its primary'
        readings[int(card[len('card'):])] = _known(reading)
    return readings


def read_amd_smi(text):
    """{gpu index: reading} from `amd-smi metric --json`: a list of GPUs, or {'gpu_data': [...]}
    in newer releases; every figure {'value': ..., 'unit': ...} or 'N/A'. Lines before the JSON
    (a warning about the render group) are skipped."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.lstrip()[:1] in ('[', '{')), 0)
    document = json.loads('\n'.join(lines[first:]))     # after any warning the tool printed first
    gpus = document.get('gpu_data', []) if isinstance(document, dict) else document
    readings = {}
    for gpu in gpus:
        def field(section, *names):
            values = gpu.get(section)
            return _first(values, *names) if isinstance(values, dict) else None
        reading = {'power_w': _positive(field('power', 'socket_power', 'average_socket_power')),
                   'utilization': field('usage', 'gfx_activity'),
                   'temperature_c': field('temperature', 'hotspot', 'edge')}
        used = field('mem_usage', 'used_vram')       # MB
        reading['memory_gb'] = used / 1e3 if used is not None else None
        clock = gpu.get('clock')
        if isinstance(clock, dict) and isinstance(clock.get('gfx_0'), dict):
            reading['clock_mhz'] = number(clock['gfx_0'].get('clk'))
        status = gpu.get('power', {}).get('throttle_status') if isinstance(gpu.get('power'), dict) else None
        if isinstance(status, str) and status.upper() == 'THROTTLED':
            reading['throttle'] = 'throttled (amd-smi throttle_status)'
        readings[int(gpu.get('gpu', len(readings)))] = _known(reading)
    return readings


def read_nvidia_smi(text):
    """{gpu index: reading} from `nvidia-smi --query-gpu=index,... --format=csv`: a header
    ('power.draw [W]', 'clocks.current.graphics [MHz]', ...) and one row per GPU."""
    rows = list(csv.reader(io.StringIO(text.strip()), skipinitialspace=True))
    if not rows:
        return {}
    header = [name.split(' [')[0].strip() for name in rows[0]]
    readings = {}
    for position, row in enumerate(rows[1:]):
        fields = dict(zip(header, row))
        used = _first(fields, 'memory.used')         # MiB
        reading = {'power_w': _positive(_first(fields, 'power.draw')),
                   'utilization': _first(fields, 'utilization.gpu'),
                   'temperature_c': _first(fields, 'temperature.gpu'),
                   'clock_mhz': _first(fields, 'clocks.current.graphics', 'clocks.gr'),
                   'memory_gb': used * 2**20 / 1e9 if used is not None else None}
        reasons = fields.get('clocks_throttle_reasons.active', fields.get('clocks_event_reasons.active'))
        if reasons and reasons.strip().lower().startswith('0x'):
            bits = int(reasons, 16)
            named = [why for bit, why in NVIDIA_THROTTLE_BITS.items() if bits & bit]
            if named:
                reading['throttle'] = ', '.join(named) + f' (nvidia-smi {reasons.strip()})'
        index = number(fields.get('index'))
        readings[int(index) if index is not None else position] = _known(reading)
    return readings


def _known(reading):
    return {name: value for name, value in reading.items() if value is not None}


# --- sources: each answers read() with one reading of this rank's GPU, or raises

class TorchSource:
    """torch.cuda's accessors; those that raise on this build or GPU are left out."""
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

    def read(self):
        return _known({field: _positive(function(self.device) * scale) if field == 'power_w'
                       else function(self.device) * scale
                       for field, (function, scale) in self.working.items()})


class ToolSource:
    """A vendor tool, called once per sample, its reading of GPU `index` (the node's number)."""

    def __init__(self, name, command, reader, index):
        self.name, self.command, self.reader, self.index = name, command, reader, index
        self.read()         # raises if the tool does not answer for this GPU

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


# --- host memory: the rank and its children (data-loader workers)

def resident_bytes(pid):
    """Memory of process `pid` in bytes: its proportional set size (Pss: a page shared by the
    rank and its forked data-loader workers counts once in their sum, not once per process)
    where /proc/PID/smaps_rollup is readable, else its resident set (VmRSS); 0 if it is gone."""
    for path, key in ((f'/proc/{pid}/smaps_rollup', 'Pss:'), (f'/proc/{pid}/status', 'VmRSS:')):
        try:
            with open(path) as stream:
                for line in stream:
                    if line.startswith(key):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return 0


def children(pid):
    """The pids of `pid`'s children (from /proc/PID/task/*/children, else /proc/*/stat)."""
    found = []
    try:
        for task in os.listdir(f'/proc/{pid}/task'):
            with open(f'/proc/{pid}/task/{task}/children') as stream:
                found += [int(child) for child in stream.read().split()]
        return found
    except OSError:
        pass
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as stream:
                    if int(stream.read().rsplit(')', 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def host_resident_bytes(pid=None):
    pid = pid or os.getpid()
    return resident_bytes(pid) + sum(resident_bytes(child) for child in children(pid))


# --- the sampler

class Sampler:
    """Samples this rank's GPU and host memory every `interval` seconds on a daemon thread,
    from start() to stop(); fields() summarises them for the `telemetry` fact."""

    def __init__(self, device, interval, which=shutil.which):
        self.device, self.interval = device, interval
        self.samples, self.host_peak, self.errors, self.seconds_sampling = [], 0, [], 0.0
        self.source, self.unavailable = (gpu_source(device, which) if interval > 0
                                         else (None, 'telemetry off (--telemetry-interval 0)'))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='mlcheck-telemetry', daemon=True)

    def start(self):
        if self.interval > 0:
            if self.device.type == 'cuda':
                _allocator_peak(self.device, reset=True)
            self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            took = self.sample()
            # a slow reader (a vendor tool started per sample: rocm-smi is a Python program)
            # is read less often, so that sampling keeps below 1/BUDGET of one core
            self._stop.wait(max(self.interval, BUDGET * took))

    def sample(self):
        """Take one sample; returns the seconds it took."""
        start = time.perf_counter()
        self.host_peak = max(self.host_peak, host_resident_bytes())
        if self.source is not None:
            try:
                self.samples.append(self.source.read())
            except Exception as err:      # one failed read is counted, not fatal
                self.errors.append(str(err)[:120])
        took = time.perf_counter() - start
        self.seconds_sampling += took
        return took

    def stop(self):
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
        if self.interval > 0:
            self.sample()           # a run shorter than one interval still has its last reading
        return self

    def fields(self):
        figures = {'telemetry_interval': self.interval, 'gpu_samples': len(self.samples),
                   'sampling_seconds': self.seconds_sampling,
                   'host_memory_gb': max(self.host_peak, host_resident_bytes()) / 1e9}
        if self.interval <= 0:
            return {**figures, 'gpu_telemetry_unavailable': self.unavailable}
        if self.source is None:
            return {**figures, 'gpu_telemetry_unavailable': self.unavailable}
        figures['gpu_source'] = self.source.name
        figures['gpu'] = node_gpu_index(self.device)
        figures.update(summarise(self.samples))
        reserved = _allocator_peak(self.device)
        if reserved:
            figures['gpu_memory_gb'] = max(figures.get('gpu_memory_gb', 0), reserved / 1e9)
        if self.errors:
            figures['failed_samples'] = len(self.errors)
            figures['last_error'] = self.errors[-1]
        return figures


def _allocator_peak(device, reset=False):
    """The most memory torch's caching allocator held on `device` since the last reset, in
    bytes (None where torch cannot tell); with reset=True, start counting anew."""
    try:
        if reset:
            torch.cuda.reset_peak_memory_stats(device)
            return None
        return torch.cuda.max_memory_reserved(device)
    except Exception:       # no GPU runtime in this torch
        return None


def summarise(samples):
    """Mean power, utilization and clock, peak memory, maximum temperature, the lowest clock,
    the throttles seen, and any note on a figure the tool does not give."""
    def values(name):
        return [s[name] for s in samples if isinstance(s.get(name), (int, float))]

    figures = {}
    for name, reduce in (('power_w', statistics.fmean), ('utilization', statistics.fmean),
                         ('clock_mhz', statistics.fmean), ('memory_gb', max),
                         ('temperature_c', max)):
        found = values(name)
        if found:
            figures[{'memory_gb': 'gpu_memory_gb'}.get(name, name)] = reduce(found)
    if values('clock_mhz'):
        figures['min_clock_mhz'] = min(values('clock_mhz'))
    throttles = sorted({s['throttle'] for s in samples if s.get('throttle')})
    if throttles:
        figures['throttle'] = '; '.join(throttles)
    notes = sorted({s['power_note'] for s in samples if s.get('power_note')})
    if notes:
        figures['power_note'] = notes[0]
    return figures


def profile(step, steps, trace_dir, rank):
    """Run `step()` `steps` times under torch.profiler (after one untraced warm-up step) and
    write this rank's Chrome trace, gzipped: TRACE_DIR/rank<R>.trace.json.gz. Returns its path."""
    from torch.profiler import ProfilerActivity, profile as torch_profile, schedule
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    os.makedirs(trace_dir, exist_ok=True)
    path = os.path.join(trace_dir, f'rank{rank}.trace.json.gz')
    with torch_profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                       on_trace_ready=lambda prof: prof.export_chrome_trace(path)) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()
    return path
