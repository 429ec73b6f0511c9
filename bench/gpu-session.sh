#!/usr/bin/env bash
# One session on a lent GPU machine (one GPU, no Slurm, no network): what the project needs
# measured on a real GPU, most important first, each part under its own time limit inside one
# budget (GPU_SESSION_BUDGET seconds, default 395), so that a session cut short keeps the first
# parts' results:
#   1 versions    nvidia-smi, nvidia-smi -q (head), torch/CUDA/NCCL/cuDNN/torchvision versions, the GPU
#   2 data-path   bench/cifar_data_path.py: CIFAR-100's device path, loader path and a bare loop,
#                 ResNet-152 and ResNet-50, fp32 and bf16+channels_last, batch 256
#   3 telemetry   nvidia-smi's field help; nvidia-smi CSV captured idle and while the CIFAR-100
#                 program trains, in the commands src/pytorch/gpu_sources.tool_candidates builds
#                 (what src/pytorch/gpu_readers.read_nvidia_smi parses: fixtures for
#                 tests/data/telemetry) and in a timestamped series; bench/gpu_telemetry_probe.py
#   4 programs    the programs part of bench/gpu-path.sh: MNIST DDP (NCCL, one rank), CIFAR-100
#                 --mode single and dp, collectives.py up to 256 MiB; each one
#                 rank through src/launch/rank-env.sh, stdout and stderr labelled "0: " as srun
#                 --label labels task 0, so the project's own parser reads them
#   5 ab-control  bench/gpu_ab_control.py: an A=A control of mlcheck.ab.rule, 5 rounds A B / B A
#   6 extra       if time is left: CIFAR-100 --mode ddp as part 4 runs the programs
#
#   bench/gpu-session.sh DATA_DIR OUT_DIR      (DATA_DIR: staged MNIST/ and cifar-100-python/)
#
# OUT_DIR gets at most 5 files, each as soon as its part ends: summary.txt (one line per figure,
# appended as it comes), versions.txt, cifar-data-path.txt, ab-control.txt and details.tar.gz
# (details/<part>/: every part's files; made again after each part, so it always holds the
# parts that ended). Environment: PYTHON (python3); GPU_SESSION_PARTS (some of "1 2 3 4 5 6");
# GPU_SESSION_BUDGET (seconds); GPU_SESSION_TINY=1: tiny models, batches and steps on the CPU,
# to test the plumbing where there is no GPU (the nvidia-smi parts then say why they read nothing);
# GPU_SESSION_AB_ROUNDS (5); GPU_SESSION_WORK (where details/ is kept; default a new temp dir).
set -uo pipefail
data=${1:?usage: bench/gpu-session.sh DATA_DIR OUT_DIR}
out=${2:?usage: bench/gpu-session.sh DATA_DIR OUT_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
tiny=${GPU_SESSION_TINY:-0}
budget=${GPU_SESSION_BUDGET:-395}
parts=" ${GPU_SESSION_PARTS:-1 2 3 4 5 6} "
ab_rounds=${GPU_SESSION_AB_ROUNDS:-5}
reserve=8           # seconds kept at the end of the budget for the last tarball
export PYTHONUNBUFFERED=1

mkdir -p "$out" || exit
out=$(cd "$out" && pwd)
data=$(cd "$data" 2>/dev/null && pwd || echo "$data")
if [[ -n ${GPU_SESSION_WORK:-} ]]; then
    work=$GPU_SESSION_WORK
    mkdir -p "$work" || exit
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-session.XXXXXX") || exit
fi
details=$work/details
mkdir -p "$details"
summary=$out/summary.txt
: > "$summary"
cd "$repo" || exit

if [[ $tiny == 1 ]]; then
    device=cpu
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}     # a few threads fight over a small CPU
else
    device=gpu
fi

say() { printf '%s\n' "$*" | tee -a "$summary"; }

status_word() {
    case $1 in
        0) echo ok ;;
        124|137) echo "timed out (exit $1)" ;;
        125) echo "not run: no time left in the part" ;;
        *) echo "exit $1" ;;
    esac
}

