#!/usr/bin/env bash
# The figures `commtool trace` owes, on the GPU machine, in one go (after building here):
#  - the bare-loop baseline: untraced trace times beside bench_nccl_bare's at 8 B and 256 MiB
#    (the same producer -> NCCL stream -> events structure, without workers, checks or CUPTI),
#    five alternating rounds;
#  - tracing's cost: traced/untraced per size;
#  - the all-reduce table at 1 KiB, 1 MiB, 64 MiB and 256 MiB in every mode (blocking-wait
#    polling every 10 ms and synchronizing), and --stream-scope over 40 samples at 256 MiB;
#  - how fast `commtool report` re-analyses saved records (bench_report);
#  - where ANCHORS_DIR holds nccl-tests' all_reduce_perf: it and `trace --no-cupti` at the same
#    sizes, on the same NCCL library, nccl-tests' batch mean beside commtool's batch statistic
#    (the same statistic) and its per-operation median, with the ratios.
# Full outputs go to OUT_DIR; a short table is printed last.
#   scripts/bench-trace.sh OUT_DIR [ANCHORS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-trace.sh OUT_DIR [ANCHORS_DIR]}
anchors=${2:-${ANCHORS:-}}
mkdir -p "$out"
bin=build/cli/commtool
torch_nccl=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2
# Compare with what PyTorch measured (PERFORMANCE.md): use PyTorch's own NCCL where it is installed.
if [[ -z ${COMMTOOL_NCCL_LIBRARY:-} && -e $torch_nccl ]]; then export COMMTOOL_NCCL_LIBRARY=$torch_nccl; fi

# Saved runs (thousands of records) stay out of OUT_DIR; their reports go in.
saves=$(mktemp -d)
trap 'rm -rf "$saves"' EXIT

run() {  # run NAME ARGS...: the JSON to OUT/NAME.json, the saved run's report to OUT/NAME.txt
  local name=$1; shift
  "$bin" "$@" --json --output "$out/$name.json" --save "$saves/$name"
  "$bin" report "$saves/$name" > "$out/$name.txt"
}

# Five alternating rounds: at 8 B the medians of separate processes move by 20-40% from one
# run to the next, more than the difference looked for, so one pair would prove nothing.
: > "$out/bare.txt"
for round in 1 2 3 4 5; do
  for b in 8 268435456; do
    echo "$round $(build/tests/bench_nccl_bare $b 200)" >> "$out/bare.txt"
    "$bin" trace allreduce -b $b -e $b -n 200 -w 20 --mode sync --no-cupti --json \
      --output "$out/untraced-$b-$round.json"
  done
done
run cost trace allreduce -b 8 -e 256M -f 8 -n 50 -w 10 --mode sync
run small trace allreduce -b 1K -e 1M -f 1024 -n 20 -w 5 --mode all --poll-ms 10,0 \
  --trace "$out/small-trace.json"
run large trace allreduce -b 64M -e 256M -f 4 -n 20 -w 5 --mode all --poll-ms 10,0 \
  --stream-scope --scope-samples 40
# Side by side with nccl-tests: 20 operations a batch, 10 warm-up, as both are told.
"$bin" trace allreduce -b 8 -e 256M -f 8 -n 20 -w 10 --batches 5 --mode sync --no-cupti --json \
  --output "$out/side.json"
if [[ -n $anchors && -x $anchors/all_reduce_perf ]]; then
  nccl_dir=$(dirname "${COMMTOOL_NCCL_LIBRARY:-/usr/lib/x86_64-linux-gnu/libnccl.so.2}")
  LD_LIBRARY_PATH="$nccl_dir:${LD_LIBRARY_PATH:-}" "$anchors/all_reduce_perf" -b 8 -e 256M -f 8 \
    -g 1 -w 10 -n 20 > "$out/nccl-tests.txt" 2>&1
fi
build/tests/bench_report 2000000 > "$out/report-speed.txt"
# The whole of `commtool report DIR` (run.json, every check, analysis), 2.1 M records.
build/tests/bench_report 125000 1 > "$out/report-saved-speed.txt"

python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def load(n): return json.load(open(f"{out}/{n}.json"))
def s(x): return "-" if x is None else f"{x['median']:.1f} [{x['min']:.1f}-{x['max']:.1f}]"
print("== bare loop vs untraced trace (CUDA events around the call; per round the median of 200 "
      "operations, us; ratio trace/bare per round, median [min-max] of the rounds)")
