#!/usr/bin/env bash
# The mutation check (issue 35): each mutant of tests/mutants.txt is applied, one at a time, to a
# scratch copy of the tree; the tests it names must then fail. A mutant whose tests all pass
# SURVIVED: the tests cannot see that bug.
#
#   scripts/mutants.sh [--list FILE] [--files PATH...] [--line N...]
#
#   --files PATH...  only the mutants of these files (what .ci/run passes: the touched files)
#   --line N...      only the mutants on these lines of the list (with --files: either)
#
# Every line of the list is checked first, selected or not: its file must exist and its text
# must be in it exactly once; otherwise the run fails naming the list's line (a refactor that
# moves or rewrites the code must move its mutants along).
#
# The scratch copy lives in $MU_MUTANTS_DIR (default /tmp/muster-mutants-$UID): src/ (the tree's
# tracked and untracked-not-ignored files, copied when they differ) and build/ (one
# RelWithDebInfo build, kept between runs, so a run rebuilds only what a mutant changed). The
# first run builds everything there (several minutes on a loaded machine).
#
# MU_MUTANTS_WORKERS (default 2) mutants are tried at a time, each in a scratch tree of its own
# ($S/wI, in a mount namespace of its own: needs root, else one at a time); the costliest first.
# Before the mutants, each distinct set of CTest tests the selected lines name runs once on the
# unmutated tree (its baseline): a set that fails there fails the run, and its time caps its
# mutants' (twice it plus 60 s: a mutant still running then made its tests hang, and is killed).
#
# Prints one line per mutant ("killed", "SURVIVED", "NOT BUILT", "NOT RUN") and closes with
# "N mutants, K killed". Exits 0 when every selected mutant was killed and every line is valid,
# 1 otherwise, 2 on a usage error.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIST=$ROOT/tests/mutants.txt
files=()
lines=()
mode=""
filtered=0 # --files or --line given: only what they select (possibly nothing)
while [ $# -gt 0 ]; do
  case $1 in
    --list) LIST=$(realpath "$2"); shift 2; continue ;;
    --files) mode=files filtered=1 ;;
    --line) mode=line filtered=1 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutants.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *)
      case $mode in
        files) files+=("$1") ;;
        line) lines+=("$1") ;;
        *) echo "mutants.sh: '$1': use --files PATH... or --line N..." >&2; exit 2 ;;
      esac ;;
  esac
  shift
done
S=${MU_MUTANTS_DIR:-/tmp/muster-mutants-$(id -u)}
mkdir -p "$S"
exec 9>"$S/lock"
flock -n 9 || { echo "mutants.sh: another run uses $S (set MU_MUTANTS_DIR for a second one)" >&2; exit 1; }
PY=$(command -v python3) || { echo "mutants.sh: python3 is needed (scripts/install-deps.sh)" >&2; exit 1; }
T0=$(date +%s)

# --- 1. the list: every line valid; the selected ones written to $S/plan (fields split by 0x1f) ------
"$PY" - "$LIST" "$ROOT" "$S/plan" "$filtered" "${#files[@]}" "${files[@]}" "${lines[@]}" <<'PY' || exit 1
import os, sys
lst, root, plan, filtered = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
nf = int(sys.argv[5])
files = set(os.path.normpath(f) for f in sys.argv[6:6 + nf])
lines = set(int(x) for x in sys.argv[6 + nf:])
bad, out, seen = 0, [], set()
rel = os.path.relpath(lst, root)
for no, raw in enumerate(open(lst, encoding="utf-8"), 1):
    line = raw.rstrip("\n")
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    def err(msg):
        global bad
        bad += 1
        print("%s:%d: %s\n    %s" % (rel, no, msg, line))
    try:
        path, rest = line.split(": ", 1)
        text, rest = rest.split(" => ", 1)
        repl, tests = rest.split(" :: ", 1)
    except ValueError:
        err("not 'FILE: TEXT => REPLACEMENT :: TESTS'")
        continue
    path, text, repl, tests = path.strip(), text.strip(), repl.strip(), tests.split()
    if repl == "<nothing>":
        repl = ""
    import re
    if not any(t.startswith(("unit:", "ctest:")) for t in tests) or any(
            not (t.startswith(("unit:", "ctest:")) or re.match(r"[A-Z_][A-Z0-9_]*=", t))
            for t in tests):
        err("its tests must be unit:CASE, ctest:NAME or VAR=VALUE words, one test at least")
        continue
    if (path, text, repl) in seen:
        err("listed twice")
        continue
    seen.add((path, text, repl))
    p = os.path.join(root, path)
    if not os.path.isfile(p):
        err("%s is not there any more: move this mutant to the file that has its code now" % path)
        continue
    n = open(p, encoding="utf-8").read().count(text)
    if n == 0:
        err("the text '%s' is no longer in %s: move this mutant to where that code is now "
            "(or rewrite it for the new code)" % (text, path))
        continue
    if n > 1:
        err("the text '%s' is in %s %d times: make it longer, so it names one place"
            % (text, path, n))
        continue
    if text == repl:
        err("the replacement is the text itself")
        continue
    if filtered and os.path.normpath(path) not in files and no not in lines:
        continue
    out.append("\x1f".join([str(no), path, text, repl, " ".join(tests)]))
