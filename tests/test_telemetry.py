"""GPU telemetry: the readers of the vendor tools on their recorded real outputs
(tests/data/telemetry/SOURCES.md), the sampler without a GPU, the figures, and the low-power and
throttle rules, each with its broken case (docs/telemetry.md)."""

import gzip
import json
import os
import statistics
import subprocess
import time
import sys

import pytest
import torch
from hypothesis import given, settings, strategies as st

import gpu_readers   # src/pytorch/gpu_readers.py, gpu_sources.py and telemetry.py, as the programs import them
import gpu_sources
import telemetry as rank_telemetry
from conftest import DATA
from mlcheck.judging import output, gpu_health as rules
from mlcheck.figures import gpu_use as figures
from mlcheck.figures.quartiles import upper_quartile
from saved_outputs import fact_line, saved

RECORDED = os.path.join(DATA, 'telemetry')


# --- readers, on real outputs ---------------------------------------------------------------

def test_rocm_smi_mi250_primary_gives_the_package_power_and_the_secondary_none():
    readings = gpu_readers.read_rocm_smi(saved('telemetry/rocm_smi_mi250_secondary_die.json'))
    assert readings[0] == {'power_w': 102.0, 'utilization': 50.0, 'memory_gb': 51.52702464}
    assert 'power_w' not in readings[1]          # 'N/A (Secondary die)': no power, not 0 W
    assert readings[1]['power_note'].startswith('secondary die')
    assert readings[1]['utilization'] == 0.0 and readings[1]['memory_gb'] == pytest.approx(0.0117, abs=1e-4)


def test_rocm_smi_takes_the_junction_temperature_and_the_rocm6_power_key():
    assert gpu_readers.read_rocm_smi(saved('telemetry/rocm_smi_7900xtx.json')) == {0: {
        'power_w': 19.0, 'utilization': 0.0, 'temperature_c': 49.0, 'memory_gb': 0.794341376}}
    apu = gpu_readers.read_rocm_smi(saved('telemetry/rocm_smi_780m_rocm62.json'))[0]
    assert apu['power_w'] == 7.222 and apu['utilization'] == 19.0 and apu['temperature_c'] == 31.0


def test_amd_smi_readings_and_not_available_fields():
    assert gpu_readers.read_amd_smi(saved('telemetry/amd_smi_metric_watch_na.json')) == {0: {}}
    assert gpu_readers.read_amd_smi(saved('telemetry/amd_smi_metric_usage_w7700.json')) == {0: {'utilization': 42.0}}
    reading = gpu_readers.read_amd_smi(saved('telemetry/amd_smi_metric_from_text_output.json'))[0]
    assert reading == {'power_w': 20.0, 'utilization': 0.0, 'clock_mhz': 14.0}   # UNTHROTTLED: no throttle


def test_amd_smi_newer_gpu_data_wrapper_and_a_warning_before_the_json():
    gpus = json.loads(saved('telemetry/amd_smi_metric_from_text_output.json'))
    wrapped = 'WARNING: user is not in the render group\n' + json.dumps({'gpu_data': gpus})
    assert gpu_readers.read_amd_smi(wrapped) == gpu_readers.read_amd_smi(json.dumps(gpus))


def test_nvidia_smi_header_driven_with_units_and_without_an_index_column():
    series = gpu_readers.read_nvidia_smi(saved('telemetry/nvidia_smi_one_gpu_series.csv'))
    assert series == {0: {'power_w': 78.22, 'utilization': 25.0, 'temperature_c': 55.0,
                          'clock_mhz': 1470.0}}       # the last row of GPU 0
    two = gpu_readers.read_nvidia_smi(saved('telemetry/nvidia_smi_two_gpus_no_index.csv'))
    assert two[0] == {'power_w': 106.56, 'utilization': 36.0, 'temperature_c': 60.0,
                      'clock_mhz': 1936.0, 'memory_gb': pytest.approx(2856 * 2**20 / 1e9)}
    assert two[1]['power_w'] == 5.68 and two[1]['memory_gb'] == pytest.approx(4 * 2**20 / 1e9)


