#!/usr/bin/env bash
# status, log -f, list and cancel work from another process while `muster run` waits.
. "$(dirname "$0")/../lib.sh"
t_local_jobs
marker=$((RANDOM + 40000))
t_spawn run "$MUSTER" run -cfg grace_period=2 utils.sh --num_replicas 2 -- "echo started \$MUSTER_REPLICA_ID; exec sleep $marker"
run_pid=$T_LAST_PID
h=
started() {
  h=$(head -n1 "$T_DIR/run.log" 2>/dev/null | grep '^local://' || true)
  [ -n "$h" ] && grep -q started "$T_DIR/logs/${h##*/}/sh/1/stdout.log" 2>/dev/null
}
t_until 30 started
t_expect_match "run printed the handle" "$h" '^local://muster/sh-'
t_expect_match "status from a second process: RUNNING" "$("$MUSTER" status "$h")" 'State: RUNNING'
t_expect_match "replicas RUNNING" "$("$MUSTER" status "$h")" 'sh\[1\]:RUNNING'
t_expect_match "list shows it RUNNING" "$("$MUSTER" list)" "$h +sh +RUNNING"
"$MUSTER" log -f "$h" >"$T_DIR/follow.out" 2>&1 &
follow=$!
t_until 20 t_has_lines "$T_DIR/follow.out" started 2
t_expect_eq "log -f is still following" "$(kill -0 $follow 2>/dev/null && echo yes)" yes
t_expect_eq "sleepers are running" "$(pgrep -f "^sleep $marker" | wc -l)" 2
"$MUSTER" cancel "$h"; t_expect_eq "cancel exits 0" "$?" 0
t_expect_match "status: CANCELLED" "$("$MUSTER" status "$h")" 'State: CANCELLED'
t_expect_eq "no worker left" "$(pgrep -f "^sleep $marker" | wc -l)" 0
for _ in $(seq 50); do kill -0 $follow 2>/dev/null || break; sleep 0.1; done
t_expect_eq "log -f ended with the job" "$(kill -0 $follow 2>/dev/null && echo running || echo ended)" ended
t_expect_eq "log -f saw both replicas" "$(sort "$T_DIR/follow.out" | tr '\n' '|')" "sh/0 started 0|sh/1 started 1|"
for _ in $(seq 50); do kill -0 $run_pid 2>/dev/null || break; sleep 0.1; done
wait $run_pid; rc=$?
t_expect_eq "muster run exits 1 after a cancel" "$rc" 1
t_expect_match "run reported CANCELLED" "$(cat "$T_DIR/run.log")" 'finished: CANCELLED'
"$MUSTER" cancel "$h"; t_expect_eq "cancel is idempotent" "$?" 0
"$MUSTER" cancel local://muster/nosuch-x 2>/dev/null; t_expect_eq "cancel unknown exits 1" "$?" 1
t_done
