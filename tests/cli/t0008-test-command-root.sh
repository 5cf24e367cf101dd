#!/usr/bin/env bash
# The README's test command as a user (issue 34: "as root with no sudo and as a user with sudo").
# scripts/test.sh needs root all through (apt-get, slurmd, network namespaces, chroot): run by a
# user it runs itself again through sudo, keeping the MU_* settings and naming the user the
# build trees go back to; with no sudo it stops at once and says to run it as root.
# The user is nobody (setpriv), and the sudo is a recording one that runs nothing.
. "$(dirname "$0")/../lib.sh"
t_need_cmd setpriv util-linux
[ "$(id -u)" -eq 0 ] || { echo "not ok - t0008 needs root to become nobody (scripts/test.sh runs the suite as root)"; exit 1; }
uid=$(id -u nobody) gid=$(id -g nobody)
d=$T_DIR/u
mkdir -p "$d/bin" "$d/nosudo"
chmod 755 "$T_DIR" "$d" "$d/bin" "$d/nosudo"
cat >"$d/bin/sudo" <<'SH'
#!/bin/bash
# a recording sudo: writes its arguments, one per line, and what it was given to keep
{ printf '%s\n' "$@"; echo "env MU_INSTALL_DEPS=${MU_INSTALL_DEPS-unset}"; echo "uid $(id -u)"; } >"$REC"
exit 0
SH
chmod 755 "$d/bin/sudo"
for c in bash dirname nproc id env cat; do ln -s "$(command -v $c)" "$d/nosudo/$c"; done
rec=$d/rec
touch "$rec"; chown nobody "$rec"
script=$MU_SOURCE_DIR/scripts/test.sh

as_nobody() { # PATH CMD...
  local path=$1; shift
  setpriv --reuid="$uid" --regid="$gid" --clear-groups env -i HOME=/ PATH="$path" REC="$rec" \
    MU_INSTALL_DEPS=0 "$@"
}

# 1. a user with sudo: test.sh hands itself to sudo, with its arguments and the settings
out=$(as_nobody "$d/bin:/usr/bin:/bin" bash "$script" --fast 2>&1); rc=$?
t_expect_eq "as a user with sudo, test.sh execs sudo (the recording sudo exits 0)" "$rc" 0
t_expect_match "it says why" "$out" 'not root: running again through sudo'
got=$(cat "$rec")
t_expect_match "the sudo call keeps MU_ALLOW_SKIP, MU_INSTALL_DEPS, MU_FUZZ_SECONDS" "$got" \
  '^--preserve-env=MU_ALLOW_SKIP,MU_INSTALL_DEPS,MU_FUZZ_SECONDS'
t_expect_match "it names the user the build trees go back to" "$got" "MU_TEST_OWNER=$uid:$gid"
t_expect_match "it runs the same script" "$got" "^$script\$"
t_expect_match "with the same arguments" "$(tail -n 3 "$rec" | head -n 1)" '^--fast$'
t_expect_match "the caller's MU_INSTALL_DEPS reaches sudo" "$got" 'env MU_INSTALL_DEPS=0'
t_expect_match "sudo was called by the user, not root" "$got" "uid $uid"

# 2. a user with no sudo: a clear stop, nothing installed or built
: >"$rec"
out=$(as_nobody "$d/nosudo" bash "$script" 2>&1); rc=$?
t_expect_eq "as a user with no sudo, test.sh exits 1" "$rc" 1
t_expect_match "it says to run it as root" "$out" 'run it as root \(su -c scripts/test.sh\), or install sudo'
t_expect_eq "it called no sudo" "$(cat "$rec")" ""
t_expect_match "it built nothing" "$out" '^[^=]*$'
t_done
