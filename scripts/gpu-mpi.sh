#!/usr/bin/env bash
# commtool under a real mpirun on the GPU machine: topo, probe, trace, diagnose ep and diagnose
# allreduce with 2 and 4 MPI ranks on GPU 0 (each rank its own NCCL host id, which commtool sets
# because they share the GPU), their outputs checked; a rank that dies or stalls, by trace's
# --fault and by a SIGKILL from outside, must end the job with exit 5 naming the rank and its
# host within --timeout and a few seconds, with nothing left running; and `record` of a PyTorch
# job that mpirun starts. Timings of ranks sharing one GPU are never link figures.
# Logs in OUT_DIR; a table last.
#   scripts/gpu-mpi.sh [OUT_DIR]          (after building here, with Open MPI found)
# GPU_MPI_STEPS=REGEX runs only the steps whose names match (e.g. '^probe' for probe's).
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-${OUT:-gpu-mpi-out}}")
mkdir -p "$out"
log="$out/mpi.log"
: > "$log"
bin=$(realpath build/cli/commtool)
host=$(hostname)
# The machine runs us as root, which mpirun refuses unless told; vader's single-copy path needs
# ptrace rights a container may not grant.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi=(mpirun --oversubscribe --bind-to none)

declare -A result
order=()
step() {  # step NAME COMMAND...: runs it, logs it, records pass/fail
  local name=$1; shift
  [[ -z ${GPU_MPI_STEPS:-} || $name =~ $GPU_MPI_STEPS ]] || return 0
  order+=("$name")
  echo "=== $name: $*" >> "$log"
  local t0=$SECONDS
  if "$@" >> "$log" 2>&1; then result[$name]="ok ($((SECONDS - t0)) s)"
  else result[$name]="FAILED (rc $?, $((SECONDS - t0)) s)"; fi
}
# No commtool process may outlive the job that started it.
# (A worker's command line starts /proc/self/exe __worker.)
nothing_left() { ! pgrep -af '__worker --socket|commtool .*(probe|trace|diagnose) '; }
# expect_hang NAME SECONDS_AT_MOST PATTERN... -- COMMAND...: exit 5, every PATTERN in its
# stderr, within the bound, nothing left behind.
expect_hang() {
  local name=$1 bound=$2; shift 2
  local patterns=()
  while [[ $1 != -- ]]; do patterns+=("$1"); shift; done
  shift
  local t0=$SECONDS
  "$@" > "$out/$name.out" 2> "$out/$name.err"
  local rc=$? took=$((SECONDS - t0))
  cat "$out/$name.err"
  echo "rc=$rc took=${took}s (bound ${bound}s)"
  [[ $rc -eq 5 ]] || return 1
  (( took <= bound )) || return 1
  for p in "${patterns[@]}"; do grep -qF -- "$p" "$out/$name.err" || { echo "missing: $p"; return 1; }; done
  sleep 1
  nothing_left
}

check_json() {  # check_json FILE PYTHON_EXPRESSION_ON_d
  python3 - "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
print(("ok: " if ok else "FAILED: ") + sys.argv[2])
sys.exit(0 if ok else 1)
EOF
}

sizes='-b 8 -e 16M -f 64'
for n in 2 4; do
  devs=$(printf '0%.0s,' $(seq $n)); devs=${devs%,}
  step "topo-np$n" bash -c "${mpi[*]} -np $n '$bin' topo > '$out/topo-np$n.txt' && grep -q '$n MPI ranks on 1 host' '$out/topo-np$n.txt'"
  step "trace-np$n" bash -c "${mpi[*]} -np $n '$bin' --devices $devs --json --output '$out/trace-np$n.json' trace allreduce $sizes --iters 20 --save '$out/trace-np$n-run'"
  step "trace-np$n-check" check_json "$out/trace-np$n.json" \
    "d['nranks'] == $n and d['rank_placement'] == {'ranks': $n, 'gpus': 1, 'most_ranks_on_a_gpu': $n, 'shared_gpu': True} and len(d['gpus']) == $n"
  step "trace-np$n-text" bash -c "'$bin' report '$out/trace-np$n-run' > '$out/trace-np$n.txt' && grep -q 'SHARED GPU' '$out/trace-np$n.txt'"
  step "ep-np$n" bash -c "${mpi[*]} -np $n '$bin' --devices $devs --json --output '$out/ep-np$n.json' diagnose ep --experts 8 --topk 2 --tokens 512 --iters 5"
  step "ep-np$n-check" check_json "$out/ep-np$n.json" "d['measured'] is True and d['config']['ranks'] == $n"
