#!/usr/bin/env bash
# Converts a model directory on a Slurm cluster (docs/CHECKPOINTS.md "Scale-out"): a job array whose
# task I of N runs `lofp convert IN OUT --shard I/N OPTIONS`, and one merge job, started only once
# every task of the array has succeeded (--dependency=afterok), that runs
# `lofp convert --merge-index IN OUT OPTIONS`. IN and OUT must be on a file system every node sees.
#
#   slurm_convert.sh [--tasks LIST] [--cpus C] [--local] IN OUT N [lofp convert options...]
#
#   N            number of array tasks (slices); 1 <= N <= the number of shard files of IN
#   --tasks LIST submit only these array indices (sbatch --array syntax: 3, 2,5, 1-4) and a merge
#                that waits for them: re-runs the tasks that failed or were killed
#   --cpus C     --cpus-per-task=C for every job and `--threads C` for lofp (default 1)
#   --local      no Slurm: run the same task and merge commands one after another on this machine
#                (SLURM_ARRAY_TASK_ID set as Slurm would), stopping at the first failure
#
# Prints "array JOBID" and "merge JOBID". Each job's log is sbatch's default (slurm-%A_%a.out in the
# submitting directory) unless SBATCH_OUTPUT says otherwise; every other sbatch setting comes from
# sbatch's own variables (SBATCH_PARTITION, SBATCH_TIMELIMIT, SBATCH_ACCOUNT, SBATCH_MEM_PER_NODE...).
# LOFP names the lofp command (default: lofp on PATH); it must exist on the compute nodes.
#
# Slurm's array indices here are 1..N, the same numbers as lofp's --shard I/N (1 <= I <= N), so
# the task passes $SLURM_ARRAY_TASK_ID as it is. A task that fails or is killed leaves its shards
# absent (each is written under a temporary name and renamed when complete); the merge job is
# then cancelled (--kill-on-invalid-dep) and `--tasks I` re-runs that task with a new merge.
set -euo pipefail

usage() { sed -n '7,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

# ---- inside a job: one slice or the merge --------------------------------------------------
if [ "${1:-}" = "--job" ]; then
  what=$2 in=$3 out=$4 n=$5
  shift 5
  lofp=${LOFP:-lofp}
  case $what in
    slice)
      i=${SLURM_ARRAY_TASK_ID:?slurm_convert.sh --job slice runs as a task of a job array}
      echo "lofp slice $i/$n of $in on $(hostname)" >&2
      exec "$lofp" convert "$in" "$out" --shard "$i/$n" "$@" ;;
    merge)
      exec "$lofp" convert --merge-index "$in" "$out" "$@" ;;
    *) echo "slurm_convert.sh: unknown job '$what'" >&2; exit 2 ;;
  esac
fi

# ---- submitting ------------------------------------------------------------------------------
tasks="" cpus=1 local=0
while [ $# -gt 0 ]; do
  case $1 in
    --tasks) tasks=${2:?--tasks needs a list}; shift 2 ;;
    --cpus) cpus=${2:?--cpus needs a number}; shift 2 ;;
    --local) local=1; shift ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    -*) echo "slurm_convert.sh: unknown option $1 (lofp convert options go after IN OUT N)" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] || usage
in=$1 out=$2 n=$3
shift 3
case $n in ''|*[!0-9]*|0*) echo "slurm_convert.sh: N must be a positive integer, not '$n'" >&2; exit 2 ;; esac
case $cpus in ''|*[!0-9]*|0*) echo "slurm_convert.sh: --cpus must be a positive integer, not '$cpus'" >&2; exit 2 ;; esac
[ -n "$tasks" ] || tasks="1-$n"
opts=("$@")
[ "$cpus" -gt 1 ] && opts+=(--threads "$cpus")
# Jobs may start in another directory on another node: hand them absolute paths.
abspath() { case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
in=$(abspath "$in") out=$(abspath "$out")
self=$(abspath "$0")

if [ "$local" = 1 ]; then
  # The array's indices, expanded as sbatch would (ranges and lists; no steps or %limits).
  IFS=, read -r -a parts <<< "$tasks"
  for p in "${parts[@]}"; do
    case $p in
      *-*) idx=$(seq "${p%-*}" "${p#*-}") ;;
      *) idx=$p ;;
    esac
    for i in $idx; do
      SLURM_ARRAY_TASK_ID=$i bash "$self" --job slice "$in" "$out" "$n" "${opts[@]}"
    done
  done
  bash "$self" --job merge "$in" "$out" "$n" "${opts[@]}"
  exit 0
fi

array=$(sbatch --parsable --job-name=lofp-convert --array="$tasks" --cpus-per-task="$cpus" \
        "$self" --job slice "$in" "$out" "$n" "${opts[@]}")
array=${array%%;*}                      # "JOBID;CLUSTER" on a federation
merge=$(sbatch --parsable --job-name=lofp-merge --cpus-per-task=1 \
        --dependency="afterok:$array" --kill-on-invalid-dep=yes \
        "$self" --job merge "$in" "$out" "$n" "${opts[@]}")
merge=${merge%%;*}
echo "array $array"
echo "merge $merge"
