#!/usr/bin/env bash
# Installs what commtool needs to build and test on Debian 12 (bookworm) or Ubuntu 24.04.
# Idempotent: packages already present are not downloaded again, and apt's index is only
# refreshed when something is missing. The CUDA toolkit (nvcc, cudart, NCCL, CUPTI, NVTX) is
# expected under /usr/local/cuda (or $CUDA_HOME); it does not come from Debian.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config
  libcli11-dev        # CLI11: subcommands and option validation
  nlohmann-json3-dev  # JSON output and fixtures
  libfmt-dev          # fmt, used header-only so the binary runs where libfmt is absent
  libgtest-dev        # GoogleTest (unit and gpu tests)
  groff-base mandoc   # man page rendering and lint
  clang-format
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x $cuda_home/bin/nvcc ]]; then
  echo "setup: no CUDA toolkit at $cuda_home (need nvcc, cudart, NCCL, CUPTI); set CUDA_HOME" >&2
  exit 3
fi
