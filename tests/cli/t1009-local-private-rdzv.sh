#!/usr/bin/env bash
# A local job's rendezvous is private to the job (issue 24 finding 1): `muster run` makes a
# token for the job's embedded musterd at submission, in a 0600 file that the agents and workers
# read (MUSTER_RDZV_TOKEN_FILE). While the job runs, a stranger's curl to /v1 and /v2 and a
# `muster agent` without the token get 401 and cannot join, read or shut the run down; the job
# itself runs to its end; the token is in no command line (ps), log, state file or dry run, and
# goes with the job. -cfg rdzv_auth=none is the explicit opt-out.
. "$(dirname "$0")/../lib.sh"
RING=$MU_BUILD_DIR/examples/ring_allreduce
t_need_built "$MUSTER" "$RING"
t_local_jobs
unset MUSTER_RDZV_TOKEN MUSTER_RDZV_TOKEN_FILE

# The dry run names the file; no token exists yet.
out=$("$MUSTER" run --dryrun dist.ddp -j 2x1 --script "$RING" 2>&1)
t_expect_match "dryrun: private, the token's file named" "$out" \
  "private to the job: it requires the token in $T_DIR/logs/[a-z0-9-]*/rdzv.token \(0600"
t_expect_match "dryrun: replicas get the file, not the token" "$out" \
  "MUSTER_RDZV_TOKEN_FILE=$T_DIR/logs/[a-z0-9-]*/rdzv.token"
t_expect_eq "dryrun: no token file made" "$(find "$T_DIR/logs" -name rdzv.token 2>/dev/null)" ""

# A job that runs for a while: 2 nodes, each iteration through the run's KV.
MUSTER_RDZV_TOKEN=a-token-of-the-users-own t_spawn job "$MUSTER" run dist.ddp -j 2x1 \
  --script "$RING" -- --iters 100000 --sleep-ms 100
running() { # LOG: the job `muster run` wrote LOG for runs: both nodes joined, each started a worker
  h=$(grep -o -m1 'local://muster/[a-z0-9-]*' "$1") || return 1
  id=${h##*/}
  dir=$T_DIR/logs/$id
  ep=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["rdzv_endpoint"])' \
    "$dir/state.json" 2>/dev/null) || return 1
  [ -n "$ep" ] && [ "$(cat "$dir"/*/*/combined.log | grep -c 'started 1 worker')" = 2 ]
}
if ! t_until 60 running "$T_DIR/job.log"; then
  t_fail "the job did not start running"; tail -5 "$T_DIR/job.log"; t_done
