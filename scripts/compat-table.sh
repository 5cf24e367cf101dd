#!/usr/bin/env bash
# Writes docs/compat.md, the compatibility table (torch version x launcher x backend x case),
# from the rows the tests recorded (t_compat in tests/lib.sh: $BUILD/compat-rows/*.tsv). Nobody
# writes the table by hand: run the tests, then this.
#   scripts/compat-table.sh [BUILD_DIR]      default ./build; prints the table's path
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
out=$here/../docs/compat.md
rows=$(cat "$build"/compat-rows/*.tsv 2>/dev/null || true)
[ -n "$rows" ] || { echo "compat-table: no rows in $build/compat-rows: run the tests first (ctest -R 'c10d_torch2|torchrun')" >&2; exit 1; }
{
  echo "# Compatibility with PyTorch (generated)"
  echo
  echo "Made by \`scripts/compat-table.sh\` from the rows the tests record (\`t_compat\` in"
  echo "\`tests/lib.sh\`), last on $(date -u +%Y-%m-%d). Do not edit by hand: run the tests, then"
  echo "the script. torch 1.13 is Debian 12's; 2.6 and 2.14 run in the roots of"
  echo "\`scripts/torch-roots.sh\` (Debian trixie and sid)."
  echo
  echo "| torch | launcher | backend | case | result | test |"
  echo "|---|---|---|---|---|---|"
  sort -t$'\t' -k1,1V -k2,2 -k3,3 -k4,4 <<<"$rows" |
    awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | `%s` |\n", $1, $2, $3, $4, $5, $6 }'
} >"$out"
echo "$out"
