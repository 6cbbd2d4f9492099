#!/usr/bin/env bash
# Copies the release build's runnable part (binaries, the profiler plugin, CTest files; no
# object files or static libraries) into build-gpu/, small enough to travel to a GPU machine
# beside the source tree. There: `rm -rf build && mv build-gpu build`, then
# scripts/gpu-check.sh. The build's files name this checkout's absolute path, which
# gpu-check.sh recreates with a symbolic link.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/cli/commtool ]] || { echo "stage-gpu-build: build first (scripts/build.sh)" >&2; exit 2; }
rm -rf build-gpu
mkdir build-gpu
tar -C build --exclude='*.o' --exclude='*.a' --exclude='./CMakeFiles/3.*' -cf - . |
  tar -C build-gpu -xf -
du -sh build-gpu
