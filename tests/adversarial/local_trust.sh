#!/bin/bash
# The local scheduler trusts only what it made (issue 33, item 6). Another user (a real other
# uid: 65534, through setpriv) plants what the review planted, and this user's muster must
# neither use it nor act on it:
#   1. state_dir: /tmp/muster/$USER made first by someone else is refused with a clear error
#      (their directory would get the job's output and app); an own one is made 0700.
#   2. cancel: a state.json whose pids name processes the job did not start (no start time, or
#      another one) signals none of them (a planted pid would become kill(-pid, SIGKILL)).
#   3. agent_log_dir: `muster agent --log-dir` with the run's directory planted by someone
#      else (a symbolic link in it pointing at this user's file) truncates nothing and refuses.
# Runs as root (the suite does); needs setpriv (util-linux) to act as uid 65534.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_need_cmd setpriv util-linux
if [ "$(id -u)" != 0 ]; then
  t_fail "needs root, to act as another user with setpriv (run as the suite does)"
  t_done
fi
as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
chmod 0755 "$T_DIR"
export HOME="$T_DIR" MUSTERCONFIG=
cd "$T_DIR" || exit 1

# --- 1. the default state directory, made first by another user ---------------------------
U="mu-adv-$$-$RANDOM"
ROOT="/tmp/muster/$U"
cleanup_root() { rm -rf "$ROOT" "/tmp/muster/$U-own"; }
trap 'cleanup_root; t_cleanup' EXIT
if [ ! -d /tmp/muster ]; then mkdir -p /tmp/muster && chmod 1777 /tmp/muster; fi
# Today's /tmp/muster may be 0755 (made by an older muster): as the review did, the other user
# needs to be able to make a directory in it.
[ -w /tmp/muster ] && [ "$(stat -c %a /tmp/muster)" = 1777 ] || chmod 1777 /tmp/muster
as_other mkdir -m 0777 "$ROOT"
out=$(env -u MUSTER_LOG_DIR -u XDG_RUNTIME_DIR USER="$U" "$MUSTER" run -s local utils.echo \
  --msg secret-output 2>&1)
rc=$?
if [ "$rc" != 0 ] && printf '%s' "$out" | grep -q "owned by uid 65534"; then
  t_ok "state_dir: a state directory another user made is refused (exit $rc)"
else
  t_fail "state_dir: ran in another user's directory (exit $rc): $out"
fi
t_expect_match "state_dir: the error says the fix" "$out" "MUSTER_LOG_DIR"
n=$(find "$ROOT" -mindepth 1 2>/dev/null | wc -l)
t_expect_eq "state_dir: nothing written into the other user's directory" "$n" 0
out=$(env -u MUSTER_LOG_DIR -u XDG_RUNTIME_DIR USER="$U" "$MUSTER" list 2>&1)
t_expect_match "state_dir: list refuses it too" "$out" "owned by uid 65534"
# An own directory that others may read is made private, and then used.
OWN="/tmp/muster/$U-own"
mkdir -m 0755 "$OWN"
h=$(env -u MUSTER_LOG_DIR -u XDG_RUNTIME_DIR USER="$U-own" "$MUSTER" run -s local utils.echo \
  --msg hi 2>"$T_DIR/own.err")
t_expect_eq "state_dir: an own 0755 directory is made 0700" "$(stat -c %a "$OWN")" 700
t_expect_match "state_dir: and the job runs there" "$h" "^local://"
own_done() {
  env -u MUSTER_LOG_DIR -u XDG_RUNTIME_DIR USER="$U-own" "$MUSTER" status "$h" 2>&1 |
    grep -q SUCCEEDED
}
t_until 60 own_done && t_ok "state_dir: the job in the own directory succeeds" ||
  t_fail "state_dir: own job: $(cat "$T_DIR/own.err")"

