"""Compares what Debian's torchrun and `muster agent` gave the workers of one case of
agent_torchrun_parity.sh (dumps of mu_parity_worker.py, one per global rank).

    parity_compare.py CASE BASE_ENV.json TORCHRUN_DIR MUSTER_DIR

The variables a launcher sets are those of a worker's environment that are not in BASE_ENV (the
environment both launchers were started with) or differ from it. Every variable torchrun sets
must come from muster with the same value, modulo ports (MASTER_PORT), paths (the error file)
and, where the case lets the launcher make it up, the run id; sys.argv and the whole command
line of the process must be equal. The differences that stay are the KNOWN rows below, each
with its reason (docs/agent.md lists the same); muster's value is still checked for them.
muster may add only its own MUSTER_* variables. Prints one line per check; exit 1 on any
failure."""
import ipaddress
import json
import os
import sys

case, base_path, tr_dir, mu_dir = sys.argv[1:5]


def is_ip(v):
    try:
        ipaddress.ip_address(v)
        return True
    except ValueError:
        return False


# (cases, variable): (reason, check of muster's value)
KNOWN = {
    (("standalone", "rdzv", "elastic", "module", "nopython"), "MASTER_ADDR"): (
        "torchrun gives rank 0's host name (socket.getfqdn()); muster gives the address rank 0 "
        "reached the rendezvous from (--local-addr), which needs no name resolution",
        is_ip),
    (("standalone",), "TORCHELASTIC_RUN_ID"): (
        "--standalone makes the run id up: torchrun a uuid4, muster 'standalone'",
        lambda v: v == "standalone"),
    (("static", "module", "nopython"), "TORCHELASTIC_USE_AGENT_STORE"): (
        "torchrun's static rendezvous lets workers use its agents' TCPStore; muster's agent "
        "hosts none, so worker rank 0 creates it at MASTER_ADDR:MASTER_PORT as with any "
        "other rendezvous",
        lambda v: v == "False"),
}


def known(var):
    for (cases, name), row in KNOWN.items():
        if name == var and case in cases:
            return row
    return None


# What the test's shell adds to each launcher's environment: not the launchers' doing.
TEST_VARS = {"MU_PARITY_OUT", "SHLVL", "_"}


def norm(var, v):
    if var == "TORCHELASTIC_RUN_ID":  # the test gives each launcher its own id: par-CASE-SIDE-PID
        return v.replace("-tr-", "-SIDE-").replace("-mu-", "-SIDE-")
    if var == "MASTER_PORT" and v.isdigit() and 0 < int(v) < 65536:
        return "<port>"
    if var == "TORCHELASTIC_ERROR_FILE" and os.path.isabs(v):
        return "<dir>/" + os.path.basename(v)
    return v


# The variables torchrun 2.x sets that torch 1.13's does not, with the value 2.x gives each.
TORCH2_VARS = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": lambda env: env.get("NCCL_ASYNC_ERROR_HANDLING", "1"),
    "TORCHELASTIC_SIGNALS_TO_HANDLE": lambda env: "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
}


def load(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if f.startswith("rank") and f.endswith(".json"):
            with open(os.path.join(d, f)) as fh:
                out[f[4:-5]] = json.load(fh)
    return out


with open(base_path) as fh:
    base = json.load(fh)
tr, mu = load(tr_dir), load(mu_dir)
fails = 0


def check(ok, what):
    global fails
    print(("ok - " if ok else "not ok - ") + case + ": " + what)
    if not ok:
        fails += 1


check(len(tr) > 0 and sorted(tr) == sorted(mu),
      "the same ranks ran (torchrun %s, muster %s)" % (sorted(tr), sorted(mu)))
for rank in sorted(set(tr) & set(mu)):
    te, me = tr[rank]["env"], mu[rank]["env"]
    tset = {k: v for k, v in te.items() if base.get(k) != v and k not in TEST_VARS}
    mset = {k: v for k, v in me.items() if base.get(k) != v and k not in TEST_VARS}
    bad = []
    for var in sorted(tset):
        if var not in me:
            bad.append("%s=%r missing" % (var, tset[var]))
            continue
        row = known(var)
        if row is not None:
            if not row[1](me[var]):
                bad.append("%s=%r (known difference, but not the value documented)" % (var, me[var]))
            continue
        if norm(var, tset[var]) != norm(var, me[var]):
            bad.append("%s: torchrun %r, muster %r" % (var, tset[var], me[var]))
    extra = sorted(k for k in mset if k not in tset and not k.startswith("MUSTER_"))
    for var in extra:
        # torchrun 2.x's names, which muster sets beside the old ones (docs/agent.md); a torchrun
        # older than 2.x (Debian 12's 1.13) sets neither, so only their values are checked here
        want = TORCH2_VARS.get(var)
        if want is not None:
            if me[var] != want(me):
                bad.append("%s=%r, torchrun 2.x sets %r" % (var, me[var], want(me)))
            continue
        bad.append("%s=%r set by muster only" % (var, me[var]))
    check(not bad, "rank %s: the %d variables torchrun sets (%s)%s" % (
        rank, len(tset), " ".join(sorted(tset)), "" if not bad else ": " + "; ".join(bad)))
    check(tr[rank]["argv"] == mu[rank]["argv"],
          "rank %s: sys.argv %r / %r" % (rank, tr[rank]["argv"], mu[rank]["argv"]))
    check(tr[rank]["cmdline"] == mu[rank]["cmdline"],
          "rank %s: command line %r / %r" % (rank, tr[rank]["cmdline"], mu[rank]["cmdline"]))
sys.exit(1 if fails else 0)
