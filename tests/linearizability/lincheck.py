"""Linearizability checker for histories of etcd v2 key operations (docs/linearizability.md).

  lincheck.py HISTORY.jsonl [--ttl-late SECONDS] [--budget NODES]

The history is what tests/linearizability/harness.py records: one JSON object per line, either an
operation (invocation and completion times, the request, the response or none) or an event of the
nemesis (a server process killed, started, answering). The check is the Wing & Gong search with
Lowe's memoization, as Porcupine does it, run once per key (linearizability is compositional),
against a model of one etcd v2 key: existence, value, modifiedIndex, createdIndex, the highest
index seen on the key, and a TTL deadline window per TTL'd version. Two global checks follow:
no index is given to two different things, and the index never goes back in real time.

Standard library only (runs under /usr/bin/python3). Exit status 0 when the history is
linearizable, 1 when an anomaly was found or the search gave up, 2 on a usage error.
"""
import bisect
import json
import re
import sys
import time

INF = float("inf")
NS = 1_000_000_000

# A key's state: (exists, value, modifiedIndex, createdIndex, floor).
#   modifiedIndex None: a version written by an operation whose reply never came (its index is
#   unknown, but above floor); createdIndex SAME: equal to modifiedIndex (a version made by a set
#   or a create); None: unknown. floor: the highest index known for any event on this key so far.
SAME = -1
INIT = (False, None, None, None, 0)
CAUSE = re.compile(r"^\[(.*) != (.*)\]$")


class Op:
    """One operation of the history. res None: no reply (unknown outcome)."""

    __slots__ = ("id", "client", "key", "f", "args", "inv", "comp", "res", "conn", "xi", "why")

    def __init__(self, d):
        self.id = d["id"]
        self.client = d.get("client", 0)
        self.key = d["key"]
        self.f = d["f"]
        self.args = d.get("args", {})
        self.inv = d["inv"]
        self.comp = d.get("comp")
        self.res = d.get("res")
        self.conn = d.get("conn", self.inv)
        self.xi = d.get("xi")  # X-Etcd-Index of the reply, when there was one
        self.why = d.get("err")

    def describe(self, t0=0):
        a = " ".join("%s=%s" % kv for kv in sorted(self.args.items()))
        if self.res is None:
            r = "UNKNOWN (%s)" % (self.why or "no reply")
        elif self.res.get("ok"):
            r = "ok"
            if "v" in self.res:
                r += " v=%s" % self.res["v"]
            if "mi" in self.res:
                r += " mi=%s ci=%s" % (self.res["mi"], self.res.get("ci"))
            p = self.res.get("prev")
            if p:
                r += " prev=(%s mi=%s ci=%s)" % (p["v"], p["mi"], p["ci"])
            if self.res.get("nf"):
                r = "not found"
        else:
            r = "error %s %s" % (self.res.get("code"), self.res.get("cause", ""))
        comp = "inf" if self.comp == INF else "%.6f" % ((self.comp - t0) / NS)
        return "#%d c%s [%.6f, %s] %s %s %s -> %s" % (
            self.id, self.client, (self.inv - t0) / NS, comp, self.key, self.f, a, r)


# ---------------------------------------------------------------------------------------------
# The model of one key

def _bind_index(s, m):
    """The current version's modifiedIndex is m. Returns: the refined state, or None."""
    ex, val, mi, ci, floor = s
    if not ex:
        return None
    if mi is None:
        if m <= floor:
            return None
    elif mi != m:
        return None
    return (True, val, m, m if ci == SAME else ci, max(floor, m))


def _see(s, v, m, c):
    """The key holds version (v, modifiedIndex m, createdIndex c). Returns the refined state."""
    if not s[0] or s[1] != v:
        return None
    t = _bind_index(s, m)
    if t is None or (t[3] is not None and t[3] != c):
        return None
    return (True, v, m, c, t[4])