open(plan, "w").write("".join(l + "\n" for l in out))
if bad:
    print("mutants.sh: %d line%s of %s to fix (above)" % (bad, "" if bad == 1 else "s", rel))
    sys.exit(1)
PY
n=$(wc -l <"$S/plan")
if [ "$n" -eq 0 ]; then
  echo "0 mutants, 0 killed (none of the list's mutants is in the files selected)"
  exit 0
fi

# --- 2. the scratch copy: files that differ are copied, files gone are removed --------------
mkdir -p "$S/src"
git -C "$ROOT" ls-files -co --exclude-standard -z | "$PY" -c '
import os, sys, shutil, filecmp, hashlib
root, dst, tree = sys.argv[1], sys.argv[2], sys.argv[3]
keep = set(p for p in sys.stdin.read().split("\0") if p and os.path.isfile(os.path.join(root, p)))
h = hashlib.sha256()
for p in sorted(keep):
    h.update(p.encode() + b"\0" + open(os.path.join(root, p), "rb").read() + b"\0")
open(tree, "w").write(h.hexdigest() + "\n")  # what the baselines were taken of
for p in keep:
    s, d = os.path.join(root, p), os.path.join(dst, p)
    if os.path.isfile(d) and filecmp.cmp(s, d, shallow=False):
        continue
    os.makedirs(os.path.dirname(d), exist_ok=True)
    shutil.copyfile(s, d)  # a new mtime: make rebuilds it
    shutil.copymode(s, d)
for dp, dn, fn in os.walk(dst):
    for f in fn:
        p = os.path.relpath(os.path.join(dp, f), dst)
        if p not in keep:
            os.unlink(os.path.join(dp, f))
' "$ROOT" "$S/src" "$S/tree"

B=$S/build
# The scratch build: RelWithDebInfo's code (-O2 -DNDEBUG) without its debug info, linked by lld
# when there is one: each mutant relinks its targets, and both make that several times cheaper.
CONF=(-DMU_DEVELOPER=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG")
if command -v ld.lld >/dev/null; then
  for k in EXE SHARED MODULE; do CONF+=("-DCMAKE_${k}_LINKER_FLAGS=-fuse-ld=lld"); done
fi
if [ ! -f "$B/CMakeCache.txt" ] || [ "$(cat "$S/configured" 2>/dev/null)" != "${CONF[*]}" ]; then
  echo "# configuring the scratch build in $B (the first run builds everything: minutes)"
  rm -rf "$B"
  cmake -S "$S/src" -B "$B" "${CONF[@]}" >"$S/cmake.log" 2>&1 ||
    { tail -20 "$S/cmake.log"; echo "mutants.sh: cmake failed (log: $S/cmake.log)"; exit 1; }
  echo "${CONF[*]}" >"$S/configured"
fi
JOBS=${MU_MUTANTS_JOBS:-2}
LOGS=$S # where build.log and test.log go (each worker's own directory below)
# targets TESTS...: what the named tests need built, and no more (a mutant of a library relinks
# only these): the unit runner for unit:, the programs the scripts run for ctest:, and the
# portable bundle for the tests that put it in an image
targets() {
  local t unit=0 ctest=0 portable=0
  for t in "$@"; do
    case $t in
      unit:*) unit=1 ;;
      ctest:integration/local_container | ctest:integration/image_pipeline) ctest=1 portable=1 ;;
      ctest:*) ctest=1 ;;
    esac
  done
  [ "$unit" = 1 ] && echo mu_unit_tests
  [ "$ctest" = 1 ] && echo muster musterd c10d_client mu_faultshim mu_quote_probe ring_allreduce
  [ "$portable" = 1 ] && echo portable sum_static
}
build() { # TARGETS...: 0 built
  nice cmake --build "$B" -j"$JOBS" --target "$@" >"$LOGS/build.log" 2>&1
}
# run_tests TESTS...: 0 when all pass; the first that fails is in $failed. A CTest test runs
# with a time cap of $CAP seconds; with ISO=1 in a PID namespace of its own (unshare -p: at the
# cap, or when it ends, every process it started is gone, whatever the test left behind) whose
# first process is a shell that reaps orphans, so that an orphan is never left a zombie.
CAP=900 ISO=0
run_tests() {
  local t envs=() iso=()
  failed=""
  for t in "$@"; do
    case $t in unit:*|ctest:*) ;; *=*) envs+=("$t") ;; esac
  done
  [ "$ISO" = 1 ] && iso=(timeout -k 10 "$CAP" unshare -pf --kill-child --mount-proc)
  for t in "$@"; do
    case $t in
      unit:*) nice "$B/mu_unit_tests" --timeout 120 "${t#unit:}" >"$LOGS/test.log" 2>&1 ;;
      ctest:*) (cd "$B" && env "${envs[@]}" "${iso[@]}" bash -c 'nice ctest -R "$1" --timeout "$2" \
        --output-on-failure; exit $?' _ "^${t#ctest:}\$" "$CAP" >"$LOGS/test.log" 2>&1 &&
        ! grep -q "No tests were found" "$LOGS/test.log") ;;
      *) continue ;;
    esac || { failed=$t; return 1; }
  done
  return 0
}

