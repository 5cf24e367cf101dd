#!/usr/bin/env bash
# A second pass over issue 34's first day (the trn1 tutorial's flow as a TorchX user walks it):
# the hints a slip gets. muster log HANDLE/ROLE/REPLICA with a role the job lacks names the
# roles it has; a run whose worker cannot import a module says that --python picks the
# interpreter (the first python3 on PATH by default); an option muster run does not know,
# before the component, is named as such (not "no component given"); deploy --dryrun (run's
# habit) says that deploy only prints; a submission with no API server does not pass on kubectl's
# advice to turn validation off (--validate=false would not help).
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER" "$MU_BUILD_DIR/examples/ring_allreduce"
t_local_jobs

# ---- log with a role the job does not have (the README's '/train/0' on a job named after its script)
handle=$("$MUSTER" run --no-log dist.ddp -j 1x2 --script "$MU_BUILD_DIR/examples/ring_allreduce" 2>"$T_DIR/run.err")
t_expect_eq "ring job: exit 0 ($(tail -3 "$T_DIR/run.err"))" "$?" 0
out=$("$MUSTER" log "$handle/train/0" 2>&1)
t_expect_eq "log of a role the job lacks: exit 1 ($out)" "$?" 1
t_expect_match "... names the roles it has" "$out" "has no role 'train' \(its roles: ring_allreduce\)"
t_expect_match "... and the command that works" "$out" "did you mean 'muster log $handle/ring_allreduce/0'\?"
out=$("$MUSTER" log "$handle/ring_allreduc" 2>&1)
t_expect_match "a near miss without a replica: the closest role" "$out" \
  "did you mean 'muster log $handle/ring_allreduce'\?"
out=$("$MUSTER" log "$handle/ring_allreduce/0" 2>&1)
t_expect_eq "the right role still prints its log" "$(grep -c 'allreduce ok' <<<"$out")" 2

# ---- a worker that cannot import a module: the hint names --python
printf 'import muster_t0073_no_such_module\n' >"$T_DIR/imp.py"
out=$("$MUSTER" run --no-log dist.ddp -j 1x1 --script "$T_DIR/imp.py" 2>&1)
t_expect_eq "missing module: exit 1" "$?" 1
t_expect_match "... root cause" "$out" "root cause: .*No module named 'muster_t0073_no_such_module'"
t_expect_match "... the hint names --python" "$out" \
  "hint: a .py script or -m runs under --python, by default the first python3 on PATH; .*--python /usr/bin/python3"
out=$("$MUSTER" run --no-log utils.sh -- exit 3 2>&1)
t_expect_eq "another failure: no --python hint ($out)" "$(grep -c 'runs under --python' <<<"$out")" 0

# ---- an option run does not know, before the component
out=$("$MUSTER" run --detach dist.ddp --script x 2>&1)
t_expect_eq "run --detach: usage error" "$?" 2
t_expect_match "... names the option" "$out" "unknown option '--detach' for muster run \(its options: 'muster run -h'\)"
t_expect_eq "... not 'no component given'" "$(grep -c 'no component given' <<<"$out")" 0
out=$("$MUSTER" run 2>&1)
t_expect_match "run with nothing: no component given" "$out" "no component given"

# ---- deploy --dryrun: deploy only prints
for target in rendezvous storage queue; do
  out=$("$MUSTER" deploy $target --dryrun 2>&1)
  t_expect_eq "deploy $target --dryrun: usage error" "$?" 2
  t_expect_match "... says deploy only prints" "$out" \
    "muster deploy $target has no --dryrun: it applies nothing, it prints the manifests; .*\| kubectl apply -f -"
done
"$MUSTER" deploy rendezvous --name etcd-server --port 2379 >"$T_DIR/rdzv.yaml" 2>/dev/null
t_expect_eq "deploy rendezvous without --dryrun still prints" "$(grep -c 'kind: Service' "$T_DIR/rdzv.yaml")" 1
# ---- kubectl create with no API server (as kubectl 1.2x prints it): no --validate=false advice
kb=$T_DIR/kbin
mkdir -p "$kb"
cat >"$kb/kubectl" <<'KEOF'
#!/bin/sh
cat >/dev/null
echo 'error: error validating "STDIN": error validating data: failed to download openapi: Get "http://localhost:8080/openapi/v2?timeout=32s": dial tcp 127.0.0.1:8080: connect: connection refused; if you choose to ignore these errors, turn validation off with --validate=false' >&2
exit 1
KEOF
chmod +x "$kb/kubectl"
out=$(PATH="$kb:$PATH" "$MUSTER" run -s kubernetes -cfg queue=q,muster_image=reg/muster:1 dist.ddp \
  --image img:1 --script t.py 2>&1)
t_expect_eq "k8s submit, no cluster: exit 1 ($out)" "$?" 1
t_expect_match "... kubectl's reason" "$out" "kubectl create failed \(exit 1\): .*failed to download openapi: .*connection refused$"
t_expect_eq "... no --validate=false advice" "$(grep -c -- '--validate=false' <<<"$out")" 0
t_expect_match "... the hint" "$out" "hint: kubectl cannot reach a cluster"
t_done
