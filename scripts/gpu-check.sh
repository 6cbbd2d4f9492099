#!/usr/bin/env bash
# Everything the GPU machine owes in one go: the GPU tests (with several ranks on one GPU through
# gpu-multirank.sh), the topo report in every format, a check that the binary built on Debian 12
# finds all its libraries there, topo's speed beside `nvidia-smi topo -m`, the benchmarks
# (bench-probe.sh, bench-trace.sh, bench-cupti.sh, bench-ep.sh),
# `commtool record` against a real PyTorch job (gpu-record.sh), a sysfs capture and NCCL's own
# topology dump of the machine. Full logs
# go to $OUT (or the directory given); a short table is printed last.
#   scripts/gpu-check.sh [OUT_DIR] [ANCHORS_DIR]   (after building here: cmake --preset release ...)
# ANCHORS_DIR holds the prebuilt nccl-tests binaries that gpu-record.sh records as a job that is
# not PyTorch, and nvbandwidth and all_reduce_perf that bench-allreduce.sh sets the IPC
# all-reduce kernels beside; without it those steps are left out.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-check-out}}
anchors=${2:-${ANCHORS:-}}
mkdir -p "$out"
log="$out/log.txt"
: > "$log"
bin=build/cli/commtool
export PATH=$PATH:/usr/local/cuda/bin  # compute-sanitizer
declare -A result

# ctest files and the test binaries carry the absolute path of the build machine's checkout.
if [[ ! -e /work/main/build && $(pwd) != /work/main ]]; then
  mkdir -p /work && ln -sfn "$(pwd)" /work/main
fi

step() {  # step NAME COMMAND...: runs it, logs it, records pass/fail
  local name=$1; shift
  { echo "=== $name: $*"; } >> "$log"
  if "$@" >> "$log" 2>&1; then result[$name]=ok; else result[$name]="FAILED (rc $?)"; fi
}

{ echo "=== machine"; date -u; uname -a; nvidia-smi; nvidia-smi topo -m; } >> "$log" 2>&1
step version "$bin" --version
step ldd bash -c "ldd $bin && ! ldd $bin | grep -q 'not found'"
step topo bash -c "$bin topo | tee $out/topo.txt"
step topo-json bash -c "$bin topo --json > $out/topo.json"
step topo-dot bash -c "$bin topo --dot"
step topo-verbose "$bin" -v topo --output /tmp/topo-verbose.txt
# The GPU tests but the multi-rank ones, which gpu-multirank.sh runs below with its benchmark.
step gpu-tests build/tests/gpu_tests --gtest_filter='-Ranks/GpuMultiRank.*:Modes/GpuFaults.*'
step multirank bash -c "scripts/gpu-multirank.sh $out/multirank > $out/multirank.txt"
step probe bash -c "$bin probe | tee $out/probe.txt"
for n in 2 3 4; do
  placement=$(python3 -c "print(','.join(['0'] * $n))")
  step ipc-$n "$bin" --devices "$placement" probe --ipc --size 16MiB --iters 2 --batches 2 --pingpong-rounds 50
done
step memcheck bash -c "COMMTOOL_NO_START_GATE=1 compute-sanitizer --target-processes all --tool memcheck --error-exitcode 9 $bin probe --h2d --latency --size 4MiB --iters 1 --batches 1 > /dev/null"
step bench bash -c "scripts/bench-probe.sh /tmp/bench '$anchors' > $out/bench.txt"
step bench-trace bash -c "scripts/bench-trace.sh $out/trace '$anchors' > $out/bench-trace.txt"
step bench-cupti bash -c "scripts/bench-cupti.sh $out/cupti 2 > $out/bench-cupti.txt"
step bench-ep bash -c "scripts/bench-ep.sh $out/ep > $out/bench-ep.txt"
step doctor bash -c "scripts/gpu-doctor.sh $out/doctor > $out/doctor.txt"
step diagnose-allreduce "$bin" diagnose allreduce --plot "$out/allreduce.svg" --output "$out/allreduce.txt"
if [[ -n $anchors ]]; then
  step bench-allreduce bash -c "scripts/bench-allreduce.sh $out/allreduce-bench '$anchors' > $out/bench-allreduce.txt"
