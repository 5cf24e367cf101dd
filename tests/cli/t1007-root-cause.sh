#!/usr/bin/env bash
# Root cause, everywhere: the agent records the first worker failure (rank, exit code or signal,
# the exception line from the error file or the last stderr lines) and `muster run` prints it
# at the end, `muster status` shows it (text and --json), with the real restart count. Local
# jobs read the agent's error file; Kubernetes reads the agent's record line from the failed
# pod's log (the recording kubectl stand-in replays a real agent's output as that log).
. "$(dirname "$0")/../lib.sh"
t_local_jobs
export GLOO_SOCKET_IFNAME=lo

# json_get FILE EXPR: a Python expression over the status JSON `d` (and `r`, its parsed record).
json_get() {
  "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
m = d.get("structured_error_msg", "<NONE>")
r = json.loads(m) if m != "<NONE>" else {}
print(eval(sys.argv[2]))' "$1" "$2"
}

# 1. A worker without torch's @record: the exception line comes from its last stderr lines.
cat >fail.sh <<'EOF'
#!/bin/sh
if [ "$RANK" = 2 ]; then
  echo 'Traceback (most recent call last):' >&2
  echo '  File "train.py", line 7, in <module>' >&2
  echo 'ValueError: bad shard 7' >&2
  exit 3
fi
exec sleep 60
EOF
chmod +x fail.sh
"$MUSTER" run dist.ddp -j 2x2 --script ./fail.sh >out 2>err
t_expect_eq "failing job: run exits 1" "$?" 1
h=$(cat out)
last=$(tail -n 3 err)
t_expect_match "run's last lines: the root cause, its replica and node rank named" "$last" \
  'root cause: rank 2 \(replica fail/[01], node rank 1 on host [^)]*\) exited with code 3: ValueError: bad shard 7'
# the replica named is the one whose agent wrote the record (its node rank is the join order's)
k=$(sed -n 's|.*root cause: rank 2 (replica fail/\([01]\),.*|\1|p' <<<"$last")
t_expect_match "the replica named (fail/$k) is the one whose error file has rank 2's record" \
  "$(cat "$T_DIR/logs/$(basename "$(cat out)")/fail/${k:-x}/error.json" 2>&1)" '"rank":2,'
"$MUSTER" status "$h" >st.txt
t_expect_match "status: Root Cause line" "$(cat st.txt)" \
  'Root Cause: rank 2 .* exited with code 3: ValueError: bad shard 7'
t_expect_match "status: the structured error message is the record" "$(cat st.txt)" \
  'Structured Error Msg: \{"message":\{"message":"ValueError: bad shard 7"'
"$MUSTER" status --json "$h" >st.json
t_expect_eq "status --json: rank, exit code, exception, source" \
  "$(json_get st.json '(r["muster"]["rank"], r["muster"]["exit_code"], r["message"]["message"], r["muster"]["source"])')" \
  "(2, 3, 'ValueError: bad shard 7', 'stderr')"
t_expect_match "status --json: root_cause" "$(json_get st.json 'd["root_cause"]')" \
  '^rank 2 .*ValueError: bad shard 7$'
t_expect_match "status: start time and duration" "$(cat st.txt)" 'Started: .* \(ran [0-9.]+s\)'

