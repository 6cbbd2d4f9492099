#!/usr/bin/env bash
# doctor on the GPU machine: each level end to end with its wall time and exit status, the JSON
# of each, a saved kernel log with real Xid lines, a thresholds file (good and bad), a baseline
# of its own quick run, doctor under mpirun (one page for the job; one host here), and NVML's
# counters beside `nvidia-smi -q` read right after. Logs and JSON in OUT_DIR; a table last.
#   scripts/gpu-doctor.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-doctor-out}
mkdir -p "$out"
bin=build/cli/commtool
declare -a rows
step() {  # step NAME COMMAND...: its exit status and wall time
  local name=$1; shift
  local t0 t1 rc
  t0=$(date +%s%N)
  "$@" > "$out/$name.log" 2>&1; rc=$?
  t1=$(date +%s%N)
  rows+=("$(printf '%-22s exit %-3s %8s ms' "$name" "$rc" "$(( (t1 - t0) / 1000000 ))")")
}
step quick "$bin" doctor --json --output "$out/quick.json"
step quick-text "$bin" -v doctor
step standard "$bin" doctor --level standard --json --output "$out/standard.json"
step long "$bin" doctor --level long --json --output "$out/long.json"
step xid-log "$bin" doctor --kernel-log tests/fixtures/kernel_log/public_xid_lines.txt
printf 'nvlink_crc_warn = 5\npcie_replays_per_lane_minute.gen5 = 0\n' > "$out/site.conf"
step thresholds "$bin" doctor --thresholds "$out/site.conf"
printf 'nvlink_crc = 5\n' > "$out/bad.conf"
step bad-thresholds "$bin" doctor --thresholds "$out/bad.conf"
step baseline "$bin" doctor --baseline "$out/quick.json"
if command -v mpirun > /dev/null; then
  # As root, mpirun must be told; vader's single-copy path needs ptrace rights a VM may not give.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  step mpirun-3 mpirun --oversubscribe --bind-to none -np 3 "$bin" -v doctor
  step mpirun-json bash -c "mpirun --oversubscribe --bind-to none -np 2 $bin --json doctor > $out/mpirun.json"
fi
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
# The counters doctor read beside what nvidia-smi -q says a moment later.
python3 - "$out" > "$out/counters.txt" 2>&1 <<'PY'
import json, re, sys
out = sys.argv[1]
doc = json.load(open(f"{out}/quick.json"))
smi = open(f"{out}/nvidia-smi-q.txt").read()
def smi_value(label):
    m = re.search(rf"^\s*{re.escape(label)}\s*:\s*(.*)$", smi, re.M)
    return m.group(1).strip() if m else "?"
pairs = [("pcie_replay", "Replays Since Reset"), ("persistence_mode", "Persistence Mode"),
         ("remapped_rows_correctable", "Correctable Error"), ("remap_pending", "Pending"),
         ("ecc_volatile_uncorrected", "DRAM Uncorrectable")]
for g in doc.get("counters", []):
    print(g.get("bdf"), g.get("uuid"))
    for key, label in pairs:
        print(f"  {key:28} doctor {str(g.get(key)):40} nvidia-smi {smi_value(label)}")
print("verdict", doc.get("verdict"), doc.get("counts"))
for c in doc.get("checks", []):
    print(f"  {c['severity']:5} {c['subject']:24} {c['area']:16} {c['evidence'][:110]}")
PY
printf '%s\n' "${rows[@]}"
cat "$out/counters.txt"
