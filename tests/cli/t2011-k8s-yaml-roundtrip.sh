#!/usr/bin/env bash
# Every value that enters a manifest is quoted by one function for YAML's syntax
# (launcher/spec/yaml_tree.c), such that a YAML 1.1 reader gets back exactly the user's string.
# A property test: the unit test k8s__yaml_hostile_strings_round_trip writes 3,000 hostile
# strings (line breaks YAML 1.1 folds: U+0085, U+2028, U+2029; C0 and C1 controls, the BOM,
# tabs, spaces at either end, quotes, indicators, yes/no/on/off/~/null and the numbers YAML 1.1
# resolves, each alone and then joined at random; $MU_YAML_SEED picks another run) as values
# and as keys, and the strings themselves as JSON. They are read back here by PyYAML (Debian's
# python3-yaml, YAML 1.1: its pure-Python loader and its libyaml-based CSafeLoader, both with
# YAML 1.1's resolver) and by the Kubernetes validator's parser (tests/schemas/, YAML 1.1 as
# the API server reads it), and compared with the JSON.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MU_BUILD_DIR/mu_unit_tests"
t_need_py yaml python3-yaml
M=$T_DIR/out
mkdir -p "$M"
MU_YAML_DIR=$M "$MU_BUILD_DIR/mu_unit_tests" k8s__yaml_hostile_strings_round_trip \
  >"$T_DIR/unit.log" 2>&1 && t_ok "unit test: libyaml reads every string back" ||
  { cat "$T_DIR/unit.log"; t_fail "unit test"; }
[ -s "$M/yaml-hostile.yaml" ] && [ -s "$M/yaml-hostile.json" ] || t_fail "no document written"

for loader in SafeLoader CSafeLoader; do
  out=$("$PY" - "$M/yaml-hostile.yaml" "$M/yaml-hostile.json" "$loader" <<'PY' 2>&1
import json, sys, yaml
text = open(sys.argv[1], encoding="utf-8").read()
want = json.load(open(sys.argv[2], encoding="utf-8"))
got = yaml.load(text, Loader=getattr(yaml, sys.argv[3]))
bad = [(i, w, g) for i, (w, g) in enumerate(zip(want["values"], got["values"])) if w != g]
for i, w, g in bad[:5]:
    print("value %d: wrote %r, read %r" % (i, w, g))
if len(got["values"]) != len(want["values"]):
    print("%d values read, %d written" % (len(got["values"]), len(want["values"])))
if got["keys"] != want["keys"]:
    print("keys differ: %r" % sorted(set(got["keys"]) ^ set(want["keys"]))[:5])
print("checked %d values and %d keys" % (len(want["values"]), len(want["keys"])))
PY
)
  t_expect_match "PyYAML $loader (YAML 1.1) reads back every string: $(tail -1 <<<"$out")" \
    "$out" "^checked [0-9]+ values and [0-9]+ keys$"
done

t_need_validator
node "$VALIDATOR" --modules "$MODS/node_modules" --print "$M/yaml-hostile.yaml" \
  >"$T_DIR/validator.json" 2>"$T_DIR/validator.err" || cat "$T_DIR/validator.err"
out=$("$PY" - "$T_DIR/validator.json" "$M/yaml-hostile.json" <<'PY' 2>&1
import json, sys
got = json.loads(open(sys.argv[1], encoding="utf-8").readline())
want = json.load(open(sys.argv[2], encoding="utf-8"))
bad = [i for i, (w, g) in enumerate(zip(want["values"], got["values"])) if w != g]
for i in bad[:5]:
    print("value %d: wrote %r, read %r" % (i, want["values"][i], got["values"][i]))
if got != want:
    print("the documents differ")
else:
    print("same")
PY
)
t_expect_eq "the validator's parser (YAML 1.1) reads back every string" "$out" "same"

# The test can fail: a string the old quoting (single quotes whenever no C0 control was in the
# string) wrote with a raw U+0085 (NEL) comes back folded into a space.
"$PY" - <<'PY' >"$T_DIR/old.txt" 2>&1
import yaml
print(repr(yaml.safe_load("k: 'a\x85b'\n")["k"]))
PY
t_expect_eq "YAML 1.1 folds a raw U+0085 in single quotes (what the test would catch)" \
  "$(cat "$T_DIR/old.txt")" "'a b'"
t_done
