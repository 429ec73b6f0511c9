#!/usr/bin/env python3
"""The GPU tools' real outputs, kept as printed, for tests/data/telemetry: nvidia-smi's CSV in
the two commands src/pytorch/gpu_sources.tool_candidates builds for GPU 0 (with and without the
throttle column), a timestamped series (clocks and clocks_event_reasons), `nvidia-smi -q -d
PERFORMANCE,POWER,CLOCK` (the reasons in words), and NVML's raw answers (bench/nvml_raw.py: the
reasons bitmask). Each CSV is read back with gpu_readers.read_nvidia_smi, one JSON line per
capture on stdout and one `SUMMARY` line per capture in words.

    python bench/gpu_capture.py PHASE DIR [--series-seconds S]

PHASE names the files (idle, training, ...); with --series-seconds the series and NVML are read
once a second for that long (-lms 1000), else once. Standard library, pynvml where there.
"""

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), 'src', 'pytorch'), HERE]
import gpu_readers  # noqa: E402
import nvml_raw  # noqa: E402

SERIES_FIELDS = ['timestamp', 'index', 'name', 'power.draw', 'power.limit', 'utilization.gpu',
                 'memory.used', 'temperature.gpu', 'clocks.gr', 'clocks.sm', 'clocks.mem',
                 'clocks_event_reasons.active']


def run(command, timeout=15):
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return done.stdout, done.stderr, done.returncode


def keep(folder, phase, file, command, stdout, stderr, code, gpu):
    """Write what the tool printed and read it back: the capture's JSON fact."""
    with open(os.path.join(folder, file), 'w') as f:
        f.write(stdout if code == 0 else stdout + stderr)
    lines = stdout.strip().splitlines() if code == 0 else []
    header, rows = (lines[0], [line for line in lines[1:] if line != lines[0]]) if lines else ('', [])
    names = [name.split(' [')[0].strip() for name in next(csv.reader([header], skipinitialspace=True), [])]
    fields = [dict(zip(names, next(csv.reader([row], skipinitialspace=True)))) for row in rows]
    readings = [gpu_readers.read_nvidia_smi(header + '\n' + row) for row in rows]
    fact = {'event': 'capture', 'phase': phase, 'file': file, 'command': command, 'exit': code,
            'gpu': gpu, 'rows': len(rows), 'readings': [r.get(0, r) for r in readings],
            'reasons': [f.get('clocks_event_reasons.active') or f.get('clocks_throttle_reasons.active')
                        for f in fields]}
    print(json.dumps(fact), flush=True)
    return fact


def said(fact):
    if fact['exit'] != 0 or not fact['readings']:
        return f"exit {fact['exit']}, nothing read"
    r = fact['readings'][-1]
    parts = [f'{r[k]:.1f} {unit}' for k, unit in (('power_w', 'W'), ('utilization', '%'),
             ('clock_mhz', 'MHz'), ('memory_gb', 'GB'), ('temperature_c', 'C'))
             if isinstance(r.get(k), (int, float))]
    if fact['reasons'] and fact['reasons'][-1]:
        parts.append('reasons ' + fact['reasons'][-1])
    if r.get('throttle'):
        parts.append('throttle ' + r['throttle'])
    return ', '.join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('phase')
    parser.add_argument('folder')
    parser.add_argument('--series-seconds', type=float, default=0)
    args = parser.parse_args()
    os.makedirs(args.folder, exist_ok=True)
    smi = shutil.which('nvidia-smi')
    if not smi:
        print(f'SUMMARY nvidia-smi {args.phase}: nvidia-smi not on PATH, nothing captured')
        return 0
    gpu = run([smi, '--query-gpu=name', '--format=csv,noheader', '--id=0'])[0].strip()
    tag = next((w.lower() for w in gpu.split() if re.fullmatch(r'[A-Z]+[0-9]+[A-Za-z]*', w)), 'gpu')
    phase, folder = args.phase, args.folder

    # NVML's raw answers, once a second beside the series (on a thread: at the same moments)
    nvml_file = os.path.join(folder, f'nvml_{tag}_{phase}.jsonl')
    readings_nvml = []

    def read_nvml(times):
        for i in range(times):
            readings_nvml.append({'event': 'nvml', 'phase': phase, 'time': time.time(), **nvml_raw.read(0)})
            if i + 1 < times:
                time.sleep(1)
    times = max(1, int(args.series_seconds))
    nvml_thread = threading.Thread(target=read_nvml, args=(times,))
    nvml_thread.start()

    base = [smi, '--format=csv', '--id=0']
    query = ','.join(gpu_readers.NVIDIA_QUERY)
    facts = {}
    for name, command in (('with_throttle', [*base, f'--query-gpu={query},{gpu_readers.NVIDIA_THROTTLE_FIELD}']),
                          ('without_throttle', [*base, f'--query-gpu={query}'])):
        facts[name] = keep(folder, phase, f'nvidia_smi_{tag}_{name}_{phase}.csv', command, *run(command), gpu)
    fields = SERIES_FIELDS
    if run([smi, '--query-gpu=' + ','.join(fields), '--format=csv'])[2] != 0:
        fields = fields[:-1] + ['clocks_throttle_reasons.active']    # a driver before the new name
    command = [smi, '--query-gpu=' + ','.join(fields), '--format=csv', '--id=0']
    file = f'nvidia_smi_{tag}_series_{phase}.csv'
    if args.series_seconds:
        loop = subprocess.Popen([*command, '-lms', '1000'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        time.sleep(args.series_seconds + 0.5)
        loop.terminate()
        text = loop.communicate(timeout=10)[0]
        facts['series'] = keep(folder, phase, file, command + ['-lms', '1000'], text, '',
                               0 if text.lstrip().startswith('timestamp') else 1, gpu)
    else:
        facts['series'] = keep(folder, phase, file, command, *run(command), gpu)
    q_out, q_err, q_code = run([smi, '-q', '-d', 'PERFORMANCE,POWER,CLOCK', '-i', '0'])
    with open(os.path.join(folder, f'nvidia_smi_{tag}_q_performance_{phase}.txt'), 'w') as f:
        f.write(q_out if q_code == 0 else q_out + q_err)
    nvml_thread.join()
    with open(nvml_file, 'w') as f:
        f.writelines(json.dumps(r) + '\n' for r in readings_nvml)
    for r in readings_nvml:
        print(json.dumps(r), flush=True)

    print(f'SUMMARY nvidia-smi {phase} ({gpu}), the sampler\'s query: ' + said(facts['with_throttle']))
    print(f'SUMMARY nvidia-smi {phase}, without the throttle column: ' + said(facts['without_throttle']))
    print(f"SUMMARY nvidia-smi {phase}, series of {facts['series']['rows']} row(s), last: " + said(facts['series']))
    last = readings_nvml[-1] if readings_nvml else {}
    if 'error' in last:
        print(f'SUMMARY NVML {phase}: {last["error"]}')
    else:
        reasons = last.get('clocks_event_reasons')
        print(f'SUMMARY NVML {phase}, {len(readings_nvml)} reading(s), last: power {last.get("power_mw")} mW, '
              f'utilization {last.get("utilization_gpu")} %, SM clock {last.get("clock_sm_mhz")} MHz, reasons '
              + (f'{reasons:#x}' if isinstance(reasons, int) else str(reasons))
              + (f' (throttle: {gpu_readers.nvidia_throttle(reasons, "NVML")})' if isinstance(reasons, int) else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
