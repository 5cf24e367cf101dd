#!/usr/bin/env bash
# The .deb (packaging/CMakeLists.txt, CPack): built from this build directory, installed with
# `dpkg --root` into an empty scratch root, and the README's demo (dist.ddp -j 2x2 over the C
# ring all-reduce) run in a chroot of that root: the components must be found relative to the
# installed binary (the source tree is not visible there), the worker is the installed one.
# Also: the man pages carry every command and option of the -h text, musterd.service starts
# the installed musterd with its data dir, bash completion completes commands, and a client
# program built with the installed header and pkg-config file talks to a musterd.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER" "$MUSTERD" "$MU_BUILD_DIR/examples/ring_allreduce"
t_need_cmd cpack cmake
t_need_cmd dpkg-deb dpkg
t_need_cmd pkg-config pkg-config
t_need_cmd unshare util-linux
[ -f "$MU_BUILD_DIR/CPackConfig.cmake" ] || { t_fail "no CPackConfig.cmake in $MU_BUILD_DIR"; t_done; }

# 1. The package.
mkdir -p "$T_DIR/pkg"
if ! (cd "$T_DIR/pkg" && cpack -G DEB --config "$MU_BUILD_DIR/CPackConfig.cmake" -B .) \
  >"$T_DIR/cpack.log" 2>&1; then
  t_fail "cpack -G DEB: $(tail -5 "$T_DIR/cpack.log")"
  t_done
fi
deb=$(ls "$T_DIR"/pkg/muster_*.deb 2>/dev/null | head -1)
t_expect_match "cpack made a .deb" "$deb" 'muster_[0-9.]+_amd64\.deb$'
deps=$(dpkg-deb -f "$deb" Depends)
t_expect_match "the package depends on the shared libraries" "$deps" 'libuv1.*libcjson1.*libssl3'

# 2. dpkg into a scratch root. The dependencies are the host's; dpkg is told not to check them
# (the root has no dpkg database of its own), the libraries are copied in below.
R=$T_DIR/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/tmp" "$R/proc" "$R/dev"
touch "$R/var/lib/dpkg/status" "$R/var/lib/dpkg/available"
chmod 1777 "$R/tmp"
if dpkg --root="$R" --force-depends -i "$deb" >"$T_DIR/dpkg.log" 2>&1; then
  t_ok "dpkg --root -i"
else
  t_fail "dpkg --root -i: $(tail -5 "$T_DIR/dpkg.log")"
fi
st=$(dpkg --root="$R" -s muster 2>/dev/null | sed -n 's/^Status: //p')
t_expect_eq "dpkg knows the package" "$st" "install ok installed"
for f in usr/bin/muster usr/bin/musterd usr/libexec/muster/ring_allreduce \
  usr/share/muster/components/dist.ddp.yaml usr/share/muster/python/_muster_torchx.py \
  usr/share/muster/python/torchx/specs/api.py usr/share/man/man1/muster.1 \
  usr/share/man/man8/musterd.8 lib/systemd/system/musterd.service usr/lib/systemd/system/musterd.service \
  usr/share/bash-completion/completions/muster usr/include/muster/client.h \
  usr/lib/pkgconfig/muster.pc usr/share/doc/muster/README.md; do
  case $f in lib/systemd/*) continue ;; esac
  [ -e "$R/$f" ] && t_ok "installed /$f" || t_fail "not installed: /$f"
done

# The installed muster runs a TorchX Python component with the installed shim (python3 is the
# host's: a wrapper records which runner it was given).
cat >"$T_DIR/comp.py" <<'PYEOF'
import torchx.specs as specs
def hello(msg: str = "hi") -> specs.AppDef:
    return specs.AppDef("hello", [specs.Role("echo", "", entrypoint="echo", args=[msg])])
PYEOF
printf '#!/bin/sh\necho "$2" >"%s/runner"\nexec %s "$@"\n' "$T_DIR" "$PY" >"$T_DIR/py"
chmod +x "$T_DIR/py"
out=$(MUSTER_PYTHON=$T_DIR/py "$R/usr/bin/muster" run --dryrun "$T_DIR/comp.py:hello" --msg yo 2>&1)
t_expect_match "the installed muster runs a Python component" "$out" '"args":[[:space:]]*\["yo"\]'
t_expect_eq "... with the installed shim" "$(cat "$T_DIR/runner" 2>/dev/null)" \
  "$R/usr/bin/../share/muster/python/_muster_torchx.py"

# 3. Man pages: every command of `muster -h` has a section, every musterd option a row.
man1=$R/usr/share/man/man1/muster.1 man8=$R/usr/share/man/man8/musterd.8
for c in $("$MUSTER" -h | sed -n 's/^    \([a-z]*\) .*/\1/p'); do
  grep -q "^\.SH \"MUSTER $(printf '%s' "$c" | tr a-z A-Z)\"" "$man1" || t_fail "muster.1 lacks '$c'"
