#!/usr/bin/env bash
# The muster image and pods that start in any image (issue 11), with Debian's own tools and no
# network beyond loopback: one image build shared by every check.
#  1. scripts/build-image.sh builds the image FROM scratch (buildah, vfs) from the portable
#     bundle and pushes it to a docker-registry this test serves on loopback; skopeo pulls it
#     back, umoci unpacks it. The root holds the bundle and /tmp only (no shell, no libc outside
#     the bundle); the health check is musterd --probe; the image is under 20 MB.
#  2. In a chroot of the unpacked root: musterd, and two `muster agent`s x 2 workers of the C
#     ring all-reduce, to success; musterd --probe answers its /healthz.
#  3. The two-image pod: the Volcano Job of `muster run -s kubernetes dist.ddp -j 2x2` with
#     -cfg muster_image, and a stand-in user image holding one static program only. For each
#     replica the manifest's own init-container command runs in a chroot of the muster image
#     with the emptyDir bind-mounted at its mountPath, then the training container's command,
#     argv and env exactly as in the YAML, in a chroot of the user image with the same emptyDir
#     at /muster. All 4 ranks verify their sum.
#  5. --workspace (run before 4): a directory layered on the user image, pushed, the manifest
#     names it by digest; the pulled image holds the files, .dockerignore's excluded.
#  4. Bad input: a root without /etc/hosts (a clear error naming it, then the name resolves
#     once /etc/hosts has it), a missing muster_image, a registry that is not there (for
#     the image and for --workspace), a read-only registry that refuses the --workspace push,
#     --workspace without image_repo.
# Under MU_SANITIZED=1 (the ASan build, which has no portable bundle: sanitizers need the
# host's loader) the image is the normal build's: only what this build's muster does runs
# (the manifest's init container, a missing muster_image, `muster deploy agent`).
. "$(dirname "$0")/../lib.sh"
for tool in buildah:buildah docker-registry:docker-registry skopeo:skopeo umoci:umoci; do
  t_need_cmd "${tool%%:*}" "${tool##*:}"
done
t_need_cmd unshare util-linux
t_need_py yaml python3-yaml
[ "$(id -u)" -eq 0 ] || { echo "# skip: chroot and mounts need root"; exit 77; }
if [ "$MU_SANITIZED" = 1 ]; then
  out=$("$MUSTER" run -s kubernetes --dryrun --json -cfg queue=q,muster_image=r/muster:1 dist.ddp \
    -j 2x2 --image u:1 --script /app/x 2>&1 | $PY -c 'import json,sys,yaml
j = yaml.safe_load(json.load(sys.stdin)["request"]); p = j["spec"]["tasks"][1]["template"]["spec"]
print(p["initContainers"][0]["image"], " ".join(p["initContainers"][0]["command"]), p["containers"][0]["command"][0])')
  t_expect_eq "init container and agent path" "$out" \
    "r/muster:1 /muster/bin/muster deploy agent /mnt/muster /muster/bin/muster"
  # Without muster_image a dryrun shows the plan with a placeholder and says how to build one;
  # a submission is refused before kubectl runs (issue 26).
  out=$("$MUSTER" run -s kubernetes --dryrun -cfg queue=q dist.ddp --image u:1 --script /x 2>&1)
  t_expect_eq "no muster_image: the dryrun prints the plan" "$?" 0
  t_expect_match "... says how to build one" "$out" "-cfg muster_image: required.*build-image.sh"
  out=$("$MUSTER" run -s kubernetes -cfg queue=q,kubectl=/nonexistent dist.ddp --image u:1 --script /x 2>&1)
  t_expect_eq "no muster_image: the run is refused" "$?" 1
  t_expect_match "... saying how to build one" "$out" "-cfg muster_image: required.*build-image.sh"
  mkdir -p "$T_DIR/prefix/bin" && cp "$MUSTER" "$T_DIR/prefix/bin/muster"
  mkdir -p "$T_DIR/prefix/share/muster" && echo x >"$T_DIR/prefix/share/muster/f"
  out=$("$T_DIR/prefix/bin/muster" deploy agent "$T_DIR/copy" 2>&1)
  t_expect_eq "deploy agent copies bin/ and share/" "$(cd "$T_DIR/copy" && find . -type f | sort | tr '\n' ' ')" \
    "./bin/muster ./share/muster/f "
  t_done
fi
B=$MU_BUILD_DIR
[ -x "$B/portable/muster/bin/muster" ] || B=$MU_SOURCE_DIR/build
t_need_built "$B/portable/muster/bin/muster" "$B/portable/test/sum_static"

# --- the registry (its own config, storage and port) ---------------------------------------
RP=$(t_free_port)
mkdir -p "$T_DIR/registry"
cat >"$T_DIR/registry/config.yml" <<YML
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $T_DIR/registry/data}}
http: {addr: 127.0.0.1:$RP}
YML
t_spawn registry docker-registry serve "$T_DIR/registry/config.yml"
t_wait_http "http://127.0.0.1:$RP/v2/" 20 "$T_LAST_PID" || { cat "$T_DIR/registry.log"; t_fail "registry starts"; t_done; }
REG=127.0.0.1:$RP
BS=$T_DIR/buildah
export MU_IMAGE_TLS_VERIFY=false

