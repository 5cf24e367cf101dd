#!/usr/bin/env bash
# The command lines users bring from torchrun and TorchX (issue 13's table), each as a check:
# `muster agent`/`torchrun` (the link to muster) with torchrun's options, `muster run` with
# TorchX's run options (and a run option after the component), `muster log` with TorchX's log
# options. Real local jobs and real agents; no torch (agent_torchrun_parity.sh compares with
# torchrun itself).
. "$(dirname "$0")/../lib.sh"
TORCHRUN_LINK="$(dirname "$MUSTER")/compat/torchrun"
t_need_built "$MUSTER" "$TORCHRUN_LINK"
t_local_jobs
W=$T_DIR/w.py
cat >"$W" <<'PY'
import os, sys
print("worker", os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["GROUP_RANK"],
      os.environ["MASTER_ADDR"], " ".join(sys.argv[1:]), flush=True)
PY
mkdir -p "$T_DIR/pkg"
: >"$T_DIR/pkg/__init__.py"
cp "$W" "$T_DIR/pkg/train.py"
expect_err() { # name want-regex args...
  local name=$1 want=$2; shift 2
  "$@" >"$T_DIR/out" 2>"$T_DIR/err"; local rc=$?
  t_expect_eq "$name: exit 2" "$rc" 2
  t_expect_match "$name: message" "$(cat "$T_DIR/err")" "$want"
}
export PATH=/usr/bin:$PATH

# ---- muster agent / torchrun
out=$("$MUSTER" agent --standalone --nproc_per_node=2 "$W" --lr 1 2>&1)
t_expect_eq "agent --standalone script.py: exit 0 (python prepended)" "$?" 0
t_expect_eq "agent --standalone script.py: both workers ran with their arguments" \
  "$(printf '%s\n' "$out" | grep -c '^\[[01]\]:worker [01] 2 0 .* --lr 1$')" 2
out=$(cd "$T_DIR" && "$TORCHRUN_LINK" --standalone --nproc-per-node 1 -m pkg.train x 2>&1)
t_expect_match "torchrun link -m pkg.train: the module runs" "$out" '\[0\]:worker 0 1 0 .* x'
out=$("$MUSTER" agent --standalone --no_python /bin/echo plain 2>&1)
t_expect_match "--no_python: the program runs as given" "$out" '\[0\]:plain'
out=$("$MUSTER" agent --standalone -- /bin/echo raw 2>&1)
t_expect_match "after --: the command runs as given" "$out" '\[0\]:raw'

# static: the Slurm idiom, node ranks as given whatever the start order
port=$(t_free_port)
t_spawn st1 "$TORCHRUN_LINK" --nnodes 2 --node_rank 1 --master_addr 127.0.0.1 \
  --master_port "$port" --nproc_per_node 1 "$W" s
p1=$T_LAST_PID
t_spawn st0 "$MUSTER" agent --nnodes=2 --node-rank=0 --master-addr=127.0.0.1 \
  --master-port="$port" --nproc-per-node=1 "$W" s
p0=$T_LAST_PID
t_wait_exit "$p0" 60; t_expect_eq "static node 0: exit 0" "$T_RC" 0
t_wait_exit "$p1" 60; t_expect_eq "static node 1: exit 0" "$T_RC" 0
t_expect_match "static: node rank 0 runs rank 0" "$(cat "$T_DIR/st0.log")" \
  '\[0\]:worker 0 2 0 127\.0\.0\.1 s'
t_expect_match "static: node rank 1 (started first) runs rank 1" "$(cat "$T_DIR/st1.log")" \
  '\[1\]:worker 1 2 1 127\.0\.0\.1 s'

# --nproc_per_node gpu/auto: NVIDIA device files, else Neuron cores, else (auto) CPUs
mkdir -p "$T_DIR/dev-gpu" "$T_DIR/dev-none" "$T_DIR/dev-neuron"
: >"$T_DIR/dev-gpu/nvidia0"; : >"$T_DIR/dev-gpu/nvidia1"; : >"$T_DIR/dev-gpu/nvidiactl"
: >"$T_DIR/dev-neuron/neuron0"
out=$(MUSTER_DEVICE_DIR=$T_DIR/dev-gpu "$MUSTER" agent --standalone --nproc_per_node gpu "$W" 2>&1)
t_expect_eq "nproc gpu: one worker per /dev/nvidiaN" "$(printf '%s\n' "$out" | grep -c 'worker [01] 2 ')" 2
out=$(MUSTER_DEVICE_DIR=$T_DIR/dev-gpu "$MUSTER" agent --standalone --nproc_per_node auto "$W" 2>&1)
t_expect_eq "nproc auto with GPUs: one per GPU" "$(printf '%s\n' "$out" | grep -c 'worker [01] 2 ')" 2
out=$(MUSTER_DEVICE_DIR=$T_DIR/dev-neuron PATH=/usr/bin:/bin "$MUSTER" agent --standalone \
  --nproc_per_node gpu "$W" 2>&1)