def test_nvidia_smi_throttle_reasons_name_only_the_slowdowns():
    # the recorded row with a throttle column added (no recorded output has one): NVML's bits
    header, row = saved('telemetry/nvidia_smi_two_gpus_no_index.csv').splitlines()[:2]
    for reasons, named in (('0x0000000000000040', 'HW thermal slowdown (nvidia-smi 0x0000000000000040)'),
                           ('0x0000000000000020', 'SW thermal slowdown (nvidia-smi 0x0000000000000020)'),
                           ('0x0000000000000100', None),       # display clock setting: no slowdown
                           ('0x0000000000000010', None),       # sync boost
                           ('0x0000000000000004', None), ('[N/A]', None)):
        text = f'{header}, clocks_throttle_reasons.active\n{row}, {reasons}\n'
        assert gpu_readers.read_nvidia_smi(text)[0].get('throttle') == named


# each bit of NVML's clock-event reasons: its constant in NVIDIA's binding, and the slowdown named
# for it (None: how a GPU normally runs, never a throttle)
NVML_REASONS = {'GpuIdle': None, 'ApplicationsClocksSetting': None, 'SwPowerCap': None,
                'HwSlowdown': 'HW slowdown', 'SyncBoost': None,
                'SwThermalSlowdown': 'SW thermal slowdown', 'HwThermalSlowdown': 'HW thermal slowdown',
                'HwPowerBrakeSlowdown': 'HW power brake slowdown', 'DisplayClockSetting': None}


def test_throttle_bits_are_nvmls_own():
    """Issue 30: the bits were one off (0x100, the display clock, read as a power brake; 0x20,
    a thermal slowdown, as sync boost). Every bit against nvidia-ml-py's constants."""
    pynvml = pytest.importorskip('pynvml')
    for reason, named in NVML_REASONS.items():
        bit = getattr(pynvml, f'nvmlClocksEventReason{reason}')
        assert gpu_readers.NVIDIA_THROTTLE_BITS.get(bit) == named, reason
    assert set(gpu_readers.NVIDIA_THROTTLE_BITS) <= {getattr(pynvml, f'nvmlClocksEventReason{r}')
                                                      for r in NVML_REASONS}


def test_nvidia_smi_on_an_h100_answers_the_query_the_sampler_sends():
    """Recorded on an H100 (driver 580.159.04) by bench/gpu_telemetry_probe.py, with the commands
    tool_candidates builds. Asked for clocks_throttle_reasons.active, that driver names the column
    clocks_event_reasons.active; under load the GPU runs at its software power cap (0x4) and idle
    it is idle (0x1): neither is a throttle."""
    which = {'nvidia-smi': '/usr/bin/nvidia-smi'}.get
    (_, with_throttle, _), (_, without, _) = gpu_sources.tool_candidates(0, which)
    for command, recorded in ((with_throttle, 'with_throttle_loaded'), (without, 'without_throttle_loaded')):
        asked = command[-1].removeprefix('--query-gpu=').split(',')
        header = saved(f'telemetry/nvidia_smi_h100_{recorded}.csv').splitlines()[0].split(', ')
        assert len(header) == len(asked)             # one column per field asked, in order
    loaded = gpu_readers.read_nvidia_smi(saved('telemetry/nvidia_smi_h100_with_throttle_loaded.csv'))
    assert loaded == {0: {'power_w': 694.6, 'utilization': 99.0, 'temperature_c': 55.0,
                          'clock_mhz': 1395.0, 'memory_gb': pytest.approx(1011 * 2**20 / 1e9)}}
    idle = gpu_readers.read_nvidia_smi(saved('telemetry/nvidia_smi_h100_with_throttle_idle.csv'))
    assert idle[0]['power_w'] == 70.53 and 'throttle' not in idle[0]
    assert gpu_readers.read_nvidia_smi(saved('telemetry/nvidia_smi_h100_without_throttle_loaded.csv'))[0][
        'power_w'] == 694.91
    # the broken case: the same row with a hardware thermal slowdown (0x40) beside the power cap
    hot = saved('telemetry/nvidia_smi_h100_with_throttle_loaded.csv').replace('0x0000000000000004',
                                                                             '0x0000000000000044')
    assert gpu_readers.read_nvidia_smi(hot)[0]['throttle'] == \
        'HW thermal slowdown (nvidia-smi 0x0000000000000044)'


