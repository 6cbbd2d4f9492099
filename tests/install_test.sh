#!/usr/bin/env bash
# What an installation holds works from where it is installed, as a user would run it.
#   tests/install_test.sh BUILD_DIR        `cmake --install BUILD_DIR` into a temporary prefix:
#       exactly bin/commtool, lib/commtool/libcommtool_nccl_profiler.so, share/man/man1/commtool.1
#       and, when the build has it, lib/commtool/libcommtool_mpi.so; no run path that is empty,
#       relative, or inside the build or source tree; `record -- true` from the prefix finds the
#       installed plugin (and exits 3 once it is taken away); `man` finds and renders the page,
#       through MANPATH and, as man-db derives it, through PATH.
#   tests/install_test.sh --deb BUILD_DIR  `cpack -G DEB` (cmake/Packaging.cmake): package
#       commtool at the project's version, with a Maintainer and a Depends naming libc6 (from
#       dpkg-shlibdeps), holding the same files under /usr and nothing else.
# CMAKE and CPACK name the tools (default: cmake and cpack on PATH). The temporary directory is
# removed at the end, pass or fail. Exits 0 when every check passes, 1 when one fails, 2 on
# bad usage or a missing tool.
set -u
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
source_dir=$(cd "$here/.." && pwd -P)
mode=install
[[ ${1:-} == --deb ]] && { mode=deb; shift; }
(($# == 1)) || { echo "usage: install_test.sh [--deb] BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" 2>/dev/null && pwd -P) || { echo "install_test: no build directory $1" >&2; exit 2; }
[[ -f $build/CMakeCache.txt ]] || { echo "install_test: $build is not a CMake build" >&2; exit 2; }
CMAKE=${CMAKE:-cmake}
CPACK=${CPACK:-cpack}

tmp=$(mktemp -d -t commtool-install-test.XXXXXX) || exit 2
tmp=$(cd "$tmp" && pwd -P)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# The files an installation must hold, relative to its prefix. The MPI plugin is built only
# when CMake found MPI; a build that has it must install it.
expected=(bin/commtool lib/commtool/libcommtool_nccl_profiler.so share/man/man1/commtool.1)
[[ -f $build/probes/libcommtool_mpi.so ]] && expected+=(lib/commtool/libcommtool_mpi.so)
expected_sorted=$(printf '%s\n' "${expected[@]}" | sort)

# Compares LIST (one path a line) with the expected files; ROOT names where they are.
check_file_set() {
  local list=$1 root=$2 f
  for f in "${expected[@]}"; do
    grep -qxF "$f" <<<"$list" || fail "$root/$f is missing"
  done
  while IFS= read -r f; do
    [[ -n $f ]] || continue
    grep -qxF "$f" <<<"$expected_sorted" ||
      fail "$root/$f is there but not expected (add it to tests/install_test.sh if it is meant)"
  done <<<"$list"
}

install_checks() {
  local prefix=$tmp/prefix
  if ! "$CMAKE" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log"
    fail "cmake --install $build --prefix $prefix failed"
    return
  fi
  check_file_set "$(cd "$prefix" && find . -type f -o -type l | sed 's|^\./||' | sort)" "$prefix"
  ((failures == 0)) && ok "installed: ${expected[*]}"

  # Run paths: check_rpath.sh refuses empty and relative entries (and any into the prefix);
  # an entry into the build or source tree works here but nowhere else, so it is refused too.
  local out f e
  if out=$(sh "$here/check_rpath.sh" "$prefix" 2>&1); then ok "$out"; else fail "$out"; fi
  for f in "${expected[@]}"; do
    [[ $f == share/* ]] && continue
    while IFS= read -r e; do
      case $e in
        "$build" | "$build"/* | "$source_dir" | "$source_dir"/*)
          fail "$prefix/$f: run path entry $e is in the build or source tree" ;;
      esac
    done < <(readelf -d "$prefix/$f" 2>/dev/null |
      sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]$/\2/p' | tr ':' '\n')
  done

  # record from the prefix: the plugin found is the installed one (exit 3 when it is missing).
  # The recording's directory is --save, as every output directory is since issue 32's one
  # command-line vocabulary (record --out before it).
  local bin=$prefix/bin/commtool dir_opt=--save rc
  local -a clean=(env -u COMMTOOL_PROFILER_PLUGIN -u COMMTOOL_MPI_PLUGIN -u COMMTOOL_RECORD_DIR
    -u NCCL_PROFILER_PLUGIN -u CUDA_INJECTION64_PATH -u LD_PRELOAD -u LD_LIBRARY_PATH)
  (cd "$tmp" && "${clean[@]}" "$bin" record "$dir_opt" "$tmp/rec" -- true) \
    >"$tmp/record.out" 2>"$tmp/record.err"
  rc=$?
  if ((rc == 0)) && [[ -f $tmp/rec/record.json ]]; then
    ok "$bin record $dir_opt $tmp/rec -- true: exit 0, record.json written"
  else
    cat "$tmp/record.out" "$tmp/record.err"
    fail "$bin record $dir_opt $tmp/rec -- true: exit $rc (3: the plugin was not found)," \
      "record.json $([[ -f $tmp/rec/record.json ]] && echo written || echo missing)"
  fi
  local plugin=$prefix/lib/commtool/libcommtool_nccl_profiler.so
  if [[ -f $plugin ]]; then
    mv "$plugin" "$tmp/plugin.so"
    (cd "$tmp" && "${clean[@]}" "$bin" record "$dir_opt" "$tmp/rec2" -- true) \
      >"$tmp/record2.out" 2>"$tmp/record2.err"
    rc=$?
    mv "$tmp/plugin.so" "$plugin"
    if ((rc == 3)) && grep -q 'plugin' "$tmp/record2.err"; then
      ok "without the installed plugin, record exits 3: it used the installed one"
    else
      cat "$tmp/record2.out" "$tmp/record2.err"
      fail "without $plugin, record exited $rc (3 expected): it found a plugin elsewhere"
    fi
  fi

  # man: the page through MANPATH, through PATH as man-db derives it (<dir>/../share/man for
  # each <dir> of PATH, when MANPATH is unset), and rendered without a warning.
  local page=$prefix/share/man/man1/commtool.1 got
  if ! command -v man >/dev/null; then
    fail "no man on PATH (scripts/setup.sh installs man-db)"
    return
  fi
  got=$(MANPATH=$prefix/share/man man -w commtool 2>&1 | head -n 1)
  if [[ $got == "$page" ]]; then
    ok "MANPATH=$prefix/share/man man -w commtool: $got"
  else
    fail "MANPATH=$prefix/share/man man -w commtool printed '$got', not $page"
  fi
  got=$(env -u MANPATH PATH="$prefix/bin:$PATH" man -w commtool 2>&1 | head -n 1)
  if [[ $got == "$page" ]]; then
    ok "PATH=$prefix/bin:\$PATH man -w commtool: $got"
  else
    fail "PATH=$prefix/bin:\$PATH man -w commtool printed '$got', not $page"
  fi
  MANPATH=$prefix/share/man MANPAGER=cat MANWIDTH=80 man commtool >"$tmp/man.out" 2>"$tmp/man.err"
  rc=$?
  if ((rc == 0)) && [[ ! -s $tmp/man.err ]] && grep -q '^NAME' "$tmp/man.out" &&
    grep -q '^ *commtool ' "$tmp/man.out"; then
    ok "man commtool rendered $(wc -l <"$tmp/man.out") lines"
  else
    head -n 20 "$tmp/man.err" "$tmp/man.out"
    fail "MANPATH=$prefix/share/man man commtool: exit $rc, $(wc -c <"$tmp/man.err") bytes" \
      "on stderr, $(wc -l <"$tmp/man.out") lines"
  fi
}

deb_checks() {
  if ! (cd "$tmp" && "$CPACK" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/deb") \
    >"$tmp/cpack.log" 2>&1; then
    cat "$tmp/cpack.log"
    fail "cpack -G DEB --config $build/CPackConfig.cmake failed"
    return
  fi
  local debs=("$tmp"/deb/*.deb)
  if ((${#debs[@]} != 1)) || [[ ! -f ${debs[0]} ]]; then
    cat "$tmp/cpack.log"
    fail "cpack -G DEB made ${#debs[@]} .deb files, not one"
    return
  fi
  local deb=${debs[0]} version field value
  version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
  ok "cpack -G DEB: $(basename "$deb")"
  for field in Package Version Maintainer Depends Description; do
    value=$(dpkg-deb -f "$deb" "$field")
    case $field:$value in
      Package:commtool | "Version:$version" | Maintainer:?*\<*@*\> | Description:?*) ;;
      Depends:*libc6*) ;;
      *) fail "the package's $field is '$value'" ;;
    esac
  done
  ok "control: $(dpkg-deb -f "$deb" Package Version Depends | paste -sd' ')"
  # The files (not the directories) under /usr, as the install puts them in a prefix.
  local contents
  contents=$(dpkg-deb -c "$deb") || { fail "dpkg-deb -c $deb failed"; return; }
  check_file_set "$(awk '$1 !~ /^d/ { print $6 }' <<<"$contents" | sed -n 's|^\./usr/||p' | sort)" \
    /usr
  awk '$1 !~ /^d/ && $6 !~ /^\.\/usr\// { print "FAIL: outside /usr: " $6; bad = 1 }
       END { exit bad }' <<<"$contents" || failures=$((failures + 1))
  grep -q '^-rwxr-xr-x .* \./usr/bin/commtool$' <<<"$contents" ||
    fail "/usr/bin/commtool is not mode 755 in the package"
  ((failures == 0)) && ok "contents: ${expected[*]} under /usr"
}

if [[ $mode == deb ]]; then
  command -v dpkg-deb >/dev/null || { echo "install_test: needs dpkg-deb" >&2; exit 2; }
  deb_checks
else
  command -v readelf >/dev/null || { echo "install_test: needs readelf" >&2; exit 2; }
  install_checks
fi
if ((failures)); then
  echo "install_test ($mode): $failures check(s) failed"
  exit 1
fi
echo "install_test ($mode): every check passed"
