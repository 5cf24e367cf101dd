#!/usr/bin/env bash
# Builds the muster image FROM scratch (deploy/Containerfile) with buildah, no daemon needed:
# the portable bundle of BUILD_DIR (cmake --build BUILD_DIR --target portable) and an empty
# /tmp, nothing else. Optionally pushes it.
#   scripts/build-image.sh [--build-dir DIR] [--tag NAME] [--push DEST] [--storage DIR]
#       --push DEST     docker://REGISTRY/muster:TAG (or any buildah push destination);
#                       --tls-verify=false for a plain-HTTP registry: MU_IMAGE_TLS_VERIFY=false
#       --storage DIR   buildah's storage root (default: buildah's own), vfs driver
# Prints the image id (and with --push the pushed digest, as "digest: sha256:...").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build tag=muster:0.1.0 push="" storage=""
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --push) push=$2; shift 2 ;;
    --storage) storage=$2; shift 2 ;;
    *) echo "usage: scripts/build-image.sh [--build-dir DIR] [--tag NAME] [--push DEST] [--storage DIR]" >&2
       exit 2 ;;
  esac
done
command -v buildah >/dev/null || { echo "build-image: needs buildah (apt-get install buildah)" >&2; exit 1; }
bundle=$build/portable/muster
[ -x "$bundle/bin/muster" ] || cmake --build "$build" --target portable >&2
[ -x "$bundle/bin/muster" ] || { echo "build-image: no portable bundle in $bundle (a sanitizer build has none)" >&2; exit 1; }

ctx=$(mktemp -d "${TMPDIR:-/tmp}/muster-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/tmp"
chmod 1777 "$ctx/rootfs/tmp"
cp -a "$bundle" "$ctx/rootfs/muster"
opts=(--storage-driver vfs)
[ -n "$storage" ] && opts+=(--root "$storage/root" --runroot "$storage/run")
buildah "${opts[@]}" bud --quiet --format docker --layers=false -f "$here/deploy/Containerfile" \
  -t "$tag" "$ctx"
if [ -n "$push" ]; then
  # One try: an unreachable or refusing registry is reported at once, in buildah's words.
  if ! buildah "${opts[@]}" push --quiet --retry 0 --retry-delay 1ms --tls-verify="${MU_IMAGE_TLS_VERIFY:-true}" \
    --digestfile "$ctx/digest" "$tag" "$push" 2>"$ctx/push.err"; then
    echo "build-image: cannot push $tag to $push: $(tail -1 "$ctx/push.err")" >&2
    echo "build-image: check that the registry runs and accepts pushes (a plain-HTTP one needs MU_IMAGE_TLS_VERIFY=false)" >&2
    exit 1
  fi
  echo "digest: $(cat "$ctx/digest")"
fi
