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
# Sizes a newcomer can read (issue 29 item 6): at most one product function over 80 lines (the
# option table of musterd's main.c), none of a product .c file over 1,200 lines. The long ones
# are listed longest first, as "LINES FILE:LINE NAME". A function is what the Linux brace style
# writes: a signature line at column 0, '{' alone at column 0, up to the '}' at column 0.
long_funcs() {
  # shellcheck disable=SC2046
  awk -v max=80 '
    FNR == 1 { sig = ""; sigline = 0; infn = 0 }
    !infn && /^[A-Za-z_].*\(/ && !/;[ \t]*$/ && !/^(typedef|#)/ { sig = $0; sigline = FNR }
    !infn && /^\{/ && sigline > 0 { infn = 1; start = sigline; next }
    infn && /^\}/ {
      n = FNR - start + 1
      name = sig; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
      if (n > max) printf "%d %s:%d %s\n", n, FILENAME, start, name
      infn = 0; sigline = 0
    }' $(git ls-files 'common/*.c' 'client/*.c' 'launcher/*.c' 'rendezvous/*.c' 2>/dev/null) |
    sort -rn
}
long=$(long_funcs)
nlong=$(printf '%s' "$long" | grep -c . || true)
echo "checksrc: $nlong product function(s) over 80 lines (at most 1):"
[ -z "$long" ] || printf '%s\n' "$long" | sed 's/^/  /'
if [ "$nlong" -gt 1 ]; then
  echo "checksrc: more than one function over 80 lines: split the new one (helpers, a table)"
  bad=1
fi
# shellcheck disable=SC2046
big=$(wc -l $(git ls-files 'common/*.c' 'client/*.c' 'launcher/*.c' 'rendezvous/*.c') |
  awk '$2 != "total" && $1 > 1200 { print "  " $1 " " $2 }')
if [ -n "$big" ]; then
  printf 'checksrc: product files over 1,200 lines: split them by concept (one per file):\n%s\n' "$big"
  bad=1
fi
if [ "$bad" = 1 ]; then
  echo "checksrc: fix what is above (banned calls: use snprintf, strtol via mu_parse_long, mu_malloc/mu_free)"
  exit 1
fi
echo "checksrc: ok"