# 2. A restart the workers recover from: Num Restarts is real, no root cause is shown.
cat >flaky.sh <<'EOF'
#!/bin/sh
[ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && { echo 'OSError: flaky' >&2; exit 4; }
exit 0
EOF
chmod +x flaky.sh
h=$("$MUSTER" run dist.ddp -j 1x2 --max_retries 2 --script ./flaky.sh 2>err2)
t_expect_eq "restarted job succeeds" "$?" 0
t_expect_match "status: Num Restarts 1" "$("$MUSTER" status "$h")" 'Num Restarts: 1'
t_expect_match "status: no root cause for a job that succeeded" "$("$MUSTER" status "$h")" \
  'Structured Error Msg: <NONE>'
t_expect_eq "status --json: num_restarts" "$("$MUSTER" status --json "$h" | "$PY" -c \
  'import json,sys; print(json.load(sys.stdin)["num_restarts"])')" 1

# 3. A worker killed by a signal: its name, not an exit code.
printf '#!/bin/sh\nkill -9 $$\n' >killed.sh
chmod +x killed.sh
h=$("$MUSTER" run dist.ddp -j 1x1 --script ./killed.sh 2>err3)
t_expect_match "SIGKILL: run names the signal" "$(tail -n 2 err3)" \
  'root cause: rank 0 .* was killed by SIGKILL'
t_expect_match "SIGKILL: status" "$("$MUSTER" status "$h")" 'Root Cause: rank 0 .*killed by SIGKILL'

# 3b. A running job's status names its rendezvous round.
printf '#!/bin/sh\nexec sleep 30\n' >sleepy.sh
chmod +x sleepy.sh
"$MUSTER" run --no-log dist.ddp -j 1x1 --script ./sleepy.sh >sleepy.out 2>/dev/null &
rdzv_line() { "$MUSTER" status "$(cat sleepy.out)" 2>/dev/null | grep -q 'Rendezvous: round 1: 1 nodes (of 1:1), 0 waiting'; }
t_until 30 rdzv_line && t_ok "status of a running job: its rendezvous round" ||
  t_fail "status of a running job: $("$MUSTER" status "$(cat sleepy.out)" 2>&1)"
"$MUSTER" cancel "$(cat sleepy.out)" >/dev/null 2>&1
wait

# 3c. Two failures on two nodes at different times: the root cause is the earlier one, whatever
# order the replicas are read in. Two roles, one node each, each its own rendezvous run (so that
# neither agent stops the other's worker), and -cfg fail_fast=false (so that the supervisor
# does not stop the second while the first has failed): `early` fails first, `late` once early's
# failure record is written. The mutation "the latest failure wins" (sched.c) fails this case.
cat >two.yaml <<'EOF'
name: tworoles
description: two roles, one node each, each with its own rendezvous run (t1007)
params:
  - {name: first, type: str, help: the early role's worker}
  - {name: second, type: str, help: the late role's worker}
app:
  name: tworoles
  roles:
    - name: early
      image: ""
      entrypoint: muster
      args: [agent, --nnodes, "1", --nproc-per-node, "1", --rdzv-endpoint, "${rdzv_endpoint}",
             --rdzv-id, "${app_id}-early", --role, early, --, "${first}"]
      num_replicas: 1
    - name: late
      image: ""
      entrypoint: muster
      args: [agent, --nnodes, "1", --nproc-per-node, "1", --rdzv-endpoint, "${rdzv_endpoint}",
             --rdzv-id, "${app_id}-late", --role, late, --, "${second}"]
      num_replicas: 1
EOF
printf '#!/bin/sh\necho "FirstError: the early role failed" >&2\nexit 3\n' >early.sh
cat >late.sh <<'EOF'
#!/bin/sh
# Fails once the early role's agent has written its failure record (60 s at most).
rec=$MUSTER_LOG_DIR/$MUSTER_APP_ID/early/0/error.json
i=0
while [ ! -s "$rec" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.05
echo 'SecondError: the late role failed' >&2
exit 4
EOF
chmod +x early.sh late.sh
timeout 120 "$MUSTER" run --no-log -cfg fail_fast=false ./two.yaml --first ./early.sh \
  --second ./late.sh >out3c 2>err3c
t_expect_eq "two failures: run exits 1" "$?" 1
h=$(cat out3c)
st=$("$MUSTER" status "$h")
t_expect_match "two failures: both failed, each with its record" "$(tr '\n' ' ' <<<"$st")" \
  'early\[0\]:FAILED.*error_msg: rank 0 .* exited with code 3: FirstError.*late\[0\]:FAILED.*error_msg: rank 0 .* exited with code 4: SecondError'
t_expect_match "two failures: run's root cause is the earlier failure" "$(tail -n 1 err3c)" \
  'root cause: rank 0 .* exited with code 3: FirstError: the early role failed'
t_expect_match "two failures: status' root cause is the earlier failure" "$st" \
  'Root Cause: rank 0 .* exited with code 3: FirstError: the early role failed'

# 4. The documented example: examples/train_ddp.py --fail-rank 2 with torch's @record.
if [ "$MU_SANITIZED" = 1 ]; then
  echo "# the torch example runs in the normal build only (4 workers importing torch)"
  "$MUSTER" log "$(cat out)" >pod.log
  want='ValueError: bad shard 7'
elif ! "$PY" -c 'import torch' 2>/dev/null; then
  t_skip_part "needs the Python module 'torch' under $PY (apt-get install python3-torch)"
  "$MUSTER" log "$(cat out)" >pod.log
  want='ValueError: bad shard 7'
else
  t_torch_lock
  timeout 180 "$MUSTER" run dist.ddp -j 2x2 --python "$PY" \
    --script "$MU_SOURCE_DIR/examples/train_ddp.py" -- --fail-rank 2 >out4 2>err4
  t_expect_eq "train_ddp --fail-rank 2: run exits 1" "$?" 1
  h=$(cat out4)
  want='RuntimeError: train_ddp: injected failure on rank 2'
  t_expect_match "train_ddp: run's last lines name rank, exit code, exception" "$(tail -n 3 err4)" \
    "root cause: rank 2 .* exited with code 1: $want"
  t_expect_match "train_ddp: status" "$("$MUSTER" status "$h")" \
    "Root Cause: rank 2 .* exited with code 1: $want"
  "$MUSTER" status --json "$h" >st4.json
  t_expect_eq "train_ddp: status --json record" \
    "$(json_get st4.json '(r["muster"]["rank"], r["muster"]["exit_code"], r["message"]["message"], r["muster"]["source"])')" \
    "(2, 1, '$want', 'error_file')"
  "$MUSTER" log "$h" >pod.log
fi

# 5. Kubernetes: the failed pod's log (here a real agent's output) holds the record line.
t_fake_kubectl
t_kubectl_job ml echo-42
mkdir -p "$T_DIR/pods"
cp "$T_DIR/pod.log" "$T_DIR/pods/echo-42-echo-0-0.log"
out=$(KUBECTL_PHASE=Failed KUBECTL_TAIL=200 KUBECTL_LOGS_DIR=$T_DIR/pods "$MUSTER" status \
  kubernetes://muster/ml:echo-42 2>&1)
t_expect_match "kubernetes: Root Cause from the pod's log" "$out" "Root Cause: rank 2 .*: $want"
grep -q -- "-n ml logs echo-42-echo-0-0 --tail=200" calls && t_ok "kubernetes: read the failed pod's log" ||
  t_fail "kubernetes: logs call: $(cat calls)"
t_done
