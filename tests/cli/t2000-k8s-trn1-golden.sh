#!/usr/bin/env bash
# The trn1 tutorial's precompile and training jobs (reference/trn1-tutorial.md §1) through
# `muster run -s kubernetes --dryrun` with the aws.trn1_ddp component: the manifests equal the
# goldens in tests/golden/trn1/ as parsed YAML, and the tutorial's Neuron/EFA limits, env,
# mounts and command are checked field by field.
. "$(dirname "$0")/../lib.sh"
G=$MU_SOURCE_DIR/tests/golden/trn1
ECR=123456789012.dkr.ecr.us-west-2.amazonaws.com/eks_torchx_tutorial
SA=(--batch_size 16 --grad_accum_usteps 32
    --data_dir /data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128 --output_dir /data/output)

render() { # out-file app-id component-args...
  local out=$1 id=$2; shift 2
  MUSTER_APP_ID=$id "$MUSTER" run -s kubernetes --dryrun --json -cfg queue=test,muster_image=muster:0.1.0 aws.trn1_ddp \
    "$@" >"$T_DIR/$out.json" 2>"$T_DIR/$out.err" || { cat "$T_DIR/$out.err"; return 1; }
  $PY -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["request"])' \
    <"$T_DIR/$out.json" >"$T_DIR/$out.yaml"
}
common=(--nnodes 2 --nproc_per_node 32 --image "$ECR:bert_pretrain"
        --script dp_bert_large_hf_pretrain_hdf5.py --bf16 --cacheset bert-large
        --instance_type trn1.32xlarge)
render precompile bertcompile-42 --name bertcompile "${common[@]}" --precompile -- \
  "${SA[@]}" --steps_this_run 10 && t_ok "precompile renders" || t_fail "precompile renders"
render train berttrain-42 --name berttrain "${common[@]}" -- "${SA[@]}" &&
  t_ok "train renders" || t_fail "train renders"

