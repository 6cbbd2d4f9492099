#!/usr/bin/env bash
# Sets up this machine (scripts/setup.sh) and builds a preset (default: release).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
bash scripts/setup.sh >&2
cmake --preset "$preset" >&2
cmake --build --preset "$preset" >&2
