#!/bin/sh
# One golden case: run commtool from the source root and compare its exit code, standard
# output and standard error with the golden file, byte for byte.
# Usage: run_case.sh COMMTOOL SOURCE_DIR GOLDEN_FILE ARGS...
# With COMMTOOL_UPDATE_GOLDEN=1 the golden file is rewritten instead (review the diff).
set -u
bin=$1 src=$2 golden=$3
shift 3
actual=$(mktemp) out=$(mktemp) err=$(mktemp)
trap 'rm -f "$actual" "$out" "$err"' EXIT
cd "$src" || exit 1
"$bin" "$@" >"$out" 2>"$err"
rc=$?
{
  echo "exit $rc"
  echo "--- stdout"
  cat "$out"
  echo "--- stderr"
  cat "$err"
} >"$actual"
if [ "${COMMTOOL_UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$actual" "$golden" && echo "updated $golden"
  exit 0
fi
if ! diff -u "$golden" "$actual"; then
  echo "golden mismatch: commtool $* (expected $golden)" >&2
  exit 1
fi
