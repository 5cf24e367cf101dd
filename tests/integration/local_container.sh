#!/usr/bin/env bash
# -s local_container (issue 34 item 3): the local scheduler with every replica inside the job's
# --image, no daemon. The test makes its own image FROM scratch (buildah, vfs): the C ring
# all-reduce, the shared libraries it needs and a shell (dash), pushed to a docker-registry it
# serves on loopback. Then:
#  1. dist.ddp -j 2x2 runs the ring inside the image: 4 ranks verified, status, log, list and
#     describe work on the local_container handle; nothing of the replicas' mounts is left.
#  2. The root a replica sees is the image's (no host directories), it is PID 1 of its own PID
#     namespace, /dev/shm is a tmpfs, --mounts are bound in, and what it writes into the image
#     does not reach the cache; a second run does not unpack the image again.
#  3. cancel stops a running job: CANCELLED, its processes gone, no mount left.
#  4. A trn1 user's aws.trn1_ddp --nproc_per_node 2 runs in the image on this CPU box, saying
#     that the Neuron-only steps (devices, EFA) are skipped; --claim is a local volume.
#  5. Bad input: no --image, an image the registry does not have, a missing skopeo, a
#     muster_dir that is no portable bundle: each a clear error naming the fix.
# The agent inside is the portable bundle (build/portable/muster, with its own loader); the ASan
# build has none (sanitizers need the host's loader), so there the normal build's is used, and
# the ASan muster runs the scheduler, the supervisor and the job's musterd.
. "$(dirname "$0")/../lib.sh"
for tool in buildah:buildah docker-registry:docker-registry skopeo:skopeo umoci:umoci; do
  t_need_cmd "${tool%%:*}" "${tool##*:}"
done
t_need_cmd unshare util-linux
[ "$(id -u)" -eq 0 ] || { echo "not ok - mount and PID namespaces need root (run as root)"; exit 1; }
B=$MU_BUILD_DIR
[ -x "$B/portable/muster/bin/muster" ] || B=$MU_SOURCE_DIR/build
t_need_built "$MUSTER" "$B/portable/muster/bin/muster" "$B/examples/ring_allreduce"
t_local_jobs
CACHE=$T_DIR/cache
CFG="image_cache=$CACHE,tls_verify=false,muster_dir=$B/portable/muster"
# Every job of ours is cancelled and every mount under $T_DIR gone whatever the exit path.
lc_cleanup() {
  "$MUSTER" list -s local_container 2>/dev/null | awk '$3 == "RUNNING" || $3 == "PENDING" {print $1}' |
    while read -r h; do "$MUSTER" cancel "$h"; done
  awk -v d="$T_DIR" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
  t_cancel_jobs
}
trap lc_cleanup EXIT
mounts_left() { awk -v d="$T_DIR" 'index($2, d) == 1' /proc/mounts | wc -l; }

# --- the registry and the image ------------------------------------------------------------
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
IMG=$T_DIR/img
mkdir -p "$IMG/app" "$IMG/bin" "$IMG/tmp" && chmod 1777 "$IMG/tmp"
cp "$B/examples/ring_allreduce" "$IMG/app/ring_allreduce"
cp "$(readlink -f /bin/dash)" "$IMG/bin/sh"
# A stand-in for a trn1 user's training script: what a worker of aws.trn1_ddp sees.
cat >"$IMG/app/train.sh" <<'SH'
echo "trn worker $RANK of $WORLD_SIZE, local $LOCAL_RANK, cache ${NEURON_CC_FLAGS#*=}"
echo "rank $RANK" >"/data/rank$RANK"
SH
# The libraries of both programs at their own paths (ldd: "name => /path (addr)" or "/path (addr)").
for lib in $(ldd "$B/examples/ring_allreduce" /bin/dash | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u); do
  mkdir -p "$IMG$(dirname "$lib")" && cp -L "$lib" "$IMG$lib"
done
BS=$T_DIR/buildah
bh() { buildah --storage-driver vfs --root "$BS/root" --runroot "$BS/run" "$@"; }
if c=$(bh from scratch 2>"$T_DIR/image.log") && bh copy "$c" "$IMG" / >>"$T_DIR/image.log" 2>&1 &&
  bh config --env PATH=/bin:/app --env IMAGE_VAR=from-image --workingdir /app "$c" >>"$T_DIR/image.log" 2>&1 &&
  bh commit --quiet "$c" ring:test >>"$T_DIR/image.log" 2>&1 &&
  bh push --quiet --tls-verify=false ring:test "docker://$REG/ring:test" >>"$T_DIR/image.log" 2>&1; then
  t_ok "the ring image (FROM scratch: ring_allreduce, its libraries, a shell) built and pushed"
else
  t_fail "build the image: $(tail -5 "$T_DIR/image.log")"; t_done
fi
[ ! -e "$IMG/usr/bin/python3" ] && t_ok "the image has no python" || t_fail "python in the image"

# --- 1. dist.ddp -j 2x2, the ring all-reduce inside the image --------------------------------
h=$(timeout 180 "$MUSTER" run -s local_container -cfg "$CFG" dist.ddp -j 2x2 \
  --image "$REG/ring:test" --script /app/ring_allreduce 2>"$T_DIR/run1.err"); rc=$?
