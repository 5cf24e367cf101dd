#!/usr/bin/env bash
# TorchX Python components (`muster run FILE.py:FUNCTION`, spec/component_py.c and the shim in
# launcher/spec/python): the trn1 tutorial's component (tests/fixtures/torchx/trn1_dist_ddp.py)
# unchanged, its arguments read from the signature (--help, required, bools as TorchX), on the
# local and Slurm schedulers (Kubernetes: t2060); components that use each name the shim
# provides (tests/fixtures/torchx/names.py), TorchX's argument types, a real local run, and every
# error a component can make, each named. Real python3 (Debian's, /usr/bin/python3).
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_need_cmd "$PY" python3
t_local_jobs
export MUSTER_APP_ID_SUFFIX=pinned42
F=$MU_SOURCE_DIR/tests/fixtures/torchx
N=$F/names.py
TRN=$F/trn1_dist_ddp.py:generateAppDef

# dry APP ARGS...: `muster run --dryrun --json`, the JSON in $T_DIR/out.json, stderr in err.
dry() {
  "$MUSTER" run --dryrun --json "$@" >"$T_DIR/out.json" 2>"$T_DIR/err"
}
# role EXPR: a Python expression over r (the first role) and d (the whole answer).
role() {
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['app']['roles'][0]; print($1)" \
    "$T_DIR/out.json" 2>&1
}
# err_is NAME REGEX CMD...: exit 2 and a message matching REGEX.
err_is() {
  local name=$1 want=$2
  shift 2
  "$@" >"$T_DIR/out" 2>"$T_DIR/err"
  local rc=$?
  t_expect_eq "$name: exit 2" "$rc" 2
  t_expect_match "$name: message" "$(cat "$T_DIR/err")" "$want"
}

# ---- the tutorial's component, unchanged
help=$("$MUSTER" run "$TRN" --help)
t_expect_match "tutorial --help: usage names the component" "$help" \
  "usage: muster run \[RUN OPTIONS\] .*trn1_dist_ddp.py:generateAppDef"
t_expect_match "tutorial --help: no default means required" "$help" \
  '--script_args STR +\(required\)'
t_expect_match "tutorial --help: int" "$help" '--nnodes INT +\(required\)'
t_expect_match "tutorial --help: bool default False" "$help" '--precompile \[BOOL\] +\(default: False\)'
t_expect_match "tutorial --help: str default" "$help" '--instance_type STR +\(default: trn1.32xlarge\)'
A=(--name berttrain --script_args "--batch_size 16 --output_dir /data/output" --nnodes 2
   --nproc_per_node 32 --image img:1 --script dp_bert.py)
dry "$TRN" "${A[@]}" --bf16 True --cacheset bert-large
t_expect_eq "tutorial: local dryrun exits 0" "$?" 0
t_expect_eq "tutorial: its prints go to stderr, not into the JSON" \
  "$(grep -c '^resourcedef: Resource(cpu=0' "$T_DIR/err")" 1
t_expect_eq "tutorial: bash -c with the joined command line" "$(role 'r["entrypoint"], r["args"][0]')" \
  "bash -c"
t_expect_eq "tutorial: the command" "$(role 'r["args"][1]')" \
  "python3 -m torch.distributed.run --rdzv_backend etcd --rdzv_endpoint etcd-server:2379 --rdzv_id '\${app_id}' --nnodes 2 --nproc_per_node 32 --tee 3 --role '' dp_bert.py --batch_size 16 --output_dir /data/output"
t_expect_eq "tutorial: --bf16 True" "$(role 'r["env"]["XLA_DOWNCAST_BF16"]')" 1
t_expect_eq "tutorial: cache per replica" "$(role 'r["env"]["NEURON_CC_FLAGS"]')" \
  '--cache_dir=/data/neuron_cache/bert-large_${replica_id}'
t_expect_eq "tutorial: nodes, retries, policy" \
  "$(role 'r["num_replicas"], r["max_retries"], r["retry_policy"], r["min_replicas"]')" \
  "2 3 APPLICATION None"