def _kept_ci(s):
    """The createdIndex a compareAndSwap keeps, as far as the state knows it."""
    _, _, mi, ci, _ = s
    if ci == SAME:
        return mi  # None when unknown
    return ci


def _index_matches(s, j):
    """Whether the current version may have modifiedIndex j (None: unknown, above floor)."""
    mi = s[2]
    return mi == j if mi is not None else j > s[4]


def step(s, op):
    """The states the key may be in after `op` took effect in state `s`; [] if it cannot."""
    f, a, r = op.f, op.args, op.res
    ex, val, mi, ci, floor = s
    if r is None:  # no reply: it happened (as the model allows) or it did not
        out = [s]
        t = None
        if f == "set":
            t = (True, a["v"], None, SAME, floor)
        elif f == "create":
            if not ex:
                t = (True, a["v"], None, SAME, floor)
        elif f == "cas":
            if ex and (a["pv"] == val if "pv" in a else _index_matches(s, a["pi"])):
                kept = _kept_ci(s)
                if kept is None and "pi" in a and ci == SAME:
                    kept = a["pi"]
                t = (True, a["v"], None, kept, floor)
        elif f == "cad":
            if ex and (a["pv"] == val if "pv" in a else _index_matches(s, a["pi"])):
                t = (False, None, None, None, floor)
        if t is not None:
            out.append(t)
        return out
    if r.get("ok"):
        if f == "get":
            if r.get("nf"):
                return [s] if not ex else []
            t = _see(s, r["v"], r["mi"], r["ci"])
            return [t] if t is not None else []
        m = r["mi"]
        p = r.get("prev")
        if p is not None:
            s1 = _see(s, p["v"], p["mi"], p["ci"])
            if s1 is None:
                return []
        elif f in ("cas", "cad"):
            return []  # a successful compare always names the node it replaced
        else:
            if ex:
                return []  # a set or create over an existing key returns it as prevNode
            s1 = s
        if m <= s1[4]:
            return []  # indexes on one key only grow
        if f == "set":
            if r["ci"] != m:
                return []
            return [(True, a["v"], m, m, m)]
        if f == "create":
            if s1[0] or r["ci"] != m:
                return []
            return [(True, a["v"], m, m, m)]
        if f == "cas":
            if ("pv" in a and p["v"] != a["pv"]) or ("pi" in a and p["mi"] != a["pi"]):
                return []
            if r["ci"] != p["ci"]:
                return []
            return [(True, a["v"], m, r["ci"], m)]
        if f == "cad":
            if ("pv" in a and p["v"] != a["pv"]) or ("pi" in a and p["mi"] != a["pi"]):
                return []
            return [(False, None, None, None, m)]
        return []
    code = r.get("code")
    if code == 100:  # key not found
        return [s] if not ex else []
    if code == 105:  # key already exists (create)
        return [s] if ex else []
    if code == 101 and f in ("cas", "cad"):  # compare failed: the cause names the current value
        if not ex:
            return []
        mt = CAUSE.match(r.get("cause", ""))
        if mt is None:
            return []
        if "pv" in a:
            if val == a["pv"] or mt.group(2) != val:
                return []
            return [s]
        try:
            cur = int(mt.group(2))
        except ValueError:
            return []
        if cur == a["pi"]:
            return []
        t = _bind_index(s, cur)
        return [t] if t is not None else []
    return []


# ---------------------------------------------------------------------------------------------
# The search (Wing & Gong, with Lowe's memoization of (linearized set, state))

class Result:
    def __init__(self, key, ok, nodes, ops, why="", detail=None):
        self.key, self.ok, self.nodes, self.ops, self.why = key, ok, nodes, ops, why
        self.detail = detail or []
        self.expiries = self.effects = 0


