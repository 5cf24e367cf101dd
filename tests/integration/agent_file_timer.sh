#!/usr/bin/env bash
# The file timer of torch.distributed.elastic.timer under `muster agent` (issue 32 item 4,
# docs/agent.md "The file timer"): with TORCHELASTIC_ENABLE_FILE_TIMER=1 the agent serves the
# pipe of TORCHELASTIC_TIMER_FILE as torchrun's FileTimerServer does. Torch 1.13's own
# FileTimerClient (/usr/bin/python3) in tests/integration/timer_worker.py, 2 workers, standalone:
#   intime  every timer is released before it expires (the work goes on 2.5 s past the expiry):
#           nobody is killed, the agent exits 0; a line that is not JSON and one over 4096 bytes
#           are said and the pipe keeps serving (the requests after them are read); a timer for a process that is not a worker (a `sleep` of this test,
#           already expired, SIGKILL) is refused, and that process lives
#   slow    rank 1's `with expires(after=2): time.sleep(600)`: killed by SIGKILL no earlier than
#           2 s and at most 2 + 5 s after it acquired (the agent's ticks are 0.1 s); the agent
#           exits 1 and its failure record (TORCHELASTIC_ERROR_FILE) names the timer
#   off     without TORCHELASTIC_ENABLE_FILE_TIMER no pipe is made: the workers get no
#           TORCHELASTIC_TIMER_FILE
. "$(dirname "$0")/agent_common.bash"
t_need_py torch.distributed.elastic.timer python3-torch
W=$MU_SOURCE_DIR/tests/integration/timer_worker.py
t_torch_lock
# the workers run under the python3 first on PATH: /usr/bin's, with torch 1.13
export PATH=/usr/bin:$PATH GLOO_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1
unset TORCHELASTIC_TIMER_FILE

t_spawn victim sleep 300
VICTIM=$T_LAST_PID

# run CASE [ENV...]: one standalone agent of 2 workers, its log $T_DIR/CASE.log; sets RC
run() {
  local c=$1
  shift
  mkdir -p "$T_DIR/out-$c"
  t_spawn "$c" env "$@" TORCHELASTIC_ERROR_FILE="$T_DIR/$c-error.json" MU_VICTIM_PID="$VICTIM" \
    "$MUSTER" agent --standalone --nproc-per-node 2 --max-restarts 0 --monitor-interval 0.5 \
    "$W" "$T_DIR/out-$c" "$c"
  agent_wait "$T_LAST_PID" 240
}

run intime TORCHELASTIC_ENABLE_FILE_TIMER=1
t_expect_eq "intime: the agent exits 0 (every timer released in time)" "$RC" 0
t_expect_eq "intime: both workers ended their work" "$(ls "$T_DIR/out-intime" | grep -c '^done\.')" 2
if grep -q "file timer: the timer" "$T_DIR/intime.log"; then
  t_fail "intime: a released timer expired: $(grep 'file timer' "$T_DIR/intime.log")"
else
  t_ok "intime: no timer expired"
fi
t_expect_match "intime: the line that is not JSON is said" "$(cat "$T_DIR/intime.log")" \
  "file timer: not a JSON object; a request is one JSON object per line"
t_expect_match "intime: the line over 4096 bytes is said" "$(cat "$T_DIR/intime.log")" \
  "file timer: a timer request longer than 4096 bytes \(PIPE_BUF: a pipe's atomic write\) was dropped"
t_expect_match "intime: the timer of a process that is no worker is refused" \
  "$(cat "$T_DIR/intime.log")" "file timer: refused a timer of pid $VICTIM: not a worker of this agent"
if kill -0 "$VICTIM" 2>/dev/null; then t_ok "intime: that process lives"; else t_fail "intime: the agent killed pid $VICTIM, no worker of it"; fi

t0=$SECONDS
run slow TORCHELASTIC_ENABLE_FILE_TIMER=1
t_expect_eq "slow: the agent exits 1 (the worker was killed, no restart left)" "$RC" 1
echo "# slow: the agent ended after $((SECONDS - t0)) s"
rec=$T_DIR/slow-error.json
if [ -s "$rec" ] && [ -s "$T_DIR/out-slow/acquired" ]; then
  "$PY" - "$rec" "$T_DIR/out-slow/acquired" >"$T_DIR/slow-check.txt" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m, acquired = r["muster"], float(open(sys.argv[2]).read())
late = m["time_ms"] / 1000 - acquired
print("rank %s signal %s source %s, ended %.2f s after it acquired: %s" % (
    m["rank"], m["signal"], m.get("source"), late, r["message"]["message"]))
ok = m["rank"] == 1 and m["signal"] == 9 and m.get("source") == "timer" and 2.0 <= late <= 7.0
ok = ok and "file timer 'slow-step' expired" in r["message"]["message"]
sys.exit(0 if ok else 1)
PY
  rc=$?
  if [ $rc = 0 ]; then
    t_ok "slow: rank 1 killed by SIGKILL 2..7 s after it acquired; the record names the timer: $(cat "$T_DIR/slow-check.txt")"
  else
    t_fail "slow: the record: $(cat "$T_DIR/slow-check.txt")"
  fi
else
  t_fail "slow: no failure record in $rec or no acquire time: $(tail -5 "$T_DIR/slow.log")"
fi
t_expect_match "slow: the failure report names the timer" "$(cat "$T_DIR/slow.log")" \
  "rank 1 .*killed by signal 9 \(Killed\): its file timer 'slow-step' expired"
t_expect_match "slow: the agent said the kill" "$(cat "$T_DIR/slow.log")" \
  "file timer: the timer 'slow-step' of rank 1 \(pid [0-9]+\) expired [0-9.]+ s ago; killing it with signal 9 \(SIGKILL\)"

# off: the worker fails at once on the missing TORCHELASTIC_TIMER_FILE (a KeyError)
run off
t_expect_eq "off: without TORCHELASTIC_ENABLE_FILE_TIMER the workers get no TORCHELASTIC_TIMER_FILE (they fail)" "$RC" 1
t_expect_match "off: the KeyError names it" "$(cat "$T_DIR/off.log")" "KeyError: 'TORCHELASTIC_TIMER_FILE'"
ls "$T_DIR"/*/attempt_*/watchdog_timer 2>/dev/null && t_fail "a pipe was left behind"
[ "$T_FAILS" -gt 0 ] && agent_dump_logs
t_done
