#!/usr/bin/env bash
# Each `muster run` usage error names the offending word, suggests the closest valid one and
# exits 2.
. "$(dirname "$0")/../lib.sh"
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs"
cd "$T_DIR"
expect_err() { # name want-regex args...
  local name=$1 want=$2; shift 2
  "$MUSTER" "$@" >"$T_DIR/out" 2>"$T_DIR/err"; local rc=$?
  t_expect_eq "$name: exit 2" "$rc" 2
  t_expect_match "$name: message" "$(cat "$T_DIR/err")" "$want"
}
expect_err "unknown scheduler" "unknown scheduler 'locl'; did you mean 'local'" run -s locl utils.echo
expect_err "unknown component" "unknown component 'utils.ecko'; did you mean 'utils.echo'" run utils.ecko
expect_err "no component" "no component given" run
expect_err "unknown -cfg key" "unknown -cfg key 'log_dri'.*did you mean 'log_dir'" run -cfg log_dri=/tmp utils.echo
expect_err "bad -cfg syntax" "-cfg: 'log_dir' has no value" run -cfg log_dir= utils.echo
expect_err "-cfg wrong type" "grace_period: expects a int, got 'soon'" run -cfg grace_period=soon utils.echo
expect_err "unknown component argument" "unknown argument '--mgs'; did you mean '--msg'" run utils.echo --mgs hi
expect_err "missing required argument" "missing required argument --x2" run utils.booth --x1 1
expect_err "wrong type" "argument '--cpu' expects an int, got 'lots'" run --dryrun dist.ddp --script t.py --cpu lots
expect_err "bad -j" "argument '-j' expects NPROC, NNODESxNPROC or MIN:MAXxNPROC.*got '1x'" run --dryrun dist.ddp --script t.py -j 1x
expect_err "bad bool" "argument '--debug' is a bool and takes true/false, 1/0, yes/no or on/off.*got 'maybe'" run --dryrun dist.ddp --script t.py --debug=maybe
# Strict booleans (issue 31 item 5): a word after a bool is a truth value or an error naming it,
# never a script argument; any case of true/false/1/0/yes/no/on/off is taken.
expect_err "misspelt bool" "argument '--bf16' is a bool .*got 'Flase'; did you mean 'false'\?" \
  run --dryrun aws.trn1_ddp --image img --script t.py --bf16 Flase
expect_err "misspelt bool on dist.ddp" "argument '--debug' is a bool .*got 'ture'; did you mean 'true'\?.*script arguments go after '--'" \
  run --dryrun dist.ddp --script t.py --debug ture
expect_err "word after a bool" "argument '--bf16' is a bool .*got 'data.txt'" \
  run --dryrun dist.ddp --script t.py --bf16 data.txt
printf '[component:dist.ddp]\nbf16 = Flase\n' >"$T_DIR/boolcfg"
MUSTERCONFIG="$T_DIR/boolcfg" expect_err "bool in a [component:] default" "bf16.*is a bool .*got 'Flase'; did you mean 'false'" \
  run --dryrun dist.ddp --script t.py
for word in TRUE yes On 1 false NO off 0 False; do
  "$MUSTER" run --dryrun dist.ddp --script t.py --bf16 "$word" -- --arg >"$T_DIR/out" 2>"$T_DIR/err"
  rc=$?
  t_expect_eq "bool word '$word': exit 0" "$rc" 0
  case $word in TRUE | yes | On | 1) want=1 ;; *) want=0 ;; esac
  t_expect_eq "bool word '$word': XLA_DOWNCAST_BF16 set" "$(grep -q 'XLA_DOWNCAST_BF16' "$T_DIR/out" && echo 1 || echo 0)" "$want"
  t_expect_match "bool word '$word': script args only after --" "$(cat "$T_DIR/out")" "t.py.*--arg"
done
"$MUSTER" run --dryrun dist.ddp --script t.py --bf16 -- data.txt >"$T_DIR/out" 2>"$T_DIR/err"
t_expect_eq "bool alone before --: exit 0" "$?" 0
t_expect_match "bool alone before --: data.txt is a script argument" "$(cat "$T_DIR/out")" "t.py.*data.txt"
printf 'name: badtype\nparams:\n  - {name: x, type: boool}\napp: {name: b, roles: [{name: r, entrypoint: echo}]}\n' >"$T_DIR/badtype.yaml"
expect_err "unknown parameter type" "unknown type 'boool' \(did you mean 'bool'\?\); use str, int, float, bool, list, map or jobsize" \
  run --dryrun "$T_DIR/badtype.yaml"
expect_err "script and -m" "exactly one of --script and -m must be specified" run --dryrun dist.ddp --script t.py -m pkg.mod
expect_err "neither script nor -m" "exactly one of --script and -m must be specified" run --dryrun dist.ddp
expect_err "bad choice" "'mpirun' is not one of muster, torchrun" run --dryrun dist.ddp --script t.py --launcher mpirun
expect_err "repeated argument" "argument '--msg' given twice" run utils.echo --msg a --msg b
expect_err "bad named resource" "unknown named resource 'gpu.smal'; did you mean 'gpu.small'" run --dryrun dist.ddp --script t.py -h gpu.smal
expect_err "bad mount" "unknown mount type 'nfs'" run --dryrun dist.ddp --script t.py --mounts type=nfs,src=a,dst=b
expect_err "unknown run option" "unknown option '--dryrn'; did you mean '--dryrun'" run --dryrn utils.echo
expect_err "invalid job spec" "roles\[0\].num_replicas: must be an integer >= 1, got '0'" run --dryrun utils.echo --num_replicas 0
expect_err "missing component file" "cannot read component './nope.yaml'" run ./nope.yaml
printf 'name: bad\napp:\n  roles:\n    - {name: x, entrypont: echo}\n' >"$T_DIR/bad.yaml"
expect_err "bad component key" "unknown key 'entrypont'; did you mean 'entrypoint'" run --dryrun "$T_DIR/bad.yaml"
# A TorchX AppDef written out has roles at the top level: the hint names the keys and says where
# roles go (issue 34).
printf 'name: top\nroles:\n  - {name: x, entrypoint: echo}\n' >"$T_DIR/top.yaml"
expect_err "roles at the top level" "top level: unknown key 'roles'; the top level takes name, description, params, checks and app; roles go under 'app:'" \
  run --dryrun "$T_DIR/top.yaml"
expect_err "status of a bad handle" "is not an app handle" status "local://x"
# Values that would reach a script or a manifest are checked for their field before any
# scheduler sees them (issue 24 finding 2): the field is named, the value shown escaped.
expect_err "role name with a newline (dist.ddp: --script's stem)" \
  "invalid job spec from dist.ddp: roles\[0\]\.name: 'x\\\\nid' is not a valid name: use 1-63 letters" \
  run -s slurm --dryrun dist.ddp --name ok --script "$(printf 'x\nid.py')"
printf 'name: esc\ndescription: a role named ../../x\nparams: []\napp: {name: esc, roles: [{name: ../../x, entrypoint: echo}]}\n' >"$T_DIR/esc.yaml"
expect_err "role name with ../" "roles\[0\]\.name: '\.\./\.\./x' is not a valid name" \
  run --dryrun ./esc.yaml
expect_err "control character in an argument" \
  "roles\[0\]\.args\[1\]: control character 0x1b at byte 6 is not allowed" \
  run --dryrun utils.sh -- echo "$(printf 'a\033[2Jb')"
expect_err "newline in a -cfg value" "-cfg comment: control character 0x0a at byte 1 is not allowed" \
  run -s slurm --dryrun -cfg "comment=$(printf 'a\nb')" utils.echo
t_done