# details.tar.gz again, with every part so far (written aside, then moved: never half a file)
pack() {
    local excludes=()
    tar -czf "$out/details.tar.gz.new" -C "$work" details 2>/dev/null
    if (( $(stat -c %s "$out/details.tar.gz.new" 2>/dev/null || echo 0) > 15 * 1024 * 1024 )); then
        excludes=(--exclude='*.trace.json.gz' --exclude='*.err')      # the bulkiest, never the figures
        tar -czf "$out/details.tar.gz.new" -C "$work" "${excludes[@]}" details 2>/dev/null
    fi
    mv -f "$out/details.tar.gz.new" "$out/details.tar.gz"
}
trap 'say "session: interrupted after $SECONDS s"; pack; exit 143' TERM INT

# begin NUMBER NAME CAP: the part's folder in $dir and its end in $part_end (CAP seconds from
# now, or the budget's end less the reserve); fails when too little time is left to start it
begin() {
    part_label="$1 $2"
    part_start=$SECONDS
    dir=$details/$1-$2
    mkdir -p "$dir"
    part_end=$(( SECONDS + $3 ))
    (( part_end > budget - reserve )) && part_end=$(( budget - reserve ))
    if (( part_end - SECONDS < 15 )); then
        say "$part_label: skipped, $(( budget - SECONDS )) s of the budget left"
        return 1
    fi
    say "$part_label: started at $SECONDS s, limit $(( part_end - SECONDS )) s"
}

end_part() {
    say "$part_label: ended after $(( SECONDS - part_start )) s"
    pack
}

# limited CAP COMMAND...: COMMAND under `timeout`, for CAP seconds (0: no cap of its own) or
# less where the part ends sooner; killed 5 s after the TERM if it ignores it
limited() {
    local cap=$1 left=$(( part_end - SECONDS ))
    shift
    (( cap > 0 && cap < left )) && left=$cap
    if (( left < 3 )); then
        echo "not run, no time left in the part: $*" >&2
        return 125
    fi
    timeout -k 5 "$left" "$@"
}

# figures KIND FILE...: summary lines of one program's output (labelled or not)
FIGURES='
import json, statistics, sys
sys.path.insert(0, ".")
from mlcheck.judging import output

def fmt(value):
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)

def pick(fact, names):
    return ", ".join(f"{name} {fmt(fact[name])}" for name in names if fact and fact.get(name) is not None)

kind, path = sys.argv[1], sys.argv[2]
text = open(path, errors="replace").read()
if kind == "program":
    stderr_path = path[:-4] + ".err" if path.endswith(".out") else None
    try:
        stderr = open(stderr_path, errors="replace").read() if stderr_path else ""
    except OSError:
        stderr = ""
    run = output.parse(text, stderr=stderr)
    said = [pick(run.result(), ("samples_per_s", "test_accuracy", "step_time", "model_flops_per_s",
                                "busbw", "algbw", "largest_bytes", "latency_us", "checked_per_rank"))]
    telemetry = run.by_rank("telemetry").get(0)
    said.append(pick(telemetry, ("power_w", "utilization", "clock_mhz", "gpu_memory_gb",
                                 "host_memory_gb", "gpu_samples", "throttle", "throttle_not_checked",
                                 "gpu_telemetry_unavailable")))
    loader = run.by_rank("loader").get(0)
    said.append(("loader alone " + pick(loader, ("images_per_s",))) if loader else "")
    said.append("" if run.by_rank("done") else "no done fact")
    print("; ".join(s for s in said if s) or "no figures")
elif kind == "probe":
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    for phase in ("idle", "loaded"):
        samples = [s for s in lines if s.get("event") == "sample" and s.get("phase") == phase]
        if not samples:
            continue
        def median(values):
            values = [v for v in values if isinstance(v, (int, float))]
            return statistics.median(values) if values else None
        torch_source = {k: median(s["torch_source"].get(k) for s in samples)
                        for k in ("power_w", "utilization", "clock_mhz", "temperature_c")}
        tool = {k: median((t.get("reading") or {}).get(k) for s in samples for t in s["tools"]
                          if t.get("query") == "with_throttle")
                for k in ("power_w", "utilization", "clock_mhz", "temperature_c")}
        print(f"probe {phase}, median of {len(samples)}: torch " + pick(torch_source, torch_source)
              + "; nvidia-smi " + pick(tool, tool))
    for s in lines:
        if s.get("event") == "read_ms":
            print("probe one read, ms: " + pick(s, ("torch", "nvidia-smi", "host_memory",
                                                   "host_memory_with_4_workers")))
        if s.get("event") == "sampler_on_tool":
            print("probe sampler on the tool path: " + pick(s, ("gpu_source", "power_w", "utilization",
                                                                 "clock_mhz", "gpu_samples", "throttle",
                                                                 "throttle_not_checked")))
