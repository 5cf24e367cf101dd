# Shared helpers for the shell tests (tests/cli, tests/integration). Source it:
#   . "$(dirname "$0")/../lib.sh"
# CTest sets MUSTER, MUSTERD, MU_BUILD_DIR, MU_SOURCE_DIR, MU_SANITIZED; run by hand, they
# default to ./build.
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

t_cleanup() {
  local pid
  for pid in "${T_PIDS[@]}"; do
    # Each started process is its own group leader (setsid): stop the whole group.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  done
  sleep 0.2
  for pid in "${T_PIDS[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
  done
  if [ "${T_KEEP:-0}" != 1 ]; then rm -rf "$T_DIR"; fi
}
trap t_cleanup EXIT

# Starts a command in its own process group, output to $T_DIR/<name>.log; sets T_LAST_PID.
t_spawn() {
  local name=$1; shift
  setsid "$@" >"$T_DIR/$name.log" 2>&1 &
  T_LAST_PID=$!
  T_PIDS+=("$T_LAST_PID")
}

# A free TCP port on 127.0.0.1 below the ephemeral range (20000-32000).
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

# Waits until URL answers (any HTTP status), at most $2 seconds (default 10).
t_wait_http() {
  local url=$1 limit=${2:-10} i=0
  while [ "$i" -lt $((limit * 20)) ]; do
    curl -s -o /dev/null --max-time 1 "$url" && return 0
    sleep 0.05; i=$((i + 1))
  done
  echo "t_wait_http: $url did not answer in ${limit}s" >&2
  return 1
}

# Starts musterd on a free port; sets MUSTERD_PORT, MUSTERD_URL, MUSTERD_PID.
t_start_musterd() {
  MUSTERD_PORT=$(t_free_port)
  t_spawn musterd "$MUSTERD" --listen "127.0.0.1:$MUSTERD_PORT" "$@"
  MUSTERD_PID=$T_LAST_PID
  MUSTERD_URL="http://127.0.0.1:$MUSTERD_PORT"
  t_wait_http "$MUSTERD_URL/healthz" 10
}

# Starts a private etcd 3.4 with the v2 API; sets ETCD_PORT, ETCD_URL, ETCD_PID.
t_start_etcd() {
  ETCD_PORT=$(t_free_port)
  local peer; peer=$(t_free_port)
  t_spawn etcd etcd --name "mu-$T_NAME" --data-dir "$T_DIR/etcd-data" --enable-v2=true \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "mu-$T_NAME=http://127.0.0.1:$peer" --initial-cluster-state new
  ETCD_PID=$T_LAST_PID
  ETCD_URL="http://127.0.0.1:$ETCD_PORT"
  t_wait_http "$ETCD_URL/version" 20
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
  "$MUSTER" list 2>/dev/null | awk '$NF == "RUNNING" || $NF == "PENDING" {print $1}' |
    while read -r h; do "$MUSTER" cancel "$h"; done
  t_cleanup
}

# For kubernetes-scheduler tests: puts the recording kubectl stand-in (tests/fixtures/bin/kubectl)
# first on PATH, with each call's arguments recorded in $T_DIR/calls, and works in $T_DIR.
t_fake_kubectl() {
  export PATH=$MU_SOURCE_DIR/tests/fixtures/bin:$PATH
  export KUBECTL_RECORD=$T_DIR/calls
  cd "$T_DIR" || exit 1
}

# Starts the server under test: a real etcd with TARGET=etcd, else musterd with these extra
# arguments; sets URL. When it does not start, the test fails and ends here.
t_start_target() {
  if [ "${TARGET:-musterd}" = etcd ]; then
    t_start_etcd || { t_fail "etcd did not start"; tail -5 "$T_DIR/etcd.log"; t_done; }
    URL=$ETCD_URL
  else
    t_start_musterd "$@" || { t_fail "musterd did not start"; tail -5 "$T_DIR/musterd.log"; t_done; }
    URL=$MUSTERD_URL
  fi
}

# Stops musterd with SIGTERM and checks a clean exit: status 0 within 10 s and no sanitizer
# report in its log (ASan leak checks run at exit). Defaults: $MUSTERD_PID, $T_DIR/musterd.log.
t_stop_musterd_checked() { # [pid] [log]
  local pid=${1:-$MUSTERD_PID} log=${2:-$T_DIR/musterd.log} rc i
  kill -0 "$pid" 2>/dev/null || { t_fail "musterd ($pid) died during the test"; tail -20 "$log"; return; }
  kill -TERM "$pid"
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then t_fail "musterd did not exit within 10 s of SIGTERM"; return; fi
  wait "$pid"; rc=$?
  t_expect_eq "musterd exits 0 on SIGTERM" "$rc" 0
  if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$log"; then
    t_fail "sanitizer report in $log:"; grep -E -A15 'Sanitizer|runtime error:' "$log" | head -40
  fi
}

# Ends what t_start_target started: musterd is stopped and checked, etcd is left to the EXIT trap.
t_stop_target() {
  if [ "${TARGET:-musterd}" != etcd ]; then t_stop_musterd_checked; fi
}

# Assertions: each prints ok/not ok; t_done exits with the result.
t_ok() { T_PASSES=$((T_PASSES + 1)); echo "ok - $*"; }
t_fail() { T_FAILS=$((T_FAILS + 1)); echo "not ok - $*"; }
t_expect_eq() { # name got want
  if [ "$2" = "$3" ]; then t_ok "$1"; else t_fail "$1: got '$2', want '$3'"; fi
}
t_expect_match() { # name text regex
  if printf '%s' "$2" | grep -Eq -- "$3"; then t_ok "$1"; else t_fail "$1: '$2' !~ /$3/"; fi
}
t_done() {
  echo "# $T_PASSES passed, $T_FAILS failed"
  [ "$T_FAILS" -eq 0 ] && [ "$T_PASSES" -gt 0 ]
  exit $?
}