all_tests=$(cut -d$'\x1f' -f5 "$S/plan" | tr ' ' '\n' | grep -v '=' | sort -u | tr '\n' ' ')
# shellcheck disable=SC2046
if ! build $(targets $all_tests); then
  tail -30 "$S/build.log"
  echo "mutants.sh: the unmutated tree does not build in $B (log: $S/build.log)"
  exit 1
fi
# The unit cases must pass on the real code (else every mutant would look killed).
units=$(tr ' ' '\n' <<<"$all_tests" | sed -n 's/^unit://p' | tr '\n' ' ')
if [ -n "$units" ] && ! run_tests $(sed 's/[^ ]*/unit:&/g' <<<"$units"); then
  tail -30 "$S/test.log"
  echo "mutants.sh: $failed fails on the unmutated tree: fix it before counting mutants"
  exit 1
fi

# --- 3. each mutant, on W workers --------------------------------------------------------------
# Each worker is a scratch tree of its own ($S/wI: a copy of src/ and build/, a few tens of MB)
# mounted over src/ and build/ in a mount namespace of its own (unshare -m), so that every path
# the build and the tests know stays the same. Without root, or with MU_MUTANTS_WORKERS=1, one
# worker runs in src/ and build/ themselves.
#
# First the baselines: each line's CTest tests (with its VAR=VALUE words), as one set, run once
# on the unmutated tree. A set that fails there would make its mutants look killed: they are
# not counted ("NOT RUN"), and the run fails. A set's time gives its mutants their cap: twice
# its baseline plus 60 s. A mutant whose tests are still running then is killed ("timed out",
# as PIT and Stryker count it): it made them hang. Then the mutants. Both take the costliest
# first (a test's time: CTest's record in build/, else tests/ctest-costs.txt). A baseline that
# passed is kept for the next run of the same tree.
W=${MU_MUTANTS_WORKERS:-2}
case $W in '' | *[!0-9]* | 0) echo "mutants.sh: MU_MUTANTS_WORKERS must be 1 or more" >&2; exit 2 ;; esac
[ "$W" -gt "$n" ] && W=$n
ISO=0
if [ "$(id -u)" = 0 ] && unshare -m unshare -pf --kill-child --mount-proc true 2>/dev/null; then
  ISO=1
elif [ "$W" -gt 1 ]; then
  echo "# one worker: more need root (a mount namespace each)"
  W=1
fi
# A baseline that passed is kept for the next run of the same tree (every file the copy took
# the same): a second full run of one commit skips them.
if ! cmp -s "$S/tree" "$S/base/tree" 2>/dev/null; then
  rm -rf "$S/base"
  mkdir -p "$S/base"
  cp "$S/tree" "$S/base/tree"
