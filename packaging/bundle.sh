#!/usr/bin/env bash
# Assembles the portable bundle (packaging/portable.cmake): the programs linked for the bundle,
# stripped, the shared libraries they load (as ldd resolves them on this machine) and the
# dynamic loader, and the builtin components.
#   packaging/bundle.sh STAGE_DIR OUT_DIR COMPONENTS_DIR
set -euo pipefail
stage=$1 out=$2 comps=$3
rm -rf "$out.tmp"
mkdir -p "$out.tmp/bin" "$out.tmp/lib" "$out.tmp/share/muster/components"
for b in muster musterd ring_allreduce; do
  strip --strip-unneeded -o "$out.tmp/bin/$b" "$stage/$b"
done
# The host's loader lists what they load (their own interpreter is not installed yet): each
# "name => /path" line is a library to carry; then the loader itself.
for b in "$stage"/muster "$stage"/musterd "$stage"/ring_allreduce; do
  /lib64/ld-linux-x86-64.so.2 --list "$b"
done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  while read -r lib; do
    cp -L "$lib" "$out.tmp/lib/$(basename "$lib")"
  done
cp -L /lib64/ld-linux-x86-64.so.2 "$out.tmp/lib/"
cp "$comps"/*.yaml "$out.tmp/share/muster/components/"
rm -rf "$out"
mv "$out.tmp" "$out"
