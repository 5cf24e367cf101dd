#!/usr/bin/env bash
# Where every lost second went (issue 31 item 6; docs/cli.md "Goodput"), on both rendezvous
# backends: a musterd the test starts and a 3-member etcd 3.4 cluster, each as the job's
# rendezvous (-cfg rdzv=...). A local dist.ddp job, 1 node x 2 real PyTorch gloo workers
# (tests/integration/progress_worker.py), --hang_timeout auto, --max_retries 1: rank 0 writes
# `step N/40` to its heartbeat file and `checkpoint N` every 10 steps, and raises at step 25 of
# the first attempt; the second attempt does its 40 steps. Then:
#   - `muster status`'s goodput table: productive plus every category adds up to the wall time
#     (to the table's rounding), the restart's downtime and the steps lost since checkpoint 20
#     are not zero, the steps line says 40 of 40, steps per second and the 4 lost steps (3 when
#     the agent shared step 23 last), and the --hang-timeout auto value in use is shown;
#   - `muster status --json`'s goodput object: wall_s = productive_s + the badput_s (to 1 ms),
#     the same categories, lost_steps;
#   - musterd's /metrics (musterd only): muster_goodput_wall_seconds, _productive_seconds and
#     _badput_seconds{category} for every category of the job's run, adding up to its wall;
#   - musterd's status page (musterd only; headless chromium): the run's goodput timeline, its
#     restart downtime in the legend and a bar for the steps lost since the checkpoint.
#   BACKENDS="muster etcd-v3" (default both)
. "$(dirname "$0")/agent_common.bash"
. "$(dirname "$0")/etcd3_cluster.bash"
t_need_py torch.distributed python3-torch
t_need_cmd etcd etcd-server
export GLOO_SOCKET_IFNAME=lo
W=$MU_SOURCE_DIR/tests/integration/progress_worker.py
t_torch_lock

# the table's rows (productive and the 9 categories) add up to its wall time, to 10 x 0.005 s
table_sum_ok() {
  "$PY" -c '
import re, sys
t = sys.stdin.read()
wall = float(re.search(r"Goodput: [0-9.]+% of ([0-9.]+)s wall", t).group(1))
rows = re.findall(r"^      ([a-z_]+) +([0-9.]+)s +[0-9.]+%", t, re.M)
names = [n for n, _ in rows]
want = ["productive", "scheduler_wait", "startup", "rendezvous", "program_startup",
        "hang_detection", "infrastructure_recovery", "wasted_progress", "unhealthy_wait", "other"]
s = sum(float(v) for _, v in rows)
print("yes" if names == want and abs(s - wall) <= 0.051 else "no: %s sum %.3f wall %.3f" % (names, s, wall))
'
}
row() { sed -n "s/^      $1 *\([0-9.]*\)s .*/\1/p" <<<"$2"; }

case_job() {
  local cfg=(-cfg "rdzv=$EP_RDZV") h st js
  h=$(cd "$T_DIR" && "$MUSTER" run "${cfg[@]}" dist.ddp -j 1x2 --max_retries 1 --hang_timeout auto \
    --hang_initial_timeout 120 --python "$PY" --script "$W" -- --steps 40 --step-ms 150 \
    --heartbeat --total --checkpoint-every 10 --fail-at 25 2>"$T_DIR/$B-run.err")
  t_expect_eq "$B: the job recovered from the failure at step 25" "$?" 0
  st=$("$MUSTER" status "$h" 2>&1)
  echo "$st" | sed 's/^/# /'
  t_expect_eq "$B status: productive plus every category adds up to the wall time" \
    "$(table_sum_ok <<<"$st")" yes
  t_expect_eq "$B status: the restart's downtime is counted" \
    "$(awk -v v="$(row infrastructure_recovery "$st")" 'BEGIN {print (v > 0) ? "yes" : "no"}')" yes
  t_expect_eq "$B status: the steps since checkpoint 20 are lost time" \
    "$(awk -v v="$(row wasted_progress "$st")" 'BEGIN {print (v > 0 && v < 10) ? "yes" : "no"}')" yes
  t_expect_match "$B status: steps of the total, steps per second, the lost steps" "$st" \
    "Steps: 40 of 40, [0-9.]+ steps/s; [34] lost since the last checkpoint"
  t_expect_match "$B status: the --hang-timeout auto value in use" "$st" \
    "Hang Timeout: [0-9]+\.[0-9]+s in use \(--hang-timeout auto, kept by the rendezvous\)"
  js=$("$MUSTER" status --json "$h" 2>&1)
  t_expect_eq "$B status --json: wall_s = productive_s + the badput_s, by the same categories" \
    "$("$PY" -c '
import json, sys
g = json.loads(sys.argv[1])["goodput"]
b = g["badput_s"]
cats = ["scheduler_wait", "startup", "rendezvous", "program_startup", "hang_detection",
        "infrastructure_recovery", "wasted_progress", "unhealthy_wait", "other"]
ok = sorted(b) == sorted(cats) and abs(g["productive_s"] + sum(b.values()) - g["wall_s"]) < 0.002
ok = ok and g["wall_s"] > 5 and b["infrastructure_recovery"] > 0 and b["wasted_progress"] > 0
ok = ok and g["lost_steps"] in (3, 4) and g["step"] == 40 and g["total_steps"] == 40
print("yes" if ok else "no: %s" % g)' "$js")" yes
  [ "$B" = muster ] || return 0
  local m run
  run=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["rdzv_run"]["run_id"])' "$js")
  m=$(curl -s "$MUSTERD_URL/metrics")
  t_expect_eq "$B /metrics: the run's wall, productive and 9 badput series, adding up" \
    "$("$PY" -c '
