#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ (one per reader of outside input) and runs each
# over its seed corpus, tests/fuzz/corpus/<reader>/, for a while; fails on any finding (a crash,
# an exception other than commtool::Error, a sanitizer report, a slow input, memory past 2 GB)
# and prints where libFuzzer left the input that did it.
#   scripts/fuzz.sh            20 s per harness
#   scripts/fuzz.sh 60         60 s per harness
#   scripts/fuzz.sh 0          only replay the seed corpora (no new inputs)
#   FUZZ_OPT=-O0 scripts/fuzz.sh 15   a build in half the time, inputs at half the speed (CI)
# Harnesses run side by side, one per core. New inputs found go to build-fuzz/corpus/, never into
# the checked-in seeds; findings to build-fuzz/findings/<reader>/. Replay one finding with
#   build-fuzz/fuzz_<reader> FILE
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: seconds per harness must be a whole number, got '$seconds'" >&2; exit 2; }
build=build-fuzz
jobs=${FUZZ_JOBS:-$(nproc)}

# What the fuzzers need: clang with its libFuzzer and sanitizer runtimes (scripts/setup.sh
# installs them: clang and libclang-rt-dev on Debian 12 and Ubuntu 24.04).
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz.sh: no $cxx: install clang (scripts/setup.sh does)" >&2
  exit 3
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$probe/t.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/t.cpp" -o "$probe/t" 2>"$probe/err"; then
  echo "fuzz.sh: $cxx cannot link a libFuzzer harness: the fuzzer runtime is missing" >&2
  echo "  (Debian 12: libclang-rt-14-dev, Ubuntu 24.04: libclang-rt-18-dev; both via libclang-rt-dev):" >&2
  sed 's/^/  /' "$probe/err" | head -5 >&2
  exit 3
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[[ -f $build/CMakeCache.txt ]] && generator=()  # the generator is fixed at the first configure
CXX=$cxx cmake "${generator[@]}" -S tests/fuzz -B "$build" -DCMAKE_BUILD_TYPE= \
  "-DCOMMTOOL_FUZZ_OPT=${FUZZ_OPT:--O1}" >/dev/null
build_start=$SECONDS
cmake --build "$build" -j "$(nproc)"
echo "fuzz.sh: built in $((SECONDS - build_start)) s"

readers=()
for dir in tests/fuzz/corpus/*/; do readers+=("$(basename "$dir")"); done

# One harness: seeds first, then new inputs for $seconds. Its log is build-fuzz/logs/<reader>.log.
run_one() {
  local reader=$1 work=$build/corpus/$1 findings=$build/findings/$1/
  mkdir -p "$work" "$findings" "$build/logs"
  local args=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "-artifact_prefix=$findings")
  if ((seconds == 0)); then
    args+=(-runs=0)
  else
    args+=("-max_total_time=$seconds")
  fi
  local rc=0
  "$build/fuzz_$reader" "${args[@]}" "$work" "tests/fuzz/corpus/$reader" >"$build/logs/$reader.log" 2>&1 ||
    rc=$?
  echo "$rc" >"$build/logs/$reader.rc"
}

# Stack traces for UBSan's reports too; leaks are findings as well (ASan's default).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
rm -rf "$build/findings" "$build/logs"
start=$SECONDS
for reader in "${readers[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  run_one "$reader" &
done
wait

failed=0
for reader in "${readers[@]}"; do
  if [[ $(cat "$build/logs/$reader.rc") == 0 ]]; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/logs/$reader.log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz.sh: $reader: ok, $execs inputs"
  else
    failed=1
    echo "fuzz.sh: $reader: FINDING (log: $build/logs/$reader.log)" >&2
    grep -E '^==[0-9]+==ERROR|runtime error|uncaught exception|terminate called|what\(\)|^SUMMARY' \
      "$build/logs/$reader.log" | head -8 | sed 's/^/  /' >&2
    for input in "$build/findings/$reader"/*; do
      [[ -e $input ]] && echo "  input: $input (replay: $build/fuzz_$reader $input)" >&2
    done
  fi
done
echo "fuzz.sh: ${#readers[@]} harnesses, $((SECONDS - start)) s of fuzzing on $jobs cores"
exit "$failed"
