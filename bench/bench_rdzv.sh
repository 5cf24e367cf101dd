#!/usr/bin/env bash
# The native rendezvous under load (issue #3 goals), against a fresh musterd:
#   N = 1,000 nodes joining one run: the round closes < 100 ms after the last join
#   N = 10,000: < 1 s
#   100,000 members kept alive: musterd < 50% of one core. A member as muster agent runs it keeps
#   one watch open (it holds the lease; docs/rendezvous.md) and sends no heartbeats: measured
#   with NODES members on one connection each (the fd limit), projected to 100,000. Heart-beating
#   at 1 Hz (one request per member per second, over CONNS connections) is measured too, for
#   information.
# usage: bench/bench_rdzv.sh [BUILD_DIR]   (env: MEMBERS, CONNS, DURATION, NODES, WATCH_MS)
# Prints one summary line per measurement (rdzv_load's) and exits 1 if a goal was missed.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-${MU_BUILD_DIR:-$SRC/build}}
MUSTERD=${MUSTERD:-$BUILD/musterd}
LOAD=$BUILD/bench/rdzv_load
MEMBERS=${MEMBERS:-100000}
CONNS=${CONNS:-8000}
DURATION=${DURATION:-10}
NODES=${NODES:-15000}
WATCH_MS=${WATCH_MS:-10000}
for f in "$MUSTERD" "$LOAD"; do
  [ -x "$f" ] || { echo "bench_rdzv: $f is missing; build with cmake --build $BUILD" >&2; exit 2; }
done

# Every connection is a file descriptor on both sides: take the hard limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
NOFILE=$(ulimit -n)
if [ "$NOFILE" -lt 12000 ]; then
  echo "bench_rdzv: ulimit -n is $NOFILE; the 10,000-node join needs about 10,100" >&2
fi

LOG=$(mktemp /tmp/bench_rdzv.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -f "$LOG"; }
trap cleanup EXIT

"$MUSTERD" --listen 127.0.0.1:0 --max-connections $((NOFILE - 100)) \
  --max-connections-per-address $((NOFILE - 100)) --idle-timeout-ms 0 \
  --log-level info >"$LOG" 2>&1 &
PID=$!
PORT=
for _ in $(seq 100); do
  PORT=$(sed -n 's/.*musterd listening on [0-9.]*:\([0-9]*\).*/\1/p' "$LOG" | head -1)
  [ -n "$PORT" ] && break
  sleep 0.05
done
[ -n "$PORT" ] || { echo "bench_rdzv: musterd did not start:" >&2; cat "$LOG" >&2; exit 1; }

rc=0
"$LOAD" join --port "$PORT" --nodes 1000 || rc=1
"$LOAD" join --port "$PORT" --nodes 10000 --goal-ms 1000 || rc=1
# The goal: NODES members (one connection each, lease 3 s) each keep a watch open with a
# WATCH_MS timeout, re-armed when answered; no heartbeats. A lease that expires anyway breaks a
# round and fails the run.
[ "$NODES" -gt $((NOFILE - 200)) ] && NODES=$((NOFILE - 200))
"$LOAD" node --port "$PORT" --members "$NODES" --watch-ms "$WATCH_MS" --lease-ms 3000 \
  --duration "$DURATION" --pid "$PID" || rc=1
# Informational: every member heart-beating once a second, one request each. Connections
# beyond the fd limit cannot be opened: the members share CONNS keep-alive connections (each
# carries MEMBERS/CONNS members' heartbeats per second).
"$LOAD" heartbeat --port "$PORT" --members "$MEMBERS" --conns "$CONNS" --duration "$DURATION" \
  --pid "$PID"
# The same load with up to 32 heartbeats per write on 1,000 connections (as a node-local proxy
# would batch them): what musterd costs per heartbeat once the kernel's per-request cost is
# shared. Informational: it does not count against the goal.
"$LOAD" heartbeat --port "$PORT" --members "$MEMBERS" --conns 1000 --pipeline 32 \
  --duration "$DURATION" --pid "$PID"
echo "musterd $(grep -E 'VmHWM' /proc/$PID/status | tr -s ' \t' ' ') after $MEMBERS members"
exit $rc
