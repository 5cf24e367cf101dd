#!/usr/bin/env bash
# Installs the Debian packages muster needs, only those that are missing.
#   scripts/install-deps.sh                  build dependencies
#   scripts/install-deps.sh --test           plus what the test suite and benchmarks use
#                                            (scripts/test-packages.txt) and the npm packages
#                                            of the Kubernetes (Volcano Job, JobSet) validator
#   scripts/install-deps.sh [--test] --check install nothing: list what is missing, exit 1
#                                            if anything is (scripts/test.sh runs this first)
# apt-get runs through sudo when you are not root; run the script itself as the user who runs
# the tests (the npm packages go to that user's cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

test=0 check=0
for a in "$@"; do
  case $a in
    --test) test=1 ;;
    --check) check=1 ;;
    *) echo "usage: scripts/install-deps.sh [--test] [--check]" >&2; exit 2 ;;
  esac
done

pkgs=(build-essential cmake pkg-config libuv1-dev libcjson-dev libyaml-dev libjemalloc-dev
      node-llhttp libssl-dev)
if [ "$test" = 1 ]; then
  while read -r p _; do
    case $p in '' | '#'*) continue ;; esac
    pkgs+=("$p")
  done <"$here/test-packages.txt"
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm: some machines carry a nodejs build that bundles npm and conflicts with Debian's npm
# package, so ask for the package only when there is no npm command at all.
if [ "$test" = 1 ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

# The npm packages of the Kubernetes (Volcano Job, JobSet) validator (tests/schemas/validate-k8s.mjs), in a
# cache dir of their own: tests/cli/t2010 reads them from there and never reaches a registry.
# The dir is $MU_NPM_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/muster-vjv (the test reads the
# same variables).
vjv=${MU_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster-vjv}
vjv_pkgs=(ajv@8 ajv-formats@3 yaml@2)
vjv_ok() {
  [ -d "$vjv/node_modules/ajv" ] && [ -d "$vjv/node_modules/ajv-formats" ] &&
    [ -d "$vjv/node_modules/yaml" ]
}

if [ "$check" = 1 ]; then
  bad=0
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: missing Debian packages: ${missing[*]}"
    bad=1
  fi
  if [ "$test" = 1 ] && ! vjv_ok; then
    echo "install-deps: missing npm packages ${vjv_pkgs[*]} in $vjv (the Kubernetes validator)"
    bad=1
  fi
  if [ "$bad" = 1 ]; then
    opt=""; [ "$test" = 1 ] && opt=" --test"
    echo "install-deps: install them with: scripts/install-deps.sh$opt"
    exit 1
  fi
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "install-deps: apt-get needs root and there is no sudo here: run this as root" \
        "(e.g. su -c $0), or install sudo" >&2
      exit 1
    fi
    SUDO="sudo"
  fi
  $SUDO apt-get update -qq
  # Debian starts etcd on 2379 from its postinst on a systemd host; we never use that one.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$test" = 1 ]; then
  if vjv_ok; then
    echo "install-deps: validator npm packages present in $vjv"
  else
    echo "install-deps: npm install ${vjv_pkgs[*]} into $vjv"
    mkdir -p "$vjv"
    npm install --prefix "$vjv" --no-audit --no-fund --no-save --silent "${vjv_pkgs[@]}"
  fi
fi

