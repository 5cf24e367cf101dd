#!/usr/bin/env bash
# muster configure (TorchX's `torchx configure`, issue 34): ./.musterconfig with each
# scheduler's runopts commented out at their defaults, their help above; the file as written,
# and with every default uncommented, is read back by muster; an existing file is kept without
# --force.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
export HOME="$T_DIR/home" MUSTERCONFIG=
mkdir -p "$HOME" "$T_DIR/w" && cd "$T_DIR/w" || exit 1

out=$("$MUSTER" configure 2>&1)
t_expect_eq "configure: exit 0 ($out)" "$?" 0
t_expect_eq "configure: only [local] by default" "$(grep '^\[' .musterconfig)" "[local]"
for opt in $("$MUSTER" runopts local | sed -n 's/^        \([a-z_0-9]*\)=.*/\1/p'); do
  t_expect_eq "configure: local's $opt written" "$(grep -c "^#$opt = " .musterconfig)" 1
done
"$MUSTER" run --dryrun utils.echo >/dev/null 2>"$T_DIR/err"
t_expect_eq "the written file is read back ($(cat "$T_DIR/err"))" "$?" 0

echo "# mine" >.musterconfig
"$MUSTER" configure -s slurm >/dev/null 2>"$T_DIR/err"
t_expect_eq "an existing file: exit 2" "$?" 2
t_expect_match "an existing file: says --force" "$(cat "$T_DIR/err")" "\.musterconfig already exists.*--force"
t_expect_eq "an existing file: left as it was" "$(cat .musterconfig)" "# mine"

"$MUSTER" configure --all --force >/dev/null 2>"$T_DIR/err"
t_expect_eq "--all --force: exit 0" "$?" 0
scheds=$("$MUSTER" runopts | sed -n 's/^\([a-z0-9_-]\+\):$/[\1]/p')
t_expect_eq "--all: every scheduler's section" "$(grep '^\[' .musterconfig)" "$scheds"
# every default uncommented (not None, not a required one left empty) is a valid setting
sed -E 's/^#([a-z_0-9]+ = )(.+)$/\1\2/; /^[a-z_0-9]+ = None$/s/^/#/' .musterconfig >uncommented
sed -i -E '/^[a-z_0-9]+ = None$/s/^/#/' uncommented
t_expect_match "some defaults uncommented" "$(grep -c '^[a-z]' uncommented)" '^[1-9]'
for s in $("$MUSTER" runopts | sed -n 's/^\([a-z0-9_-]\+\):$/\1/p'); do
  MUSTERCONFIG=$PWD/uncommented "$MUSTER" run -s "$s" --dryrun utils.echo >/dev/null 2>"$T_DIR/err"
  rc=$?
  if grep -q "unknown\|expects\|invalid" "$T_DIR/err"; then
    t_fail "the defaults uncommented, -s $s: $(cat "$T_DIR/err")"
  else
    t_ok "the defaults uncommented, -s $s: read back (exit $rc)"
  fi
done
"$MUSTER" configure -s slrum --force >/dev/null 2>"$T_DIR/err"
t_expect_eq "configure -s slrum: exit 2" "$?" 2
t_expect_match "configure -s slrum: did you mean" "$(cat "$T_DIR/err")" "did you mean 'slurm'"
"$MUSTER" configure -s slurm --all >/dev/null 2>&1
t_expect_eq "-s with --all: exit 2" "$?" 2
t_done