# --- 1. build, push, pull, unpack ----------------------------------------------------------
t0=$(date +%s%N)
if out=$("$MU_SOURCE_DIR/scripts/build-image.sh" --build-dir "$B" --storage "$BS" --tag muster:test \
  --push "docker://$REG/muster:test" 2>&1); then
  t_ok "build-image.sh builds and pushes"
else
  t_fail "build-image.sh: $out"; t_done
fi
echo "# image built and pushed in $((($(date +%s%N) - t0) / 1000000)) ms"
digest=$(printf '%s\n' "$out" | sed -n 's/^digest: //p')
t_expect_match "push reports the digest" "$digest" '^sha256:[0-9a-f]{64}$'
pull() { # name -> $T_DIR/<name>/rootfs
  skopeo copy --quiet --src-tls-verify=false "docker://$REG/$1:test" "oci:$T_DIR/oci-$1:test" \
    >"$T_DIR/pull-$1.log" 2>&1 &&
    umoci unpack --image "$T_DIR/oci-$1:test" "$T_DIR/$1" >>"$T_DIR/pull-$1.log" 2>&1
}
pull muster && t_ok "skopeo pulls it back, umoci unpacks it" || { cat "$T_DIR/pull-muster.log"; t_fail "pull/unpack"; t_done; }
R=$T_DIR/muster/rootfs
t_expect_eq "the root holds the bundle and /tmp only" "$(ls "$R" | tr '\n' ' ')" "muster tmp "
[ ! -e "$R/bin/sh" ] && [ ! -e "$R/lib64" ] && t_ok "no shell, no libc outside /muster" || t_fail "a shell or libc in the root"
hc=$(skopeo inspect --tls-verify=false --raw --config "docker://$REG/muster:test" 2>&1 |
  $PY -c 'import json,sys; c=json.load(sys.stdin)["config"]; print(" ".join((c.get("Healthcheck") or c.get("healthcheck") or {}).get("Test", [])) or sorted(c))')
t_expect_match "HEALTHCHECK is musterd --probe (no shell)" "$hc" '^CMD /muster/bin/musterd --probe http://127.0.0.1:2379/healthz$'
size=$(skopeo inspect --tls-verify=false --raw "docker://$REG/muster:test" 2>/dev/null |
  $PY -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))')
echo "# image: $size bytes compressed, $(du -sb "$R" | cut -f1) bytes unpacked"
[ "${size:-99999999}" -lt 20000000 ] && t_ok "image under 20 MB ($size bytes)" || t_fail "image is $size bytes"