fi
# the plan, costliest first; $S/sets: each distinct set of CTest words (a line's tests without
# its unit: words), costliest first
"$PY" - "$S/plan" "$S/sets" "$ROOT/tests/ctest-costs.txt" "$B/Testing/Temporary/CTestCostData.txt" <<'PY'
import os, sys
plan, sets = sys.argv[1], sys.argv[2]
cost = {}
for costs in sys.argv[3:]:  # the repository's full-run figures, then this scratch build's own
    if os.path.isfile(costs):
        for l in open(costs):
            f = l.split()
            if len(f) >= 3 and f[0] != "---" and float(f[2]) > 0:
                cost[f[0]] = float(f[2])
def words(row):
    return [t for t in row.split("\x1f")[4].split() if not t.startswith("unit:")]
def c(ws):
    ct = [t[6:] for t in ws if t.startswith("ctest:")]
    return sum(cost.get(t) or 60.0 for t in ct) if ct else 0.0
rows = open(plan).read().splitlines()
rows.sort(key=lambda r: c(words(r)), reverse=True)
open(plan, "w").write("".join(r + "\n" for r in rows))
seen = {}
for r in rows:
    ws = words(r)
    if any(t.startswith("ctest:") for t in ws):
        seen.setdefault(" ".join(sorted(ws)), c(ws))
