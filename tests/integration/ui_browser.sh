#!/usr/bin/env bash
# musterd's status page in a real browser (Debian's headless chromium, driven through its
# DevTools protocol by ui_browser.py): musterd and a 2-node x 2-worker job; the page shows the
# run, both members and the round, and a torchrun run's keys on the TCPStore listener; one node's worker is killed and the page shows the round
# breaking and the next round without a reload. Then: the page is served from the binary with
# no external script or font; with 200 runs and 60 events it asks for what the events name (tens
# of requests, not thousands); a page whose name was rebound to musterd's address (DNS rebinding)
# reads nothing; and it needs credentials when musterd requires them.
. "$(dirname "$0")/agent_common.bash"
t_need_cmd chromium chromium
MU_C10D_CLIENT=${MU_C10D_CLIENT:-$MU_BUILD_DIR/tests/c10d_client}
t_need_built "$MU_C10D_CLIENT"
t_start_musterd --c10d-listen 127.0.0.1:0 || t_done
t_c10d_port || { t_fail "no c10d start line"; t_done; }
# a torchrun run's keys on the TCPStore listener: the page shows them by run
printf 'set /torch.rendezvous.job-c10d state\nset /torch.rendezvous.job-c10d.2/MASTER_ADDR h\n' |
  "$MU_C10D_CLIENT" --legacy 127.0.0.1 "$C10D_PORT"
EP=127.0.0.1:$MUSTERD_PORT
marker=$((RANDOM + 300000))
for n in a b; do
  agent_start "agent_$n" --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id job-ui \
    --max-restarts 3 --stop-grace 1 -- sleep "$marker"
done
mkdir -p "$T_DIR/shots"
# browser ARGS...: runs ui_browser.py; its ok / not ok lines count as this test's.
browser() {
  "$PY" "$MU_SOURCE_DIR/tests/integration/ui_browser.py" "$@" >"$T_DIR/browser.out" 2>&1
  local rc=$?
  cat "$T_DIR/browser.out"
  T_PASSES=$((T_PASSES + $(grep -c '^ok - ' "$T_DIR/browser.out")))
  T_FAILS=$((T_FAILS + $(grep -c '^not ok - ' "$T_DIR/browser.out")))
  [ "$rc" = 0 ] || [ "$(grep -c '^not ok - ' "$T_DIR/browser.out")" -gt 0 ] ||
    t_fail "the browser driver failed (exit $rc)"
}
browser "$MUSTERD_URL/" job-ui "$marker" "$T_DIR/shots"
for f in ui-1280x800.png ui-phone.png; do
  [ -s "$T_DIR/shots/$f" ] && t_ok "screenshot $f" || t_fail "no screenshot $f"
done
[ -n "${MU_UI_SHOTS:-}" ] && cp "$T_DIR/shots/"*.png "$MU_UI_SHOTS/"

page=$(curl -s "$MUSTERD_URL/ui")
t_expect_match "/ui serves the page" "$page" '<title>musterd</title>'
if printf '%s' "$page" | grep -Eqi '<script[^>]+src=|<link[^>]+href=|@import|url\(http|//fonts\.'; then
  t_fail "the page loads nothing external"
else
  t_ok "the page loads nothing external"
fi
t_stop_musterd_checked

# 200 runs and 60 events: the page fetches what the events name, not every run each time.
t_start_musterd || t_done
browser --many "$MUSTERD_URL/" "$T_DIR/shots"
t_stop_musterd_checked

# DNS rebinding (issue 24, finding 3): a page whose name was rebound to musterd's address reads
# nothing, though Chromium sends its same-origin GETs with neither Origin nor Sec-Fetch-*.
t_start_musterd || t_done
secret="rebind-secret-$RANDOM"
curl -s -o /dev/null -X PUT "$MUSTERD_URL/v2/keys/team/key" -d "value=$secret"
browser --rebind "$MUSTERD_URL" "$secret" "$T_DIR/shots"
t_stop_musterd_checked

# With tokens on, the page needs them too.
echo "s3cret-token" >"$T_DIR/tokens"

t_start_musterd --token-file "$T_DIR/tokens" || t_done
t_expect_eq "with tokens: / without the token is 401" \
  "$(curl -s -o /dev/null -w '%{http_code}' "$MUSTERD_URL/")" 401
t_expect_eq "with tokens: / with the token is 200" \
  "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret-token' "$MUSTERD_URL/")" 200
t_stop_musterd_checked
t_done
