#!/usr/bin/env bash
# musterd with TLS (--tls-cert/--tls-key/--tls-client-ca), certificates made here with the
# openssl CLI: curl, etcdctl (API v2: --ca-file/--cert-file/--key-file) and python-etcd (the
# client torchrun uses) work with a client certificate from the CA; a client without a
# certificate, with one from another CA, or speaking plain HTTP gets no answer; watches and
# large values work over TLS; /v2/machines advertises https; /metrics counts the refusals.
# Then a second musterd with TLS but no client CA: server authentication only.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/security_lib.bash"

P=$T_DIR/pki
sec_make_pki "$P" || t_done
sec_start_musterd --tls-cert "$P/server.pem" --tls-key "$P/server.key" \
  --tls-client-ca "$P/ca.pem" || { t_fail "musterd with TLS did not start"; t_done; }
URL=$MUSTERD_URL
C=(curl -sS --max-time 10 --cacert "$P/ca.pem" --cert "$P/client.pem" --key "$P/client.key")

out=$("${C[@]}" -X PUT "$URL/v2/keys/sec/a" -d value=hello 2>&1)
t_expect_match "PUT over https with a client certificate" "$out" '"action":"set".*"value":"hello"'
out=$("${C[@]}" "$URL/v2/keys/sec/a" 2>&1)
t_expect_match "GET over https reads it back" "$out" '"value":"hello"'
out=$("${C[@]}" "$URL/v2/machines" 2>&1)
t_expect_eq "/v2/machines advertises the https URL" "$out" "$URL"

# refused clients: no HTTP answer at all, and nothing of the store leaks
out=$(curl -sS --max-time 10 --cacert "$P/ca.pem" "$URL/v2/keys/sec/a" 2>&1); rc=$?
t_expect_eq "a client without a certificate is refused (curl fails)" "$([ $rc -ne 0 ] && echo refused)" refused
t_expect_eq "  ... and reads nothing" "$(printf '%s' "$out" | grep -c hello)" 0
out=$(curl -sS --max-time 10 --cacert "$P/ca.pem" --cert "$P/rogue-client.pem" \
  --key "$P/rogue-client.key" "$URL/v2/keys/sec/a" 2>&1); rc=$?
t_expect_eq "a certificate from another CA is refused" "$([ $rc -ne 0 ] && echo refused)" refused
out=$(curl -sS --max-time 10 "http://127.0.0.1:$MUSTERD_PORT/v2/keys/sec/a" 2>&1); rc=$?
t_expect_eq "plain HTTP to the TLS port gets no HTTP answer" "$([ $rc -ne 0 ] && echo refused)" refused
t_expect_eq "  ... and reads nothing" "$(printf '%s' "$out" | grep -c hello)" 0
out=$(curl -sS --max-time 10 --cacert "$P/rogue-ca.pem" --cert "$P/client.pem" \
  --key "$P/client.key" "$URL/v2/keys/sec/a" 2>&1); rc=$?
t_expect_eq "a client that does not trust the server's CA stops" "$([ $rc -ne 0 ] && echo refused)" refused

# a long poll over TLS: the watch is answered by a later write
"${C[@]}" "$URL/v2/keys/sec/w?wait=true" >"$T_DIR/watch.out" 2>&1 &
wpid=$!
# the write must come after the watch is registered (/v2/stats/store counts watchers)
one_watcher() {
  [ "$("${C[@]}" "$URL/v2/stats/store" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["watchers"])')" = 1 ]
}
t_until 20 one_watcher || t_fail "the watch over TLS was not registered within 20 s"
"${C[@]}" -X PUT "$URL/v2/keys/sec/w" -d value=fired >/dev/null 2>&1
wait "$wpid"
t_expect_match "a watch over TLS is answered by the next write" "$(cat "$T_DIR/watch.out")" \
  '"action":"set".*"value":"fired"'

# a value over many TLS records, both ways
"$PY" -c 'print("v" * 700000, end="")' >"$T_DIR/big"
"${C[@]}" -X PUT "$URL/v2/keys/sec/big" --data-urlencode "value@$T_DIR/big" -o /dev/null 2>&1
len=$("${C[@]}" "$URL/v2/keys/sec/big" | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["node"]["value"]))')
t_expect_eq "a 700,000-byte value round-trips over TLS" "$len" 700000

