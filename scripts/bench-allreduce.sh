#!/usr/bin/env bash
# commtool's CUDA-IPC all-reduce kernels beside the reference tools, on the GPU machine, at one
# rank: the `diagnose allreduce` sweep (8 B to 256 MiB, --json), NCCL's own copy from
# nccl-tests' all_reduce_perf, nvbandwidth's device-local copy, Nsight Compute on one one-shot
# and one two-shot launch at 256 B, 256 KiB and 256 MiB (duration, grid, occupancy, DRAM
# throughput, sectors per load and store request), and the kernels' load and store instructions
# from the binary.
# Full logs and JSON go to OUT_DIR; a short table is printed last.
#   scripts/bench-allreduce.sh OUT_DIR ANCHORS_DIR
# ANCHORS_DIR holds the prebuilt nvbandwidth and all_reduce_perf (nccl-tests); a tool missing
# there is left out of the table. COMMTOOL=path measures another build of commtool (its
# profiler plugin is found beside it as in a build tree); BENCH_NCU=0 leaves Nsight Compute out.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-allreduce.sh OUT_DIR ANCHORS_DIR}
anchors=${2:?usage: scripts/bench-allreduce.sh OUT_DIR ANCHORS_DIR}
bin=${COMMTOOL:-build/cli/commtool}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin  # ncu, cuobjdump

"$bin" --version > "$out/version.txt" 2>&1
if [[ -x $anchors/nvbandwidth ]]; then
  "$anchors/nvbandwidth" -t device_local_copy > "$out/nvbandwidth.txt" 2>&1
fi
if [[ -x $anchors/all_reduce_perf ]]; then
  "$anchors/all_reduce_perf" -b 8 -e 256M -f 2 -g 1 -w 10 -n 50 > "$out/all_reduce_perf.txt" 2>&1
fi
"$bin" diagnose allreduce -b 8 -e 256M -f 2 --json --output "$out/sweep.json" \
  2> "$out/sweep.err"

if [[ ${BENCH_NCU:-1} != 0 ]] && command -v ncu > /dev/null; then
  # 256 B, 256 KiB and 256 MiB (the step factor stops at 1024), one measured call each and no
  # warm-up: one launch per kernel and size. The NCCL paths run too (diagnose has no way to leave
  # them out) but launch no kernel the filter matches.
  metrics=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
  metrics+=,launch__waves_per_multiprocessor,sm__maximum_warps_per_active_cycle_pct
  metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
  metrics+=,dram__bytes_read.sum,dram__bytes_write.sum
  metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
  metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
  metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
  ncu --target-processes all -k 'regex:one_shot|two_shot' --metrics "$metrics" --csv \
    --print-units base --log-file "$out/ncu.csv" \
    "$bin" --timeout 120 diagnose allreduce -b 256 -e 256M -f 1024 -n 1 -w 0 \
    --output "$out/ncu-sweep.txt" > "$out/ncu.log" 2>&1
fi
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$bin" 2>/dev/null |
    awk '/Function :/ { f = ($0 ~ /one_shot|two_shot/) } f && /Function :|LDG|STG|MEMBAR|FENCE|ATOM|RED/' \
      > "$out/sass-memory.txt"
fi

python3 - "$out" <<'PY'
import csv, json, os, re, statistics, sys
out = sys.argv[1]
def read(name):
    p = os.path.join(out, name)
    return open(p).read() if os.path.exists(p) else ""
local = None
m = re.search(r"SUM device_local_copy\s+([\d.]+)", read("nvbandwidth.txt"))
if m: local = float(m.group(1))
nccl_tests = {}
for line in read("all_reduce_perf.txt").splitlines():
    f = line.split()
    if len(f) >= 13 and f[0].isdigit() and f[2] == "float":
        nccl_tests[int(f[0])] = float(f[5])  # out-of-place time, us (mean of the batch)