import re, sys
m, run = sys.argv[1], sys.argv[2]
def val(name, extra=""):
    x = re.search(r"^%s\{run=\"%s\"%s\} ([0-9.]+)$" % (name, re.escape(run), extra), m, re.M)
    return float(x.group(1)) if x else None
wall, prod = val("muster_goodput_wall_seconds"), val("muster_goodput_productive_seconds")
bad = re.findall(r"^muster_goodput_badput_seconds\{run=\"%s\",category=\"([a-z_]+)\"\} ([0-9.]+)$"
                 % re.escape(run), m, re.M)
ok = wall and prod is not None and len(bad) == 9
ok = ok and abs(prod + sum(float(v) for _, v in bad) - wall) < 0.011
ok = ok and "# TYPE muster_goodput_badput_seconds gauge" in m
print("yes" if ok else "no: wall %s productive %s badput %s" % (wall, prod, bad))' "$m" "$run")" yes
  # the status page (musterd's own, in a real browser) draws the run's goodput timeline
  command -v chromium >/dev/null || { t_fail "no chromium for the status page (apt-get install chromium)"; return; }
  mkdir -p "$T_DIR/shots"
  "$PY" "$MU_SOURCE_DIR/tests/integration/ui_browser.py" --text "$MUSTERD_URL/" "$run" \
    '.goodput .gp-cat[data-category="infrastructure_recovery"]' "restart downtime" \
    "$B status page: the run's goodput timeline, with its restart downtime" "$T_DIR/shots" \
    >"$T_DIR/browser.out" 2>&1
  grep -q '^ok - ' "$T_DIR/browser.out" && t_ok "$(sed -n 's/^ok - //p' "$T_DIR/browser.out")" ||
    t_fail "$B status page: no goodput timeline: $(head -c 600 "$T_DIR/browser.out")"
  "$PY" "$MU_SOURCE_DIR/tests/integration/ui_browser.py" --text "$MUSTERD_URL/" "$run" \
    '.goodput .gp-bar .gp-seg[data-category="wasted_progress"]' "" \
    "$B status page: the timeline has a bar for the steps lost since the checkpoint" \
    "$T_DIR/shots" >"$T_DIR/browser2.out" 2>&1
  grep -q '^ok - ' "$T_DIR/browser2.out" && t_ok "$(sed -n 's/^ok - //p' "$T_DIR/browser2.out")" ||
    t_fail "$B status page: no wasted_progress bar: $(head -c 600 "$T_DIR/browser2.out")"
}

t_local_jobs
for B in ${BACKENDS:-muster etcd-v3}; do
  case $B in
  muster)
    t_start_musterd || { t_fail "musterd did not start"; continue; }
    EP_RDZV=127.0.0.1:$MUSTERD_PORT
    ;;
  etcd-v3)
    etcd3_start || { t_fail "the etcd cluster did not start"; continue; }
    EP_RDZV="etcd-v3://127.0.0.1:${EC_PORT[0]},127.0.0.1:${EC_PORT[1]},127.0.0.1:${EC_PORT[2]}"
    ;;
  esac
  echo "# backend $B at $EP_RDZV"
  case_job
  [ "$B" = muster ] && t_stop_musterd_checked
done
etcd3_stop
t_done
