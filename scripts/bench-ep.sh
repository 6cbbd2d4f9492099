#!/usr/bin/env bash
# The figures `commtool diagnose ep` owes, on the GPU machine, in one go (after building here):
# the issue's configuration (4096 tokens per rank, hidden 7168, 64 experts, top-8) under
# uniform, zipf:1.2 and hot:2:0.5 routing, each with the what-if --replicate 2, on every GPU
# here (one rank per GPU). At one GPU every exchange is a local copy through NCCL and the
# report says so; the skew's cost needs 2, 4 or 8 GPUs (--devices picks them). zipf:1.2 runs
# once more with --trace: the CUPTI split of every phase and a Perfetto trace (trace.json).
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
"$bin" diagnose ep --tokens 4096 --hidden 7168 --experts 64 --topk 8 --skew zipf:1.2 \
  --replicate 2 -n 20 -w 5 "$@" --trace "$out/trace.json" --output "$out/traced.txt"
"$bin" diagnose ep --tokens 4096 --hidden 7168 --experts 64 --topk 8 --skew zipf:1.2 \
  --replicate 2 -n 20 -w 5 "$@" --trace "$out/trace.json" --json --output "$out/traced.json"

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
    f = d["findings"][0]
    print(f"  {f['severity']} [{f['code']}] {f['message']} ({f['evidence']})")

d = json.load(open(f"{out}/traced.json"))
print(f"\nCUPTI split, zipf:1.2 (--trace; per exchange the slowest rank, median [min-max] us)")
print(f"{'traffic':<10} {'phase':<8} {'host enqueue':>20} {'input wait':>20} {'kernel':>20} "
      f"{'start spread':>20} {'traced/untraced':>15}")
cell = lambda s: "-" if s is None else "{median:.1f} [{min:.1f}-{max:.1f}]".format(**s)
for r in d["split"]["rows"]:
    print(f"{r['scenario']:<10} {r['phase']:<8} {cell(r['host_enqueue_us']):>20} "
          f"{cell(r['input_wait_us']):>20} {cell(r['kernel_us']):>20} "
          f"{cell(r['start_spread_us']):>20} {r['traced_over_untraced']:>15.3f}")
for w in d["split"]["warnings"]:
    print("  warning: " + w)
PY
