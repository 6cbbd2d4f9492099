#!/usr/bin/env bash
# Runs `commtool probe --h2d --latency` at its defaults on the GPU machine and, where
# ANCHORS_DIR holds nvbandwidth, nvbandwidth's tests of the same transfers in the same run: each
# figure side by side with the ratio, and the wall time each tool took for its set of figures.
# Without nvbandwidth the figures stand beside those it gave on the H200 on 2026-12-02 (v0.8).
# Full outputs in OUT_DIR; the table is printed last.
#   scripts/bench-probe.sh [OUT_DIR] [ANCHORS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-bench-out}}
anchors=${2:-${ANCHORS:-}}
mkdir -p "$out"

# nvbandwidth's tests of what `probe --h2d --latency` measures (its bidirectional SM tests and
# the 4-byte copies have no nvbandwidth counterpart).
tests=(host_to_device_memcpy_ce device_to_host_memcpy_ce host_to_device_bidirectional_memcpy_ce
       device_to_host_bidirectional_memcpy_ce host_to_device_memcpy_sm device_to_host_memcpy_sm
       host_device_latency_sm)
: > "$out/walltime.txt"
for round in 1 2 3; do  # alternating, three times each: wall time moves between runs
  t0=$EPOCHREALTIME
  build/cli/commtool probe --h2d --latency --json --output "$out/probe-$round.json"
  echo "commtool $t0 $EPOCHREALTIME" >> "$out/walltime.txt"
  if [[ -n $anchors && -x $anchors/nvbandwidth ]]; then
    t0=$EPOCHREALTIME
    "$anchors/nvbandwidth" -t "${tests[@]}" > "$out/nvbandwidth-$round.txt" 2>&1
    echo "nvbandwidth $t0 $EPOCHREALTIME" >> "$out/walltime.txt"
  fi
done
build/cli/commtool probe --h2d --latency > "$out/probe.txt"
python3 - "$out" <<'PY'
import json, re, statistics, sys
out = sys.argv[1]
# Figures of the first round; the wall times of all three.
doc = json.load(open(f"{out}/probe-1.json"))
measured = {}  # nvbandwidth test -> (value, unit)
try:
    text = open(f"{out}/nvbandwidth-1.txt").read()
    for block in re.split(r"\nRunning ", "\n" + text)[1:]:
        name = block.split(".", 1)[0].strip()
        unit = re.search(r"\((GB/s|ns|us)\)", block)
        total = re.search(rf"SUM {re.escape(name)}\s+([\d.]+)", block)
        if unit and total:
            value = float(total.group(1))
            measured[name] = (value / 1000, "us") if unit.group(1) == "ns" else (value, unit.group(1))
    source = "nvbandwidth, this run"
except FileNotFoundError:
    source = "nvbandwidth v0.8 on the H200, 2026-12-02"
    measured = {"host_to_device_memcpy_ce": (55.5, "GB/s"), "device_to_host_memcpy_ce": (55.4, "GB/s"),
                "host_to_device_memcpy_sm": (51.4, "GB/s"), "device_to_host_memcpy_sm": (52.6, "GB/s"),
                "host_to_device_bidirectional_memcpy_ce": (51.0, "GB/s"),
                "host_device_latency_sm": (1.20, "us")}
def test_of(m):
    if m["probe"] == "latency":
        return "host_device_latency_sm" if m["what"] == "round trip" else None
    way = {"H2D": "host_to_device", "D2H": "device_to_host",
           "H2D while D2H": "host_to_device", "D2H while H2D": "device_to_host"}.get(m["what"])
    if way is None:
        return None
    if m["bidirectional"]:
        return f"{way}_bidirectional_memcpy_ce" if m["engine"] == "CE" else None
    return f"{way}_memcpy_{m['engine'].lower()}"
print(f"== probe beside {source}")
print(f"{'what':24} {'engine':6} {'median':>8} {'min':>8} {'max':>8} {'CV':>6} {'nvbandwidth':>11} {'ratio':>6}")
for m in doc["measurements"]:
    s = m["stats"]
    ref = measured.get(test_of(m) or "")
    end = m["dst"] if m["src"] == "host" else m["src"]
    ratio = s["median"] / ref[0] if ref else None
    if ratio and m["unit"] == "us":
        ratio = ref[0] / s["median"]  # like bandwidth: above 1 is commtool faster
    print(f"{m['what'] + ' GPU' + str(end):24} {m['engine']:6} {s['median']:8.2f} {s['min']:8.2f} "
          f"{s['max']:8.2f} {100 * s['cv']:5.1f}% {(f'{ref[0]:.2f}' if ref else '-'):>11} "
          f"{(f'{ratio:.3f}' if ratio else '-'):>6}  {m['unit']}")
walls = {}
for line in open(f"{out}/walltime.txt"):
    tool, start, end = line.split()
    walls.setdefault(tool, []).append(float(end) - float(start))
print("== wall time for the set (s; median [min-max] of the rounds, alternating)")
for tool, values in walls.items():
    print(f"  {tool:12} {statistics.median(values):7.2f} [{min(values):.2f}-{max(values):.2f}]")
if len(walls) == 2:
    print(f"  commtool / nvbandwidth: {statistics.median(walls['commtool']) / statistics.median(walls['nvbandwidth']):.2f}")
PY