def check_key(key, ops, ttlwin, budget=2_000_000, t0=0):
    """Searches for a linearization of `ops` (all with finite completion) on one key.

    ttlwin maps a value written with a TTL to (earliest expiry, latest expiry) in ns; the expiry
    of the version holding that value is an event the search may place anywhere in that window.
    Returns: a Result.
    """
    ops = sorted(ops, key=lambda o: (o.inv, o.comp))
    n = len(ops)
    inv = [o.inv for o in ops]
    comp = [o.comp for o in ops]
    seen = set()
    best = (-1, [], None, 0, frozenset())  # (count, the path's last ops, state, p, extras)
    nodes = 0
    path = []  # the op linearized by each frame above the first (-1: an expiry)
    # a frame: [p, extras, state, t, count, moves, next move]; p: first op not linearized,
    # extras: linearized ops after p, t: latest invocation among linearized ops,
    # moves: (op index or -1 for the expiry, the state after it)
    seen.add((0, frozenset(), INIT))
    stack = [[0, frozenset(), INIT, -INF, 0, None, 0]]
    while stack:
        fr = stack[-1]
        p, extras, s, t, count = fr[0], fr[1], fr[2], fr[3], fr[4]
        if fr[5] is None:
            if p == n:
                r = Result(key, True, nodes, n)
                # what the linearization found used: TTL expiries, unanswered ops with an effect
                r.expiries = sum(1 for i in path if i < 0)
                r.effects = sum(1 for j, i in enumerate(path)
                                if i >= 0 and ops[i].res is None and stack[j][2] != stack[j + 1][2])
                return r
            nodes += 1
            if nodes > budget:
                return Result(key, False, nodes, n, "search budget of %d nodes exceeded" % budget)
            if count > best[0]:
                best = (count, path[-12:], s, p, extras)
            moves = []
            mc = INF
            i = p
            win = ttlwin.get(s[1]) if s[0] else None
            hard = win[1] if win is not None else INF
            while i < n:
                if i in extras:
                    i += 1
                    continue
                if inv[i] > mc:
                    break
                if inv[i] <= hard:  # past the latest expiry, the version must be gone first
                    for s2 in step(s, ops[i]):
                        moves.append((i, s2))
                if comp[i] < mc:
                    mc = comp[i]
                i += 1
            if win is not None and max(t, win[0]) <= mc:
                moves.append((-1, (False, None, None, None, s[4])))  # the version expires now
            fr[5] = moves
        moves = fr[5]
        pushed = False
        while fr[6] < len(moves):
            i, s2 = moves[fr[6]]
            fr[6] += 1
            if i < 0:
                np, nx, nt, nc = p, extras, t, count
            else:
                if i == p:
                    np = p + 1
                    nx = extras
                    while np in nx:
                        nx = nx - {np}
                        np += 1
                else:
                    np, nx = p, extras | {i}
                nt = t if inv[i] < t else inv[i]
                nc = count + 1
            k = (np, nx, s2)
            if k in seen:
                continue
            seen.add(k)
            stack.append([np, nx, s2, nt, nc, None, 0])
            path.append(i)
            pushed = True
            break
        if not pushed:
            stack.pop()
            if path:
                path.pop()
    detail = ["no linearization: at most %d of %d operations could be ordered" % (best[0], n)]
    if best[2] is not None:
        detail.append("state there: %s" % (fmt_state(best[2]),))
    detail.append("the last operations of that order (expire = TTL expiry):")
    for i in best[1]:
        detail.append("  " + ("expire" if i < 0 else ops[i].describe(t0)))
    bp, bx = best[3], best[4]
    pend = [o for i, o in enumerate(ops) if i >= bp and i not in bx]
    # the operations that could come next there: the ones invoked before the first completion
    first_end = min([o.comp for o in pend] + [INF])
    left = [o for o in pend if o.inv <= first_end][:8]
    if left:
        detail.append("operations none of which could come next (check these):")
        for o in left:
            detail.append("  " + o.describe(t0))
    return Result(key, False, nodes, n, "not linearizable", detail)


def fmt_state(s):
    ex, val, mi, ci, floor = s
    if not ex:
        return "absent (highest index seen %d)" % floor
    return "value=%s modifiedIndex=%s createdIndex=%s" % (
        val, "?" if mi is None else mi, "=mi" if ci == SAME else ("?" if ci is None else ci))


