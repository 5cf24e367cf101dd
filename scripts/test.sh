#!/usr/bin/env bash
# The test command (README): installs what the tests need (scripts/install-deps.sh --test),
# builds muster twice, normally and under ASan+UBSan, runs the whole CTest suite in both builds,
# and runs every libFuzzer target for a short while. To keep it under 45 minutes on a fresh
# 2-core machine, work overlaps where it does not compete: the ASan and fuzz builds run while
# the normal build's tests run, and the ASan build's tests, the fuzzers and the torch 2.x tier
# join them as soon as each can start (each suite's output is printed when it ends). The tests
# that start torch take turns through one machine-wide lock, the longest tests start first.
#
#   scripts/test.sh [--fast]     --fast: the normal build only, no fuzzing
#
# The torch 2.x tier (tests labelled torch2: torch 2.6 and 2.14 in Debian roots) needs the roots
# of scripts/torch-roots.sh, built once per machine: when one is missing the build starts at
# once in the background (it needs no build of muster), the normal build's other tests run
# meanwhile, and the tier runs when the roots are there. A root that cannot be built fails the
# run, saying why (the tier is never skipped).
#
# The closing lines count, per build, the CTest tests that passed, failed and were skipped, and
# the TAP checks ("ok"/"not ok" lines) those tests printed. A skipped test (exit 77: a tool from
# outside is missing) fails the run unless MU_ALLOW_SKIP=1; a test that did not run for any
# other reason counts as failed. MU_INSTALL_DEPS=0: fail at once on a missing package instead of
# installing it. MU_FUZZ_SECONDS: seconds per fuzz target (30).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fast=0
case ${1:-} in
  "") ;;
  --fast) fast=1 ;;
  *) echo "usage: scripts/test.sh [--fast]" >&2; exit 2 ;;
esac

# --- 0. root --------------------------------------------------------------------------------
# The tests need root: apt-get, slurmd, network namespaces, chroot into the torch roots. A user
# with sudo runs the same command: it runs itself again through sudo, and hands the build
# directories back to that user at the end.
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "test.sh: the tests need root (apt-get, slurmd, network namespaces, chroot), and there is no sudo here:"
    echo "test.sh:   run it as root (su -c scripts/test.sh), or install sudo"
    exit 1
  fi
  echo "test.sh: not root: running again through sudo"
  exec sudo --preserve-env=MU_ALLOW_SKIP,MU_INSTALL_DEPS,MU_FUZZ_SECONDS,MUSTER_TORCH_ROOTS \
    MU_TEST_OWNER="$(id -u):$(id -g)" bash "$0" "$@"
fi
if [ -n "${MU_TEST_OWNER:-}" ]; then
  # the build trees and logs go back to the user who ran the command
  trap 'chown -R "$MU_TEST_OWNER" build build-asan build-fuzz build-more.log build-torch-roots.log 2>/dev/null || true' EXIT
fi

# --- 1. what the tests need --------------------------------------------------------------------
echo "== dependencies"
if ! bash scripts/install-deps.sh --test --check; then
  if [ "${MU_INSTALL_DEPS:-1}" = 0 ]; then
    echo "test.sh: missing dependencies (above); install them with: scripts/install-deps.sh --test"
    exit 1
  fi
  echo "test.sh: installing them (MU_INSTALL_DEPS=0 fails here instead)"
  if ! bash scripts/install-deps.sh --test; then
    echo "test.sh: scripts/install-deps.sh --test failed; the tests cannot all run without:"
    bash scripts/install-deps.sh --test --check || true
    exit 1
  fi
fi

bash scripts/checksrc.sh

# --- 2. the torch 2.x roots, in the background ------------------------------------------------
roots_log=$PWD/build-torch-roots.log
roots_pid=""
if bash scripts/torch-roots.sh check >/dev/null 2>&1; then
  echo "== torch 2.x roots: present ($(bash scripts/torch-roots.sh path sid | xargs dirname))"
else
  echo "== torch 2.x roots: building in the background (log: $roots_log)"
  roots_t0=$SECONDS
  bash scripts/torch-roots.sh build >"$roots_log" 2>&1 &
  roots_pid=$!
fi
# wait_roots: 0 once the roots are there; else prints why not and returns 1.
wait_roots() {
  if [ -n "$roots_pid" ]; then
    local rc=0
    wait "$roots_pid" || rc=$?
    roots_pid=""
    sed 's/^/test.sh: roots: /' "$roots_log"
    echo "test.sh: the torch 2.x roots took $((SECONDS - roots_t0)) s (exit $rc)"
  fi
  bash scripts/torch-roots.sh check && return 0
  echo "test.sh: the torch 2.x tier cannot run: a root could not be built (above; $roots_log)"
  return 1
}

