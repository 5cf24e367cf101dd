# Shared helpers for the shell tests (tests/cli, tests/integration). Source it:
#   . "$(dirname "$0")/../lib.sh"
# CTest sets MUSTER, MUSTERD, MU_BUILD_DIR, MU_SOURCE_DIR, MU_SANITIZED; run by hand, they
# default to ./build.
#
# Rules the helpers keep (and every test with them):
# - A program this repository builds (muster, musterd, examples/, bench/) that is missing is a
#   failure (t_need_built), never a skip. A tool from outside that is missing (etcd, torch,
#   Slurm...) skips the test with exit 77 and the package to install (t_need_cmd, t_need_py);
#   scripts/test.sh counts skips and fails the run on any unless MU_ALLOW_SKIP=1.
# - Every process a test starts is started by t_spawn (its own process group) and stopped by
#   PID when the test ends; servers listen on a port the kernel picks or t_free_port finds.
# - Waits poll a condition with a deadline (t_until); no test sleeps and hopes.
set -u
MU_SOURCE_DIR=${MU_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
MU_BUILD_DIR=${MU_BUILD_DIR:-$MU_SOURCE_DIR/build}
MUSTER=${MUSTER:-$MU_BUILD_DIR/muster}
MUSTERD=${MUSTERD:-$MU_BUILD_DIR/musterd}
MU_SANITIZED=${MU_SANITIZED:-0}
PY=/usr/bin/python3           # Debian's python: torch, python-etcd and yaml live here
export MUSTER MUSTERD MU_BUILD_DIR MU_SOURCE_DIR MU_SANITIZED PY

T_NAME=$(basename "$0" .sh)
T_DIR=$(mktemp -d "/tmp/mu-$T_NAME.XXXXXX")
T_PIDS=()
T_FAILS=0
T_PASSES=0
T_SKIPS=()

# One step of a polling loop: 50 ms.
t_tick() { sleep 0.05; }

# t_until SECONDS COMMAND...: runs COMMAND every 50 ms until it succeeds (returns 0) or
# SECONDS have passed (returns 1).
t_until() {
  local limit=$1 deadline
  shift
  deadline=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -le "$deadline" ] || return 1
    t_tick
  done
}

# t_wal_bytes DIR: the bytes of musterd's log records in data dir DIR (its segments end in the
# zeros it writes ahead of them).
t_wal_bytes() {
  "$PY" - "$1" <<'PY'
import os, struct, sys
total = 0
for f in os.listdir(sys.argv[1]):
    if f.startswith("wal-"):
        d = open(os.path.join(sys.argv[1], f), "rb").read()
        off = 0
        while off + 12 <= len(d) and d[off:off + 12] != bytes(12):
            off += 12 + struct.unpack_from("<I", d, off)[0]
        total += min(off, len(d))
print(total)
PY
}

# t_has_lines FILE REGEX [N]: FILE has at least N (default 1) lines matching the extended REGEX.
t_has_lines() {
  [ "$(grep -cE -- "$2" "$1" 2>/dev/null)" -ge "${3:-1}" ]
}

# t_count_procs REGEX: how many processes have a command line matching REGEX (pgrep -f).
t_count_procs() { pgrep -f -- "$1" | wc -l; }

# True while any process of the group led by PID (or PID itself) exists.
t_alive() { kill -0 -- "-$1" 2>/dev/null || kill -0 "$1" 2>/dev/null; }
t__any_alive() {
  local pid
  for pid in "${T_PIDS[@]}"; do t_alive "$pid" && return 0; done
  return 1
}
t__none_alive() { ! t__any_alive; }

t_cleanup() {
  local pid
  for pid in "${T_PIDS[@]}"; do
    # Each started process is its own group leader (setsid): stop the whole group.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  done
  # At most 5 s for the groups to go, then SIGKILL what is left.
  t_until 5 t__none_alive
  for pid in "${T_PIDS[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
  done
  if [ "${T_KEEP:-0}" != 1 ]; then rm -rf "$T_DIR"; fi
}
trap t_cleanup EXIT

