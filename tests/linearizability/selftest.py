"""Self-tests of lincheck.py: hand-built histories it must reject (each anomaly the checker
exists to find) and ones it must accept (including operations whose reply never came), plus
simulated histories of an ideal etcd with crashes, accepted as recorded and rejected after one
read is made stale. Prints one line per case; exit status 0 when every case went as expected.

  selftest.py [-v]   (-v prints the checker's report for each rejected history)

Standard library only (runs under /usr/bin/python3).
"""
import io
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lincheck  # noqa: E402

MS = 1_000_000
VERBOSE = "-v" in sys.argv[1:]


class H:
    """A history under construction; times in milliseconds."""

    def __init__(self):
        self.rows = []

    def op(self, c, f, inv, comp, res, key="/k", xi=None, **args):
        """xi: the reply's X-Etcd-Index (default: a write's own index)."""
        d = {"id": len(self.rows) + 1, "client": c, "key": key, "f": f, "args": args,
             "inv": int(inv * MS), "comp": None if comp is None else int(comp * MS), "res": res,
             "conn": int(inv * MS)}
        if xi is not None:
            d["xi"] = xi
        elif res is not None and res.get("ok") and "mi" in res and f != "get":
            d["xi"] = res["mi"]
        self.rows.append(d)
        return self

    def kill(self, t):
        self.rows.append({"ev": "kill", "t": int(t * MS)})
        return self

    def up(self, t, down):
        self.rows.append({"ev": "up", "t": int(t * MS), "down": int(down * MS)})
        return self


def ok(v, mi, ci=None, prev=None):
    r = {"ok": 1, "v": v, "mi": mi, "ci": mi if ci is None else ci}
    if prev is not None:
        r["prev"] = {"v": prev[0], "mi": prev[1], "ci": prev[2] if len(prev) > 2 else prev[1]}
    return r


def deleted(mi, prev):
    return {"ok": 1, "mi": mi, "ci": prev[2] if len(prev) > 2 else prev[1],
            "prev": {"v": prev[0], "mi": prev[1], "ci": prev[2] if len(prev) > 2 else prev[1]}}


NF = {"ok": 1, "nf": 1}


def err(code, cause=""):
    return {"ok": 0, "code": code, "cause": cause}


def run(h):
    ops, events = lincheck.load(h.rows)
    out = io.StringIO()
    n, st = lincheck.check_history(ops, events, out=out)
    return n, out.getvalue(), st


# ---------------------------------------------------------------------------------------------
# Histories the checker must reject

def bad_stale_read():
    """A read after an acknowledged write returns the value it replaced."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(1, "set", 20, 30, ok("b", 2, prev=("a", 1)), v="b")
            .op(2, "get", 40, 50, ok("a", 1)))


def bad_lost_write():
    """An acknowledged write is gone after the server restarted."""
    return (H().op(1, "create", 0, 10, ok("a", 1), v="a")
            .kill(20).up(25, 5)
            .op(2, "get", 30, 40, NF))


def bad_lost_write_index_reused():
    """After a restart the acknowledged write is gone and its index is given again."""
    return (H().op(1, "set", 0, 10, ok("a", 5), v="a")
            .kill(20).up(25, 5)
            .op(2, "set", 30, 40, ok("b", 5), v="b"))


def bad_double_cas():
    """Two compare-and-swaps on the same prevIndex both succeed."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "cas", 20, 30, ok("b", 2, 1, prev=("a", 1)), v="b", pi=1)
            .op(3, "cas", 25, 35, ok("c", 3, 1, prev=("a", 1)), v="c", pi=1))


def bad_double_cas_value():
    """Two compare-and-swaps on the same prevValue both succeed (concurrently)."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "cas", 20, 40, ok("b", 2, 1, prev=("a", 1)), v="b", pv="a")
            .op(3, "cas", 21, 41, ok("c", 3, 1, prev=("a", 1)), v="c", pv="a"))


def bad_phantom_value():
    """A read returns a value nobody wrote."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "get", 20, 30, ok("zzz", 7)))


def bad_phantom_concurrent():
    """A read returns a value nobody wrote, while writes with no reply were in flight."""
    return (H().op(1, "set", 0, None, None, v="a")
            .op(2, "cas", 1, None, None, v="b", pv="x")
            .op(3, "get", 5, 10, ok("c", 3))
            .kill(50))


