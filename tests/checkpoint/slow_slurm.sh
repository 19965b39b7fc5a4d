#!/usr/bin/env bash
# `make test-slurm` (slow tier, docs/TESTING.md): lofp convert as a Slurm job array on a real
# Slurm. Installs Debian's slurmctld, slurmd, slurm-client, munge (and strace, the throttle) when
# missing, starts munged + slurmctld + slurmd on localhost from a throw-away configuration (its
# own ports, state and key under a temporary directory; no systemd, no cgroups), then with
# scripts/scale-out/slurm_convert.sh:
#   1. converts a generated multi-shard model with N-task arrays + the dependent merge job and
#      checks every file of OUT against a single-process `lofp convert` (diff -r: names, hidden
#      files included, and bytes); prints the wall times;
#   2. SIGKILLs one array task (scancel --signal=KILL) while it writes its shard (that task is
#      slowed by strace's delay injection on pwrite64), checks OUT holds no torn file (every shard
#      under its final name equals the single-process one; the killed one is absent) and that the
#      merge job was cancelled, re-runs that task alone (--tasks K) with a new merge, and checks
#      OUT is again identical to the single-process conversion.
# The daemons are stopped on exit, whatever happens.
#   bash tests/checkpoint/slow_slurm.sh <build_dir> <source_dir>
# LOFP_PYTHON: the Python with numpy/safetensors/ml_dtypes (default: the pinned .venv).
# LOFP_SLURM_HIDDEN, LOFP_SLURM_LAYERS: the model's hidden size and layers per shard (512 and 4:
# 4 shards, 76 MiB); larger ones make the timings mean more than Slurm's own latency.
set -euo pipefail
build=$(cd "${1:?usage: slow_slurm.sh <build_dir> <source_dir>}" && pwd)
src=$(cd "${2:?usage: slow_slurm.sh <build_dir> <source_dir>}" && pwd)
exe="$build/lofp"
[ -x "$exe" ] || { echo "slow_slurm: $exe is missing (build the lofp target)" >&2; exit 1; }
# slurmd starts every job as its user, which needs root; the throw-away cluster runs as root.
[ "$(id -u)" = 0 ] || { echo "slow_slurm: run as root (slurmd starts jobs as their user)" >&2; exit 1; }
"$src/scripts/install-deps.sh" --slurm
if [ -z "${LOFP_PYTHON:-}" ]; then "$src/scripts/venv.sh"; fi
py="${LOFP_PYTHON:-$src/.venv/bin/python}"
conv="$src/scripts/scale-out/slurm_convert.sh"
S=4                                    # shards of the generated model
T=2                                    # the array task that is cancelled (scancel)
K=3                                    # the array task that is SIGKILLed