fi
t_ok "both agents joined with the job's token (the user's MUSTER_RDZV_TOKEN set aside)"
tok=$(head -n1 "$dir/rdzv.token")
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
kv_written() { [ "$(code -H "Authorization: Bearer $tok" "http://$ep/v1/runs/$id/kv/ring.1.1")" = 200 ]; }
t_until 30 kv_written && t_ok "the workers wrote the run's KV with the token" ||
  t_fail "the workers wrote no KV (ring.1.1)"
t_expect_match "the token: 64 hex digits" "$tok" '^[0-9a-f]{64}$'
t_expect_eq "the token file is 0600" "$(stat -c %a "$dir/rdzv.token")" 600
if command -v runuser >/dev/null && ! runuser -u nobody -- cat "$dir/rdzv.token" >/dev/null 2>&1; then
  t_ok "another user cannot read it"
else
  t_fail "another user can read the token file (or runuser is missing)"
fi

# A stranger (no token): 401 on /v1 and /v2, for reads, writes, a join and a shutdown.
t_expect_eq "stranger: GET /v1/runs/ID" "$(code "http://$ep/v1/runs/$id")" 401
t_expect_eq "stranger: GET /v1/runs" "$(code "http://$ep/v1/runs")" 401
t_expect_eq "stranger: GET the run's KV" "$(code "http://$ep/v1/runs/$id/kv/ring.1.0")" 401
t_expect_eq "stranger: POST shutdown" \
  "$(code -X POST -H 'Content-Type: application/json' -d '{"reason":"x"}' "http://$ep/v1/runs/$id/shutdown")" 401
t_expect_eq "stranger: POST join" \
  "$(code -X POST -H 'Content-Type: application/json' -d '{"node_id":"evil","addr":"1.2.3.4"}' "http://$ep/v1/runs/$id/join")" 401
t_expect_eq "stranger: GET /v2/keys" "$(code "http://$ep/v2/keys/?recursive=true")" 401
t_expect_eq "stranger: PUT /v2/keys" "$(code -X PUT -d value=1 "http://$ep/v2/keys/x")" 401
t_expect_eq "stranger: a wrong token" "$(code -H 'Authorization: Bearer 0123456789abcdef' "http://$ep/v1/runs/$id")" 401
t_expect_eq "/healthz stays open" "$(code "http://$ep/healthz")" 200
out=$(timeout 30 "$MUSTER" agent --rdzv-endpoint "$ep" --rdzv-id "$id" --nnodes 1:3 \
  --nproc-per-node 1 -- true 2>&1)
t_expect_eq "stranger: muster agent without the token fails (3: rendezvous error)" "$?" 3
t_expect_match "... with the server's 401" "$out" "401|unauthorized|credentials"
t_expect_match "... saying it was refused and where the token goes, not 'not a musterd'" \
  "$(grep -v 'not a musterd' <<<"$out")" "refused this agent.*MUSTER_RDZV_TOKEN_FILE"
out=$(timeout 30 "$MUSTER" rdzv "$ep" "$id" 2>&1)
t_expect_match "stranger: muster rdzv is refused" "$out" "HTTP 401"
t_expect_match "stranger: the refusal says where the token goes, not 'is it a musterd?'" "$out" \
  "needs a valid token; give it with MUSTER_RDZV_TOKEN or MUSTER_RDZV_TOKEN_FILE \(muster rdzv: --token T\)"
t_expect_eq "the job still runs" "$("$MUSTER" status "$h" | sed -n 's/^ *State: //p')" RUNNING
ui=$("$MUSTER" status "$h" | sed -n 's/^ *UI URL: //p')
t_expect_match "its status page (which a browser cannot open without the token) is not advertised" \
  "$ui" "^None \\(the job's musterd is private"
t_expect_match "UI URL says how to see it: the token file, muster rdzv, or rdzv_auth=none (issue 34)" \
  "$ui" "token in $dir/rdzv.token.*'MUSTER_RDZV_TOKEN_FILE=$dir/rdzv.token muster rdzv --watch [^']*$ep'.*-cfg rdzv_auth=none"

# The job's own token works (the file is the job's, readable by its user).
t_expect_eq "with the token: GET /v1/runs/ID" \
  "$(code -H "Authorization: Bearer $tok" "http://$ep/v1/runs/$id")" 200
out=$(MUSTER_RDZV_TOKEN_FILE=$dir/rdzv.token "$MUSTER" rdzv "$ep" "$id" 2>&1)
t_expect_match "with the token file: muster rdzv reads the run" "$out" "$id"

# Nowhere else: command lines, logs, state, the spec.
ps -eo args >"$T_DIR/ps.txt" # to a file first: a grep in the pipe would show the token itself
t_expect_match "ps lists the job's processes" "$(cat "$T_DIR/ps.txt")" "muster agent .*--rdzv-id $id"
if grep -F -q -- "$tok" "$T_DIR/ps.txt"; then t_fail "the token is in a command line (ps)"; else
  t_ok "the token is in no command line (ps)"; fi
found=$(grep -rlF -- "$tok" "$dir" "$T_DIR/job.log" | grep -v '/rdzv.token$')
t_expect_eq "the token is in no log, state or spec file" "$found" ""

"$MUSTER" cancel "$h" >/dev/null 2>&1
t_until 30 eval '[ ! -e "$dir/rdzv.token" ]' && t_ok "the token file goes with the job" ||
  t_fail "the token file is still there after the job ended"

# torchrun's etcd backends send no token: with rdzv_auth=auto (the default) that job's musterd
# runs open and says so, also without --dryrun; rdzv_auth=token refuses the job.
out=$("$MUSTER" run --dryrun dist.ddp -j 2x1 --launcher torchrun --rdzv_backend etcd-v2 \
  --script "$RING" 2>"$T_DIR/note")
t_expect_match "torchrun etcd-v2: open, and why" "$out" \
  "open to anyone on this machine \(roles\[0\] runs torchrun with an etcd rendezvous backend, which sends no token"
t_expect_match "torchrun etcd-v2: a note on stderr" "$(cat "$T_DIR/note")" \
  "^muster: note: the job's musterd is open to anyone on this machine: roles\[0\] runs torchrun"
out=$("$MUSTER" run --dryrun -cfg rdzv_auth=token dist.ddp --launcher torchrun \
  --rdzv_backend etcd-v2 --script "$RING" 2>&1)
t_expect_eq "rdzv_auth=token with torchrun etcd-v2: exit 2" "$?" 2
t_expect_match "... says why and the ways out" "$out" \
  "-cfg rdzv_auth=token: roles\[0\] runs torchrun with an etcd rendezvous backend, which cannot send the token.*c10d"
# torchrun's c10d backend (dist.ddp's default) talks to the TCPStore listener, which has no
# credentials (docs/security.md): the job's HTTP port stays private, the dryrun says so.
out=$("$MUSTER" run --dryrun -cfg rdzv_auth=token dist.ddp -j 2x1 --launcher torchrun \
  --script "$RING" 2>&1)
t_expect_eq "rdzv_auth=token with torchrun c10d: accepted" "$?" 0
t_expect_match "... its HTTP port private" "$out" "embedded musterd on 127\.0\.0\.1:<a free port>, private to the job"
t_expect_match "... its TCPStore port unauthenticated" "$out" \
  "TCPStore \(c10d\): the same musterd on 127\.0\.0\.1:<another free port>, unauthenticated"

# On top: -cfg rdzv_tls=DIR, the job's musterd over HTTPS with client certificates, the agents
# check it with DIR/ca.pem and present DIR/client.pem; a plain or certificate-less client
# never gets an HTTP answer, one with the certificate but not the token gets 401.
. "$MU_SOURCE_DIR/tests/integration/security_lib.bash"
sec_make_pki "$T_DIR/pki" || t_done
MUSTER_LOG_DIR=$T_DIR/logs t_spawn tlsjob "$MUSTER" run -cfg "rdzv_tls=$T_DIR/pki" dist.ddp \
  -j 2x1 --script "$RING" -- --iters 100000 --sleep-ms 100
if t_until 60 running "$T_DIR/tlsjob.log"; then
  t_ok "a job over TLS: both agents joined (https, CA, client certificate, token)"
  t_expect_match "its endpoint is https" "$ep" '^https://127\.0\.0\.1:[0-9]+$'
  tok=$(head -n1 "$dir/rdzv.token")
  pki=$T_DIR/pki
  t_expect_eq "plain HTTP gets no answer" "$(code "http://${ep#https://}/v1/runs/$id")" 000
  t_expect_eq "no client certificate: no answer" \
    "$(code --cacert "$pki/ca.pem" -H "Authorization: Bearer $tok" "$ep/v1/runs/$id")" 000
  t_expect_eq "the client certificate without the token: 401" \
    "$(code --cacert "$pki/ca.pem" --cert "$pki/client.pem" --key "$pki/client.key" "$ep/v1/runs/$id")" 401
  t_expect_eq "certificate and token: 200" \
    "$(code --cacert "$pki/ca.pem" --cert "$pki/client.pem" --key "$pki/client.key" \
      -H "Authorization: Bearer $tok" "$ep/v1/runs/$id")" 200
  "$MUSTER" cancel "$h" >/dev/null 2>&1
else
  t_fail "the job over TLS did not start running"; tail -5 "$T_DIR/tlsjob.log"
fi
out=$("$MUSTER" run --dryrun -cfg "rdzv_tls=$T_DIR" dist.ddp --script "$RING" 2>&1)
t_expect_match "rdzv_tls without the files: named" "$out" "-cfg rdzv_tls: cannot read '$T_DIR/server.pem'"

# A user's own token for an existing musterd (rdzv=HOST:PORT): the agents send the first line
# of rdzv_token_file; without it they are refused.
openssl rand -hex 32 >"$T_DIR/ext.token" && chmod 600 "$T_DIR/ext.token"
t_start_musterd --token-file "$T_DIR/ext.token" || t_fail "a musterd with a token"
ext="rdzv=127.0.0.1:$MUSTERD_PORT"
h=$("$MUSTER" run -cfg "$ext,rdzv_token_file=$T_DIR/ext.token" dist.ddp -j 2x1 --script "$RING" 2>"$T_DIR/ext.err")
t_expect_eq "rdzv=HOST:PORT with rdzv_token_file: the job succeeds" "$?" 0 || tail -3 "$T_DIR/ext.err"
t_expect_match "... its replicas got the file" "$(cat "$T_DIR/logs/${h##*/}/app.json" "$T_DIR/logs/${h##*/}/state.json"; "$MUSTER" run --dryrun -cfg "$ext,rdzv_token_file=$T_DIR/ext.token" dist.ddp --script "$RING")" \
  "MUSTER_RDZV_TOKEN_FILE=$T_DIR/ext.token"
h=$(timeout 60 "$MUSTER" run -cfg "$ext" dist.ddp -j 2x1 --script "$RING" 2>"$T_DIR/ext.err")
t_expect_eq "rdzv=HOST:PORT without the token: the job fails" "$?" 1
t_expect_match "... its agents were refused" "$("$MUSTER" log "$h" 2>&1)" "401|unauthorized|credentials"

# The opt-out: rdzv_auth=none runs the job's musterd open, as before.
h=$("$MUSTER" run -cfg rdzv_auth=none dist.ddp -j 2x1 --script "$RING" 2>/dev/null)
t_expect_eq "rdzv_auth=none: the job succeeds" "$?" 0
t_expect_eq "rdzv_auth=none: no token file" "$(ls "$T_DIR/logs/${h##*/}")" \
  "$(printf 'app.json\nring_allreduce\nstate.json\nsupervisor.log')"
t_done
