#!/usr/bin/env bash
# TorchX golden 11 (dist.ddp component; torchx/components/test/dist_test.py at b72ba038):
# -j parsing, --name parsing, debug env, and the AppDef of five invocations, reproduced with
# `muster run --dryrun --json dist.ddp ... --launcher torchrun`.
#
# Deliberate divergences (docs/components.md, "The builtins"):
#  D1 The role runs `muster agent ...` by default; with --launcher torchrun it runs torchrun as
#     argv (entrypoint "torchrun"), not `bash -c "torchrun ..."`, so nothing is shell-quoted.
#  D2 The rendezvous endpoint is musterd's ${rdzv_endpoint} (etcd-v2 backend by default), never
#     `localhost:0` or `$${${rank0_env}:=localhost}:29500`; no port_map {c10d: 29500}.
#  D3 --rdzv_port, --rdzv_conf and --tee are not parameters (musterd owns the endpoint; torch
#     1.13 on Python 3.11 needs --redirects=1 --tee=1, which the component always passes).
#  D4 Env names are MUSTER_TRACKING_EXPERIMENT_NAME / MUSTER_TRACKING_RUN_NAME; LOGLEVEL is
#     always WARNING (TorchX copies the launching host's $LOGLEVEL).
#  D5 The default image is "" (the local scheduler ignores images), not ghcr.io/pytorch/torchx.
#  D6 --role is the role name (TorchX passes an empty role).
. "$(dirname "$0")/../lib.sh"
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs"
cd "$T_DIR"
dry() { "$MUSTER" run --dryrun --json dist.ddp --launcher torchrun "$@"; }
get() { printf '%s' "$1" | "$PY" -c "import json,sys; d=json.load(sys.stdin)['app']; r=d['roles'][0]; print($2)"; }

# parse_nnodes: "2" -> (1,1,2,"1"), "1x2" -> (1,1,2,"1"), "1:2x3" -> (1,2,3,"1:2").
while read -r j want; do
  js=$(dry -j "$j" --script t.py)
  got="$(get "$js" 'r["min_replicas"], r["num_replicas"], r["args"][r["args"].index("--nproc_per_node")+1], r["args"][r["args"].index("--nnodes")+1]' | tr -d "(),'")"
  t_expect_eq "parse_nnodes $j" "$got" "$want"
done <<'CASES'
2 1 1 2 1
1x2 1 1 2 1
1:2x3 1 2 3 1:2
CASES
for bad in 1x x2 :3 :2x1 1x2:3; do
  dry -j "$bad" --script t.py >/dev/null 2>&1; t_expect_eq "-j $bad is an error (exit 2)" "$?" 2
done

# --name parsing (experiment, run, AppDef.name).
while IFS='|' read -r name kind val exp run; do
  js=$(dry --name "$name" "$kind" "$val")
  t_expect_eq "--name $name $kind $val" \
    "$(get "$js" 'r["env"]["MUSTER_TRACKING_EXPERIMENT_NAME"], r["env"]["MUSTER_TRACKING_RUN_NAME"], d["name"]' | tr -d "(),'")" \
    "$exp $run $run"
done <<'CASES'
foo/bar|--script|bar/baz.py|foo|bar
foo/|--script|bar/baz.py|foo|baz
/bar|--script|bar/baz.py|default-experiment|bar
foobar|-m|foo.bar|default-experiment|foobar
foo/|-m|foo.bar.baz|foo|baz
/|--script|foo/bar.py|default-experiment|bar
baz/trial_1|--script|foo/bar.py|baz|trial_1
CASES

