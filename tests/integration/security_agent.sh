#!/usr/bin/env bash
# muster agent against a locked-down musterd (TLS with client certificates + bearer token):
# 2 agents x 2 workers run the C ring all-reduce with an https:// endpoint, MUSTER_RDZV_CACERT,
# MUSTER_RDZV_CERT, MUSTER_RDZV_KEY and MUSTER_RDZV_TOKEN. Then an agent with a wrong token and
# one without a client certificate both fail with a message that says why, and no worker runs.
. "$(dirname "$0")/agent_common.bash"
. "$(dirname "$0")/security_lib.bash"

P=$T_DIR/pki
sec_make_pki "$P" || t_done
TOKEN=agent-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$TOKEN" >"$T_DIR/tokens"
sec_start_musterd --tls-cert "$P/server.pem" --tls-key "$P/server.key" --tls-client-ca "$P/ca.pem" \
  --token-file "$T_DIR/tokens" || { t_fail "musterd did not start"; t_done; }
EP=https://127.0.0.1:$MUSTERD_PORT

export MUSTER_RDZV_CACERT=$P/ca.pem MUSTER_RDZV_CERT=$P/client.pem MUSTER_RDZV_KEY=$P/client.key
export MUSTER_RDZV_TOKEN=$TOKEN
pids=()
for i in 0 1; do
  agent_start "agent$i" --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id sec2 \
    -- "$RING" --count 1024 --iters 2
  pids+=("$AGENT_PID")
done
for i in 0 1; do
  agent_wait "${pids[$i]}" 60
  t_expect_eq "agent $i (TLS + token) exits 0" "$RC" 0
done
all=$(cat "$T_DIR"/agent0.log "$T_DIR"/agent1.log)
t_expect_eq "4 ranks verified the sum over the secured rendezvous" \
  "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4' <<<"$all")" 4

MUSTER_RDZV_TOKEN=wrong-token-1234 agent_start agent-badtoken --nnodes 1 --nproc-per-node 1 \
  --rdzv-endpoint "$EP" --rdzv-id sec-bad --join-timeout 5 -- "$RING" --count 16 --iters 1
agent_wait "$AGENT_PID" 30
t_expect_eq "an agent with a wrong token fails" "$([ "$RC" != 0 ] && [ "$RC" != timeout ] && echo failed || echo "$RC")" failed
t_expect_match "  ... saying the server refused it" "$(cat "$T_DIR/agent-badtoken.log")" '401|unauthorized|token'
t_expect_eq "  ... and ran no worker" "$(grep -c 'allreduce ok' "$T_DIR/agent-badtoken.log")" 0

MUSTER_RDZV_CERT= MUSTER_RDZV_KEY= agent_start agent-nocert --nnodes 1 --nproc-per-node 1 \
  --rdzv-endpoint "$EP" --rdzv-id sec-nocert --join-timeout 5 -- "$RING" --count 16 --iters 1
agent_wait "$AGENT_PID" 30
t_expect_eq "an agent without a client certificate fails" "$([ "$RC" != 0 ] && [ "$RC" != timeout ] && echo failed || echo "$RC")" failed
t_expect_eq "  ... and ran no worker" "$(grep -c 'allreduce ok' "$T_DIR/agent-nocert.log")" 0

MUSTER_RDZV_CACERT=$T_DIR/missing-ca.pem agent_start agent-badca --nnodes 1 --nproc-per-node 1 \
  --rdzv-endpoint "$EP" --rdzv-id sec-badca --join-timeout 5 -- "$RING" --count 16 --iters 1
agent_wait "$AGENT_PID" 30
t_expect_match "a missing CA file is named in the agent's error" "$(cat "$T_DIR/agent-badca.log")" 'missing-ca.pem'
# The token from a 0600 file (MUSTER_RDZV_TOKEN_FILE), as muster run hands it to a job's agents.
printf '%s\n' "$TOKEN" >"$T_DIR/token.file"
chmod 600 "$T_DIR/token.file"
MUSTER_RDZV_TOKEN= MUSTER_RDZV_TOKEN_FILE=$T_DIR/token.file agent_start agent-tokfile --nnodes 1 \
  --nproc-per-node 1 --rdzv-endpoint "$EP" --rdzv-id sec-tokfile --join-timeout 20 \
  -- "$RING" --count 16 --iters 1
agent_wait "$AGENT_PID" 30
t_expect_eq "an agent with the token in MUSTER_RDZV_TOKEN_FILE exits 0" "$RC" 0
MUSTER_RDZV_TOKEN= MUSTER_RDZV_TOKEN_FILE=$T_DIR/no-such-token agent_start agent-notokfile \
  --nnodes 1 --nproc-per-node 1 --rdzv-endpoint "$EP" --rdzv-id sec-notokfile --join-timeout 5 \
  -- "$RING" --count 16 --iters 1
agent_wait "$AGENT_PID" 30
t_expect_eq "an unreadable MUSTER_RDZV_TOKEN_FILE fails the agent" "$([ "$RC" != 0 ] && [ "$RC" != timeout ] && echo failed || echo "$RC")" failed
t_expect_match "  ... naming the file" "$(cat "$T_DIR/agent-notokfile.log")" 'no-such-token'
leak=$(grep -lF -- "$TOKEN" "$T_DIR"/*.log 2>/dev/null | wc -l)
t_expect_eq "the token appears in no log" "$leak" 0
sec_stop_musterd
agent_dump_logs
t_done