t_expect_eq "nproc gpu with a Neuron device: its cores (2)" \
  "$(printf '%s\n' "$out" | grep -c 'worker [01] 2 ')" 2
cpus=$(nproc)
out=$(MUSTER_DEVICE_DIR=$T_DIR/dev-none PATH=/usr/bin:/bin "$MUSTER" agent --standalone \
  --nproc_per_node auto "$W" 2>&1)
t_expect_eq "nproc auto without GPUs: one per CPU" "$(printf '%s\n' "$out" | grep -c 'worker ')" "$cpus"
expect_err "nproc gpu without GPUs" "this node has no GPU" \
  env MUSTER_DEVICE_DIR="$T_DIR/dev-none" PATH=/usr/bin:/bin "$MUSTER" agent --standalone \
  --nproc_per_node gpu "$W"
# c10d: a musterd's TCPStore port runs (rdzv_backends.sh); a TCPStore that is not a musterd (here
# one that closes on the key it lacks, as PyTorch 1.13's does) is refused with the alternatives
"$PY" -c 'import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.recv(64); c.close()' >"$T_DIR/store.port" &
store=$!
t_until 10 test -s "$T_DIR/store.port"
"$MUSTER" agent --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$(cat "$T_DIR/store.port")" \
  --rdzv_id x "$W" >"$T_DIR/out" 2>"$T_DIR/err"
t_expect_eq "c10d on a TCPStore that is not a musterd: exit 3 (rendezvous)" "$?" 3
t_expect_match "c10d on a TCPStore that is not a musterd: the alternatives" "$(cat "$T_DIR/err")" \
  "not a musterd.*--c10d-listen.*--rdzv-backend muster.*static"
kill "$store"
expect_err "unknown backend" "'etdc' is not known; did you mean 'etcd'" \
  "$MUSTER" agent --rdzv_backend etdc --rdzv_endpoint h:1 "$W"
expect_err "static elastic refused" "static needs a fixed --nnodes" \
  "$MUSTER" agent --nnodes 1:2 --node_rank 0 "$W"
expect_err "node rank out of range" "--node-rank '2': expected a number from 0 to 1" \
  "$MUSTER" agent --nnodes 2 --node_rank 2 "$W"
expect_err "-m with --no_python" "do not go together" "$MUSTER" agent --standalone -m --no_python x
expect_err "bad --tee" "expected 0 \(none\)" "$MUSTER" agent --standalone --tee 7 "$W"
expect_err "bad --start_method" "expected spawn, fork or forkserver" \
  "$MUSTER" agent --standalone --start_method thread "$W"
expect_err "no python" "no python3 \(or python\) on PATH.*PYTHON_EXEC" \
  env PATH=/nonexistent "$MUSTER" agent --standalone "$W"
out=$(PET_NPROC_PER_NODE=2 "$MUSTER" agent --standalone "$W" 2>&1)
t_expect_eq "PET_NPROC_PER_NODE (torchrun's env defaults)" \
  "$(printf '%s\n' "$out" | grep -c 'worker [01] 2 ')" 2
out=$("$TORCHRUN_LINK" -h 2>&1)
t_expect_match "torchrun -h names itself" "$out" "^usage: torchrun "
out=$("$MUSTER" agent --standalone --start_method fork --monitor_interval 0.5 --role r \
  --max_restarts 0 --redirects 0 --tee 0 --run_path "$W" ok 2>&1)
t_expect_match "every other torchrun option is accepted" "$out" '\[0\]:worker 0 1 0 .* ok'

# issue 26: torch 2.x's --local_ranks_filter shows only those local ranks' output (both
# streams; the others still run and their failures are still reported)
out=$("$MUSTER" agent --standalone --nproc_per_node 3 --local_ranks_filter 0,2 -- \
  sh -c 'echo "out $LOCAL_RANK"; echo "err $LOCAL_RANK" >&2' 2>&1)
t_expect_eq "--local_ranks_filter 0,2: exit 0" "$?" 0
t_expect_eq "--local_ranks_filter 0,2: ranks 0 and 2 show both streams" \
  "$(printf '%s\n' "$out" | grep -cE '^\[[02]\]:(out|err) [02]$')" 4
