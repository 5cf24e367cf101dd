#!/usr/bin/env bash
# Slurm and hostile values (issue 24 finding 2), on a real local Slurm (tests/slurm/local-slurm.sh):
# the renderer's quoting functions (launcher/sched/slurm.h, through tests/slurm/quote_probe.c)
# against sbatch's and srun's own parsing, then `muster run -s slurm --wait` end to end: every
# string arrives exactly as given (the worker dumps its argv and environment), and what a syntax
# cannot carry is refused before anything is submitted, naming the field.
. "$(dirname "$0")/slurm_common.bash"
PROBE=$MU_BUILD_DIR/tests/mu_quote_probe
t_need_built "$MUSTER" "$MUSTERD" "$PROBE"
slurm_start
mkdir -p "$T_DIR/work" && cd "$T_DIR/work" || exit 1

# The worker: writes its arguments and its HQ* variables as JSON to the file named first.
cat >dump.py <<'EOF'
import json, os, sys
out = {"argv": sys.argv[2:], "env": {k: v for k, v in os.environ.items() if k.startswith("HQ")}}
open(sys.argv[1], "w").write(json.dumps(out))
EOF
# The hostile strings: newlines, $(), backticks, quotes, ',', '=', spaces, '%', '#', Unicode line
# separators, a long one (1000 bytes: slurmctld keeps at most 1024 of a comment; the end-to-end
# case adds 64 KiB ones), and the quotes srun's --export list cannot carry.
"$PY" - >strings.json <<'EOF'
import json
S = ["plain", "a b", "  lead and trail  ", "a\nb", "$(id)", "`id`", "it's", 'say "hi"', "a,b",
     "x=y=z", "%j %t %%", "#not a comment", "a # b", "\u2028line\u2029para", "tab\there",
     "back\\slash", "\\\"", "'", '"', "'a,b'", '"a,b"', "a',\"b'\"", '{"a":1,"b":2}', "*?[a]",
     "~root", "!!", ";rm -rf /", "-n", "--export=X", "", "\u00fcn\u00efc\u00f8d\u00e9 \u2713",
     "x" * 1000]
json.dump(S, open("/dev/stdout", "w"))
EOF
n=$("$PY" -c 'import json; print(len(json.load(open("strings.json"))))')

