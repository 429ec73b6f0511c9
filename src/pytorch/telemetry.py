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

The sources are in gpu_sources.py, the readers of the tools' output in gpu_readers.py.
"""

import math
import os
import shutil
import statistics
import threading
import time

import torch

from gpu_sources import gpu_source, node_gpu_index

BUDGET = 50                # the sampler waits at least BUDGET times as long as a sample took
# host memory (/proc's smaps_rollup, the kernel walking the rank's mappings: 6 ms on an H200's host,
# 12 ms of the thread's wall time under a launch-bound training thread, 41-75 ms with loader workers)
# costs a hundred times the GPU read through torch (0.06 ms): it is read again only after
# HOST_BUDGET times as long as its last read took, so that it keeps under 1/HOST_BUDGET of the time
HOST_BUDGET = 200


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
        self.host_reads, self._host_due = 0, -math.inf
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
        if start >= self._host_due:
            self.host_peak = max(self.host_peak, host_resident_bytes())
            self.host_reads += 1
            self._host_due = start + HOST_BUDGET * (time.perf_counter() - start)
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
                   'sampling_seconds': self.seconds_sampling, 'host_samples': self.host_reads,
                   'host_memory_gb': max(self.host_peak, host_resident_bytes()) / 1e9}
        if self.interval <= 0:
            return {**figures, 'gpu_telemetry_unavailable': self.unavailable}
        if self.source is None:
            return {**figures, 'gpu_telemetry_unavailable': self.unavailable}
        figures['gpu_source'] = self.source.name
        figures['gpu'] = node_gpu_index(self.device)
        if self.source.throttle_not_checked:
            figures['throttle_not_checked'] = self.source.throttle_not_checked
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
