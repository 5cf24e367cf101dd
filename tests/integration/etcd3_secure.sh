#!/usr/bin/env bash
# muster agent on an etcd v3 member that speaks only TLS, asks every client for a certificate
# (--client-cert-auth) and has auth enabled (a user 'trainer' with read-write on /muster/):
# the agents and muster rdzv get the CA, the client certificate and the user/password from the
# same variables as against musterd (MUSTER_RDZV_CACERT, _CERT, _KEY) plus MUSTER_RDZV_USER and
# MUSTER_RDZV_PASSWORD (etcd's /v3/auth/authenticate).
#  1. 2 agents x 2 workers of the C ring all-reduce over https + user/password: every rank
#     verifies; muster rdzv --endpoint etcd-v3://https://... shows the run, closed, 2 members,
#     and --watch prints it again when one of its keys changes.
#  2. A wrong password, no user, a CA that did not sign etcd's certificate, no client
#     certificate, a client certificate with a CommonName (etcd 3.4's gateway refuses those):
#     the agent fails at once with exit 3 and a sentence that names the cause and the variable.
. "$(dirname "$0")/agent_common.bash"
t_need_cmd etcd etcd-server
t_need_cmd etcdctl etcd-client
t_need_cmd openssl openssl
t_need_cmd curl curl

PKI=$T_DIR/pki
mkdir -p "$PKI"
(
  set -e
  cd "$PKI"
  ca() { # name CN
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$2" \
      -keyout "$1.key" -out "$1.pem" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign"
  }
  leaf() { # name CN ext CA
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "${2:+/CN=$2}/O=muster" \
      -keyout "$1.key" -out "$1.csr"
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$4.pem" -CAkey "$4.key" -CAcreateserial -days 2 \
      -extfile "$1.ext" -out "$1.pem"
  }
  ca ca "muster test CA"
  ca rogue "rogue CA"
  # etcd's JSON gateway dials etcd's gRPC with the server certificate: it is a client too
  leaf server 127.0.0.1 "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth" ca
  # etcd 3.4's gateway refuses a client certificate with a CommonName (it could not use it)
  leaf client "" "extendedKeyUsage=clientAuth" ca
  leaf named trainer "extendedKeyUsage=clientAuth" ca
) >"$T_DIR/openssl.log" 2>&1 || { cat "$T_DIR/openssl.log"; t_fail "openssl made the certificates"; t_done; }

PORT=$(t_free_port)
PEER=$(t_free_port)
while [ "$PEER" = "$PORT" ]; do PEER=$(t_free_port); done
URL=https://127.0.0.1:$PORT
t_spawn etcd etcd --name s0 --data-dir "$T_DIR/etcd" \
  --listen-client-urls "$URL" --advertise-client-urls "$URL" \
  --listen-peer-urls "http://127.0.0.1:$PEER" --initial-advertise-peer-urls "http://127.0.0.1:$PEER" \
  --initial-cluster "s0=http://127.0.0.1:$PEER" --initial-cluster-state new \
  --cert-file "$PKI/server.pem" --key-file "$PKI/server.key" \
  --client-cert-auth --trusted-ca-file "$PKI/ca.pem"
ETCD_PID=$T_LAST_PID
TLS=(--cacert "$PKI/ca.pem" --cert "$PKI/client.pem" --key "$PKI/client.key")
healthy() { curl -s --max-time 1 "${TLS[@]}" "$URL/health" | grep -q '"true"'; }
t_until 30 healthy || { t_fail "etcd with TLS started"; t_done; }
ctl() { ETCDCTL_API=3 etcdctl --endpoints "$URL" "${TLS[@]}" "$@" >>"$T_DIR/etcdctl.log" 2>&1; }
ctl user add root --new-user-password=rootpw --interactive=false &&
  ctl user add trainer --new-user-password=s3cret --interactive=false &&
  ctl role add muster &&
  ctl role grant-permission muster --prefix=true readwrite /muster/ &&
  ctl user grant-role trainer muster &&
  ctl auth enable ||
  { cat "$T_DIR/etcdctl.log"; t_fail "etcd auth set up"; t_done; }
t_ok "etcd 3.4 with TLS, client certificates and auth (user trainer)"

EP=etcd-v3://$URL
export MUSTER_RDZV_CACERT=$PKI/ca.pem MUSTER_RDZV_CERT=$PKI/client.pem MUSTER_RDZV_KEY=$PKI/client.key
export MUSTER_RDZV_USER=trainer MUSTER_RDZV_PASSWORD=s3cret

# --- 1. the job over https + user/password; muster rdzv reads it ------------------------------
for n in 0 1; do
  agent_start "a$n" --rdzv-backend etcd-v3 --rdzv-endpoint "$EP" --rdzv-conf lease_ttl=3 \
    --nnodes 2 --nproc-per-node 2 --rdzv-id sec -- "$RING" --count 1024 --iters 2
  eval "pid_$n=\$AGENT_PID"
