#!/usr/bin/env bash
# Ctrl-C (SIGINT) during `muster run` cancels the job: every process group gets SIGTERM, a
# replica that ignores it gets SIGKILL after the grace period, nothing is left running.
. "$(dirname "$0")/../lib.sh"
t_local_jobs
marker=$((RANDOM + 40000))
# Replica 0 exits on SIGTERM; replica 1 ignores it (needs SIGKILL).
t_spawn run "$MUSTER" run -cfg grace_period=1 utils.sh --num_replicas 2 -- \
  "if [ \$MUSTER_REPLICA_ID = 1 ]; then trap '' TERM; fi; echo up; sleep $marker & wait; sleep $marker"
run_pid=$T_LAST_PID
for _ in $(seq 100); do
  [ "$(pgrep -f "^sleep $marker" | wc -l)" -ge 2 ] && break
  sleep 0.05
done
t_expect_eq "both replicas are up" "$(pgrep -f "^sleep $marker" | wc -l)" 2
h=$(head -n1 "$T_DIR/run.log")
start=$(date +%s.%N)
kill -INT "$run_pid"
for _ in $(seq 100); do kill -0 $run_pid 2>/dev/null || break; sleep 0.05; done
wait $run_pid; rc=$?
took=$("$PY" -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
t_expect_eq "muster run exits 1" "$rc" 1
t_expect_match "it said it was cancelling" "$(cat "$T_DIR/run.log")" 'interrupted: cancelling local://'
t_expect_match "final state CANCELLED" "$("$MUSTER" status "$h")" 'State: CANCELLED'
t_expect_eq "nothing left running" "$(pgrep -f "^sleep $marker" | wc -l)" 0
t_expect_match "SIGKILL came after the 1 s grace period, not 10 s" "$took" '^[1-4]\.'
t_done
