#!/usr/bin/env bash
# muster agent: usage errors, a dead endpoint, a non-musterd endpoint (an etcd named as one) and
# a join timeout all end quickly with a clear message; --rdzv-id defaults to torchrun's "none";
# SIGTERM is forwarded to the workers; --standalone works.
. "$(dirname "$0")/agent_common.bash"

out=$("$MUSTER" agent --nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-id x 2>&1); rc=$?
t_expect_eq "no command: usage" "$rc" 2
t_expect_match "no command: message" "$out" "no worker command; give a script"
out=$("$MUSTER" agent --nnodes 4:2 --rdzv-endpoint 127.0.0.1:1 --rdzv-id x -- true 2>&1); rc=$?
t_expect_eq "bad nnodes: usage" "$rc" 2
t_expect_match "bad nnodes: message" "$out" "MAX \(2\) is below MIN \(4\)"
out=$("$MUSTER" agent --nproc_per_node 2 --rdzv_endpoint nohost --rdzv_id x -- true 2>&1); rc=$?
t_expect_eq "bad endpoint (underscore spellings): usage" "$rc" 2
t_expect_match "bad endpoint: message" "$out" "bad --rdzv-endpoint 'nohost'"

port=$(t_free_port)
start=$(date +%s)
out=$("$MUSTER" agent --rdzv-endpoint "127.0.0.1:$port" --rdzv-id x --join-timeout 2 -- true 2>&1)
rc=$?
t_expect_eq "dead endpoint: exit 3" "$rc" 3
t_expect_match "dead endpoint: message" "$out" "cannot reach the rendezvous endpoint '127.0.0.1:$port'.*refused"
# Within the join timeout (2 s; the default is 600 s), with room for start-up and exit on a
# loaded machine (the ASan build under load took over 4 s).
el=$(( $(date +%s) - start ))
t_expect_eq "dead endpoint: gives up within the join timeout (${el}s)" "$(( el <= 30 ))" 1
# The same on etcd v3, members given with a scheme: the messages show the endpoint in the form
# a user pastes back (etcd-v3://HOST:PORT, not etcd-v3://http://HOST:PORT).
out=$("$MUSTER" agent --rdzv-backend etcd-v3 --rdzv-endpoint "http://127.0.0.1:$port/" --rdzv-id x \
  --join-timeout 2 -- true 2>&1)
rc=$?
t_expect_eq "dead etcd endpoint: exit 3" "$rc" 3
t_expect_match "dead etcd endpoint: shown as etcd-v3://HOST:PORT" "$out" \
  "cannot reach the rendezvous endpoint 'etcd-v3://127\.0\.0\.1:$port':.*refused"
out=$("$MUSTER" agent --rdzv-backend etcd-v3 --rdzv-endpoint "https://127.0.0.1:$port,h2" \
  --rdzv-id x -- true 2>&1)
rc=$?
t_expect_eq "bad etcd endpoint: usage" "$rc" 2
t_expect_match "bad etcd endpoint: names the member" "$out" \
  "--rdzv-endpoint: 'h2' in .* is not HOST:PORT.*etcd-v3://h1:2379,h2:2379"

hport=$(t_free_port)
t_spawn http "$PY" -m http.server --bind 127.0.0.1 "$hport"
t_wait_http "http://127.0.0.1:$hport/" 10
out=$("$MUSTER" agent --rdzv-endpoint "127.0.0.1:$hport" --rdzv-id x --join-timeout 5 -- true 2>&1)
rc=$?
t_expect_eq "not a musterd: exit 3" "$rc" 3
t_expect_match "not a musterd: message" "$out" "is not a musterd rendezvous endpoint"

# torchrun's --rdzv_backend=etcd pointed at a real etcd (muster's etcd is a musterd; an etcd
# v3 cluster is the etcd-v3 backend): named as etcd, with the backend that speaks to it.
if command -v etcd >/dev/null && t_start_etcd; then
  out=$("$MUSTER" agent --rdzv_backend=etcd --rdzv_endpoint "127.0.0.1:$ETCD_PORT" --rdzv_id x \
    --join-timeout 5 -- true 2>&1)
  rc=$?
  t_expect_eq "etcd where a musterd was meant: exit 3" "$rc" 3
  t_expect_match "etcd where a musterd was meant: named, with --rdzv-backend etcd-v3" "$out" \
    "is etcd 3\.4\.[0-9]+ .*not a musterd.*--rdzv-backend etcd-v3"
  kill -TERM "$ETCD_PID"
