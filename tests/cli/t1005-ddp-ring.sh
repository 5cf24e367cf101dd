#!/usr/bin/env bash
# The README demo: dist.ddp -j 2x2 with the C ring all-reduce on the local scheduler (two
# `muster agent`s against the embedded musterd); every rank verified.
. "$(dirname "$0")/../lib.sh"
t_local_jobs
ring="$MU_BUILD_DIR/examples/ring_allreduce"
t_need_built "$MUSTER" "$ring"
h=$(timeout 120 "$MUSTER" run dist.ddp -j 2x2 --script "$ring" 2>"$T_DIR/err"); rc=$?
t_expect_eq "dist.ddp 2x2 exits 0" "$rc" 0
logs=$("$MUSTER" log "$h")
for r in 0 1 2 3; do
  t_expect_match "rank $r verified" "$logs" "rank $r: allreduce ok, world 4"
done
t_expect_match "two nodes" "$("$MUSTER" status "$h")" 'ring_allreduce\[1\]:SUCCEEDED'
# The embedded musterd was stopped with the job: its port no longer answers.
ep=$(grep -o '"rdzv_endpoint":[^,]*' "$T_DIR/logs/${h##*/}/state.json" | cut -d'"' -f4)
t_expect_match "an endpoint was used" "$ep" '^127\.0\.0\.1:[0-9]+$'
curl -s -o /dev/null --max-time 1 "http://$ep/healthz"; t_expect_eq "embedded musterd stopped" "$?" 7
t_done
