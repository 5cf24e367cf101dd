#!/usr/bin/env bash
# The README's first command: install the Debian dependencies, build, run the demo job.
# As root (with or without sudo installed) or as a user with sudo: apt-get alone goes through
# sudo when you are not root (scripts/install-deps.sh), the build stays yours.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
bash scripts/demo.sh
echo "quickstart: muster is $(pwd)/build/muster; to call it as 'muster' (README's \"Using it\"):"
echo "  export PATH=\"$(pwd)/build:\$PATH\""