def test_nvidia_smi_on_an_h200_idle_at_its_cap_and_training():
    """Recorded on an H200 (driver 580.159.04) with the commands tool_candidates builds: idle at
    345 MHz (0x1, idle), under back-to-back bf16 matrix products at its 700 W cap (0x4, the software
    power cap) and training ResNet-50 on CIFAR-100 at 1980 MHz (0x0: nothing holds the clocks
    down). None is a throttle; the same row with a hardware slowdown (0x8) beside the cap is."""
    read = gpu_readers.read_nvidia_smi
    idle = read(saved('telemetry/nvidia_smi_h200_with_throttle_idle.csv'))
    loaded = read(saved('telemetry/nvidia_smi_h200_with_throttle_loaded.csv'))
    training = read(saved('telemetry/nvidia_smi_h200_with_throttle_training.csv'))
    assert idle == {0: {'power_w': 78.98, 'utilization': 0.0, 'temperature_c': 39.0, 'clock_mhz': 345.0,
                        'memory_gb': pytest.approx(4 * 2**20 / 1e9)}}
    assert (loaded[0]['power_w'], loaded[0]['utilization'], loaded[0]['clock_mhz']) == (690.91, 99.0, 1470.0)
    assert (training[0]['power_w'], training[0]['utilization'], training[0]['clock_mhz']) == (224.68, 43.0, 1980.0)
    assert not any('throttle' in r[0] for r in (idle, loaded, training))
    assert read(saved('telemetry/nvidia_smi_h200_without_throttle_loaded.csv'))[0]['clock_mhz'] == 1440.0
    slowed = saved('telemetry/nvidia_smi_h200_with_throttle_loaded.csv').replace('0x0000000000000004',
                                                                                '0x000000000000000C')
    assert read(slowed)[0]['throttle'] == 'HW slowdown (nvidia-smi 0x000000000000000C)'


def test_an_h200_series_with_timestamps_names_and_every_clock_reads_its_last_row():
    """nvidia-smi's own series (-lms 1000, six rows while ResNet-50 trained): the columns the
    sampler does not ask for (timestamp, name, power.limit, clocks.sm, clocks.mem) are left aside,
    the graphics clock is the one read, and of several rows of GPU 0 the last one counts."""
    text = saved('telemetry/nvidia_smi_h200_series_training.csv')
    rows = text.splitlines()
    assert len(rows) == 7 and rows[0].startswith('timestamp, index, name, power.draw [W], power.limit [W]')
    assert gpu_readers.read_nvidia_smi(text) == {0: {
        'power_w': 223.3, 'utilization': 44.0, 'temperature_c': 44.0, 'clock_mhz': 1980.0,
        'memory_gb': pytest.approx(1721 * 2**20 / 1e9)}}
    each = [gpu_readers.read_nvidia_smi(rows[0] + '\n' + row)[0]['power_w'] for row in rows[1:]]
    assert each == [222.67, 224.14, 225.24, 207.97, 219.42, 223.3]


def test_nvmls_reasons_bitmask_on_an_h200_and_the_bits_it_supports():
    """NVML's raw answers while ResNet-50 trained (bench/nvml_raw.py): the reasons bitmask is 0 (no
    bit set), every bit the readers name as a slowdown is one the H200 supports (0x1FF), and the
    power NVML gave in milliwatts is nvidia-smi's watts read in the same second."""
    readings = [json.loads(line) for line in saved('telemetry/nvml_h200_training.jsonl').splitlines()]
    assert len(readings) == 5 and all(r['name'] == 'NVIDIA H200' for r in readings)
    assert all(r['clocks_event_reasons'] == 0 for r in readings)
    assert all(gpu_readers.nvidia_throttle(r['clocks_event_reasons'], 'NVML') is None for r in readings)
    supported = readings[0]['supported_clocks_event_reasons']
    assert supported == 0x1FF and all(bit & supported for bit in gpu_readers.NVIDIA_THROTTLE_BITS)
    scale = gpu_sources.TorchSource.ACCESSORS['power_w'][1]
    csv_watts = gpu_readers.read_nvidia_smi(saved('telemetry/nvidia_smi_h200_with_throttle_training.csv'))[0]
    assert readings[0]['power_mw'] * scale == pytest.approx(csv_watts['power_w'], abs=0.01)


def test_the_slowdowns_the_readers_name_are_those_nvidia_smi_q_lists():
    """`nvidia-smi -q -d PERFORMANCE` on the H200 lists the clock-event reasons in words; each
    slowdown the readers name is one of them (a misspelt or invented reason would not be), and
    while ResNet-50 trained every one was Not Active, as the 0x0 bitmask said."""
    text = saved('telemetry/nvidia_smi_h200_q_performance_training.txt')
    section = text.split('Clocks Event Reasons\n', 1)[1].split('Clocks Event Reasons Counters', 1)[0]
    listed = {line.split(':')[0].strip().lower(): line.split(':')[1].strip()
              for line in section.splitlines() if ':' in line}
    assert set(listed.values()) == {'Not Active'}
    for named in gpu_readers.NVIDIA_THROTTLE_BITS.values():
        assert named.lower() in listed, named


