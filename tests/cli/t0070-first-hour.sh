#!/usr/bin/env bash
# The papercuts of a TorchX user's first hour (issue 26, section 2), each as it tripped them:
# --workspace file:///DIR and "", the .musterconfig example of docs/cli.md copied as it is,
# trn1.2xlarge asked for more than it has, a local job's status page, what ${rdzv_endpoint} is in
# --dryrun and describe, TORCHX_RANK0_HOST for local workers, --log_level, builtins --print,
# the -j messages, and demo.sh in a fresh clone. (deploy -h and deploy rendezvous: t2030.)
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_local_jobs
err_is() { # name regex cmd...: exit 2 and the message
  local name=$1 want=$2
  shift 2
  "$@" >"$T_DIR/out" 2>"$T_DIR/err"
  local rc=$?
  t_expect_eq "$name: exit 2" "$rc" 2
  t_expect_match "$name: message" "$(cat "$T_DIR/err")" "$want"
}
K=(-s kubernetes --dryrun -cfg queue=q,muster_image=m:1)

# ---- --workspace: TorchX's file:///DIR (the trn1 tutorial's form) and "" (none)
mkdir -p "$T_DIR/ws"
err_is "--workspace file:///DIR is the directory (it goes on to ask for image_repo)" \
  "--workspace needs -cfg image_repo" \
  "$MUSTER" run "${K[@]}" --workspace "file://$T_DIR/ws" utils.echo --image i
err_is "--workspace file:////DIR (\$PWD after file:///)" "--workspace needs -cfg image_repo" \
  "$MUSTER" run "${K[@]}" --workspace "file:///$T_DIR/ws" utils.echo --image i
"$MUSTER" run "${K[@]}" --workspace "" utils.echo --image i >/dev/null 2>"$T_DIR/err"
t_expect_eq "--workspace \"\": no workspace, the dryrun runs" "$?" 0
err_is "--workspace file:///missing: names the directory" \
  "--workspace 'file://$T_DIR/nope': $T_DIR/nope is not a directory" \
  "$MUSTER" run "${K[@]}" --workspace "file://$T_DIR/nope" utils.echo --image i
err_is "--workspace s3://: refused by name" "only a directory on this machine works .*not a s3://" \
  "$MUSTER" run "${K[@]}" --workspace "s3://bucket/x" utils.echo --image i
printf '[cli:run]\nworkspace = file://%s/ws\n' "$T_DIR" >"$T_DIR/.musterconfig"
err_is "[cli:run] workspace= is read (it was accepted and ignored)" "--workspace needs -cfg image_repo" \
  "$MUSTER" run "${K[@]}" utils.echo --image i

# ---- docs/cli.md's .musterconfig example, copied as it is (inline # comments)
sed -n '/^```ini$/,/^```$/p' "$MU_SOURCE_DIR/docs/cli.md" | sed '1d;$d' >"$T_DIR/.musterconfig"
t_expect_match "the example has inline comments" "$(cat "$T_DIR/.musterconfig")" '= local +# '
printf '[kubernetes]\nqueue = test # my queue\n' >>"$T_DIR/.musterconfig"
out=$("$MUSTER" run --dryrun --json --script t.py 2>&1)
t_expect_eq "the example works: exit 0" "$?" 0
js() { printf '%s' "$out" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)" 2>&1; }
t_expect_eq "[cli:run] scheduler = local # ..." "$(js 'd["scheduler"]')" local
t_expect_eq "[cli:run] component = dist.ddp # ...: -j 2x8 from [component:dist.ddp]" \
  "$(js 'd["app"]["roles"][0]["num_replicas"]')" 2
t_expect_match "[local] log_dir" "$(js 'd["request"]')" 'log_dir: /data/muster-logs/'
out=$("$MUSTER" run -s kubernetes --dryrun -cfg muster_image=m:1 utils.echo --image i 2>&1)
t_expect_match "queue = test # my queue: the queue is 'test'" "$out" '  queue: test$'
rm "$T_DIR/.musterconfig"

