#!/usr/bin/env bash
# Quotas: each one hit, answered with its message (etcd's error JSON under /v2, the /v1 shape
# under /v1) and counted in /metrics; and released again (a finished watch frees its slot, a
# deleted key makes room). Clients use different loopback source addresses (127.0.0.x) for
# the per-client quota.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/security_lib.bash"

sec_start_musterd --quota-keys 12 --quota-value-bytes 100 --quota-watchers 3 \
  --quota-watchers-per-client 2 --quota-run-watchers 1 --quota-run-keys 2 --quota-run-bytes 50 \
  || { t_fail "musterd with quotas did not start"; t_done; }
URL=$MUSTERD_URL
req() { curl -s --max-time 10 -o "$T_DIR/body" -w '%{http_code}' "$@"; echo " $(cat "$T_DIR/body")"; }
v100=$(printf 'x%.0s' $(seq 100))
v101=${v100}y

# value size
out=$(req -X PUT "$URL/v2/keys/v/ok" -d "value=$v100")
t_expect_match "a 100-byte value fits the 100-byte quota" "$out" '^201 '
out=$(req -X PUT "$URL/v2/keys/v/big" -d "value=$v101")
t_expect_match "a 101-byte v2 value: 413, etcd error 600 naming --quota-value-bytes" "$out" \
  '^413 \{"errorCode":600,"message":"Value over quota","cause":"the value is 101 bytes, over this server.s 100-byte quota \(--quota-value-bytes\)","index":[0-9]+\}'
out=$(req -X PUT "$URL/v1/runs/r1/kv/k" --data-binary "$v101")
t_expect_match "a 101-byte /v1 KV value: 413 too_large" "$out" \
  '^413 \{"error":"too_large","message":"the value is 101 bytes.*--quota-value-bytes'

# key count: root + /v + /v/ok = 3 nodes so far; fill up to 12
for i in $(seq 1 20); do
  code=$(curl -s --max-time 10 -o "$T_DIR/body" -w '%{http_code}' -X PUT "$URL/v2/keys/k$i" -d value=1)
  [ "$code" = 201 ] || break
done
out="$code $(cat "$T_DIR/body")"
t_expect_eq "keys are refused once the store holds 12 nodes (at k10)" "$i" 10
t_expect_match "  ... with 429 and etcd error 601 naming --quota-keys" "$out" \
  '^429 \{"errorCode":601,"message":"Quota exceeded","cause":"the store holds 12 keys.*--quota-keys'
out=$(req -X PUT "$URL/v2/keys/k1" -d value=2)
t_expect_match "overwriting an existing key is still allowed" "$out" '^200 '
out=$(req -X POST "$URL/v2/keys/k1" -d value=2)
t_expect_match "an in-order create (POST) is refused" "$out" '^429 '
req -X DELETE "$URL/v2/keys/k2" >/dev/null
out=$(req -X PUT "$URL/v2/keys/k10" -d value=1)
t_expect_match "after a delete there is room again" "$out" '^201 '

# The long polls open (watches and /v1 joins), as /metrics counts them; the checks below wait
# for the count instead of hoping a background request has arrived.
polls() { curl -s --max-time 10 "$URL/metrics" | sed -n 's/^musterd_quota_long_polls_open //p'; }
polls_are() { [ "$(polls)" = "$1" ]; }
wait_polls() { t_until 20 polls_are "$1" || t_fail "long polls open: $(polls), want $1"; }

# per-run long polls: a join waiting for a second node holds run r2's only slot
curl -s --max-time 20 -X POST "$URL/v1/runs/r2/join" -H 'Content-Type: application/json' \
  -d '{"node_id":"a","addr":"127.0.0.1","local_world_size":1,"master_port":1,"min_nodes":2,"max_nodes":2,"join_timeout_ms":15000}' \
  >"$T_DIR/join.out" 2>&1 &
jpid=$!
wait_polls 1
out=$(req --interface 127.0.0.5 -X POST "$URL/v1/runs/r2/join" -H 'Content-Type: application/json' \
  -d '{"node_id":"b","addr":"127.0.0.1","local_world_size":1,"master_port":1,"min_nodes":2,"max_nodes":2}')
t_expect_match "a second long poll on the run: 429 too_many naming --quota-run-watchers" "$out" \
  '^429 \{"error":"too_many","message":"run .r2. has 1 long polls open.*--quota-run-watchers'
kill "$jpid" 2>/dev/null; wait "$jpid" 2>/dev/null
wait_polls 0

