#!/usr/bin/env bash
# Bearer tokens (--token-file) and etcd v2 basic auth (--auth-users, --auth-user USER:PASSFILE):
# requests under /v1 and /v2 without valid credentials get 401 and nothing else (etcd's
# {"message":"Insufficient credentials"} under /v2), valid ones are served, python-etcd's
# username/password and etcdctl --username work, /version /healthz /metrics stay open, and
# no token or password ever shows in the log (even with --log-requests at debug level) or
# in /metrics.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/security_lib.bash"

TOKEN=tok-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
TOKEN2=second-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
PASS=pw-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
BOBPASS=bob-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '# musterd tokens\n%s\n\n%s\n' "$TOKEN" "$TOKEN2" >"$T_DIR/tokens"
printf 'root:%s\n' "$PASS" >"$T_DIR/users"
printf '%s\n' "$BOBPASS" >"$T_DIR/bob.pass"
chmod 600 "$T_DIR/tokens" "$T_DIR/users" "$T_DIR/bob.pass"

sec_start_musterd --token-file "$T_DIR/tokens" --auth-users "$T_DIR/users" \
  --auth-user "bob:$T_DIR/bob.pass" --log-requests --log-level debug \
  || { t_fail "musterd with auth did not start"; t_done; }
URL=$MUSTERD_URL

# status + body of a request: "CODE BODY"
req() { curl -s --max-time 10 -o "$T_DIR/body" -w '%{http_code}' "$@"; echo " $(cat "$T_DIR/body")"; }

out=$(req "$URL/v2/keys/a")
t_expect_eq "/v2 without credentials: 401, etcd's body" "$out" \
  '401 {"message":"Insufficient credentials"}'
out=$(req -X PUT "$URL/v2/keys/a" -d value=x)
t_expect_eq "a write without credentials: 401" "$out" '401 {"message":"Insufficient credentials"}'
out=$(req "$URL/v1/runs")
t_expect_match "/v1 without a token: 401 unauthorized" "$out" '^401 \{"error":"unauthorized","message":".*MUSTER_RDZV_TOKEN'
out=$(req -H "Authorization: Bearer wrong-token-123" "$URL/v1/runs")
t_expect_match "/v1 with a wrong token: 401" "$out" '^401 \{"error":"unauthorized"'
out=$(req -H "Authorization: Bearer $TOKEN" "$URL/v1/runs")
t_expect_match "/v1 with the token: 200" "$out" '^200 '
out=$(req -H "Authorization: Bearer $TOKEN2" -X PUT "$URL/v2/keys/a" -d value=tok)
t_expect_match "/v2 with the second token: 201" "$out" '^201 .*"value":"tok"'
out=$(req -u "root:$PASS" "$URL/v2/keys/a")
t_expect_match "/v2 with basic auth (users file): 200" "$out" '^200 .*"value":"tok"'
out=$(req -u "bob:$BOBPASS" "$URL/v2/keys/a")
t_expect_match "/v2 with basic auth (--auth-user USER:PASSFILE): 200" "$out" '^200 '
out=$(req -u "root:nope" "$URL/v2/keys/a")
t_expect_eq "/v2 with a wrong password: 401" "$out" '401 {"message":"Insufficient credentials"}'
out=$(req -u "eve:$PASS" "$URL/v2/keys/a")
t_expect_eq "/v2 with an unknown user: 401" "$out" '401 {"message":"Insufficient credentials"}'
out=$(req -X PUT "$URL/v2/keys/a" -d value=stranger)
out=$(req -u "root:$PASS" "$URL/v2/keys/a")
t_expect_match "a refused write changed nothing" "$out" '"value":"tok"'
out=$(req "$URL/v2/keys/a?wait=true")
t_expect_match "a watch without credentials is refused at once" "$out" '^401 '
# Every 401 names the schemes this musterd takes: Basic first (users are configured), so that a
# browser opening the status page asks for a user and password; Bearer (tokens are configured).
for p in / /ui /v1/runs /v2/keys/a; do
  hdrs=$(curl -s --max-time 10 -D - -o /dev/null "$URL$p" | tr -d '\r')
  t_expect_match "401 on $p says WWW-Authenticate: Basic" "$hdrs" \
    '^WWW-Authenticate: Basic realm="musterd", charset="UTF-8"$'
  t_expect_match "... and WWW-Authenticate: Bearer" "$hdrs" '^WWW-Authenticate: Bearer realm="musterd"$'
