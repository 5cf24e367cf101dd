#!/usr/bin/env bash
# Writes muster.1 and musterd.1 from the programs' own -h output, which mu_opts_usage() prints
# from the option tables: the man pages are rebuilt with the binaries and cannot drift from them.
#   packaging/gen-man.sh MUSTER MUSTERD OUTDIR VERSION
set -euo pipefail
muster=$1 musterd=$2 out=$3 version=$4
mkdir -p "$out"

# roff-escape one line of help text: backslashes, and a leading '.' or '\''.
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\\&\1/" -e 's/-/\\-/g'; }

# One block of -h output: "usage:" line bold, option rows as .TP, other lines as text.
section() {
  awk '
    function esc(t) { gsub(/\\/, "\\e", t); gsub(/-/, "\\-", t); sub(/^[.\047]/, "\\\\\\&&", t); return t }
    /^usage: / { sub(/^usage: /, ""); print ".PP\n.B " esc($0); next }
    /^ *-/ {
      line = $0; sub(/^ +/, "", line)
      n = match(line, /   +/)
      if (n > 0) { print ".TP\n.B " esc(substr(line, 1, n - 1)); print esc(substr(line, n + RLENGTH)) }
      else { print ".TP\n.B " esc(line) }
      next
    }
    /^$/ { print ".PP"; next }
    { sub(/^ +/, ""); print esc($0) }
  '
}


{
  printf '.TH MUSTER 1 "" "muster %s" "User Commands"\n' "$version"
  printf '.SH NAME\nmuster \\- launch distributed training jobs (TorchX commands, etcd-compatible rendezvous)\n'
  printf '.SH SYNOPSIS\n'
  "$muster" -h | sed -n 's/^usage: //p' | esc | sed 's/^/.B /'
  printf '.SH COMMANDS\n'
  "$muster" -h | sed -n 's/^    \([a-z]*\) *\(.*\)$/\1\t\2/p' | while IFS=$'\t' read -r cmd help; do
    printf '.TP\n.B %s\n%s\n' "$cmd" "$(printf '%s\n' "$help" | esc)"
  done
  "$muster" -h | sed -n 's/^    \([a-z]*\) .*$/\1/p' | while read -r cmd; do
    printf '.SH "MUSTER %s"\n' "$(printf '%s' "$cmd" | tr a-z A-Z)"
    "$muster" "$cmd" -h | section
  done
  printf '.SH FILES\n.TP\n.B ../share/muster/components\nthe builtin components, found relative to the muster binary\n'
  printf '.TP\n.B ../share/muster/python\nthe TorchX shim that runs FILE.py:FUNCTION components under python3\n'
  printf '.SH ENVIRONMENT\n.TP\n.B MUSTER_PYTHON\nthe Python for FILE.py:FUNCTION components (default /usr/bin/python3)\n'
  printf '.SH SEE ALSO\n.BR musterd (8)\n'
} >"$out/muster.1"

{
  printf '.TH MUSTERD 8 "" "muster %s" "System Administration"\n' "$version"
  printf '.SH NAME\nmusterd \\- rendezvous server: etcd v2 keys API and the native /v1 rendezvous API\n'
  printf '.SH OPTIONS\n'
  "$musterd" -h | section
  printf '.SH FILES\n.TP\n.B /var/lib/musterd\nthe data directory of musterd.service (--data-dir)\n'
  printf '.SH SEE ALSO\n.BR muster (1)\n'
} >"$out/musterd.8"
