#!/usr/bin/env bash
# etcdctl (API v2, Debian etcd-client) against musterd: set, get, mk, mkdir, ls -r, rm, rmdir,
# update, watch, exec-watch; each checks etcdctl's output and exit code and the effect on the
# store (read back over raw HTTP).   TARGET=etcd runs the same checks against a real etcd.
. "$(dirname "$0")/../lib.sh"

t_need_built "$MUSTERD"
t_need_cmd etcdctl etcd-client
export ETCDCTL_API=2

t_start_target

# (background watches call `timeout 120 etcdctl`, a safety net only, directly so that $! is a PID that kill stops)
ctl() { timeout 60 etcdctl --endpoints "$URL" "$@"; }
# run NAME WANT_RC WANT_OUTPUT ARGS...: stdout+stderr, "[index]" numbers blanked.
run() {
  local name=$1 want_rc=$2 want_out=$3 out rc; shift 3
  out=$(ctl "$@" 2>&1); rc=$?
  out=$(printf '%s' "$out" | sed -E 's/\[[0-9]+\]$/[N]/')
  t_expect_eq "$name: exit code" "$rc" "$want_rc"
  t_expect_eq "$name: output" "$out" "$want_out"
}
# A node field read back over HTTP (python json), or the errorCode if the read failed.
field() { # path field
  curl -s "$URL/v2/keys$1" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
n = d.get("node")
if n is None:
    print("error %s" % d.get("errorCode"))
else:
    v = n.get(sys.argv[1])
    print(json.dumps(v) if not isinstance(v, str) else v)' "$2"
}

# set / get
run "set" 0 "hello" set /ctl/a hello
t_expect_eq "set: stored value" "$(field /ctl/a value)" "hello"
run "get" 0 "hello" get /ctl/a
run "get missing" 4 "Error:  100: Key not found (/ctl/nope) [N]" get /ctl/nope
run "set with spaces" 0 'a value with spaces & = +' set /ctl/sp 'a value with spaces & = +'
t_expect_eq "set with spaces: stored" "$(field /ctl/sp value)" 'a value with spaces & = +'
# ttl_within NAME KEY T0: the node's ttl is what a 100 s TTL set at $SECONDS = T0 has left now
# (a loaded machine can take seconds between the set and the read: count them, do not hope)
ttl_within() {
  local got left
  got=$(field "$2" ttl)
  left=$((100 - (SECONDS - $3)))
  if [[ $got =~ ^[0-9]+$ ]] && [ "$got" -le 100 ] && [ "$got" -ge $((left - 1)) ]; then
    t_ok "$1 ($got s left)"
  else
    t_fail "$1: got '$got', want $((left - 1))..100"
  fi
}
t0=$SECONDS
run "set --ttl" 0 "tv" set --ttl 100 /ctl/t tv
ttl_within "set --ttl: ttl on the node" /ctl/t "$t0"
out=$(ctl -o json get /ctl/a 2>&1)
t_expect_match "get -o json" "$out" '"action":"get","node":\{"key":"/ctl/a","value":"hello"'
out=$(ctl -o extended get /ctl/a 2>&1)
t_expect_match "get -o extended" "$(printf '%s' "$out" | tr '\n' ' ')" \
  '^Key: /ctl/a Created-Index: [0-9]+ Modified-Index: [0-9]+ TTL: 0 Index: [0-9]+  hello$'
run "set --swap-with-value ok" 0 "hello2" set --swap-with-value hello /ctl/a hello2
run "set --swap-with-value fails" 4 "Error:  101: Compare failed ([nope != hello2]) [N]" \
  set --swap-with-value nope /ctl/a hello3
t_expect_eq "swap: stored value" "$(field /ctl/a value)" "hello2"

