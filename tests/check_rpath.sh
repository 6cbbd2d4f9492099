#!/bin/sh
# Fails when a built ELF file (executable or shared library) under DIR carries a run path the
# loader could resolve somewhere an attacker can write: an empty entry (read as the current
# directory), a relative entry (relative to the current directory, not to the file), or an
# absolute entry inside the build tree itself (a build folder is no place to load code from
# once the file is installed or copied; $ORIGIN-relative entries say what they mean).
#   tests/check_rpath.sh BUILD_DIR          check every ELF file below BUILD_DIR
#   tests/check_rpath.sh --self-test CC     check that the check fails on bad run paths
set -u

# The run path entries of one file, one per line; nothing when it has none.
entries() {
  readelf -d "$1" 2>/dev/null | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]$/\2/p' | tr ':' '\n'
}

# Prints what is wrong with one file's run path; nothing when it is fine.
check_file() {
  file=$1 tree=$2
  readelf -d "$file" 2>/dev/null | grep -qE '\((RUN)?PATH\)' || return 0
  entries "$file" | while IFS= read -r entry; do
    case $entry in
      '') echo "$file: an empty run path entry (the loader reads it as the current directory)" ;;
      '$ORIGIN'*|'${ORIGIN}'*) ;;
      "$tree"|"$tree"/*) echo "$file: run path entry $entry is inside the build tree" ;;
      /*) ;;
      *) echo "$file: relative run path entry $entry (relative to the current directory)" ;;
    esac
  done
}

check_tree() {
  tree=$(cd "$1" && pwd -P) || { echo "check_rpath: no directory $1" >&2; return 2; }
  checked=0 bad=""
  for file in $(find "$tree" -type f \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) \
                  ! -path '*/CMakeFiles/*' ! -name '*.o'); do
    head -c 4 "$file" 2>/dev/null | grep -q 'ELF' || continue
    checked=$((checked + 1))
    bad="$bad$(check_file "$file" "$tree")"
  done
  if [ -n "$bad" ]; then
    printf '%s\n' "$bad"
    return 1
  fi
  [ "$checked" -gt 0 ] || { echo "check_rpath: no ELF file under $tree" >&2; return 2; }
  echo "check_rpath: $checked ELF files under $tree, every run path absolute and outside it"
}

# Builds libraries with each kind of bad run path and one good one: the check must refuse the
# first three and pass the last, or it checks nothing.
self_test() {
  cc=$1
  dir=$(mktemp -d) || return 2
  trap 'rm -rf "$dir"' EXIT
  echo 'int f(void) { return 1; }' >"$dir/f.c"
  fails=0
  for case in "empty:/usr/lib:" "relative:lib" "tree:$dir/tree/lib" "good:\$ORIGIN/../lib:/usr/lib"; do
    name=${case%%:*} rpath=${case#*:}
    mkdir -p "$dir/$name"
    "$cc" -shared -fPIC -o "$dir/$name/lib.so" "$dir/f.c" "-Wl,--enable-new-dtags,-rpath,$rpath" ||
      return 2
    if check_tree "$dir/$name" >/dev/null 2>&1; then passed=yes; else passed=no; fi
    case $name:$passed in
      good:yes|empty:no|relative:no|tree:no) echo "self-test: $name ($rpath) as expected" ;;
      *) echo "self-test: $name ($rpath): the check said passed=$passed"; fails=1 ;;
    esac
  done
  return $fails
}

case ${1:-} in
  --self-test) self_test "${2:-cc}" ;;
  '') echo "usage: check_rpath.sh BUILD_DIR | --self-test CC" >&2; exit 2 ;;
  *) check_tree "$1" ;;
esac
