#!/usr/bin/env bash
# One command from a fresh machine to the unit tests: sets up, builds, runs ctest -L unit.
#   scripts/test.sh          release build
#   scripts/test.sh asan     the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
bash scripts/build.sh "$preset"
test_preset=unit
[[ $preset == asan ]] && test_preset=asan
ctest --preset "$test_preset" -j "$(nproc)"