def test_the_sampler_on_an_h200_read_what_nvidia_smi_read_during_the_same_run():
    """The CIFAR-100 program (ResNet-50, batch 256, device path) with its sampler at the check's
    1 s: its telemetry fact beside nvidia-smi's series taken during its epochs 2-6 (220.5 W, 42 %,
    1980 MHz on average). Peak GPU memory differs, and the docs say why: the sampler's torch path
    reports the caching allocator's peak (1.0 GB), nvidia-smi the whole process (1721 MiB: the
    CUDA context and cuDNN's workspace besides)."""
    run = output.parse(saved('gpu/h200_telemetry_run.out'), labelled=False)
    fact = run.by_rank('telemetry')[0]
    assert fact['gpu_source'] == 'torch' and fact['telemetry_interval'] == 1.0 and fact['gpu_samples'] == 14
    rows = saved('telemetry/nvidia_smi_h200_series_training.csv').splitlines()
    series = [gpu_readers.read_nvidia_smi(rows[0] + '\n' + row)[0] for row in rows[1:]]
    assert fact['power_w'] == pytest.approx(statistics.fmean(r['power_w'] for r in series), rel=0.03)
    assert fact['utilization'] == pytest.approx(statistics.fmean(r['utilization'] for r in series), abs=3)
    assert fact['clock_mhz'] == fact['min_clock_mhz'] == 1980 and 'throttle' not in fact
    assert fact['gpu_memory_gb'] < series[-1]['memory_gb']
    assert rules.problems(run, 0.75) == [] and rules.throttle_note(run) is None



def sampler_share(run):
    """The sampler's own seconds as a share of the timed epochs it spanned."""
    return run.by_rank('telemetry')[0]['sampling_seconds'] / sum(e['seconds'] for e in run.rank_events('epoch', 0))


def test_the_sampler_on_an_h200_keeps_under_one_percent_reading_host_memory_by_its_budget():
    """The same program and run as above, on the second H200 session (issue 52): with host memory
    read by its budget (HOST_BUDGET) the sampler read it at 7 of its 16 samples and spent 0.54 %
    of the timed seconds; the same session's control, host memory at every sample as before
    (HOST_BUDGET = 0), 15 of 15 and 1.21 % (the first session: 1.39 %)."""
    budget = output.parse(saved('gpu/h200_sampler_host_budget.out'), labelled=False)
    every = output.parse(saved('gpu/h200_sampler_host_every_sample.out'), labelled=False)
    fact, control = budget.by_rank('telemetry')[0], every.by_rank('telemetry')[0]
    assert fact['gpu_source'] == control['gpu_source'] == 'torch'
    assert (fact['host_samples'], fact['gpu_samples']) == (7, 16)
    assert control['host_samples'] == control['gpu_samples'] == 15
    assert sampler_share(budget) == pytest.approx(0.0054, abs=5e-5)     # under the 1 % goal
    assert sampler_share(every) == pytest.approx(0.0121, abs=5e-5)
    assert fact['host_memory_gb'] == pytest.approx(control['host_memory_gb'], rel=0.01)

def probe_events(event, gpu='h100'):
    """The facts of `event` that bench/gpu_telemetry_probe.py wrote on the H100 or the H200."""
    lines = map(json.loads, saved(f'gpu/{gpu}_telemetry_probe.jsonl').splitlines())
    return [line for line in lines if line['event'] == event]


@pytest.mark.parametrize('gpu', ['h100', 'h200'])
def test_torch_accessors_on_cuda_read_as_nvidia_smi_does(gpu):
    """Side by side on the H100 and the H200, idle (70-79 W) and at their 700 W cap:
    torch.cuda.power_draw is NVML's milliwatts on a CUDA build, and TorchSource's scale makes it
    nvidia-smi's watts (a scale of 1, right on ROCm builds, would read 694,600 W here)."""
    samples = probe_events('sample', gpu)
    assert {s['phase'] for s in samples} == {'idle', 'loaded'} and len(samples) == 10
    for sample in samples:
        tool = sample['tools'][0]['reading']
        for field, (accessor, scale) in gpu_sources.TorchSource.ACCESSORS.items():
            assert sample['torch_raw'][accessor] * scale == pytest.approx(tool[field], rel=0.05, abs=1), field


