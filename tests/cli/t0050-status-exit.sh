#!/usr/bin/env bash
# `muster status` exits by the job's state (docs/exit-codes.md): 0 PENDING/RUNNING/SUCCEEDED,
# 1 FAILED/CANCELLED/UNKNOWN, 2 bad command line, 3 the job could not be looked up. Every state
# through the kubernetes scheduler (recording kubectl stand-in replaying each Volcano phase), and
# real local jobs.
. "$(dirname "$0")/../lib.sh"
t_fake_kubectl
h=kubernetes://muster/ml:echo-42
t_kubectl_job ml echo-42
for trio in Pending:PENDING:0 Running:RUNNING:0 Restarting:RUNNING:0 Completed:SUCCEEDED:0 \
            Failed:FAILED:1 Terminated:FAILED:1 Aborted:CANCELLED:1 NoStatus:UNKNOWN:1; do
  IFS=: read -r phase state want <<<"$trio"
  out=$(KUBECTL_PHASE=$phase "$MUSTER" status "$h" 2>&1)
  got=$?
  t_expect_match "$phase is $state" "$out" "State: $state"
  t_expect_eq "$state exits $want" "$got" "$want"
  KUBECTL_PHASE=$phase "$MUSTER" status --json "$h" >/dev/null 2>&1
  t_expect_eq "$state exits $want with --json" "$?" "$want"
done
KUBECTL_PHASE=Missing "$MUSTER" status "$h" >/dev/null 2>&1
t_expect_eq "a job the cluster does not know: 3" "$?" 3
KUBECTL_FAIL='Unable to connect to the server' "$MUSTER" status "$h" >/dev/null 2>&1
t_expect_eq "kubectl fails: 3" "$?" 3
"$MUSTER" status not-a-scheduler://muster/x >/dev/null 2>&1
t_expect_eq "bad handle: 2" "$?" 2
"$MUSTER" status >/dev/null 2>&1
t_expect_eq "no handle: 2" "$?" 2
"$MUSTER" status -cfg nosuchkey=1 "$h" >/dev/null 2>&1
t_expect_eq "unknown -cfg key: 2" "$?" 2

# Local jobs, for real.
export MUSTER_LOG_DIR=$T_DIR/logs
ok=$("$MUSTER" run -cfg log_dir="$T_DIR/logs" utils.echo --msg hi 2>/dev/null)
"$MUSTER" status -cfg log_dir="$T_DIR/logs" "$ok" >/dev/null 2>&1
t_expect_eq "local SUCCEEDED: 0" "$?" 0
bad=$("$MUSTER" run -cfg log_dir="$T_DIR/logs" utils.sh -- 'exit 3' 2>/dev/null)
out=$("$MUSTER" status -cfg log_dir="$T_DIR/logs" "$bad" 2>&1)
t_expect_eq "local FAILED: 1" "$?" 1
t_expect_match "local FAILED: the state is printed too" "$out" "State: FAILED"
"$MUSTER" status -cfg log_dir="$T_DIR/logs" local://muster/nosuchjob-1 >/dev/null 2>&1
t_expect_eq "local unknown job: 3" "$?" 3
t_done
