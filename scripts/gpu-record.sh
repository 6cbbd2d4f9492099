#!/usr/bin/env bash
# `commtool record` on the GPU machine, against a real PyTorch job (tests/torch/collectives.py):
# 1, 2 and 4 ranks on one GPU (our launcher and torchrun), each recording checked against what
# the program issued and timed itself (tests/torch/check_recording.py) and analysed by
# `commtool report`; a hang injected on purpose (named, then ended only with --kill-on-hang);
# a job that is not PyTorch (nccl-tests, the system's NCCL) recorded too; and the plugin's cost:
# the job's wall time with and without `record`, alternating. Logs in OUT_DIR; a table last.
#   scripts/gpu-record.sh [OUT_DIR] [ANCHORS_DIR]      (after building here)
# PARTS: a comma list of checks, cupti and cost (each fits a 10-minute call); default all three.
# cupti: `record --cupti` on the same jobs (its records checked too), PyTorch's profiler started
# mid-job under it (it must still see its kernels), and a job under compute-sanitizer (--cupti
# must step aside).
# COST_PAIRS: how many without/with pairs the cost measurement alternates (default 5);
# COST_ITERS: operations per size in each of its jobs (default 50); COST_RANKS: the rank counts
# (default "1 2"); COST_KINDS: a space-separated list of CUPTI kind sets (cupti_mode.cpp's
# COMMTOOL_CUPTI_KINDS), each measured as a variant of its own beside all kinds.
# ANCHORS_DIR: prebuilt nccl-tests (all_reduce_perf); without it that step is not run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-${OUT:-gpu-record-out}}")
anchors=${2:-${ANCHORS:-}}
mkdir -p "$out"
log="$out/record.log"
: > "$log"
bin=$(pwd)/build/cli/commtool
job=(python3 "$(pwd)/tests/torch/collectives.py")
declare -A result
order=()
step() {  # step NAME COMMAND...: runs it, logs it, records pass/fail
  local name=$1; shift
  order+=("$name")
  echo "=== $name: $*" >> "$log"
  if "$@" >> "$log" 2>&1; then result[$name]=ok; else result[$name]="FAILED (rc $?)"; fi
}
recorded() {  # recorded NAME RANKS [--cupti] -- JOB...: record the job, check it, report it
  local name=$1 ranks=$2 cupti=(); shift 2
  [[ $1 == --cupti ]] && { cupti=(--cupti); shift; }
  shift
  rm -rf "$out/$name" "$out/$name-truth"
  step "$name" "$bin" record "${cupti[@]}" --save "$out/$name" -- "$@" --results "$out/$name-truth"
  step "$name-check" python3 tests/torch/check_recording.py "$out/$name" "$out/$name-truth" --ranks "$ranks" "${cupti[@]}"
  step "$name-report" bash -c "'$bin' report '$out/$name' > '$out/$name-report.txt' && '$bin' report '$out/$name' --json > '$out/$name-report.json' && '$bin' report '$out/$name' --trace '$out/$name-trace.json' > /dev/null"
}

parts=${PARTS:-checks,cupti,cost}
export NCCL_NVLS_ENABLE=0
if [[ $parts == *checks* ]]; then
recorded r1 1 -- "${job[@]}" --iters 5
recorded r2 2 -- "${job[@]}" --nproc 2 --iters 5
recorded r4 4 -- python3 -m torch.distributed.run --nproc-per-node 4 --master-port 29561 \
  "$(pwd)/tests/torch/collectives.py" --iters 3 --sizes 1024,1048576

# A hang on purpose: rank 1 skips its 4th all_reduce and sleeps. Named within the timeout, and
# the job killed because asked; then the same without --kill-on-hang: named, left to end itself
# (rank 1 wakes after 12 s and exits 3; the launcher ends rank 0).
rm -rf "$out/hang-kill" "$out/hang-left"
step hang-kill bash -c "'$bin' record --save '$out/hang-kill' --hang-timeout 5 --kill-on-hang -- ${job[*]} --nproc 2 --funcs all_reduce --sizes 1048576 --modes sync --iters 8 --hang-rank 1 --hang-at 3 2> '$out/hang-kill.err'; rc=\$?; cat '$out/hang-kill.err'; test \$rc -ne 0 && grep -q 'looks hung' '$out/hang-kill.err'"
step hang-kill-report bash -c "'$bin' report '$out/hang-kill' | tee '$out/hang-kill-report.txt' | grep -Ei 'rank 1'"
step hang-left bash -c "'$bin' record --save '$out/hang-left' --hang-timeout 4 -- ${job[*]} --nproc 2 --funcs all_reduce --sizes 1048576 --modes sync --iters 8 --hang-rank 1 --hang-at 3 --hang-sleep 12 2> '$out/hang-left.err'; rc=\$?; cat '$out/hang-left.err'; test \$rc -eq 3 && grep -q 'left running' '$out/hang-left.err'"

