#!/usr/bin/env bash
# A job whose worker fails: `muster run` exits 1 and says which replica failed with which code;
# with fail_fast (default) the other replicas are stopped.
. "$(dirname "$0")/../lib.sh"
t_local_jobs
out=$("$MUSTER" run utils.sh -- 'echo about to fail; exit 3' 2>"$T_DIR/err"); rc=$?
t_expect_eq "run exits 1" "$rc" 1
t_expect_match "summary names the state" "$(cat "$T_DIR/err")" 'finished: FAILED'
t_expect_match "summary names replica and exit code" "$(cat "$T_DIR/err")" 'sh/0 FAILED with exit code 3'
t_expect_match "status FAILED" "$("$MUSTER" status "$out")" 'State: FAILED'
t_expect_match "status shows the exit code" "$("$MUSTER" status "$out")" 'sh\[0\]:FAILED \(exitcode: 3\)'
t_expect_eq "the log is kept" "$("$MUSTER" log "$out")" "about to fail"

marker=$((RANDOM + 40000))
out=$("$MUSTER" run -cfg grace_period=1 utils.sh --num_replicas 2 -- \
  "if [ \$MUSTER_REPLICA_ID = 0 ]; then sleep 0.3; exit 5; fi; exec sleep $marker" 2>"$T_DIR/err"); rc=$?
t_expect_eq "fail_fast: run exits 1" "$rc" 1
t_expect_match "fail_fast message" "$(cat "$T_DIR/err")" 'sh/0 exited with 5; stopping the others'
t_expect_eq "fail_fast: nothing left" "$(pgrep -f "^sleep $marker" | wc -l)" 0

out=$("$MUSTER" run -cfg fail_fast=false utils.sh --num_replicas 2 -- \
  '[ $MUSTER_REPLICA_ID = 0 ] && exit 4; sleep 0.3; echo survivor' 2>"$T_DIR/err"); rc=$?
t_expect_eq "fail_fast=false: run exits 1" "$rc" 1
t_expect_eq "fail_fast=false: the other replica finished" "$("$MUSTER" log "$out/sh/1")" survivor
t_expect_match "fail_fast=false: replica 1 SUCCEEDED" "$("$MUSTER" status "$out")" 'sh\[1\]:SUCCEEDED'

out=$("$MUSTER" run utils.sh --entrypoint /nonexistent/prog -- x 2>"$T_DIR/err"); rc=$?
t_expect_eq "a program that cannot start: exit 1" "$rc" 1
t_expect_match "its stderr.log says why" "$("$MUSTER" log --streams stderr "$out")" "cannot start '/nonexistent/prog'"
t_done