def test_on_the_h200_torch_reads_nvmls_own_numbers_and_nvidia_smi_its_reasons():
    """The H200 probe also kept NVML's raw answers (bench/nvml_raw.py, pynvml) at each sample:
    torch's accessors are NVML's numbers to the milliwatt, and the reasons bitmask NVML gave is the
    one nvidia-smi printed (idle 0x1, at the cap 0x4): neither is a throttle."""
    for sample in probe_events('sample', 'h200'):
        nvml, raw = sample['nvml_raw'], sample['torch_raw']
        assert (raw['power_draw'], raw['utilization'], raw['clock_rate']) == \
            (nvml['power_mw'], nvml['utilization_gpu'], nvml['clock_sm_mhz'])
        assert nvml['clocks_event_reasons'] == {'idle': 0x1, 'loaded': 0x4}[sample['phase']]
        assert gpu_readers.nvidia_throttle(nvml['clocks_event_reasons'], 'NVML') is None
        assert 'throttle' not in sample['torch_source'] and 'throttle' not in sample['tools'][0]['reading']


@pytest.mark.parametrize('gpu', ['h100', 'h200'])
def test_the_sampler_on_nvidia_smi_reads_what_torch_reads(gpu):
    """The whole Sampler on the H100 and the H200 with torch's accessors left out (an image without
    NVML), under the same load: nvidia-smi's figures agree with torch's."""
    (on_tool,) = probe_events('sampler_on_tool', gpu)
    loaded = [s['torch_source'] for s in probe_events('sample', gpu) if s['phase'] == 'loaded']
    assert on_tool['gpu_source'] == 'nvidia-smi' and on_tool['gpu_samples'] >= 3
    assert on_tool['power_w'] == pytest.approx(statistics.fmean(s['power_w'] for s in loaded), rel=0.05)
    assert on_tool['utilization'] == 99.0 and 'throttle' not in on_tool


# --- sources and the sampler, on this machine (no GPU) ---------------------------------------

def test_no_gpu_says_why_once_and_host_memory_is_still_measured():
    sampler = rank_telemetry.Sampler(torch.device('cpu'), interval=0.05).start()
    sum(range(10**6))
    fields = sampler.stop().fields()
    assert fields['gpu_telemetry_unavailable'] == 'the rank trains on cpu: no GPU to read'
    assert 'power_w' not in fields and fields['gpu_samples'] == 0
    assert fields['host_memory_gb'] > 0.01     # this Python with torch loaded


def test_a_gpu_with_no_torch_accessor_and_no_tool_in_the_image():
    source, why = gpu_sources.gpu_source(torch.device('cuda', 0), which=lambda name: None)
    assert source is None
    assert why.startswith('torch: ') and why.endswith('no amd-smi, rocm-smi or nvidia-smi on PATH')


def fake_tool(tmp_path, name, recorded_output):
    tool = tmp_path / name
    tool.write_text(f'#!/bin/sh\ncat {os.path.join(RECORDED, recorded_output)}\n')
    tool.chmod(0o755)
    return lambda wanted: str(tool) if wanted == name else None


def test_rocm_smi_in_the_image_read_for_the_secondary_gcd(tmp_path, monkeypatch):
    monkeypatch.setenv('ROCR_VISIBLE_DEVICES', '1')      # this rank's GCD: the package's second
    which = fake_tool(tmp_path, 'rocm-smi', 'rocm_smi_mi250_secondary_die.json')
    source, why = gpu_sources.gpu_source(torch.device('cuda', 0), which=which)
    assert why is None and source.name == 'rocm-smi'
    sampler = rank_telemetry.Sampler(torch.device('cuda', 0), 0.05, which=which).start()
    fields = sampler.stop().fields()
    assert fields['gpu_source'] == 'rocm-smi' and fields['gpu_samples'] >= 1
    assert 'power_w' not in fields and fields['power_note'].startswith('secondary die')


def test_host_memory_counts_the_data_loader_workers():
    alone = rank_telemetry.host_resident_bytes()
    worker = subprocess.Popen([sys.executable, '-c', 'import sys, time; b = bytearray(300 * 2**20); '
                               'b[::4096] = b"x" * len(b[::4096]); print(1, flush=True); time.sleep(30)'],
                              stdout=subprocess.PIPE)
    try:
        worker.stdout.readline()
        assert rank_telemetry.host_resident_bytes() - alone > 250 * 2**20
    finally:
        worker.kill()
        worker.wait()