# Not PyTorch: nccl-tests against the system's NCCL (2.28.3), one process, one GPU.
if [[ -x $anchors/all_reduce_perf ]]; then
  rm -rf "$out/nccl-tests"
  step nccl-tests bash -c "'$bin' record --save '$out/nccl-tests' -- '$anchors/all_reduce_perf' -b 8 -e 1M -f 4 -g 1 -n 5 -w 1 && ls '$out/nccl-tests/procs' && '$bin' report '$out/nccl-tests' > '$out/nccl-tests-report.txt'"
else
  order+=(nccl-tests); result[nccl-tests]="not run (no ANCHORS_DIR with all_reduce_perf)"
fi


# The plugin exports its table, the injection entry and the subscribe stand-ins, nothing else;
# and trace's use of it still names what NCCL ran.
plugin=$(ls build/tracing/libcommtool_nccl_profiler.so)
step plugin-exports bash -c "nm -D --defined-only '$plugin'; test \"\$(nm -D --defined-only '$plugin' | awk '\$2 != \"A\" {print \$3}' | LC_ALL=C sort | tr '\n' ' ')\" = 'InitializeInjection cuptiSubscribe cuptiSubscribe_v2 ncclProfiler_v5 '"
step trace-plugin bash -c "'$bin' --devices 0,0 trace allreduce -b 1K -e 1M -f 1024 -n 3 --mode sync | tee '$out/trace.txt' | grep -Eq 'RING|TREE'"
fi

if [[ $parts == *cupti* ]]; then
recorded rc1 1 --cupti -- "${job[@]}" --iters 5
recorded rc2 2 --cupti -- "${job[@]}" --nproc 2 --iters 5
recorded rc4 4 --cupti -- python3 -m torch.distributed.run --nproc-per-node 4 --master-port 29562 \
  "$(pwd)/tests/torch/collectives.py" --iters 3 --sizes 1024,1048576
# PyTorch's profiler started mid-job: without commtool, then under record --cupti, which must
# give CUPTI up to it (a "yielded" line) so that it sees its kernels as it did without.
prof=(--nproc 2 --funcs all_reduce --modes sync --iters 40 --sizes 1048576 --profile-at 15 --profile-ops 10)
rm -rf "$out/prof-plain-truth" "$out/prof" "$out/prof-truth"
step prof-plain "${job[@]}" "${prof[@]}" --results "$out/prof-plain-truth"
step prof "$bin" record --cupti --save "$out/prof" -- "${job[@]}" "${prof[@]}" --results "$out/prof-truth"
step prof-check python3 tests/torch/check_recording.py "$out/prof" "$out/prof-truth" --ranks 2 --cupti --profiled "$out/prof-plain-truth"
# A job under a CUPTI tool of its own: --cupti steps aside with a warning, the plugin records.
if [[ -x $anchors/all_reduce_perf ]] && command -v compute-sanitizer > /dev/null; then
  rm -rf "$out/sanitized"
  step sanitized bash -c "'$bin' record --cupti --save '$out/sanitized' -- compute-sanitizer --tool memcheck '$anchors/all_reduce_perf' -b 8 -e 1K -f 4 -g 1 -n 2 -w 1 2> '$out/sanitized.err'; rc=\$?; cat '$out/sanitized.err'; test \$rc -eq 0 && grep -q 'cupti is off' '$out/sanitized.err' && '$bin' report '$out/sanitized' > '$out/sanitized-report.txt'"
else
  order+=(sanitized); result[sanitized]="not run (no all_reduce_perf or compute-sanitizer)"
fi
fi