def bad_unsynced_read():
    """musterd --fsync batch before the fix: a quorum read sees a write whose reply is held for
    its fsync, the server is killed, the write is gone after the restart."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "set", 20, None, None, v="b")
            .op(3, "get", 22, 25, ok("b", 2))
            .kill(30).up(35, 5)
            .op(3, "get", 40, 45, ok("a", 1)))


def bad_future_read():
    """A read returns a value written by an operation invoked after the read completed."""
    return (H().op(1, "get", 0, 10, ok("a", 1))
            .op(2, "set", 20, 30, ok("a", 1), v="a"))


def bad_read_order():
    """Two reads in sequence, both concurrent with one write: new value, then old value."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(1, "set", 20, 100, ok("b", 2, prev=("a", 1)), v="b")
            .op(2, "get", 30, 40, ok("b", 2))
            .op(3, "get", 50, 60, ok("a", 1)))


def bad_compare_cause():
    """A failed compare names a current value the key does not hold."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "cas", 20, 30, err(101, "[x != q]"), v="b", pv="x"))


def bad_compare_fails_on_match():
    """A compare on the current index fails."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "cad", 20, 30, err(101, "[1 != 1]"), pi=1))


def bad_create_twice():
    """Two creates (prevExist=false) of the same key both succeed."""
    return (H().op(1, "create", 0, 10, ok("a", 1), v="a")
            .op(2, "create", 20, 30, ok("b", 2), v="b"))


def bad_delete_comes_back():
    """An acknowledged compare-and-delete is undone by a crash."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "cad", 20, 30, deleted(2, ("a", 1)), pv="a")
            .kill(40).up(45, 5)
            .op(3, "get", 50, 60, ok("a", 1)))


def bad_created_index():
    """A read returns the right value with a wrong createdIndex."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "cas", 20, 30, ok("b", 2, 1, prev=("a", 1)), v="b", pv="a")
            .op(3, "get", 40, 50, ok("b", 2, 2)))


def bad_index_backwards_per_key():
    """A later write on the same key gets a lower index."""
    return (H().op(1, "set", 0, 10, ok("a", 5), v="a")
            .op(2, "set", 20, 30, ok("b", 3, prev=("a", 5)), v="b"))


def bad_index_shared():
    """Two keys' acknowledged writes got the same index."""
    return (H().op(1, "set", 0, 10, ok("a", 4), v="a", key="/x")
            .op(2, "set", 0, 10, ok("b", 4), v="b", key="/y"))


def bad_index_backwards_global():
    """A write on another key gets an index below one already shown to a client."""
    return (H().op(1, "set", 0, 10, ok("a", 9), v="a", key="/x")
            .op(2, "set", 20, 30, ok("b", 7), v="b", key="/y"))


def bad_ttl_early():
    """A TTL'd key (ttl 1 s) is gone half a second after it was written."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a", ttl=1)
            .op(2, "get", 500, 510, NF))


def bad_ttl_never():
    """A TTL'd key (ttl 1 s) is still there 3 s after its write (no downtime)."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a", ttl=1)
            .op(2, "get", 3100, 3110, ok("a", 1)))


def bad_ttl_lost_on_restart():
    """A TTL'd key outlives its deadline by far more than the server was down."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a", ttl=1)
            .kill(500).up(600, 100)
            .op(2, "get", 4000, 4010, ok("a", 1)))


def bad_ttl_kept_by_read():
    """A read sees the TTL'd version, then it expires, then a read sees it again."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a", ttl=1)
            .op(2, "get", 1500, 1510, NF)
            .op(3, "get", 1600, 1610, ok("a", 1)))


BAD = [bad_stale_read, bad_lost_write, bad_lost_write_index_reused, bad_double_cas,
       bad_double_cas_value, bad_phantom_value, bad_phantom_concurrent, bad_unsynced_read,
       bad_future_read, bad_read_order, bad_compare_cause, bad_compare_fails_on_match,
       bad_create_twice, bad_delete_comes_back, bad_created_index, bad_index_backwards_per_key,
       bad_index_shared, bad_index_backwards_global, bad_ttl_early, bad_ttl_never,
       bad_ttl_lost_on_restart, bad_ttl_kept_by_read]


# ---------------------------------------------------------------------------------------------
# Histories the checker must accept

