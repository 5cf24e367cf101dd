#!/usr/bin/env bash
# The client library's surface (issue 25): libmuster.so exports the functions its public
# headers declare (MU_EXTERN in include/muster/*.h) and nothing else, not llhttp's, not
# common/'s; the rendezvous backends of the client's one table are what `muster agent -h`
# lists, what --rdzv-backend takes, and what the bash completion offers.
. "$(dirname "$0")/../lib.sh"
LIB=$MU_BUILD_DIR/lib/libmuster.so
t_need_built "$LIB" "$MUSTER"
t_need_cmd nm binutils

# --- 1. exports == the headers' declarations ---------------------------------------------------
want=$(sed -n 's/^MU_EXTERN [^(]*[ *]\(mu_[a-z_0-9]*\)(.*/\1/p' "$MU_SOURCE_DIR"/include/muster/*.h |
  sort -u)
got=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^_/ {print $3}' | sort -u)
t_expect_eq "the headers declare the API (25 functions)" "$(grep -c . <<<"$want")" 25
extra=$(comm -13 <(echo "$want") <(echo "$got"))
missing=$(comm -23 <(echo "$want") <(echo "$got"))
t_expect_eq "libmuster.so exports nothing beyond the API (extra: $(head -5 <<<"$extra" | tr '\n' ' '))" \
  "$(grep -c . <<<"$extra")" 0
t_expect_eq "libmuster.so exports the whole API (missing: $(tr '\n' ' ' <<<"$missing"))" \
  "$(grep -c . <<<"$missing")" 0

# --- 2. one backend table: -h, --rdzv-backend, the completion ---------------------------------
help=$("$MUSTER" agent -h)
names=$(sed -n '/^rendezvous backends/,/^$/ s/^  \([a-z0-9][a-z0-9-]*\) .*/\1/p' <<<"$help" |
  tr '\n' ' ')
t_expect_eq "muster agent -h lists the backends of the table" "$names" "muster etcd-v3 c10d static "
t_expect_match "muster agent -h: --rdzv-backend names them with their aliases" "$help" \
  "--rdzv-backend NAME +muster \(musterd, etcd, etcd-v2\), etcd-v3 \(etcd3\), c10d, static"
out=$("$MUSTER" agent --rdzv-backend stattic --rdzv-endpoint h:1 -- true 2>&1)
t_expect_match "an unknown backend: the closest name and the table's" "$out" \
  "'stattic' is not known; did you mean 'static'\?; use muster \(musterd, etcd, etcd-v2\), etcd-v3"
compl=$(bash -c '
  . "$1"
  COMP_WORDS=("$2" agent --rdzv-backend ""); COMP_CWORD=3; _muster
  echo "${COMPREPLY[*]}"
  COMP_WORDS=("$2" agent --rdzv_backend e); COMP_CWORD=3; _muster
  echo "${COMPREPLY[*]}"' _ "$MU_SOURCE_DIR/packaging/muster.bash-completion" "$MUSTER")
t_expect_eq "the completion offers the table's backends" "$(head -1 <<<"$compl")" "muster etcd-v3 c10d static"
t_expect_eq "... by prefix, for torchrun's spelling too" "$(tail -1 <<<"$compl")" "etcd-v3"
t_done