check() { # yaml golden precompile(0/1)
  $PY - "$1" "$2" "$3" <<'PYEOF'
import sys, yaml
got = yaml.safe_load(open(sys.argv[1]))
want = yaml.safe_load(open(sys.argv[2]))
pre = sys.argv[3] == "1"
errs = []
def expect(what, cond):
    if not cond:
        errs.append(what)
expect("equals the golden %s" % sys.argv[2], got == want)
spec = got["spec"]
expect("queue test", spec["queue"] == "test")
expect("schedulerName volcano", spec["schedulerName"] == "volcano")
expect("maxRetry 3", spec["maxRetry"] == 3)
names = [t["name"] for t in spec["tasks"]]
expect("tasks musterd, role1-0, role1-1: %s" % names, names == ["musterd", "role1-0", "role1-1"])
expect("minSuccess 2 (the workers)", spec.get("minSuccess") == 2)
rd = spec["tasks"][0]["template"]["spec"]["containers"][0]
expect("musterd readiness probe on /healthz", rd["readinessProbe"]["httpGet"]["path"] == "/healthz")
job = got["metadata"]["name"]
for i, t in enumerate(spec["tasks"][1:]):
    pod = t["template"]["spec"]
    c = pod["containers"][0]
    lim = c["resources"]["limits"]
    expect("neuron limit 16", lim.get("aws.amazon.com/neuron") == "16")
    expect("efa limit 8", lim.get("vpc.amazonaws.com/efa") == "8")
    expect("no cpu/memory requests (TorchX cpu=0, memMB=0)", "cpu" not in c["resources"]["requests"])
    expect("nodeSelector trn1.32xlarge",
           pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "trn1.32xlarge"})
    env = {e["name"]: e.get("value") for e in c["env"]}
    for k, v in {"CCOM_SOCKET_IFNAME": "eth0", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_PROVIDER": "efa",
                 "FI_EFA_FORK_SAFE": "1", "NEURON_RT_RESET_CORES": "1",
                 "XLA_TRANSFER_SEED_ASYNC": "1", "XLA_DOWNCAST_BF16": "1",
                 "NEURON_CC_FLAGS": "--cache_dir=/data/neuron_cache/bert-large_%d" % i,
                 "TRANSFORMERS_CACHE": "/data/transformers_cache/bert-large_%d" % i}.items():
        expect("env %s=%s on replica %d (got %r)" % (k, v, i, env.get(k)), env.get(k) == v)
    expect("TORCHX_RANK0_HOST only on replica 0", ("TORCHX_RANK0_HOST" in env) == (i == 0))
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    expect("/data mounted read-write", "/data" in mounts and mounts["/data"]["readOnly"] is False)
    vols = {v["name"]: v for v in pod["volumes"]}
    expect("fsx-claim PVC", vols[mounts["/data"]["name"]]["persistentVolumeClaim"]["claimName"] == "fsx-claim")
    cmd = c["command"]
    head = ["neuron_parallel_compile"] if pre else []
    expect("command starts %s /muster/bin/muster agent" % head,
           cmd[:len(head) + 2] == head + ["/muster/bin/muster", "agent"])
    init = pod.get("initContainers", [{}])[0]
    expect("init container copies the agent from the muster image",
           init.get("image") == "muster:0.1.0" and init.get("command", [])[1:3] == ["deploy", "agent"])
    expect("the agent's emptyDir at /muster", mounts.get("/muster", {}).get("readOnly") is True)
    expect("agent at the job's musterd",
           cmd[cmd.index("--rdzv-endpoint") + 1] == "%s-musterd-0.%s:29400" % (job, job))
    expect("--rdzv-id is the job name", cmd[cmd.index("--rdzv-id") + 1] == job)
    expect("2 nodes x 32 workers", cmd[cmd.index("--nnodes") + 1] == "2"
           and cmd[cmd.index("--nproc-per-node") + 1] == "32")
    tail = cmd[cmd.index("--") + 1:]
    want_tail = ["python3", "-u", "dp_bert_large_hf_pretrain_hdf5.py", "--batch_size", "16",
                 "--grad_accum_usteps", "32", "--data_dir",
                 "/data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128", "--output_dir",
                 "/data/output"] + (["--steps_this_run", "10"] if pre else [])
    expect("worker command is a real argument list: %s" % tail, tail == want_tail)
for e in errs:
    print("  mismatch:", e)
sys.exit(1 if errs else 0)
PYEOF
}
check "$T_DIR/precompile.yaml" "$G/precompile.yaml" 1 && t_ok "precompile manifest" ||
  t_fail "precompile manifest"
check "$T_DIR/train.yaml" "$G/train.yaml" 0 && t_ok "train manifest" || t_fail "train manifest"

# TorchX parity: the tutorial's --script_args "A B" string (split as a shell line) renders the
# same manifests as the script arguments after '--'.
render precompile-sa bertcompile-42 --name bertcompile "${common[@]}" --precompile True \
  --script_args "--batch_size 16 --grad_accum_usteps 32 \
        --data_dir /data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128 \
        --output_dir /data/output --steps_this_run 10" &&
  check "$T_DIR/precompile-sa.yaml" "$G/precompile.yaml" 1 &&
  t_ok "precompile with the tutorial's --script_args string" ||
  t_fail "precompile with the tutorial's --script_args string"
render train-sa berttrain-42 --name berttrain "${common[@]}" \
  --script_args "--batch_size 16 --grad_accum_usteps 32 --data_dir" -- \
  /data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128 --output_dir /data/output &&
  check "$T_DIR/train-sa.yaml" "$G/train.yaml" 0 &&
  t_ok "train with --script_args then '--' arguments" ||
  t_fail "train with --script_args then '--' arguments"
