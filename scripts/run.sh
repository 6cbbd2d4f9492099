#!/usr/bin/env bash
# One command from a fresh machine to a running commtool: sets up, builds (release), runs.
#   scripts/run.sh topo            scripts/run.sh topo --json
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh release
exec ./build/cli/commtool "$@"