def test_profile_leaves_a_loadable_chrome_trace(tmp_path):
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()

    path = rank_telemetry.profile(step, 3, str(tmp_path / 'traces'), rank=1)
    assert path == str(tmp_path / 'traces' / 'rank1.trace.json.gz')
    with gzip.open(path) as stream:
        events = json.load(stream)['traceEvents']
    assert sorted({e['name'] for e in events if e.get('name', '').startswith('ProfilerStep')}) == \
        ['ProfilerStep#1', 'ProfilerStep#2', 'ProfilerStep#3']


# --- the figures and the rules --------------------------------------------------------------

def run_of(readings_by_rank, node_of=lambda rank: f'nid00{rank // 8}', extra=None):
    """A run whose ranks report `readings_by_rank[rank]` as their sampler would (summarised)."""
    lines = []
    for rank, reading in readings_by_rank.items():
        lines.append(fact_line({'event': 'rank', 'rank': rank, 'node': node_of(rank), 'local_rank': rank % 8}))
        fields = {'gpu': rank % 8, 'gpu_source': 'rocm-smi', 'host_memory_gb': 3.5,
                  **rank_telemetry.summarise([reading]), **(extra or {}).get(rank, {})}
        lines.append(fact_line({'event': 'telemetry', 'rank': rank, **fields}))
    return output.parse(''.join(lines), labelled=False)


def mi250x_node(package_power):
    """8 GCDs, 4 packages: each primary from the recorded MI250 primary, at `package_power[p]`
    watts, each secondary as recorded (no power)."""
    primary, secondary = (gpu_readers.read_rocm_smi(saved('telemetry/rocm_smi_mi250_secondary_die.json'))[i]
                          for i in (0, 1))
    return {2 * p + die: ({**primary, 'power_w': watts} if die == 0 else secondary)
            for p, watts in enumerate(package_power) for die in (0, 1)}


def test_healthy_mi250x_node_never_flags_a_secondary_gcd():
    run = run_of(mi250x_node([102.0, 98.0, 105.0, 100.0]))
    assert rules.problems(run, 0.75) == []
    assert figures.median_power(run) == 101.0
    assert figures.lowest_power_fraction(run) == pytest.approx(98 / 102)    # of the upper quartile
    assert figures.peak_gpu_memory(run) == pytest.approx(51.527, abs=1e-3)
    assert figures.peak_host_memory(run) == 3.5


def test_one_mi250x_package_at_half_power_is_named_with_both_its_gcds():
    """Issue 30: the package was blamed on its primary GCD (rank 2), and the secondary (rank 3),
    the one that may idle, appeared nowhere."""
    node = mi250x_node([102.0, 51.0, 105.0, 100.0])
    node[3] = {**node[3], 'utilization': 3.0}
    found = rules.problems(run_of(node), 0.75)
    assert found == ['the package of GCDs 2-3 on nid000 (ranks 2, 3) drew 51 W, 0.50 of the '
                     'upper-quartile package (102 W; limit 0.75); utilization GCD 2 50 %, GCD 3 3 %']


def test_one_gpu_at_half_power_among_nvidia_gpus():
    gpu = gpu_readers.read_nvidia_smi(saved('telemetry/nvidia_smi_two_gpus_no_index.csv'))[0]
    readings = {rank: {**gpu, 'power_w': 106.56 / 2 if rank == 5 else 106.56} for rank in range(8)}
    found = rules.problems(run_of(readings), 0.75)
    assert len(found) == 1 and found[0].startswith('rank 5 on nid000 (GPU 5) drew 53 W, 0.50 of the upper-quartile GPU')
    assert 'clock 1936 MHz' in found[0] and 'max temperature 60 °C' in found[0]
    assert rules.problems(run_of(readings), 0) == []           # the rule off


def test_a_throttle_the_tool_reports_is_named():
    readings = {rank: {'power_w': 100.0, **({'throttle': 'HW thermal slowdown (nvidia-smi 0x40)'}
                                            if rank == 3 else {})} for rank in range(4)}
    assert rules.problems(run_of(readings), 0.75) == [
        'rank 3 on nid000 (GPU 3) was throttled: HW thermal slowdown (nvidia-smi 0x40)']