# mk
run "mk" 0 "world" mk /ctl/b world
run "mk existing" 4 "Error:  105: Key already exists (/ctl/b) [N]" mk /ctl/b again
t_expect_eq "mk existing: value kept" "$(field /ctl/b value)" "world"
run "mk --in-order" 0 "first" mk --in-order /ctl/q first
t_expect_match "mk --in-order: key" "$(curl -s "$URL/v2/keys/ctl/q" | "$PY" -c \
  'import json,sys; print(json.load(sys.stdin)["node"]["nodes"][0]["key"])')" '^/ctl/q/[0-9]{20}$'

# mkdir
run "mkdir" 0 "" mkdir /ctl/d
t_expect_eq "mkdir: is a dir" "$(field /ctl/d dir)" "true"
run "mkdir existing" 4 "Error:  105: Key already exists (/ctl/d) [N]" mkdir /ctl/d
run "set in dir" 0 "1" set /ctl/d/x 1
run "set deeper" 0 "2" set /ctl/d/e/y 2

# ls -r (etcd's listing order is not defined: compare sorted)
out=$(ctl ls -r /ctl 2>&1 | sort | tr '\n' ' ')
t_expect_eq "ls -r" "$out" "$(printf '%s\n' /ctl/a /ctl/b /ctl/d /ctl/d/e /ctl/d/e/y /ctl/d/x \
  /ctl/q "$(ctl ls /ctl/q 2>/dev/null)" /ctl/sp /ctl/t | sort | tr '\n' ' ')"
out=$(ctl ls -r -p /ctl/d 2>&1 | sort | tr '\n' ' ')
t_expect_eq "ls -r -p" "$out" "/ctl/d/e/ /ctl/d/e/y /ctl/d/x "
out=$(ctl ls /ctl/d 2>&1 | sort | tr '\n' ' ')
t_expect_eq "ls (not recursive)" "$out" "/ctl/d/e /ctl/d/x "
run "ls missing" 4 "Error:  100: Key not found (/ctl/none) [N]" ls /ctl/none
ctl set /ctl/d/_hidden h >/dev/null 2>&1
out=$(ctl ls /ctl/d 2>&1 | sort | tr '\n' ' ')
t_expect_eq "ls hides _ keys" "$out" "/ctl/d/e /ctl/d/x "
run "get _ key" 0 "h" get /ctl/d/_hidden

# update
run "update" 0 "bye" update /ctl/a bye
t_expect_eq "update: stored" "$(field /ctl/a value)" "bye"
run "update missing" 4 "Error:  100: Key not found (/ctl/zz) [N]" update /ctl/zz bye
t_expect_eq "update missing: not created" "$(field /ctl/zz value)" "error 100"
t0=$SECONDS
run "updatedir" 0 "" updatedir --ttl 100 /ctl/d
ttl_within "updatedir: dir ttl" /ctl/d "$t0"

# rm / rmdir
run "rm" 0 "PrevNode.Value: bye" rm /ctl/a
t_expect_eq "rm: gone" "$(field /ctl/a value)" "error 100"
run "rm missing" 4 "Error:  100: Key not found (/ctl/a) [N]" rm /ctl/a
run "rm --with-value wrong" 4 "Error:  101: Compare failed ([nope != world]) [N]" \
  rm --with-value nope /ctl/b
run "rm --with-value" 0 "" rm --with-value world /ctl/b
t_expect_eq "rm --with-value: gone" "$(field /ctl/b value)" "error 100"
run "rmdir non-empty" 4 "Error:  108: Directory not empty (/ctl/d) [N]" rmdir /ctl/d
run "rm a dir" 4 "Error:  102: Not a file (/ctl/d) [N]" rm /ctl/d
run "mkdir e2" 0 "" mkdir /ctl/e2
run "rmdir empty" 0 "" rmdir /ctl/e2
t_expect_eq "rmdir: gone" "$(field /ctl/e2 dir)" "error 100"
run "rm -r" 0 "" rm -r /ctl/d
t_expect_eq "rm -r: subtree gone" "$(field /ctl/d/e/y value)" "error 100"