done
missing=""
for o in $("$MUSTERD" -h | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  grep -qF -- "$(printf '%s' "$o" | sed 's/-/\\-/g')" "$man8" || missing="$missing $o"
done
t_expect_eq "musterd.8 has every option of musterd -h" "$missing" ""
t_expect_match "musterd.8 is roff" "$(head -1 "$man8")" '^\.TH MUSTERD 8'

# 4. The unit: the installed musterd, its state directory as the data dir.
unit=$R/usr/lib/systemd/system/musterd.service
[ -f "$unit" ] || unit=$R/lib/systemd/system/musterd.service
t_expect_match "unit runs /usr/bin/musterd with --data-dir" "$(grep ^ExecStart= "$unit")" \
  '^ExecStart=/usr/bin/musterd .*--data-dir /var/lib/musterd'
t_expect_eq "unit has its StateDirectory" "$(sed -n 's/^StateDirectory=//p' "$unit")" musterd

# 5. bash completion: `muster st<TAB>` and `muster run --dr<TAB>`, with the installed muster.
comp() { # words... (the last is the one completed)
  bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _muster; echo "${COMPREPLY[*]}"' \
    _ "$R/usr/share/bash-completion/completions/muster" "$MUSTER" "$@"
}
t_expect_eq "completion of 'muster st'" "$(comp st)" status
t_expect_eq "completion of 'muster run --dr'" "$(comp run --dr)" --dryrun
t_expect_eq "completion of 'muster run dist.d'" "$(comp run dist.d)" dist.ddp
t_expect_eq "completion of 'muster run dist' (every dist builtin)" "$(comp run dist)" "dist.ddp dist.spmd"

# 6. Copy the shared libraries of the installed programs into the root (what apt would have
# installed from the Depends line), then run the demo in a chroot with /proc and /dev.
for b in "$R/usr/bin/muster" "$R/usr/bin/musterd" "$R/usr/libexec/muster/ring_allreduce"; do
  ldd "$b" | grep -o '/[^ ]*'
done | sort -u | while read -r lib; do
  mkdir -p "$R$(dirname "$lib")"
  cp -L "$lib" "$R$lib"
done
in_root() { # the command runs in the chroot with an empty environment
  unshare -m --fork bash -c 'mount -t proc proc "$1/proc" && mount --bind /dev "$1/dev" &&
    shift && exec env -i USER=root MUSTER_LOG_DIR=/tmp/jobs "$@"' _ "$R" /usr/sbin/chroot "$R" "$@"
}
out=$(in_root /usr/bin/muster run -s local dist.ddp -j 2x2 --script /usr/libexec/muster/ring_allreduce 2>&1)
rc=$?
t_expect_eq "demo in the chroot exits 0" "$rc" 0
h=$(printf '%s\n' "$out" | grep -o 'local://muster/[a-z0-9-]*' | head -1)
t_expect_match "demo printed its handle" "$h" '^local://muster/'
logs=$(in_root /usr/bin/muster log "$h" 2>&1)
n=$(printf '%s\n' "$logs" | grep -c 'allreduce ok, world 4')
t_expect_eq "4 ranks verified the sum (installed worker, installed components)" "$n" 4
n=$(in_root /usr/bin/muster builtins 2>&1 | grep -c '^ *[0-9]*\. ')
t_expect_eq "the chroot's muster finds the installed builtins" "$n" "$(ls "$MU_SOURCE_DIR"/components/*.yaml | wc -l)"

# 7. The client library: a program built against the installed header and muster.pc joins a run
# on a musterd, puts a key and reads it back.
cat >"$T_DIR/kv.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <muster/client.h>
int main(int argc, char **argv)
{
  struct mu_client *c = NULL;
  char *v = NULL;
  size_t n = 0;
  struct mu_join_opts o = {"n0", "127.0.0.1", 1, 29500, 1, 1, 0, 10000, -1, 0, 0};
  struct mu_round r;
  if (argc < 2 || mu_client_new(argv[1], &c) != 0)
    return 2;
  if (mu_client_join(c, "pkgtest", &o, &r) != 0 || mu_client_kv_put(c, "pkgtest", "k", "hello", 5, NULL) != 0 ||
      mu_client_kv_get(c, "pkgtest", "k", 0, &v, &n) != 0) {
    fprintf(stderr, "kv: %s\n", mu_client_errmsg(c));
    return 1;
  }
  printf("%.*s rank %d of %d\n", (int)n, v, r.node_rank, r.nnodes);
  mu_free(v);
  mu_round_release(&r);
  mu_client_free(c);
  return 0;
}
C
flags=$(PKG_CONFIG_LIBDIR=$R/usr/lib/pkgconfig pkg-config --cflags --libs muster)
t_expect_match "pkg-config --cflags --libs muster" "$flags" "-I$R/usr/lib/pkgconfig/../../include.*-lmuster"
san=""
[ "$MU_SANITIZED" = 1 ] && san="-fsanitize=address,undefined" # the library carries ASan's runtime
if cc $san -o "$T_DIR/kv" "$T_DIR/kv.c" $flags -Wl,-rpath,"$R/usr/lib" >"$T_DIR/cc.log" 2>&1; then
  t_start_musterd
  t_expect_eq "client program built from the package" "$("$T_DIR/kv" "$MUSTERD_URL" 2>&1)" "hello rank 0 of 1"
else
  t_fail "cc against the installed header and library: $(head -5 "$T_DIR/cc.log")"
fi
t_done
