#!/usr/bin/env bash
# `muster log` on Kubernetes reads well, on both APIs (Volcano Job, JobSet), through the
# recording kubectl stand-in (tests/fixtures/bin/kubectl): replicas that print at the same time
# come out as whole lines, each prefixed "role/replica " as on local (torchx #983: kubectl's own
# --prefix mixes them); --previous, --since and -t (follow, waiting for a pod that has not
# started) reach kubectl as it spells them.
. "$(dirname "$0")/../lib.sh"
t_fake_kubectl
for api in volcano jobset; do
  [ $api = volcano ] && q=,queue=q || q=""
  h=$(MUSTER_APP_ID=logs-$api "$MUSTER" run -s kubernetes -cfg "api=$api$q" utils.echo \
    --image alpine --num_replicas 3 2>&1)
  t_expect_match "$api: submitted" "$h" "^kubernetes://muster/default:"

  # Three replicas, 300 lines each, every line written in two halves with a pause between.
  out=$(KUBECTL_LOG_SLOW=1 KUBECTL_LOG_LINES=300 "$MUSTER" log "$h" 2>&1)
  t_expect_eq "$api: every line of the three replicas" "$(wc -l <<<"$out")" 900
  bad=$(grep -cvE '^echo/([012]) log line [0-9]+ from logs-'"$api"'-echo-\1-0(-[0-9a-f]{5})?$' <<<"$out")
  t_expect_eq "$api: every line whole, prefixed with its own replica (none run together)" "$bad" 0
  for k in 0 1 2; do
    t_expect_eq "$api: replica $k's lines in their order" \
      "$(grep "^echo/$k " <<<"$out" | sed 's/.* log line \([0-9]*\) .*/\1/' | tr '\n' ' ')" \
      "$(seq -s ' ' 1 300) "
  done

  # --previous: the run before the container's restart; kubectl's refusal when there was none.
  : >calls
  out=$(KUBECTL_PODS=Restarted "$MUSTER" log --previous "$h/echo/1" 2>&1)
  t_expect_match "$api: --previous reads the previous run" "$out" "^echo/1 previous log line 1 from logs-$api-echo-1-0"
  t_expect_match "$api: --previous reaches kubectl" "$(grep ' logs ' calls)" " logs logs-$api-echo-1-0[-0-9a-f]* --previous$"
  out=$("$MUSTER" log --previous "$h/echo/1" 2>&1)
  t_expect_eq "$api: --previous without a restart: exit 1" "$?" 1
  t_expect_match "$api: --previous without a restart: kubectl's words" "$out" \
    'previous terminated container "echo(-1)?" in pod "logs-'"$api"'-echo-1-0[-0-9a-f]*" not found'
  out=$(KUBECTL_PODS=Restarted "$MUSTER" log --previous "$h" 2>&1)
  t_expect_eq "$api: --previous of every replica, prefixed" "$(grep -c '^echo/[012] previous log line' <<<"$out")" 6

  # --since: a duration or an RFC 3339 time, as kubectl spells them.
  : >calls
  "$MUSTER" log --since 5m "$h/echo/0" >/dev/null 2>&1
  t_expect_match "$api: --since 5m" "$(grep ' logs ' calls)" " logs logs-$api-echo-0-0[-0-9a-f]* --since=5m$"
  : >calls
  "$MUSTER" log --since 2026-11-30T02:00:00Z "$h/echo/0" >/dev/null 2>&1
  t_expect_match "$api: --since TIME" "$(grep ' logs ' calls)" " --since-time=2026-11-30T02:00:00Z$"
  out=$("$MUSTER" log --since yesterday "$h/echo/0" 2>&1)
  t_expect_eq "$api: --since yesterday: exit 2" "$?" 2
  t_expect_match "$api: --since yesterday: what to give" "$out" "give a duration \(90s, 5m, 1h30m\) or an RFC 3339 time"

  # -t follows a pod that has not started: it waits (kubectl alone fails at once), then reads.
  rm -f "$T_DIR/seq-$api.cur"
  printf '%s\n' "Pending" "Running" >"$T_DIR/seq-$api"
  : >calls
  out=$(KUBECTL_SEQUENCE=$T_DIR/seq-$api timeout 60 "$MUSTER" log -t "$h/echo/2" 2>&1)
  t_expect_eq "$api: -t waits for the pod to start, then follows it" "$out" \
    "$(printf 'echo/2 log line 1 from %s\necho/2 log line 2 from %s' "$(grep -o 'logs-[^ ]*' calls | tail -1)" "$(grep -o 'logs-[^ ]*' calls | tail -1)")"
  n=$(grep -c ' logs .* -f$' calls)
  [ "$n" -ge 2 ] && t_ok "$api: -t tried kubectl logs -f until the pod ran ($n calls)" ||
    t_fail "$api: -t tried kubectl logs -f once only"
  rm -f "$T_DIR/seq-$api.cur"
  printf '%s\n' "Pending" "Failed" >"$T_DIR/seq-$api"
  out=$(KUBECTL_SEQUENCE=$T_DIR/seq-$api timeout 60 "$MUSTER" log -t "$h/echo/2" 2>&1)
  t_expect_eq "$api: -t stops waiting when the job ends: exit 1" "$?" 1
  t_expect_match "$api: and says why" "$out" "is waiting to start"
done

# The test can fail: two readers writing half lines into one output at once do run together.
out=$( (KUBECTL_LOG_SLOW=1 KUBECTL_LOG_LINES=300 kubectl -n default logs logs-volcano-echo-0-0 &
        KUBECTL_LOG_SLOW=1 KUBECTL_LOG_LINES=300 kubectl -n default logs logs-volcano-echo-1-0; wait) |
  grep -cvE '^log line [0-9]+ from logs-volcano-echo-[01]-0$')
[ "$out" -gt 0 ] && t_ok "unprefixed concurrent readers mix their lines ($out broken lines)" ||
  t_fail "the stand-in's slow writes did not mix (the whole-line check proves nothing)"

# Schedulers without these: --previous is refused, --since said to be ignored.
out=$("$MUSTER" log --previous local://muster/nosuch/echo/0 2>&1)
t_expect_eq "local --previous: exit 2" "$?" 2
t_expect_match "local --previous: why" "$out" "--previous: the local scheduler keeps one log per replica"
t_done
