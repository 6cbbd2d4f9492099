#!/usr/bin/env bash
# Blocking against non-blocking NCCL communicators (--comm), side by side, on the GPU machine:
# what a framework's blocking call costs on the host against NCCL's hand-off to a thread of its
# own, untraced and under CUPTI. trace allreduce at one rank (sync mode, the traced/untraced
# pair per size), diagnose ep --cupti at one rank (the issue configuration), and trace at two
# ranks sharing GPU 0 (host figures only: the GPU times of a shared GPU say nothing).
# Full JSON goes to OUT_DIR; a short table is printed last.
#   scripts/bench-comm.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-comm.sh OUT_DIR}
mkdir -p "$out"
bin=build/cli/commtool
for comm in blocking nonblocking; do
  "$bin" --comm "$comm" trace allreduce -b 8 -e 128M -f 128 -n 50 -w 10 --mode sync --json \
    --output "$out/trace-1-$comm.json"
  "$bin" --comm "$comm" diagnose ep --tokens 4096 --hidden 7168 --experts 64 --topk 8 \
    --skew zipf:1.2 -n 20 -w 5 --cupti --trace "$out/ep-trace-$comm.json" --json \
    --output "$out/ep-1-$comm.json"
  "$bin" --devices 0,0 --comm "$comm" trace allreduce -b 1K -e 1M -f 1024 -n 10 -w 2 \
    --mode sync --json --output "$out/trace-2-$comm.json"
done

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
cell = lambda s: "-" if s is None else "{median:.1f} [{min:.1f}-{max:.1f}]".format(**s)
print("trace allreduce, sync mode (us, median [min-max]; host call from CUPTI's traced pass)")
print(f"{'ranks':>5} {'comm':<12} {'size':>10} {'untraced time':>24} {'traced time':>24} "
      f"{'traced host call':>24} {'traced/untraced':>15}")
for ranks in (1, 2):
    for comm in ("blocking", "nonblocking"):
        d = json.load(open(f"{out}/trace-{ranks}-{comm}.json"))
        calls = {r["bytes"]: r["host_call_us"] for r in d["completion_split"]}
        for s in d["sizes"]:
            ratio = s["traced_over_untraced"]
            print(f"{ranks:>5} {comm:<12} {s['bytes']:>10} {cell(s['untraced_time_us']):>24} "
                  f"{cell(s['time_us']):>24} {cell(calls.get(s['bytes'])):>24} "
                  f"{'-' if ratio is None else f'x{ratio:.3f}':>15}")
print("\ndiagnose ep --cupti, one rank, routed traffic (us, median [min-max])")
print(f"{'comm':<12} {'phase':<9} {'untraced exchange':>24} {'untraced enqueue':>24} "
      f"{'traced enqueue':>24} {'kernel':>24} {'traced/untraced':>15} {'NCCL thread':>11}")
for comm in ("blocking", "nonblocking"):
    d = json.load(open(f"{out}/ep-1-{comm}.json"))
    times = {x["name"]: x for x in d["scenarios"]}["routed"]
    for r in d["split"]["rows"]:
        if r["scenario"] != "routed":
            continue
        ratio = r["traced_over_untraced"]
        print(f"{comm:<12} {r['phase']:<9} {cell(times[r['phase']]['time_us']):>24} "
              f"{cell(times[r['phase']]['host_enqueue_us']):>24} {cell(r['host_enqueue_us']):>24} "
              f"{cell(r['kernel_us']):>24} {'-' if ratio is None else f'x{ratio:.2f}':>15} "
              f"{r['launched_by_nccl_thread']:>11}")
PY