fi
step record bash -c "scripts/gpu-record.sh $out/record '$anchors' > $out/record.txt"
# compute-sanitizer's memcheck, racecheck and synccheck over every kernel commtool has: the
# verify kernels of probe (probes/base/cuda/kernels.cu), the fill/check/sleep kernels of the
# collectives (tracing/collectives/collective_data.cu), the EP exchange's (tracing/ep) and the
# IPC all-reduce's (tracing/allreduce), each through the GPU tests that launch it.
step kernel-sanitizers scripts/gpu-sanitizers.sh "$out/sanitizers"

# NCCL's own view, from a one-rank communicator, read back by commtool.
step nccl-dump env NCCL_TOPO_DUMP_FILE="$out/nccl-topo.xml" NCCL_NVLS_ENABLE=0 python3 -c '
import os, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
t = torch.ones(1024, device="cuda"); dist.all_reduce(t); torch.cuda.synchronize()
assert t[0].item() == 1.0
dist.destroy_process_group()'
step topo-nccl-xml "$bin" topo --nccl-xml "$out/nccl-topo.xml"

rm -rf /tmp/sysfs-capture
step capture bash -c "scripts/capture-sysfs.sh /tmp/sysfs-capture && cp /tmp/sysfs-capture.tar.gz $out/sysfs-capture.tar.gz"
step topo-capture "$bin" topo --sysfs-root /tmp/sysfs-capture

# Wall time of whole runs, as a user sees it: commtool topo against nvidia-smi topo -m.
python3 - "$bin" > "$out/timing.txt" 2>> "$log" <<'PY'
import statistics, subprocess, sys, time
def bench(cmd, n=30):
    subprocess.run(cmd, capture_output=True)  # warm the page cache
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); r = subprocess.run(cmd, capture_output=True); ts.append((time.perf_counter() - t0) * 1e3)
        assert r.returncode == 0, (cmd, r.stderr)
    return ts
rows = [("commtool topo", bench([sys.argv[1], "topo"])),
        ("commtool topo --json", bench([sys.argv[1], "topo", "--json"])),
        ("nvidia-smi topo -m", bench(["nvidia-smi", "topo", "-m"]))]
print(f"{'command':24} {'n':>3} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
for name, ts in rows:
    print(f"{name:24} {len(ts):3d} {statistics.median(ts):10.1f} {min(ts):8.1f} {max(ts):8.1f}")
PY
cat /tmp/topo-verbose.txt >> "$log" 2>/dev/null

echo
echo "== gpu-check summary ($(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
for k in version ldd topo topo-json topo-dot topo-verbose gpu-tests multirank probe ipc-2 ipc-3 ipc-4 memcheck bench bench-trace bench-cupti bench-ep doctor diagnose-allreduce bench-allreduce record kernel-sanitizers nccl-dump topo-nccl-xml capture topo-capture; do
  printf '  %-14s %s\n' "$k" "${result[$k]:-not run}"
done
echo
cat "$out/timing.txt"
echo
cat "$out/bench.txt" 2>/dev/null
echo
cat "$out/bench-trace.txt" 2>/dev/null
echo
cat "$out/bench-cupti.txt" 2>/dev/null
echo
cat "$out/bench-ep.txt" 2>/dev/null
echo
cat "$out/bench-allreduce.txt" 2>/dev/null
echo
cat "$out/doctor.txt" 2>/dev/null
echo
cat "$out/multirank.txt" 2>/dev/null
echo
cat "$out/record.txt" 2>/dev/null
fails=0
for v in "${result[@]}"; do [[ $v == ok ]] || fails=1; done
exit $fails