# etcdctl (API v2 flags)
if command -v etcdctl >/dev/null; then
  export ETCDCTL_API=2
  out=$(timeout 10 etcdctl --endpoints "$URL" --ca-file "$P/ca.pem" --cert-file "$P/client.pem" \
    --key-file "$P/client.key" set /sec/ctl viactl 2>&1)
  t_expect_eq "etcdctl --ca-file --cert-file --key-file set" "$out" viactl
  out=$(timeout 10 etcdctl --endpoints "$URL" --ca-file "$P/ca.pem" --cert-file "$P/client.pem" \
    --key-file "$P/client.key" get /sec/ctl 2>&1)
  t_expect_eq "etcdctl get over TLS" "$out" viactl
  out=$(timeout 10 etcdctl --endpoints "$URL" --ca-file "$P/ca.pem" get /sec/ctl 2>&1); rc=$?
  t_expect_eq "etcdctl without a client certificate fails" "$([ $rc -ne 0 ] && echo failed)" failed
else
  t_skip_part "etcdctl (etcd-client) is not installed: its TLS checks did not run"
fi

# python-etcd, as torchrun's etcd backends create it
if "$PY" -c 'import etcd' 2>/dev/null; then
  out=$("$PY" - "$MUSTERD_PORT" "$P" <<'PY' 2>&1
import sys, etcd
port, d = int(sys.argv[1]), sys.argv[2]
c = etcd.Client(host="127.0.0.1", port=port, protocol="https",
                cert=(d + "/client.pem", d + "/client.key"), ca_cert=d + "/ca.pem")
c.write("/sec/py", "from-python")
print(c.read("/sec/py").value)
try:
    etcd.Client(host="127.0.0.1", port=port, protocol="https", ca_cert=d + "/ca.pem").read("/sec/py")
    print("no-cert read succeeded")
except Exception as e:
    print("no-cert refused")
PY
)
  t_expect_eq "python-etcd over https with a client certificate; refused without" "$out" \
    "$(printf 'from-python\nno-cert refused')"
else
  t_skip_part "python3-etcd is not installed: its TLS checks did not run"
fi

m=$("${C[@]}" "$URL/metrics")
fails=$(printf '%s\n' "$m" | sed -n 's/^musterd_tls_handshakes_total{result="failed"} \([0-9]*\)$/\1/p')
t_expect_match "/metrics counts the refused handshakes" "${fails:-0}" '^([4-9]|[1-9][0-9]+)$'
t_expect_match "/metrics counts the good ones" "$m" 'musterd_tls_handshakes_total\{result="ok"\} [1-9]'
sec_stop_musterd

# server authentication only (no --tls-client-ca): any client that trusts the CA gets in
sec_start_musterd --tls-cert "$P/server.pem" --tls-key "$P/server.key" \
  || { t_fail "musterd with TLS (no client CA) did not start"; t_done; }
out=$(curl -sS --max-time 10 --cacert "$P/ca.pem" -X PUT "$MUSTERD_URL/v2/keys/x" -d value=1 2>&1)
t_expect_match "TLS without a client CA: a client with no certificate is served" "$out" '"value":"1"'
out=$(curl -sS --max-time 10 --cacert "$P/ca.pem" "$MUSTERD_URL/v1/runs" 2>&1)
t_expect_match "  ... /v1 too" "$out" 'runs'
sec_stop_musterd

# bad options name the problem
out=$("$MUSTERD" --listen 127.0.0.1:0 --tls-cert "$P/server.pem" 2>&1); rc=$?
t_expect_eq "--tls-cert without --tls-key: usage error" "$rc" 2
t_expect_match "  ... naming --tls-key" "$out" 'tls-key'
out=$("$MUSTERD" --listen 127.0.0.1:0 --tls-cert "$P/server.pem" --tls-key "$P/rogue-ca.key" 2>&1); rc=$?
t_expect_eq "a key that does not match the certificate: exit 2" "$rc" 2
t_expect_match "  ... says so" "$out" 'does not belong'
out=$("$MUSTERD" --listen 127.0.0.1:0 --tls-cert "$T_DIR/none.pem" --tls-key "$P/server.key" 2>&1); rc=$?
t_expect_match "a missing certificate file is named" "$out" "none.pem"
t_done
