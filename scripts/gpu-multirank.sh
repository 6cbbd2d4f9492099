#!/usr/bin/env bash
# The multi-rank checks on one GPU (issue: several ranks per GPU): the GPU tests that run 2 and
# 4 ranks on GPU 0 (every collective, mode and output; the profiler plugin against NCCL's own
# TUNING lines; diagnose allreduce and ep; probe --ipc; injected faults in both communicator
# modes), then blocking against non-blocking communicators side by side (bench-comm.sh).
# Full logs go to OUT_DIR; a short table is printed last.
#   scripts/gpu-multirank.sh [OUT_DIR]          (after building here)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-multirank-out}}
mkdir -p "$out"
if [[ ! -e /work/main/build && $(pwd) != /work/main ]]; then
  mkdir -p /work && ln -sfn "$(pwd)" /work/main
fi
declare -A result
step() {  # step NAME COMMAND...
  local name=$1; shift
  echo "=== $name: $*" >> "$out/multirank.log"
  if "$@" >> "$out/multirank.log" 2>&1; then result[$name]=ok; else result[$name]="FAILED (rc $?)"; fi
}
for suite in 'Ranks/GpuMultiRank.*' 'Modes/GpuFaults.*'; do
  step "$suite" build/tests/gpu_tests --gtest_filter="$suite"
done
step bench-comm bash -c "scripts/bench-comm.sh $out/comm > $out/bench-comm.txt"
echo "== gpu-multirank summary ($(date -u +%Y-%m-%dT%H:%MZ))"
for k in 'Ranks/GpuMultiRank.*' 'Modes/GpuFaults.*' bench-comm; do
  printf '  %-22s %s\n' "$k" "${result[$k]:-not run}"
done
grep -E '^\[  (FAILED|PASSED|  OK) |^\[==========\]' "$out/multirank.log" | tail -40
cat "$out/bench-comm.txt" 2>/dev/null
fails=0
for v in "${result[@]}"; do [[ $v == ok ]] || fails=1; done
exit $fails