t_expect_eq "tutorial: devices and instance type" \
  "$(role 'r["resource"]["devices"], r["resource"]["capabilities"]')" \
  "{'aws.amazon.com/neuron': 16, 'vpc.amazonaws.com/efa': 8} {'node.kubernetes.io/instance-type': 'trn1.32xlarge'}"
t_expect_eq "tutorial: cpu 0 kept, memMB 0 is no request" \
  "$(role 'r["resource"]["cpu"], r["resource"]["memMB"]')" "0 -1"
t_expect_eq "tutorial: the shared volume" "$(role 'r["mounts"]')" \
  "[{'type': 'volume', 'src': 'fsx-claim', 'dst_path': '/data', 'read_only': False}]"
t_expect_eq "tutorial: the local plan has both replicas" \
  "$("$PY" -c 'import json,re,sys; print(len(re.findall(r"(?m)^  role1/[01]: bash -c ", json.load(open(sys.argv[1]))["request"])))' \
    "$T_DIR/out.json")" 2
dry "$TRN" "${A[@]}" --precompile True
t_expect_eq "tutorial --precompile True: one argument for neuron_parallel_compile" \
  "$(role 'r["entrypoint"], len(r["args"])')" "neuron_parallel_compile 1"
dry "$TRN" "${A[@]}" --bf16 False
t_expect_eq "tutorial --bf16 False: no XLA_DOWNCAST_BF16" "$(role '"XLA_DOWNCAST_BF16" in r["env"]')" False
err_is "tutorial: its own check (cacheset)" \
  "trn1_dist_ddp.py:[0-9]+: generateAppDef raised ValueError: Error: please make sure that 'cacheset'" \
  "$MUSTER" run --dryrun "$TRN" "${A[@]}" --cacheset "a/b"
err_is "tutorial: trn1.2xlarge refused by the component itself" \
  "generateAppDef raised Exception: Instance type trn1.2xlarge is not supported" \
  "$MUSTER" run --dryrun "$TRN" "${A[@]}" --instance_type trn1.2xlarge
err_is "tutorial: a required argument missing" "missing required argument --image" \
  "$MUSTER" run --dryrun "$TRN" --name x --script_args "" --nnodes 1 --nproc_per_node 1 --script s
err_is "tutorial: an unknown argument, with the closest" \
  "unknown argument '--nnode'; did you mean '--nnodes'" \
  "$MUSTER" run --dryrun "$TRN" "${A[@]}" --nnode 2
err_is "tutorial: --nnodes not an int" "argument '--nnodes' expects an int, got 'two'" \
  "$MUSTER" run --dryrun "$TRN" --name x --script_args "" --nnodes two --nproc_per_node 1 \
  --script s --image i
out=$("$MUSTER" run -s slurm --dryrun "$TRN" "${A[@]}" 2>/dev/null)
t_expect_match "tutorial: Slurm dryrun, a het group per node" "$out" '#SBATCH hetjob'
t_expect_match "tutorial: Slurm dryrun, the command" "$out" \
  "bash -c 'python3 -m torch.distributed.run --rdzv_backend etcd --rdzv_endpoint etcd-server:2379"
# [component:NAME] defaults apply to a Python component as to a YAML one.
cat >"$T_DIR/.musterconfig" <<EOF
[component:$TRN]
image = from-config:2
EOF
dry "$TRN" --name x --script_args "" --nnodes 1 --nproc_per_node 2 --script s.py
t_expect_eq "[component:FILE.py:FUNCTION] supplies a required argument" "$(role 'r["image"]')" \
  from-config:2
rm "$T_DIR/.musterconfig"

# ---- argument types as TorchX reads them (signature and Google docstring)
help=$("$MUSTER" run "$N:model" --help)
t_expect_match "--help: the docstring's description" "$help" 'Every argument type, echoed back\.'
t_expect_match "--help: an argument's help, continued lines joined" "$help" \
  '--msg STR +the message to print \(default: hello\)'