# Appdef 1: --script train.py.
js=$(dry --script train.py)
t_expect_eq "appdef1 name/role" "$(get "$js" 'd["name"], r["name"]' | tr -d "(),'")" "train train"
t_expect_eq "appdef1 replicas" "$(get "$js" 'r["num_replicas"], r["min_replicas"], r["max_retries"], r["retry_policy"]' | tr -d "(),'")" "1 1 0 APPLICATION"
t_expect_eq "appdef1 resource" "$(get "$js" 'r["resource"]["cpu"], r["resource"]["gpu"], r["resource"]["memMB"]' | tr -d "(),'")" "2 0 1024"
t_expect_eq "appdef1 env (D4)" "$(get "$js" 'r["env"]["MUSTER_TRACKING_EXPERIMENT_NAME"], r["env"]["MUSTER_TRACKING_RUN_NAME"], r["env"]["LOGLEVEL"]' | tr -d "(),'")" "default-experiment train WARNING"
t_expect_eq "appdef1 args (D1-D3, D6)" "$(get "$js" 'r["entrypoint"] + " " + " ".join(r["args"])')" \
  'torchrun --rdzv_backend etcd-v2 --rdzv_endpoint ${rdzv_endpoint} --rdzv_id ${app_id} --nnodes 1 --nproc_per_node 2 --max_restarts 0 --redirects=1 --tee=1 --role train train.py'
# Appdef 2: -j 2x8 --gpu 8 --cpu 32 --memMB 200000 --script train.py -- --lr 0.1.
js=$(dry -j 2x8 --gpu 8 --cpu 32 --memMB 200000 --script train.py -- --lr 0.1)
t_expect_eq "appdef2 replicas" "$(get "$js" 'r["num_replicas"], r["min_replicas"]' | tr -d "(),'")" "2 2"
t_expect_eq "appdef2 resource" "$(get "$js" 'r["resource"]["cpu"], r["resource"]["gpu"], r["resource"]["memMB"]' | tr -d "(),'")" "32 8 200000"
t_expect_match "appdef2 script args after --" "$(get "$js" '" ".join(r["args"])')" '--nnodes 2 --nproc_per_node 8 .* train.py --lr 0.1$'
# Appdef 3: -j 4 -m my.pkg.trainer --name exp1/run7.
js=$(dry -j 4 -m my.pkg.trainer --name exp1/run7)
t_expect_eq "appdef3 names" "$(get "$js" 'd["name"], r["name"]' | tr -d "(),'")" "run7 trainer"
t_expect_match "appdef3 module" "$(get "$js" '" ".join(r["args"])')" '--nnodes 1 --nproc_per_node 4 .* -m my.pkg.trainer$'
# Appdef 4: static backend with --rdzv_conf/--rdzv_port/--tee (D3: those are errors here).
"$MUSTER" run --dryrun dist.ddp -j 2x2 --script foo.py --rdzv_backend static --rdzv_port 30000 >/dev/null 2>"$T_DIR/err"
t_expect_eq "appdef4: --rdzv_port is not a parameter (D3)" "$?" 2
js=$(dry -j 2x2 --script foo.py --rdzv_backend static --max_retries 3)
t_expect_match "appdef4: --rdzv_backend passes through" "$(get "$js" '" ".join(r["args"])')" '^--rdzv_backend static '
t_expect_eq "appdef4: max_retries" "$(get "$js" 'r["max_retries"]')" 3
# Appdef 5: -j 2x1 --script foo.py --debug True --env "A=1,B=x y".
js=$(dry -j 2x1 --script foo.py --debug True --env "A=1,B=x y")
t_expect_eq "appdef5 env" "$(get "$js" 'r["env"]["A"], r["env"]["B"], r["env"]["CUDA_LAUNCH_BLOCKING"], r["env"]["NCCL_DESYNC_DEBUG"], r["env"]["TORCH_DISTRIBUTED_DEBUG"], r["env"]["TORCH_SHOW_CPP_STACKTRACES"]' | tr -d "(),'")" "1 x y 1 1 DETAIL 1"
# mounts_assertion: one bind mount.
js=$(dry --script foo.py --mounts type=bind,src=/dst,dst=/dst,readonly)
t_expect_eq "mounts: 1 mount" "$(get "$js" 'len(r["mounts"]), r["mounts"][0]["read_only"]' | tr -d "(),'")" "1 True"
# errors: neither or both of --script/-m.
dry >/dev/null 2>"$T_DIR/err"; t_expect_eq "neither --script nor -m: exit 2" "$?" 2
t_expect_match "... TorchX's message" "$(cat "$T_DIR/err")" 'exactly one of --script and -m must be specified'
t_done
