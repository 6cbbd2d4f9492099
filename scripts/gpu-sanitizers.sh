#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) over every kernel commtool launches, each
# through the GPU tests that launch it; one log per tool under OUT_DIR, a line per tool last.
# Fails on the first finding (compute-sanitizer's --error-exitcode) or a failed test.
#   scripts/gpu-sanitizers.sh [OUT_DIR [TOOL...]]   (on the GPU machine, after a release build)
# TOOL: memcheck, racecheck, synccheck (all three unless named); each runs at most
# SANITIZER_TIMEOUT seconds (900 unless set).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${1:-gpu-sanitizers-out}
shift $(($# > 0 ? 1 : 0))
tools=("$@")
((${#tools[@]})) || tools=(memcheck racecheck synccheck)
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
command -v compute-sanitizer > /dev/null || { echo "gpu-sanitizers.sh: no compute-sanitizer" >&2; exit 2; }
# kernels.cu: GpuVerify, GpuHostDevice; collective_data.cu: GpuCollectiveData and the NCCL
# check; ep_exchange.cu: GpuEp's every-scenario run; ipc_allreduce.cu: two processes on one GPU.
tests='GpuVerify.*:GpuHostDevice.OddSizeIsCopiedWhole:GpuHostDevice.LatencyRunsAndVerifies'
tests+=':GpuCollectiveData.*:*GpuNccl.*:GpuEp.EveryScenarioAndPhaseRunsVerifiedOnEveryRank'
tests+=':GpuIpcAllReduce.TwoProcessesOnOneGpu'
# --report-api-errors no: NCCL's communicator setup asks cudaFuncGetAttributes about kernels
# built for other architectures and expects error 209 back; commtool checks every CUDA call
# it makes itself, and a failed one fails its test. What is reported is then what the tool
# finds in the kernels: out-of-bounds or misaligned accesses, races, barrier misuse.
status=0
for tool in "${tools[@]}"; do
  start=$SECONDS
  COMMTOOL_NO_START_GATE=1 timeout "${SANITIZER_TIMEOUT:-900}" compute-sanitizer --target-processes all --tool "$tool" \
    --report-api-errors no --error-exitcode 9 build/tests/gpu_tests --gtest_filter="$tests" > "$out/$tool.log" 2>&1
  rc=$?
  summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool.log" | sort | uniq -c | tr -s ' ' | paste -sd';')
  passed=$(grep -c '^\[       OK \]' "$out/$tool.log")
  printf '%-9s rc %-3s %3s tests passed  %4s s  %s\n' "$tool" "$rc" "$passed" $((SECONDS - start)) "$summary"
  ((rc == 0)) || status=1
done
exit $status