t_expect_match "--help: a one-letter name gets -n too" "$help" '-n, --n INT'
t_expect_match "--help: float" "$help" '--ratio FLOAT +a float \(default: 0\.5\)'
t_expect_match "--help: list" "$help" '--ports LIST +a list of int'
t_expect_match "--help: map" "$help" '--env MAP +a map'
t_expect_match "--help: *args are the script arguments" "$help" '\[-- words\.\.\.\]'
dry "$N:model" --msg yo -n 2 --ratio 1.5 --loud --tags a,b --ports 1,2 --env 'X=1,Y="a=b"' \
  --limits a=1,b=2 -- w1 --w2
t_expect_eq "every type: the values the function saw" "$(role 'r["args"]')" \
  "['YO', 'ratio=1.5', 'tags=a,b', 'ports=3', 'limits=3', 'w1', '--w2']"
t_expect_eq "every type: int and map" "$(role 'r["num_replicas"], r["env"]["X"], r["env"]["Y"]')" \
  "2 1 a=b"
dry "$N:model"
t_expect_eq "defaults: the function's own" "$(role 'r["args"], r["num_replicas"]')" \
  "['hello', 'ratio=0.5', 'tags=', 'ports=0', 'limits=0'] 1"
dry "$N:model" --loud False --ratio=2
t_expect_eq "--loud False, --ratio=2" "$(role 'r["args"][:2]')" "['hello', 'ratio=2.0']"
err_is "a list of int with a word" "argument '--ports': 'x' is not an int" \
  "$MUSTER" run --dryrun "$N:model" --ports 1,x
err_is "a float that is not" "argument '--ratio' expects a number, got 'half'" \
  "$MUSTER" run --dryrun "$N:model" --ratio half
err_is "a bool that is not" "argument '--loud' is a bool and takes true/false, 1/0, yes/no or on/off .*, got 'maybe'" \
  "$MUSTER" run --dryrun "$N:model" --loud=maybe
dry "$N:from_dataclass" --lr 0.1 --tags a -- x
t_expect_eq "one dataclass argument: its fields" "$(role 'r["args"]')" \
  "['lr=0.1', 'steps=10', 'tags=a', 'x']"

# ---- each name the shim provides
dry "$N:macro_names"
t_expect_eq "specs.macros" "$(role 'r["args"]')" \
  "['\${app_id}', '\${replica_id}', '\${img_root}', '\${rank0_env}', '\${rdzv_endpoint}', '\${num_replicas}', '\$\${literal}']"
t_expect_eq "macros.Values.substitute" "$(role 'r["env"]["SUB"]')" 'app-1/3//root/R0/${x}'
dry "$N:resources"
t_expect_eq "named resources, Resource, resource(), sentinels" "$(role 'r["args"]')" \
  "['small=8/1/32768', 'p4d=96/8/1132416/p4d.24xlarge/4', 'trn=8/16/trn1.32xlarge', 'trn1n=16', 'copy=yes/1', 'resource=4/0/1024', 'default=2/0/1024', 'named=1', 'null=-1', 'has=True/False', 'tables=True/True', 'sentinels=all/<MISSING>/<NONE>/-1']"
t_expect_eq "a named resource as the role's resource" \
  "$(role 'r["resource"]["cpu"], r["resource"]["devices"]')" \
  "128 {'vpc.amazonaws.com/efa': 8, 'aws.amazon.com/neuron': 16}"
err_is "named_resources: unknown name, the closest" \
  "bad_named raised KeyError: 'No named resource found for .gpu.smal.. Did you mean .gpu.small.\?'" \
  "$MUSTER" run --dryrun "$N:bad_named"
dry "$N:mounts_and_policy"
t_expect_eq "mounts (classes and parse_mounts)" "$(role '[(m["type"], m.get("src_path", m.get("src")), m["dst_path"], m.get("read_only", m.get("permissions"))) for m in r["mounts"]]')" \
  "[('bind', '/etc', '/etc2', True), ('volume', 'pvc', '/v', False), ('device', '/dev/null', '/dev/n', 'r'), ('bind', '/host,with,commas', '/in', True), ('volume', 'claim', '/data', False), ('device', '/dev/fuse', '/dev/fuse', 'rw')]"
t_expect_eq "RetryPolicy, retries, replicas, ports, metadata" \
  "$(role 'r["retry_policy"], r["max_retries"], r["min_replicas"], r["num_replicas"], r["port_map"], r["metadata"], d["app"]["metadata"]')" \
  "REPLICA 2 1 3 {'http': 8080} {'k8s.x': '1', 'nested': '{\"a\": [1, 2]}'} {'owner': 'me'}"
