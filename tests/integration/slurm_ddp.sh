#!/usr/bin/env bash
# Slurm end to end on a real local cluster (tests/slurm/local-slurm.sh: slurmctld and
# 4 slurmd on loopback): `muster run -s slurm --wait dist.ddp -j 2x2` runs the C ring all-reduce
# on 2 nodes x 2 workers through the job's own musterd; a worker's arguments with shell
# metacharacters arrive exactly; status while it runs and after; log;
# describe (the app as submitted, read back with scontrol);
# a long job is cancelled and gone; an unknown partition fails with Slurm's own message.
. "$(dirname "$0")/slurm_common.bash"
RING=$MU_BUILD_DIR/examples/ring_allreduce
t_need_built "$MUSTER" "$MUSTERD" "$RING"

slurm_start
export PATH=$(dirname "$MUSTER"):$PATH # `muster agent` inside the job
mkdir -p "$T_DIR/work" && cd "$T_DIR/work" || exit 1
CFG="musterd=$MUSTERD,rdzv_host=127.0.0.1,rdzv_port=$(t_free_port)"

state_of() { "$MUSTER" status "$1" 2>&1 | sed -n 's/^ *State: //p'; }
wait_state() { # handle regex seconds
  local i s
  for ((i = 0; i < $3 * 10; i++)); do
    s=$(state_of "$1")
    if printf '%s' "$s" | grep -Eq "^($2)$"; then echo "$s"; return 0; fi
    sleep 0.1
  done
  echo "$s"
  return 1
}

