#!/usr/bin/env bash
# Runs `commtool probe` at its defaults on the GPU machine and sets the host<->device figures
# beside the reference figures measured there with public tools (nvbandwidth v0.8 on the H200,
# 2026-12-02). Full JSON in OUT_DIR; the table is printed last.
#   scripts/bench-probe.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-bench-out}}
mkdir -p "$out"
build/cli/commtool probe --h2d --latency --json --output "$out/probe.json"
build/cli/commtool probe --h2d --latency > "$out/probe.txt"
python3 - "$out/probe.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
ref = {  # nvbandwidth v0.8 and the CUDA samples on the H200, 2026-12-02
    ("H2D", "CE"): 55.5, ("D2H", "CE"): 55.4, ("H2D", "SM"): 51.4, ("D2H", "SM"): 52.6,
    ("round trip", "SM"): 1.20,
}
both_ce = [m for m in doc["measurements"] if m["probe"] == "h2d" and m["engine"] == "CE" and m["bidirectional"]]
print(f"{'what':22} {'engine':6} {'median':>8} {'min':>8} {'max':>8} {'CV':>6} {'reference':>9} {'gap':>7}")
for m in doc["measurements"]:
    key = (m["what"], m["engine"])
    s = m["stats"]
    r = ref.get(key)
    gap = f"{100 * (s['median'] - r) / r:+.1f}%" if r else ""
    print(f"{m['what'] + ' GPU' + str(m['src'] if m['src'] != 'host' else m['dst']):22} {m['engine']:6} "
          f"{s['median']:8.2f} {s['min']:8.2f} {s['max']:8.2f} {100 * s['cv']:5.1f}% "
          f"{(f'{r:.2f}' if r else ''):>9} {gap:>7}  {m['unit']}")
if len(both_ce) == 2:
    total = sum(m["stats"]["median"] for m in both_ce)
    print(f"{'H2D+D2H together':22} {'CE':6} {total:8.2f} (sum of both directions; reference 51.0 "
          f"is nvbandwidth's bidirectional figure, see README)")
PY
