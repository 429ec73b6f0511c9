"""Readers of the vendor tools' output (amd-smi, rocm-smi, nvidia-smi): plain functions of the
text, tested on recorded real outputs (tests/data/telemetry/). Standard library only: imported by
telemetry.py's sources inside the container images. See docs/telemetry.md.

A GPU whose tool gives no power (MI250X's secondary GCD: rocm-smi says `N/A (Secondary die)`,
the primary GCD reporting the package) reports no power: never zero, never a guess.
"""

import csv
import io
import json

ROCM_SMI_ARGS = ['--showpower', '--showuse', '--showmeminfo', 'vram', '--showtemp', '--json']
NVIDIA_QUERY = ['index', 'power.draw', 'utilization.gpu', 'memory.used', 'temperature.gpu',
                'clocks.gr']
NVIDIA_THROTTLE_FIELD = 'clocks_throttle_reasons.active'
# NVML's clock-event reasons that slow a GPU against its will, by bit (nvml.h's
# nvmlClocksEventReason* constants, as NVIDIA's own binding nvidia-ml-py defines them in pynvml.py;
# tests/test_telemetry.py checks every bit against it), named as `nvidia-smi -q` names them. The
# others are how a GPU normally runs and are never named: 0x1 GPU idle, 0x2 applications clocks
# setting, 0x4 software power cap (a GPU at full load runs at its power limit), 0x10 sync boost
# (clocks held to a group's), 0x100 display clock setting.
NVIDIA_THROTTLE_BITS = {0x8: 'HW slowdown', 0x20: 'SW thermal slowdown', 0x40: 'HW thermal slowdown',
                        0x80: 'HW power brake slowdown'}


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
            reading['throttle'] = nvidia_throttle(int(reasons, 16), f'nvidia-smi {reasons.strip()}')
        index = number(fields.get('index'))
        readings[int(index) if index is not None else position] = _known(reading)
    return readings


def nvidia_throttle(bits, source):
    """The slowdowns among NVML's clock-event reason `bits`, with where they were read, or None."""
    named = [why for bit, why in NVIDIA_THROTTLE_BITS.items() if bits & bit]
    return ', '.join(named) + f' ({source})' if named else None


def _known(reading):
    return {name: value for name, value in reading.items() if value is not None}
