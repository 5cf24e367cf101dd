#!/usr/bin/env bash
# torch 2.6's and 2.14's own TCPStore client (Debian trixie's and sid's python3-torch, in the
# roots of scripts/torch-roots.sh) against musterd's --c10d-listen and against torch's own
# server, call by call (c10d_torch2_diff.py): the two transcripts must be the same line for
# line, except the lines starting "server:", where docs/c10d.md says how the servers differ:
#   - a compare_set that creates a key wakes its waiters on musterd, not on torch's classic
#     server (the libuv one, which Debian's torch lacks, wakes them as musterd does)
# Also: /metrics counts each 2.14 query by name and no connection closed for unknown_query.
# The queue queries (2.8+) are refused by a server without libuv: c10d_store.sh tests them with
# the C client against docs/c10d.md.
. "$(dirname "$0")/../lib.sh"

t_need_built "$MUSTERD"
# no t_torch_lock: at most two torch processes at a time (a server and a client), lighter than
# the other tests that run beside it
for s in trixie sid; do t_torch_root "$s"; done
DIFF_PY=$MU_SOURCE_DIR/tests/integration/c10d_torch2_diff.py

# torch_port SUITE: starts torch's own server in SUITE's root; sets TPORT.
torch_port() {
  t_spawn "torch-$1" "$MU_SOURCE_DIR/scripts/torch-roots.sh" run -b "$T_DIR" -b "$MU_SOURCE_DIR" \
    "$1" python3 "$DIFF_PY" host
  TPORT=""
  t_until 120 grep -q '^port ' "$T_DIR/torch-$1.log"
  TPORT=$(sed -n 's/^port //p' "$T_DIR/torch-$1.log" | head -1)
}

for s in trixie sid; do
  # a fresh musterd per torch: both transcripts start from an empty store
  t_start_musterd --c10d-listen 127.0.0.1:0 ||
    { t_fail "musterd did not start: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
  t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
  torch_port "$s"
  if [ -z "$TPORT" ]; then
    t_fail "torch's own server did not start in the $s root: $(tail -5 "$T_DIR/torch-$s.log")"
    continue
  fi
  ver=$(cat "$("$MU_SOURCE_DIR/scripts/torch-roots.sh" path "$s")/.muster-torch-version")
  timeout 180 "$MU_SOURCE_DIR/scripts/torch-roots.sh" run -b "$T_DIR" -b "$MU_SOURCE_DIR" "$s" \
    python3 "$DIFF_PY" calls "$TPORT" >"$T_DIR/$s-torch.out" 2>"$T_DIR/$s-torch.err"
  rc_t=$?
  timeout 180 "$MU_SOURCE_DIR/scripts/torch-roots.sh" run -b "$T_DIR" -b "$MU_SOURCE_DIR" "$s" \
    python3 "$DIFF_PY" calls "$C10D_PORT" >"$T_DIR/$s-musterd.out" 2>"$T_DIR/$s-musterd.err"
  rc_m=$?
  t_expect_eq "torch $ver: the script ran against torch's own server" "$rc_t" 0
  t_expect_eq "torch $ver: the script ran against musterd" "$rc_m" 0
  [ "$rc_t" = 0 ] || sed 's/^/#   torch: /' "$T_DIR/$s-torch.err" | tail -8
  [ "$rc_m" = 0 ] || sed 's/^/#   musterd: /' "$T_DIR/$s-musterd.err" | tail -8
  n=$(grep -vc '^server:' "$T_DIR/$s-torch.out")
  [ "$n" -ge 20 ] && t_ok "torch $ver: $n calls answered by torch's server" ||
    t_fail "torch $ver: only $n calls in torch's transcript: $(cat "$T_DIR/$s-torch.out")"
  d=""
  if [ "$rc_m" = 0 ] && [ "$rc_t" = 0 ] &&
    d=$(diff <(grep -v '^server:' "$T_DIR/$s-torch.out") <(grep -v '^server:' "$T_DIR/$s-musterd.out")); then
    t_ok "torch $ver: musterd answers every call as torch's own server does"
    t_compat "${ver%%+*}" "TCPStore client" c10d "every call, against torch's own server" pass
  else
    t_fail "torch $ver: musterd and torch's server differ (< torch, > musterd):"$'\n'"${d:-}"
    t_compat "${ver%%+*}" "TCPStore client" c10d "every call, against torch's own server" fail
  fi
  t_expect_eq "torch $ver: every public TCPStore method is known to the script" \
    "$(sed -n 's/^torch-methods-unknown: //p' "$T_DIR/$s-musterd.out")" "[]"
  t_expect_eq "torch $ver: torch's classic server does not wake a waiter on a creating compare_set" \
    "$(sed -n 's/^server: compare-set-create-wakes: //p' "$T_DIR/$s-torch.out")" "['error DistStoreError']"
  t_expect_eq "torch $ver: musterd wakes it (docs/c10d.md, Waking)" \
    "$(sed -n 's/^server: compare-set-create-wakes: //p' "$T_DIR/$s-musterd.out")" "['woken']"
  if grep -q 'unknown_query' "$T_DIR/musterd.log"; then
    t_fail "torch $ver: musterd closed a connection for an unknown query: $(grep unknown_query "$T_DIR/musterd.log" | head -3)"
  else
    t_ok "torch $ver: no query of this torch was unknown to musterd"
  fi
  if [ "$s" = sid ]; then
    t_expect_eq "torch $ver: a write to a barrier's key releases its waiters on torch's classic server" \
      "$(sed -n 's/^server: barrier-released-by-add: //p' "$T_DIR/$s-torch.out")" "'released'"
    t_expect_eq "torch $ver: on musterd only the last arrival does (docs/c10d.md, Barrier)" \
      "$(sed -n 's/^server: barrier-released-by-add: //p' "$T_DIR/$s-musterd.out")" "'error DistStoreError'"
    grep -q '^barrier-world-3-all-released: 2' "$T_DIR/$s-musterd.out" &&
      t_ok "torch $ver: a barrier of 3 released the 2 earlier arrivals on musterd" ||
      t_fail "torch $ver: barrier on musterd: $(grep barrier "$T_DIR/$s-musterd.out")"
    metrics=$(curl -s "$MUSTERD_URL/metrics")
    t_expect_match "torch $ver: /metrics counts the barrier queries" "$metrics" 'query="barrier"[^ ]* [1-9]'
  fi
  kill -- "-${T_PIDS[-1]}" "-$MUSTERD_PID" 2>/dev/null
done
t_done
