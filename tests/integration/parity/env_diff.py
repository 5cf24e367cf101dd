"""Diffs the worker environments of torchrun 2.14 and `muster agent` (agent_env_torch2.sh), rank
by rank, against the list of differences in docs/agent.md ("The environment under torchrun
2.14": the rows between the env-diff markers).

    env_diff.py DOC DIR CASE...
DIR/tr-CASE and DIR/mu-CASE hold one rankN.json per worker (parity/mu_parity_worker.py).

A row is `| VARIABLE | CASES | HOW | WHY |`: VARIABLE may end in `*`; CASES is `all` or a list
of cases; HOW says what differs:
  port           a port of each launcher's choosing: both values are ports
  path           a file of each launcher's choosing: both absolute, the same file name (a
                 uuid at its end aside)
  differs        both set, to other values
  muster only    only muster sets it
  torchrun only  only torchrun sets it
Every difference must have its row (else: "unlisted"); a differs / muster only / torchrun only
row whose difference no case shows any more fails too ("gone: remove the row"). Prints one line
per check; exit 1 on any failure."""
import json
import os
import re
import sys

doc, top, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
TEST_VARS = {"MU_PARITY_OUT"}  # the test gives each side its own output directory
HOWS = {"port", "path", "differs", "muster only", "torchrun only"}
fails = 0


def check(ok, what):
    global fails
    print(("ok - " if ok else "not ok - ") + what)
    if not ok:
        fails += 1


def rows_of(path):
    text = open(path).read()
    m = re.search(r"<!-- env-diff: begin -->(.*?)<!-- env-diff: end -->", text, re.S)
    if m is None:
        check(False, "%s has no env-diff markers (<!-- env-diff: begin/end -->)" % path)
        return []
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("variable", "") or set(cells[0]) <= set("-: "):
            continue
        var, cs, how, why = cells
        ok = how in HOWS and why != ""
        check(ok, "row %s: how %r (one of %s), a reason given" % (var, how, sorted(HOWS)))
        rows.append({"var": var, "cases": None if cs == "all" else {c.strip() for c in cs.split(",")},
                     "how": how, "why": why, "seen": False})
    return rows


def find(rows, var, case):
    for r in rows:
        name = r["var"]
        hit = var.startswith(name[:-1]) if name.endswith("*") else var == name
        if hit and (r["cases"] is None or case in r["cases"]):
            return r
    return None


UUID = re.compile(r"_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def file_name(v):  # its last part, a uuid at its end aside (torchrun's watchdog_timer_UUID)
    return UUID.sub("", os.path.basename(v))


def is_port(v):
    return v is not None and v.isdigit() and 0 < int(v) < 65536


def fits(row, t, m):
    how = row["how"]
    if how == "port":
        return is_port(t) and is_port(m)
    if how == "path":
        return t is not None and m is not None and os.path.isabs(t) and os.path.isabs(m) and \
            file_name(t) == file_name(m)
    if how == "differs":
        return t is not None and m is not None
    if how == "muster only":
        return t is None and m is not None
    return t is not None and m is None  # torchrun only


def load(d):
    out = {}
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.startswith("rank") and f.endswith(".json"):
            with open(os.path.join(d, f)) as fh:
                out[f[4:-5]] = json.load(fh)["env"]
    return out


def side_free(v):  # the test's run ids: envdiff-CASE-SIDE-PID
    return None if v is None else v.replace("-tr-", "-SIDE-").replace("-mu-", "-SIDE-")


rows = rows_of(doc)
for case in cases:
    tr, mu = load(os.path.join(top, "tr-" + case)), load(os.path.join(top, "mu-" + case))
    check(len(tr) > 0 and sorted(tr) == sorted(mu),
          "%s: the same ranks ran (torchrun %s, muster %s)" % (case, sorted(tr), sorted(mu)))
    for rank in sorted(set(tr) & set(mu)):
        te, me = tr[rank], mu[rank]
        bad, listed = [], 0
        for var in sorted((set(te) | set(me)) - TEST_VARS):
            t, m = te.get(var), me.get(var)
            if var == "TORCHELASTIC_RUN_ID":
                t, m = side_free(t), side_free(m)
            if t == m:
                continue
            row = find(rows, var, case)
            if row is None:
                bad.append("unlisted: %s: torchrun %r, muster %r" % (var, t, m))
            elif not fits(row, t, m):
                bad.append("%s: torchrun %r, muster %r is not what its row says (%s)" %
                           (var, t, m, row["how"]))
            else:
                row["seen"] = True
                listed += 1
        check(not bad, "%s rank %s: %d variables, %d listed differences%s" % (
            case, rank, len(me), listed, "" if not bad else ": " + "; ".join(bad)))
for r in rows:
    if r["how"] in ("differs", "muster only", "torchrun only"):
        check(r["seen"], "row %s (%s): %s" % (
            r["var"], r["how"], "still differs" if r["seen"] else
            "no case shows this difference any more: remove the row from docs/agent.md"))
sys.exit(1 if fails else 0)
