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
echo "== tests: normal build"
(cd build && ctest --output-on-failure -j"$jobs")

[ "$fast" = 1 ] && exit 0

echo "== build: ASan + UBSan"
cmake -S . -B build-asan -DMU_DEVELOPER=ON -DMU_ASAN=ON -DMU_UBSAN=ON \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests: ASan + UBSan build"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j"$jobs")

if [ -d fuzz ] && ls fuzz/*.c >/dev/null 2>&1; then
  echo "== fuzz: libFuzzer, short budget"
  CC=clang cmake -S . -B build-fuzz -DMU_FUZZ=ON -DMU_USE_JEMALLOC=OFF \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build build-fuzz -j"$jobs"
  for f in build-fuzz/fuzz/*; do
    name=$(basename "$f")
    corpus="fuzz/corpus/$name"
    mkdir -p "build-fuzz/corpus-$name"
    echo "-- $name: ${MU_FUZZ_SECONDS:-30}s"
    "$f" -max_total_time="${MU_FUZZ_SECONDS:-30}" -print_final_stats=0 \
      "build-fuzz/corpus-$name" $( [ -d "$corpus" ] && echo "$corpus" ) 2>&1 | tail -n 3
  done
fi