# ---- trn1.2xlarge: 2 NeuronCores, no EFA (the tutorial's table)
T=(aws.trn1_ddp --image i --script t.py --instance_type trn1.2xlarge)
err_is "trn1.2xlarge --nnodes 2: refused with the reason" \
  "trn1.2xlarge with --nnodes > 1: a trn1.2xlarge has no EFA adapter.*single-node jobs only" \
  "$MUSTER" run "${K[@]}" "${T[@]}" --nnodes 2
err_is "trn1.2xlarge --nproc_per_node 32: more workers than NeuronCores" \
  "--nproc_per_node above 2 on trn1.2xlarge: it has 2 NeuronCores" \
  "$MUSTER" run "${K[@]}" "${T[@]}" --nnodes 1 --nproc_per_node 32
out=$("$MUSTER" run "${K[@]}" --json "${T[@]}" --nnodes 1 2>&1)
t_expect_match "trn1.2xlarge: --nproc_per_node defaults to its 2 cores" "$out" \
  '"--nproc-per-node", "2"'
err_is "trn1.32xlarge --nproc_per_node 64" "above 32: a trn1.32xlarge or trn1n.32xlarge has 32" \
  "$MUSTER" run "${K[@]}" aws.trn1_ddp --image i --script t.py --nnodes 2 --nproc_per_node 64
cat >"$T_DIR/multi.yaml" <<'EOF'
name: multi
params: [{name: n, type: int, default: "2"}, {name: h, type: str, default: aws_trn1.2xlarge}]
app:
  name: multi
  roles:
    - {name: r, entrypoint: e, num_replicas: "${n}", resource: {h: "${h}"}}
EOF
err_is "any component: the named resource aws_trn1.2xlarge on 2 nodes" \
  "roles\[0\].num_replicas: 2 nodes of trn1.2xlarge, which has no EFA adapter" \
  "$MUSTER" run --dryrun "$T_DIR/multi.yaml"
"$MUSTER" run --dryrun "$T_DIR/multi.yaml" --n 1 >/dev/null 2>&1
t_expect_eq "... on 1 node it is fine" "$?" 0
sed -i 's/resource: {h: "${h}"}/resource: {devices: {vpc.amazonaws.com\/efa: "8"}, capabilities: {node.kubernetes.io\/instance-type: g5.xlarge}}/' \
  "$T_DIR/multi.yaml"
err_is "EFA asked of a type that has none" \
  "devices.vpc.amazonaws.com/efa: 8 asked for, but a g5.xlarge node has 0 EFA adapters" \
  "$MUSTER" run --dryrun "$T_DIR/multi.yaml"

# ---- a local job: its status page (run, status, describe), TORCHX_RANK0_HOST. A browser can
# read the status page of an open musterd only (rdzv_auth=none): a private job's needs its token
# (docs/security.md), and is not advertised (tests/cli/t1009-local-private-rdzv.sh).
t_spawn job "$MUSTER" run -cfg rdzv_auth=none utils.sh -- \
  'echo "rank0 ${rank0_env}=$TORCHX_RANK0_HOST/$MUSTER_RANK0_HOST rdzv ${rdzv_endpoint}"; while [ ! -e stop ]; do sleep 0.05; done'
jobpid=$T_LAST_PID
t_until 30 grep -qs 'status page http://127.0.0.1:[0-9]*/ui' "$T_DIR/job.log" &&
  t_ok "muster run prints the job's status page when it starts" ||
  t_fail "no status page line: $(tail -5 "$T_DIR/job.log")"
url=$(grep -o 'http://127.0.0.1:[0-9]*/ui' "$T_DIR/job.log" | head -1)
handle=$(grep -o 'local://muster/[a-z0-9-]*' "$T_DIR/job.log" | head -1)
t_until 30 grep -q 'rank0 ' "$T_DIR/job.log"
t_expect_match "local workers get TORCHX_RANK0_HOST, and \${rank0_env} names it" \
  "$(cat "$T_DIR/job.log")" 'rank0 TORCHX_RANK0_HOST=localhost/localhost rdzv 127\.0\.0\.1:[0-9]+'
