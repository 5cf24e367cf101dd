#!/usr/bin/env bash
# Tolerations through -cfg: kubectl's taint form key=value:Effect (quoted, as TorchX's -cfg
# allows: -cfg 'tolerations="k=v:NoSchedule"'), several items with ';', each item quoted on its
# own, from .musterconfig, and the older key:value:Effect / key:Effect / key:value / key forms.
. "$(dirname "$0")/../lib.sh"
cd "$T_DIR" || exit 1
tol() { # -cfg-string -> the first worker pod's tolerations as compact JSON, or the error
  local out
  out=$("$MUSTER" run -s kubernetes --dryrun --json -cfg "queue=q,$1" utils.echo --image a 2>&1) ||
    { printf 'exit %s: %s\n' "$?" "$out"; return 0; }
  printf '%s' "$out" | "$PY" -c 'import json, sys, yaml
d = yaml.safe_load(json.load(sys.stdin)["request"])
print(json.dumps(d["spec"]["tasks"][0]["template"]["spec"].get("tolerations"), separators=(",", ":")))'
}
E='{"key":"k","operator":"Equal","value":"v","effect":"NoSchedule"}'
t_expect_eq "kubectl form, double-quoted" "$(tol 'tolerations="k=v:NoSchedule"')" "[$E]"
t_expect_eq "kubectl form, single-quoted" "$(tol "tolerations='k=v:NoSchedule'")" "[$E]"
t_expect_eq "kubectl form then another runopt" \
  "$(tol 'tolerations="k=v:NoSchedule",namespace=ml')" "[$E]"
t_expect_eq "several kubectl-form items in one quoted value" \
  "$(tol 'tolerations="k=v:NoSchedule;x.io/gpu=a100:NoExecute"')" \
  "[$E,{\"key\":\"x.io/gpu\",\"operator\":\"Equal\",\"value\":\"a100\",\"effect\":\"NoExecute\"}]"
t_expect_eq "each item quoted on its own, mixed with the : form" \
  "$(tol 'tolerations="k=v:NoSchedule";spot:PreferNoSchedule;"d=:NoExecute"')" \
  "[$E,{\"key\":\"spot\",\"operator\":\"Exists\",\"effect\":\"PreferNoSchedule\"},{\"key\":\"d\",\"operator\":\"Equal\",\"value\":\"\",\"effect\":\"NoExecute\"}]"
t_expect_eq "a quoted list of kubectl-form items, then an unquoted item" \
  "$(tol 'tolerations="k=v:NoSchedule;x.io/g=h:NoExecute";spot')" \
  "[$E,{\"key\":\"x.io/g\",\"operator\":\"Equal\",\"value\":\"h\",\"effect\":\"NoExecute\"},{\"key\":\"spot\",\"operator\":\"Exists\"}]"
t_expect_eq "key=value without an effect" "$(tol 'tolerations="k=v"')" \
  '[{"key":"k","operator":"Equal","value":"v"}]'
# The existing forms keep working.
t_expect_eq "key:value:Effect; key:Effect; key" \
  "$(tol 'tolerations=aws.amazon.com/neuron:NoSchedule;dedicated:ml:NoExecute;spot')" \
  '[{"key":"aws.amazon.com/neuron","operator":"Exists","effect":"NoSchedule"},{"key":"dedicated","operator":"Equal","value":"ml","effect":"NoExecute"},{"key":"spot","operator":"Exists"}]'
t_expect_eq "key:value" "$(tol 'tolerations=k:v')" '[{"key":"k","operator":"Equal","value":"v"}]'
# .musterconfig takes the kubectl form unquoted (one runopt per line).
printf '[kubernetes]\ntolerations = k=v:NoSchedule\n' >.musterconfig
t_expect_eq ".musterconfig: kubectl form" "$(tol namespace=ml)" "[$E]"
rm .musterconfig

# Errors name the problem and the fix, exit 2.
out=$(tol 'tolerations=k=v:NoSchedule')
t_expect_match "unquoted kubectl form: exit 2" "$out" "^exit 2:"
t_expect_match "unquoted kubectl form: shows the quoting" "$out" \
  "quote a value that contains '=': -cfg 'tolerations=\"k=v:NoSchedule\"'"
out=$(tol 'tolerations="k=v:Nosched"')
t_expect_match "unknown effect" "$out" "^exit 2: .*unknown effect 'Nosched' for key 'k'; use NoSchedule"
out=$(tol 'tolerations="k=v=w:NoSchedule"')
t_expect_match "value with '='" "$out" "^exit 2: .*'k=v=w:NoSchedule': value 'v=w' is not a valid taint value"
out=$(tol 'tolerations="-k=v:NoSchedule"')
t_expect_match "bad key" "$out" "^exit 2: .*key '-k' is not a valid taint key"
out=$(tol 'tolerations="=v:NoSchedule"')
t_expect_match "empty key" "$out" "^exit 2: .*'=v:NoSchedule' has an empty key; write key=value:Effect"
t_done