# A container runtime gives every container /proc and /dev; a chroot gets them here.
mknod -m 666 "$R/dev-null" c 1 3 2>/dev/null
mkdir -p "$R/dev" "$R/proc" && mv "$R/dev-null" "$R/dev/null"
in_root() { # root cmd... : the command in a chroot of root, with /proc, an empty environment
  local root=$1; shift
  unshare -m --fork bash -c 'r=$1; shift; mount -t proc proc "$r/proc" &&
    exec env -i "$@"' _ "$root" /usr/sbin/chroot "$root" "$@"
}

# --- 2. musterd and 2 agents x 2 workers in the unpacked root --------------------------------
t_spawn musterd-img unshare -m --fork bash -c 'mount -t proc proc "$1/proc" &&
  exec env -i /usr/sbin/chroot "$1" /muster/bin/musterd --listen 127.0.0.1:0' _ "$R"
MUSTERD_PORT=""
t_until 20 t__musterd_port "$T_DIR/musterd-img.log" "$T_LAST_PID"
[ -n "$MUSTERD_PORT" ] && t_ok "musterd runs in the image's root" || { cat "$T_DIR/musterd-img.log"; t_fail "musterd in the root"; t_done; }
in_root "$R" /muster/bin/musterd --probe "http://127.0.0.1:$MUSTERD_PORT/healthz" &&
  t_ok "musterd --probe: healthy" || t_fail "musterd --probe"
in_root "$R" /muster/bin/musterd --probe "http://127.0.0.1:1/healthz" 2>/dev/null
t_expect_eq "musterd --probe of nothing: exit 1" "$?" 1
for n in 0 1; do
  in_root "$R" /muster/bin/muster agent --nnodes 2 --nproc-per-node 2 \
    --rdzv-endpoint "127.0.0.1:$MUSTERD_PORT" --rdzv-id img-ring -- /muster/bin/ring_allreduce \
    --count 4096 >"$T_DIR/agent$n.log" 2>&1 &
  pids[$n]=$!
done
rc0=0; wait "${pids[0]}" || rc0=$?; rc1=0; wait "${pids[1]}" || rc1=$?
t_expect_eq "both agents exit 0" "$rc0 $rc1" "0 0"
n=$(cat "$T_DIR"/agent[01].log | grep -c 'allreduce ok, world 4')
t_expect_eq "4 ranks of the ring all-reduce verified in the image's root" "$n" 4
[ "$n" = 4 ] || tail -5 "$T_DIR"/agent[01].log | sed 's/^/# /'

# --- 3. the two-image pod --------------------------------------------------------------------
U=$T_DIR/user-build
mkdir -p "$U/app" "$U/tmp" && chmod 1777 "$U/tmp"
cp "$B/portable/test/sum_static" "$U/app/sum_static"
bh() { buildah --storage-driver vfs --root "$BS/root" --runroot "$BS/run" "$@"; }
if c=$(bh from scratch 2>"$T_DIR/user.log") && bh copy "$c" "$U" / >>"$T_DIR/user.log" 2>&1 &&
  bh commit --quiet "$c" user:test >>"$T_DIR/user.log" 2>&1 &&
  bh push --quiet --tls-verify=false user:test "docker://$REG/user:test" >>"$T_DIR/user.log" 2>&1 &&
  pull user; then
  t_ok "the stand-in user image (one static program) built, pushed, pulled"
else
  t_fail "user image: $(tail -5 "$T_DIR/user.log" "$T_DIR/pull-user.log" 2>/dev/null)"; t_done
fi
UR=$T_DIR/user/rootfs
t_expect_eq "the user image holds nothing from muster" "$(cd "$UR" && find . -type f | sort | tr '\n' ' ')" "./app/sum_static "
"$MUSTER" run -s kubernetes --dryrun --json \
  -cfg "queue=q,muster_image=$REG/muster:test,rdzv=127.0.0.1:$MUSTERD_PORT" dist.ddp -j 2x2 \
  --image "$REG/user:test" --script /app/sum_static >"$T_DIR/job.json" 2>"$T_DIR/job.err" ||
  { cat "$T_DIR/job.err"; t_fail "render the Volcano Job"; t_done; }