# Starts a command in its own process group, output to $T_DIR/<name>.log; sets T_LAST_PID.
# The log is emptied here, before the start: the background child opens it later, and a caller
# that reads it at once (t_start_musterd's "listening on" line) must not read what an earlier
# process of that name wrote there (a restarted musterd's old port: issue 24, finding 8).
t_spawn() {
  local name=$1
  shift
  : >"$T_DIR/$name.log"
  setsid "$@" >>"$T_DIR/$name.log" 2>&1 &
  T_LAST_PID=$!
  T_PIDS+=("$T_LAST_PID")
}

# --- what a test needs ------------------------------------------------------------------------

# t_need_built PATH...: programs this repository builds. Missing is a failure (exit 1): the
# build is broken or incomplete, and a skip would hide it.
t_need_built() {
  local p
  for p in "$@"; do
    if [ ! -x "$p" ]; then
      echo "not ok - $p is not built (this repository builds it: cmake --build $MU_BUILD_DIR)"
      exit 1
    fi
  done
}

# t_need_cmd COMMAND PACKAGE: a tool from outside; missing skips the test (exit 77).
t_need_cmd() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "# skip: needs '$1' (apt-get install $2, or: sudo scripts/install-deps.sh --test)"
  exit 77
}

# t_need_py MODULE PACKAGE: a Python module under $PY; missing skips the test (exit 77).
t_need_py() {
  "$PY" -c "import $1" 2>/dev/null && return 0
  echo "# skip: needs the Python module '$1' under $PY (apt-get install $2, or: sudo" \
    "scripts/install-deps.sh --test)"
  exit 77
}

# t_need_validator: the Kubernetes schema validator (tests/schemas/validate-k8s.mjs: Volcano Jobs, JobSets): node, the
# Python yaml module, and the npm packages scripts/install-deps.sh --test puts in a fixed cache
# dir ($MU_NPM_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/muster-vjv; no registry is reached).
# Sets VALIDATOR and MODS; anything missing skips the test (exit 77) naming the fix.
t_need_validator() {
  VALIDATOR=$MU_SOURCE_DIR/tests/schemas/validate-k8s.mjs
  t_need_cmd node nodejs
  t_need_py yaml python3-yaml
  MODS=${MU_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster-vjv}
  local mod
  for mod in ajv ajv-formats yaml; do
    [ -d "$MODS/node_modules/$mod" ] || {
      echo "# skip: the validator's npm package '$mod' is not in $MODS/node_modules: run"
      echo "#   scripts/install-deps.sh --test (it installs ajv@8 ajv-formats@3 yaml@2 there),"
      echo "#   or point MU_NPM_CACHE at a directory that has them"
      exit 77
    }
  done
}

# t_torch_lock: one torchrun test at a time on this machine, across builds and worktrees (each
# starts 2 agents and 4 workers importing torch: two at once on 2 cores take minutes). Waits
# at most 20 min for the lock (CTest gives these tests 30); the lock goes with the process.
# The holder runs ahead of the other tests for the CPU (nice -5, where it may: root): the
# torch tests take turns, so their sum is the floor of a whole run's length, and the tests
# beside them (scripts/test.sh runs both builds' suites at once) must not stretch it.
t_torch_lock() {
  local t0=$SECONDS
  exec 9>"/tmp/muster-torchrun-tests.lock"
  if ! flock -w 1200 9; then
    echo "not ok - another torchrun test held /tmp/muster-torchrun-tests.lock for 20 min"
    exit 1
  fi
  [ $((SECONDS - t0)) -lt 2 ] || echo "# waited $((SECONDS - t0)) s for the torchrun lock"
  renice -n -5 -p $$ >/dev/null 2>&1 || true
}