# ---------------------------------------------------------------------------------------------
# Loading a history

def load(path_or_lines):
    """Returns (ops, events) from a history file or a list of dicts."""
    if isinstance(path_or_lines, str):
        with open(path_or_lines) as f:
            rows = [json.loads(line) for line in f if line.endswith("\n") and line.strip()]
    else:
        rows = list(path_or_lines)
    ops, events = [], []
    for d in rows:
        if "ev" in d:
            events.append(d)
        else:
            ops.append(Op(d))
    return ops, events


def prepare(ops, events, ttl_late_s=1.0, expiry_early_s=0.05):
    """Closes the windows of unanswered operations and builds the TTL windows.

    An operation without a reply was sent to the server process that accepted its connection; it
    can only have taken effect before that process died, so its completion is the first kill (or
    final stop) after its connection was made. One sent to an already dead process is dropped.
    Returns: (ops by key, ttl windows by key, stats).
    """
    kills = sorted(e["t"] for e in events if e["ev"] in ("kill", "stop"))
    downs = []
    for e in events:
        if e["ev"] == "up" and e.get("down") is not None:
            downs.append(e["down"])
    max_down = max(downs) if downs else 0
    late = int((ttl_late_s * NS) + max_down)
    early = int(expiry_early_s * NS)
    end = max([o.inv for o in ops] + [o.comp for o in ops if o.comp is not None] + [0]) + 1
    stats = {"ops": 0, "unknown": 0, "dropped": 0, "refused": 0, "max_down": max_down}
    by_key = {}
    for o in ops:
        if o.res is not None and o.res.get("refused"):
            stats["refused"] += 1
            continue
        stats["ops"] += 1
        if o.res is None:
            stats["unknown"] += 1
            if o.f == "get":
                stats["dropped"] += 1
                continue  # a read without a reply constrains nothing
            i = bisect.bisect_left(kills, o.conn)
            if i < len(kills):
                if kills[i] < o.inv:
                    stats["dropped"] += 1
                    continue  # its server was gone before it was sent
                o.comp = kills[i]
            else:
                o.comp = end  # no kill after it: it may take effect up to the end
        by_key.setdefault(o.key, []).append(o)
    ttlwins = {}
    for key, kops in by_key.items():
        w = {}
        for o in kops:
            ttl = o.args.get("ttl")
            if ttl is None or o.f not in ("set", "create"):
                continue
            if o.res is not None and not o.res.get("ok"):
                continue
            lo = o.inv + int(ttl * NS) - early
            hi = INF if o.comp >= end else o.comp + int(ttl * NS) + late
            w[o.args["v"]] = (lo, hi)
        ttlwins[key] = w
    return by_key, ttlwins, stats


# ---------------------------------------------------------------------------------------------
# Global checks on indexes