open(sets, "w").write("".join(k + "\n" for k in sorted(seen, key=seen.get, reverse=True)))
PY
set_key() { # WORDS...: the name of a set's baseline file
  local t ws=()
  for t in "$@"; do case $t in unit:*) ;; *) ws+=("$t") ;; esac; done
  printf '%s\n' "${ws[@]}" | sort | tr '\n' ' ' | sed 's/ $//' | md5sum | cut -c1-16
}
: >"$S/results"
# base_one WORKER-DIR SET: runs one set on the unmutated tree; $S/base/KEY gets "RC SECONDS"
base_one() {
  local L=$1 t1 rc=0
  [ "$(cut -d' ' -f1 "$S/base/$(set_key $2)" 2>/dev/null)" = 0 ] && return 0 # kept: same tree
  t1=$(date +%s)
  # shellcheck disable=SC2086
  CAP=900 run_tests $2 || rc=1
  echo "$rc $(( $(date +%s) - t1 ))" >"$S/base/$(set_key $2)"
  if [ "$rc" != 0 ]; then
    cp "$L/test.log" "$S/base/$(set_key $2).log"
    { flock 8; echo "FAILS     on the unmutated tree: $2 (log: $S/base/$(set_key $2).log)"; } 8>>"$S/lock.out"
  fi
}
# mutate_one WORKER-DIR LINE: applies one line of the plan, builds, runs its tests, restores
mutate_one() {
  local L=$1 no path text repl tests f t1 what res base="0 0" cap=900
  IFS=$'\x1f' read -r no path text repl tests <<<"$2"
  what="line $no: $path: '$text' => '$repl'"
  # shellcheck disable=SC2086
  case " $tests " in *" ctest:"*) base=$(cat "$S/base/$(set_key $tests)" 2>/dev/null || echo "1 0") ;; esac
  if [ "${base% *}" != 0 ]; then
    res="NOT RUN   $what: $tests fail on the unmutated tree (above)"
    { flock 8; echo "$res"; echo "$res" >>"$S/results"; } 8>>"$S/lock.out"
    return
  fi
  cap=$(( 2 * ${base#* } + 60 ))
  [ "$cap" -gt 900 ] && cap=900
  f=$S/src/$path
  cp -p "$f" "$L/orig"
  "$PY" - "$f" "$text" "$repl" <<'PY'
import sys
p, text, repl = sys.argv[1:4]
s = open(p, encoding="utf-8").read()
open(p, "w", encoding="utf-8").write(s.replace(text, repl, 1))
PY
  t1=$(date +%s)
  # shellcheck disable=SC2086
  if ! build $(targets $tests); then
    res="NOT BUILT $what (the mutant does not compile: rewrite it; $L/build.log)"
  elif CAP=$cap run_tests $tests; then
    res="SURVIVED  $what: $tests all pass ($(( $(date +%s) - t1 )) s; $L/test.log)"
  elif [ "$(( $(date +%s) - t1 ))" -ge "$cap" ]; then
    res="killed    $what: $failed timed out (its cap: ${cap} s, twice its baseline + 60 s)"
  else
    res="killed    $what: by $failed ($(( $(date +%s) - t1 )) s)"
  fi
  cat "$L/orig" >"$f" # the original text, with a new mtime: the next build recompiles it
  touch "$f"
  # the test's log of a survivor stays for a look; the next mutant of this worker overwrites it
  { flock 8; echo "$res"; echo "$res" >>"$S/results"; } 8>>"$S/lock.out"
}
# worker DIR PHASE: takes the next line of $S/sets (PHASE base) or $S/plan (PHASE mutants)
worker() {
  local L=$1 i line q=$S/plan
  [ "$2" = base ] && q=$S/sets
  while :; do
    i=$({ flock 7; i=$(cat "$S/next.$2"); echo $((i + 1)) >"$S/next.$2"; echo "$i"; } 7>>"$S/lock.next")
    line=$(sed -n "$((i + 1))p" "$q")
    [ -n "$line" ] || return 0
    if [ "$2" = base ]; then base_one "$L" "$line"; else mutate_one "$L" "$line"; fi
  done
}
# on_workers PHASE: runs the phase on W workers and waits for them
on_workers() {
  echo 0 >"$S/next.$1"
  if [ "$W" = 1 ]; then
    worker "$S" "$1"
    return
  fi
  local i p pids=()
  for i in $(seq 1 "$W"); do
    # shellcheck disable=SC2016
    S=$S B=$B PY=$PY JOBS=$JOBS ISO=$ISO LOGS=$S/w$i unshare -m bash -c '
      mount --bind "$LOGS/src" "$S/src" && mount --bind "$LOGS/build" "$S/build" || exit 1
      '"$(declare -f targets build run_tests set_key base_one mutate_one worker)"'
      worker "$LOGS" "$1"' _ "$1" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || echo "mutants.sh: a worker failed (pid $p)"; done
}
if [ "$W" -gt 1 ]; then
  for i in $(seq 1 "$W"); do
    rm -rf "$S/w$i"
    mkdir -p "$S/w$i"
    cp -a "$S/src" "$S/build" "$S/w$i/"
  done
fi
nsets=$(wc -l <"$S/sets")
kept=0
while IFS= read -r set; do
  # shellcheck disable=SC2086
  [ "$(cut -d' ' -f1 "$S/base/$(set_key $set)" 2>/dev/null)" = 0 ] && kept=$((kept + 1))
done <"$S/sets"
[ "$nsets" -gt 0 ] && echo "# the baselines: $nsets set(s) of CTest tests on the unmutated tree," \
  "$kept kept from a run of this same tree, on $W worker(s)"
on_workers base
# the mutants in the order of their sets' baselines, the longest first (the unit-only last)
while IFS= read -r row; do
  IFS=$'\x1f' read -r _ _ _ _ tests <<<"$row"
  secs=0
  # shellcheck disable=SC2086
  case " $tests " in *" ctest:"*) secs=$(cut -d' ' -f2 "$S/base/$(set_key $tests)" 2>/dev/null || echo 0) ;; esac
  printf '%s\x1e%s\n' "$secs" "$row"
done <"$S/plan" | sort -t$'\x1e' -k1,1nr -s | cut -d$'\x1e' -f2- >"$S/plan.sorted"
mv "$S/plan.sorted" "$S/plan"
echo "# the mutants: $n, on $W worker(s) ($(( $(date +%s) - T0 )) s so far)"
on_workers mutants
# the workers' records of each test's time, kept for the next run's order (the most runs wins)
"$PY" - "$B/Testing/Temporary/CTestCostData.txt" "$S"/w*/build/Testing/Temporary/CTestCostData.txt <<'PY'
import os, sys
rows = {}
for p in sys.argv[1:]:
    if not os.path.isfile(p):
        continue
    for l in open(p):
        f = l.split()
        if len(f) >= 3 and f[0] != "---" and (f[0] not in rows or int(f[1]) > int(rows[f[0]][1])):
            rows[f[0]] = f
if rows:
    os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
    open(sys.argv[1], "w").write("".join(" ".join(f) + "\n" for f in rows.values()) + "---\n")
PY
total=$(wc -l <"$S/results")
killed=$(grep -c '^killed ' "$S/results")
echo "# $(( $(date +%s) - T0 )) s in all, $W worker(s), $nsets baseline(s); scratch copy and build: $S"
echo "$total mutants, $killed killed"
[ "$total" -eq "$n" ] || echo "mutants.sh: $((n - total)) of the $n mutants did not run (above)"
[ "$killed" -eq "$total" ] && [ "$total" -eq "$n" ]