done
for p in /version /healthz /metrics; do
  out=$(req "$URL$p")
  t_expect_match "$p stays open" "$out" '^200 '
done

# python-etcd's username/password (torchrun's etcd client library)
if "$PY" -c 'import etcd' 2>/dev/null; then
  out=$("$PY" - "$MUSTERD_PORT" "$PASS" <<'PY' 2>&1
import sys, etcd
port, pw = int(sys.argv[1]), sys.argv[2]
c = etcd.Client(host="127.0.0.1", port=port, username="root", password=pw)
c.write("/py/k", "v1")
print(c.read("/py/k").value)
for user, p in (("root", "bad"), (None, None)):
    try:
        etcd.Client(host="127.0.0.1", port=port, username=user, password=p).read("/py/k")
        print("read without valid credentials succeeded")
    except etcd.EtcdInsufficientPermissions:
        print("refused")
    except Exception as e:
        print("other error: %r" % e)
PY
)
  t_expect_eq "python-etcd: username/password works, wrong or none raises EtcdInsufficientPermissions" \
    "$out" "$(printf 'v1\nrefused\nrefused')"
else
  t_skip_part "python3-etcd is not installed: its credential checks did not run"
fi
if command -v etcdctl >/dev/null; then
  out=$(ETCDCTL_API=2 timeout 10 etcdctl --endpoints "$URL" --username "root:$PASS" get /py/k 2>&1)
  t_expect_eq "etcdctl --username root:PASSWORD" "$out" v1
  out=$(ETCDCTL_API=2 timeout 10 etcdctl --endpoints "$URL" get /py/k 2>&1); rc=$?
  t_expect_eq "etcdctl without credentials fails" "$([ $rc -ne 0 ] && echo failed)" failed
else
  t_skip_part "etcdctl (etcd-client) is not installed: its credential checks did not run"
fi

# muster agent's client sends MUSTER_RDZV_TOKEN (when the C client supports it)
metrics=$(curl -s --max-time 10 "$URL/metrics")
t_expect_match "/metrics counts refusals" "$metrics" 'musterd_auth_requests_total\{verdict="missing"\} [1-9]'
t_expect_match "/metrics counts denials" "$metrics" 'musterd_auth_requests_total\{verdict="denied"\} [1-9]'
leak=0
for s in "$TOKEN" "$TOKEN2" "$PASS" "$BOBPASS" "$(printf 'root:%s' "$PASS" | base64)"; do
  printf '%s' "$metrics" | grep -qF -- "$s" && leak=1
done
t_expect_eq "no token or password in /metrics" "$leak" 0
sec_stop_musterd
t_expect_match "the log has the requests (--log-requests)" "$(cat "$T_DIR/musterd.log")" 'GET /v2/keys/a'
leak=0
for s in "$TOKEN" "$TOKEN2" "$PASS" "$BOBPASS" "$(printf 'root:%s' "$PASS" | base64)"; do
  grep -qF -- "$s" "$T_DIR/musterd.log" && { leak=1; echo "# secret found in the log: ${s:0:6}..."; }
done
t_expect_eq "no token or password in the log" "$leak" 0

# bad credential files name the problem
printf '\n# empty\n' >"$T_DIR/empty"
out=$("$MUSTERD" --listen 127.0.0.1:0 --token-file "$T_DIR/empty" 2>&1); rc=$?
t_expect_eq "an empty token file: exit 2" "$rc" 2
t_expect_match "  ... says it holds no token" "$out" 'holds no token'
out=$("$MUSTERD" --listen 127.0.0.1:0 --token-file "$T_DIR/missing" 2>&1); rc=$?
t_expect_match "a missing token file is named" "$out" "$T_DIR/missing"
out=$("$MUSTERD" --listen 127.0.0.1:0 --auth-user "bob" 2>&1); rc=$?
t_expect_eq "--auth-user without a password file: exit 2" "$rc" 2
t_expect_match "  ... explains USER:PASSFILE" "$out" 'USER:PASSFILE'
t_done