dry "$N:states"
t_expect_eq "AppState, is_terminal, handles, IMAGE, version" "$(role 'r["args"]')" \
  "['FAILED', '4', 'True/False', 'True', 'local://muster/x-1', 'ghcr.io/pytorch/torchx:0.7.0', '0.7.0', '0.7.0']"
dry "$N:structured" --name exp/run
t_expect_eq "structured_arg: name and -j from the GPU count" "$(role 'r["args"]')" \
  "['exp', 'run', 'exp/run', '2x4', 'warned=0']"
dry "$N:structured" --j 2x3
t_expect_eq "structured_arg: -j NxP other than the GPUs warns" "$(role 'r["args"][-2:]')" \
  "['2x3', 'warned=1']"

# dist.ddp builds muster's dist.ddp: the same app as `muster builtins --build dist.ddp`.
dry "$N:plain_ddp" --script t.py -j 2x3 --name exp/r
role 'json.dumps(d["app"], sort_keys=True)' >"$T_DIR/shim.json"
"$MUSTER" builtins --build dist.ddp --script t.py -j 2x3 --name exp/r --debug \
  --mounts type=volume,src=pvc,dst=/data --env 'A="1,2",B="x=y"' -- --lr 0.1 >"$T_DIR/yaml.json"
"$PY" - "$T_DIR/shim.json" "$T_DIR/yaml.json" >"$T_DIR/cmp" <<'PY'
import json, sys
shim = json.loads(open(sys.argv[1]).read())
yaml = json.load(open(sys.argv[2]))
shim["roles"][0]["env"].pop("MUSTER_JOB_ID")  # muster run's, not the component's
print("same" if shim == yaml else "differ:\n%s\n%s" % (json.dumps(shim), json.dumps(yaml)))
PY
t_expect_eq "torchx.components.dist.ddp == muster's dist.ddp" "$(cat "$T_DIR/cmp")" same
# ... and takes every parameter of components/dist.ddp.yaml (its default, or a value), so it
# follows the YAML as parameters are added there.
"$PY" - "$MU_SOURCE_DIR/components/dist.ddp.yaml" >"$T_DIR/every" <<'PY'
import json, sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
given = {"script": "t.py", "nnodes": "1:2", "nproc_per_node": 3, "env": {"K": "v"},
         "mounts": ["type=volume", "src=pvc", "dst=/d"], "h": "gpu.small", "name": "e/r"}
kw, cli = {}, []
for p in c["params"]:
    n, t = p["name"], p.get("type", "str")
    if p.get("remainder") or n == "m":  # script arguments go after --; -m excludes --script
        continue
    v = given.get(n, p.get("default"))
    if v is None:
        v = {"int": 1, "bool": True, "list": ["a"], "map": {"A": "1"}}.get(t, "x")
    if t == "bool":
        v = str(v).lower() in ("true", "1", "yes", "on")
    elif t == "int":
        v = int(v)
    kw[n] = v
    text = ("True" if v else "False") if t == "bool" else \
        ",".join(v) if isinstance(v, list) else \
        ",".join("%s=%s" % i for i in v.items()) if isinstance(v, dict) else str(v)
    cli.append("--%s=%s" % (n, text))
print(json.dumps(kw))
print("\n".join(cli))
PY
every=$(head -1 "$T_DIR/every")
mapfile -t every_cli < <(tail -n +2 "$T_DIR/every")
dry "$N:ddp_kwargs" --kwargs "$every" --args=--lr,0.1
t_expect_eq "torchx.components.dist.ddp takes every parameter of dist.ddp.yaml" "$?" 0
role 'json.dumps(d["app"], sort_keys=True)' >"$T_DIR/shim.json"
"$MUSTER" builtins --build dist.ddp "${every_cli[@]}" -- --lr 0.1 >"$T_DIR/yaml.json"
"$PY" - "$T_DIR/shim.json" "$T_DIR/yaml.json" >"$T_DIR/cmp" <<'PY'
import json, sys
shim = json.loads(open(sys.argv[1]).read())
yaml = json.load(open(sys.argv[2]))
shim["roles"][0]["env"].pop("MUSTER_JOB_ID")
print("same" if shim == yaml else "differ:\n%s\n%s" % (json.dumps(shim), json.dumps(yaml)))
PY
t_expect_eq "... and builds the app the YAML builds with them" "$(cat "$T_DIR/cmp")" same
dry "$N:wrapped_ddp" --script t.py --env K=v
t_expect_eq "a wrapper edits the ddp app" "$(role 'r["env"]["WRAPPED"], r["env"]["K"], r["max_retries"], r["args"][-2:]')" \
  "1 v 2 ['--lr', '0.1']"
