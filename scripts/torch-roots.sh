#!/usr/bin/env bash
# The torch 2.x roots of the test suite: one Debian root per suite, built once per machine.
#   scripts/torch-roots.sh build [SUITE...]    build the missing roots (default: all), side by side
#   scripts/torch-roots.sh check [SUITE...]    exit 1 naming each root that is missing
#   scripts/torch-roots.sh path SUITE          print the root's directory
#   scripts/torch-roots.sh run [-b DIR]... SUITE CMD...
#                                              run CMD inside the root (chroot), with /proc and
#                                              /dev/shm mounted and each DIR bound at its own path
# Suites and the torch they carry: trixie = python3-torch 2.6, sid = python3-torch 2.14.
#
# The roots live in $MUSTER_TORCH_ROOTS (default /var/cache/muster/torch-roots), outside the
# repository: <dir>/<suite> is the root, <dir>/debs-<suite> the downloaded packages, so a rebuild
# downloads nothing again. A root is made with mmdebstrap --variant=essential and only
# python3-torch, python3-etcd, python3-numpy and their dependencies (no apt, no recommends, no
# docs, man pages, locales or tests/ dirs), under eatmydata, with py3compile a no-op while they
# install (see hook_essential). Both roots cold, downloads included, side by side: 4.8 min of CPU
# (user+sys), 23.5 min wall at a load of 20-29 on this 2-core machine (the old minbase build with
# byte-compiling: 34.6 min); 911 MB (trixie) and 1.1 GB (sid). The archive's Release files may be past their Valid-Until (sid's
# snapshots, a mirror that lags): apt inside is told not to check it. Nothing is started inside
# the root: its policy-rc.d refuses every daemon.
#
# Debian's torch 2.x is built without libuv, and torch 2.x asks TCPStore for libuv by default
# (dynamic_rendezvous passes use_libuv=True itself), which fails there with "use_libuv was
# requested but PyTorch was built without libuv support". The root's sitecustomize.py makes
# TCPStore's use_libuv False. The client protocol is the same either way.
set -euo pipefail

dir=${MUSTER_TORCH_ROOTS:-/var/cache/muster/torch-roots}
mirror=${MUSTER_TORCH_MIRROR:-http://deb.debian.org/debian}
all_suites=(trixie sid)
pkgs=python3-torch,python3-etcd,python3-numpy

die() {
  echo "torch-roots: $*" >&2
  exit 1
}

known() {
  case $1 in trixie | sid) return 0 ;; esac
  die "unknown suite '$1': the suites are ${all_suites[*]}"
}

ok() { [ -f "$dir/$1/.muster-root-ok" ]; }

# The sitecustomize.py of a root: every TCPStore made in it gets use_libuv=False. torch is not
# imported here (that costs seconds); the patch happens when torch.distributed is first loaded.
# Written when missing or different, through a new file and a rename: tests running in the root
# at the same time never read half of it.
write_sitecustomize() {
  local root=$1 f want
  want=$(sitecustomize_text)
  for f in "$root"/etc/python3.*/sitecustomize.py "$root"/usr/lib/python3/dist-packages/sitecustomize.py; do
    [ -d "$(dirname "$f")" ] || continue
    [ -f "$f" ] && [ "$(cat "$f")" = "$want" ] && continue
    printf '%s\n' "$want" >"$f.new.$$"
    mv -f "$f.new.$$" "$f"
  done
}

