#!/usr/bin/env bash
# Durable write throughput and recovery time (issue #7).
#
# 1. PUT of distinct keys with wrk (bench/wrk.lua, 64-byte values, CONNS connections):
#    musterd --data-dir --fsync batch (every reply waits for the fdatasync of its batch)
#    against etcd 3.4 --data-dir with its default durability (fsync of the raft log before a
#    write is committed). Runs alternate musterd, etcd, musterd, ...; the best run of each is
#    kept. musterd's /metrics give records per fsync (how big the group commits were).
# 2. Recovery: 1,000,000 keys loaded into musterd (bench/durable_load, pipelined, --fsync off:
#    the data dir it leaves is the same), then the time from exec to /healthz answering for
#    a restart after kill -9 (snapshot + log tail, the default --snapshot-every) and after a
#    graceful stop (final snapshot only), with musterd's own "recovered ... in X ms" figure.
#
#   bench/bench_durable.sh   env: MU_BUILD_DIR (./build), DURATION (s, 5), CONNS (64), ROUNDS (2),
#                                 KEYS (1000000)
# Goals: PUT >= 3x etcd (issue 15; musterd with its default durability, --fsync batch, the
# default, against etcd's defaults); recovery of 1,000,000 keys < 2 s.
# Not a test: it never fails on a missed goal, only on a broken setup.
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-5}
CONNS=${CONNS:-64}
ROUNDS=${ROUNDS:-2}
KEYS=${KEYS:-1000000}
LUA="$MU_SOURCE_DIR/bench/wrk.lua"
LOAD=${LOAD:-$MU_BUILD_DIR/bench/durable_load}

bench_need_tools wrk etcd curl
bench_need_exe "$MUSTERD" musterd
bench_need_exe "$LOAD" durable_load

t_start_musterd --data-dir "$T_DIR/musterd-data" --fsync batch ||
  die "musterd did not start: $(tail -3 "$T_DIR/musterd.log")"
t_start_etcd || die "etcd did not start: $(tail -3 "$T_DIR/etcd.log")"
declare -A URL=([musterd]=$MUSTERD_URL [etcd]=$ETCD_URL)
declare -A PID=([musterd]=$MUSTERD_PID [etcd]=$ETCD_PID)
declare -A RPS P99 ERRS

run() { # TARGET ROUND
  local t=$1 round=$2 out rps p99 non2xx sockerr
  out=$(wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$LUA" "${URL[$t]}/v2/keys/bench/get" \
    -- put "r$round" 2>&1)
  out=$(printf '%s\n' "$out" | grep '^MU_WRK') || die "put $t: wrk printed no result"
  rps=$(printf '%s' "$out" | sed -n 's/.* rps=\([0-9]*\).*/\1/p')
  p99=$(printf '%s' "$out" | sed -n 's/.* p99_us=\([0-9]*\).*/\1/p')
  non2xx=$(printf '%s' "$out" | sed -n 's/.* non2xx=\([0-9]*\).*/\1/p')
  sockerr=$(printf '%s' "$out" | sed -n 's/.* sockerr=\([0-9]*\).*/\1/p')
  kill -0 "${PID[$t]}" 2>/dev/null || die "$t died during the PUT run"
  echo "# put $t round $round: $rps req/s, p99 ${p99} us, errors: $non2xx non-2xx, $sockerr socket"
  ERRS[$t]=$((${ERRS[$t]:-0} + non2xx + sockerr))
  if [ "$rps" -gt "${RPS[$t]:-0}" ]; then
    RPS[$t]=$rps
    P99[$t]=$p99
  fi
}
for round in $(seq "$ROUNDS"); do
  for t in musterd etcd; do run "$t" "$round"; done
done
for t in musterd etcd; do
  [ "${ERRS[$t]}" = 0 ] || echo "# warning: $t answered ${ERRS[$t]} errors: figures are suspect"
done
metric() { curl -s "$MUSTERD_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
records=$(metric musterd_wal_records_total)
fsyncs=$(metric musterd_wal_fsyncs_total)
per=$(awk -v a="$records" -v b="$fsyncs" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "n/a" }')
syncms=$(awk -v a="$(metric musterd_wal_sync_seconds_total)" -v b="$fsyncs" 'BEGIN { if (b > 0) printf "%.3f", 1000 * a / b; else print "n/a" }')
holdms=$(awk -v a="$(metric musterd_wal_hold_seconds_total)" -v b="$fsyncs" 'BEGIN { if (b > 0) printf "%.3f", 1000 * a / b; else print "n/a" }')
ratio=$(awk -v a="${RPS[musterd]}" -v b="${RPS[etcd]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
ms() { awk -v a="$1" 'BEGIN { printf "%.2f", a / 1000 }'; }
PUTLINE="PUT c=$CONNS d=${DURATION}s best of $ROUNDS: musterd --fsync batch=${RPS[musterd]}/s (p99 $(ms "${P99[musterd]}") ms, $records records in $fsyncs fsyncs = $per per fsync, each write+fdatasync $syncms ms after a wait for writers of $holdms ms) etcd=${RPS[etcd]}/s (p99 $(ms "${P99[etcd]}") ms) musterd/etcd=${ratio}x (goal >= 3x)"
echo "# $PUTLINE"
kill -TERM "$MUSTERD_PID" "$ETCD_PID" 2>/dev/null
wait "$MUSTERD_PID" "$ETCD_PID" 2>/dev/null

# --- recovery of KEYS keys ---
RDATA=$T_DIR/recovery-data
PORT=$(t_free_port)
RURL=http://127.0.0.1:$PORT
t_spawn load "$MUSTERD" --listen "127.0.0.1:$PORT" --data-dir "$RDATA" --fsync off
LPID=$T_LAST_PID
t_wait_http "$RURL/healthz" 10 || die "musterd (load) did not start"
"$LOAD" 127.0.0.1 "$PORT" "$KEYS" k | sed 's/^/# /' || die "loading $KEYS keys failed"
kill -KILL "$LPID"
wait "$LPID" 2>/dev/null

restart() { # name -> sets SECS and REPORT
  local t0 t1
  t0=$(date +%s%N)
  t_spawn "$1" "$MUSTERD" --listen "127.0.0.1:$PORT" --data-dir "$RDATA"
  RPID=$T_LAST_PID
  while ! curl -s -o /dev/null --max-time 1 "$RURL/healthz"; do
    kill -0 "$RPID" 2>/dev/null || die "$1: musterd exited: $(tail -3 "$T_DIR/$1.log")"
    sleep 0.005
  done
  t1=$(date +%s%N)
  SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
  REPORT=$(grep -o 'recovered data dir.*' "$T_DIR/$1.log" | sed 's/recovered data dir [^ ]* //')
  got=$(curl -s "$RURL/v2/keys/load/k/$KEYS" | grep -o '"modifiedIndex":[0-9]*')
  [ -n "$got" ] || die "$1: key $KEYS missing after recovery"
  echo "# $1: healthz after $SECS s; $REPORT"
}
restart after-kill9
CRASH=$SECS
kill -TERM "$RPID"
wait "$RPID" 2>/dev/null
restart after-stop
CLEAN=$SECS
kill -KILL "$RPID"
wait "$RPID" 2>/dev/null
echo "bench_durable: $PUTLINE | recovery of $KEYS keys: ${CRASH} s after kill -9, ${CLEAN} s after a graceful stop (exec to /healthz; goal < 2 s)"