# One line per replica: the init container and training container as JSON.
$PY - "$T_DIR/job.json" "$T_DIR/pods" <<'PYEOF'
import json, os, sys, yaml
job = yaml.safe_load(json.load(open(sys.argv[1]))["request"])
os.makedirs(sys.argv[2], exist_ok=True)
for i, t in enumerate(job["spec"]["tasks"]):
    spec = t["template"]["spec"]
    c = spec["containers"][0]
    vol = [v["name"] for v in spec["volumes"] if "emptyDir" in v and v["name"] != "dshm"]
    mount = lambda ctr: [m["mountPath"] for m in ctr.get("volumeMounts", []) if m["name"] in vol]
    inits = spec.get("initContainers", [])
    pod = {"init": [{"image": x["image"], "command": x["command"], "mount": mount(x)} for x in inits],
           "main": {"image": c["image"], "command": c["command"], "mount": mount(c),
                    "env": {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}}}
    json.dump(pod, open("%s/%d.json" % (sys.argv[2], i), "w"))
PYEOF
t_expect_eq "one pod per replica" "$(ls "$T_DIR/pods" | wc -l | tr -d ' ')" 2
# argv of a container as NUL-separated words, for xargs -0.
argv_of() { $PY -c 'import json,sys; p=json.load(open(sys.argv[1])); c=eval(sys.argv[2]); sys.stdout.write("\0".join(c))' "$@"; }
run_pod() { # index
  local p=$T_DIR/pods/$1.json e=$T_DIR/emptydir-$1 im mm env
  mkdir -p "$e"
  im=$($PY -c 'import json,sys; i=json.load(open(sys.argv[1]))["init"][0]; print(i["mount"][0], i["image"])' "$p")
  mm=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["main"]["mount"][0])' "$p")
  [ "${im#* }" = "$REG/muster:test" ] || { echo "init image ${im#* }"; return 1; }
  mkdir -p "$R${im%% *}" "$UR$mm" "$UR/proc" "$UR/dev"
  [ -e "$UR/dev/null" ] || mknod -m 666 "$UR/dev/null" c 1 3
  # The init container: its own command, in the muster image, the emptyDir at its mountPath.
  argv_of "$p" 'p["init"][0]["command"]' | unshare -m --fork bash -c '
    mount --bind "$1" "$2${3}" && mount -t proc proc "$2/proc" &&
    xargs -0 env -i /usr/sbin/chroot "$2"' _ "$e" "$R" "${im%% *}" >"$T_DIR/init-$1.log" 2>&1 || return 1
  # The training container: its command and env, in the user image, the emptyDir at /muster.
  env=$($PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["main"]["env"]; sys.stdout.write("\0".join("%s=%s" % kv for kv in e.items()))' "$p" | tr '\0' '\n')
  argv_of "$p" 'p["main"]["command"]' | unshare -m --fork bash -c '
    mount --bind -o ro "$1" "$2${3}" && mount -t proc proc "$2/proc" &&
    mapfile -t env <<<"$4" && xargs -0 env -i "${env[@]}" /usr/sbin/chroot "$2"' \
    _ "$e" "$UR" "$mm" "$env" >"$T_DIR/pod-$1.log" 2>&1
}
run_pod 0 & p0=$!
run_pod 1 & p1=$!
rc0=0; wait $p0 || rc0=$?; rc1=0; wait $p1 || rc1=$?
t_expect_eq "both pods: init then training exit 0" "$rc0 $rc1" "0 0"
t_expect_match "the init container copied the agent" "$(cat "$T_DIR/init-0.log")" "muster agent copied from /muster to /mnt/muster"
n=$(cat "$T_DIR"/pod-[01].log | grep -c 'sum ok, world 4')
t_expect_eq "4 ranks of the user's static program verified their sum" "$n" 4
[ "$n" = 4 ] || tail -5 "$T_DIR"/init-[01].log "$T_DIR"/pod-[01].log | sed 's/^/# /'

