#!/usr/bin/env bash
# The figures `commtool diagnose ep` owes, on the GPU machine, in one go (after building here):
# the issue's configuration (4096 tokens per rank, hidden 7168, 64 experts, top-8) under
# uniform, zipf:1.2 and hot:2:0.5 routing, each with the what-if --replicate 2, on every GPU
# here (one rank per GPU). At one GPU every exchange is a local copy through NCCL and the
# report says so; the skew's cost needs 2, 4 or 8 GPUs (--devices picks them).
# Full reports go to OUT_DIR (text, JSON, heat maps); a short table is printed last.
#   scripts/bench-ep.sh OUT_DIR [--devices LIST]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-ep.sh OUT_DIR [--devices LIST]}
shift
mkdir -p "$out"
bin=build/cli/commtool
for skew in uniform zipf:1.2 hot:2:0.5; do
  name=${skew//:/-}
  args=(diagnose ep --tokens 4096 --hidden 7168 --experts 64 --topk 8 --skew "$skew"
        --replicate 2 -n 20 -w 5 "$@")
  "$bin" "${args[@]}" --heatmap "$out/$name.svg" --output "$out/$name.txt"
  "$bin" "${args[@]}" --json --output "$out/$name.json"
done

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'skew':<10} {'ranks':>5} {'imbalance':>9} {'traffic':<10} {'dispatch us':>26} "
      f"{'combine us':>26} {'x uniform':>9}")
for skew in ("uniform", "zipf-1.2", "hot-2-0.5"):
    d = json.load(open(f"{out}/{skew}.json"))
    s = {x["name"]: x for x in d["scenarios"]}
    for name, x in s.items():
        t = lambda p: "{median:.1f} [{min:.1f}-{max:.1f}]".format(**x[p]["time_us"])
        ratio = x["dispatch"]["time_us"]["median"] / s["uniform"]["dispatch"]["time_us"]["median"]
        print(f"{skew:<10} {d['config']['ranks']:>5} {d['metrics']['imbalance']:>9.2f} {name:<10} "
              f"{t('dispatch'):>26} {t('combine'):>26} {ratio:>9.2f}")
    print("  " + d["findings"][0])
PY
