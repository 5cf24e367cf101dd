#!/usr/bin/env bash
# The README's demo: `muster run -s local dist.ddp -j 2x2 --script <the C ring all-reduce>`:
# two nodes (two `muster agent`s) x two workers against an embedded musterd, every rank
# verified from the job's logs. With --torch, also the PyTorch DDP example under Debian's
# python3-torch, once with muster agent and once with torchrun against musterd.
#   scripts/demo.sh [--torch] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
torch=0
if [ "${1:-}" = "--torch" ]; then torch=1; shift; fi
build=${1:-build}
muster=$build/muster
ring=$build/examples/ring_allreduce
if ! [ -x "$muster" ] || ! [ -x "$ring" ]; then
  # A fresh clone has no build directory yet: configure it first (scripts/quickstart.sh also
  # installs the dependencies).
  if [ -f "$build/CMakeCache.txt" ]; then
    echo "demo: $muster is not built; build it: cmake --build $build -j$(nproc)" >&2
  else
    echo "demo: nothing is built in $build yet; build it (from $(pwd)):" >&2
    echo "  cmake -S . -B $build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build $build -j$(nproc)" >&2
    echo "or run scripts/quickstart.sh (it installs the dependencies, builds and runs this demo)" >&2
  fi
  exit 1
fi

echo "+ $muster run -s local dist.ddp -j 2x2 --script $ring"
handle=$("$muster" run -s local dist.ddp -j 2x2 --script "$ring")
logs=$("$muster" log "$handle")
# `muster run` has shown the job's log as it ran: read it again only to check each rank's line
# (printing it here showed the whole log twice).
for rank in 0 1 2 3; do
  if ! printf '%s\n' "$logs" | grep -q "rank $rank: allreduce ok, world 4"; then
    echo "demo: rank $rank did not verify its result; see 'muster log $handle'" >&2
    exit 1
  fi
done
echo "demo: all 4 ranks verified ($handle)"

if [ "$torch" = 1 ]; then
  for launcher in muster torchrun; do
    echo "+ $muster run dist.ddp -j 2x2 --launcher $launcher --python /usr/bin/python3 --script examples/train_ddp.py"
    GLOO_SOCKET_IFNAME=lo "$muster" run --log dist.ddp -j 2x2 --launcher "$launcher" \
      --python /usr/bin/python3 --script examples/train_ddp.py -- --steps 5
  done
fi
