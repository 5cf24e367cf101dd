#!/usr/bin/env bash
# The acceptance of issue 26: the trn1 tutorial's own TorchX component
# (tests/fixtures/torchx/trn1_dist_ddp.py:generateAppDef, unchanged) dry-runs on Kubernetes to
# the same Volcano Job as muster's aws.trn1_ddp with the same parameters, for the tutorial's
# precompile and training steps and both instance types. The tutorial rendezvouses through the
# etcd v2 API at etcd-server:2379 with torchrun, so aws.trn1_ddp runs with --launcher torchrun
# and -cfg rdzv=etcd-server:2379 (what `muster deploy rendezvous --name etcd-server` serves).
# The diff is of the parsed manifests, field by field; the one difference allowed is the form of
# the container command: the tutorial hands one shell line to `bash -c` (or to
# neuron_parallel_compile), aws.trn1_ddp the same words as an argument list, so the tutorial's
# line is split as the shell splits it and must then give exactly aws.trn1_ddp's command. Both
# manifests are valid Volcano Jobs (the v1.15.1 schema validator).
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_need_py yaml python3-yaml
t_need_validator
export HOME=$T_DIR MUSTERCONFIG= MUSTER_APP_ID_SUFFIX=pinned42
cd "$T_DIR" || exit 1
TRN=$MU_SOURCE_DIR/tests/fixtures/torchx/trn1_dist_ddp.py:generateAppDef
ECR=123456789012.dkr.ecr.us-west-2.amazonaws.com/eks_torchx_tutorial
SA="--batch_size 16 --grad_accum_usteps 32 --data_dir /data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128 --output_dir /data/output"

render() { # out component args...
  local out=$1
  shift
  "$MUSTER" run -s kubernetes --dryrun --json -cfg queue=test,rdzv=etcd-server:2379 "$@" \
    >"$T_DIR/$out.json" 2>"$T_DIR/$out.err" || { cat "$T_DIR/$out.err"; return 1; }
  "$PY" -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["request"])' \
    <"$T_DIR/$out.json" >"$T_DIR/$out.yaml"
}

same_job() { # name tutorial.yaml trn1_ddp.yaml precompile(0/1)
  "$PY" - "$2" "$3" "$4" <<'PYEOF'
import copy, shlex, sys, yaml
tut = yaml.safe_load(open(sys.argv[1]))
ours = yaml.safe_load(open(sys.argv[2]))
pre = sys.argv[3] == "1"
errs = []

def diff(a, b, path):
    if type(a) != type(b):
        errs.append("%s: %r != %r" % (path, a, b))
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                errs.append("%s.%s: only in the %s" % (path, k, "tutorial's" if k in a else "aws.trn1_ddp's"))
            else:
                diff(a[k], b[k], "%s.%s" % (path, k))
    elif isinstance(a, list):
        if len(a) != len(b):
            errs.append("%s: %d items != %d items" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i))
    elif a != b:
        errs.append("%s: %r != %r" % (path, a, b))

# The command's form: `bash -c LINE` / `neuron_parallel_compile LINE` -> the words of LINE.
for t in tut["spec"]["tasks"]:
    c = t["template"]["spec"]["containers"][0]
    cmd = c["command"]
    if pre:
        assert cmd[0] == "neuron_parallel_compile" and len(cmd) == 2, cmd
        c["command"] = [cmd[0]] + shlex.split(cmd[1])
    else:
        assert cmd[:2] == ["bash", "-c"] and len(cmd) == 3, cmd
        c["command"] = shlex.split(cmd[2])
# The app as submitted (muster.dev/app, for describe) is each component's own spec: the
# tutorial's command is one shell line, aws.trn1_ddp's a list of words; the pods are compared.
for d in (tut, ours):
    d["metadata"].get("annotations", {}).pop("muster.dev/app", None)
    if not d["metadata"].get("annotations", True):
        del d["metadata"]["annotations"]
diff(tut, ours, "")
for e in errs:
    print("  differs:", e)
sys.exit(1 if errs else 0)
PYEOF
}

for itype in trn1.32xlarge trn1n.32xlarge; do
  for step in precompile train; do
    name=bert$step
    pre=0 flags=() sa=$SA
    if [ $step = precompile ]; then pre=1 flags=(--precompile True) sa="$SA --steps_this_run 10"; fi
    args=(--name "$name" --script_args "$sa" --nnodes 2 --nproc_per_node 32
          --image "$ECR:bert_pretrain" --script dp_bert_large_hf_pretrain_hdf5.py --bf16 True
          --cacheset bert-large --instance_type "$itype" "${flags[@]}")
    render "tut-$itype-$step" "$TRN" "${args[@]}" &&
      t_ok "$itype $step: the tutorial's component renders" ||
      t_fail "$itype $step: the tutorial's component renders"
    render "ours-$itype-$step" aws.trn1_ddp --launcher torchrun "${args[@]}" &&
      t_ok "$itype $step: aws.trn1_ddp renders" || t_fail "$itype $step: aws.trn1_ddp renders"
    if same_job "$itype $step" "$T_DIR/tut-$itype-$step.yaml" "$T_DIR/ours-$itype-$step.yaml" \
      "$pre" >"$T_DIR/diff"; then
      t_ok "$itype $step: the same Volcano Job (command split as the shell splits it)"
    else
      t_fail "$itype $step: the same Volcano Job: $(head -20 "$T_DIR/diff")"
    fi
  done
done

# The comparison can fail: a parameter that differs is found.
render tut-x "$TRN" --name bertx --script_args "$SA" --nnodes 2 --nproc_per_node 32 \
  --image "$ECR:bert_pretrain" --script dp_bert_large_hf_pretrain_hdf5.py --cacheset other
render ours-x aws.trn1_ddp --launcher torchrun --name bertx --script_args "$SA" --nnodes 2 \
  --nproc_per_node 32 --image "$ECR:bert_pretrain" --script dp_bert_large_hf_pretrain_hdf5.py \
  --cacheset bert-large
same_job x "$T_DIR/tut-x.yaml" "$T_DIR/ours-x.yaml" 0 >"$T_DIR/diff"
t_expect_eq "a different --cacheset is a difference" "$?" 1
t_expect_match "... named with its field" "$(cat "$T_DIR/diff")" \
  "env\[[0-9]+\]\.value: '--cache_dir=/data/neuron_cache/other_0' != '--cache_dir=/data/neuron_cache/bert-large_0'"

# Both are valid Volcano Jobs.
if node "$VALIDATOR" --modules "$MODS/node_modules" "$T_DIR"/tut-*-train.yaml \
  "$T_DIR"/tut-*-precompile.yaml >"$T_DIR/validate.log" 2>&1; then
  t_ok "the tutorial's manifests pass the Volcano schema"
else
  t_fail "Volcano schema: $(tail -5 "$T_DIR/validate.log")"
fi
t_done
