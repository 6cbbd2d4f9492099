#!/usr/bin/env bash
# What each CUPTI activity kind costs `commtool trace`, on the GPU machine: the same traced run
# with every kind on, with each optional kind left off in turn (COMMTOOL_CUPTI_KINDS_OFF), and
# with all of them off (CUDA events and external correlation stay on: the harness needs them),
# in alternating rounds. A kind's cost per operation is the host call's growth under tracing with
# it on minus that with it off; traced/untraced shows what reaches the measured time.
# Full JSON in OUT_DIR; the table is printed last.
#   scripts/bench-cupti.sh OUT_DIR [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-cupti.sh OUT_DIR [ROUNDS]}
rounds=${2:-3}
mkdir -p "$out"
bin=build/cli/commtool
optional=(kernel memcpy memset runtime driver sync marker)
configs=(all "${optional[@]}" "$(IFS=,; echo "${optional[*]}")")
for round in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    off=$([[ $c == all ]] && echo "" || echo "$c")
    name=$([[ $c == *,* ]] && echo none || echo "$c")
    COMMTOOL_CUPTI_KINDS_OFF=$off "$bin" trace allreduce -b 8 -e 16M -f 128 -n 100 -w 10 \
      --mode sync --batches 0 --json --output "$out/$name-$round.json"
  done
done
python3 - "$out" "$rounds" "${optional[@]}" <<'PY'
import json, statistics, sys
out, rounds, optional = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
names = ["all"] + optional + ["none"]
def rows(name):  # size -> (host call deltas, ratios) over the rounds
    got = {}
    for r in range(1, rounds + 1):
        for row in json.load(open(f"{out}/{name}-{r}.json"))["sizes"]:
            d, x = got.setdefault(row["bytes"], ([], []))
            d.append(row["host_call_delta_us"]); x.append(row["traced_over_untraced"])
    return got
data = {n: rows(n) for n in names}
sizes = sorted(data["all"])
med = statistics.median
print(f"== CUPTI's cost per operation by kind (trace allreduce, one rank, sync; medians of {rounds} rounds)")
print("  host call growth under tracing, us (and traced/untraced time)")
print(f"  {'kinds on':28}" + "".join(f"{s:>18}" for s in sizes))
for n in names:
    label = {"all": "all", "none": "events + correlation only"}.get(n, f"all but {n}")
    print(f"  {label:28}" + "".join(
        f"{med(data[n][s][0]):+9.2f} (x{med(data[n][s][1]):.3f})" for s in sizes))
print("  cost of each kind: growth with all on minus growth with it off, us")
for n in optional:
    print(f"  {n:28}" + "".join(f"{med(data['all'][s][0]) - med(data[n][s][0]):+18.2f}" for s in sizes))
PY