dry "$N:ddp_extras" --script t.py
t_expect_eq "ddp takes the YAML's own parameters by keyword" \
  "$(role 'r["entrypoint"], r["num_replicas"], r["min_replicas"], r["env"]["XLA_DOWNCAST_BF16"]')" \
  "torchrun 3 1 1"
t_expect_match "ddp: TorchX's rdzv_port is noted, not silently dropped" "$(cat "$T_DIR/err")" \
  'note: dist.ddp: rdzv_port=29500 has no effect'
err_is "ddp: a parameter muster's dist.ddp lacks" \
  "ddp_bad raised ValueError: dist.ddp: unknown argument '--nprocs=3'" \
  "$MUSTER" run --dryrun "$N:ddp_bad" --script t.py
err_is "ddp: rdzv_conf refused" "rdzv_conf is not supported by muster" \
  "$MUSTER" run --dryrun "$N:ddp_conf" --script t.py
dry "$N:spmd_app" --script t.py
t_expect_eq "dist.spmd: -j 2 on gpu.medium is 2x2" "$(role 'r["num_replicas"], r["resource"]["gpu"]')" \
  "2 2"
for w in echo sh python booth tensorboard; do
  dry "$N:utils_apps" --which "$w"
  t_expect_eq "utils/metrics $w: built by muster's YAML builtin" "$?" 0
done
dry "$N:utils_apps" --which sh
t_expect_eq "utils.sh: the shell line" "$(role 'r["entrypoint"], r["args"], r["num_replicas"]')" \
  "sh ['-c', 'echo a b'] 2"

# ---- what is not provided, and other errors: each named
printf 'import torchx.schedulers\n' >"$T_DIR/imp1.py"
err_is "a torchx module the shim lacks" \
  "imp1.py:1: torchx.schedulers is not provided by muster's TorchX shim" \
  "$MUSTER" run --dryrun "$T_DIR/imp1.py:f"
printf 'from torchx.specs import runopts\n' >"$T_DIR/imp2.py"
err_is "a torchx name the shim lacks" "imp2.py:1: torchx.specs.runopts is not provided" \
  "$MUSTER" run --dryrun "$T_DIR/imp2.py:f"
printf 'from torchx.components.utils import touch\n' >"$T_DIR/imp3.py"
err_is "a torchx builtin the shim lacks" "torchx.components.utils.touch is not provided" \
  "$MUSTER" run --dryrun "$T_DIR/imp3.py:f"
printf 'import torchx.specs as s\ndef f() -> s.AppDef:\n    return s.runopts()\n' >"$T_DIR/imp4.py"
err_is "a torchx attribute used at call time" \
  "imp4.py:3: f raised AttributeError: torchx.specs.runopts is not provided" \
  "$MUSTER" run --dryrun "$T_DIR/imp4.py:f"
printf 'import no_such_module_here\n' >"$T_DIR/imp5.py"
err_is "another missing module: which python lacks it" \
  "imp5.py:1: No module named 'no_such_module_here'.*/usr/bin/python3 cannot import" \
  "$MUSTER" run --dryrun "$T_DIR/imp5.py:f"
cat >"$T_DIR/bad.py" <<'PY'
from typing import Any
import torchx.specs as specs
def untyped(x) -> specs.AppDef: ...
def anytype(x: Any) -> specs.AppDef: ...
def noreturn(x: int): ...
def kw(**k: str) -> specs.AppDef: ...
def notapp() -> specs.AppDef:
    return 3
