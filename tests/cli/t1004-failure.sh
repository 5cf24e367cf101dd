#!/usr/bin/env bash
# A job whose worker fails: `muster run` exits 1 and says which replica failed with which code;
# with fail_fast (default) the other replicas are stopped, and the replica that failed first is
# the FAILED one even when another ends before it.
. "$(dirname "$0")/../lib.sh"
t_local_jobs
out=$("$MUSTER" run utils.sh -- 'echo about to fail; exit 3' 2>"$T_DIR/err"); rc=$?
t_expect_eq "run exits 1" "$rc" 1
t_expect_match "summary names the state" "$(cat "$T_DIR/err")" 'finished: FAILED'
t_expect_match "summary names replica and exit code" "$(cat "$T_DIR/err")" 'sh/0 FAILED with exit code 3'
t_expect_match "status FAILED" "$("$MUSTER" status "$out")" 'State: FAILED'
t_expect_match "status shows the exit code" "$("$MUSTER" status "$out")" 'sh\[0\]:FAILED \(exitcode: 3\)'
t_expect_eq "the log is kept" "$("$MUSTER" log "$out")" "sh/0 about to fail"

marker=$((RANDOM + 40000))
out=$("$MUSTER" run -cfg grace_period=1 utils.sh --num_replicas 2 -- \
  "if [ \$MUSTER_REPLICA_ID = 0 ]; then sleep 0.3; exit 5; fi; exec sleep $marker" 2>"$T_DIR/err"); rc=$?
t_expect_eq "fail_fast: run exits 1" "$rc" 1
t_expect_match "fail_fast message" "$(cat "$T_DIR/err")" 'sh/0 exited with 5; stopping the others'
t_expect_eq "fail_fast: nothing left" "$(pgrep -f "^sleep $marker" | wc -l)" 0

out=$("$MUSTER" run -cfg fail_fast=false utils.sh --num_replicas 2 -- \
  '[ $MUSTER_REPLICA_ID = 0 ] && exit 4; sleep 0.3; echo survivor' 2>"$T_DIR/err"); rc=$?
t_expect_eq "fail_fast=false: run exits 1" "$rc" 1
t_expect_eq "fail_fast=false: the other replica finished" "$("$MUSTER" log "$out/sh/1")" "sh/1 survivor"
t_expect_match "fail_fast=false: replica 1 SUCCEEDED" "$("$MUSTER" status "$out")" 'sh\[1\]:SUCCEEDED'

out=$("$MUSTER" run utils.sh --entrypoint /nonexistent/prog -- x 2>"$T_DIR/err"); rc=$?
t_expect_eq "a program that cannot start: exit 1" "$rc" 1
t_expect_match "its stderr.log says why" "$("$MUSTER" log --streams stderr "$out")" "cannot start '/nonexistent/prog'"
# A 2x2 job where rank 2 fails: the replica that failed first is FAILED and the one stopped
# because of it CANCELLED, and the hint names the failed one's log, whichever replica the
# supervisor sees end first. The race (the innocent replica's agent exits, its run shut down,
# before the failing one's agent does) is forced: each replica's agent runs under a wrapper, and
# on the node whose worker failed the wrapper exits only once the supervisor has recorded the
# other replica's end (then the supervisor's fail-fast SIGTERM ends it).
cat >race.yaml <<'EOF'
name: race
description: dist.ddp's agents, each under a wrapper (t1004)
params:
  - {name: wrapper, type: str, help: the wrapper}
  - {name: script, type: str, help: the worker}
app:
  name: race
  roles:
    - name: train
      image: ""
      entrypoint: ${wrapper}
      args: [agent, --nnodes, "2", --nproc-per-node, "2", --rdzv-endpoint, "${rdzv_endpoint}",
             --rdzv-id, "${app_id}", --role, train, --, "${script}"]
      num_replicas: 2
EOF
cat >race-worker.sh <<EOF
#!/bin/sh
if [ "\$RANK" = 2 ]; then
  touch "$T_DIR/culprit-\$MUSTER_REPLICA_ID"
  echo 'ValueError: bad shard 7' >&2
  exit 3
fi
exec sleep 60
EOF
cat >race-wrap.sh <<EOF
#!/bin/sh
"$MUSTER" "\$@"
code=\$?
if [ -e "$T_DIR/culprit-\$MUSTER_REPLICA_ID" ]; then
  state=\$MUSTER_LOG_DIR/\$MUSTER_APP_ID/state.json
  other=\$((1 - MUSTER_REPLICA_ID))
  i=0
  until tr -d ' \\t\\n' <"\$state" | grep -Eq "\"id\":\$other,\"pid\":[0-9]+,\"state\":\"(FAILED|CANCELLED|SUCCEEDED)\"" ||
    [ \$i -ge 1200 ]; do
    sleep 0.05
    i=\$((i + 1))
  done
fi
exit \$code
EOF
chmod +x race-worker.sh race-wrap.sh
out=$(timeout 120 "$MUSTER" run --no-log ./race.yaml --wrapper ./race-wrap.sh \
  --script ./race-worker.sh 2>"$T_DIR/err"); rc=$?
t_expect_eq "race: run exits 1" "$rc" 1
bad=$(cd "$T_DIR" && ls culprit-* 2>/dev/null | sed 's/culprit-//')
good=$((1 - ${bad:-0}))
st=$("$MUSTER" status "$out")
t_expect_match "race: the replica whose rank failed is FAILED" "$st" "train\[$bad\]:FAILED"
t_expect_match "race: the other, stopped for it, is CANCELLED" "$st" "train\[$good\]:CANCELLED"
t_expect_match "race: the message names the failed replica" "$st" "Msg: train/$bad (exited with [0-9]+|failed); stopping the others"
t_expect_eq "race: run's hints name the failed replica's log alone" \
  "$(grep -o "see 'muster log [^']*'" "$T_DIR/err")" "see 'muster log $out/train/$bad'"
t_expect_match "race: the root cause is rank 2" "$(tail -n 1 "$T_DIR/err")" \
  'root cause: rank 2 .* exited with code 3: ValueError: bad shard 7'
t_done
