#!/usr/bin/env bash
# A new user's first day (issue 34's papercuts): the README's quickstart as root without sudo and
# as a user with sudo, muster on PATH, and demo.sh printing each rank's line once.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_local_jobs

# ---- the README's quickstart commands: no sudo in front, and muster put on PATH
readme=$(sed -n '/^## Quickstart/,/^## /p' "$MU_SOURCE_DIR/README.md")
first=$(printf '%s\n' "$readme" | sed -n '/^```sh/{n;p;q}')
t_expect_match "README: the quickstart command" "$first" '^\./scripts/quickstart\.sh '
t_expect_match "README: muster on PATH" "$readme" 'export PATH="\$PWD/build:\$PATH"'

# ---- install-deps.sh with a package missing, through stand-ins for dpkg-query, apt-get, sudo
bin=$T_DIR/bin
mkdir -p "$bin"
printf '#!/bin/sh\n[ "$3" = cmake ] && exit 1\necho "install ok installed"\n' >"$bin/dpkg-query"
printf '#!/bin/sh\necho "apt-get uid=$(id -u) $*" >>%s/calls\n' "$T_DIR" >"$bin/apt-get"
printf '#!/bin/sh\necho "sudo $*" >>%s/calls\n"$@"\n' "$T_DIR" >"$bin/sudo"
chmod +x "$bin"/*
nosudo=$T_DIR/nosudo
mkdir -p "$nosudo"
ln -s "$bin/dpkg-query" "$nosudo/dpkg-query"
ln -s "$bin/apt-get" "$nosudo/apt-get"
# the system's tools install-deps.sh uses, without any sudo the machine may have
sys=$T_DIR/sys
mkdir -p "$sys"
for tool in bash env id grep dirname cat sed; do ln -s "$(command -v "$tool")" "$sys/$tool"; done
# as root on a machine without sudo: apt-get straight away
out=$(PATH="$nosudo:$sys" bash "$MU_SOURCE_DIR/scripts/install-deps.sh" 2>&1)
rc=$?
if [ "$(id -u)" -eq 0 ]; then
  t_expect_eq "root, no sudo: exit 0 ($out)" "$rc" 0
  t_expect_match "root, no sudo: apt-get ran without sudo" "$(cat "$T_DIR/calls" 2>/dev/null)" \
    '^apt-get uid=0 update'
  t_expect_eq "root, no sudo: no sudo call" "$(grep -c '^sudo' "$T_DIR/calls")" 0
  rm -f "$T_DIR/calls"
  # a user: apt-get through sudo when there is one, a clear line when there is none
  user=nobody
  if command -v setpriv >/dev/null 2>&1 && id "$user" >/dev/null 2>&1; then
    as_user() { setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups env HOME="$T_DIR" "$@"; }
    chmod 777 "$T_DIR"
    out=$(as_user PATH="$bin:$sys" bash "$MU_SOURCE_DIR/scripts/install-deps.sh" 2>&1)
    t_expect_eq "user with sudo: exit 0 ($out)" "$?" 0
    t_expect_match "user with sudo: apt-get went through sudo" "$(cat "$T_DIR/calls" 2>/dev/null)" \
      '^sudo apt-get update'
    out=$(as_user PATH="$nosudo:$sys" bash "$MU_SOURCE_DIR/scripts/install-deps.sh" 2>&1)
    t_expect_eq "user without sudo: exit 1" "$?" 1
    t_expect_match "user without sudo: says to run it as root" "$out" \
      "apt-get needs root and there is no sudo here: run this as root"
  else
    t_fail "the user half needs setpriv (util-linux) and a user '$user'"
  fi
else
  t_fail "this test runs as root (it plays the user with setpriv)"
fi

# ---- demo.sh: each rank's line once, not the whole log
out=$(bash "$MU_SOURCE_DIR/scripts/demo.sh" "$MU_BUILD_DIR" 2>&1)
t_expect_eq "demo.sh: exit 0 ($out)" "$?" 0
for rank in 0 1 2 3; do
  t_expect_eq "demo.sh: rank $rank's line once" \
    "$(printf '%s\n' "$out" | grep -c "rank $rank: allreduce ok")" 1
done
t_expect_eq "demo.sh: the log shown once (one 'all 2 workers succeeded' per node)" \
  "$(printf '%s\n' "$out" | grep -c 'all 2 workers succeeded')" 2
t_done
