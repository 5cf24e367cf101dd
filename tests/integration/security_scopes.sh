#!/usr/bin/env bash
# Scoped credentials (issue 24): --token-file and --auth-users lines carry scopes (runs=GLOB,
# keys=/PREFIX, read-only, quota-watchers=N, quota-value-bytes=N). Team A's token reads and
# writes its own keys and runs, gets 403 (naming the scope it lacks by its id, never the secret,
# never whether the thing exists) for team B's keys, runs, KV and watches, and sees nothing of
# team B in a listing, a recursive GET, a watch of the root, /v1/runs, /v1/events or /v1/c10d
# (the TCPStore's keys by torchrun run, which are the run's: runs=GLOB); a
# read-only token reads and cannot write; a line without scopes may everything; the per-credential
# quotas hold; an agent whose token does not cover its run exits naming the scope.
. "$(dirname "$0")/agent_common.bash"

TA=team-a-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
TB=team-b-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
RO=reader-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
ROOT=root-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
QT=quota-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat >"$T_DIR/tokens" <<EOF
# team A: its runs and its keys
$TA runs=team-a-* keys=/team-a
$TB runs=team-b-* keys=/team-b/
$RO read-only
$ROOT
$QT keys=/q runs=q-* quota-watchers=1 quota-value-bytes=100
EOF
printf 'alice:pa ss runs=team-a-* keys=/team-a\n' >"$T_DIR/users"
chmod 600 "$T_DIR/tokens" "$T_DIR/users"
MU_C10D_CLIENT=${MU_C10D_CLIENT:-$MU_BUILD_DIR/tests/c10d_client}
t_need_built "$MU_C10D_CLIENT"
t_start_musterd --token-file "$T_DIR/tokens" --auth-users "$T_DIR/users" \
  --c10d-listen 127.0.0.1:0 ||
  { t_fail "musterd did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
U=$MUSTERD_URL
idof() { grep -o "credential#[0-9a-f]* (line $1 of the token file)" "$T_DIR/musterd.log" | cut -d' ' -f1; }
IA=$(idof 2) IB=$(idof 3)
t_expect_match "each credential is logged by its id and scopes" "$IA $IB" '^credential#[0-9a-f]{8} credential#[0-9a-f]{8}$'

# req TOKEN CURL-ARGS...: "STATUS BODY"
req() {
  local t=$1
  shift
  curl -s --max-time 10 -o "$T_DIR/body" -w '%{http_code}' -H "Authorization: Bearer $t" "$@"
  echo " $(cat "$T_DIR/body")"
}
J='"addr":"10.0.0.1","local_world_size":1,"min_nodes":1,"lease_ttl_ms":60000'
join() { # TOKEN RUN NODE
  req "$1" -X POST -H 'Content-Type: application/json' "$U/v1/runs/$2/join" -d "{\"node_id\":\"$3\",$J}"
}

# --- each team in its own space ---
t_expect_match "A writes its key" "$(req "$TA" -X PUT "$U/v2/keys/team-a/x" -d value=a1)" '^201 '
t_expect_match "B writes its key" "$(req "$TB" -X PUT "$U/v2/keys/team-b/y" -d value=b1)" '^201 '
t_expect_match "A reads its key" "$(req "$TA" "$U/v2/keys/team-a/x")" '^200 .*"value":"a1"'
t_expect_match "A joins its run" "$(join "$TA" team-a-1 n1)" '^200 .*"node_rank":0'
t_expect_match "B joins its run" "$(join "$TB" team-b-1 n1)" '^200 '
t_expect_match "A writes its run's KV" \
  "$(req "$TA" -X PUT "$U/v1/runs/team-a-1/kv/k" --data-binary va)" '^200 '
t_expect_match "B writes its run's KV" \
  "$(req "$TB" -X PUT "$U/v1/runs/team-b-1/kv/secret" --data-binary vb)" '^200 '

# --- A and B's things: 403 naming the scope, never the data ---
out=$(req "$TA" "$U/v2/keys/team-b/y")
t_expect_match "A reading B's key: 403, etcd's errorCode 110" "$out" '^403 \{"errorCode":110'
t_expect_match "... naming the scope A lacks by A's id" "$out" "$IA lacks the scope keys=/team-b/y"
missing=$(req "$TA" "$U/v2/keys/team-b/nothing-here")
t_expect_eq "... the same answer for a key of B's that does not exist (no hint)" \
  "${missing//nothing-here/y}" "$out"
t_expect_match "A writing B's key: 403" "$(req "$TA" -X PUT "$U/v2/keys/team-b/y" -d value=x)" '^403 '
t_expect_match "A deleting B's dir: 403" \
  "$(req "$TA" -X DELETE "$U/v2/keys/team-b?recursive=true")" '^403 '
t_expect_match "A deleting the root recursively: 403" \
  "$(req "$TA" -X DELETE "$U/v2/keys/?recursive=true&dir=true")" '^403 '
t_expect_match "... and B's key is still there" "$(req "$TB" "$U/v2/keys/team-b/y")" '"value":"b1"'
t_expect_match "A watching B's key: 403" "$(req "$TA" "$U/v2/keys/team-b/y?wait=true")" '^403 '
out=$(req "$TA" "$U/v1/runs/team-b-1")
t_expect_match "A reading B's run: 403 forbidden naming runs=" "$out" \
  "^403 \{\"error\":\"forbidden\",\"message\":\"$IA lacks the scope runs=team-b-1"
t_expect_match "A reading B's run KV: 403" "$(req "$TA" "$U/v1/runs/team-b-1/kv/secret")" '^403 '
t_expect_match "A watching B's round: 403" \
  "$(req "$TA" "$U/v1/runs/team-b-1/watch?node_id=n1&round=1&timeout_ms=100")" '^403 '
t_expect_match "A joining B's run: 403" "$(join "$TA" team-b-1 intruder)" '^403 '
t_expect_match "A shutting B's run down: 403" "$(req "$TA" -X POST "$U/v1/runs/team-b-1/shutdown")" \
  '^403 '
t_expect_match "... and B's run is open" "$(req "$TB" "$U/v1/runs/team-b-1")" '"state":"open"'

# --- listings show A only what it may read ---
out=$(req "$TA" "$U/v2/keys/?recursive=true")
t_expect_match "A's recursive GET of the root: its keys" "$out" '^200 .*"/team-a/x"'
t_expect_eq "... and nothing of B" "$(grep -c 'team-b' <<<"$out")" 0
out=$(req "$TA" "$U/v2/keys/")
t_expect_match "A's listing of the root: its dir only" "$out" '"key":"/team-a","dir":true'
t_expect_eq "... nothing of B" "$(grep -c 'team-b' <<<"$out")" 0
t_expect_match "the root's listing for a line without scopes has both" \
  "$(req "$ROOT" "$U/v2/keys/?recursive=true")" 'team-a.*team-b|team-b.*team-a'
out=$(req "$TA" "$U/v1/runs")
t_expect_match "A's /v1/runs: its run" "$out" '"team-a-1"'
t_expect_eq "... and not B's" "$(grep -c 'team-b' <<<"$out")" 0
out=$(req "$TA" "$U/v1/events?after=0&timeout_ms=0")
t_expect_match "A's /v1/events: its run's" "$out" '"run_id":"team-a-1"'
t_expect_eq "... and none of B's" "$(grep -c 'team-b' <<<"$out")" 0
out=$(curl -s --max-time 10 -u 'alice:pa ss' "$U/v1/runs")
t_expect_match "a basic-auth user with scopes (the status page's /v1/runs): A's run" "$out" 'team-a-1'
t_expect_eq "... not B's" "$(grep -c 'team-b' <<<"$out")" 0

# --- the TCPStore's keys by run (/v1/c10d): a torchrun run's keys are the run's ---
printf 'set /torch.rendezvous.%s\n' 'team-a-c state-a' 'team-b-c b-c10d-secret' |
  timeout 20 "$MU_C10D_CLIENT" --legacy 127.0.0.1 "$C10D_PORT" >/dev/null 2>&1
printf 'set /free k\n' |
  timeout 20 "$MU_C10D_CLIENT" --legacy 127.0.0.1 "$C10D_PORT" >/dev/null 2>&1
out=$(req "$TA" "$U/v1/c10d")
t_expect_match "A's /v1/c10d: its torchrun run" "$out" '^200 .*"run_id":"team-a-c","keys":1'
t_expect_eq "... not B's" "$(grep -c 'team-b' <<<"$out")" 0
t_expect_match "... and counts only its own keys" "$out" '"keys":1,"connections".*"other_keys":0'
out=$(req "$TA" "$U/v1/c10d/team-b-c")
t_expect_match "A reading B's c10d run: 403 forbidden naming runs=" "$out" \
  "^403 \{\"error\":\"forbidden\",\"message\":\"$IA lacks the scope runs=team-b-c"
t_expect_eq "... without B's value" "$(grep -c 'b-c10d-secret' <<<"$out")" 0
t_expect_eq "... the same answer for a run of B's that does not exist (no hint)" \
  "$(req "$TA" "$U/v1/c10d/team-b-none" | sed 's/team-b-none/team-b-c/g')" "$out"
t_expect_match "A reads its c10d run" "$(req "$TA" "$U/v1/c10d/team-a-c")" \
  '^200 .*"value":"state-a"'
t_expect_match "a line without scopes sees both runs and the key of no run" \
  "$(req "$ROOT" "$U/v1/c10d")" '"keys":3,.*team-a-c.*team-b-c.*"other_keys":1'

# --- a watch of the root takes A's events only ---
seq=$(req "$TA" "$U/v1/events?after=0&timeout_ms=0" | sed 's/^200 //' | jq .seq)
curl -s --max-time 20 -H "Authorization: Bearer $TA" \
  "$U/v2/keys/?wait=true&recursive=true" >"$T_DIR/watch.out" &
wpid=$!
curl -s --max-time 20 -H "Authorization: Bearer $TA" \
  "$U/v1/events?after=$seq&timeout_ms=15000" >"$T_DIR/events.out" &
epid=$!
t_until 10 eval "[ \"\$(curl -s $U/metrics | awk '/^musterd_v2_watchers /{print \$2}')\" = 1 ]"
req "$TB" -X PUT "$U/v2/keys/team-b/z" -d value=b2 >/dev/null
join "$TB" team-b-2 n1 >/dev/null
req "$TA" -X PUT "$U/v2/keys/team-a/w" -d value=a2 >/dev/null
join "$TA" team-a-2 n1 >/dev/null
wait "$wpid" "$epid"
t_expect_match "A's watch of the root fires on A's write" "$(cat "$T_DIR/watch.out")" '"/team-a/w"'
t_expect_eq "... not on B's, which came first" "$(grep -c 'team-b' "$T_DIR/watch.out")" 0
t_expect_match "A's event long poll answers with A's run" "$(cat "$T_DIR/events.out")" 'team-a-2'
t_expect_eq "... not B's, which came first" "$(grep -c 'team-b' "$T_DIR/events.out")" 0

# --- read-only ---
t_expect_match "read-only reads" "$(req "$RO" "$U/v2/keys/team-b/y")" '^200 .*"b1"'
out=$(req "$RO" -X PUT "$U/v2/keys/team-a/x" -d value=ro)
t_expect_match "read-only cannot write a v2 key: 403 saying so" "$out" '^403 .*is read-only'
t_expect_match "... nor /v1 KV" "$(req "$RO" -X PUT "$U/v1/runs/team-a-1/kv/k" --data-binary x)" \
  '^403 \{"error":"forbidden".*read-only'
t_expect_match "... nor join" "$(join "$RO" team-a-1 ro)" '^403 '
t_expect_match "... and nothing changed" "$(req "$TA" "$U/v2/keys/team-a/x")" '"value":"a1"'

# --- per-credential quotas ---
out=$(req "$QT" -X PUT "$U/v2/keys/q/big" -d "value=$(head -c 200 /dev/zero | tr '\0' x)")
t_expect_match "quota-value-bytes=100: a 200-byte value is refused (413 naming the credential)" \
  "$out" "^413 .*credential#[0-9a-f]{8}.*quota-value-bytes"
curl -s --max-time 20 -H "Authorization: Bearer $QT" "$U/v2/keys/q/w?wait=true" >/dev/null &
qpid=$!
t_until 10 eval "[ \"\$(curl -s $U/metrics | awk '/^musterd_v2_watchers /{print \$2}')\" = 1 ]"
t_expect_match "quota-watchers=1: a second watch is refused (429)" \
  "$(req "$QT" "$U/v2/keys/q/w2?wait=true")" '^429 .*quota-watchers'
curl -s -o /dev/null --max-time 1 -H "Authorization: Bearer $TA" "$U/v2/keys/team-a/x?wait=true"
t_expect_eq "... while another credential watches (its watch waits: curl times out)" "$?" 28
req "$QT" -X PUT "$U/v2/keys/q/w" -d value=1 >/dev/null
wait "$qpid"

# --- metrics and secrets ---
t_expect_match "/metrics counts the refusals" "$(curl -s "$U/metrics")" \
  'musterd_scope_refused_total [1-9]'
leak=$(grep -cF -e "$TA" -e "$TB" -e "$RO" -e "$ROOT" -e "$QT" -e 'pa ss' "$T_DIR/musterd.log")
t_expect_eq "no secret in the log" "$leak" 0

# --- the agent with a token outside its run's scope ---
MUSTER_RDZV_TOKEN=$TA agent_start agent-outside --nnodes 1 --nproc-per-node 1 \
  --rdzv-endpoint "127.0.0.1:$MUSTERD_PORT" --rdzv-id team-b-9 --join-timeout 5 \
  -- "$RING" --count 16 --iters 1
agent_wait "$AGENT_PID" 30
t_expect_eq "an agent whose token does not cover its run fails" \
  "$([ "$RC" != 0 ] && [ "$RC" != timeout ] && echo failed || echo "$RC")" failed
t_expect_match "... naming the scope it lacks" "$(cat "$T_DIR/agent-outside.log")" \
  "refused this agent: forbidden: $IA lacks the scope runs=team-b-9"
t_expect_eq "... and ran no worker" "$(grep -c 'allreduce ok' "$T_DIR/agent-outside.log")" 0
MUSTER_RDZV_TOKEN=$TA agent_start agent-inside --nnodes 1 --nproc-per-node 1 \
  --rdzv-endpoint "127.0.0.1:$MUSTERD_PORT" --rdzv-id team-a-9 --join-timeout 20 \
  -- "$RING" --count 16 --iters 1
agent_wait "$AGENT_PID" 60
t_expect_eq "the same token's agent in its own run exits 0" "$RC" 0
t_stop_musterd_checked
agent_dump_logs
t_done