# t_torch_root SUITE: the torch 2.x root of SUITE (trixie: torch 2.6, sid: torch 2.14; see
# scripts/torch-roots.sh), built now when missing (once per machine; scripts/test.sh starts it
# in the background first). A root that
# cannot be built fails the test, saying why: the torch 2.x tier is never skipped.
t_torch_root() {
  local roots=$MU_SOURCE_DIR/scripts/torch-roots.sh
  "$roots" check "$1" 2>/dev/null && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "not ok - the torch $1 root is missing and building it needs root: sudo $roots build $1"
    exit 1
  fi
  echo "# building the torch $1 root (once per machine): $roots build $1"
  local rc=0
  "$roots" build "$1" >"$T_DIR/torch-root-$1.log" 2>&1 || rc=$?
  sed 's/^/#   /' "$T_DIR/torch-root-$1.log"
  if [ "$rc" != 0 ]; then
    echo "not ok - the torch $1 root could not be built (the lines above say why; $roots build $1)"
    exit 1
  fi
  "$roots" check "$1" || { echo "not ok - the torch $1 root is still missing after a build"; exit 1; }
}

# t_in_root SUITE CMD...: CMD inside SUITE's torch root (chroot, /proc and /dev/shm mounted),
# with this test's directory and the source tree at their own paths.
t_in_root() {
  local s=$1
  shift
  "$MU_SOURCE_DIR/scripts/torch-roots.sh" run -b "$T_DIR" -b "$MU_SOURCE_DIR" "$s" "$@"
}

# t_compat TORCH LAUNCHER BACKEND CASE RESULT: one cell of the compatibility table
# (docs/compat.md, made by scripts/compat-table.sh from these rows; nobody writes it by hand).
# RESULT is pass or fail. The rows go to $MU_BUILD_DIR/compat-rows/<test>.tsv, rewritten by each run.
t_compat() {
  local d=$MU_BUILD_DIR/compat-rows
  mkdir -p "$d"
  if [ -z "${T_COMPAT_STARTED:-}" ]; then
    : >"$d/$T_NAME.tsv"
    T_COMPAT_STARTED=1
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$T_NAME" >>"$d/$T_NAME.tsv"
}

# t_skip_part REASON: a part of the test could not run. The rest still runs and t_done ends
# with exit 77 (skipped) if nothing failed, so the missing part is counted, not hidden.
t_skip_part() {
  T_SKIPS+=("$1")
  echo "# skip (part): $1"
}

# --- servers ----------------------------------------------------------------------------------