t_expect_eq "--local_ranks_filter 0,2: rank 1 shows nothing" \
  "$(printf '%s\n' "$out" | grep -c '^\[1\]:')" 0
out=$(PET_LOCAL_RANKS_FILTER=1 "$MUSTER" agent --standalone --nproc_per_node 2 -- \
  sh -c 'echo "out $LOCAL_RANK"' 2>&1)
t_expect_eq "PET_LOCAL_RANKS_FILTER=1: only rank 1" "$(printf '%s\n' "$out" | grep -c ':out ')" 1
t_expect_match "PET_LOCAL_RANKS_FILTER=1: ... that one" "$out" '\[1\]:out 1'
expect_err "--local_ranks_filter bad" "--local-ranks-filter 'a,b': expected local ranks separated by commas" \
  "$MUSTER" agent --standalone --local_ranks_filter a,b "$W"
# an unknown option points at the command's own -h, as it is typed
expect_err "unknown agent option: see 'muster agent -h'" "unknown option '--zzzzzzzzzzzz'; see 'muster agent -h'" \
  "$MUSTER" agent --zzzzzzzzzzzz "$W"
expect_err "unknown torchrun option: see 'torchrun -h'" "see 'torchrun -h'" \
  "$TORCHRUN_LINK" --zzzzzzzzzzzz "$W"

# ---- small things users trip on
out=$("$MUSTER" agent --standalone "$W" one 2>&1)
t_expect_match "one worker: 'started 1 worker (rank 0 of 1)'" "$out" "started 1 worker \(rank 0 of 1\)"
t_expect_match "one worker: 'the worker succeeded'" "$out" "the worker succeeded"
t_expect_match "one worker: 'rank 0 of world 1' in the join line" "$out" "node rank 0 of 1, rank 0 of world 1"
out=$("$MUSTER" agent --standalone -- sh -c 'exit 137' 2>&1)
t_expect_match "exit code 137 explained" "$out" "exit code 137 \(128 \+ 9: killed by SIGKILL, often the out-of-memory killer\)"
mkdir -p "$T_DIR/tmp"
t_spawn waiting env TMPDIR="$T_DIR/tmp" "$MUSTER" agent --nnodes 2 --node_rank 0 \
  --master_port "$(t_free_port)" "$W"
wp=$T_LAST_PID
t_until 20 t_has_lines "$T_DIR/waiting.log" "static rendezvous: node rank 0 serves it"
t_until 10 eval '[ -n "$(ls "$T_DIR/tmp")" ]'
t_expect_match "a waiting agent has its temporary directory" "$(ls "$T_DIR/tmp")" "^muster-agent-"
kill -TERM "$wp"
t_wait_exit "$wp" 20
t_expect_eq "SIGTERM while joining: exit 143" "$T_RC" 143
t_expect_eq "SIGTERM while joining: the temporary directory is removed" "$(ls "$T_DIR/tmp")" ""
out=$("$MUSTER" builtins | sed -e ':a' -e '$!N;s/\n \{28\}/ /;ta' -e 'P;D') # wrapped lines joined
t_expect_eq "builtins: every description is a whole sentence" \
  "$(printf '%s\n' "$out" | tail -n +2 | grep -cvE '[.)]$')" 0
t_expect_match "builtins: not cut mid-sentence" "$out" "utils.python +Runs Python: .*\(as TorchX's utils.python\)\."
out=$("$MUSTER" run dist.ddp --help | grep -- '--name')
t_expect_match "dist.ddp --name: the default said in words, not '/'" "$out" "default: the run is the script's stem"
if printf '%s' "$out" | grep -q '(default: /)'; then t_fail "--name default '/' shown"; else t_ok "--name: no '(default: /)'"; fi

# ---- muster run: TorchX's run options
expect_err "run option after the component" \
  "'--log' is an option of muster run, not of utils.echo: put it before the component" \
  "$MUSTER" run utils.echo --msg hi --log
expect_err "-s after the component" "'-s' is an option of muster run.*before the component" \
  "$MUSTER" run utils.echo --msg hi -s local
expect_err "--scheduler_args is -cfg" "-cfg: 'x' is not" "$MUSTER" run --scheduler_args x utils.echo
expect_err "--parent_run_id refused by name" "--parent-run-id: muster has no experiment tracker" \
  "$MUSTER" run --parent_run_id p1 utils.echo
expect_err "--stdin refused by name" "--stdin: muster reads no TorchXRunArgs" \
  "$MUSTER" run --stdin utils.echo
