#!/usr/bin/env bash
# Every path the local scheduler builds from a user's value stays inside its log directory
# (issue 24 finding 7): a role named ../../x writes nothing outside MUSTER_LOG_DIR, a handle
# with .. reads and stops nothing outside it, and a state.json whose role is ../.. (a job
# from before names were checked, or a file someone put there) is not followed out of it.
. "$(dirname "$0")/../lib.sh"
t_local_jobs
mkdir -p "$T_DIR/logs"
outside() { find "$T_DIR" -path "$T_DIR/logs" -prune -o -name 'escape*' -print; }

# 1. A role named ../../escape: refused before anything is written.
cat >"$T_DIR/esc.yaml" <<'EOF'
name: esc
description: a role whose name climbs out of the log directory
params: []
app: {name: esc, roles: [{name: ../../escape, entrypoint: echo, args: [hi]}]}
EOF
out=$("$MUSTER" run ./esc.yaml 2>&1)
t_expect_eq "role ../../escape: run exits 2" "$?" 2
t_expect_match "role ../../escape: the field is named" "$out" \
  "roles\[0\]\.name: '\.\./\.\./escape' is not a valid name"
t_expect_eq "nothing written outside MUSTER_LOG_DIR" "$(outside)" ""

# 2. Handles with ..: a fake job just outside the log dir (local://muster/.. names
# MUSTER_LOG_DIR/..) whose "supervisor" is our own sleep.
marker=$((RANDOM + 50000))
t_spawn victim sleep "$marker"
victim=$T_LAST_PID
mkdir -p "$T_DIR/r/0"
printf '{"app_id":"x","name":"x","state":"RUNNING","supervisor_pid":%d,"replicas":[{"role":"r","id":0,"state":"RUNNING","pid":%d}]}\n' \
  "$victim" "$victim" >"$T_DIR/state.json"
echo "outside log" >"$T_DIR/r/0/combined.log"
for h in local://muster/.. local://muster/../logs; do
  out=$("$MUSTER" status "$h" 2>&1)
  t_expect_eq "status $h: exit 3 (unknown job, as any)" "$?" 3
  t_expect_match "status $h: no such job" "$out" "no local job"
done
out=$("$MUSTER" log "local://muster/.." 2>&1)
t_expect_eq "log through ..: exit 1 (unknown job, as any)" "$?" 1
if grep -q "outside log" <<<"$out"; then t_fail "log through .. read a file outside"; else
  t_ok "log through .. read nothing outside"; fi
"$MUSTER" cancel local://muster/.. >"$T_DIR/cancel.out" 2>&1
t_expect_match "cancel through ..: fails" "$?" '^[13]$'
kill -0 "$victim" 2>/dev/null && t_ok "cancel through .. signalled nothing outside" ||
  t_fail "cancel through .. killed a process named by a file outside the log dir"

# 3. A state.json inside the root whose role climbs out: its logs are not followed.
mkdir -p "$T_DIR/logs/fake-1"
printf '{"app_id":"fake-1","name":"fake","state":"SUCCEEDED","supervisor_pid":0,"replicas":[{"role":"../../escape-job/r","id":0,"state":"SUCCEEDED","exit_code":0}]}\n' \
  >"$T_DIR/logs/fake-1/state.json"
mkdir -p "$T_DIR/escape-job/r/0"
echo "outside log" >"$T_DIR/escape-job/r/0/combined.log"
out=$("$MUSTER" log local://muster/fake-1 2>&1)
if grep -q "outside log" <<<"$out"; then t_fail "a role ../.. in state.json led log outside"; else
  t_ok "a role ../.. in state.json is not followed"; fi

# 4. An ordinary job still writes where it should.
h=$("$MUSTER" run utils.echo --msg inside 2>/dev/null)
t_expect_eq "an ordinary job's log (one replica: prefixed role/replica, as several)" "$("$MUSTER" log "$h")" "echo/0 inside"
t_expect_eq "its files are under MUSTER_LOG_DIR" \
  "$(find "$T_DIR/logs/${h##*/}" -name combined.log | wc -l)" 1
t_done