def good_sequential():
    """Every kind of operation, one at a time."""
    return (H().op(1, "create", 0, 1, ok("a", 1), v="a")
            .op(1, "create", 2, 3, err(105, "/k"), v="x")
            .op(1, "get", 4, 5, ok("a", 1))
            .op(1, "cas", 6, 7, ok("b", 2, 1, prev=("a", 1)), v="b", pv="a")
            .op(1, "cas", 8, 9, err(101, "[a != b]"), v="c", pv="a")
            .op(1, "cas", 10, 11, err(101, "[1 != 2]"), v="c", pi=1)
            .op(1, "cas", 12, 13, ok("c", 3, 1, prev=("b", 2, 1)), v="c", pi=2)
            .op(1, "set", 14, 15, ok("d", 4, prev=("c", 3, 1)), v="d")
            .op(1, "cad", 16, 17, err(101, "[c != d]"), pv="c")
            .op(1, "cad", 18, 19, deleted(5, ("d", 4)), pv="d")
            .op(1, "get", 20, 21, NF)
            .op(1, "cas", 22, 23, err(100, "/k"), v="e", pv="d")
            .op(1, "cad", 24, 25, err(100, "/k"), pi=5)
            .op(1, "create", 26, 27, ok("e", 6), v="e")
            .op(1, "cad", 28, 29, deleted(7, ("e", 6)), pi=6)
            .op(1, "get", 30, 31, NF))


def good_concurrent_reads():
    """Reads concurrent with a write may see either value (in an order that fits)."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(1, "set", 20, 100, ok("b", 2, prev=("a", 1)), v="b")
            .op(2, "get", 30, 60, ok("b", 2))
            .op(3, "get", 25, 70, ok("a", 1))
            .op(4, "get", 80, 90, ok("b", 2)))


def good_reordered():
    """The only order that works is not the invocation order."""
    return (H().op(1, "create", 0, 100, ok("a", 2), v="a")
            .op(2, "get", 10, 20, NF)
            .op(3, "cas", 30, 40, err(100, "/k"), v="x", pv="a")
            .op(4, "cas", 50, 120, ok("b", 3, 2, prev=("a", 2)), v="b", pv="a"))


def good_unknown_took_effect():
    """A write whose reply never came took effect: a read after the restart sees it."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "set", 20, None, None, v="b")
            .kill(30).up(35, 5)
            .op(3, "get", 40, 45, ok("b", 2))
            .op(3, "cas", 50, 55, ok("c", 3, 2, prev=("b", 2)), v="c", pi=2))


def good_unknown_lost():
    """Writes whose replies never came did not take effect."""
    return (H().op(1, "create", 0, 10, ok("a", 1), v="a")
            .op(2, "set", 20, None, None, v="b")
            .op(3, "cas", 21, None, None, v="c", pv="a")
            .op(4, "cad", 22, None, None, pv="a")
            .op(5, "create", 23, None, None, v="d")
            .kill(30).up(35, 5)
            .op(3, "get", 40, 45, ok("a", 1)))


def good_unknown_chain():
    """Of four unanswered writes, two took effect, in an order the reads pin down."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "cas", 20, None, None, v="b", pv="a")
            .op(3, "cas", 21, None, None, v="c", pv="b")
            .op(4, "set", 22, None, None, v="x")
            .op(5, "cad", 23, None, None, pv="a")
            .kill(30).up(35, 5)
            .op(6, "get", 40, 45, ok("c", 3, 1))
            .op(6, "get", 46, 47, ok("c", 3, 1)))


def good_unknown_never_killed():
    """A write whose reply never came and no kill after it (a client timeout)."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "set", 20, None, None, v="b")
            .op(3, "get", 30, 40, ok("a", 1))
            .op(3, "get", 50, 60, ok("b", 2))
            .op(3, "get", 70, 80, ok("b", 2)))


def good_unknown_read_dropped():
    """A read without a reply constrains nothing."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a")
            .op(2, "get", 20, None, None)
            .kill(30).up(35, 5)
            .op(3, "get", 40, 45, ok("a", 1)))


def good_sent_to_dead_server():
    """An operation sent on a connection to a server already killed did nothing."""
    h = (H().op(1, "set", 0, 10, ok("a", 1), v="a")
         .kill(15).up(18, 3))
    h.op(2, "set", 20, None, None, v="b")
    h.rows[-1]["conn"] = 5 * MS  # connected before the kill
    return h.op(3, "get", 40, 45, ok("a", 1))


def good_ttl_expiry():
    """A TTL'd key expires between 1 s after its write and its latest deadline; a create
    after the expiry succeeds."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a", ttl=1)
            .op(2, "get", 900, 910, ok("a", 1))
            .op(2, "get", 1300, 1310, NF)
            .op(3, "create", 1400, 1410, ok("b", 3), v="b"))


