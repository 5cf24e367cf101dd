#!/usr/bin/env bash
# Runs the CTest suite of one build N times while this script keeps the machine busy, and
# counts the failures of each test. A test that fails only under load waits on time instead of
# on a condition: fix its wait (poll a file or a state with a deadline), never add a sleep.
#
#   scripts/flaky.sh N [TEST_REGEX]
#
# Environment:
#   MU_FLAKY_BUILD   the build directory to test                      [build]
#   MU_FLAKY_JOBS    ctest -j                                          [nproc]
#   MU_FLAKY_CPU     busy-loop processes started as CPU load           [nproc]
#   MU_FLAKY_IO      processes writing and fsyncing 32 MB files        [1]
#   MU_FLAKY_LOGS    where each run's ctest output and JUnit XML go    [a new /tmp/mu-flaky.*]
# With the ASan build (MU_FLAKY_BUILD=build-asan) it sets the sanitizer options test.sh uses.
# Exit status: 0 when every test passed in every run; 1 when any failed, timed out, or was
# skipped (a skip is counted too: a test that skips under load hides a failure); 2 usage.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/flaky.sh N [TEST_REGEX]   (N runs of ctest in \$MU_FLAKY_BUILD under load)" >&2
  exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
case $1 in '' | *[!0-9]*) usage ;; esac
runs=$1
regex=${2:-}
[ "$runs" -ge 1 ] || usage
build=${MU_FLAKY_BUILD:-build}
jobs=${MU_FLAKY_JOBS:-$(nproc)}
ncpu=${MU_FLAKY_CPU:-$(nproc)}
nio=${MU_FLAKY_IO:-1}
if [ ! -f "$build/CTestTestfile.cmake" ]; then
  echo "flaky.sh: '$build' is not a configured build directory; build it first:" >&2
  echo "  cmake -S . -B $build -DMU_DEVELOPER=ON && cmake --build $build -j$(nproc)" >&2
  exit 2
fi
logs=${MU_FLAKY_LOGS:-$(mktemp -d /tmp/mu-flaky.XXXXXX)}
mkdir -p "$logs"
if [ -f "$build/CMakeCache.txt" ] && grep -q '^MU_ASAN:BOOL=ON' "$build/CMakeCache.txt"; then
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi

# --- the load: processes of our own, stopped by PID ------------------------------------------
load_pids=()
stop_load() {
  local pid
  for pid in "${load_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${load_pids[@]}"; do wait "$pid" 2>/dev/null; done
  load_pids=()
  rm -f "$logs"/io-load.*
}
trap stop_load EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < ncpu; i++)); do
  (while :; do :; done) &
  load_pids+=($!)
done
for ((i = 0; i < nio; i++)); do
  (
    f=$logs/io-load.$i c=
    trap 'kill "$c" 2>/dev/null; wait "$c" 2>/dev/null; rm -f "$f"; exit 0' TERM
    while :; do
      dd if=/dev/zero of="$f" bs=1M count=32 conv=fsync status=none &
      c=$!
      wait "$c"
      rm -f "$f"
    done
  ) &
  load_pids+=($!)
done
echo "flaky.sh: $runs run(s) of ctest -j$jobs in $build${regex:+ (-R '$regex')}," \
  "load: $ncpu busy loop(s), $nio fsync writer(s); logs in $logs"

# --- the runs ----------------------------------------------------------------------------------
declare -A fails skips passes
names=()
note_test() { # name kind
  [ -n "${passes[$1]+x}" ] || { names+=("$1"); passes[$1]=0; fails[$1]=0; skips[$1]=0; }
  case $2 in
    pass) passes[$1]=$((passes[$1] + 1)) ;;
    fail) fails[$1]=$((fails[$1] + 1)) ;;
    skip) skips[$1]=$((skips[$1] + 1)) ;;
  esac
}
bad_runs=0
for ((r = 1; r <= runs; r++)); do
  t0=$(date +%s)
  args=(--output-on-failure -j "$jobs" --output-junit "$logs/run$r.xml")
  [ -n "$regex" ] && args+=(-R "$regex")
  (cd "$build" && ctest "${args[@]}") >"$logs/run$r.log" 2>&1
  rc=$?
  if [ ! -s "$logs/run$r.xml" ]; then
    echo "flaky.sh: run $r: ctest wrote no results (exit $rc); see $logs/run$r.log" >&2
    tail -5 "$logs/run$r.log" >&2
    exit 1
  fi
  # One line per test case: "<status> <skipped?> <name>".
  res=$(python3 - "$logs/run$r.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    st = tc.get("status")
    kind = "pass" if st == "run" else "skip" if tc.find("skipped") is not None else "fail"
    print(kind, tc.get("name"))
PY
)
  np=0 nf=0 ns=0 failed_names=""
  while read -r kind name; do
    [ -n "$name" ] || continue
    note_test "$name" "$kind"
    case $kind in
      pass) np=$((np + 1)) ;;
      fail) nf=$((nf + 1)); failed_names="$failed_names $name" ;;
      skip) ns=$((ns + 1)); failed_names="$failed_names $name(skipped)" ;;
    esac
  done <<<"$res"
  [ $((nf + ns)) -eq 0 ] || bad_runs=$((bad_runs + 1))
  echo "flaky.sh: run $r/$runs: $np passed, $nf failed, $ns skipped in $(($(date +%s) - t0)) s" \
    "(load $(cut -d' ' -f1-3 /proc/loadavg))${failed_names:+; not passed:$failed_names}"
done
stop_load

# --- the report --------------------------------------------------------------------------------
echo "flaky.sh: per test, over $runs run(s) (only tests that did not always pass):"
any=0
for name in "${names[@]}"; do
  if [ "${fails[$name]}" -gt 0 ] || [ "${skips[$name]}" -gt 0 ]; then
    any=1
    printf '  %-40s failed %d, skipped %d, passed %d\n' "$name" "${fails[$name]}" \
      "${skips[$name]}" "${passes[$name]}"
  fi
done
[ "$any" = 1 ] || echo "  (none: all ${#names[@]} tests passed in every run)"
echo "flaky.sh: $runs run(s) x ${#names[@]} tests: $bad_runs run(s) with a failure; logs in $logs"
[ "$bad_runs" -eq 0 ]