def check_indexes(ops, t0=0):
    """No index names two different things; the index never goes back in real time.

    Returns: a list of problems (strings).
    """
    probs = []
    owner = {}  # index -> (key, what, op)
    clash = set()

    def claim(i, key, what, o):
        prev = owner.get(i)
        if prev is None:
            owner[i] = (key, what, o)
        elif (prev[0] != key or prev[1] != what) and i not in clash:
            clash.add(i)
            probs.append("index %d names two things: %s %s (%s) and %s %s (%s)" % (
                i, prev[0], prev[1], prev[2].describe(t0), key, what, o.describe(t0)))

    # every reply proves that the index had reached some value by its completion (its
    # X-Etcd-Index, the indexes of the nodes in it); whatever is invoked later sees at least that
    rows = []  # (inv, comp, proven index, its own write index or None, X-Etcd-Index, op)
    for o in ops:
        r = o.res
        if r is None or r.get("refused"):
            continue
        seen = [o.xi or 0]
        if r.get("ok") and not r.get("nf"):
            if o.f == "cad":
                claim(r["mi"], o.key, "delete", o)
            else:
                claim(r["mi"], o.key, "value %s" % r["v"], o)
            seen.append(r["mi"])
            p = r.get("prev")
            if p is not None:
                claim(p["mi"], o.key, "value %s" % p["v"], o)
        w = r["mi"] if (r.get("ok") and o.f != "get") else None
        rows.append((o.inv, o.comp, max(seen), w, o.xi, o))
    rows.sort(key=lambda x: x[0])
    by_comp = sorted(rows, key=lambda x: x[1])
    j = 0
    hi, hi_op = 0, None
    for inv, comp, shown, w, xi, o in rows:
        while j < len(by_comp) and by_comp[j][1] < inv:
            if by_comp[j][2] > hi:
                hi, hi_op = by_comp[j][2], by_comp[j][5]
            j += 1
        if w is not None and w <= hi:
            probs.append("index went back: %s wrote at index %d after %s had shown index %d" % (
                o.describe(t0), w, hi_op.describe(t0), hi))
        elif xi is not None and xi < hi:
            probs.append("index went back: %s has X-Etcd-Index %d after %s had shown index %d"
                         % (o.describe(t0), xi, hi_op.describe(t0), hi))
    return probs


# ---------------------------------------------------------------------------------------------

def check_history(ops, events, ttl_late_s=1.0, budget=2_000_000, out=sys.stdout, quiet=False):
    """Checks a whole history. Returns: (number of anomalies, summary dict)."""
    t_start = time.monotonic()
    t0 = min([o.inv for o in ops] + [e["t"] for e in events] + [0]) if (ops or events) else 0
    by_key, ttlwins, stats = prepare(ops, events, ttl_late_s)
    anomalies = 0
    nodes = expiries = effects = 0
    for key in sorted(by_key):
        res = check_key(key, by_key[key], ttlwins[key], budget, t0)
        nodes += res.nodes
        expiries += res.expiries
        effects += res.effects
        if not res.ok:
            anomalies += 1
            print("ANOMALY key %s: %s (%d operations, %d search nodes)" % (
                key, res.why, res.ops, res.nodes), file=out)
            for line in res.detail:
                print("  " + line, file=out)
    probs = check_indexes(ops, t0)
    for p in probs[:20]:
        print("ANOMALY " + p, file=out)
    if len(probs) > 20:
        print("... and %d more index anomalies" % (len(probs) - 20), file=out)
    stats.update(bad_keys=anomalies, bad_indexes=len(probs))
    anomalies += len(probs)
    stats.update(keys=len(by_key), anomalies=anomalies, nodes=nodes, expiries=expiries,
                 effects=effects,
                 seconds=time.monotonic() - t_start,
                 kills=sum(1 for e in events if e["ev"] == "kill"))
    return anomalies, stats


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("history")
    ap.add_argument("--ttl-late", type=float, default=1.0,
                    help="seconds a TTL'd key may outlive its latest deadline, on top of the "
                         "longest downtime of the server (default 1.0)")
    ap.add_argument("--budget", type=int, default=2_000_000,
                    help="search nodes per key before giving up (default 2000000)")
    a = ap.parse_args(argv[1:])
    try:
        ops, events = load(a.history)
    except (OSError, ValueError, KeyError) as e:
        print("lincheck: cannot read history '%s': %s" % (a.history, e), file=sys.stderr)
        return 2
    n, st = check_history(ops, events, a.ttl_late, a.budget)
    print("checked %d operations (%d without reply, %d refused) on %d keys: %d anomalies (%d keys "
          "not linearizable, %d index anomalies), %d search nodes, %.2f s; %d TTL expiries and "
          "%d unanswered writes with an effect placed" % (
              st["ops"], st["unknown"], st["refused"], st["keys"], n, st["bad_keys"],
              st["bad_indexes"], st["nodes"], st["seconds"], st["expiries"], st["effects"]))
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