# per-run KV keys and bytes, on a run a node joined
out=$(req -X POST "$URL/v1/runs/r3/join" -H 'Content-Type: application/json' \
  -d '{"node_id":"a","addr":"127.0.0.1","local_world_size":1,"master_port":1,"min_nodes":1,"max_nodes":1,"last_call_ms":0}')
t_expect_match "a one-node run forms" "$out" '^200 '
t_expect_match "run KV key 1 of 2" "$(req -X PUT "$URL/v1/runs/r3/kv/a" --data-binary 0123456789)" '^200 '
t_expect_match "run KV key 2 of 2" "$(req -X PUT "$URL/v1/runs/r3/kv/b" --data-binary 0123456789)" '^200 '
out=$(req -X PUT "$URL/v1/runs/r3/kv/c" --data-binary x)
t_expect_match "a third key in the run: 429 too_many naming --quota-run-keys" "$out" \
  '^429 \{"error":"too_many","message":"run .r3. holds 2 keys, the per-run quota \(--quota-run-keys\)'
out=$(req -X PUT "$URL/v1/runs/r3/kv/a" --data-binary "$(printf 'y%.0s' $(seq 45))")
t_expect_match "values over 50 bytes in the run: 413 too_large naming --quota-run-bytes" "$out" \
  '^413 \{"error":"too_large","message":"run .r3. would hold 55 bytes.*--quota-run-bytes'
t_expect_match "overwriting within the quota is fine" \
  "$(req -X PUT "$URL/v1/runs/r3/kv/a" --data-binary "$(printf 'z%.0s' $(seq 40))")" '^200 '

# per-client and server-wide watchers (make room for the keys that will answer them)
for k in k3 k4 k5 k6; do req -X DELETE "$URL/v2/keys/$k" >/dev/null; done
curl -s --max-time 20 "$URL/v2/keys/w1?wait=true" >"$T_DIR/w1.out" 2>&1 &
w1=$!
curl -s --max-time 20 "$URL/v2/keys/w2?wait=true" >"$T_DIR/w2.out" 2>&1 &
w2=$!
wait_polls 2
out=$(req "$URL/v2/keys/w3?wait=true")
t_expect_match "a third watch from one address: 429, error 601 naming --quota-watchers-per-client" \
  "$out" '^429 \{"errorCode":601,.*client 127.0.0.1 has 2 watches.*--quota-watchers-per-client'
curl -s --max-time 20 --interface 127.0.0.2 "$URL/v2/keys/w4?wait=true" >"$T_DIR/w4.out" 2>&1 &
w4=$!
wait_polls 3
out=$(req --interface 127.0.0.3 "$URL/v2/keys/w5?wait=true")
t_expect_match "a fourth watch server-wide: 429 naming --quota-watchers" "$out" \
  '^429 \{"errorCode":601,.*3 watches and long polls are open.*--quota-watchers\)'
m=$(curl -s --max-time 10 "$URL/metrics")
t_expect_match "/metrics shows 3 long polls open" "$m" 'musterd_quota_long_polls_open 3'
for k in w1 w2 w4; do req -X PUT "$URL/v2/keys/$k" -d value=done >/dev/null; done
wait "$w1" "$w2" "$w4"
t_expect_match "the admitted watches were answered" "$(cat "$T_DIR/w1.out" "$T_DIR/w2.out" "$T_DIR/w4.out" | tr '\n' ' ')" \
  '"value":"done".*"value":"done".*"value":"done"'
wait_polls 0
out=$(req "$URL/v2/keys/w1?wait=true&waitIndex=1")
t_expect_match "finished watches free their slots" "$out" '^200 '

m=$(curl -s --max-time 10 "$URL/metrics")
for q in value_bytes:2 keys:2 run_watchers:1 watchers_per_client:1 watchers:1 run_keys:1 run_bytes:1; do
  t_expect_match "/metrics counts the ${q%%:*} refusals (${q##*:})" "$m" \
    "musterd_quota_refused_total\\{quota=\"${q%%:*}\"\\} ${q##*:}\$"
done
t_expect_match "/metrics: no long poll left open" "$m" 'musterd_quota_long_polls_open 0'
sec_stop_musterd

out=$("$MUSTERD" --listen 127.0.0.1:0 --quota-keys -1 2>&1); rc=$?
t_expect_eq "a negative quota: exit 2" "$rc" 2
t_expect_match "  ... naming the option" "$out" 'quota-keys'
t_done
