#!/usr/bin/env bash
# Sets up this machine (scripts/setup.sh) and builds a preset (default: release): every target,
# or only the TARGETs named (and what they need).
#   scripts/build.sh [PRESET [TARGET...]]
#   scripts/build.sh release commtool_runtime     commtool and its plugins, no test
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
shift $(($# > 0 ? 1 : 0))
targets=()
(($#)) && targets=(--target "$@")
bash scripts/setup.sh >&2
cmake --preset "$preset" >&2
cmake --build --preset "$preset" "${targets[@]}" >&2