# --- 5. --workspace: DIR on the role's image, pushed, the job names the digest -------------------
cat >"$T_DIR/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$BS/root"
runroot = "$BS/run"
CONF
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REG" >"$T_DIR/registries.conf"
export CONTAINERS_STORAGE_CONF=$T_DIR/storage.conf CONTAINERS_REGISTRIES_CONF=$T_DIR/registries.conf
WS=$T_DIR/ws
mkdir -p "$WS/sub" "$WS/.git"
echo "lr=0.1" >"$WS/params.txt"
echo "print('model')" >"$WS/sub/model.py"
echo "secret" >"$WS/sub/creds.key"
echo "ref" >"$WS/.git/HEAD"
printf '*.key\n**/*.key\n.git\n' >"$WS/.dockerignore"
# A dryrun builds nothing (t0070), so these runs submit for real, to the recording kubectl
# (tests/fixtures/bin/kubectl: no API server runs here); the image is built and pushed for real.
kube_run() {
  PATH=$MU_SOURCE_DIR/tests/fixtures/bin:$PATH KUBECTL_RECORD=$T_DIR/kcalls \
    KUBECTL_STATE=$T_DIR/kjobs "$MUSTER" run -s kubernetes "$@"
}
mkdir -p "$T_DIR/kjobs"
kube_run --workspace "$WS" \
  -cfg "queue=q,muster_image=$REG/muster:test,image_repo=$REG/ws" dist.ddp -j 2x2 \
  --image "$REG/user:test" --script /app/sum_static >"$T_DIR/ws.out" 2>"$T_DIR/ws.err"
t_expect_eq "run --workspace exits 0" "$?" 0
img=$($PY -c 'import sys,yaml
j = yaml.safe_load(open(sys.argv[1]))
print(" ".join(sorted({t["template"]["spec"]["containers"][0]["image"] for t in j["spec"]["tasks"] if t["name"] != "musterd"})))' "$T_DIR/kcalls.stdin" 2>&1)
t_expect_match "the manifest names the pushed image by digest" "$img" "^$REG/ws@sha256:[0-9a-f]{64}$"
if skopeo copy --quiet --src-tls-verify=false "docker://$img" "oci:$T_DIR/oci-ws:ws" >"$T_DIR/pull-ws.log" 2>&1 &&
  umoci unpack --image "$T_DIR/oci-ws:ws" "$T_DIR/wsimg" >>"$T_DIR/pull-ws.log" 2>&1; then
  files=$(cd "$T_DIR/wsimg/rootfs" && find . -type f | sort | tr '\n' ' ')
  t_expect_eq "the pushed image holds the workspace on the user's image, excludes left out" "$files" \
    "./.dockerignore ./app/sum_static ./params.txt ./sub/model.py "
else
  t_fail "pull the workspace image by digest: $(tail -3 "$T_DIR/pull-ws.log") $(cat "$T_DIR/ws.err")"
fi
out=$(kube_run --workspace "$WS" \
  -cfg "queue=q,muster_image=m:1,image_repo=127.0.0.1:$(t_free_port)/ws" dist.ddp -j 1x1 \
  --image "$REG/user:test" --script /app/sum_static 2>&1)
t_expect_eq "--workspace to a registry that is not there: exit 1" "$?" 1
t_expect_match "... names the push" "$out" "buildah push \(to -cfg image_repo\) failed"
t_expect_match "... and says the registry cannot be reached" "$out" "hint: the registry of -cfg image_repo cannot be reached"
# a registry that is there and refuses the push (read-only, as in maintenance)
ROP=$(t_free_port)
mkdir -p "$T_DIR/roreg"
cat >"$T_DIR/roreg/config.yml" <<YML
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $T_DIR/roreg/data}, maintenance: {readonly: {enabled: true}}}
http: {addr: 127.0.0.1:$ROP}
YML
t_spawn roreg docker-registry serve "$T_DIR/roreg/config.yml"
if t_wait_http "http://127.0.0.1:$ROP/v2/" 20 "$T_LAST_PID"; then
  printf '[[registry]]\nlocation = "127.0.0.1:%s"\ninsecure = true\n' "$ROP" >>"$T_DIR/registries.conf"
  out=$(timeout 120 env PATH="$MU_SOURCE_DIR/tests/fixtures/bin:$PATH" \
    KUBECTL_RECORD="$T_DIR/kcalls" KUBECTL_STATE="$T_DIR/kjobs" \
    "$MUSTER" run -s kubernetes --workspace "$WS" \
    -cfg "queue=q,muster_image=m:1,image_repo=127.0.0.1:$ROP/ws" dist.ddp -j 1x1 \
    --image "$REG/user:test" --script /app/sum_static 2>&1)
  t_expect_eq "--workspace to a registry that refuses the push: exit 1" "$?" 1
  t_expect_match "... says the registry refused it" "$out" "hint: the registry refused the push"