# 1. --wait: 2 nodes x 2 workers, the ring all-reduce verified on every rank.
out=$("$MUSTER" run -s slurm --wait -cfg "$CFG" dist.ddp -j 2x2 --script "$RING" -- --count 4096 2>&1)
rc=$?
t_expect_eq "run --wait dist.ddp 2x2 exits 0" "$rc" 0
h=$(printf '%s\n' "$out" | grep -o 'slurm://muster/[0-9]*' | head -1)
t_expect_match "handle" "$h" '^slurm://muster/[0-9]+$'
id=${h##*/}
t_expect_eq "status after: SUCCEEDED" "$(state_of "$h")" SUCCEEDED
ok=$(cat slurm-"$id"-ring_allreduce-[01].out 2>/dev/null | grep -c 'allreduce ok, world 4')
t_expect_eq "4 ranks verified the sum" "$ok" 4
# Node ranks follow the join order, so either replica may be node 0.
ranks=$(cat slurm-"$id"-ring_allreduce-[01].err | grep -o 'node rank [01] of 2' | sort | tr '\n' ,)
t_expect_eq "both nodes joined one round" "$ranks" "node rank 0 of 2,node rank 1 of 2,"
grep -q 'listening on 127.0.0.1' slurm-"$id"-musterd.log && t_ok "the job's musterd ran" ||
  t_fail "the job's musterd ran"
# describe: the app as submitted, read back from slurmctld (scontrol write batch_script).
got=$("$MUSTER" describe "$h" 2>"$T_DIR/describe.err" | "$PY" -c 'import json, sys
d = json.load(sys.stdin); r = d["roles"][0]
print(r["name"], r["num_replicas"], r["env"]["MUSTER_JOB_ID"], r["entrypoint"], r["args"][-3:])' 2>&1)
t_expect_eq "describe: the app as submitted, from the cluster" "$got" \
  "ring_allreduce 2 slurm://muster/$id muster ['$RING', '--count', '4096']"
if "$MUSTER" log -h >/dev/null 2>&1; then
  out=$("$MUSTER" log "$h/ring_allreduce/1" 2>&1)
  t_expect_match "log of replica 1, prefixed" "$out" "^ring_allreduce/1 (\[[0-3]\]:)?rank [0-3]: allreduce ok, world 4"
fi

# 1b. Script arguments with shell metacharacters reach the worker exactly: the sbatch script
# quotes them (mu_shell_quote) and bash, running it, must hand each one over as it was typed.
printf '#!/bin/sh\nfor a in "$@"; do printf "<%%s>\\n" "$a"; done\n' >argv.sh
chmod +x argv.sh
out=$("$MUSTER" run -s slurm --wait -cfg "$CFG" dist.ddp -j 1x1 --script ./argv.sh -- \
  'a b' '$HOME' '$(id)' "it's" ';' '*' 2>&1)
t_expect_eq "metacharacters: run --wait exits 0" "$?" 0
id=$(printf '%s\n' "$out" | grep -o 'slurm://muster/[0-9]*' | head -1)
id=${id##*/}
t_expect_eq "metacharacters: the worker's argv, word for word" \
  "$(sed -n 's/^\[0\]://p' slurm-"$id"-argv-0.out 2>&1)" \
  "$(printf '%s\n' '<a b>' '<$HOME>' '<$(id)>' "<it's>" '<;>' '<*>')"

# 2. Without --wait: RUNNING while it runs, SUCCEEDED after.
h=$("$MUSTER" run -s slurm -cfg "$CFG" dist.ddp -j 2x2 --script "$RING" -- --iters 8 --sleep-ms 300 2>"$T_DIR/run2.err")
t_expect_match "run prints the handle" "$h" '^slurm://muster/[0-9]+$'
s=$(wait_state "$h" RUNNING 20) && t_ok "status while it runs: RUNNING" || t_fail "never RUNNING (last: $s)"
s=$(wait_state "$h" "SUCCEEDED|FAILED" 40)
t_expect_eq "status after: SUCCEEDED" "$s" SUCCEEDED
out=$("$MUSTER" list -s slurm 2>&1)
t_expect_match "list shows it" "$out" "$h"
t_expect_match "list: the app's name, as local shows it (not Slurm's ring_allreduce-0)" "$out" \
  "$h +ring_allreduce +SUCCEEDED"

# 3. Cancel a long job: CANCELLED, then gone from the active queue.
h=$("$MUSTER" run -s slurm utils.sh -- sleep 300 2>"$T_DIR/run3.err")
s=$(wait_state "$h" RUNNING 20) && t_ok "long job runs" || t_fail "long job never ran (last: $s)"
"$MUSTER" cancel "$h" >"$T_DIR/cancel.log" 2>&1 && t_ok "cancel" || t_fail "cancel: $(cat "$T_DIR/cancel.log")"
s=$(wait_state "$h" CANCELLED 20)
t_expect_eq "cancelled job: CANCELLED" "$s" CANCELLED
t_expect_eq "gone from the active queue" "$(squeue --noheader --jobs="${h##*/}" 2>/dev/null)" ""

# 4. Slurm's own message for a bad partition.
out=$("$MUSTER" run -s slurm -cfg partition=nosuchpart utils.echo 2>&1)
t_expect_eq "unknown partition: exit 1" "$?" 1
t_expect_match "unknown partition: Slurm's message" "$out" "[Ii]nvalid partition"
# 5. Root cause: the failing-rank example; `run --wait` ends with it, status shows it (read from
# the agent's record line at the end of the replica's stderr file).
want='ValueError: bad shard 7' code=3
if [ "$MU_SANITIZED" != 1 ] && "$PY" -c 'import torch' 2>/dev/null; then
  t_torch_lock
  export GLOO_SOCKET_IFNAME=lo
  out=$(timeout 240 "$MUSTER" run -s slurm --wait -cfg "$CFG" dist.ddp -j 2x2 --python "$PY" \
    --script "$MU_SOURCE_DIR/examples/train_ddp.py" -- --fail-rank 2 2>&1)
  rc=$? want='RuntimeError: train_ddp: injected failure on rank 2' code=1
else # the sanitized build: a worker without torch that fails the same way, in a second
  printf '#!/bin/sh\n[ "$RANK" = 2 ] || exec sleep 60\necho "ValueError: bad shard 7" >&2\nexit 3\n' >fail.sh
  chmod +x fail.sh
  out=$(timeout 120 "$MUSTER" run -s slurm --wait -cfg "$CFG" dist.ddp -j 2x2 --script ./fail.sh 2>&1)
  rc=$?
fi
t_expect_eq "failing rank: run --wait exits 1" "$rc" 1
t_expect_match "failing rank: run's last lines" "$(printf '%s\n' "$out" | tail -n 3)" \
  "root cause: rank 2 .* exited with code $code: $want"
h=$(printf '%s\n' "$out" | grep -o 'slurm://muster/[0-9]*' | head -1)
st=$("$MUSTER" status "$h" 2>&1)
t_expect_match "failing rank: status" "$st" "Root Cause: rank 2 .* exited with code $code: $want"
# the replica named is the one whose .err holds rank 2's record, whatever node rank it joined as
k=$(sed -n 's|.*Root Cause: rank 2 (replica [a-z_]*/\([01]\), node rank 1 .*|\1|p' <<<"$st")
t_expect_match "failing rank: the root cause names its replica ($k) and node rank 1" "$k" '^[01]$'
t_expect_match "... replica $k's .err holds the record of rank 2" \
  "$(grep 'failure record' slurm-"${h##*/}"-*-"${k:-x}".err 2>&1)" '"rank":2,'
js=$("$MUSTER" status --json "$h" | "$PY" -c 'import json, sys
r = json.loads(json.load(sys.stdin)["structured_error_msg"])
print(r["muster"]["rank"], r["muster"]["exit_code"], r["message"]["message"])')
t_expect_eq "failing rank: status --json" "$js" "2 $code $want"
t_done
