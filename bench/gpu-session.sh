#!/usr/bin/env bash
# One session on a lent GPU machine (one GPU, no Slurm, no network): what the project needs
# measured on a real GPU (issue 52), most important first, each part under its own time limit
# inside one budget (GPU_SESSION_BUDGET seconds, default 450), so that a session cut short keeps
# the first parts' results:
#   1 versions    nvidia-smi, nvidia-smi -q (head), torch/CUDA/NCCL/cuDNN/torchvision/pynvml versions
#   2 data-path   bench/cifar_data_path.py, in one process: CIFAR-100's device path, loader path and
#                 a bare loop, ResNet-152 and -50 at batch 256 then 128, fp32 and bf16+channels_last,
#                 then ResNet-18; the least busy device row profiled again (bench/gpu_trace.py)
#   3 harness     bench/harness_overhead.py: the program's train_steps against a bare loop,
#                 ResNet-50 and -18 at batch 256, alternating rounds
#   4 telemetry   nvidia-smi's field help; bench/gpu_capture.py idle and while the CIFAR-100
#                 program trains (nvidia-smi CSV in the sampler's commands and as a series,
#                 nvidia-smi -q, NVML's raw answers: fixtures for tests/data/telemetry), beside
#                 that run's own sampler fact; bench/gpu_telemetry_probe.py
#   5 programs    MNIST DDP (NCCL, one rank, profiled 3 steps), CIFAR-100 --mode single and dp;
#                 each one rank through src/launch/rank-env.sh, stdout and stderr labelled "0: "
#                 as srun --label labels task 0, so the project's own parser reads them
#   6 ab-control  bench/gpu_ab_control.py: an A=A control of mlcheck.ab.rule, fresh processes,
#                 GPU_SESSION_AB_ROUNDS rounds A B / B A
#   7 extra       if time is left: CIFAR-100 --mode ddp as part 5 runs the programs, collectives.py
# and, for a second session (GPU_SESSION_PARTS="8 9 10"):
#   8 cuda-graph  bench/cuda_graph_step.py: the bare step launched eagerly against the same step
#                 captured whole as a CUDA graph, ResNet-50 and -152 at batch 256, both precisions
#   9 sampler     the sampler's own time in part 4's training run, with host memory read at most
#                 1/HOST_BUDGET of the time (src/pytorch/telemetry.py), then the same run with it
#                 read at every sample as before (HOST_BUDGET = 0), in fresh processes
#  10 ab-pinned   part 6's A=A control with each run pinned to cores GPU_SESSION_PIN (taskset)
#
#   bench/gpu-session.sh DATA_DIR OUT_DIR      (DATA_DIR: staged MNIST/ and cifar-100-python/)
#
# OUT_DIR gets at most 9 files, each as soon as its part ends: summary.txt (one line per figure,
# appended as it comes), versions.txt, cifar-data-path.txt, harness.txt, ab-control.txt,
# cuda-graph.txt, sampler.txt, ab-pinned.txt and
# details.tar.gz (details/<part>/: every part's files; made again after each part, so it always
# holds the parts that ended). Environment: PYTHON (python3); GPU_SESSION_PARTS (some of
# "1 2 3 4 5 6 7"); GPU_SESSION_BUDGET (seconds); GPU_SESSION_TINY=1: tiny models, batches and
# steps on the CPU, to test the plumbing where there is no GPU (the nvidia-smi parts then say why
# they read nothing); GPU_SESSION_CAP_SCALE (every part's and command's own limit times this;
# 6 in the tiny mode, else 1); GPU_SESSION_AB_ROUNDS (5); GPU_SESSION_PIN (cores of part 10, 2-5);
# GPU_SESSION_WORK (where details/ is kept;
# default a new temp dir). Nothing here needs the project's venv: the project's modules are
# imported from this checkout by path, under the machine's own python3 and torch.
set -uo pipefail
data=${1:?usage: bench/gpu-session.sh DATA_DIR OUT_DIR}
out=${2:?usage: bench/gpu-session.sh DATA_DIR OUT_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
tiny=${GPU_SESSION_TINY:-0}
budget=${GPU_SESSION_BUDGET:-450}
parts=" ${GPU_SESSION_PARTS:-1 2 3 4 5 6 7} "
ab_rounds=${GPU_SESSION_AB_ROUNDS:-5}
reserve=8           # seconds kept at the end of the budget for the last tarball
# every part's and command's own limit times this: a slow shared CPU runs the tiny mode for minutes
cap_scale=${GPU_SESSION_CAP_SCALE:-$( [[ $tiny == 1 ]] && echo 6 || echo 1 )}
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
    part_end=$(( SECONDS + $3 * cap_scale ))
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
    local cap=$(( $1 * cap_scale )) left=$(( part_end - SECONDS ))
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
    run = output.parse(text, stderr=stderr, labelled=text.startswith("0: "))
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

# the sampler of one program run (unlabelled output) against its timed seconds, and against the
# nvidia-smi series captured during it: SAMPLER_COST OUT CAPTURES_DIR
SAMPLER_COST='
import glob, statistics, sys
sys.path[:0] = [".", "src/pytorch"]
from mlcheck.judging import output
import gpu_readers

run = output.parse(open(sys.argv[1], errors="replace").read(), labelled=False)
fact = run.by_rank("telemetry").get(0)
epochs = run.rank_events("epoch", 0)
if not fact or not epochs:
    print("sampler: no telemetry or epoch facts in " + sys.argv[1])
    sys.exit(0)
timed = sum(e["seconds"] for e in epochs)
steps = sum(e["steps"] for e in epochs)
samples, spent = fact.get("gpu_samples") or 0, fact.get("sampling_seconds") or 0
interval = fact.get("telemetry_interval")
print(f"sampler: {samples} samples every {interval} s over {timed:.2f} s of "
      f"{steps} timed steps ({1e3 * timed / steps:.2f} ms a step); its own time {1e3 * spent:.1f} ms, "
      f"{100 * spent / timed:.3f} % of the timed seconds, {1e3 * spent / max(samples, 1):.2f} ms a sample")
print("sampler figures: " + ", ".join(f"{k} {fact[k]:.1f}" if isinstance(fact.get(k), float) else f"{k} {fact.get(k)}"
      for k in ("gpu_source", "power_w", "utilization", "clock_mhz", "min_clock_mhz", "gpu_memory_gb",
                "temperature_c", "throttle", "throttle_not_checked") if k in fact))
for path in glob.glob(sys.argv[2] + "/nvidia_smi_*_series_training.csv"):
    lines = open(path).read().strip().splitlines()
    rows = [gpu_readers.read_nvidia_smi(lines[0] + "\n" + row).get(0, {}) for row in lines[1:] if row != lines[0]]
    means = {k: statistics.fmean(r[k] for r in rows if k in r) for k in ("power_w", "utilization", "clock_mhz")
             if any(k in r for r in rows)}
    print(f"nvidia-smi series during the run, mean of {len(rows)} rows: "
          + ", ".join(f"{k} {v:.1f}" for k, v in means.items()))
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
try:
    import pynvml
    from importlib.metadata import version
    print("nvidia-ml-py", version("nvidia-ml-py"))
except Exception as err:
    print("nvidia-ml-py unavailable", err)
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

# --- 2: the CIFAR-100 data paths against a bare loop, in one process --------------------------
if [[ $tiny == 1 ]]; then
    path_args=(--device cpu --models resnet18 --later-models --batch-sizes 4 --epoch-seconds 0.3
               --workers 1 --interval 0.5 --matmul-size 256 --profile-steps 2)
else
    path_args=(--device gpu --epoch-seconds 1.0 --workers 4 --interval 0.5 --profile-steps 5)
fi
if [[ $parts == *" 2 "* ]] && begin 2 data-path 150; then
    limited 0 "$python" -u bench/cifar_data_path.py --data-dir "$data" "${path_args[@]}" \
        --deadline $(( part_end - SECONDS - 4 )) --json "$dir/rows.jsonl" --trace-dir "$dir/traces" \
        > "$out/cifar-data-path.txt" 2> "$dir/cifar-data-path.err"
    rc=$?
    cp "$out/cifar-data-path.txt" "$dir/"
    say "2 data-path: $(status_word $rc); $(head -1 "$out/cifar-data-path.txt")"
    [[ $rc == 0 ]] || say "2 data-path: $(grep -v '^\s*$' "$dir/cifar-data-path.err" | tail -1 | cut -c1-300)"
    grep -E '^(matrix product|\| [0-9])' "$out/cifar-data-path.txt" | while read -r line; do say "2 data-path $line"; done
    grep -E '^trace of|^no trace' "$out/cifar-data-path.txt" | cut -c1-600 | while read -r line; do say "2 data-path $line"; done
    end_part
fi

# --- 3: the benchmark's loop against a bare loop, alternating rounds --------------------------
if [[ $tiny == 1 ]]; then
    harness_args=(--device cpu --model resnet18 --batch-size 4 --steps 2 --rounds 3 --matmul-size 256)
else
    harness_args=(--device gpu --model resnet50 resnet18 --batch-size 256 --steps 20 --rounds 11
                  --matmul-size 8192)
fi
if [[ $parts == *" 3 "* ]] && begin 3 harness 35; then
    limited 0 "$python" -u bench/harness_overhead.py "${harness_args[@]}" > "$out/harness.txt" \
        2> "$dir/harness.err"
    rc=$?
    cp "$out/harness.txt" "$dir/"
    say "3 harness: $(status_word $rc)"
    [[ $rc == 0 ]] || say "3 harness: $(grep -v '^\s*$' "$dir/harness.err" | tail -1 | cut -c1-300)"
    grep -E 'matrix multiply|median|harness / bare' "$out/harness.txt" | while read -r line; do say "3 harness $line"; done
    end_part
fi

# --- 4: telemetry: nvidia-smi's fields, captures idle and under training, the probe -------------
if [[ $tiny == 1 ]]; then
    train_args=(--device cpu --model resnet18 --batch-size 4 --epochs 3 --steps 2 --warmup-steps 1)
else
    # about 12 s of timed epochs at the check's sampling interval (1 s); the capture runs during them
    train_args=(--device gpu --model resnet50 --batch-size 256 --epochs 8 --steps 80 --warmup-steps 10)
fi
if [[ $parts == *" 4 "* ]] && begin 4 telemetry 75; then
    {
        limited 15 nvidia-smi --version
        echo "## nvidia-smi --help-query-gpu, the clock-event reasons"
        limited 15 nvidia-smi --help-query-gpu | grep -i -B1 -A4 -E 'reasons'
    } > "$dir/nvidia-smi-fields.txt" 2>&1
    limited 15 nvidia-smi --help-query-gpu > "$dir/nvidia-smi-help-query-gpu.txt" 2>&1
    names=$(grep -o -E 'clocks_(event|throttle)_reasons\.active' "$dir/nvidia-smi-help-query-gpu.txt" \
        | sort -u | tr '\n' ' ')
    say "4 telemetry: nvidia-smi --help-query-gpu names: ${names:-neither clocks_event_reasons.active nor clocks_throttle_reasons.active}"

    limited 30 "$python" bench/gpu_capture.py idle "$dir/captures" > "$dir/capture-idle.jsonl" 2>&1
    say "4 telemetry capture idle: $(status_word $?)"
    grep '^SUMMARY ' "$dir/capture-idle.jsonl" | sed 's/^SUMMARY /4 telemetry /' | while read -r line; do say "$line"; done

    # the CIFAR-100 program trains (device path, one GPU) with its sampler at the check's default
    # interval; the tools are captured in its steady state, beside its own telemetry fact
    left=$(( part_end - SECONDS - 30 * cap_scale ))
    (( left > 5 )) || left=5
    timeout -k 5 "$left" "$python" -u src/pytorch/cifar/train_cifar100.py --mode single --data device \
        --data-dir "$data" "${train_args[@]}" --solo-steps 0 --loader-steps 0 --telemetry-interval 1 \
        > "$dir/telemetry-run.out" 2> "$dir/telemetry-run.err" &
    trainer=$!
    waited=0
    until grep -q '"event": "summary"' "$dir/telemetry-run.out" 2>/dev/null \
            || ! kill -0 "$trainer" 2>/dev/null || (( waited >= 120 * cap_scale )); do
        sleep 0.5
        waited=$(( waited + 1 ))
    done
    if kill -0 "$trainer" 2>/dev/null; then
        say "4 telemetry: the training program ended its first epoch after $(( waited / 2 )) s; capturing"
        limited 20 "$python" bench/gpu_capture.py training "$dir/captures" --series-seconds 5 \
            > "$dir/capture-training.jsonl" 2>&1
        say "4 telemetry capture training: $(status_word $?)"
        grep '^SUMMARY ' "$dir/capture-training.jsonl" | sed 's/^SUMMARY /4 telemetry /' | while read -r line; do say "$line"; done
    else
        say "4 telemetry: the training program ended before its first epoch ended:" \
            "$(tail -1 "$dir/telemetry-run.err" | cut -c1-200)"
    fi
    wait "$trainer"
    say "4 telemetry: training program $(status_word $?); $("$python" -c "$FIGURES" program "$dir/telemetry-run.out" 2>&1 | tail -1)"
    "$python" -c "$SAMPLER_COST" "$dir/telemetry-run.out" "$dir/captures" 2>&1 | while read -r line; do say "4 telemetry $line"; done

    limited 60 "$python" -u bench/gpu_telemetry_probe.py "$dir/probe" > "$dir/telemetry-probe.jsonl" \
        2> "$dir/telemetry-probe.err"
    rc=$?
    say "4 telemetry probe: $(status_word $rc)$( (( rc == 0 )) || echo ": $(grep -v '^\s*$' "$dir/telemetry-probe.err" | tail -1 | cut -c1-200)")"
    "$python" -c "$FIGURES" probe "$dir/telemetry-probe.jsonl" 2>&1 | while read -r line; do say "4 telemetry $line"; done
    end_part
fi

# --- 5: the programs, one rank each as srun would start them ----------------------------------
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
    say "$part_label $name: $(status_word $rc); $("$python" -c "$FIGURES" program "$dir/$name.out" 2>&1 | tail -1)"
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
if [[ $parts == *" 5 "* ]] && begin 5 programs 70; then
    as_rank0 mnist 30 src/pytorch/mnist/mnist_DDP.py --data-dir "$data" "${mnist_args[@]}" \
        --profile-steps 3 --trace-dir "$dir/traces"
    as_rank0 cifar100_single 30 src/pytorch/cifar/train_cifar100.py --mode single --data-dir "$data" \
        "${cifar_args[@]}"
    as_rank0 cifar100_dp 30 src/pytorch/cifar/train_cifar100.py --mode dp --data-dir "$data" \
        "${cifar_args[@]}"
    end_part
fi

# --- 6: an A=A control of the A/B rule -----------------------------------------------------------
if [[ $tiny == 1 ]]; then
    ab_args=(--device cpu --model resnet18 --batch-size 8 --steps 3 --warmup-steps 1)
else
    ab_args=(--device gpu --model resnet50 --batch-size 256 --epochs 2 --steps 60)
fi
if [[ $parts == *" 6 "* ]] && begin 6 ab-control 240; then
    limited 0 "$python" -u bench/gpu_ab_control.py --data-dir "$data" --out "$dir/runs" \
        --python "$python" --rounds "$ab_rounds" --ceiling 0.1 --threshold 0.05 \
        --deadline $(( part_end - SECONDS - 3 )) "${ab_args[@]}" \
        > "$out/ab-control.txt" 2> "$dir/ab-control.err"
    rc=$?
    cp "$out/ab-control.txt" "$dir/"
    say "6 ab-control: $(status_word $rc)"
    grep -E '^(round [0-9]+ [AB]:|stopped|ratios|A=A control|verdict)' "$out/ab-control.txt" \
        | while read -r line; do say "6 ab-control $line"; done
    end_part
fi

# --- 7: what time is left: CIFAR-100 in its default mode (ddp, one rank), as part 5 ran the others,
# and the interconnect program on the one GPU
if [[ $parts == *" 7 "* ]] && begin 7 extra 60; then
    as_rank0 cifar100_ddp 30 src/pytorch/cifar/train_cifar100.py --data-dir "$data" "${cifar_args[@]}"
    as_rank0 collectives 25 src/pytorch/comm/collectives.py --device "$device" --max-bytes "$max_bytes"
    end_part
fi

# --- 8: the bare step eagerly against the same step as one CUDA graph ----------------------------
if [[ $tiny == 1 ]]; then
    graph_args=(--device cpu --models resnet18 --batch-size 4 --seconds 0.3)
else
    graph_args=(--device gpu --models resnet50 resnet152 --batch-size 256 --seconds 1.5 --interval 0.25)
fi
if [[ $parts == *" 8 "* ]] && begin 8 cuda-graph 80; then
    limited 0 "$python" -u bench/cuda_graph_step.py "${graph_args[@]}" --deadline $(( part_end - SECONDS - 4 )) \
        --json "$dir/rows.jsonl" > "$out/cuda-graph.txt" 2> "$dir/cuda-graph.err"
    rc=$?
    cp "$out/cuda-graph.txt" "$dir/"
    say "8 cuda-graph: $(status_word $rc); $(head -1 "$out/cuda-graph.txt")"
    [[ $rc == 0 ]] || say "8 cuda-graph: $(grep -v '^\s*$' "$dir/cuda-graph.err" | tail -1 | cut -c1-300)"
    grep -E '^\| resnet' "$out/cuda-graph.txt" | while read -r line; do say "8 cuda-graph $line"; done
    end_part
fi

# --- 9: the sampler's own time, host memory read by its budget, then at every sample -------------
# the old behaviour, HOST_BUDGET = 0, set on the module before the program imports it
EVERY_SAMPLE='
import runpy, sys
sys.path.insert(0, "src/pytorch")
import telemetry
telemetry.HOST_BUDGET = 0
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
'
if [[ $parts == *" 9 "* ]] && begin 9 sampler 85; then
    program=(src/pytorch/cifar/train_cifar100.py --mode single --data device --data-dir "$data"
             "${train_args[@]}" --solo-steps 0 --loader-steps 0 --telemetry-interval 1)
    : > "$out/sampler.txt"
    for arm in budget every-sample; do
        if [[ $arm == budget ]]; then
            limited 40 "$python" -u "${program[@]}" > "$dir/$arm.out" 2> "$dir/$arm.err"
        else
            limited 40 "$python" -u -c "$EVERY_SAMPLE" "${program[@]}" > "$dir/$arm.out" 2> "$dir/$arm.err"
        fi
        rc=$?
        {
            echo "## host memory read $( [[ $arm == budget ]] && echo 'by its budget (HOST_BUDGET 200)' || echo 'at every sample (HOST_BUDGET 0)'): $(status_word $rc)"
            "$python" -c "$SAMPLER_COST" "$dir/$arm.out" "$dir/none" 2>&1
            grep '"event": "telemetry"' "$dir/$arm.out" | cut -c1-600
        } >> "$out/sampler.txt"
        [[ $rc == 0 ]] || tail -3 "$dir/$arm.err" >> "$out/sampler.txt"
    done
    cp "$out/sampler.txt" "$dir/"
    grep -E '^(## |sampler: )' "$out/sampler.txt" | while read -r line; do say "9 sampler $line"; done
    end_part
fi

# --- 10: part 6's A=A control, each run pinned to cores -------------------------------------------
if [[ $parts == *" 10 "* ]] && ! command -v taskset > /dev/null; then
    say "10 ab-pinned: skipped, no taskset on this machine"
elif [[ $parts == *" 10 "* ]] && begin 10 ab-pinned 240; then
    limited 0 "$python" -u bench/gpu_ab_control.py --data-dir "$data" --out "$dir/runs" \
        --python "$python" --rounds "$ab_rounds" --ceiling 0.1 --threshold 0.05 \
        --taskset "${GPU_SESSION_PIN:-2-5}" --deadline $(( part_end - SECONDS - 3 )) "${ab_args[@]}" \
        > "$out/ab-pinned.txt" 2> "$dir/ab-pinned.err"
    rc=$?
    cp "$out/ab-pinned.txt" "$dir/"
    say "10 ab-pinned: $(status_word $rc)"
    [[ $rc == 0 ]] || say "10 ab-pinned: $(grep -v '^\s*$' "$dir/ab-pinned.err" | tail -1 | cut -c1-300)"
    grep -E '^(command|round [0-9]+ [AB]:|stopped|ratios|A=A control|verdict)' "$out/ab-pinned.txt" \
        | while read -r line; do say "10 ab-pinned $line"; done
    end_part
fi

say "session: ended after $SECONDS s"
pack
[[ -n ${GPU_SESSION_WORK:-} ]] || rm -rf "$work"
