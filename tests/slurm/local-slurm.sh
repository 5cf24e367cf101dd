#!/usr/bin/env bash
# A throw-away Slurm cluster on this machine for the Slurm tests (tests/integration/slurm_*.sh):
# one munged, one slurmctld and N slurmd (fake nodes n1..nN, all on 127.0.0.1, each on its own
# port), everything (config, keys, state, logs, pid files) under one directory. Nothing in /etc
# is read or changed and no system service is used; no accounting database (finished jobs stay
# in squeue for MinJobAge).
#
#   tests/slurm/local-slurm.sh start DIR   starts it; prints "export SLURM_CONF=..." and
#                                          writes the same line to DIR/env.sh
#   tests/slurm/local-slurm.sh stop DIR    cancels its jobs, stops the daemons it started (by
#                                          the PIDs in DIR/run, each checked to still be that
#                                          daemon), SIGKILL after LOCAL_SLURM_TIMEOUT
#
# Environment: LOCAL_SLURM_NODES (4), LOCAL_SLURM_CPUS per node (4), LOCAL_SLURM_MEM_MB per node
# (8192), LOCAL_SLURM_TIMEOUT seconds to wait for each step (60). Ports are picked free at
# start. Needs root (slurmd starts jobs as their user) and Debian's slurmctld, slurmd,
# slurm-client and munge. A start that fails stops what it started and shows the daemons' logs.
set -euo pipefail

usage() { echo "usage: tests/slurm/local-slurm.sh start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
case $2 in /?*) base=$2 ;; *) echo "local-slurm: DIR must be an absolute path" >&2; exit 2 ;; esac
nodes=${LOCAL_SLURM_NODES:-4}
cpus=${LOCAL_SLURM_CPUS:-4}
mem=${LOCAL_SLURM_MEM_MB:-8192}
timeout=${LOCAL_SLURM_TIMEOUT:-60}
conf=$base/etc/slurm.conf
run=$base/run

say() { echo "local-slurm: $*" >&2; }

# The PID in pid file $1 if it is alive and runs a program whose name starts with $2.
daemon_pid() {
  local pid comm
  [ -s "$1" ] || return 1
  pid=$(tr -dc '0-9' <"$1")
  [ -n "$pid" ] || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  case $comm in "$2"*) ;; *) return 1 ;; esac
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  echo "$pid"
}

# until_ok SECONDS COMMAND...: retries COMMAND every 200 ms until it succeeds or time is up.
until_ok() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -le "$deadline" ] || return 1
    sleep 0.2
  done
}

