#!/usr/bin/env bash
# What each CUPTI activity kind costs `commtool trace`, on the GPU machine: the same traced run
# with every kind on, with each optional kind left off in turn (COMMTOOL_CUPTI_KINDS_OFF), with
# candidate sets, and with all of them off (CUDA events, the runtime API, synchronization and
# external correlation stay on: the harness finds its events through them), in alternating
# rounds. A kind's cost per operation is the host call's growth under tracing with it on minus
# that with it off; traced/untraced shows what reaches the measured time. The last block shows
# what the attribution loses with each set, at one rank and at two ranks sharing GPU 0 (whether
# trace needs the kinds left off).
# Full JSON in OUT_DIR; the table is printed last.
#   scripts/bench-cupti.sh OUT_DIR [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-cupti.sh OUT_DIR [ROUNDS]}
rounds=${2:-3}
mkdir -p "$out"
bin=build/cli/commtool
optional=(kernel memcpy memset driver marker)
# Candidates for trace's default set: the two kinds the split itself does not read.
# shellcheck disable=SC2054  # one element: the comma list COMMTOOL_CUPTI_KINDS_OFF takes
candidates=(memset,marker)
none=$(IFS=,; echo "${optional[*]}")
configs=(all "${optional[@]}" "${candidates[@]}" "$none")
name_of() { case $1 in all) echo all ;; "$none") echo none ;; *) echo "${1//,/+}" ;; esac; }
# trace NAME OFF ARGS...: one run; a refused run leaves NAME.err (trace's message) and no JSON.
trace() {
  local name=$1 off=$2; shift 2
  COMMTOOL_CUPTI_KINDS_OFF=$off "$bin" trace allreduce "$@" --mode sync --batches 0 --json \
    --output "$out/$name.json" 2> "$out/$name.err" || true
}
for round in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    trace "$(name_of "$c")-$round" "${c/#all/}" -b 8 -e 16M -f 128 -n 100 -w 10
  done
done
# Kernels appear only with two ranks or more (one rank copies): whether the attribution still
# finds every rank's kernel with a kind off, two ranks sharing GPU 0 (their times mean nothing).
for c in "${configs[@]}"; do
  trace "$(name_of "$c")-2ranks" "${c/#all/}" --devices 0,0 -b 4K -e 1M -f 256 -n 20 -w 5
done
python3 - "$out" "$rounds" "${candidates[*]//,/+}" "${optional[@]}" <<'PY'
import json, os, statistics, sys
out, rounds, candidates, optional = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
names = ["all"] + optional + candidates + ["none"]
def load(run):
    path = f"{out}/{run}.json"
    return json.load(open(path)) if os.path.exists(path) else None
def refusal(run):
    lines = open(f"{out}/{run}.err").read().splitlines()
    return "trace refused: " + (lines[0] if lines else "(no message)")
def label(n):
    return {"all": "all", "none": "required kinds only"}.get(n, f"all but {n.replace('+', ', ')}")
def rows(name):  # size -> (host call deltas, ratios) over the rounds
    got = {}
    for r in range(1, rounds + 1):
        run = load(f"{name}-{r}")
        if run is None: return None
        for row in run["sizes"]:
            d, x = got.setdefault(row["bytes"], ([], []))
            d.append(row["host_call_delta_us"]); x.append(row["traced_over_untraced"])
    return got
data = {n: rows(n) for n in names}
sizes = sorted(data["all"])
med = statistics.median
print(f"== CUPTI's cost per operation by kind (trace allreduce, one rank, sync; medians of {rounds} rounds)")
print("  host call growth under tracing, us, median [min-max] of the rounds; traced/untraced time")
print(f"  {'kinds on':28}" + "".join(f"{s:>30}" for s in sizes))
for n in names:
    if data[n] is None:
        print(f"  {label(n):28}  {refusal(n + '-1')}"); continue
    print(f"  {label(n):28}" + "".join(
        f"{med(data[n][s][0]):+7.2f} [{min(data[n][s][0]):+6.1f}/{max(data[n][s][0]):+6.1f}] x{med(data[n][s][1]):.2f}"
        for s in sizes))
print("  cost of each kind: growth with all on minus growth with it off, us")
for n in optional:
    if data[n] is None: continue
    print(f"  {n:28}" + "".join(f"{med(data['all'][s][0]) - med(data[n][s][0]):+30.2f}" for s in sizes))
# A kind is needed when the attribution loses something without it: the operations whose kernel
# (or copy) time it found, the stream dependencies it found, and its warnings.
print("  what the attribution found: operations with a GPU time, with a stream dependency / "
      "operations, warnings")
for ranks, runs in (("one rank", [f"-{r}" for r in range(1, rounds + 1)]), ("2 ranks on GPU 0", ["-2ranks"])):
    print(f"  {ranks}")
    for n in names:
        loaded = [load(n + suffix) for suffix in runs]
        if any(run is None for run in loaded):
            print(f"    {label(n):28}{refusal(n + runs[0])}"); continue
        found = deps = total = warnings = 0
        for run in loaded:
            warnings += len(run["warnings"])
            for row in run["completion_split"]:
                total += row["operations"]
                found += (row["kernel_us"] or {}).get("n", 0)
                deps += (row["stream_dependency_us"] or {}).get("n", 0)
        print(f"    {label(n):28}{found:>7} {deps:>7} / {total:<7}{warnings:>5} warning(s)")
PY
