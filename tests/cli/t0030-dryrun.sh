#!/usr/bin/env bash
# --dryrun output: the job spec (JSON) and the local scheduler's process list; nothing runs.
. "$(dirname "$0")/../lib.sh"
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs" MUSTER_APP_ID_SUFFIX=pinned42
cd "$T_DIR"
out=$("$MUSTER" run --dryrun dist.ddp -j 2x2 --script train.py -- --lr 0.1); rc=$?
t_expect_eq "dryrun exits 0" "$rc" 0
t_expect_match "application section" "$out" '=== APPLICATION ==='
t_expect_match "scheduler request section" "$out" '=== SCHEDULER REQUEST ==='
t_expect_match "pinned app id" "$out" 'app_id: train-pinned42'
t_expect_match "handle" "$out" 'handle: local://muster/train-pinned42'
t_expect_match "replica 0 runs muster agent" "$out" "train/0: muster agent --nnodes 2 --nproc-per-node 2 --rdzv-endpoint '127.0.0.1:<port>' --rdzv-id train-pinned42 --max-restarts 0 --role train -- python3 -u train.py --lr 0.1"
t_expect_match "replica 1 exists" "$out" 'train/1: muster agent'
t_expect_match "embedded musterd announced" "$out" 'rendezvous: embedded musterd'
t_expect_eq "dryrun creates nothing" "$(ls "$T_DIR/logs" 2>/dev/null | wc -l)" 0

js=$("$MUSTER" run --dryrun --json dist.ddp -j 1:3x4 -m my.pkg.trainer --name exp1/run7 --debug --env A=1,B=x)
check() { printf '%s' "$js" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
t_expect_eq "json: app name is the run name" "$(check 'd["app"]["name"]')" run7
t_expect_eq "json: role name is the module's last part" "$(check 'd["app"]["roles"][0]["name"]')" trainer
t_expect_eq "json: elastic num_replicas" "$(check 'd["app"]["roles"][0]["num_replicas"]')" 3
t_expect_eq "json: elastic min_replicas" "$(check 'd["app"]["roles"][0]["min_replicas"]')" 1
t_expect_eq "json: experiment env" "$(check 'd["app"]["roles"][0]["env"]["MUSTER_TRACKING_EXPERIMENT_NAME"]')" exp1
t_expect_eq "json: debug env" "$(check 'd["app"]["roles"][0]["env"]["TORCH_DISTRIBUTED_DEBUG"]')" DETAIL
t_expect_eq "json: --env map" "$(check 'd["app"]["roles"][0]["env"]["B"]')" x
t_expect_eq "json: args" "$(check '" ".join(d["app"]["roles"][0]["args"])')" \
  'agent --nnodes 1:3 --nproc-per-node 4 --rdzv-endpoint ${rdzv_endpoint} --rdzv-id ${app_id} --max-restarts 0 --role trainer -- python3 -u -m my.pkg.trainer'
t_expect_eq "json: scheduler" "$(check 'd["scheduler"]')" local

out=$("$MUSTER" run --dryrun dist.ddp --nnodes 3 --nproc_per_node 5 --script w --launcher torchrun -h gpu.small --mounts type=bind,src=/data,dst=/data,readonly)
t_expect_match "--nnodes/--nproc_per_node synonyms" "$out" '--nnodes 3 --nproc_per_node 5'
t_expect_match "torchrun launcher against musterd's TCPStore (c10d)" "$out" "torchrun --rdzv_backend c10d --rdzv_endpoint '127.0.0.1:<c10d port>' --rdzv_conf is_host=false"
out2=$("$MUSTER" run --dryrun dist.ddp -j 2x1 --script w --launcher torchrun --rdzv_backend etcd-v2)
t_expect_match "torchrun launcher against musterd's etcd v2 API" "$out2" "torchrun --rdzv_backend etcd-v2 --rdzv_endpoint '127.0.0.1:<port>' --rdzv_id"
t_expect_match "torch 1.13 workaround flags" "$out" '--redirects=1 --tee=1'
t_expect_match "--launcher torchrun: torch >= 2.4's shared store is off (docs/c10d.md)" "$out" \
  'TORCH_DISABLE_SHARE_RDZV_TCP_STORE.{1,6}1'
t_expect_eq "--launcher muster: no TORCH_DISABLE_SHARE_RDZV_TCP_STORE" \
  "$("$MUSTER" run --dryrun dist.ddp --script w | grep -c TORCH_DISABLE_SHARE_RDZV_TCP_STORE)" 0
t_expect_match "non-.py script gets --no_python" "$out" '--no_python w'
t_expect_match "named resource gpu.small" "$out" '"gpu":	1'
t_expect_match "named resource memory" "$out" '"memMB":	32768'
t_expect_match "bind mount" "$out" '"read_only":	true'

# A user's own component file, with a conditional and list splicing.
cat >"$T_DIR/mine.yaml" <<'YAML'
name: mine
description: a test component
params:
  - {name: loud, type: bool, default: "false", help: shout}
  - {name: words, type: list, remainder: true, help: what to say}
app:
  name: mine
  roles:
    - name: say
      entrypoint: echo
      args:
        - {if: loud, then: ["LOUD:"], else: ["quiet:"]}
        - ${words}
YAML
out=$("$MUSTER" run --dryrun ./mine.yaml --loud -- a b c)
t_expect_match "./mine.yaml with a conditional and splicing" "$out" 'say/0: echo LOUD: a b c'
out=$("$MUSTER" run --dryrun "$T_DIR/mine.yaml" x)
t_expect_match "else branch" "$out" 'say/0: echo quiet: x'
t_done