'

# nvidia-smi captures for tests/data/telemetry: PHASE DIR. The commands gpu_sources.tool_candidates
# builds for GPU 0 (with and without the throttle column), one call each, kept as printed, and
# the session's series query (timestamped; -lms 1000 for 5 s under training, one call idle).
# Each capture is read back with gpu_readers.read_nvidia_smi; one SUMMARY line per capture.
CAPTURE='
import csv, io, json, os, re, shutil, subprocess, sys, time
sys.path.insert(0, "src/pytorch")
import gpu_readers

phase, folder = sys.argv[1], sys.argv[2]
os.makedirs(folder, exist_ok=True)
smi = shutil.which("nvidia-smi")
if not smi:
    print("SUMMARY nvidia-smi " + phase + ": nvidia-smi not on PATH, nothing captured")
    sys.exit(0)
name = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader", "--id=0"],
                      capture_output=True, text=True, timeout=15).stdout.strip()
tag = next((w.lower() for w in name.split() if re.fullmatch(r"[A-Z]+[0-9]+[A-Za-z]*", w)), "gpu")
query = ",".join(gpu_readers.NVIDIA_QUERY)
base = [smi, "--format=csv", "--id=0"]
series_fields = ["timestamp", "index", "name", "power.draw", "utilization.gpu", "memory.used",
                 "clocks.sm", "clocks.mem", "clocks_event_reasons.active"]

def series_command(fields):
    return [smi, "--query-gpu=" + ",".join(fields), "--format=csv"]

def keep(file, command, done_stdout, done_stderr, code):
    with open(os.path.join(folder, file), "w") as f:
        f.write(done_stdout if code == 0 else done_stdout + done_stderr)
    lines = done_stdout.strip().splitlines() if code == 0 else []
    header, rows = (lines[0], [line for line in lines[1:] if line != lines[0]]) if lines else ("", [])
    per_row = [gpu_readers.read_nvidia_smi(header + "\n" + row) for row in rows]
    names = [name.split(" [")[0].strip() for name in next(csv.reader([header], skipinitialspace=True), [])]
    fields = [dict(zip(names, next(csv.reader([row], skipinitialspace=True)))) for row in rows]
    reasons = [f.get("clocks_event_reasons.active") or f.get("clocks_throttle_reasons.active") for f in fields]
    whole = gpu_readers.read_nvidia_smi(done_stdout) if code == 0 else {}
    fact = {"event": "capture", "phase": phase, "file": file, "command": command, "exit": code,
            "gpu": name, "rows": len(rows), "readings": [r.get(0, r) for r in per_row],
            "reasons": reasons, "read_whole": {str(k): v for k, v in whole.items()}}
    print(json.dumps(fact))
    return fact

def once(file, command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=15)
    return keep(file, command, done.stdout, done.stderr, done.returncode)

def said(fact):
    code, readings, reasons = fact["exit"], fact["readings"], fact["reasons"]
    if code != 0 or not readings:
        return "exit %s, nothing read" % code
    r = readings[-1]
    parts = ["%.1f %s" % (r[k], unit) for k, unit in (("power_w", "W"), ("utilization", "%"),
             ("clock_mhz", "MHz"), ("memory_gb", "GB")) if isinstance(r.get(k), (int, float))]
    if reasons and reasons[-1]:
        parts.append("reasons " + reasons[-1])
    if r.get("throttle"):
        parts.append("throttle " + r["throttle"])
    return ", ".join(parts)

with_throttle = once(f"nvidia_smi_{tag}_with_throttle_{phase}.csv",
                     [*base, "--query-gpu=" + query + "," + gpu_readers.NVIDIA_THROTTLE_FIELD])
without = once(f"nvidia_smi_{tag}_without_throttle_{phase}.csv", [*base, "--query-gpu=" + query])
command = series_command(series_fields)
if subprocess.run(command, capture_output=True, text=True, timeout=15).returncode != 0:
    # a driver before clocks_event_reasons: the old name of the same field
    command = series_command(series_fields[:-1] + ["clocks_throttle_reasons.active"])
file = f"nvidia_smi_{tag}_series_{phase}.csv"
if phase == "idle":
    series = once(file, command)