def test_absent_telemetry_is_no_failure_and_is_said_once():
    unavailable = {'gpu_telemetry_unavailable': 'the rank trains on cpu: no GPU to read'}
    run = run_of({0: {}, 1: {}}, extra={0: unavailable, 1: unavailable})
    assert rules.problems(run, 0.75) == []
    assert figures.median_power(run) is None and figures.lowest_power_fraction(run) is None
    assert figures.peak_host_memory(run) == 3.5
    assert rules.unavailable_note(run, stand_in=True) == (
        'GPU telemetry not available on stand-in GPUs (the ranks train on CPUs) (ranks 0-1: the rank '
        'trains on cpu: no GPU to read); peak host memory is still reported')
    no_facts = output.parse('', labelled=False)
    assert rules.problems(no_facts, 0.75) == [] and rules.unavailable_note(no_facts) is None
    assert figures.peak_host_memory(no_facts) is None


@settings(max_examples=100, deadline=None)
@given(powers=st.lists(st.one_of(st.none(), st.floats(1, 700)), min_size=1, max_size=32),
       fraction=st.floats(0.05, 1))
def test_a_gpu_is_flagged_exactly_when_below_the_fraction_of_the_upper_quartile(powers, fraction):
    readings = {rank: ({'power_w': watts} if watts else {'power_note': 'secondary die: ...'})
                for rank, watts in enumerate(powers)}
    # each GPU on a node of its own: one line per low GPU (packages and nodes: the tests above)
    found = rules.problems(run_of(readings, node_of=lambda rank: f'nid{rank:03d}'), fraction)
    reported = sorted(w for w in powers if w)
    if not reported:
        assert found == []
        return
    reference = upper_quartile(reported)
    flagged = {int(line.split()[1]) for line in found}
    assert flagged == {rank for rank, w in enumerate(powers) if w and w < fraction * reference}


def test_a_slow_reader_is_read_less_often_than_the_interval(monkeypatch):
    """The sampler's loop waits BUDGET times as long as a sample took: a vendor tool started per
    sample (0.02 s) is read about once a second, not every millisecond. Timed on a clock the test
    moves (the sampler's loop run in the test's thread), so a loaded machine cannot fail it."""
    clock = FakeClock()
    monkeypatch.setattr(rank_telemetry, 'time', clock)
    monkeypatch.setattr(rank_telemetry, 'host_resident_bytes', lambda pid=None: 2**30)

    class SlowTool:
        name, throttle_not_checked = 'slow', None

        def read(self):
            clock.now += 0.02       # as a vendor tool started per sample
            return {'power_w': 100.0}

    class ClockedStop:
        """The loop's stop event: a wait moves the clock; set once 0.8 s have passed."""
        def wait(self, timeout):
            clock.now += timeout

        def is_set(self):
            return clock.now >= 0.8

        def set(self):
            pass

    sampler = rank_telemetry.Sampler(torch.device('cpu'), interval=0.001)
    sampler.source, sampler._stop = SlowTool(), ClockedStop()
    sampler._run()
    fields = sampler.stop().fields()
    # every 50 x 0.02 s = 1 s at most: the first sample and the last (at stop); not ~40
    assert 1 <= fields['gpu_samples'] <= 3 and fields['power_w'] == 100.0
    assert fields['sampling_seconds'] < 0.2


class FakeClock:
    """time for telemetry.py: perf_counter() answers `now`, which the test moves."""
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


def host_read_costing(clock, costs):
    """A host_resident_bytes whose n-th call takes costs[n] seconds of `clock`; returns it and its calls."""
    calls = []

    def read(pid=None):
        clock.now += costs[min(len(calls), len(costs) - 1)]
        calls.append(clock.now)
        return 2**30
    return read, calls


def test_host_memory_is_read_less_often_than_the_gpu_when_its_read_is_slow(monkeypatch):
    """On an H200 a host-memory read took 12.4 ms of the sampler's 1-s interval (1.39 % with the GPU
    read's 0.06 ms): read every 200 x 12.4 ms = 2.5 s, not at every sample (the old code read it
    at each of the 10 samples here)."""
    clock = FakeClock()
    monkeypatch.setattr(rank_telemetry, 'time', clock)
    read, calls = host_read_costing(clock, [0.0124])
    monkeypatch.setattr(rank_telemetry, 'host_resident_bytes', read)
    sampler = rank_telemetry.Sampler(torch.device('cpu'), interval=1.0)
    for second in range(10):
        clock.now = float(second)
        sampler.sample()
    assert len(calls) == sampler.host_reads == 4            # at 0, 3, 6 and 9 s: due 2.48 s after each
    assert sampler.host_peak == 2**30
    assert sampler.seconds_sampling == pytest.approx(4 * 0.0124)   # 0.5 % of the 10 s, not 1.24 %


