#!/usr/bin/env bash
# Issue 34's papercuts: a dead -cfg rdzv reported at once in the user's words; the dryrun's note
# for a fixed etcd endpoint (the trn1 tutorial's etcd-server:2379); --workspace --dryrun builds
# nothing and a base image that cannot be pulled is named as such; one clean line plus the hint
# when kubectl cannot reach a cluster.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_local_jobs

# ---- a dead rendezvous endpoint: within 10 s, naming what the user typed
start=$SECONDS
out=$(timeout 60 "$MUSTER" run -cfg rdzv=127.0.0.1:1 dist.ddp -j 1x1 --script /bin/true 2>&1)
rc=$? took=$((SECONDS - start))
t_expect_eq "dead -cfg rdzv: exit 1 ($out)" "$rc" 1
t_expect_eq "dead -cfg rdzv: reported within 10 s (took $took s)" "$([ "$took" -le 10 ] && echo yes)" yes
t_expect_match "dead -cfg rdzv: names what the user typed and the fix" "$out" \
  "-cfg rdzv=127.0.0.1:1: no musterd answers there \(cannot connect to 127.0.0.1:1: Connection refused\); start one"
t_expect_eq "dead -cfg rdzv: not the agent's flag" "$(grep -c -- '--rdzv-endpoint' <<<"$out")" 0
t_expect_eq "dead -cfg rdzv: no job left behind" "$("$MUSTER" list 2>/dev/null | grep -c RUNNING)" 0

# ---- the trn1 tutorial's component names etcd-server:2379: the dryrun says what serves it
TRN=$MU_SOURCE_DIR/tests/fixtures/torchx/trn1_dist_ddp.py:generateAppDef
"$MUSTER" run -s kubernetes --dryrun -cfg queue=q,muster_image=reg/muster:1 "$TRN" --name bert \
  --nnodes 2 --nproc_per_node 32 --image img:1 --script t.py --script_args x >/dev/null 2>"$T_DIR/err"
t_expect_eq "trn1 dryrun: exit 0 ($(tail -3 "$T_DIR/err"))" "$?" 0
t_expect_match "trn1 dryrun: notes the etcd endpoint and the deploy command" "$(cat "$T_DIR/err")" \
  "role 'role1' joins the rendezvous at etcd-server:2379, a server this job does not start: on Kubernetes, 'muster deploy rendezvous --name etcd-server --port 2379 \| kubectl apply -f -'"
out=$("$MUSTER" run --dryrun dist.ddp --launcher torchrun --rdzv_backend etcd --script t.py 2>&1 >/dev/null)
t_expect_eq "dist.ddp (the job's own musterd): no such note" "$(grep -c 'does not start' <<<"$out")" 0

# ---- --workspace with --dryrun: nothing built, the note says what would be
bin=$T_DIR/bin
mkdir -p "$bin" "$T_DIR/ws"
printf '#!/bin/sh\necho "buildah $*" >>%s/buildah.calls\nexit 1\n' "$T_DIR" >"$bin/buildah"
chmod +x "$bin/buildah"
PATH="$bin:$PATH" "$MUSTER" run -s kubernetes --dryrun \
  -cfg queue=q,muster_image=reg/muster:1,image_repo=127.0.0.1:1/repo --workspace "$T_DIR/ws" dist.ddp --image base.example/img:3 \
  --script t.py >"$T_DIR/out" 2>"$T_DIR/err"
t_expect_eq "--workspace --dryrun: exit 0 ($(tail -3 "$T_DIR/err"))" "$?" 0
t_expect_eq "--workspace --dryrun: buildah never ran" "$(cat "$T_DIR/buildah.calls" 2>/dev/null)" ""
t_expect_match "--workspace --dryrun: says what would be built" "$(cat "$T_DIR/err")" \
  "builds nothing: muster run would layer $T_DIR/ws on base.example/img:3 with buildah and push it to 127.0.0.1:1/repo"
t_expect_match "--workspace --dryrun: the manifest's image is the one to be built" \
  "$(cat "$T_DIR/out")" "127.0.0.1:1/repo@sha256:"
# the real build, from a base image whose registry is dead: the hint names the base image
if command -v buildah >/dev/null 2>&1; then
  "$MUSTER" run -s kubernetes -cfg queue=q,muster_image=reg/muster:1,image_repo=127.0.0.1:2/repo \
    --workspace "$T_DIR/ws" dist.ddp --image 127.0.0.1:1/base:1 --script t.py >/dev/null 2>"$T_DIR/err"
  t_expect_eq "a base image that cannot be pulled: exit 1" "$?" 1
  err=$(cat "$T_DIR/err")
  t_expect_match "... the failure names the base image" "$err" "buildah from 127.0.0.1:1/base:1 \(pulling the role's image\) failed"
  t_expect_match "... the hint is about the role's image" "$err" "hint: the registry of the role's image \(--image"
  t_expect_match "... and says image_repo is only the push target" "$err" "the base image is 127.0.0.1:1/base:1 \(the role's --image\)"
  t_expect_eq "... the hint does not blame -cfg image_repo" "$(grep -c 'registry of -cfg image_repo' <<<"$err")" 0
else
  t_fail "buildah is missing (apt-get install buildah; scripts/install-deps.sh --test has it)"
fi

# ---- kubectl that cannot reach a cluster (as kubectl 1.2x prints it): one line and the hint
kb=$T_DIR/kbin
mkdir -p "$kb"
cat >"$kb/kubectl" <<'KEOF'
#!/bin/sh
for i in 1 2 3 4 5; do
  echo 'E1205 15:30:00.000000   12345 memcache.go:265] couldn'"'"'t get current server API group list: Get "http://localhost:8080/api?timeout=32s": dial tcp 127.0.0.1:8080: connect: connection refused' >&2
done
echo 'The connection to the server localhost:8080 was refused - did you specify the right host or port?' >&2
exit 1
KEOF
chmod +x "$kb/kubectl"
for cmd in "status kubernetes://default/x-123" "list -s kubernetes" "log kubernetes://default/x-123" \
  "log kubernetes://default/x-123/role/0"; do
  out=$(PATH="$kb:$PATH" "$MUSTER" $cmd 2>&1)
  t_expect_eq "muster $cmd, no cluster: two lines ($out)" "$(wc -l <<<"$out")" 2
  t_expect_match "muster $cmd, no cluster: kubectl's own line" "$(head -1 <<<"$out")" \
    "failed \(exit 1\): The connection to the server localhost:8080 was refused"
  t_expect_match "muster $cmd, no cluster: the hint" "$out" "hint: kubectl cannot reach a cluster"
done
t_done