t_expect_eq "dist.ddp 2x2 in the image exits 0" "$rc" 0
t_expect_match "the handle names local_container" "$h" '^local_container://muster/ring-allreduce-'
logs=$("$MUSTER" log "$h" 2>&1)
for r in 0 1 2 3; do
  t_expect_match "rank $r verified inside the image" "$logs" "rank $r: allreduce ok, world 4"
done
[ "$rc" = 0 ] || { tail -20 "$T_DIR/run1.err" | sed 's/^/# /'; printf '%s\n' "$logs" | tail -20 | sed 's/^/# /'; }
st=$("$MUSTER" status "$h" 2>&1)
t_expect_match "status: SUCCEEDED" "$st" 'State: SUCCEEDED'
t_expect_match "status: both nodes" "$st" 'ring_allreduce\[1\]:SUCCEEDED'
t_expect_match "log keeps the role prefix" "$("$MUSTER" log "$h/ring_allreduce/1" 2>&1)" '^ring_allreduce/1 (\[[0-3]\]:)?rank [0-3]: allreduce ok'
t_expect_match "list -s local_container shows it" "$("$MUSTER" list -s local_container 2>&1)" "${h##*/}"
if "$MUSTER" list -s local 2>&1 | grep -q "${h##*/}"; then t_fail "list -s local shows a container job"; else t_ok "list -s local does not"; fi
t_expect_match "describe gives the image" "$("$MUSTER" describe "$h" 2>&1)" "$REG/ring:test"
t_expect_eq "no mount left after the job" "$(mounts_left)" 0
roots=$(ls "$CACHE/rootfs")
t_expect_match "one root unpacked, named by digest" "$roots" '^[0-9a-f]{64}$'
ino=$(stat -c %i "$CACHE/rootfs/$roots/rootfs")

# --- 2. inside: the image's root, PID 1, /dev/shm, --mounts; a second run reuses the root ----
mkdir -p "$T_DIR/data" && echo host-data >"$T_DIR/data/f"
# A umoci that fails first on PATH: the second run must not unpack the image again.
mkdir -p "$T_DIR/no-umoci" && printf '#!/bin/sh\necho "umoci was run: $*" >&2\nexit 1\n' >"$T_DIR/no-umoci/umoci"
chmod +x "$T_DIR/no-umoci/umoci"
h2=$(PATH=$T_DIR/no-umoci:$PATH timeout 120 "$MUSTER" run -s local_container -cfg "$CFG" utils.sh --image "$REG/ring:test" \
  --mounts "type=bind,src=$T_DIR/data,dst=/data" -- \
  'echo "root: $(echo /*)"; read pid rest </proc/self/stat; echo "pid: $pid"; echo "cwd: $(pwd)"; echo "var: $IMAGE_VAR";' \
  'read d </data/f; echo "data: $d"; echo junk >/app/written; echo "shm: $(echo /dev/shm/.)"' 2>"$T_DIR/run2.err"); rc=$?
t_expect_eq "utils.sh in the image exits 0" "$rc" 0
out=$("$MUSTER" log "$h2" 2>&1)
t_expect_match "the root is the image's (no host /work, /usr or /etc/passwd)" "$out" 'root: /app /bin /data /dev /etc /lib.* /muster /proc /tmp'
if printf '%s' "$out" | grep -E 'root:.*(/work|/home|/var)'; then t_fail "host directories inside"; else t_ok "no host directories inside"; fi
t_expect_match "PID 1 of its own PID namespace" "$out" 'pid: 1$'
t_expect_match "the image's WorkingDir" "$out" 'cwd: /app$'
t_expect_match "the image's Env" "$out" 'var: from-image$'
t_expect_match "--mounts bound in" "$out" 'data: host-data$'
[ ! -e "$CACHE/rootfs/$roots/rootfs/app/written" ] && t_ok "a write inside does not reach the cached root" ||
  t_fail "the write reached the cache"
t_expect_eq "the second run did not unpack again" "$(ls "$CACHE/rootfs") $(stat -c %i "$CACHE/rootfs/$roots/rootfs")" "$roots $ino"
[ "$rc" = 0 ] || { tail -20 "$T_DIR/run2.err" | sed 's/^/# /'; printf '%s\n' "$out" | tail -20 | sed 's/^/# /'; }

# --- 3. cancel ---------------------------------------------------------------------------------
mkdir -p "$T_DIR/ctl" && mkfifo "$T_DIR/ctl/fifo"
setsid "$MUSTER" run -s local_container -cfg "$CFG,grace_period=5" utils.sh --image "$REG/ring:test" \
  --mounts "type=bind,src=$T_DIR/ctl,dst=/ctl" -- 'echo waiting; read x </ctl/fifo' \
  >"$T_DIR/run3.out" 2>"$T_DIR/run3.err" &