done
step allreduce-np2 bash -c "${mpi[*]} -np 2 '$bin' --devices 0,0 --json --output '$out/allreduce-np2.json' diagnose allreduce -b 8 -e 1M -f 256 --iters 5"
step allreduce-np2-check check_json "$out/allreduce-np2.json" "len(d['paths']) >= 9"
# probe: the node's lowest rank measures while the other waits without spinning (its CPU time
# against its wall time); the figures beside probe's without MPI, the same run.
probe_local() { "$bin" --json --output "$out/probe-local.json" probe --h2d --latency; }
probe_np2() {
  "${mpi[@]}" -np 2 bash -c 'TIMEFORMAT="cpu rank$OMPI_COMM_WORLD_RANK %U %S %R"; time "$0" "$@"' \
    "$bin" --json --output "$out/probe-np2.json" probe --h2d --latency 2> "$out/probe-np2.cpu"
  local rc=$?
  cat "$out/probe-np2.cpu"
  return $rc
}
probe_np2_check() {
  python3 - "$out/probe-local.json" "$out/probe-np2.json" "$out/probe-np2.cpu" <<'PY'
import json, re, sys
local, mpi = (json.load(open(f)) for f in sys.argv[1:3])
ok = mpi["mpi"] == {"ranks": 2, "nodes": 1, "measured_by": "the lowest rank of each host"}
ok &= len(mpi["nodes"]) == 1 and mpi["nodes"][0]["rank"] == 0 and mpi["nodes"][0]["node_ranks"] == 2
key = lambda m: (m["probe"], m["what"], m["engine"], str(m["src"]), str(m["dst"]))
mine = {key(m): m["stats"]["median"] for m in mpi["nodes"][0]["measurements"]}
for m in local["measurements"]:
    k, a = key(m), m["stats"]["median"]
    b = mine.get(k)
    ratio = b / a if b else 0
    print(f"  {' '.join(k):40s} local {a:9.2f}  under mpirun {b or 0:9.2f}  {ratio:.3f} {m['unit']}")
    ok &= m["unit"] != "GB/s" or 0.97 <= ratio <= 1.03
for line in open(sys.argv[3]):
    if found := re.match(r"cpu rank1 ([\d.]+) ([\d.]+) ([\d.]+)", line):
        user, system, real = map(float, found.groups())
        print(f"  waiting rank: {user + system:.2f} s of CPU in {real:.2f} s")
        ok &= user + system < 0.1 * real
        break
else:
    ok = False
print("ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
}
step probe-local probe_local
step probe-np2 probe_np2
step probe-np2-check probe_np2_check
step probe-np2-text bash -c "${mpi[*]} -np 2 '$bin' probe --h2d > '$out/probe-np2.txt' && grep -q 'across 1 node(s), 2 MPI rank(s)' '$out/probe-np2.txt'"
# The same trace without MPI, for the outputs side by side.
step trace-local2 bash -c "'$bin' --devices 0,0 --json --output '$out/trace-local2.json' trace allreduce $sizes --iters 20"

# A rank that dies or stalls: exit 5 naming it and its host, within --timeout + a few seconds.
step fault-die expect_hang fault-die 40 "rank 1 ($host GPU 0)" -- \
  "${mpi[@]}" -np 2 "$bin" --devices 0,0 --timeout 10 trace allreduce -b 1M -e 1M --iters 20 --inject-fault die:1:5
step fault-stall expect_hang fault-stall 40 "rank 1" "#5" -- \
  "${mpi[@]}" -np 4 "$bin" --devices 0,0,0,0 --timeout 10 trace allreduce -b 1M -e 1M --iters 20 --inject-fault stall:1:5
# A worker killed from outside, mid-run.
kill_mid_run() {
  "${mpi[@]}" -np 4 "$bin" --devices 0,0,0,0 --timeout 10 trace allreduce -b 1M -e 1M --iters 100000 --no-cupti &
  local job=$!
  sleep 15
  pkill -9 -f "__worker .*--rank 2 " || echo "no worker of rank 2 to kill"
  wait $job
}
step kill-worker expect_hang kill-worker 45 "rank 2 ($host GPU 0) died" -- kill_mid_run

# record of a PyTorch job that mpirun starts (one node: mpirun passes record's environment on).
step record-np2 "$bin" record --save "$out/record-np2" -- "${mpi[@]}" -np 2 python3 tests/torch/collectives.py --iters 5 --results "$out/record-np2-truth"
step record-np2-check python3 tests/torch/check_recording.py "$out/record-np2" "$out/record-np2-truth" --ranks 2
step record-np2-report bash -c "'$bin' report '$out/record-np2' > '$out/record-np2-report.txt'"
step nothing-left nothing_left

rm -rf "$out"/record-np2/procs
echo "== gpu-mpi summary ($(date -u +%Y-%m-%dT%H:%MZ), $(mpirun --version | head -1))"
for k in "${order[@]}"; do printf '  %-20s %s\n' "$k" "${result[$k]}"; done
fails=0
for v in "${result[@]}"; do [[ $v == ok* ]] || fails=1; done
exit $fails