h=$("$MUSTER" run --scheduler_args log_dir="$T_DIR/l2" --tee_logs utils.sh -- \
  'echo hello; echo ERR one; echo world; echo ERR two' 2>"$T_DIR/run.err")
t_expect_eq "--scheduler_args and --tee_logs accepted: exit 0" "$?" 0

# ---- muster log: TorchX's options
out=$("$MUSTER" log -cfg log_dir="$T_DIR/l2" "$h" 2>&1)
t_expect_eq "log: every line by default, prefixed role/replica (one replica too)" "$out" "sh/0 hello
sh/0 ERR one
sh/0 world
sh/0 ERR two"
out=$("$MUSTER" log -cfg log_dir="$T_DIR/l2" "$h" --regex '^ERR' 2>&1)
t_expect_eq "log HANDLE --regex (options after the handle; it sees the line as written)" "$out" \
  "sh/0 ERR one
sh/0 ERR two"
out=$("$MUSTER" log -t -cfg log_dir="$T_DIR/l2" "$h" 2>&1)
t_expect_eq "log -t follows (to the job's end): every line" "$(printf '%s\n' "$out" | wc -l)" 4
out=$("$MUSTER" log --lines 1 -cfg log_dir="$T_DIR/l2" "$h" 2>&1)
t_expect_eq "log --lines 1: the last line" "$out" "sh/0 ERR two"
out=$("$MUSTER" log --lines 1 -cfg log_dir="$T_DIR/l2" "$h/sh/0" 2>&1)
t_expect_eq "log HANDLE/ROLE/REPLICA: that replica's lines, its prefix kept (as torchx log does)" "$out" "sh/0 ERR two"
# log -f --regex into a file while the job runs: every kept line is written as it comes (the
# filtered path once kept them in stdio's buffer until exit, and a Ctrl-C lost them), and the
# regex sees the line without its newline ('tick [0-2]$' once matched nothing).
"$MUSTER" run --no-log -cfg log_dir="$T_DIR/l2" utils.sh -- \
  "for i in 0 1 2 3; do echo tick \$i; done; while [ ! -e '$T_DIR/go' ]; do sleep 0.05; done" \
  >"$T_DIR/h3" 2>/dev/null &
run3=$!
t_until 20 test -s "$T_DIR/h3" || t_fail "the ticking job did not start"
h3=$(cat "$T_DIR/h3")
# Ctrl-C's signal, with its default action (a background job of a script ignores SIGINT).
"$PY" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
  "$MUSTER" log -f -cfg log_dir="$T_DIR/l2" --regex 'tick [0-2]$' "$h3" >"$T_DIR/f.out" 2>&1 &
logf=$!
three() { [ "$(wc -l <"$T_DIR/f.out")" -ge 3 ]; }
t_until 20 three && t_ok "log -f --regex into a file: the lines are written while the job runs" ||
  t_fail "log -f --regex into a file wrote '$(cat "$T_DIR/f.out")' while the job ran"
kill -INT "$logf"
wait "$logf" 2>/dev/null
t_expect_eq "log -f --regex, then Ctrl-C: nothing lost, '\$' at the line's end" "$(cat "$T_DIR/f.out")" \
  "sh/0 tick 0
sh/0 tick 1
sh/0 tick 2"
touch "$T_DIR/go"
wait "$run3"
t_expect_eq "log --regex 'tick [0-2]\$' of the ended job" \
  "$("$MUSTER" log -cfg log_dir="$T_DIR/l2" --regex 'tick [0-2]$' "$h3" | sed 's|^sh/0 ||' | tr '\n' ,)" \
  "tick 0,tick 1,tick 2,"
expect_err "log -t N: TorchX's -t takes no number" "for the last 5 lines use --lines 5" \
  "$MUSTER" log -t 5 "$h"
"$MUSTER" log --since 10m --until 1m -cfg log_dir="$T_DIR/l2" "$h" >"$T_DIR/out" 2>"$T_DIR/err"
t_expect_eq "log --since/--until (accepted as TorchX's local logs): exit 0" "$?" 0
t_expect_eq "log --since/--until: every line" "$(wc -l <"$T_DIR/out")" 4
t_expect_match "log --since/--until: said to be ignored" "$(cat "$T_DIR/err")" \
  "--since and --until: ignored, all lines are printed"
expect_err "log --regex bad" "--regex '\(':" "$MUSTER" log "$h" --regex '('