# --- 2. cancel signals only what the job started -------------------------------------------
export MUSTER_LOG_DIR="$T_DIR/logs"
mkdir -p "$MUSTER_LOG_DIR/planted-1"
t_spawn victim_group sleep 300 # its own group: a planted replica pid is kill(-pid, SIGKILL)
VG=$T_LAST_PID
t_spawn victim_sup sleep 300 # a planted supervisor pid is kill(pid, SIGTERM)
VS=$T_LAST_PID
t_until 10 t_alive "$VG" && t_until 10 t_alive "$VS"
start_vs=$(awk '{print $22}' "/proc/$VS/stat")
# The supervisor's pid with a start time that is not its own (the victim's, plus one), the
# replica's with none: neither is the process the job started.
cat >"$MUSTER_LOG_DIR/planted-1/state.json" <<EOF
{"app_id":"planted-1","name":"planted","state":"RUNNING","supervisor_pid":$VS,
 "supervisor_start":$((start_vs + 1)),"replicas":[{"role":"r","id":0,"pid":$VG,
 "state":"RUNNING"}]}
EOF
timeout 5 "$MUSTER" cancel local://muster/planted-1 >"$T_DIR/cancel.out" 2>&1
cancel_rc=$?
if kill -0 "$VG" 2>/dev/null && kill -0 "$VS" 2>/dev/null; then
  t_ok "cancel: planted pids of processes the job did not start are not signalled"
else
  t_fail "cancel: killed a process it did not start (group $VG alive: $(kill -0 "$VG" 2>/dev/null && echo yes || echo no), supervisor $VS alive: $(kill -0 "$VS" 2>/dev/null && echo yes || echo no)); cancel said: $(cat "$T_DIR/cancel.out")"
fi
t_expect_match "cancel: says why it left the pid alone" "$(cat "$T_DIR/cancel.out")" \
  "not signalling pid $VG"
[ "$cancel_rc" != 124 ] || t_fail "cancel: hung on a planted state (timeout)"
# A job muster did start is still cancelled: the start times it recorded prove its processes.
t_spawn run "$MUSTER" run -s local -cfg grace_period=2 utils.sh -- "echo started; exec sleep 300"
h=
job_running() {
  h=$(head -n1 "$T_DIR/run.log" 2>/dev/null | grep '^local://' || true)
  [ -n "$h" ] && grep -q started "$MUSTER_LOG_DIR/${h##*/}/sh/0/stdout.log" 2>/dev/null
}
t_until 60 job_running || t_fail "cancel: the real job did not start: $(cat "$T_DIR/run.log")"
"$MUSTER" cancel "$h" >"$T_DIR/cancel2.out" 2>&1
st=$("$MUSTER" status "$h" 2>&1)
t_expect_match "cancel: a job it started is cancelled" "$st" "CANCELLED"

# --- 3. the agent's log directory, planted ---------------------------------------------------
SH="$T_DIR/shared"
mkdir -m 1777 "$SH"
echo precious >"$T_DIR/victim.txt"
chmod 0644 "$T_DIR/victim.txt"
for a in 0 1; do
  as_other mkdir -p -m 0777 "$SH/run1/attempt_$a/0"
  as_other ln -s "$T_DIR/victim.txt" "$SH/run1/attempt_$a/0/stdout.log"
done
timeout 60 "$MUSTER" agent --standalone --rdzv-id run1 --nproc-per-node 1 --log-dir "$SH" \
  --no-python -- /bin/echo worker-output >"$T_DIR/agent.out" 2>&1
arc=$?
t_expect_eq "agent_log_dir: the file behind the planted link is untouched" \
  "$(cat "$T_DIR/victim.txt")" precious
if [ "$arc" = 2 ] && grep -q "owned by uid 65534" "$T_DIR/agent.out"; then
  t_ok "agent_log_dir: a run directory another user made is refused (exit 2)"
else
  t_fail "agent_log_dir: exit $arc, said: $(tail -5 "$T_DIR/agent.out")"
fi
# Its own --log-dir still works: the run's directory is made private.
timeout 60 "$MUSTER" agent --standalone --rdzv-id run2 --nproc-per-node 1 --log-dir "$SH" \
  --no-python -- /bin/echo worker-output >"$T_DIR/agent2.out" 2>&1
t_expect_eq "agent_log_dir: an own run's log is written" \
  "$(cat "$SH/run2/attempt_1/0/stdout.log" 2>/dev/null)" worker-output
t_expect_eq "agent_log_dir: the run's directory is 0700" "$(stat -c %a "$SH/run2" 2>&1)" 700
t_done