done
for n in 0 1; do
  eval "agent_wait \$pid_$n 60"
  t_expect_eq "agent $n over https + auth exits 0" "$RC" 0
done
all=$(cat "$T_DIR/a0.log" "$T_DIR/a1.log")
t_expect_eq "4 ranks verified over https + auth" \
  "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4' <<<"$all")" 4

out=$("$MUSTER" rdzv --endpoint "$EP" sec 2>&1)
t_expect_match "muster rdzv --endpoint etcd-v3://https://... reads the run" "$out" \
  "^run sec: closed, round [0-9]+ active, 2 of 2:2 nodes, 0 waiting"
t_expect_eq "muster rdzv lists both members" "$(grep -cE '^  node rank [01]  ' <<<"$out")" 2
out=$("$MUSTER" rdzv --json "$EP" 2>&1)
t_expect_match "muster rdzv etcd-v3://... --json lists the runs" "$out" \
  '"run_id":"sec","backend":"etcd-v3","state":"closed","round":[0-9]+'
# --watch: printed again when a key of the run changes
t_spawn rdzv-watch "$MUSTER" rdzv --watch --json "$EP" sec
WATCH_PID=$T_LAST_PID
t_until 20 t_has_lines "$T_DIR/rdzv-watch.log" '"run_id":"sec"' 1 &&
  ctl --user trainer:s3cret put /muster/sec/kv/poke 1 &&
  t_until 20 t_has_lines "$T_DIR/rdzv-watch.log" '"run_id":"sec"' 2 &&
  t_ok "muster rdzv --watch on etcd prints again when the run's keys change" ||
  t_fail "muster rdzv --watch on etcd: $(cat "$T_DIR/rdzv-watch.log")"
kill -TERM -- "-$WATCH_PID" 2>/dev/null
t_wait_exit "$WATCH_PID" 10
t_expect_eq "... once per change (no busy loop)" "$(grep -c '"run_id":"sec"' "$T_DIR/rdzv-watch.log")" 2
out=$("$MUSTER" rdzv "$EP" nosuch 2>&1)
t_expect_eq "muster rdzv of an unknown run exits 1" "$?" 1
t_expect_match "... and says so" "$out" "has no run 'nosuch'"

# --- 2. the clear errors ----------------------------------------------------------------------
fails() { # name expected-regex env...: one agent that must fail at once
  local name=$1 re=$2
  shift 2
  local t0=$SECONDS
  env "$@" "$MUSTER" agent --rdzv-backend etcd-v3 --rdzv-endpoint "$EP" --nnodes 1 \
    --nproc-per-node 1 --rdzv-id "bad-$name" -- "$RING" >"$T_DIR/bad-$name.log" 2>&1
  local rc=$?
  t_expect_eq "$name: the agent exits 3 (rendezvous)" "$rc" 3
  t_expect_match "$name: the error says why" "$(cat "$T_DIR/bad-$name.log")" "$re"
  [ $((SECONDS - t0)) -le 8 ] && t_ok "$name: within 8 s" || t_fail "$name: took $((SECONDS - t0)) s"
}
fails password "refused the login of user 'trainer'.*authentication failed.*MUSTER_RDZV_PASSWORD" \
  MUSTER_RDZV_PASSWORD=wrong
fails nouser "has auth enabled: set MUSTER_RDZV_USER and MUSTER_RDZV_PASSWORD" MUSTER_RDZV_USER=
fails ca "cannot trust etcd .*MUSTER_RDZV_CACERT" MUSTER_RDZV_CACERT="$PKI/rogue.pem"
fails nocert "refused this client's certificate.*MUSTER_RDZV_CERT" MUSTER_RDZV_CERT= MUSTER_RDZV_KEY=
fails cn "certificate with a CommonName.*without CN" MUSTER_RDZV_CERT="$PKI/named.pem" \
  MUSTER_RDZV_KEY="$PKI/named.key"

# --- 3. etcd goes away under muster rdzv --watch: it says so and exits, not waits forever -------
t_spawn rdzv-gone "$MUSTER" rdzv --watch "$EP" sec
GONE_PID=$T_LAST_PID
t_until 20 t_has_lines "$T_DIR/rdzv-gone.log" '^run sec: ' 1 || t_fail "rdzv --watch: no first print"
kill -KILL "$ETCD_PID"
t_wait_exit "$GONE_PID" 20
t_expect_eq "etcd gone: muster rdzv --watch exits 1" "$T_RC" 1
t_expect_match "... naming the endpoint as given and the reason" "$(cat "$T_DIR/rdzv-gone.log")" \
  "watching etcd at 'etcd-v3://https://127\.0\.0\.1:$PORT': etcd at 127\.0\.0\.1:$PORT: .*(refused|closed)"

agent_dump_logs
t_done
