#!/usr/bin/env bash
# The test command (README): builds muster twice, normally and under ASan+UBSan, and runs the
# whole suite in both builds; then a short libFuzzer run of every fuzz target.
#   scripts/test.sh [--fast]     --fast: the normal build only, no fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fast=0
[ "${1:-}" = "--fast" ] && fast=1

bash scripts/checksrc.sh

echo "== build: normal"
cmake -S . -B build -DMU_DEVELOPER=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
# Each ctest run's "N tests failed out of M" feeds the closing summary line.
total=0
run_ctest() { # build-dir
  local out
  out=$(mktemp)
  set +e
  (cd "$1" && ctest --output-on-failure -j"$jobs") 2>&1 | tee "$out"
  local rc=${PIPESTATUS[0]}
  set -e
  local n
  n=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$out" | tail -n 1)
  rm -f "$out"
  [ "$rc" -eq 0 ] || { echo "test.sh: failures in $1"; exit "$rc"; }
  total=$((total + ${n:-0}))
}

echo "== tests: normal build"
run_ctest build

if [ "$fast" = 1 ]; then
  echo "test.sh: $total passed, 0 failed"
  exit 0
fi

echo "== build: ASan + UBSan"
cmake -S . -B build-asan -DMU_DEVELOPER=ON -DMU_ASAN=ON -DMU_UBSAN=ON \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests: ASan + UBSan build"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_ctest build-asan

if [ -d fuzz ] && ls fuzz/*.c >/dev/null 2>&1; then
  echo "== fuzz: libFuzzer, short budget"
  CC=clang cmake -S . -B build-fuzz -DMU_FUZZ=ON -DMU_USE_JEMALLOC=OFF \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
  fuzzers=$(for src in fuzz/*.c; do basename "$src" .c; done)
  # shellcheck disable=SC2086
  cmake --build build-fuzz -j"$jobs" --target $fuzzers
  for f in build-fuzz/fuzz/*; do
    name=$(basename "$f")
    corpus="fuzz/corpus/$name"
    mkdir -p "build-fuzz/corpus-$name"
    echo "-- $name: ${MU_FUZZ_SECONDS:-30}s"
    "$f" -max_total_time="${MU_FUZZ_SECONDS:-30}" -print_final_stats=0 \
      "build-fuzz/corpus-$name" $( [ -d "$corpus" ] && echo "$corpus" ) 2>&1 | tail -n 3
  done
fi

echo "test.sh: CTest in the normal and the ASan+UBSan build; every fuzz target ran without a finding"
echo "test.sh: $total passed, 0 failed"