# Waits until the server counts N watchers (/v2/stats/store), so that a write is not sent
# before etcdctl's watch is registered.
watchers() { curl -s "$URL/v2/stats/store" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["watchers"])'; }
watchers_are() { [ "$(watchers)" = "$1" ]; }
wait_watchers() { # n
  t_until 20 watchers_are "$1" || echo "# wait_watchers: still $(watchers) watchers, want $1"
}

# watch: blocks until the next change and prints it
w_out=$T_DIR/watch.out
timeout 120 etcdctl --endpoints "$URL" watch /ctl/w >"$w_out" 2>&1 & wpid=$!
wait_watchers 1
ctl set /ctl/w first >/dev/null
for _ in $(seq 50); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$wpid" 2>/dev/null; then kill "$wpid"; t_fail "watch: did not return after a set"; fi
wait "$wpid"; rc=$?
t_expect_eq "watch: exit code" "$rc" 0
t_expect_eq "watch: output" "$(cat "$w_out")" "first"
idx=$(curl -s "$URL/v2/keys/ctl/w" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["node"]["modifiedIndex"])')
ctl set /ctl/w second >/dev/null
ctl set /ctl/w third >/dev/null
run "watch --after-index (history)" 0 "second" watch --after-index "$idx" /ctl/w
wait_watchers 0
timeout 120 etcdctl --endpoints "$URL" watch -r /ctl >"$w_out" 2>&1 & wpid=$!
wait_watchers 1
ctl set /ctl/sub/deep v >/dev/null
for _ in $(seq 50); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.1; done
kill "$wpid" 2>/dev/null; wait "$wpid"
t_expect_eq "watch -r: child change" "$(cat "$w_out")" "[set] /ctl/sub/deep
v"
wait_watchers 0
# timeout: only a safety net past the waits below (3 × 20 s); the test stops it by its PID
timeout 120 etcdctl --endpoints "$URL" watch --forever /ctl/f >"$w_out" 2>&1 & wpid=$!
for v in 1 2 3; do
  wait_watchers 1
  ctl set /ctl/f "$v" >/dev/null
  t_until 20 t_has_lines "$w_out" "^$v\$" || echo "# watch --forever did not print $v"
done
kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null
t_expect_eq "watch --forever: every change" "$(cat "$w_out" | tr '\n' ' ')" "1 2 3 "

# exec-watch: runs the command for every change with ETCD_WATCH_* set
wait_watchers 0
x_out=$T_DIR/exec.out
setsid etcdctl --endpoints "$URL" exec-watch --recursive /ctl/x -- \
  sh -c 'echo "$ETCD_WATCH_ACTION $ETCD_WATCH_KEY $ETCD_WATCH_VALUE" >>"$0"' "$x_out" \
  >"$T_DIR/exec.log" 2>&1 & xpid=$!
T_PIDS+=("$xpid")
wait_watchers 1
# after each change, wait for its run of the command (a line in x_out) and the next watch
ctl set /ctl/x/one 1 >/dev/null; t_until 20 t_has_lines "$x_out" . 1; wait_watchers 1
ctl update /ctl/x/one 11 >/dev/null; t_until 20 t_has_lines "$x_out" . 2; wait_watchers 1
ctl rm /ctl/x/one >/dev/null; t_until 20 t_has_lines "$x_out" . 3
kill -TERM -- "-$xpid" 2>/dev/null; wait "$xpid" 2>/dev/null
t_expect_eq "exec-watch: one run per change" "$(cat "$x_out" 2>/dev/null | tr '\n' '|')" \
  "set /ctl/x/one 1|update /ctl/x/one 11|delete /ctl/x/one |"

# cluster-level commands etcdctl uses
out=$(ctl cluster-health 2>&1 | tail -1)
t_expect_eq "cluster-health" "$out" "cluster is healthy"
out=$(ctl member list 2>&1)
t_expect_match "member list" "$out" "clientURLs=$URL"

t_stop_target
t_done
