#!/usr/bin/env bash
# Bans unsafe libc calls and raw allocation in our C sources (STYLE.md #14, #25).
set -u
cd "$(dirname "$0")/.."
bad=0
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.c' -o -name '*.h')
for f in $files; do
  case "$f" in tests/unit/runner.c|common/alloc.c|bench/ceiling*.c) continue ;; esac
  out=$(grep -nE '\b(atoi|atol|sprintf|strcpy|strcat|strtok|gets)\s*\(' "$f" | grep -vE 'snprintf|vsnprintf' || true)
  out2=$(grep -nE '(^|[^_a-z])(malloc|calloc|realloc|free)\s*\(' "$f" | grep -vE 'mu_(malloc|calloc|realloc|free)|uv_|cJSON_free|yaml_|\* ' || true)
  if [ -n "$out$out2" ]; then
    printf '%s:\n%s%s\n' "$f" "$out" "${out2:+$'\n'$out2}"
    bad=1
  fi
done
if [ "$bad" = 1 ]; then
  echo "checksrc: banned calls above; use snprintf, strtol via mu_parse_long, mu_malloc/mu_free"
  exit 1
fi
echo "checksrc: ok"