def test_a_fast_host_memory_read_is_still_taken_at_every_sample(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(rank_telemetry, 'time', clock)
    read, calls = host_read_costing(clock, [0.001])           # 200 x 1 ms = 0.2 s < the interval
    monkeypatch.setattr(rank_telemetry, 'host_resident_bytes', read)
    sampler = rank_telemetry.Sampler(torch.device('cpu'), interval=1.0)
    for second in range(10):
        clock.now = float(second)
        sampler.sample()
    assert len(calls) == 10


@settings(max_examples=200, deadline=None)
@given(costs=st.lists(st.floats(1e-5, 0.2), min_size=1, max_size=40),
       interval=st.floats(0.05, 2.0), samples=st.integers(1, 300))
def test_host_memory_reads_keep_under_their_share_of_the_time(costs, interval, samples):
    """However long each read takes, the reads' time over a run of T seconds is at most the last
    read's cost plus T / HOST_BUDGET: each read is followed by HOST_BUDGET times its cost unread."""
    clock = FakeClock()
    read, calls = host_read_costing(clock, costs)
    saved_time, saved_read = rank_telemetry.time, rank_telemetry.host_resident_bytes
    rank_telemetry.time, rank_telemetry.host_resident_bytes = clock, read
    try:
        sampler = rank_telemetry.Sampler(torch.device('cpu'), interval=interval)
        for n in range(samples):
            clock.now = max(clock.now, n * interval)
            sampler.sample()
    finally:
        rank_telemetry.time, rank_telemetry.host_resident_bytes = saved_time, saved_read
    spent = [costs[min(i, len(costs) - 1)] for i in range(len(calls))]
    assert calls and sum(spent) <= spent[-1] + clock.now / rank_telemetry.HOST_BUDGET + 1e-9

# --- throttling where torch reads the GPU (issue 30: it was never looked at) --------------------

class FakeNVML:
    """pynvml as NVIDIA's binding answers on a GPU whose clock-event reasons are `reasons`."""
    def __init__(self, reasons, works=True):
        self.reasons, self.works = reasons, works

    def nvmlInit(self):
        if not self.works:
            raise RuntimeError('NVML Shared Library Not Found')

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons


@pytest.fixture
def torch_reads_a_gpu(monkeypatch):
    """torch.cuda's accessors answering as on an H100 at its cap (no GPU here)."""
    for accessor, value in (('power_draw', 694600), ('utilization', 99), ('temperature', 55),
                            ('clock_rate', 1395)):
        monkeypatch.setattr(torch.cuda, accessor, lambda device, value=value: value, raising=False)
    monkeypatch.setattr(torch.version, 'hip', None)


def test_where_torch_reads_the_gpu_nvmls_reasons_are_read_beside_it(torch_reads_a_gpu, monkeypatch):
    monkeypatch.setitem(sys.modules, 'pynvml', FakeNVML(0x44))     # power cap + HW thermal
    source = gpu_sources.TorchSource(torch.device('cuda', 0))
    assert source.read()['throttle'] == 'HW thermal slowdown (NVML 0x44)'
    assert source.throttle_not_checked is None


def test_where_nothing_reads_throttling_the_run_says_so(torch_reads_a_gpu, monkeypatch):
    monkeypatch.setitem(sys.modules, 'pynvml', FakeNVML(0x44, works=False))
    source = gpu_sources.TorchSource(torch.device('cuda', 0))
    assert 'throttle' not in source.read()
    assert source.throttle_not_checked == ("torch's accessors give no clock-event reasons and "
                                           'pynvml does not answer')
    unchecked = {'gpu_source': 'torch', 'throttle_not_checked': source.throttle_not_checked}
    run = run_of({0: {'power_w': 690.0}, 1: {'power_w': 695.0}}, extra={0: unchecked, 1: unchecked})
    assert rules.problems(run, 0.75) == []
    assert rules.throttle_note(run) == ("throttling not checked (ranks 0-1: torch's accessors give "
                                        'no clock-event reasons and pynvml does not answer)')


def test_nvidia_smi_asked_without_the_throttle_column_says_throttling_was_not_checked(tmp_path):
    which = fake_tool(tmp_path, 'nvidia-smi', 'nvidia_smi_two_gpus_no_index.csv')
    (_, with_throttle, reader), (_, without, _) = gpu_sources.tool_candidates(0, which)
    assert gpu_sources.ToolSource('nvidia-smi', with_throttle, reader, 0).throttle_not_checked is None
    assert gpu_sources.ToolSource('nvidia-smi', without, reader, 0).throttle_not_checked == \
        'nvidia-smi was asked for no throttle reasons'
