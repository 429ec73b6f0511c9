#!/usr/bin/env bash
# The GPU code paths on one GPU of a node without Slurm: both training programs and the
# interconnect program as one rank (NCCL backend, NCCL_DEBUG=INFO, through src/launch/rank-env.sh
# as srun would start them), the CIFAR-100 benchmark in fp32, with --amp, --channels-last and both,
# the harness against a bare loop, and the GPU's telemetry read every way the sampler can
# (bench/gpu_telemetry_probe.py). GPU_PATH_PARTS picks some of "programs precision harness
# telemetry" (default: all).
# Each program's stdout and stderr are labelled "0: " as `srun --label` labels task 0, so the
# project's own sanity code reads them as it reads a job's output.
#
#   bench/gpu-path.sh DATA_DIR OUT_DIR      (DATA_DIR: staged MNIST/ and cifar-100-python/)
set -uo pipefail
data=${1:?usage: bench/gpu-path.sh DATA_DIR OUT_DIR}
out=${2:?usage: bench/gpu-path.sh DATA_DIR OUT_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
parts=" ${GPU_PATH_PARTS:-programs precision harness telemetry} "
mkdir -p "$out"
export PYTHONUNBUFFERED=1

# one rank, as Slurm would describe task 0 of a one-task step
as_rank0() {
    local name=$1; shift
    env SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=1 SLURM_JOB_ID=0 \
        MLCHECK_VISIBLE_DEVICES_VARS=CUDA_VISIBLE_DEVICES NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
        TORCH_NCCL_ASYNC_ERROR_HANDLING=1 \
        sh "$repo/src/launch/rank-env.sh" "$python" -u "$@" \
        > >(sed 's/^/0: /' > "$out/$name.out") 2> >(sed 's/^/0: /' > "$out/$name.err")
    local rc=$?
    wait
    echo "$name: exit $rc"
}

cd "$repo" || exit
if [[ $parts == *" programs "* ]]; then
    as_rank0 mnist src/pytorch/mnist/mnist_DDP.py --data-dir "$data" --epochs 3 \
        --profile-steps 3 --trace-dir "$out/traces"
    as_rank0 cifar100 src/pytorch/cifar/train_cifar100.py --data-dir "$data" --model resnet152 \
        --batch-size 128 --epochs 3 --warmup-steps 10 --workers 4
    as_rank0 collectives src/pytorch/comm/collectives.py --max-bytes $((1 << 30))
fi

# fp32 against bf16 autocast and channels-last, alone and together: same model, batch and steps,
# synthetic data (no loader)
if [[ $parts == *" precision "* ]]; then
    for batch in 256 1024; do
        for variant in fp32 amp channels-last amp+channels-last; do
            extra=()
            case $variant in *amp*) extra+=(--amp);; esac
            case $variant in *channels-last*) extra+=(--channels-last);; esac
            printf '%s batch %s: ' "$variant" "$batch"
            "$python" -u src/pytorch/cifar/train_cifar100.py --synthetic --mode single --model resnet152 \
                --batch-size "$batch" --epochs 3 --steps 30 --warmup-steps 10 --workers 0 "${extra[@]}" \
                2>&1 | grep '"event": "result"' | head -1
        done
    done > "$out/cifar100-precision.txt"
fi

if [[ $parts == *" harness "* ]]; then
    for model in resnet18 resnet50; do
        "$python" -u bench/harness_overhead.py --device gpu --model "$model" --batch-size 128 \
            --steps 20 --rounds 11 --matmul-size 8192
    done 2>&1 | tee "$out/harness.txt"
fi

if [[ $parts == *" telemetry "* ]]; then
    { nvidia-smi --version; nvidia-smi --help-query-gpu | grep -i -A3 'reasons.active'; } \
        > "$out/nvidia-smi-fields.txt" 2>&1
    "$python" -u bench/gpu_telemetry_probe.py "$out/telemetry" > "$out/telemetry-probe.jsonl"
    echo "telemetry probe: exit $?"
fi