if [[ $parts == *checks* && $parts == *cupti* ]]; then
# Which NCCL each recorded job ran: torch's (2.28.9) and the system's (2.28.3) both loaded it.
# The proc line names it, and every comm line (the only place under --cupti, whose proc line is
# written at cuInit, before NCCL's init).
step nccl-versions python3 -c "
import glob, json, sys
seen = {}
for d in ('r2', 'nccl-tests', 'rc2'):
    for f in glob.glob('$out/' + d + '/procs/*.jsonl'):
        lines = [json.loads(l) for l in open(f) if l.startswith('{\"k\":\"comm\"')]
        proc = json.loads(open(f).readline())['nccl']
        for v in ([proc] if d != 'rc2' else []) + [c.get('nccl', '') for c in lines]:
            seen.setdefault(d, set()).add(v)
print(seen)
sys.exit(0 if len(seen.get('r2', ())) == 1 and seen.get('rc2') == seen.get('r2') and all(v for vs in seen.values() for v in vs) else 1)"
fi

# The plugin's cost: the job's own wall time (its ops, excluding Python start-up) and the whole
# command's, without and with record, alternating, 5 pairs each.
if [[ $parts == *cost* ]]; then
python3 - "$bin" "$out" "${COST_PAIRS:-5}" "${COST_ITERS:-50}" "${COST_RANKS:-1 2}" "${COST_KINDS:-}" >> "$out/cost.txt" 2>> "$log" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time
bin, out, pairs, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rank_counts = [int(r) for r in sys.argv[5].split()]
kind_sets = sys.argv[6].split()
job = ["python3", "tests/torch/collectives.py", "--funcs", "all_reduce", "--modes", "sync",
       "--sizes", "1024,1048576,16777216", "--iters", iters]
def once(ranks, rec, i):
    """rec: None (no record), [] (record), ["--cupti"] (record --cupti), or (["--cupti"], KINDS)."""
    env = dict(os.environ)
    if isinstance(rec, tuple):
        rec, env["COMMTOOL_CUPTI_KINDS"] = rec
    res = f"{out}/cost-res"
    shutil.rmtree(res, ignore_errors=True)
    cmd = job + (["--nproc", str(ranks)] if ranks > 1 else []) + ["--results", res]
    if rec is not None:
        d = f"{out}/cost-rec"
        shutil.rmtree(d, ignore_errors=True)
        cmd = [bin, "record"] + rec + ["--save", d, "--"] + cmd
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    inner = max(json.load(open(f"{res}/{f}"))["wall_s"] for f in os.listdir(res))
    return wall, inner
variants = {"without": None, "record": [], "record --cupti": ["--cupti"]}
for k in kind_sets:
    variants[f"--cupti {k}"] = (["--cupti"], k)
print(f"{'ranks':>5} {'what':10} {'variant':15} {'median [min-max] s':>26} {'ratio':>6}")
for ranks in rank_counts:
    rows = {v: [] for v in variants}
    for i in range(pairs):
        for v, rec in variants.items():
            rows[v].append(once(ranks, rec, i))
    for k, what in ((1, "job's ops"), (0, "command")):
        base = statistics.median(x[k] for x in rows["without"])
        for v in variants:
            a = [x[k] for x in rows[v]]
            m = statistics.median(a)
            print(f"{ranks:5d} {what:10} {v:15} {m:8.3f} [{min(a):.3f}-{max(a):.3f}] {m / base:6.3f}")
PY
result[cost]=$([[ -s $out/cost.txt ]] && echo ok || echo FAILED)
order+=(cost)
fi

echo "== gpu-record summary ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null))"
fails=0
for k in "${order[@]}"; do
  printf '  %-20s %s\n' "$k" "${result[$k]}"
  [[ ${result[$k]} == ok ]] || fails=1
done
echo "-- plugin cost (median [min-max] of ${COST_PAIRS:-5}, alternating, ${COST_ITERS:-50} operations per size; ranks share one GPU at 2)"
cat "$out/cost.txt" 2>/dev/null
for f in r2 r4 rc2 rc4 prof; do
  echo "-- $f check"; grep -E '^(FAIL|ok)' "$log" | head -0; sed -n '/=== '"$f"'-check/,/=== /p' "$log" | grep -E 'FAIL|function|AllReduce|all_reduce|passed|failed' | head -30
done
exit $fails