def over() -> specs.AppDef:
    return specs.AppDef("o", [specs.Role("r", "i", entrypoint="e", overrides={"k": 1})])
def noentry() -> specs.AppDef:
    return specs.AppDef("o", [specs.Role("r", "i")])
def multi() -> specs.AppDef:
    return specs.AppDef("m", [specs.Role("r", "i", entrypoint="e", num_replicas=2,
                                         resource=specs.named_resources["aws_trn1.2xlarge"])])
PY
err_is "no annotation" "bad.py:untyped: argument 'x' has no type annotation" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:untyped"
err_is "a type TorchX refuses" "argument 'x' has type Any, which a component cannot take" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:anytype"
err_is "not annotated -> AppDef" "must be annotated '-> AppDef'" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:noreturn"
err_is "**kwargs" "\*\*k: a component cannot take \*\*kwargs" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:kw"
err_is "returns no AppDef" "returned int, not a torchx.specs.AppDef" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:notapp"
err_is "Role.overrides cannot be honoured" "roles\[0\] \(r\).overrides: \['k'\]" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:over"
err_is "no entrypoint" "roles\[0\] \(r\).entrypoint: not set" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:noentry"
err_is "named_resources aws_trn1.2xlarge on 2 nodes" \
  "roles\[0\].num_replicas: 2 nodes of trn1.2xlarge, which has no EFA adapter" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:multi"
err_is "no such function: the file's functions named" \
  "bad.py has no function 'nope'; it defines: .*untyped.*multi" \
  "$MUSTER" run --dryrun "$T_DIR/bad.py:nope"
err_is "FILE.py alone: TorchX's form and the functions" \
  "is a Python component file: name the function .* muster run .*bad.py:FUNCTION \(it defines " \
  "$MUSTER" run --dryrun "$T_DIR/bad.py"
err_is "no such file" "cannot read component 'nope.py': No such file" \
  "$MUSTER" run --dryrun nope.py:f
printf 'def f(:\n' >"$T_DIR/syn.py"
err_is "a syntax error: file and line" "syn.py:1: " "$MUSTER" run --dryrun "$T_DIR/syn.py:f"
out=$(MUSTER_PYTHON=$T_DIR/no-python "$MUSTER" run --dryrun "$N:states" 2>&1)
t_expect_eq "no python3: exit 2" "$?" 2
t_expect_match "no python3: says so and how to fix it" "$out" \
  "a Python component needs python3: cannot run '$T_DIR/no-python'.*MUSTER_PYTHON"
out=$(MUSTER_PYTHON=$T_DIR/no-python "$MUSTER" run --dryrun utils.echo 2>&1)
t_expect_eq "no python3: YAML components do not need it" "$?" 0

# ---- a Python bool in a role's args, env or metadata: "true"/"false", as a YAML component's bool
# renders (docs/components.md). TorchX would write str(v), "True"; muster keeps one spelling for
# both kinds of component, so a job is the same whichever way its component is written.
cat >"$T_DIR/bools.py" <<'PY'
import torchx.specs as specs
def b() -> specs.AppDef:
    return specs.AppDef("b", [specs.Role("r", "alpine", entrypoint="echo", args=["--on", True, "--off", False],
                                          env={"ON": True, "OFF": False})])
PY
dry "$T_DIR/bools.py:b"
t_expect_eq "a Python True/False in args: true/false" "$(role 'r["args"][1:4:2]')" "['true', 'false']"
t_expect_eq "... in env: true/false" "$(role 'r["env"]["ON"], r["env"]["OFF"]')" "true false"

# ---- a real local run, and builtins --print of a Python file
out=$("$MUSTER" run "$N:model" --msg real -n 2 -- tail 2>&1)
t_expect_eq "local run of a Python component: exit 0" "$?" 0
t_expect_eq "local run: both replicas echoed" "$(printf '%s\n' "$out" | grep -c 'model/[01] real ratio=0.5')" 2
t_expect_eq "builtins --print FILE.py:FUNCTION prints the file" \
  "$("$MUSTER" builtins --print "$N:model" | md5sum)" "$(md5sum <"$N")"
t_done