else
  t_skip_part "etcd where a musterd was meant (needs etcd: apt-get install etcd-server)"
fi

t_start_musterd
EP=127.0.0.1:$MUSTERD_PORT
# --rdzv-id defaults as torchrun's does: the run "none"
out=$("$MUSTER" agent --nnodes 1 --rdzv-endpoint "$EP" -- true 2>&1); rc=$?
t_expect_eq "no --rdzv-id: the run is torchrun's default 'none' (exit 0)" "$rc" 0
t_expect_match "no --rdzv-id: joined run 'none'" "$out" "run 'none' round 1"
start=$(date +%s)
out=$("$MUSTER" agent --nnodes 2 --rdzv-endpoint "$EP" --rdzv-id lonely --join-timeout 2 -- true 2>&1)
rc=$?
t_expect_eq "join timeout: exit 3" "$rc" 3
t_expect_match "join timeout: message" "$out" "join of run 'lonely' timed out"
el=$(( $(date +%s) - start ))
t_expect_eq "join timeout: after 2 s, not 600 (${el}s)" "$(( el >= 2 && el <= 30 ))" 1

# SIGTERM to the agent reaches the workers; the agent exits 128+15.
agent_start sig --rdzv-endpoint "$EP" --rdzv-id sig --nproc-per-node 2 -- \
  bash -c 'trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.1; done'
pid=$AGENT_PID
wait_for_lines "$T_DIR/sig.log" ':ready' 2 60 && t_ok "SIGTERM: both workers are up" ||
  t_fail "SIGTERM: the workers did not come up in 60 s"
kill -TERM "$pid"
agent_wait "$pid" 20
t_expect_eq "SIGTERM: exit 143" "$RC" 143
t_expect_eq "SIGTERM forwarded to both workers" "$(grep -c ':got TERM' "$T_DIR/sig.log")" 2

# A command that does not exist is a worker failure with a clear summary.
out=$("$MUSTER" agent --rdzv-endpoint "$EP" --rdzv-id nocmd -- /nonexistent/worker 2>&1); rc=$?
t_expect_eq "missing worker binary: exit 1" "$rc" 1
t_expect_match "missing worker binary: message" "$out" \
  "cannot start worker command '/nonexistent/worker': No such file or directory"
t_expect_match "missing worker binary: summary" "$out" "rank 0 .*exit code 127 \(command not found"

# An agent killed with SIGKILL takes its workers with it (PR_SET_PDEATHSIG via the shim).
# The sleeps' argument is unique to this test process: other suites may run at the same time.
marker="$((1000000 + $$)).25"
agent_start orphan --rdzv-endpoint "$EP" --rdzv-id orphan --nproc-per-node 2 -- \
  bash -c "echo up; exec sleep $marker"
pid=$AGENT_PID
wait_for_lines "$T_DIR/orphan.log" ':up' 2 60
# 'up' is printed just before the exec: wait for the two sleeps themselves.
t_until 20 eval '[ "$(t_count_procs "^sleep $marker")" -eq 2 ]'
t_expect_eq "workers running" "$(t_count_procs "^sleep $marker")" 2
kill -KILL "$pid"
{ wait "$pid"; } 2>/dev/null
t_until 20 eval '[ "$(t_count_procs "^sleep $marker")" -eq 0 ]'
t_expect_eq "no orphaned worker after the agent's SIGKILL" "$(t_count_procs "^sleep $marker")" 0

# --standalone: an embedded musterd, nothing else needed.
out=$("$MUSTER" agent --standalone --nproc-per-node 3 -- "$RING" 2>&1); rc=$?
t_expect_eq "standalone: exit 0" "$rc" 0
t_expect_eq "standalone: 3 ranks verified" "$(grep -c 'allreduce ok, world 3' <<<"$out")" 3
agent_dump_logs
t_done