bare = {}  # size -> round -> median
for line in open(f"{out}/bare.txt"):
    f = line.split()
    bare.setdefault(int(f[1]), {})[int(f[0])] = float(f[3])
for size, by_round in sorted(bare.items()):
    rounds = sorted(by_round)
    plain = [by_round[r] for r in rounds]
    traced = [load(f"untraced-{size}-{r}")["sizes"][0]["time_us"]["median"] for r in rounds]
    ratios = [t / b for t, b in zip(traced, plain)]
    print(f"  {size:>10} B  bare {' '.join(f'{x:.2f}' for x in plain)}"
          f"  trace {' '.join(f'{x:.2f}' for x in traced)}"
          f"  ratio {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")
print("== tracing cost (traced/untraced time, host call delta)")
for row in load("cost")["sizes"] + load("small")["sizes"] + load("large")["sizes"]:
    print(f"  {row['bytes']:>10} B  x{row['traced_over_untraced']:.3f}  host call "
          f"{row['host_call_delta_us']:+.2f} us  time {s(row['time_us'])}  busbw {row['busbw_gbps']:.1f}")
print("== completion split (traced; median [min-max] us)")
print(f"  {'size':>10} {'mode':<22} {'host call':>20} {'wait':>22} {'stream dep':>22} {'complete':>9} {'kernel':>22}")
for name in ("small", "large"):
    for r in load(name)["completion_split"]:
        mode = r["mode"] + (f" {r['poll_ms']}ms" if r["mode"] == "blocking-wait" else "")
        print(f"  {r['bytes']:>10} {mode:<22} {s(r['host_call_us']):>20} {s(r['host_wait_us']):>22} "
              f"{s(r['stream_dependency_us']):>22} {r['complete_at_wait_return']:>4}/{r['operations']:<4} {s(r['kernel_us']):>22}")
print("== stream scope (256 MiB, 100 ms GPU sleep)")
for r in load("large")["stream_scope"]:
    mode = r["mode"] + (f" {r['poll_ms']}ms" if r["mode"] == "blocking-wait" else "")
    print(f"  {mode:<22} B first {r['b_before_a']}/{r['samples']}  host wait {s(r['host_wait_us'])} us"
          f"  complete at return {r['complete_at_wait_return']}/{r['samples']}")
print("== commtool report speed"); print(open(f"{out}/report-speed.txt").read())
import os, re
side = load("side")
if os.path.exists(f"{out}/nccl-tests.txt"):
    text = open(f"{out}/nccl-tests.txt").read()
    # "nccl-library=22809": the NCCL it ran on, as NCCL_VERSION_CODE (2.28.9).
    code = re.search(r"nccl-library=(\d+)", text)
    code = int(code.group(1)) if code else None
    version = f"{code // 10000}.{code % 10000 // 100}.{code % 100}" if code else "unknown"
    tests = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[2] == "float":
            tests[int(f[0])] = (float(f[5]), float(f[6]))  # out-of-place time us, algbw
    print(f"== trace --no-cupti beside nccl-tests (NCCL {side['nccl_version']} and "
          f"{version}; time us; nccl-tests: mean of a batch of 20)")
    print(f"  {'size':>10} {'nccl-tests':>10} {'batch median [min-max]':>26} {'ratio':>6} "
          f"{'per-op median':>14} {'ratio':>6} {'algbw':>7} {'ratio':>6}")
    for row in side["sizes"]:
        t = tests.get(row["bytes"])
        if not t or not row["batch_us"]:
            continue
        b = row["batch_us"]
        algbw = row["bytes"] / b["median"] / 1e3
        print(f"  {row['bytes']:>10} {t[0]:10.2f} {s(b):>26} {b['median'] / t[0]:6.3f} "
              f"{row['time_us']['median']:14.2f} {row['time_us']['median'] / t[0]:6.3f} "
              # nccl-tests prints algbw to 0.01 GB/s: no ratio below 1 GB/s.
              f"{algbw:7.2f} " + (f"{algbw / t[1]:6.3f}" if t[1] >= 1 else f"{'-':>6}"))
PY