sweep = json.loads(read("sweep.json") or "{}")
paths = {p["name"]: {q["bytes"]: q for q in p["points"]} for p in sweep.get("paths", [])}
print(f"== bench-allreduce ({read('version.txt').splitlines()[0] if read('version.txt') else '?'})")
print(f"device-local copy (nvbandwidth, bytes counted once): {local} GB/s"
      + (f"; read + written: {2 * local:.0f} GB/s" if local else ""))
print("one rank; time us median [min-max]; rw GB/s = bytes the kernel read + wrote / median "
      "(NCCL: its copy's 2 x size); % = of nvbandwidth's read + written rate")
def cell(q):
    t = q["time_us"]
    return f"{t['median']:.1f} [{t['min']:.1f}-{t['max']:.1f}]"
def rate(q, nbytes):
    return nbytes / q["time_us"]["median"] / 1e3
hdr = (f"{'size':>10} {'nccl-tests':>10} {'NCCL default':>22} {'rw GB/s':>8} "
       f"{'IPC one-shot':>22} {'rw GB/s':>8} {'%':>5} {'IPC two-shot':>22} {'rw GB/s':>8} {'%':>5}")
print(hdr)
for b in sorted(paths.get("NCCL default", {})):
    nd = paths["NCCL default"][b]
    row = f"{b:>10} {nccl_tests.get(b, float('nan')):>10.1f} {cell(nd):>22} {rate(nd, 2 * b):>8.0f}"
    for name in ("IPC one-shot", "IPC two-shot"):
        q = paths.get(name, {}).get(b)
        if q is None or q["status"] != "ok":
            row += f" {'-':>22} {'-':>8} {'-':>5}"
            continue
        rw = q.get("kernel_bytes_read_written")
        gbps = rate(q, rw) if rw else float("nan")
        pct = 100 * gbps / (2 * local) if local and rw else float("nan")
        row += f" {cell(q):>22} {gbps:>8.0f} {pct:>5.0f}"
    print(row)
rows = list(csv.reader(l for l in read("ncu.csv").splitlines() if l.startswith('"')))
if rows:
    head = rows[0]
    col = {h: i for i, h in enumerate(head)}
    per = {}
    for r in rows[1:]:
        k = re.search(r"(one_shot|two_shot)(<[^>]*>)?", r[col["Kernel Name"]])
        key = (r[col["ID"]], "".join(k.groups("")) if k else r[col["Kernel Name"]][:40])
        per.setdefault(key, {})[r[col["Metric Name"]]] = r[col["Metric Value"]]
    print("\nncu (one launch each, in launch order: one-shot then two-shot at 256 B, 256 KiB, 256 MiB)")
    for (i, k), m in sorted(per.items(), key=lambda kv: int(kv[0][0])):
        g = lambda n: m.get(n, "?")
        def ratio(a, b):
            try: return f"{float(g(a)) / float(g(b)):.1f}"
            except (ValueError, ZeroDivisionError): return "?"
        print(f"  #{i} {k}: {g('gpu__time_duration.sum')} ns, grid {g('launch__grid_size')} x "
              f"{g('launch__block_size')}, {g('launch__registers_per_thread')} regs, waves "
              f"{g('launch__waves_per_multiprocessor')}, occupancy achieved "
              f"{g('sm__warps_active.avg.pct_of_peak_sustained_active')}% of theoretical "
              f"{g('sm__maximum_warps_per_active_cycle_pct')}%, DRAM "
              f"{g('dram__throughput.avg.pct_of_peak_sustained_elapsed')}% of peak (read "
              f"{g('dram__bytes_read.sum')} B, written {g('dram__bytes_write.sum')} B), sectors "
              f"per request ld {ratio('l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum', 'l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum')}"
              f" st {ratio('l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum', 'l1tex__t_requests_pipe_lsu_mem_global_op_st.sum')}")
sass = read("sass-memory.txt")
if sass:
    ops = re.findall(r"\b(LDG\S*|STG\S*)", sass)
    print("\nglobal load/store instructions in the kernels:",
          ", ".join(f"{o} x{ops.count(o)}" for o in sorted(set(ops))))
PY