render q q-42 --nnodes 1 --image i --script t.py --script_args "--msg 'a b' \"c'd\" e\\ f"
cmd=$($PY -c 'import sys,yaml; d=yaml.safe_load(open(sys.argv[1])); c=d["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["command"]; print(c[c.index("t.py")+1:])' "$T_DIR/q.yaml")
t_expect_eq "--script_args: quotes and backslashes as a shell" "$cmd" "['--msg', 'a b', \"c'd\", 'e f']"
out=$("$MUSTER" run -s kubernetes --dryrun -cfg queue=test,muster_image=muster:0.1.0 aws.trn1_ddp --nnodes 1 --image i \
  --script t.py --script_args "--msg 'oops" 2>&1)
t_expect_eq "--script_args with an open quote: exit 2" "$?" 2
t_expect_match "--script_args with an open quote: named" "$out" \
  "argument '--script_args': cannot split '--msg 'oops' into arguments: an unterminated ' quote"

# --cacheset must match [A-Za-z0-9_-]+ (TorchX raises ValueError): it becomes a path on /data.
for bad in "../x" "a b" "x/y" ""; do
  out=$("$MUSTER" run -s kubernetes --dryrun -cfg queue=test,muster_image=muster:0.1.0 aws.trn1_ddp --nnodes 1 --image i \
    --script t.py --cacheset "$bad" 2>&1)
  t_expect_eq "--cacheset '$bad': exit 2" "$?" 2
  t_expect_match "--cacheset '$bad': names the parameter, value and pattern" "$out" \
    "argument '--cacheset': '$bad' does not match the pattern \[A-Za-z0-9_-\]\+"
done

# trn1.2xlarge: one Neuron device, no EFA (the tutorial refused it); trn1n: 16 EFA.
render small small-42 --nnodes 1 --nproc_per_node 2 --image img --script t.py \
  --instance_type trn1.2xlarge && t_ok "trn1.2xlarge renders" || t_fail "trn1.2xlarge renders"
small=$($PY -c 'import sys,yaml; d=yaml.safe_load(open(sys.argv[1])); c=d["spec"]["tasks"][1]["template"]["spec"]["containers"][0]
env={e["name"] for e in c["env"]}; print(c["resources"]["limits"], "FI_PROVIDER" in env)' "$T_DIR/small.yaml")
t_expect_eq "trn1.2xlarge: 1 device, no EFA" "$small" "{'aws.amazon.com/neuron': '1'} False"
render big big-42 --nnodes 1 --image img --script t.py --instance_type trn1n.32xlarge
big=$($PY -c 'import sys,yaml; d=yaml.safe_load(open(sys.argv[1])); print(d["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"]["limits"])' "$T_DIR/big.yaml")
t_expect_eq "trn1n.32xlarge: 16 devices, 16 EFA" "$big" \
  "{'aws.amazon.com/neuron': '16', 'vpc.amazonaws.com/efa': '16'}"
out=$("$MUSTER" run -s kubernetes --dryrun -cfg queue=test,muster_image=muster:0.1.0 aws.trn1_ddp --nnodes 1 --image i \
  --script t.py --instance_type p4d.24xlarge 2>&1)
t_expect_match "unknown instance type is refused" "$out" "instance_type.*trn1.32xlarge"

# torchrun instead of muster agent: torch.distributed.run with the etcd backend on musterd.
render tr tr-42 --nnodes 2 --image img --script t.py --launcher torchrun -- --x 1
cmd=$($PY -c 'import sys,yaml; d=yaml.safe_load(open(sys.argv[1])); print(" ".join(d["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["command"]))' "$T_DIR/tr.yaml")
t_expect_eq "torchrun launcher" "$cmd" "python3 -m torch.distributed.run --rdzv_backend etcd --rdzv_endpoint tr-42-musterd-0.tr-42:29400 --rdzv_id tr-42 --nnodes 2 --nproc_per_node 32 --tee 3 --role  t.py --x 1"
t_done
