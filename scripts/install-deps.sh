#!/usr/bin/env bash
# Installs the Debian packages muster needs, only those that are missing.
#   scripts/install-deps.sh          build dependencies
#   scripts/install-deps.sh --test   plus what the test suite and benchmarks use
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libuv1-dev libcjson-dev libyaml-dev
            libjemalloc-dev node-llhttp libssl-dev)
# The peers and clients the tests talk to, the sanitizer/fuzzer toolchain, the Volcano schema
# validator's runtime and a local Slurm.
test_pkgs=(etcd-server etcd-client python3-etcd python3-torch python3-yaml curl jq wrk
           clang libclang-rt-14-dev nodejs procps psmisc iproute2 openssl)

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
# npm: some machines carry a nodejs build that bundles npm and conflicts with Debian's npm
# package, so ask for the package only when there is no npm command at all.
if [ "${1:-}" = "--test" ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # Debian starts etcd on 2379 from its postinst on a systemd host; we never use that one.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The npm packages the Volcano Job validator (../shared/k8s-schemas/validate-volcano-job.mjs)
# names, into a fixed cache dir, once: tests/cli/t2010 uses them and never reaches a registry
# itself. The dir is $MU_NPM_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/muster-vjv (the test reads
# the same variables); run this as the user who runs the tests, not with sudo.
if [ "${1:-}" = "--test" ]; then
  vjv=${MU_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster-vjv}
  vjv_pkgs=(ajv@8 ajv-formats@3 yaml@2)
  if [ -d "$vjv/node_modules/ajv" ] && [ -d "$vjv/node_modules/ajv-formats" ] &&
     [ -d "$vjv/node_modules/yaml" ]; then
    echo "install-deps: validator npm packages present in $vjv"
  else
    echo "install-deps: npm install ${vjv_pkgs[*]} into $vjv"
    mkdir -p "$vjv"
    npm install --prefix "$vjv" --no-audit --no-fund --no-save --silent "${vjv_pkgs[@]}"
  fi
fi