sitecustomize_text() {
  cat <<'EOF'
# muster's torch root: this torch is built without libuv, so TCPStore(use_libuv=True), torch
# 2.x's default, fails. Make every TCPStore use the classic server and client.
import importlib.abc
import sys


def _patch(mod):
    base = getattr(mod, "TCPStore", None)
    if base is None or getattr(base, "_muster_no_libuv", False):
        return

    class TCPStore(base):
        _muster_no_libuv = True

        def __init__(self, *args, **kwargs):
            kwargs["use_libuv"] = False
            super().__init__(*args, **kwargs)

    TCPStore.__name__ = base.__name__
    TCPStore.__qualname__ = base.__qualname__
    # torch.distributed's own submodules (rendezvous.py: the workers' env:// store) took the
    # name while the package loaded: replace it wherever it was taken
    for name, m in list(sys.modules.items()):
        if (name == "torch._C._distributed_c10d" or name.startswith("torch.distributed")) and \
                getattr(m, "TCPStore", None) is base:
            m.TCPStore = TCPStore
    mod.TCPStore = TCPStore


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch.distributed":
            return None
        for f in sys.meta_path:
            if f is self:
                continue
            spec = f.find_spec(name, path, target) if hasattr(f, "find_spec") else None
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    _patch(module)

                spec.loader.exec_module = exec_module
                return spec
        return None


sys.meta_path.insert(0, _Finder())
EOF
}

# The hooks of a build. mmdebstrap runs each under sh with the root as $1.
# essential: before the torch packages go in, py3compile (every Python package's postinst
# byte-compiles all its modules with it: torch's thousands of files were most of a build) is
# diverted to a no-op, so Python compiles only what is imported, on first import; and
# policy-rc.d refuses every daemon.
hook_essential='set -e
chroot "$1" dpkg-divert --quiet --local --rename --add /usr/bin/py3compile
printf "#!/bin/sh\n# muster torch root: byte-compiling happens on import\nexit 0\n" >"$1/usr/bin/py3compile"
chmod 755 "$1/usr/bin/py3compile"
printf "#!/bin/sh\nexit 101\n" >"$1/usr/sbin/policy-rc.d"
chmod 755 "$1/usr/sbin/policy-rc.d"'
# customize: the host name resolves inside (run_in adds this host's name when it changes).
hook_hosts='printf "127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost\n" "$(hostname)" >"$1/etc/hosts"'

# The modules the tests import, imported once at the end of a build: their byte code is written
# then, so the first test does not pay for it (py3compile did not run).
warm_imports='import torch, numpy, etcd
import torch.distributed.run, torch.distributed.elastic.rendezvous.dynamic_rendezvous
import torch.distributed.elastic.rendezvous.c10d_rendezvous_backend
import torch.distributed.elastic.rendezvous.etcd_rendezvous
import torch.distributed.elastic.rendezvous.etcd_rendezvous_backend
import torch.distributed.elastic.timer, torch.nn.parallel
print(torch.__version__)'