summary=()  # one line per build or fuzz run
bad=0       # set when anything failed, or was skipped without MU_ALLOW_SKIP=1

# ctest_start BUILD_DIR LABEL [CTEST ARGS...]: starts the suite (or the label selection the
# further arguments make) in the background, its output to BUILD_DIR/ctest-LABEL.log; the suites
# of both builds run side by side (most tests wait on timers and sockets, not on the CPU; the
# tests that start torch take turns through one machine-wide lock, tests/lib.sh t_torch_lock).
# CTest starts the longest tests first when it knows their costs: a fresh build directory gets
# them from tests/ctest-costs.txt (the measured seconds of each test, from a full run).
# ctest_finish BUILD_DIR LABEL: waits for it, prints its output, and adds a counted line to the
# summary. Counts come from CTest's JUnit file, never from its "N tests failed out of M" line
# (whose M includes the skipped tests).
declare -A ctest_pids=()
ctest_file() { echo "$PWD/$1/ctest-${2//[^a-zA-Z0-9]/_}.$3"; }
ctest_start() {
  local dir=$1 label=$2 costs=$1/Testing/Temporary/CTestCostData.txt xml log
  shift 2
  xml=$(ctest_file "$dir" "$label" xml) # absolute: ctest runs in $dir
  log=$(ctest_file "$dir" "$label" log)
  if [ ! -s "$costs" ] && [ -f tests/ctest-costs.txt ]; then
    mkdir -p "$(dirname "$costs")"
    cp tests/ctest-costs.txt "$costs"
  fi
  rm -f "$xml"
  echo "== tests: $label: started (log: $log)"
  (cd "$dir" && exec ctest --output-on-failure -j"$jobs" --output-junit "$xml" \
    --test-output-size-passed 4000000 --test-output-size-failed 4000000 "$@") >"$log" 2>&1 &
  ctest_pids[$label]=$!
}
ctest_finish() {
  local dir=$1 label=$2 xml counts rc=0
  xml=$(ctest_file "$dir" "$label" xml)
  wait "${ctest_pids[$label]}" || rc=$?
  echo "== tests: $label: done (ctest exit $rc)"
  cat "$(ctest_file "$dir" "$label" log)"
  if [ ! -s "$xml" ]; then
    summary+=("$label: ctest exited $rc and wrote no results")
    bad=1
    return
  fi
  counts=$(python3 - "$xml" <<'PY'
import re, sys, xml.etree.ElementTree as ET
passed, failed, skipped, ok, notok = [], [], [], 0, 0
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name, status = tc.get("name"), tc.get("status")
    out = tc.findtext("system-out") or ""
    ok += len(re.findall(r"^ok\b", out, re.M))
    notok += len(re.findall(r"^not ok\b", out, re.M))
    if status == "run":
        passed.append(name)
    elif tc.find("skipped") is not None:
        why = re.search(r"^# skip[^:]*: (.*)$", out, re.M)
        skipped.append(name + (" (" + why.group(1) + ")" if why else ""))
    else:
        failed.append(name + ("" if status == "fail" else " (did not run)"))
print(len(passed), len(failed), len(skipped), ok, notok)
for f in failed:
    print("failed: " + f)
for s in skipped:
    print("skipped: " + s)
PY
)
  local np nf ns nok nnot
  read -r np nf ns nok nnot <<<"$(head -n1 <<<"$counts")"
  tail -n +2 <<<"$counts" | sed "s|^|test.sh: $label: |"
  summary+=("$label: $np passed, $nf failed, $ns skipped (CTest tests); TAP checks in them: $nok ok, $nnot not ok")
  [ "$nf" -eq 0 ] || bad=1
  if [ "$ns" -gt 0 ] && [ "${MU_ALLOW_SKIP:-0}" != 1 ]; then
    echo "test.sh: $label: $ns test(s) skipped: install what they name (scripts/install-deps.sh --test) or set MU_ALLOW_SKIP=1"
    bad=1
  fi
  total_pass=$((total_pass + np))
  total_fail=$((total_fail + nf))
  total_skip=$((total_skip + ns))
}
total_pass=0 total_fail=0 total_skip=0

