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
  man-db              # man: the install test reads the installed page as a user would
  dpkg-dev file       # cpack -G DEB: dpkg-shlibdeps (which needs file) writes Depends
  clang-format
  libopenmpi-dev openmpi-bin  # Open MPI: topo's cluster view under mpirun/srun (optional in CMake)
)
# The fuzzers (scripts/fuzz.sh): clang with its libFuzzer and sanitizer runtimes. Debian 12 and
# Ubuntu 24.04 both name the runtime of their default clang libclang-rt-dev (it pulls in
# libclang-rt-14-dev or libclang-rt-18-dev); where a release lacks it, the rest still installs
# and fuzz.sh says what is missing.
optional=(clang libclang-rt-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

optional_missing=()
for p in "${optional[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || optional_missing+=("$p")
done

sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
if ((${#missing[@]} + ${#optional_missing[@]})); then
  "${sudo_cmd[@]}" apt-get update
  for p in "${optional_missing[@]}"; do
    if apt-cache show "$p" >/dev/null 2>&1; then
      missing+=("$p")
    else
      echo "setup: $p is not in this release's packages: scripts/fuzz.sh will not run" >&2
    fi
  done
fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x $cuda_home/bin/nvcc ]]; then
  echo "setup: no CUDA toolkit at $cuda_home (need nvcc, cudart, NCCL, CUPTI); set CUDA_HOME" >&2
  exit 3
fi