build_one() {
  local s=$1 root=$dir/$1 tmp=$dir/$1.tmp debs=$dir/debs-$1 t0=$SECONDS
  mkdir -p "$debs"
  rm -rf "$tmp"
  echo "torch-roots: building $s in $root (packages cached in $debs)"
  local hooks=()
  [ -d /usr/share/mmdebstrap/hooks/eatmydata ] && command -v eatmydata >/dev/null &&
    hooks+=(--hook-dir=/usr/share/mmdebstrap/hooks/eatmydata)
  # --variant=essential: the Essential:yes packages, then torch's three and their Depends
  # (no apt, no Priority:required extras, no recommends); the excluded paths are never read
  if ! mmdebstrap --mode=root --variant=essential --include="$pkgs" "${hooks[@]}" \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --aptopt='APT::Install-Recommends "false"' \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='force-unsafe-io' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/lib/python3/dist-packages/*/tests/*' \
    --skip=download/empty \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook="sync-in $debs /var/cache/apt/archives/" \
    --essential-hook="$hook_essential" \
    --customize-hook="sync-out /var/cache/apt/archives $debs" \
    --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
    --customize-hook="$hook_hosts" \
    "$s" "$tmp" "$mirror" >"$dir/$s.log" 2>&1; then
    rm -rf "$tmp"
    echo "torch-roots: building the $s root failed; the last lines of $dir/$s.log:" >&2
    tail -n 20 "$dir/$s.log" >&2
    return 1
  fi
  write_sitecustomize "$tmp"
  local v
  if ! v=$(run_in "$tmp" python3 -c "$warm_imports" 2>&1); then
    rm -rf "$tmp"
    echo "torch-roots: the $s root was built but its torch does not import: $v" >&2
    return 1
  fi
  v=$(tail -n 1 <<<"$v")
  echo "$v" >"$tmp/.muster-torch-version"
  rm -rf "$root"
  mv "$tmp" "$root"
  touch "$root/.muster-root-ok"
  echo "torch-roots: $s root ready: torch $v, $(du -sh "$root" | cut -f1), $((SECONDS - t0)) s"
}

# build_locked SUITE: one builder per suite per machine; a second waits for the first.
build_locked() {
  local s=$1
  exec 9>"$dir/$s.lock"
  flock 9
  if ok "$s"; then
    exec 9>&-
    return 0
  fi
  local rc=0
  build_one "$s" || rc=$?
  exec 9>&-
  return $rc
}

# run_in ROOT [-b DIR]... CMD...: a private mount namespace, so the mounts go when CMD ends.
run_in() {
  local root=$1
  shift
  local binds=()
  while [ $# -gt 0 ] && [ "$1" = -b ]; do
    binds+=("$2")
    shift 2
  done
  [ $# -gt 0 ] || die "run: no command"
  # The host name resolves inside: the root's /etc/hosts names this host.
  local h
  h=$(hostname)
  if ! grep -qw -- "$h" "$root/etc/hosts" 2>/dev/null; then
    printf '127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost\n' "$h" >"$root/etc/hosts.new.$$"
    mv -f "$root/etc/hosts.new.$$" "$root/etc/hosts"
  fi
  for b in "${binds[@]}"; do mkdir -p "$root$b"; done
  MU_ROOT=$root MU_BINDS="${binds[*]}" exec unshare --mount --propagation private -- bash -c '
    set -e
    mount -t proc proc "$MU_ROOT/proc"
    mkdir -p "$MU_ROOT/dev/shm"
    mount --bind /dev/shm "$MU_ROOT/dev/shm"
    for b in $MU_BINDS; do mount --bind "$b" "$MU_ROOT$b"; done
    exec chroot "$MU_ROOT" "$@"' bash "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  build)
    [ "$(id -u)" = 0 ] || die "building a root needs root (mmdebstrap --mode=root, chroot); run it with sudo"
    command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: run scripts/install-deps.sh --test"
    [ $# -gt 0 ] || set -- "${all_suites[@]}"
    mkdir -p "$dir"
    pids=() names=()
    for s in "$@"; do
      known "$s"
      ok "$s" && { echo "torch-roots: $s root present ($(cat "$dir/$s/.muster-torch-version"))"; continue; }
      (build_locked "$s") &
      pids+=($!) names+=("$s")
    done
    bad=0
    for i in "${!pids[@]}"; do
      wait "${pids[$i]}" || { echo "torch-roots: the ${names[$i]} root could not be built" >&2; bad=1; }
    done
    exit $bad
    ;;
  check)
    [ $# -gt 0 ] || set -- "${all_suites[@]}"
    bad=0
    for s in "$@"; do
      known "$s"
      ok "$s" || { echo "torch-roots: the $s root is missing in $dir: run scripts/torch-roots.sh build" >&2; bad=1; }
    done
    exit $bad
    ;;
  path)
    [ $# = 1 ] || die "usage: scripts/torch-roots.sh path SUITE"
    known "$1"
    echo "$dir/$1"
    ;;
  run)
    binds=()
    while [ $# -gt 0 ] && [ "$1" = -b ]; do
      binds+=(-b "$2")
      shift 2
    done
    [ $# -ge 2 ] || die "usage: scripts/torch-roots.sh run [-b DIR]... SUITE CMD..."
    known "$1"
    ok "$1" || die "the $1 root is missing in $dir: run scripts/torch-roots.sh build $1"
    s=$1
    shift
    write_sitecustomize "$dir/$s"
    run_in "$dir/$s" "${binds[@]}" "$@"
    ;;
  *)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