def good_ttl_late_after_restart():
    """The server was down around the deadline: the key expires late, within the allowance."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a", ttl=1)
            .kill(950).up(2400, 1450)
            .op(2, "get", 2410, 2420, ok("a", 1))
            .op(2, "get", 2430, 2440, NF))


def good_ttl_overwritten():
    """A write without TTL over a TTL'd key makes it permanent."""
    return (H().op(1, "set", 0, 10, ok("a", 1), v="a", ttl=1)
            .op(1, "cas", 20, 30, ok("b", 2, 1, prev=("a", 1)), v="b", pv="a")
            .op(2, "get", 5000, 5010, ok("b", 2, 1)))


def good_ttl_unknown():
    """A TTL'd create without a reply took effect and expired later."""
    return (H().op(1, "create", 0, None, None, v="a", ttl=1)
            .kill(20).up(25, 5)
            .op(2, "get", 30, 40, ok("a", 1))
            .op(2, "get", 1500, 1510, NF))


def good_failed_compare_binds_index():
    """A failed compare names the index of a version written without a reply."""
    return (H().op(1, "set", 0, None, None, v="a")
            .kill(20).up(25, 5)
            .op(2, "cas", 30, 40, err(101, "[1 != 4]"), v="x", pi=1)
            .op(2, "cas", 50, 60, ok("b", 5, 4, prev=("a", 4)), v="b", pi=4))


GOOD = [good_sequential, good_concurrent_reads, good_reordered, good_unknown_took_effect,
        good_unknown_lost, good_unknown_chain, good_unknown_never_killed,
        good_unknown_read_dropped, good_sent_to_dead_server, good_ttl_expiry,
        good_ttl_late_after_restart, good_ttl_overwritten, good_ttl_unknown,
        good_failed_compare_binds_index]


# ---------------------------------------------------------------------------------------------
# Simulated histories: an ideal etcd (one global index, TTLs expiring at their deadline) that
# crashes; operations in flight at a crash took effect or not at random.

def simulate(seed, clients=12, nkeys=3, seconds=2.5, ttl=1):
    rnd = random.Random(seed)
    kills = sorted(rnd.uniform(0.2, seconds) for _ in range(int(seconds)))
    ops = []
    for c in range(1, clients + 1):
        t = rnd.uniform(0, 0.002)
        while t < seconds:
            dur = rnd.choice([rnd.uniform(0.00005, 0.0005), rnd.uniform(0.0005, 0.005)])
            ops.append({"client": c, "inv": t, "comp": t + dur, "point": t + rnd.random() * dur,
                        "key": "/s%d" % rnd.randrange(nkeys)})
            t += dur + rnd.uniform(0, 0.0005)
    for o in ops:  # in flight at a kill: no reply; took effect iff its point came first
        for k in kills:
            if o["inv"] < k < o["comp"]:
                o["lost_reply"] = True
                o["applied"] = o["point"] < k
                break
    ops.sort(key=lambda o: o["point"])
    index = 0
    store = {}  # key -> [value, mi, ci, deadline or None]
    seq = 0
    for o in ops:
        # expire what is due
        for key in sorted(store, key=lambda k: store[k][3] or 0):
            n = store[key]
            if n[3] is not None and n[3] <= o["point"]:
                index += 1
                del store[key]
        key = o["key"]
        cur = store.get(key)
        seq += 1
        v = "v%d" % seq
        if key == "/s0":  # a quiet key: TTL'd creates live long enough to expire
            kind = "create_ttl" if rnd.random() < 0.1 else "get"
        else:
            kind = rnd.choice(["get", "get", "create", "set", "set_ttl", "cas_pv", "cas_pi",
                               "cad_pv", "cad_pi"])
        args = {}
        res = None
        if kind == "get":
            f = "get"
            res = NF if cur is None else ok(cur[0], cur[1], cur[2])
        elif kind in ("create", "create_ttl", "set", "set_ttl"):
            f = "create" if kind.startswith("create") else "set"
            args = {"v": v}
            if kind.endswith("_ttl") or (kind == "create" and rnd.random() < 0.3):
                args["ttl"] = ttl
            if f == "create" and cur is not None:
                res = err(105, key)
            elif o.get("applied", True):
                index += 1
                res = ok(v, index, prev=None if cur is None else tuple(cur[:3]))
                store[key] = [v, index, index, o["point"] + ttl if "ttl" in args else None]
        else:
            f = kind[:3]
            use_pv = kind.endswith("pv")
            right = cur is not None and rnd.random() < 0.7
            if use_pv:
                args["pv"] = cur[0] if right else "v%d" % rnd.randrange(1, seq + 1)
            else:
                args["pi"] = cur[1] if right else rnd.randrange(1, index + 2)
            if f == "cas":
                args["v"] = v
            if cur is None:
                res = err(100, key)
            elif (use_pv and args["pv"] != cur[0]) or (not use_pv and args["pi"] != cur[1]):
                res = err(101, "[%s != %s]" % ((args["pv"], cur[0]) if use_pv
                                               else (args["pi"], cur[1])))
            elif o.get("applied", True):
                index += 1
                if f == "cas":
                    res = ok(v, index, cur[2], prev=tuple(cur[:3]))
                    store[key] = [v, index, cur[2], None]
                else:
                    res = deleted(index, tuple(cur[:3]))
                    del store[key]
        o.update(f=f, args=args, res=res, xi=index)
    h = H()
    for k in kills:
        h.kill(k * 1000).up(k * 1000 + 0.1, 0.1)
    for o in sorted(ops, key=lambda o: o["inv"]):
        if o.get("lost_reply"):
            if o["f"] != "get" or rnd.random() < 0.5:
                h.op(o["client"], o["f"], o["inv"] * 1000, None, None, key=o["key"], **o["args"])
        else:
            h.op(o["client"], o["f"], o["inv"] * 1000, o["comp"] * 1000, o["res"], key=o["key"],
                 xi=o["xi"], **o["args"])
    return h