# ---- config files and components refuse typos: the word named, the closest suggested, exit 2
printf '[cli:run]\nschedular = local\n' >.musterconfig
expect_err ".musterconfig [cli:run] typo" \
  "\.musterconfig:2: unknown \[cli:run\] key 'schedular'; did you mean 'scheduler'" \
  "$MUSTER" run --dryrun utils.echo
printf '[slurm]\npartitoin = gpu\n' >.musterconfig
expect_err ".musterconfig runopt typo (another scheduler's section too)" \
  "unknown -cfg key 'partitoin'; did you mean 'partition'\? \(see 'muster runopts slurm'\)" \
  "$MUSTER" run --dryrun utils.echo
printf '[kubernetse]\nqueue = q\n' >.musterconfig
expect_err ".musterconfig section typo" "unknown section 'kubernetse'; did you mean 'kubernetes'" \
  "$MUSTER" list
rm .musterconfig
printf '[local_cwd]\nlog_dir = %s/tx\n[cli:run]\ncomponent = utils.echo\n' "$T_DIR" >.torchxconfig
out=$("$MUSTER" run --dryrun --msg hi 2>&1)
t_expect_match ".torchxconfig is read, and said so" "$out" \
  "note: read TorchX's config '[^']*/?\.torchxconfig' \(no \.musterconfig found\)"
t_expect_match ".torchxconfig: [local_cwd] is the local scheduler's, [cli:run] component" "$out" \
  "$T_DIR/tx/echo-"
printf '[local_cwd]\nlog_dri = x\n' >.torchxconfig
expect_err ".torchxconfig typo" "\.torchxconfig:2: unknown -cfg key 'log_dri'; did you mean 'log_dir'" \
  "$MUSTER" run --dryrun utils.echo
printf '[cli:run]\nscheduler = local\n' >.musterconfig
out=$("$MUSTER" run --dryrun utils.echo 2>&1)
if printf '%s' "$out" | grep -q torchxconfig; then t_fail ".musterconfig wins: $out"; else
  t_ok ".musterconfig present: .torchxconfig is not read"; fi
rm .musterconfig .torchxconfig
cat >typo.yaml <<'YAML'
name: typo
description: a typo in a reference
params:
  - {name: msg, type: str, default: hi}
app:
  name: typo
  roles:
    - {name: echo, image: none, entrypoint: echo, args: ["${mgs}", "${app_id}"]}
YAML
expect_err "\${mgs} in a component" \
  "'\\\$\{mgs\}' is neither a parameter of typo nor a scheduler macro; did you mean '\\\$\{msg\}'" \
  "$MUSTER" run --dryrun ./typo.yaml

# ---- -cfg rdzv: one vocabulary on every scheduler
for sched in local slurm kubernetes; do
  extra=""
  [ "$sched" = kubernetes ] && extra=",queue=q,muster_image=registry.example/muster:0.1.0"
  out=$("$MUSTER" run --dryrun -s "$sched" -cfg "rdzv=jbo$extra" dist.ddp --script t.py -j 2x1 2>&1)
  t_expect_eq "$sched: -cfg rdzv typo exits 2" "$?" 2
  t_expect_match "$sched: the typo named, the word suggested, the vocabulary listed" "$out" \
    "rdzv='jbo' is not known; did you mean 'job'\?.*auto.*none.*HOST:PORT"
  out=$("$MUSTER" run --dryrun -s "$sched" -cfg "rdzv=etcd-v3://h1$extra" dist.ddp --script t.py 2>&1)
  t_expect_match "$sched: an etcd-v3:// without ports is named, with the form once" "$out" \
    "rdzv='etcd-v3://h1' is not known.*, etcd-v3://H1:P,H2:P,\.\.\. \(the members"
  out=$("$MUSTER" run --dryrun -s "$sched" -cfg "rdzv=none$extra" dist.ddp --script t.py -j 2x1 2>&1)
  t_expect_match "$sched: rdzv=none with \${rdzv_endpoint} is refused" "$out" \
    "the job uses \\\$\{rdzv_endpoint\} and gets no musterd"
  for w in job always 10.0.0.9:2379; do
    "$MUSTER" run --dryrun -s "$sched" -cfg "rdzv=$w$extra" dist.ddp --script t.py -j 2x1 --image i \
      >"$T_DIR/dry.out" 2>&1
    t_expect_eq "$sched: -cfg rdzv=$w accepted" "$?" 0
  done
  t_expect_match "$sched: rdzv=HOST:PORT is the workers' endpoint" "$(cat "$T_DIR/dry.out")" \
    "10\.0\.0\.9:2379"
done
t_done