work=$(mktemp -d "${TMPDIR:-/tmp}/lofp_slurm.XXXXXX")
chmod 755 "$work"
daemons=()
cleanup() {
  local rc=$?
  if [ ${#daemons[@]} -gt 0 ]; then
    scancel --quiet --user=root 2>/dev/null || true
    for _ in $(seq 150); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
    kill "${daemons[@]}" 2>/dev/null || true
    wait "${daemons[@]}" 2>/dev/null || true
  fi
  if [ $rc -ne 0 ] && [ -d "$work/log" ]; then
    for f in "$work"/log/*; do echo "---- $f (last lines)"; tail -n 15 "$f"; done >&2
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
fail() { echo "slow_slurm: FAIL: $*" >&2; exit 1; }

# ---- a Slurm of one node, localhost -----------------------------------------------------------
mkdir -p "$work"/{state,spool,log,key,sock,jobs}
chmod 700 "$work/key"
head -c 1024 /dev/urandom > "$work/key/munge.key"
chmod 400 "$work/key/munge.key"
read -r ctld_port d_port < <("$py" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
ncpu=$(nproc)
cat > "$work/slurm.conf" <<EOF
ClusterName=lofptest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/sock/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
PlugStackConfig=$work/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$ncpu State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
: > "$work/plugstack.conf"
export SLURM_CONF="$work/slurm.conf"
# Foreground daemons (-F / -D) started here, so that their ids are this script's to stop.
/usr/sbin/munged -F -f --socket="$work/sock/munge.socket" --key-file="$work/key/munge.key" \
  --log-file="$work/log/munged.log" --pid-file="$work/munged.pid" --seed-file="$work/key/seed" \
  > "$work/log/munged.out" 2>&1 &
daemons+=($!)
for _ in $(seq 100); do [ -S "$work/sock/munge.socket" ] && break; sleep 0.1; done
slurmctld -D -c -i > "$work/log/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D -N localhost > "$work/log/slurmd.out" 2>&1 &
daemons+=($!)
up=0
for _ in $(seq 120); do
  st=$(sinfo -h -o %T 2>/dev/null || true)
  case $st in idle*|mixed*|allocated*) up=1; break ;; esac
  sleep 0.5
done
[ $up = 1 ] || fail "the node did not come up (sinfo: '${st:-}')"
echo "slow_slurm: $(sinfo -V) up: 1 node, CPUs=$ncpu, ports $ctld_port/$d_port"

# Waits until none of the given jobs (array ids cover their tasks) is queued or running.
wait_jobs() {
  local t0=$SECONDS
  while [ -n "$(squeue -h -j "$(IFS=,; echo "$*")" -o %i 2>/dev/null)" ]; do
    [ $((SECONDS - t0)) -lt 600 ] || fail "jobs $* still queued after 600 s: $(squeue)"
    sleep 0.1
  done
}
# The states of a job (one line per array task): "JOBID_TASK STATE EXITCODE".
states() {
  scontrol -o show job "$1" | sed -E 's/.*JobId=([0-9]+).*ArrayJobId=([0-9]+) ArrayTaskId=([0-9]+).*JobState=([A-Z_]+).*ExitCode=([0-9:]+).*/\2_\3 \4 \5/;
    s/.*JobId=([0-9]+) .*JobState=([A-Z_]+).*ExitCode=([0-9:]+).*/\1 \2 \3/'
}
all_completed() {
  local bad
  bad=$(states "$1" | awk '$2 != "COMPLETED"')
  [ -z "$bad" ] || fail "job $1 did not complete: $bad (logs: $(cat "$work"/jobs/*.out 2>/dev/null | tail -n 20))"
}
submit() {   # submit LOGNAME slurm_convert.sh args... ; sets $array and $merge
  local o
  o=$(cd "$work/jobs" && SBATCH_OUTPUT="$work/jobs/$1-%A_%a.out" LOFP=${LOFP:-$exe} bash "$conv" "${@:2}")
  array=$(awk '$1 == "array" { print $2 }' <<< "$o")
  merge=$(awk '$1 == "merge" { print $2 }' <<< "$o")
  [ -n "$array" ] && [ -n "$merge" ] || fail "slurm_convert.sh printed: $o"
}

# ---- the model and its single-process conversion --------------------------------------------
in="$work/model"
bytes=$("$py" "$src/tests/checkpoint/scale_out_model.py" "$in" --shards $S \
        --layers-per-shard "${LOFP_SLURM_LAYERS:-4}" --hidden "${LOFP_SLURM_HIDDEN:-512}")
opts=(--to modelopt --threads 1 --quiet)
sync
t0=$(now); "$exe" convert "${opts[@]}" "$in" "$work/ref"; t1=$(now)
t_single=$(elapsed "$t0" "$t1")
# One process converting $ncpu shards at once (--jobs): what a single machine does without Slurm.
t0=$(now); "$exe" convert "${opts[@]}" --jobs "$ncpu" "$in" "$work/ref_jobs"; t1=$(now)
t_jobs=$(elapsed "$t0" "$t1")
diff -r "$work/ref" "$work/ref_jobs" || fail "--jobs $ncpu differs from --jobs 1"
rm -rf "$work/ref_jobs"
echo "slow_slurm: model: $S shards, $((bytes >> 20)) MiB bf16; one process: $t_single s, with --jobs $ncpu: $t_jobs s"

# ---- 1. arrays of N tasks + merge, against the single process -------------------------------
summary=()
for n in $S 2; do
  out="$work/out$n"
  t0=$(now)
  submit "n$n" "$in" "$out" "$n" "${opts[@]}"
  wait_jobs "$array"; t1=$(now)
  wait_jobs "$merge"; t2=$(now)
  all_completed "$array"; all_completed "$merge"
  diff -r "$work/ref" "$out" || fail "N=$n: the array's OUT differs from the single-process conversion"
  summary+=("N=$n tasks: array done $(elapsed "$t0" "$t1") s, merged $(elapsed "$t0" "$t2") s after sbatch")
  echo "slow_slurm: N=$n: every file identical to the single-process conversion (${summary[-1]})"
done

# ---- 2. tasks killed mid-write, re-run alone -------------------------------------------------
# Task T is cancelled the way Slurm does it (scancel: SIGTERM, then SIGKILL after KillWait; lofp
# removes its temporary on the SIGTERM). Task K gets SIGKILL straight away (its processes from
# scontrol listpids), as from the OOM killer or a lost node: no handler runs, its temporary stays.
out="$work/out_kill"
shard_of() { printf 'model-%05d-of-%05d.safetensors' "$1" $S; }
# Tasks T and K are slowed to a crawl (every pwrite64 waits 0.1 s) so that they are certainly
# mid-write when they are killed; the other tasks and the merge run the plain binary.
cat > "$work/slow_lofp.sh" <<EOF
#!/bin/bash
case "\${SLURM_ARRAY_TASK_ID:-}" in $T|$K)
  exec strace -f -qq -o /dev/null -e trace=pwrite64 -e inject=pwrite64:delay_exit=100000 "$exe" "\$@" ;;
esac
exec "$exe" "\$@"
EOF
chmod +x "$work/slow_lofp.sh"
LOFP="$work/slow_lofp.sh" submit kill "$in" "$out" "$S" "${opts[@]}"
writing() { ls -A "$out" 2>/dev/null | grep -q "^\.$(shard_of "$1")\.tmp-"; }
t0=$SECONDS
until writing $T && writing $K; do
  [ $((SECONDS - t0)) -lt 120 ] || fail "tasks $T and $K never both started writing: $(states "$array")"
  sleep 0.05
done
for t in $T $K; do [ ! -e "$out/$(shard_of $t)" ] || fail "task $t finished before it could be killed"; done
scancel "${array}_$T"
jid=$(scontrol -o show job "${array}_$K" | sed -E 's/^JobId=([0-9]+) .*/\1/')
pids=$(scontrol listpids "$jid" | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }')
[ -n "$pids" ] || fail "scontrol listpids $jid found no process of task $K"
kill -KILL $pids
wait_jobs "$array" "$merge"
echo "slow_slurm: cancelled task $T, SIGKILLed task $K mid-write; tasks: $(states "$array" | tr '\n' ' ')| merge: $(states "$merge")"
for t in $T $K; do
  states "$array" | awk -v k="${array}_$t" '$1 == k && $2 == "COMPLETED" { exit 1 }' || fail "task $t completed"
done
[ "$(states "$array" | awk '$2 == "COMPLETED"' | wc -l)" = $((S - 2)) ] ||
  fail "the other tasks did not all complete: $(states "$array")"
states "$merge" | grep -q " CANCELLED " || fail "the merge job was not cancelled: $(states "$merge")"
# No torn file: every visible file is a finished shard equal to the single-process one; the
# killed shards are absent; the merge wrote nothing. The SIGKILLed task's only trace is its
# hidden temporary; the cancelled one removed its own.
for f in "$out"/*; do
  name=$(basename "$f")
  case $name in model-*.safetensors) ;; *) fail "the killed run left $name in OUT" ;; esac
  cmp -s "$f" "$work/ref/$name" || fail "$name in OUT differs from the single-process one (torn?)"
done
for t in $T $K; do [ ! -e "$out/$(shard_of $t)" ] || fail "$(shard_of $t) exists after its task was killed"; done
writing $K || fail "no temporary of $(shard_of $K) left: was task $K killed mid-write?"
! writing $T || fail "the cancelled task $T left its temporary: $(ls -A "$out")"
echo "slow_slurm: after the kills OUT holds $(ls "$out" | wc -l) finished shards (each identical) and: $(ls -A "$out" | grep '^\.' | tr '\n' ' ')"
submit rerun --tasks "$T,$K" "$in" "$out" "$S" "${opts[@]}"
wait_jobs "$array" "$merge"
all_completed "$array"; all_completed "$merge"
diff -r "$work/ref" "$out" || fail "after re-running tasks $T,$K and the merge, OUT differs from the single-process conversion"
echo "slow_slurm: tasks $T,$K re-run alone + merge: every file identical to the single-process conversion"

echo "slow_slurm: wall times on $ncpu CPUs ($((bytes >> 20)) MiB model, --threads 1 per process):"
echo "  one process: $t_single s; one process with --jobs $ncpu: $t_jobs s"
for s in "${summary[@]}"; do echo "  $s"; done
echo "slow_slurm: PASS"