else
  t_fail "read-only registry starts: $(cat "$T_DIR/roreg.log")"
fi
out=$("$MUSTER" run -s kubernetes --dryrun --workspace "$WS" -cfg queue=q,muster_image=m:1 dist.ddp \
  --image "$REG/user:test" --script /x 2>&1)
t_expect_match "--workspace without image_repo: named" "$out" "--workspace needs -cfg image_repo"
unset CONTAINERS_STORAGE_CONF CONTAINERS_REGISTRIES_CONF

# --- 4. bad input ----------------------------------------------------------------------------
out=$(in_root "$R" /muster/bin/muster agent --nnodes 1 --nproc-per-node 1 --join-timeout 2 \
  --rdzv-endpoint "musterd.ml.svc:$MUSTERD_PORT" --rdzv-id noname -- /muster/bin/ring_allreduce 2>&1)
rc=$?; [ "$rc" -ne 0 ] && t_ok "no /etc/hosts: the agent fails (exit $rc)" || t_fail "no /etc/hosts: the agent succeeded"
t_expect_match "... naming the missing /etc/hosts" "$out" "cannot resolve 'musterd.ml.svc'.*no /etc/hosts and no /etc/resolv.conf"
mkdir -p "$R/etc" && echo "127.0.0.1 musterd.ml.svc" >"$R/etc/hosts"
out=$(in_root "$R" /muster/bin/muster agent --nnodes 1 --nproc-per-node 1 --join-timeout 20 \
  --rdzv-endpoint "musterd.ml.svc:$MUSTERD_PORT" --rdzv-id named -- /muster/bin/ring_allreduce 2>&1)
t_expect_match "with /etc/hosts the service name resolves in the empty root" "$out" "allreduce ok, world 1"
out=$("$MUSTER" run -s kubernetes -cfg queue=q,kubectl=/nonexistent dist.ddp --image "$REG/user:test" --script /x 2>&1)
t_expect_eq "no muster_image: the run is refused" "$?" 1
t_expect_match "... says how to build one" "$out" "-cfg muster_image: required.*build-image.sh"
dead=$(t_free_port)
out=$(timeout 120 "$MU_SOURCE_DIR/scripts/build-image.sh" --build-dir "$B" --storage "$BS" --tag muster:test \
  --push "docker://127.0.0.1:$dead/muster:test" 2>&1)
t_expect_eq "push to a registry that is not there fails" "$?" 1
t_expect_match "... naming the registry" "$out" "127.0.0.1:$dead.*(refused|cannot reach)"
bh rm --all >/dev/null 2>&1
t_done