else:
    with open(os.path.join(folder, file + ".raw"), "w") as raw:
        loop = subprocess.Popen([*command, "-lms", "1000"], stdout=raw, stderr=subprocess.STDOUT, text=True)
        time.sleep(5.5)
        loop.terminate()
        loop.wait(timeout=10)
    text = open(os.path.join(folder, file + ".raw")).read()
    os.remove(os.path.join(folder, file + ".raw"))
    series = keep(file, command + ["-lms", "1000"], text, "", 0 if text.lstrip().startswith("timestamp") else 1)
rows = series["rows"]
print(f"SUMMARY nvidia-smi {phase} ({name}), the readers query: " + said(with_throttle))
print(f"SUMMARY nvidia-smi {phase}, without the throttle column: " + said(without))
print(f"SUMMARY nvidia-smi {phase}, series of {rows} row(s), last: " + said(series))
'

say "session: $(date -u +%FT%TZ) on $(hostname), budget $budget s, tiny=$tiny, python $python, data $data"

# --- 1: versions -------------------------------------------------------------------------------
VERSIONS='
import platform, sys
import torch, torchvision
print("python", sys.version.split()[0], platform.platform())
print("torch", torch.__version__)
print("torch.version.cuda", torch.version.cuda)
try:
    nccl = torch.cuda.nccl.version()
    nccl = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
except Exception as err:
    nccl = f"unavailable ({err})"
