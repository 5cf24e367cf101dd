#!/usr/bin/env bash
# The muster image (issue 11): its size (compressed layers as pushed, and unpacked), the size of
# the portable agent (what the init container copies into every pod), the time to build and
# push it, and the time to build and push a workspace image: 100 small files layered on a base
# image and pushed (what `muster run --workspace` has to do), against a docker-registry on
# loopback. Goal: image < 20 MB. Not a test.
#   bench/bench_image.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
for t in buildah docker-registry skopeo python3; do
  command -v "$t" >/dev/null || { echo "bench_image: needs $t (scripts/install-deps.sh --test)" >&2; exit 1; }
done
cmake --build "$build" --target portable >/dev/null
T=$(mktemp -d /tmp/bench_image.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$T/reg.yml" <<YML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $T/data}}
http: {addr: 127.0.0.1:$port}
YML
docker-registry serve "$T/reg.yml" >"$T/reg.log" 2>&1 &
regpid=$!
trap 'kill $regpid 2>/dev/null; wait $regpid 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && break; sleep 0.1; done
reg=127.0.0.1:$port
bh() { buildah --storage-driver vfs --root "$T/bs/root" --runroot "$T/bs/run" "$@"; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

t0=$(date +%s%N)
MU_IMAGE_TLS_VERIFY=false "$here/scripts/build-image.sh" --build-dir "$build" --storage "$T/bs" \
  --tag muster:bench --push "docker://$reg/muster:bench" >/dev/null
image_ms=$(ms "$t0")
image_bytes=$(skopeo inspect --tls-verify=false --raw "docker://$reg/muster:bench" |
  python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))')
unpacked=$(du -sb "$build/portable/muster" | cut -f1)
agent=$(du -cb "$build/portable/muster/bin/muster" "$build/portable/muster/lib" | tail -1 | cut -f1)

# A 100-file workspace (1-4 KB each, in 10 directories) layered on the muster image.
mkdir -p "$T/ws"
for i in $(seq 0 99); do
  mkdir -p "$T/ws/pkg$((i % 10))"
  head -c $((1024 * (1 + i % 4))) /dev/urandom | base64 >"$T/ws/pkg$((i % 10))/f$i.py"
done
printf '*.pyc\n.git\n' >"$T/ws/.dockerignore"
t0=$(date +%s%N)
c=$(bh from --quiet muster:bench)
bh copy --quiet "$c" "$T/ws" /workspace >/dev/null
bh commit --quiet "$c" ws:bench >/dev/null
bh push --quiet --retry 0 --tls-verify=false ws:bench "docker://$reg/ws:bench"
ws_ms=$(ms "$t0")
echo "bench_image: muster image ${image_bytes} bytes compressed ($((image_bytes / 1048576)) MiB; goal < 20 MB: $([ "$image_bytes" -lt 20000000 ] && echo ok || echo FAIL)), bundle ${unpacked} bytes unpacked, portable agent (muster + its libraries) ${agent} bytes; build+push of the image ${image_ms} ms; 100-file workspace layered and pushed ${ws_ms} ms"
