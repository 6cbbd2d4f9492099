#!/usr/bin/env bash
# Cross-rank verdicts against a real PyTorch job whose ranks disagree (tests/torch/diverge.py), 3
# ranks on one GPU: each case under `commtool record --hang-timeout 8 --kill-on-hang`, then
# `commtool report` of it (verdict and exit code); and each case run alone with Flight Recorder
# on, NCCL's logs, and NCCL's RAS asked while it hangs, to keep what a job commtool did not launch
# leaves (fixtures), with PyTorch's own Flight Recorder analyser run over the dumps.
#   scripts/gpu-diverge.sh [OUT_DIR]       PARTS: record,alone,trace (default all)
# CASES: the cases (default every one of diverge.py's); ALONE_CASES: those run alone (default
# CASES). PACK=FILE: after each case everything is packed into FILE (a .tgz), for a machine that
# gives back few files. A table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-${OUT:-gpu-diverge-out}}")
mkdir -p "$out"
bin=$(pwd)/build/cli/commtool
job=(python3 "$(pwd)/tests/torch/diverge.py" --nproc 3)
cases=${CASES:-clean func gather size dtype redop root skip extra exit stop sleep}
parts=${PARTS:-record,alone,trace}
export NCCL_NVLS_ENABLE=0
alone_cases=${ALONE_CASES:-$cases}
table=()
now() { date +%s.%N; }
pack() {  # everything so far into $PACK, the table beside the logs
  printf '%s\n' "${table[@]}" > "$out/table.txt"
  [[ -n ${PACK:-} ]] && tar -czf "$PACK.tmp" -C "$(dirname "$out")" "$(basename "$out")" && mv "$PACK.tmp" "$PACK"
}
{ date -u; nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } > "$out/machine.txt" 2>&1

if [[ $parts == *record* ]]; then
  for c in $cases; do
    d=$out/rec-$c
    rm -rf "$d"
    t0=$(now)
    timeout 120 "$bin" record --save "$d" --hang-timeout 8 --kill-on-hang -- "${job[@]}" --case "$c" \
      > "$out/rec-$c.out" 2> "$out/rec-$c.err"
    rc=$?
    t1=$(now)
    "$bin" report "$d" > "$out/rec-$c-report.txt" 2>&1; rrc=$?
    "$bin" report "$d" --json > "$out/rec-$c-report.json" 2>/dev/null
    first=$(grep -m1 -E 'MISSING|DISAGREE|BEHIND|HELD|BELOW|WAITING|MISMATCH|STOPPED|No hang|STRAGGLER' "$out/rec-$c-report.txt" | cut -c1-150)
    table+=("$(printf 'record %-7s rc %-3s %5.1f s  report rc %s  %s' "$c" "$rc" "$(awk "BEGIN{print $t1-$t0}")" "$rrc" "$first")")
    pack
  done
fi

if [[ $parts == *alone* ]]; then
  for c in $alone_cases; do
    d=$out/alone-$c
    rm -rf "$d"; mkdir -p "$d/fr" "$d/ras" "$d/nccl"
    t0=$(now)
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL,NET,ENV NCCL_DEBUG_FILE="$d/nccl/nccl.%h.%p.log" \
      timeout 150 "${job[@]}" --case "$c" --fr "$d/fr" --ras "$d/ras" --pg-timeout 15 \
      > "$d/stdout.txt" 2> "$d/stderr.txt"
    rc=$?
    t1=$(now)
    (cd "$d" && for p in nccl_trace_rank_ rank-; do
       echo "=== fr_trace --prefix $p"
       timeout 60 python3 -m torch.distributed.flight_recorder.fr_trace fr -p "$p" 2>&1 | tail -60
       timeout 60 python3 -m torch.distributed.flight_recorder.fr_trace fr -p "$p" -j 2>&1 | tail -60
     done) > "$d/fr_trace.txt" 2>&1
    table+=("$(printf 'alone  %-7s rc %-3s %5.1f s  fr files %s  ras %s B  logs %s' "$c" "$rc" "$(awk "BEGIN{print $t1-$t0}")" \
      "$(ls "$d/fr" | wc -l)" "$(cat "$d"/ras/* 2>/dev/null | wc -c)" "$(ls "$d/nccl" | wc -l)")")
    pack
  done
fi

if [[ $parts == *trace* ]]; then
  # trace with one worker frozen: exit 5 expected, the frozen process named.
  "$bin" --devices 0,0,0 --timeout 10 trace allreduce -b 1M -e 1M -n 2000 > "$out/trace-stop.txt" 2>&1 &
  tp=$!
  sleep 6
  w=$(pgrep -f -- '__worker' | sort -n | sed -n 2p)
  [[ -n $w ]] && kill -STOP "$w"
  wait $tp; rc=$?
  [[ -n $w ]] && kill -CONT "$w" 2>/dev/null
  table+=("trace-stop rc $rc worker $w: $(grep -m1 -E 'process is' "$out/trace-stop.txt" | cut -c1-200)")
fi

pack
cat "$out/table.txt"
