#!/bin/bash
# The crash test (issue #7): several clients write steadily to musterd --data-dir; musterd is
# killed with SIGKILL at a random moment; it restarts on the same data dir, and every write
# that was ACKNOWLEDGED (recorded by the client after its reply) must be there with its index
# and value, every acknowledged delete must stay deleted. The fsync mode cycles through batch,
# always and off (off survives a process crash, not a power cut). Small snapshot intervals
# make crashes land around snapshots and compaction too.
#   MU_LONG_TESTS=1: 50 iterations; default 5 (MU_CRASH_ITERATIONS overrides both).
. "$(dirname "$0")/../lib.sh"

ITER=5
[ "${MU_LONG_TESTS:-0}" = 1 ] && ITER=50
ITER=${MU_CRASH_ITERATIONS:-$ITER}
CLIENTS=4
DATA=$T_DIR/data
ACK=$T_DIR/acks
CLIENT="$MU_SOURCE_DIR/tests/integration/durability_client.py"
mkdir -p "$ACK"
PORT=$(t_free_port)
URL=http://127.0.0.1:$PORT
MODES=(batch always off)

start() { # name mode
  t_spawn "$1" "$MUSTERD" --listen "127.0.0.1:$PORT" --data-dir "$DATA" --fsync "$2" \
    --snapshot-every 250 --log-level info
  MPID=$T_LAST_PID
  if ! t_wait_http "$URL/healthz" 30; then
    t_fail "$1: musterd did not come up on its data dir"
    sed 's/^/#   /' "$T_DIR/$1.log"
    t_done
  fi
}

check() { # name log
  local out rc
  out=$("$PY" "$CLIENT" check "$URL" "$ACK" 2>&1); rc=$?
  if [ "$rc" = 0 ]; then
    t_ok "$1: $(printf '%s' "$out" | tail -n 1)"
  else
    t_fail "$1: acknowledged writes lost"
    printf '%s\n' "$out" | head -n 20 | sed 's/^/#   /'
    sed 's/^/#   /' "$T_DIR/$2.log" | tail -n 5
  fi
}

for i in $(seq 1 "$ITER"); do
  mode=${MODES[$(((i - 1) % 3))]}
  start "run$i" "$mode"
  check "run$i (--fsync $mode, after $((i - 1)) crashes)" "run$i"
  grep -q "recovered data dir" "$T_DIR/run$i.log" ||
    t_fail "run$i: no recovery report in the log"
  # steady load, then SIGKILL at a random moment between 0.3 and 1.8 s
  "$PY" "$CLIENT" write "$URL" "$ACK" "$CLIENTS" 30 2>"$T_DIR/client$i.err" &
  CPID=$!
  sleep "$(( RANDOM % 2 )).$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
  sleep 0.3
  kill -KILL "$MPID"
  wait "$MPID" 2>/dev/null
  wait "$CPID"
  acks=$(cat "$ACK"/*.ack | wc -l)
  echo "# iteration $i (--fsync $mode): killed musterd; $acks acknowledged writes so far"
done
start final batch
check "final restart after $ITER crashes" final
t_expect_match "recovery report" "$(grep 'recovered data dir' "$T_DIR/final.log")" \
  "recovered data dir .* in [0-9.]+ ms: [0-9]+ keys"
t_done