print("nccl", nccl)
print("cudnn", torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
print("torchvision", torchvision.__version__)
gpu = "none (torch.cuda.is_available() is False)"
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    gpu = torch.cuda.get_device_name(0)
    print("gpu", gpu, f"capability {p.major}.{p.minor}, {p.multi_processor_count} SMs, "
          f"{p.total_memory / 2**30:.1f} GiB, {torch.cuda.device_count()} visible")
else:
    print("gpu", gpu)
print(f"SUMMARY torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}, "
      f"torchvision {torchvision.__version__}, GPU {gpu}")
'
if [[ $parts == *" 1 "* ]] && begin 1 versions 60; then
    {
        echo '## nvidia-smi'
        limited 20 nvidia-smi 2>&1
        echo "## (exit $?)"
        echo '## nvidia-smi -q | head -60'
        limited 20 nvidia-smi -q 2>&1 | head -60
        echo "## $python"
        limited 45 "$python" -c "$VERSIONS" 2>&1
        echo "## (exit $?)"
    } > "$dir/versions.txt"
    cp "$dir/versions.txt" "$out/versions.txt"
    say "1 versions: $(grep -m1 '^SUMMARY ' "$dir/versions.txt" | sed 's/^SUMMARY //' || echo 'python failed')"
    smi=$(limited 20 nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm \
        --format=csv,noheader 2>&1 | head -1)
    say "1 versions: nvidia-smi name, driver, power limit, max SM clock: ${smi:-not read}"
    end_part
fi

# --- 2: the CIFAR-100 data paths against a bare loop --------------------------------------------
if [[ $tiny == 1 ]]; then
    path_args=(--device cpu --models resnet18 --batch-size 4 --epochs 2 --steps 2 --bare-steps 2
               --workers 1 --interval 0.5)
else
    # 2 epochs of 16 steps (epoch 2 timed) after the program's 10 warm-up steps; about 150 s in
    # all on an H200, most of it the 8 processes' start and the loader path's 4 workers
    path_args=(--device gpu --batch-size 256 --epochs 2 --steps 16 --bare-steps 32 --workers 4
               --interval 0.25)
fi
if [[ $parts == *" 2 "* ]] && begin 2 data-path 200; then
    limited 0 "$python" -u bench/cifar_data_path.py --data-dir "$data" "${path_args[@]}" \
        > "$out/cifar-data-path.txt" 2> "$dir/cifar-data-path.err"
    rc=$?
    cp "$out/cifar-data-path.txt" "$dir/"
    say "2 data-path: $(status_word $rc); $(head -1 "$out/cifar-data-path.txt")"
    [[ $rc == 0 ]] || say "2 data-path: $(grep -v '^\s*$' "$dir/cifar-data-path.err" | tail -1 | cut -c1-300)"
    while IFS='|' read -r _ model precision path rate busy share loader _; do
        busy=${busy// /} loader=${loader// /}
        say "2 data-path ${model// /} ${precision// /} ${path// /}: ${rate// /} images/s," \
            "GPU busy ${busy:-n/a} %, ${share// /} of bare, loader alone ${loader:-n/a} images/s"
    done < <(grep -E '^\| resnet' "$out/cifar-data-path.txt")
    end_part
fi

# --- 3: telemetry: nvidia-smi's fields, captures idle and under training, the probe -------------
if [[ $tiny == 1 ]]; then
    train_args=(--device cpu --model resnet18 --batch-size 4 --steps 2 --warmup-steps 1)
    steady_wait=60
else
    train_args=(--device gpu --model resnet50 --batch-size 256 --steps 30 --warmup-steps 10)
    steady_wait=45
fi
if [[ $parts == *" 3 "* ]] && begin 3 telemetry 100; then
    {
        limited 15 nvidia-smi --version
        echo "## nvidia-smi --help-query-gpu, the clock-event reasons"
        limited 15 nvidia-smi --help-query-gpu | grep -i -B1 -A4 -E 'reasons'
    } > "$dir/nvidia-smi-fields.txt" 2>&1
    limited 15 nvidia-smi --help-query-gpu > "$dir/nvidia-smi-help-query-gpu.txt" 2>&1
    names=$(grep -o -E 'clocks_(event|throttle)_reasons\.active' "$dir/nvidia-smi-help-query-gpu.txt" \
        | sort -u | tr '\n' ' ')
    say "3 telemetry: nvidia-smi --help-query-gpu names: ${names:-neither clocks_event_reasons.active nor clocks_throttle_reasons.active}"

    limited 30 "$python" -c "$CAPTURE" idle "$dir/nvidia-smi" > "$dir/capture-idle.jsonl" 2>&1
    say "3 telemetry capture idle: $(status_word $?)"
    grep '^SUMMARY ' "$dir/capture-idle.jsonl" | sed 's/^SUMMARY /3 telemetry /' | while read -r line; do say "$line"; done

    # the CIFAR-100 program trains (device path, one GPU) until killed; captured in its steady state
    left=$(( part_end - SECONDS ))
    (( left > 5 )) || left=5
    timeout -k 5 "$left" "$python" -u src/pytorch/cifar/train_cifar100.py --mode single --data device \
        --data-dir "$data" "${train_args[@]}" --epochs 100000 --solo-steps 0 --loader-steps 0 \
        > "$dir/capture-training-program.out" 2> "$dir/capture-training-program.err" &
    trainer=$!
    waited=0
    until grep -q '"event": "summary"' "$dir/capture-training-program.out" 2>/dev/null \
            || ! kill -0 "$trainer" 2>/dev/null || (( waited >= steady_wait * 2 )); do
        sleep 0.5
        waited=$(( waited + 1 ))
    done
    if kill -0 "$trainer" 2>/dev/null; then
        say "3 telemetry: the training program reached its first epoch's end after $(( waited / 2 )) s"
        limited 40 "$python" -c "$CAPTURE" training "$dir/nvidia-smi" > "$dir/capture-training.jsonl" 2>&1
        say "3 telemetry capture training: $(status_word $?)"
        grep '^SUMMARY ' "$dir/capture-training.jsonl" | sed 's/^SUMMARY /3 telemetry /' | while read -r line; do say "$line"; done
        kill -TERM "$trainer" 2>/dev/null
    else
        say "3 telemetry: the training program ended before its first epoch ended:" \
            "$(tail -1 "$dir/capture-training-program.err" | cut -c1-200)"
    fi
    wait "$trainer" 2>/dev/null
    say "3 telemetry: training program $(grep -c '"event": "summary"' "$dir/capture-training-program.out") epoch(s):" \
        "$(grep '"event": "summary"' "$dir/capture-training-program.out" | tail -1 | grep -o '"samples_per_s": [0-9.]*' || true)"

    limited 60 "$python" -u bench/gpu_telemetry_probe.py "$dir/probe" > "$dir/telemetry-probe.jsonl" \
        2> "$dir/telemetry-probe.err"
    rc=$?
    say "3 telemetry probe: $(status_word $rc)$( (( rc == 0 )) || echo ": $(grep -v '^\s*$' "$dir/telemetry-probe.err" | tail -1 | cut -c1-200)")"
    "$python" -c "$FIGURES" probe "$dir/telemetry-probe.jsonl" 2>&1 | while read -r line; do say "3 telemetry $line"; done
    end_part
fi

# --- 4: the programs, one rank each as srun would start them ----------------------------------
# as_rank0 NAME CAP PROGRAM ARGS...: through rank-env.sh as task 0 of a one-task step; stdout and
# stderr labelled "0: " into $dir/NAME.out and .err
as_rank0() {
    local name=$1 cap=$2 rc
    shift 2
    limited "$cap" env SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=1 SLURM_JOB_ID=0 \
        MLCHECK_VISIBLE_DEVICES_VARS=CUDA_VISIBLE_DEVICES NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
        TORCH_NCCL_ASYNC_ERROR_HANDLING=1 \
        sh "$repo/src/launch/rank-env.sh" "$python" -u "$@" > "$dir/$name.raw-out" 2> "$dir/$name.raw-err"
    rc=$?
    sed 's/^/0: /' "$dir/$name.raw-out" > "$dir/$name.out" && rm -f "$dir/$name.raw-out"
    sed 's/^/0: /' "$dir/$name.raw-err" > "$dir/$name.err" && rm -f "$dir/$name.raw-err"
    echo "$rc" > "$dir/$name.status"
    say "4 programs $name: $(status_word $rc); $("$python" -c "$FIGURES" program "$dir/$name.out" 2>&1 | tail -1)"
}
if [[ $tiny == 1 ]]; then
    mnist_args=(--device cpu --epochs 2)
    cifar_args=(--device cpu --model resnet18 --batch-size 4 --epochs 2 --steps 2 --warmup-steps 1
                --workers 0)
    max_bytes=$(( 1 << 16 ))
else
    mnist_args=(--device gpu --epochs 3)
    cifar_args=(--device gpu --model resnet152 --batch-size 128 --epochs 2 --steps 30 --warmup-steps 10
                --workers 4)
    max_bytes=$(( 256 << 20 ))
fi
if [[ $parts == *" 4 "* ]] && begin 4 programs 120; then
    as_rank0 mnist 45 src/pytorch/mnist/mnist_DDP.py --data-dir "$data" "${mnist_args[@]}" \
        --profile-steps 3 --trace-dir "$dir/traces"
    as_rank0 cifar100_single 45 src/pytorch/cifar/train_cifar100.py --mode single --data-dir "$data" \
        "${cifar_args[@]}"
    as_rank0 cifar100_dp 45 src/pytorch/cifar/train_cifar100.py --mode dp --data-dir "$data" \
        "${cifar_args[@]}"
    as_rank0 collectives 45 src/pytorch/comm/collectives.py --device "$device" --max-bytes "$max_bytes"
    end_part
fi

# --- 5: an A=A control of the A/B rule -----------------------------------------------------------
if [[ $tiny == 1 ]]; then
    ab_args=(--device cpu --model resnet18 --batch-size 8 --steps 3 --warmup-steps 1)
else
    ab_args=(--device gpu --model resnet50 --batch-size 256 --epochs 2 --steps 30)
fi
if [[ $parts == *" 5 "* ]] && begin 5 ab-control 240; then
    limited 0 "$python" -u bench/gpu_ab_control.py --data-dir "$data" --out "$dir/runs" \
        --python "$python" --rounds "$ab_rounds" --ceiling 0.1 --threshold 0.05 \
        --deadline $(( part_end - SECONDS - 3 )) "${ab_args[@]}" \
        > "$out/ab-control.txt" 2> "$dir/ab-control.err"
    rc=$?
    cp "$out/ab-control.txt" "$dir/"
    say "5 ab-control: $(status_word $rc)"
    grep -E '^(round [0-9]+ [AB]:|stopped|ratios|A=A control|verdict)' "$out/ab-control.txt" \
        | while read -r line; do say "5 ab-control $line"; done
    end_part
fi

# --- 6: what time is left: CIFAR-100 in its default mode (ddp, one rank), as part 4 ran the others
if [[ $parts == *" 6 "* ]] && begin 6 extra 60; then
    as_rank0 cifar100_ddp 45 src/pytorch/cifar/train_cifar100.py --data-dir "$data" "${cifar_args[@]}"
    end_part
fi

say "session: ended after $SECONDS s"
pack
[[ -n ${GPU_SESSION_WORK:-} ]] || rm -rf "$work"
