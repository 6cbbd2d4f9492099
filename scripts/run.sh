#!/usr/bin/env bash
# One command from a fresh machine to a running commtool: sets up, builds (release) commtool
# and its plugins only (the commtool_runtime target; scripts/test.sh builds the tests), runs.
#   scripts/run.sh topo            scripts/run.sh topo --json
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh release commtool_runtime
exec ./build/cli/commtool "$@"