# A free TCP port on 127.0.0.1 below the ephemeral range (20000-32000), for programs that must
# be told their port before they start (etcd, Slurm). Prefer port 0 where a program takes it.
t_free_port() {
  "$PY" - <<'PY'
import random, socket
for _ in range(200):
    p = random.randint(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        s.close()
PY
}

# Waits until URL answers (any HTTP status), at most $2 seconds (default 10); with a PID as $3,
# gives up at once when that process is gone (the server died).
t_wait_http() {
  local url=$1 limit=${2:-10} pid=${3:-} deadline
  deadline=$((SECONDS + ${2:-10}))
  until curl -s -o /dev/null --max-time 1 "$url"; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "t_wait_http: the server (pid $pid) exited before $url answered" >&2
      return 1
    fi
    if [ "$SECONDS" -gt "$deadline" ]; then
      echo "t_wait_http: $url did not answer in ${limit}s" >&2
      return 1
    fi
    t_tick
  done
}

# Starts musterd with these extra arguments on a port the kernel picks (--listen 127.0.0.1:0:
# no other test can take it first) and waits for its "listening on" line; sets MUSTERD_PORT,
# MUSTERD_URL (https:// when --tls-cert is among the arguments) and MUSTERD_PID. Log:
# $T_DIR/musterd.log. Returns 1 (after printing the log's tail) when it does not start in 20 s.
t_start_musterd() {
  local scheme=http a
  for a in "$@"; do [ "$a" = --tls-cert ] && scheme=https; done
  # t_spawn's redirection runs in the background: a previous musterd's log must not be read
  rm -f "$T_DIR/musterd.log"
  t_spawn musterd "$MUSTERD" --listen 127.0.0.1:0 "$@"
  MUSTERD_PID=$T_LAST_PID
  MUSTERD_PORT=""
  t_until 20 t__musterd_port "$T_DIR/musterd.log" "$MUSTERD_PID"
  if [ -z "$MUSTERD_PORT" ]; then
    echo "# musterd did not start:"
    sed 's/^/#   /' "$T_DIR/musterd.log" | tail -10
    return 1
  fi
  MUSTERD_URL="$scheme://127.0.0.1:$MUSTERD_PORT"
}
# Sets MUSTERD_PORT from LOG's "listening on" line. Succeeds once the line is there, and also
# when PID died (MUSTERD_PORT stays empty), so that the wait ends at once.
t__musterd_port() { # log pid
  local line
  line=$(grep -m1 -o 'musterd listening on 127\.0\.0\.1:[0-9]*' "$1" 2>/dev/null)
  if [ -n "$line" ]; then
    MUSTERD_PORT=${line##*:}
    return 0
  fi
  ! kill -0 "$2" 2>/dev/null
}

# t_c10d_port [LOG]: sets C10D_PORT to the port of the TCPStore listener of a musterd started
# with --c10d-listen HOST:0 (its log's "musterd c10d listening on HOST:PORT" line).
t_c10d_port() {
  local log=${1:-$T_DIR/musterd.log}
  C10D_PORT=""
  t_until 10 t__c10d_port "$log"
}
t__c10d_port() {
  C10D_PORT=$(sed -n 's/.*musterd c10d listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$1" 2>/dev/null | tail -1)
  [ -n "$C10D_PORT" ]
}

# Starts a private etcd 3.4 with the v2 API; sets ETCD_PORT, ETCD_URL, ETCD_PID. etcd must be
# told its ports, so a port another process takes meanwhile makes it exit: then it tries again
# with new ports (3 times).
t_start_etcd() {
  local peer try
  for try in 1 2 3; do
    ETCD_PORT=$(t_free_port)
    peer=$(t_free_port)
    rm -rf "$T_DIR/etcd-data"
    t_spawn etcd etcd --name "mu-$T_NAME" --data-dir "$T_DIR/etcd-data" --enable-v2=true \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$peer" \
      --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "mu-$T_NAME=http://127.0.0.1:$peer" --initial-cluster-state new
    ETCD_PID=$T_LAST_PID
    ETCD_URL="http://127.0.0.1:$ETCD_PORT"
    t_wait_http "$ETCD_URL/version" 20 "$ETCD_PID" && return 0
    t_alive "$ETCD_PID" && return 1 # running but not answering: no point in another port
    grep -q 'address already in use' "$T_DIR/etcd.log" || return 1
    cp "$T_DIR/etcd.log" "$T_DIR/etcd-try$try.log"
  done
  return 1
}

# For tests that run jobs on the local scheduler: a private HOME, no config file, logs under
# $T_DIR/logs, $T_DIR as the working directory, and an EXIT trap that also cancels every job
# still running (jobs run under their own supervisor, outside our process groups).
t_local_jobs() {
  export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs"
  cd "$T_DIR" || exit 1
  trap t_cancel_jobs EXIT
}
t_cancel_jobs() {
  # the state is the third column (the second when a job has no name); AGE and a reason follow
  "$MUSTER" list 2>/dev/null |
    awk 'NR > 1 && ($3 ~ /^(RUNNING|PENDING)$/ || $2 ~ /^(RUNNING|PENDING)$/) {print $1}' |
    while read -r h; do "$MUSTER" cancel "$h"; done
  t_cleanup
}

# For kubernetes-scheduler tests: puts the recording kubectl stand-in (tests/fixtures/bin/kubectl)
# first on PATH, with each call's arguments recorded in $T_DIR/calls, the cluster's jobs in
# $T_DIR/kubectl-jobs, and works in $T_DIR.
t_fake_kubectl() {
  export PATH=$MU_SOURCE_DIR/tests/fixtures/bin:$PATH
  export KUBECTL_RECORD=$T_DIR/calls KUBECTL_STATE=$T_DIR/kubectl-jobs
  cd "$T_DIR" || exit 1
}
# t_kubectl_job NAMESPACE NAME: a job that exists in the stand-in's cluster without a `create`
# (one submitted before the test, e.g. by another user).
t_kubectl_job() {
  mkdir -p "${KUBECTL_STATE:-$T_DIR/kubectl-jobs}/$1"
  : >"${KUBECTL_STATE:-$T_DIR/kubectl-jobs}/$1/$2"
}

# Starts the server under test: a real etcd with TARGET=etcd, else musterd with these extra
# arguments; sets URL. When it does not start, the test fails and ends here.
t_start_target() {
  if [ "${TARGET:-musterd}" = etcd ]; then
    t_need_cmd etcd etcd-server
    t_start_etcd || { t_fail "etcd did not start"; tail -5 "$T_DIR/etcd.log"; t_done; }
    URL=$ETCD_URL
  else
    t_start_musterd "$@" || { t_fail "musterd did not start"; t_done; }
    URL=$MUSTERD_URL
  fi
}

# t_wait_exit PID SECONDS: waits for a child of this shell to exit; sets T_RC to its exit
# status, or to "timeout" when it still runs after SECONDS. Not in a $(...) subshell: only this
# shell can reap its children.
t_wait_exit() {
  T_RC=timeout
  t_until "$2" eval "! kill -0 $1 2>/dev/null" || return 1
  wait "$1" 2>/dev/null
  T_RC=$?
}

# Stops musterd with SIGTERM and checks a clean exit: status 0 within 10 s and no sanitizer
# report in its log (ASan leak checks run at exit). Defaults: $MUSTERD_PID, $T_DIR/musterd.log.
t_stop_musterd_checked() { # [pid] [log]
  local pid=${1:-$MUSTERD_PID} log=${2:-$T_DIR/musterd.log}
  kill -0 "$pid" 2>/dev/null || { t_fail "musterd ($pid) died during the test"; tail -20 "$log"; return; }
  kill -TERM "$pid"
  if ! t_wait_exit "$pid" 10; then t_fail "musterd did not exit within 10 s of SIGTERM"; return; fi
  t_expect_eq "musterd exits 0 on SIGTERM" "$T_RC" 0
  if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$log"; then
    t_fail "sanitizer report in $log:"; grep -E -A15 'Sanitizer|runtime error:' "$log" | head -40
  fi
}

# Ends what t_start_target started: musterd is stopped and checked, etcd is left to the EXIT trap.
t_stop_target() {
  if [ "${TARGET:-musterd}" != etcd ]; then t_stop_musterd_checked; fi
}

# --- results ----------------------------------------------------------------------------------

# Assertions: each prints ok/not ok; t_done exits with the result: 1 when a check failed (or
# none ran), 77 when part of the test was skipped (t_skip_part), else 0.
t_ok() { T_PASSES=$((T_PASSES + 1)); echo "ok - $*"; }
t_fail() { T_FAILS=$((T_FAILS + 1)); echo "not ok - $*"; }
t_expect_eq() { # name got want
  if [ "$2" = "$3" ]; then t_ok "$1"; else t_fail "$1: got '$2', want '$3'"; fi
}
t_expect_match() { # name text regex
  if printf '%s' "$2" | grep -Eq -- "$3"; then t_ok "$1"; else t_fail "$1: '$2' !~ /$3/"; fi
}
t_done() {
  echo "# $T_PASSES passed, $T_FAILS failed${T_SKIPS[0]:+, parts skipped: ${#T_SKIPS[@]}}"
  [ "$T_FAILS" -eq 0 ] && [ "$T_PASSES" -gt 0 ] || exit 1
  [ ${#T_SKIPS[@]} -eq 0 ] || exit 77
  exit 0
}
