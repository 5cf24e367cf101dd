#!/usr/bin/env bash
# Installs the Debian packages muster needs, only those that are missing.
#   scripts/install-deps.sh          build dependencies
#   scripts/install-deps.sh --test   plus what the test suite and benchmarks use
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libuv1-dev libcjson-dev libyaml-dev
            libjemalloc-dev node-llhttp)
# The peers and clients the tests talk to, the sanitizer/fuzzer toolchain, the Volcano schema
# validator's runtime and a local Slurm.
test_pkgs=(etcd-server etcd-client python3-etcd python3-torch python3-yaml curl jq wrk
           clang libclang-rt-14-dev nodejs npm procps psmisc iproute2 openssl)

pkgs=("${build_pkgs[@]}")
if [ "${1:-}" = "--test" ]; then
  pkgs+=("${test_pkgs[@]}")
  if [ -f "$(dirname "$0")/test-packages.txt" ]; then
    while read -r p; do [ -n "$p" ] && [ "${p#\#}" = "$p" ] && pkgs+=("$p"); done \
      < "$(dirname "$0")/test-packages.txt"
  fi
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# Debian starts etcd on 2379 from its postinst on a systemd host; we never use that one.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
