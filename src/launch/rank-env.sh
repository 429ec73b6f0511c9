#!/bin/sh
# Per-rank environment for torch.distributed, then exec the given command.
# srun starts one copy per task, inside the container where there is one. Job-wide values
# (MASTER_ADDR, MASTER_PORT, NCCL_*, MLCHECK_*) are exported by the job script; what differs
# per rank is derived here from the variables Slurm gives each task.
#   MLCHECK_VISIBLE_DEVICES_VARS  names of the variables that select this rank's one GPU
#   MLCHECK_GPUS_PER_TASK         if above 1, each rank drives that many GPUs (DataParallel)
#   MLCHECK_MIOPEN_CACHE_ROOT     if set, MIOpen caches go to a private directory below it
#   MLCHECK_RANK_PRELUDE          site shell code run first (e.g. activate the image's Python)
set -eu

die() { echo "rank-env.sh: error: $*" >&2; exit 1; }

[ -n "${SLURM_PROCID:-}" ] || die "SLURM_PROCID is not set: start this under srun"

# The prelude is site code written for a user's shell (e.g. conda's activate, which reads unset
# variables such as PS1): run it as such a shell would, without errexit and nounset, and with
# bash's `source` also where /bin/sh is dash. Only its final status counts.
if [ -n "${MLCHECK_RANK_PRELUDE:-}" ]; then
    command -v source >/dev/null 2>&1 || source() { _mlcheck_file=$1; shift; . "$_mlcheck_file"; }
    set +eu
    eval "$MLCHECK_RANK_PRELUDE"
    status=$?
    set -eu
    [ "$status" -eq 0 ] || die "the site's rank_prelude failed with exit status $status"
fi

export RANK="$SLURM_PROCID"
export LOCAL_RANK="$SLURM_LOCALID"
export WORLD_SIZE="$SLURM_NTASKS"

# one GPU per rank: local task i drives GPU i, the one its CPU mask was derived for; with
# n GPUs per task, task i drives GPUs i*n..i*n+n-1, whose cores its mask covers
per_task=${MLCHECK_GPUS_PER_TASK:-1}
gpus=$((SLURM_LOCALID * per_task))
i=1
while [ "$i" -lt "$per_task" ]; do
    gpus="$gpus,$((SLURM_LOCALID * per_task + i))"
    i=$((i + 1))
done
for var in ${MLCHECK_VISIBLE_DEVICES_VARS:-}; do
    export "$var=$gpus"
done

# MIOpen must not keep its databases on a shared file system; the directory is private to this
# user, job and node, so concurrent jobs and other users never share or pre-create it
if [ -n "${MLCHECK_MIOPEN_CACHE_ROOT:-}" ]; then
    cache="$MLCHECK_MIOPEN_CACHE_ROOT/miopen-uid$(id -u)-job${SLURM_JOB_ID:-0}-node${SLURM_NODEID:-0}"
    mkdir -p -m 700 "$cache" 2>/dev/null || true
    [ -d "$cache" ] && [ ! -L "$cache" ] && [ -O "$cache" ] \
        || die "MIOpen cache $cache is missing, a link or not owned by $(id -u)"
    chmod 700 "$cache"
    export MIOPEN_USER_DB_PATH="$cache" MIOPEN_CUSTOM_CACHE_DIR="$cache"
fi

[ $# -gt 0 ] || die "no command given"
exec "$@"