st=$("$MUSTER" status "$handle")
t_expect_eq "muster status: UI URL is the status page" "$(printf '%s\n' "$st" | sed -n 's/^ *UI URL: //p')" "$url"
t_expect_eq "muster status --json: url" \
  "$("$MUSTER" status --json "$handle" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["url"])')" "$url"
page=$("$PY" -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()[:200])' "$url" 2>&1)
t_expect_match "the UI URL serves the status page" "$page" '<!(doctype|DOCTYPE) html'
"$MUSTER" describe "$handle" >"$T_DIR/desc.json" 2>"$T_DIR/desc.err"
t_expect_match "describe: \${rdzv_endpoint} said on stderr" "$(cat "$T_DIR/desc.err")" \
  "\\\$\{rdzv_endpoint\} is 127\.0\.0\.1:[0-9]+, the job's musterd \(status page $url\)"
"$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$T_DIR/desc.json" &&
  t_ok "describe: stdout stays the spec's JSON" || t_fail "describe: stdout is not JSON"
touch "$T_DIR/stop"
t_wait_exit "$jobpid" 60
t_expect_eq "the job ends: exit 0" "$T_RC" 0
t_expect_eq "after the job: UI URL None, saying why (its musterd stopped)" \
  "$("$MUSTER" status "$handle" | sed -n 's/^ *UI URL: //p')" "None (the job ended)"
out=$("$MUSTER" run --dryrun dist.ddp --script t.py 2>&1)
t_expect_match "--dryrun says what \${rdzv_endpoint} is (local)" "$out" \
  "\(\\\$\{rdzv_endpoint\} is the rendezvous: 127\.0\.0\.1:PORT of the job's own musterd"
out=$("$MUSTER" run "${K[@]}" dist.ddp --script t.py --image i 2>&1)
t_expect_match "--dryrun says what \${rdzv_endpoint} is (kubernetes)" "$out" \
  "is the rendezvous: JOB-musterd-0\.JOB:29400"

# ---- TorchX spellings
"$MUSTER" --log_level INFO builtins >/dev/null 2>"$T_DIR/err"
t_expect_eq "--log_level INFO (TorchX's spelling): exit 0" "$?" 0
"$MUSTER" --log_level=WARNING builtins >/dev/null 2>&1
t_expect_eq "--log_level=WARNING: exit 0" "$?" 0
err_is "--log_level with a bad level" "unknown log level 'loud'" "$MUSTER" --log_level loud builtins
t_expect_eq "builtins --print prints the component's source" \
  "$("$MUSTER" builtins --print utils.echo | md5sum)" "$(md5sum <"$MU_SOURCE_DIR/components/utils.echo.yaml")"
err_is "-j 3:2x1: the minimum above the maximum" \
  "argument '-j' '3:2x1': the minimum of 3 nodes is above the maximum of 2" \
  "$MUSTER" run --dryrun dist.ddp --script t.py -j 3:2x1
err_is "-j 0x2: zero nodes" "argument '-j' '0x2': 0 nodes; a job runs on 1 node or more" \
  "$MUSTER" run --dryrun dist.ddp --script t.py -j 0x2

# ---- demo.sh in a fresh clone: the command it names is the one that works
out=$(bash "$MU_SOURCE_DIR/scripts/demo.sh" "$T_DIR/fresh-build" 2>&1)
t_expect_eq "demo.sh without a build: exit 1" "$?" 1
t_expect_match "demo.sh names the configure step" "$out" \
  "cmake -S \. -B $T_DIR/fresh-build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build $T_DIR/fresh-build"
cmake -S "$MU_SOURCE_DIR" -B "$T_DIR/fresh-build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$T_DIR/cmake.log" 2>&1 &&
  t_ok "the configure step it names works in a fresh build dir" ||
  t_fail "cmake -S . -B: $(tail -3 "$T_DIR/cmake.log")"
out=$(bash "$MU_SOURCE_DIR/scripts/demo.sh" "$T_DIR/fresh-build" 2>&1)
t_expect_match "configured, not built: demo.sh says cmake --build" "$out" \
  "is not built; build it: cmake --build $T_DIR/fresh-build"
t_done