echo "== build: normal"
cmake -S . -B build -DMU_DEVELOPER=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
fuzzers=$(for src in fuzz/*.c; do [ -f "$src" ] && basename "$src" .c; done)
# The ASan+UBSan and fuzz builds run in the background while the normal build's tests run (most
# of those wait on timers and sockets, not on the CPU), at a lower priority than the tests.
more_pid=""
if [ "$fast" = 0 ]; then
  echo "== build: ASan + UBSan, and the fuzz targets, in the background (log: build-more.log)"
  (
    set -e
    cmake -S . -B build-asan -DMU_DEVELOPER=ON -DMU_ASAN=ON -DMU_UBSAN=ON \
      -DCMAKE_BUILD_TYPE=Debug >/dev/null
    nice -n 10 cmake --build build-asan -j"$jobs"
    CC=clang cmake -S . -B build-fuzz -DMU_FUZZ=ON -DMU_USE_JEMALLOC=OFF \
      -DCMAKE_BUILD_TYPE=Debug >/dev/null
    # shellcheck disable=SC2086
    [ -z "$fuzzers" ] || nice -n 10 cmake --build build-fuzz -j"$jobs" --target $fuzzers
  ) >build-more.log 2>&1 &
  more_pid=$!
fi
# run_fuzz: every fuzz target for MU_FUZZ_SECONDS (30) in turn; one line per target to
# build-fuzz/results ("NAME RC").
run_fuzz() {
  local name f corpus rc
  : >build-fuzz/results
  for name in $fuzzers; do
    f=build-fuzz/fuzz/$name
    corpus="fuzz/corpus/$name"
    mkdir -p "build-fuzz/corpus-$name"
    rc=0
    # shellcheck disable=SC2046
    "$f" -max_total_time="${MU_FUZZ_SECONDS:-30}" -print_final_stats=0 -artifact_prefix=build-fuzz/ \
      $([ -f "fuzz/$name.dict" ] && echo "-dict=fuzz/$name.dict") \
      "build-fuzz/corpus-$name" $([ -d "$corpus" ] && echo "$corpus") >"build-fuzz/$name.log" 2>&1 ||
      rc=$?
    echo "$name $rc" >>build-fuzz/results
  done
}

ctest_start build "normal build" -LE torch2

asan=0 # 1 once the ASan build's suite runs
fuzz_pid=""
if [ "$fast" = 0 ]; then
  echo "== build: ASan + UBSan and fuzz (waiting for the background build)"
  rc=0
  wait "$more_pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 40 build-more.log
    echo "test.sh: the ASan+UBSan or fuzz build failed (exit $rc; above, and build-more.log)"
    summary+=("ASan+UBSan build and fuzz: not run: their build failed (build-more.log)")
    bad=1
  else
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ctest_start build-asan "ASan+UBSan build" -LE torch2
    asan=1
    # The fuzzers run beside the tests, one at a time (one core), at a lower priority.
    echo "== fuzz: libFuzzer, ${MU_FUZZ_SECONDS:-30} s a target, beside the tests"
    (renice -n 10 $BASHPID >/dev/null; run_fuzz) &
    fuzz_pid=$!
  fi
fi

# The torch 2.x tier of each build, once the roots are there (its tests take the torch lock in
# turn with the torch tests of the suites running meanwhile).
if wait_roots; then
  ctest_start build "normal build, torch 2.x tier" -L torch2
  ctest_finish build "normal build, torch 2.x tier"
  if [ "$asan" = 1 ]; then
    ctest_start build-asan "ASan+UBSan build, torch 2.x tier" -L torch2
    ctest_finish build-asan "ASan+UBSan build, torch 2.x tier"
  fi
else
  summary+=("the torch 2.x tier: not run: a torch root could not be built")
  bad=1
fi
ctest_finish build "normal build"
[ "$asan" = 0 ] || ctest_finish build-asan "ASan+UBSan build"
if [ -n "$fuzz_pid" ]; then
  wait "$fuzz_pid" || true
  nfuzz=0 findings=0
  while read -r name rc; do
    echo "-- fuzz $name:"
    tail -n 3 "build-fuzz/$name.log"
    nfuzz=$((nfuzz + 1))
    if [ "$rc" -ne 0 ]; then
      findings=$((findings + 1))
      echo "test.sh: fuzz target $name exited $rc: a finding; see build-fuzz/$name.log"
    fi
  done <build-fuzz/results
  summary+=("fuzz: $nfuzz target(s) ran ${MU_FUZZ_SECONDS:-30} s each, $findings with a finding")
  [ "$findings" -eq 0 ] && [ "$nfuzz" -gt 0 ] || bad=1
fi

for line in "${summary[@]}"; do echo "test.sh: $line"; done
echo "test.sh: $total_pass passed, $total_fail failed, $total_skip skipped (CTest tests, summed over the builds above)"
exit "$bad"