# 1. #SBATCH values: each string as --comment (and, when short, --job-name) on a held job,
# read back from squeue --json.
"$PY" - "$PROBE" >directive.out 2>&1 <<'EOF'
import json, subprocess, sys
probe, S = sys.argv[1], json.load(open("strings.json"))
jobs, refused = [], []
for i, s in enumerate(S):
    q = subprocess.run([probe, "directive", s], capture_output=True, text=True)
    if q.returncode != 0:
        refused.append(i)
        continue
    names = f" --job-name={q.stdout}" if len(s) < 200 else ""
    open(f"d{i}.sh", "w").write(f"#!/bin/bash\n#SBATCH --comment={q.stdout}{names}\ntrue\n")
    r = subprocess.run(["sbatch", "--parsable", "--hold", f"d{i}.sh"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"MISMATCH {i}: sbatch refused it: {r.stderr.strip()}")
        continue
    jobs.append((r.stdout.strip(), i, s, bool(names)))
seen = {str(j["job_id"]): j for j in json.loads(
    subprocess.run(["squeue", "--json"], capture_output=True, text=True).stdout)["jobs"]}
for jid, i, s, named in jobs:
    j = seen.get(jid, {})
    if j.get("comment") != s or (named and j.get("name") != s):
        print(f"MISMATCH {i}: {s!r:.60} arrived as comment {j.get('comment')!r:.60} name {j.get('name')!r:.60}")
subprocess.run(["scancel"] + [j[0] for j in jobs])
print(f"checked {len(jobs)} refused {refused}")
EOF
t_expect_eq "#SBATCH: every string arrives exactly" "$(grep -c MISMATCH directive.out)" 0
grep MISMATCH directive.out | sed 's/^/# /'
t_expect_eq "#SBATCH: refused only the control characters (newline, tab)" \
  "$(sed -n 's/^checked [0-9]* refused //p' directive.out)" "[3, 14]"

# 2. srun --export items: all of them in one srun, the worker's environment compared.
"$PY" - "$PROBE" >export.out 2>&1 <<'EOF'
import json, os, subprocess, sys
probe, S = sys.argv[1], json.load(open("strings.json"))
items, want, refused = [], {}, []
for i, s in enumerate(S):
    q = subprocess.run([probe, "export", f"HQ{i}", s], capture_output=True, text=True)
    if q.returncode != 0:
        refused.append(i)
        continue
    items.append(q.stdout)
    want[f"HQ{i}"] = s
r = subprocess.run(["srun", "-N1", "--export=ALL," + ",".join(items), "/usr/bin/python3",
                    os.path.abspath("dump.py"), os.path.abspath("export.json")],
                   capture_output=True, text=True, timeout=120)
got = json.load(open("export.json"))["env"] if r.returncode == 0 else {}
print(f"srun exit {r.returncode} {r.stderr.strip()[:300]}")
for k, v in want.items():
    if got.get(k) != v:
        print(f"MISMATCH {k}: {v!r:.60} arrived as {got.get(k, '<missing>')!r:.60}")
# What is refused really cannot pass: each naive form, followed by another item, arrives
# changed or not at all. (Alone at the end of the list an odd quote gets through, with srun's
# "Improperly formed environment variable" error: the renderer does not lean on that.)
for i in refused:
    for form in (f"HQX={S[i]}", f"\"HQX={S[i]}\"", f"'HQX={S[i]}'"):
        r = subprocess.run(["srun", "-N1", "--export=ALL," + form + ",HQY=1", "/usr/bin/python3",
                            os.path.abspath("dump.py"), os.path.abspath("refused.json")],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0 and json.load(open("refused.json"))["env"].get("HQX") == S[i]:
            print(f"NEEDLESS {i}: {form!r} carries {S[i]!r} but the function refused it")
print(f"checked {len(want)} refused {refused}")
EOF
t_expect_match "--export: srun ran" "$(grep '^srun exit' export.out)" '^srun exit 0'
t_expect_eq "--export: every item arrives exactly" "$(grep -c MISMATCH export.out)" 0
grep -E 'MISMATCH|NEEDLESS|^srun exit [1-9]' export.out | sed 's/^/# /'
t_expect_eq "--export: refused only what srun cannot carry (odd quotes), each checked" \
  "$(grep -c NEEDLESS export.out) $(sed -n 's/^checked [0-9]* refused //p' export.out)" \
  "0 [6, 16, 17, 18]"

# 3. End to end: a component whose two replicas get every string as an argument, and every
# string srun can carry as an env value; `muster run -s slurm --wait`; both workers' dumps.
"$PY" - "$T_DIR/work" >q.yaml <<'EOF'
import json, sys
work, S = sys.argv[1], json.load(open("strings.json"))
env = {f"HQ{i}": s for i, s in enumerate(S) if i not in (6, 16, 17, 18)}
env["HQMACRO"] = "$${app_id} stays text"
env["HQLONG"] = "z" * 65536
role = {"name": "w", "entrypoint": "/usr/bin/python3", "num_replicas": 2, "env": env,
        "args": [f"{work}/dump.py", f"{work}/e2e-${{replica_id}}.json"] + S + ["$${app_id}",
                 "y" * 65536]}
print(json.dumps({"name": "qtest", "description": "hostile values", "params": [],
                  "app": {"name": "qtest", "roles": [role]}}))
EOF
out=$(timeout 180 "$MUSTER" run -s slurm --wait ./q.yaml 2>&1)
t_expect_eq "muster run -s slurm --wait: exit 0" "$?" 0 || printf '%s\n' "$out" | tail -5 | sed 's/^/# /'
check=$("$PY" - <<'EOF'
import json
S = json.load(open("strings.json"))
want_env = {f"HQ{i}": s for i, s in enumerate(S) if i not in (6, 16, 17, 18)}
want_env["HQMACRO"] = "${app_id} stays text"
want_env["HQLONG"] = "z" * 65536
for r in (0, 1):
    try:
        got = json.load(open(f"e2e-{r}.json"))
    except OSError as e:
        print(f"replica {r}: no dump ({e})")
        continue
    if got["argv"] != S + ["${app_id}", "y" * 65536]:
        bad = [i for i, s in enumerate(S) if i >= len(got["argv"]) or got["argv"][i] != s]
        print(f"replica {r}: argv differs at {bad[:5]}")
    for k, v in want_env.items():
        if got["env"].get(k) != v:
            print(f"replica {r}: {k} {v!r:.40} arrived as {got['env'].get(k, '<missing>')!r:.40}")
EOF
)
t_expect_eq "both workers saw every argument and env value exactly" "$check" ""
[ -z "$check" ] || { printf '%s\n' "$check" | sed 's/^/# /'; tail -5 slurm-*.err 2>/dev/null | sed 's/^/# /'; }

# 4. What the script cannot carry is refused before submission, naming the field.
sed 's/"HQ0": "plain"/"HQ0": "it'"'"'s"/' q.yaml >q-bad.yaml
out=$("$MUSTER" run -s slurm ./q-bad.yaml 2>&1)
t_expect_eq "an env value srun cannot carry: exit 2" "$?" 2
t_expect_match "... names the field" "$out" "roles\[0\]\.env\.HQ0: Slurm's srun --export cannot carry"
out=$("$MUSTER" run -s slurm -cfg "partition=$(printf 'p\n#SBATCH --uid 0')" ./q.yaml 2>&1)
t_expect_eq "a newline in a -cfg value: exit 2" "$?" 2
t_expect_match "... names the runopt" "$out" "-cfg partition: control character 0x0a"
t_done