stop() {
  local f pid pids=() comm deadline
  if [ -f "$conf" ] && daemon_pid "$run/slurmctld.pid" slurmctld >/dev/null; then
    export SLURM_CONF=$conf
    local jobs
    jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ') || true
    if [ -n "${jobs// /}" ]; then
      # shellcheck disable=SC2086
      timeout 10 scancel $jobs 2>/dev/null || true
      until_ok "$timeout" eval '[ -z "$(timeout 10 squeue -h -t PD,R,CG,S,CF -o %A 2>/dev/null)" ]' ||
        say "jobs still in the queue after ${timeout}s: $(squeue -h -o %A 2>/dev/null | tr '\n' ' ')"
    fi
  fi
  # slurmd first (they report to slurmctld), munged last (the others authenticate through it).
  for comm in slurmd slurmctld munged; do
    pids=()
    for f in "$run/$comm"*.pid; do
      [ -e "$f" ] || continue
      if pid=$(daemon_pid "$f" "$comm"); then
        kill -TERM "$pid" 2>/dev/null || true
        pids+=("$pid")
      fi
      rm -f "$f"
    done
    [ ${#pids[@]} -gt 0 ] || continue
    deadline=$((SECONDS + timeout))
    for pid in "${pids[@]}"; do
      while [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
        if [ "$SECONDS" -gt "$deadline" ]; then
          say "$comm ($pid) ignored SIGTERM for ${timeout}s: SIGKILL"
          kill -KILL "$pid" 2>/dev/null || true
          break
        fi
        sleep 0.1
      done
    done
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || usage

# --- start ---------------------------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || { say "must run as root (slurmd starts jobs as their user)"; exit 1; }
for b in munged slurmctld slurmd sinfo sbatch squeue scancel; do
  command -v "$b" >/dev/null ||
    { say "'$b' is not installed: apt-get install slurmctld slurmd slurm-client munge"; exit 1; }
done
fail() {
  local f
  say "$*"
  for f in "$base"/log/*.log; do
    [ -s "$f" ] || continue
    say "--- last lines of $f"
    tail -n 8 "$f" >&2
  done
  stop
  exit 1
}

# Free TCP ports on 127.0.0.1 for slurmctld and each slurmd (picked together, all distinct).
ports=$(python3 - "$((nodes + 1))" <<'PY'
import random, socket, sys
want, got = int(sys.argv[1]), []
while len(got) < want:
    p = random.randint(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        if p not in got:
            got.append(p)
    except OSError:
        pass
    finally:
        s.close()
print(" ".join(map(str, got)))
PY
)
read -r -a port <<<"$ports"

if [ -e "$base" ] && [ -n "$(ls -A "$base")" ]; then
  say "$base is not empty: give start a new or empty directory"
  exit 2
fi
mkdir -p "$base"/{etc,state,log,run,munge,key}
chmod 0755 "$base" "$base/etc" "$base/munge"
chmod 0700 "$base/key"
for ((i = 1; i <= nodes; i++)); do mkdir -p "$base/spool/n$i"; done
host=$(hostname -s)

# munged with a key of our own; --force because the directories sit under /tmp.
head -c 1024 /dev/urandom >"$base/key/munge.key"
chmod 0400 "$base/key/munge.key"
socket=$base/munge/munge.socket
munged --force --socket="$socket" --key-file="$base/key/munge.key" \
  --pid-file="$run/munged.pid" --log-file="$base/log/munged.log" \
  --seed-file="$base/key/munged.seed" </dev/null >>"$base/log/munged.log" 2>&1 ||
  fail "munged did not start"
until_ok "$timeout" test -S "$socket" || fail "munged made no socket in ${timeout}s"

nodelist="n[1-$nodes]"
[ "$nodes" -gt 1 ] || nodelist=n1
{
  echo "# written by tests/slurm/local-slurm.sh: $nodes fake node(s) on 127.0.0.1"
  echo "ClusterName=mutest"
  echo "SlurmctldHost=$host(127.0.0.1)"
  echo "SlurmctldPort=${port[0]}"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "AuthType=auth/munge"
  echo "CredType=cred/munge"
  # cred_expire also delays a requeued job (Slurm's default is 120 s)
  echo "AuthInfo=socket=$socket,cred_expire=10"
  echo "StateSaveLocation=$base/state"
  echo "SlurmdSpoolDir=$base/spool/%n"
  echo "SlurmctldPidFile=$run/slurmctld.pid"
  echo "SlurmdPidFile=$run/slurmd-%n.pid"
  echo "SlurmctldLogFile=$base/log/slurmctld.log"
  echo "SlurmdLogFile=$base/log/slurmd-%n.log"
  # an empty plug-in stack: nothing from /etc/slurm is loaded
  echo "PlugStackConfig=$base/etc/plugstack.conf"
  # no cgroups: processes are tracked through /proc and not confined
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "JobCompType=jobcomp/none"
  echo "MpiDefault=none"
  echo "SwitchType=switch/none"
  echo "MailProg=$(command -v true)"
  # heterogeneous jobs are started by the backfill scheduler only: run it every second
  echo "SchedulerType=sched/backfill"
  echo "SchedulerParameters=bf_interval=1"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_CPU"
  # the fake nodes advertise more CPUs and memory than the machine has
  echo "SlurmdParameters=config_overrides"
  echo "ReturnToService=2"
  echo "MinJobAge=300"
  echo "KillWait=5"
  echo "InactiveLimit=0"
  echo "MessageTimeout=10"
  for ((i = 1; i <= nodes; i++)); do
    echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=${port[$i]} CPUs=$cpus RealMemory=$mem State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=$nodelist Default=YES MaxTime=INFINITE State=UP"
} >"$conf"
: >"$base/etc/plugstack.conf"
chmod 0644 "$conf" "$base/etc/plugstack.conf"
export SLURM_CONF=$conf
echo "export SLURM_CONF='$conf'" >"$base/env.sh"

# Both daemons fork into the background and write their pid files.
slurmctld -f "$conf" </dev/null >>"$base/log/slurmctld.stderr.log" 2>&1 || fail "slurmctld did not start"
until_ok "$timeout" eval 'timeout 10 scontrol ping | grep -q "is UP"' ||
  fail "slurmctld (127.0.0.1:${port[0]}) did not answer in ${timeout}s"
for ((i = 1; i <= nodes; i++)); do
  slurmd -f "$conf" -N "n$i" </dev/null >>"$base/log/slurmd-n$i.stderr.log" 2>&1 ||
    fail "slurmd n$i did not start"
done
idle() { [ "$(timeout 10 sinfo -h -N -o '%N %T' | awk '$2 == "idle"' | wc -l)" -ge "$nodes" ]; }
until_ok "$timeout" idle || fail "not all $nodes nodes were idle after ${timeout}s: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"
say "up: $nodes node(s) in partition debug, slurmctld on 127.0.0.1:${port[0]}, under $base"
cat "$base/env.sh"