T_PIDS+=("$!")
# list's columns: handle, name, status, age
running() { "$MUSTER" list -s local_container 2>/dev/null | awk '$3 == "RUNNING" {print $1}' | grep -q .; }
waiting() { grep -qs waiting "$T_DIR"/logs/sh-*/sh/0/stdout.log; }
if t_until 60 running && t_until 60 waiting; then
  h3=$("$MUSTER" list -s local_container | awk '$3 == "RUNNING" {print $1; exit}')
  sup=$(grep -o '"supervisor_pid":[0-9]*' "$T_DIR/logs/${h3##*/}/state.json" | cut -d: -f2)
  pid=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["replicas"][0]["pid"])' "$T_DIR/logs/${h3##*/}/state.json")
  t_expect_match "the replica's mounts exist while it runs (in its own namespace only)" \
    "$(mounts_left) $(grep -c "$T_DIR" /proc/"$pid"/mounts 2>&1) (replica pid $pid)" '^0 [1-9]'
  "$MUSTER" cancel "$h3" >"$T_DIR/cancel.out" 2>&1
  t_expect_eq "cancel exits 0" "$?" 0
  gone() { ! kill -0 "$pid" 2>/dev/null && ! kill -0 "$sup" 2>/dev/null; }
  t_until 30 gone && t_ok "the replica and its supervisor are gone" || t_fail "processes left: $pid $sup"
  t_expect_match "status: CANCELLED" "$("$MUSTER" status "$h3" 2>&1)" 'State: CANCELLED'
  t_expect_eq "no mount left after cancel" "$(mounts_left)" 0
else
  t_fail "the job to cancel never ran: $(tail -5 "$T_DIR/run3.err" "$T_DIR"/logs/sh-*/sh/0/*.log 2>/dev/null)"
fi

# --- 4. a trn1 user's job on a CPU box: aws.trn1_ddp --nproc_per_node 2 ------------------------
h4=$(timeout 120 "$MUSTER" run -s local_container -cfg "$CFG" aws.trn1_ddp --nnodes 1 --nproc_per_node 2 \
  --image "$REG/ring:test" --python /bin/sh --script /app/train.sh 2>"$T_DIR/run4.err"); rc=$?
t_expect_eq "aws.trn1_ddp in the image exits 0" "$rc" 0
t_expect_match "the Neuron-only steps are said to be skipped" "$(cat "$T_DIR/run4.err")" \
  "role 'role1' asks for 16 Neuron device\(s\) and this machine has none.*Neuron-only steps are skipped"
t_expect_match "... and the EFA adapters" "$(cat "$T_DIR/run4.err")" "asks for 8 EFA adapter\(s\): skipped"
out=$("$MUSTER" log "$h4" 2>&1)
for r in 0 1; do
  t_expect_match "trn1 worker $r ran" "$out" "trn worker $r of 2, local $r, cache /data/neuron_cache/default_0"
done
t_expect_eq "the claim is a volume under the image cache" "$(cat "$CACHE"/volumes/fsx-claim/rank* 2>&1 | sort | tr '\n' ' ')" "rank 0 rank 1 "
[ "$rc" = 0 ] || { tail -20 "$T_DIR/run4.err" | sed 's/^/# /'; printf '%s\n' "$out" | tail -20 | sed 's/^/# /'; }

# --- 5. bad input ------------------------------------------------------------------------------
out=$("$MUSTER" run -s local_container -cfg "$CFG" utils.sh -- echo hi 2>&1)
t_expect_eq "no --image: exit 2 (a usage error)" "$?" 2
t_expect_match "... naming --image" "$out" "role 'sh' has no image.*--image"
out=$("$MUSTER" run -s local_container -cfg "$CFG" utils.sh --image "$REG/nope:1" -- echo hi 2>&1)
t_expect_eq "an image the registry lacks: exit 1" "$?" 1
t_expect_match "... names the image and what the registry said" "$out" "pulling the image '$REG/nope:1'.*manifest unknown"
t_expect_match "... and how to check" "$out" "hint: the registry has no such image or tag: check --image"
out=$("$MUSTER" run -s local_container -cfg "image_cache=$CACHE,muster_dir=$B/portable/muster" utils.sh --image "$REG/ring:test" -- echo hi 2>&1)
t_expect_match "a plain-HTTP registry: the hint names tls_verify=false" "$out" "tls_verify=false"
out=$(PATH=/nonexistent "$MUSTER" run -s local_container -cfg "$CFG" utils.sh --image "$REG/ring:test" -- echo hi 2>&1)
t_expect_match "no skopeo: apt-get install skopeo" "$out" "apt-get install skopeo"
out=$("$MUSTER" run -s local_container -cfg "$CFG,muster_dir=$T_DIR" utils.sh --image "$REG/ring:test" -- echo hi 2>&1)
t_expect_match "muster_dir without a bundle: how to get one" "$out" "no portable muster bundle.*-cfg muster_dir=DIR"
out=$("$MUSTER" run -s local_container --dryrun -cfg "$CFG" dist.ddp -j 2x2 --image "$REG/ring:test" --script /app/x 2>&1)
t_expect_match "dryrun says where the image goes and pulls nothing" "$out" "image: $REG/ring:test \(pulled at submission\)"
t_expect_match "... and shows the namespaces" "$out" "unshare --mount --pid --fork --kill-child"
t_done