def make_stale(h, seed):
    """Makes one read return the version before the one it saw, where the write that replaced
    that version was acknowledged before the read began. Returns: False if none fits."""
    rnd = random.Random(seed)
    writes = {}  # (key, value) -> the op row that wrote it
    for d in h.rows:
        r = d.get("res")
        if "ev" not in d and r is not None and r.get("ok") and d["f"] in ("set", "create", "cas"):
            writes[(d["key"], r["v"])] = d
    cands = []
    for d in h.rows:
        r = d.get("res")
        if "ev" in d or d["f"] != "get" or r is None or r.get("nf"):
            continue
        w = writes.get((d["key"], r["v"]))
        if w is None or "prev" not in w["res"] or w["comp"] >= d["inv"]:
            continue
        cands.append((d, w["res"]["prev"]))
    if not cands:
        return False
    d, prev = rnd.choice(cands)
    d["res"] = ok(prev["v"], prev["mi"], prev["ci"])
    d["xi"] = max(d.get("xi") or 0, prev["mi"])
    return True


def main():
    fails = 0
    for fn in BAD:
        n, report, _ = run(fn())
        if n > 0:
            print("ok - rejects %s: %s" % (fn.__name__, fn.__doc__.split("\n")[0]))
            if VERBOSE:
                print("    " + report.replace("\n", "\n    "))
        else:
            fails += 1
            print("not ok - accepted %s: %s" % (fn.__name__, fn.__doc__))
    for fn in GOOD:
        n, report, _ = run(fn())
        if n == 0:
            print("ok - accepts %s: %s" % (fn.__name__, fn.__doc__.split("\n")[0]))
        else:
            fails += 1
            print("not ok - rejected %s: %s" % (fn.__name__, fn.__doc__))
            print("    " + report.replace("\n", "\n    "))
    for seed in range(1, 7):
        h = simulate(seed)
        n, report, st = run(h)
        unk = sum(1 for d in h.rows if "ev" not in d and d["res"] is None)
        if n == 0:
            print("ok - accepts simulated history %d (%d operations, %d without reply, %d TTL "
                  "expiries placed, %.2f s)" % (seed, st["ops"], unk, st["expiries"],
                                               st["seconds"]))
        else:
            fails += 1
            print("not ok - rejected simulated history %d" % seed)
            print("    " + report[:3000].replace("\n", "\n    "))
        if not make_stale(h, seed):
            fails += 1
            print("not ok - simulated history %d has no read to make stale" % seed)
            continue
        n, report, st = run(h)
        if n > 0:
            print("ok - rejects simulated history %d with one stale read (%.2f s)" % (
                seed, st["seconds"]))
            if VERBOSE:
                print("    " + report[:2000].replace("\n", "\n    "))
        else:
            fails += 1
            print("not ok - accepted simulated history %d with one stale read" % seed)
    print("# selftest: %d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
