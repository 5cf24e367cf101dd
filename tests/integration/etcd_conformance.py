#!/usr/bin/python3
"""etcd v2 conformance: the same request sequence against two servers, answers compared.

usage: etcd_conformance.py --a URL --b URL [--name-a musterd] [--name-b etcd] [-k PATTERN]

Each case runs against both servers at the same time (one thread each) under its own key
prefix, records every answer (status, selected headers, JSON body) normalised so that indexes
are relative to the store index at the start of the case, expiration/ttl are checked for
format and range, and unordered listings are sorted; then the two records are compared.
Prints one line per case and a final "N passed, N failed"; exits 1 if any case differs.
"""
import argparse
import json
import re
import sys
import threading
import time
import traceback

sys.path.insert(0, __import__("os").path.dirname(__file__))
from etcd_compat import RFC3339, Client, Resp, Watch, parse_rfc3339  # noqa: E402

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


class Ctx:
    """What a case sees: one server, its key prefix, the base index, and a record."""

    def __init__(self, url, name, prefix):
        self.url = url
        self.name = name
        self.p = prefix
        self.c = Client(url)
        self.record = []
        self.cluster_ids = set()
        self.keys_without_cluster_id = []
        self.base = 0
        r = self.c.request("GET", "/v2/keys/")
        self.base = r.index() or 0
        if r.h("x-etcd-cluster-id"):
            self.cluster_ids.add(r.h("x-etcd-cluster-id"))

    def idx(self, rel):
        """Absolute index for a relative one."""
        return self.base + rel

    def rel(self, v):
        if not isinstance(v, int) or isinstance(v, bool) or v == 0:
            return v
        return "i%+d" % (v - self.base)

    def now_index(self):
        r = self.c.request("GET", "/v2/keys/")
        return r.index()

    # --- requests -------------------------------------------------------------------------
    def req(self, method, path, query=None, form=None, body=None, headers=None, ordered=False,
            label=None, keep_body=False):
        try:
            r = self.c.request(method, path, query=query, form=form, body=body, headers=headers)
        except Exception as e:  # noqa: BLE001 - a failure is an observation
            self.record.append((label or "%s %s" % (method, path), "EXC %s" % type(e).__name__))
            return None
        self.add(label or "%s %s %s" % (method, path, _short(query or form, self)), r, ordered,
                 keep_body)
        return r

    def get(self, path, ordered=False, **q):
        return self.req("GET", "/v2/keys" + path, query=q or None, ordered=ordered)

    def put(self, path, **form):
        return self.req("PUT", "/v2/keys" + path, form=form)

    def putq(self, path, **q):
        return self.req("PUT", "/v2/keys" + path, query=q)

    def post(self, path, **form):
        return self.req("POST", "/v2/keys" + path, form=form)

    def delete(self, path, **q):
        return self.req("DELETE", "/v2/keys" + path, query=q or None)

    def watch(self, path, _body=None, **q):
        q["wait"] = "true"
        w = Watch(self.url, "/v2/keys" + path, q, body=_body)
        label = "WATCH %s %s" % (path, _short(q, self))
        if w.head is not None:
            self.add(label + " [headers]", w.head, False, False, headers_only=True)
        else:
            self.record.append((label + " [headers]", w.error))
        w.label = label
        return w

    def wresult(self, w, timeout=3.0):
        r = w.result(timeout)
        if isinstance(r, Resp):
            self.add(w.label + " [event]", r, False, False)
        else:
            self.record.append((w.label + " [event]", r))
        return r

    def note(self, label, value):
        self.record.append((label, value))

    # --- normalisation --------------------------------------------------------------------
    def add(self, label, r, ordered, keep_body, headers_only=False):
        obs = {"status": r.status}
        h = r.headers
        ct = h.get("content-type")
        obs["content-type"] = ct
        keys_api = "/v2/keys" in label
        if keys_api:
            for name in ("x-raft-index", "x-raft-term", "x-etcd-cluster-id"):
                obs[name] = "present" if name in h else "MISSING"
            cid = h.get("x-etcd-cluster-id")
            if cid:
                self.cluster_ids.add(cid)
            if "x-etcd-index" in h and h["x-etcd-index"].isdigit():
                obs["x-etcd-index"] = self.rel(int(h["x-etcd-index"]))
            else:
                obs["x-etcd-index"] = h.get("x-etcd-index", "MISSING")
        if "location" in h:
            obs["location"] = h["location"]
        if r.json is not None:
            obs["body"] = self.norm(r.json, ordered, time.time())
        elif not headers_only and (r.status < 300 or keep_body):
            # non-JSON bodies are compared for successes only (error pages' wording may vary)
            obs["body"] = r.body.replace(self.url, "<self-url>")
        self.record.append((label, obs))

    def norm(self, v, ordered, now, parent=None):
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if k in ("modifiedIndex", "createdIndex", "index") and isinstance(x, int):
                    out[k] = self.rel(x)
                elif k == "expiration" and isinstance(x, str):
                    out[k] = self.check_expiration(x, v.get("ttl"), now)
                elif k == "key" and isinstance(x, str):
                    out[k] = re.sub(r"/(\d{20})(?=/|$)",
                                    lambda m: "/<seq %s>" % self.rel(int(m.group(1))), x)
                elif k == "cause" and isinstance(x, str):
                    out[k] = self.norm_cause(x)
                elif k == "nodes" and isinstance(x, list):
                    nodes = [self.norm(n, ordered, now) for n in x]
                    if not ordered:
                        nodes.sort(key=lambda n: json.dumps(n, sort_keys=True))
                    out[k] = nodes
                else:
                    out[k] = self.norm(x, ordered, now)
            return out
        if isinstance(v, list):
            return [self.norm(x, ordered, now) for x in v]
        return v

    def norm_cause(self, s):
        if re.search(r"\[\d+ != \d+\]", s):
            return re.sub(r"\[(\d+) != (\d+)\]", lambda m: "[%s != %s]" % (
                self.rel(int(m.group(1))), self.rel(int(m.group(2)))), s)
        m = re.match(r"^(.*)\[(\d+)/(\d+)\]$", s)
        if m:
            req = int(m.group(3))
            return "%s[%s/%s]" % (m.group(1), self.rel(int(m.group(2))),
                                  req if req == 1 else self.rel(req))
        return s

    def check_expiration(self, s, ttl, now):
        if not RFC3339.match(s):
            return "BAD FORMAT %r" % s
        t = parse_rfc3339(s)
        if isinstance(ttl, int):
            left = t - now
            if not (ttl - 2.5 <= left <= ttl + 1.0):
                return "OUT OF RANGE (%.2fs left, ttl %d)" % (left, ttl)
        return "<rfc3339>"


def _short(d, ctx=None):
    if not d:
        return ""
    pairs = list(d.items() if isinstance(d, dict) else d)
    if ctx is not None:
        pairs = [(k, ctx.rel(int(v)) if k in ("waitIndex", "prevIndex") and v.isdigit()
                  and int(v) > 1 else v) for k, v in pairs]
    s = "&".join("%s=%s" % kv for kv in pairs)
    return s if len(s) < 60 else s[:57] + "..."


# ---- comparison -------------------------------------------------------------------------------
def diff(a, b, path=""):
    """Differences between two normalised observations, as strings."""
    out = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append("%s.%s: missing vs %s" % (path, k, _j(b[k])))
            elif k not in b:
                out.append("%s.%s: %s vs missing" % (path, k, _j(a[k])))
            elif k == "ttl" and isinstance(a[k], int) and isinstance(b[k], int):
                if abs(a[k] - b[k]) > 1:
                    out.append("%s.ttl: %s vs %s" % (path, a[k], b[k]))
            else:
                out += diff(a[k], b[k], path + "." + str(k))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return ["%s: %d items vs %d: %s vs %s" % (path, len(a), len(b), _j(a), _j(b))]
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, "%s[%d]" % (path, i))
        return out
    if a != b:
        return ["%s: %s vs %s" % (path or "value", _j(a), _j(b))]
    return []


def _j(v):
    s = json.dumps(v, sort_keys=True)
    return s if len(s) < 300 else s[:297] + "..."


# ---- cases ------------------------------------------------------------------------------------
# Each case gets a Ctx; c.p is its private prefix (e.g. "/index_model"). Cases must do the
# same thing whatever the answers are (no branching on the server's replies), so that the two
# records line up.


@case
def index_model(c):
    p = c.p
    c.put(p + "/k", value="a")                  # set 201
    c.put(p + "/k", value="b")                  # set 200, prevNode, createdIndex reset
    c.put(p + "/k", value="c", prevExist="true")  # update keeps createdIndex
    c.get(p + "/k")
    c.put(p + "/k", value="d", prevExist="false")  # 412 105, no index bump
    c.get(p + "/k")
    c.get(p + "/nope")                          # failed read: index unchanged
    c.put(p + "/k", value="e", prevValue="c")   # compareAndSwap keeps createdIndex
    c.get(p + "/k")
    c.put(p + "/k", value="f")                  # plain set resets createdIndex again
    c.get(p + "/k")


@case
def create_prev_exist_false(c):
    p = c.p
    c.put(p + "/k", value="1", prevExist="false")
    c.put(p + "/k", value="2", prevExist="false")
    c.put(p + "/d/k", value="x", prevExist="false")   # implicit parent + create
    c.put(p + "/d", value="x", prevExist="false")     # existing dir -> 105
    c.get(p + "/k")


@case
def update_prev_exist_true(c):
    p = c.p
    c.put(p + "/k", value="1", prevExist="true")     # 404 100
    c.put(p + "/k", value="1")
    c.put(p + "/k", value="2", prevExist="true")     # update
    c.put(p + "/k", prevExist="true")                # update to ""
    c.get(p + "/k")
    c.put(p + "/d/x", value="1")
    c.put(p + "/d", value="1", prevExist="true")     # update on a dir -> 102


@case
def cas_prev_value(c):
    p = c.p
    c.put(p + "/k", value="alpha")
    c.put(p + "/k", value="beta", prevValue="alpha")          # compareAndSwap 200
    c.put(p + "/k", value="gamma", prevValue="alpha")         # 412 101 [alpha != beta]
    c.put(p + "/missing", value="x", prevValue="alpha")       # 404 100
    c.put(p + "/k", value="delta", prevValue="beta", prevExist="true")
    c.put(p + "/k", value="eps", prevValue="delta", prevExist="false")  # 105?
    c.put(p + "/k", value="zeta", prevValue="")               # empty prevValue
    c.put(p + "/k", value="sp ace+plus", prevValue="zeta")
    c.put(p + "/k", value="x", prevValue="sp ace+plus")
    c.put(p + "/d/c", value="1")
    c.put(p + "/d", value="x", prevValue="1")                 # CAS on a dir
    c.get(p + "/k")


@case
def cas_prev_index(c):
    p = c.p
    r = c.put(p + "/k", value="a")
    mi = r.json["node"]["modifiedIndex"] if r is not None and r.json else 0
    c.put(p + "/k", value="b", prevIndex=str(mi))             # compareAndSwap
    c.put(p + "/k", value="c", prevIndex=str(mi))             # 412 101 [mi != mi+1]
    c.put(p + "/missing", value="c", prevIndex=str(mi))       # 404 100
    c.put(p + "/k", value="d", prevIndex="0")                 # 0 = no condition?
    c.put(p + "/k", value="e", prevIndex=str(c.idx(3)), prevValue="d")  # both match
    c.put(p + "/k", value="f", prevIndex=str(c.idx(4)), prevValue="zzz")  # value fails
    c.put(p + "/k", value="g", prevIndex=str(c.idx(1)), prevValue="e")   # index fails
    c.put(p + "/k", value="h", prevIndex=str(c.idx(1)), prevValue="nah")  # both fail
    c.put(p + "/k", value="i", prevIndex=str(c.idx(5)), prevExist="true")
    c.get(p + "/k")


@case
def dirs(c):
    p = c.p
    c.put(p + "/d", dir="true")                        # set 201
    c.put(p + "/d", dir="true")                        # 403 102 Not a file
    c.put(p + "/d2", dir="true", prevExist="false")    # create
    c.put(p + "/d2", dir="true", prevExist="false")    # 412 105
    c.put(p + "/d2", dir="true", prevExist="true", ttl="50")  # update dir ttl
    c.get(p + "/d2")
    c.put(p + "/d2", dir="true", prevExist="true")     # update: dir permanent again
    c.get(p + "/d2")
    c.put(p + "/d", value="x")                         # 403 102
    c.put(p + "/f", value="1")
    c.put(p + "/f/x", value="1")                       # 400 104 Not a directory
    c.put(p + "/f/x/y", value="1")                     # 400 104, cause = the file
    c.put(p + "/f", dir="true")                        # dir over a file
    c.get(p + "/f")
    c.put(p + "/d3", dir="true", value="v")            # dir with a value
    c.get(p + "/d3")
    c.req("PUT", "/v2/keys/", form={"value": "x"})      # 107 root read only
    c.req("PUT", "/v2/keys/", form={"dir": "true"})
    c.req("DELETE", "/v2/keys/", query={"dir": "true"})
    c.req("POST", "/v2/keys/", form={"value": "x"}, label="POST /v2/keys/ (root)")


@case
def implicit_parents(c):
    p = c.p
    c.put(p + "/a/b/c", value="1")
    c.get(p + "/a")
    c.get(p + "/a", recursive="true")
    c.get(p + "/a/b")
    c.put(p + "/a/b/c2/d", value="2", prevExist="false")
    c.get(p, recursive="true")


@case
def post_in_order(c):
    p = c.p
    c.post(p + "/q", value="one")
    c.post(p + "/q", value="two")
    c.post(p + "/q")                                  # no value
    c.post(p + "/q", value="four", ttl="100")
    c.get(p + "/q", ordered=True, sorted="true")
    c.get(p + "/q", ordered=True, sorted="true", recursive="true")
    c.put(p + "/f", value="1")
    c.post(p + "/f", value="x")                       # POST under a file
    c.post(p + "/new/dir", value="x")                 # implicit parents


@case
def bad_numbers(c):
    p = c.p
    c.put(p + "/k", value="1", ttl="abc")           # 202
    c.put(p + "/k", value="1", ttl="-1")
    c.put(p + "/k", value="1", ttl="1.5")
    c.put(p + "/k", value="1", ttl="")              # empty ttl = none
    c.get(p + "/k")
    c.put(p + "/k", value="1", prevIndex="abc")     # 203
    c.put(p + "/k", value="1", prevIndex="-3")
    c.put(p + "/k", value="1", prevExist="maybe")   # 209
    c.put(p + "/k", value="1", dir="maybe")
    c.put(p + "/k", value="1", refresh="maybe")
    c.get(p + "/k", wait="true", waitIndex="abc")   # 203
    c.get(p + "/k", recursive="maybe")
    c.get(p + "/k", sorted="maybe")
    c.get(p + "/k", wait="maybe")
    c.get(p + "/k", quorum="true")
    c.delete(p + "/k", prevIndex="abc")
    c.delete(p + "/k", recursive="maybe")
    c.put(p + "/k", value="1", ttl="99999999999999999999")


@case
def ttl_fields(c):
    p = c.p
    c.put(p + "/k", value="v", ttl="100")
    c.get(p + "/k")
    c.put(p + "/k", value="w", ttl="200")            # set: prevNode has ttl
    c.put(p + "/k", value="x")                        # no ttl -> permanent
    c.get(p + "/k")
    c.put(p + "/k2", value="v", ttl="100")
    c.put(p + "/k2", value="w", prevValue="v")        # CAS without ttl -> permanent
    c.get(p + "/k2")
    c.put(p + "/k3", value="v", ttl="100")
    c.put(p + "/k3", value="w", prevExist="true")     # update without ttl -> permanent
    c.get(p + "/k3")
    c.put(p + "/k4", ttl="100")                       # only ttl: value ""
    c.get(p + "/k4")
    c.put(p + "/d", dir="true", ttl="100")
    c.get(p + "/d")
    c.put(p + "/d/x", value="1", ttl="100")
    c.get(p + "/d", recursive="true")


@case
def ttl_zero(c):
    # etcd expires a ttl=0 key at its next 500 ms sync tick (a GET right after may still see
    # it: racy, not compared); the expire event must follow either way.
    p = c.p
    c.put(p + "/k", value="v", ttl="0")
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(2))), 3.0)
    c.get(p + "/k")


@case
def refresh(c):
    p = c.p
    c.put(p + "/k", value="v", ttl="100")
    w = c.watch(p + "/k")                             # blocks; refresh must not wake it
    c.put(p + "/k", refresh="true", prevExist="true", ttl="200")
    c.wresult(w, 1.0)                                 # timeout
    c.get(p + "/k")
    c.put(p + "/k", refresh="true", ttl="300")        # refresh without prevExist
    c.put(p + "/k", refresh="true", prevExist="true", ttl="50", value="new")  # value + refresh
    c.put(p + "/k", refresh="true", prevExist="true")  # refresh without ttl
    c.put(p + "/missing", refresh="true", prevExist="true", ttl="10")  # 404 100
    c.put(p + "/missing2", refresh="true", ttl="10")
    c.put(p + "/k", value="after")                    # a real change
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(2))))  # skips the refresh -> "after" set
    c.put(p + "/d", dir="true", ttl="100")
    c.put(p + "/d", dir="true", refresh="true", prevExist="true", ttl="200")
    c.get(p + "/d")
    c.put(p + "/k", refresh="true", prevExist="true", prevValue="after", ttl="20")
    c.put(p + "/k", refresh="true", prevExist="true", prevValue="zzz", ttl="20")


@case
def expire_key(c):
    p = c.p
    c.put(p + "/k", value="v", ttl="1")
    w1 = c.watch(p + "/k")                            # next event: expire
    w2 = c.watch(p, recursive="true")
    c.wresult(w1, 4.0)
    c.wresult(w2, 1.0)
    c.get(p + "/k")                                   # 404 100
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(1))))  # history: the set
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(2))))  # history: the expire
    c.get(p)                                          # dir is empty


@case
def expire_dir(c):
    p = c.p
    c.put(p + "/ed", dir="true", ttl="1")
    c.put(p + "/ed/child", value="x")
    c.put(p + "/ed/sub/deep", value="y")
    w1 = c.watch(p + "/ed/child")                     # key inside the expiring dir
    w2 = c.watch(p, recursive="true")
    w3 = c.watch(p + "/ed/sub/deep")
    w4 = c.watch(p + "/ed/sub", recursive="true")
    c.wresult(w1, 4.0)
    c.wresult(w2, 1.0)
    c.wresult(w3, 1.0)
    c.wresult(w4, 1.0)
    c.get(p + "/ed/child")                            # 404, cause first missing = /p/ed
    c.get(p + "/ed")
    c.get(p, recursive="true")


@case
def expire_then_permanent(c):
    p = c.p
    c.put(p + "/a", value="v", ttl="1")
    c.put(p + "/a", value="w", prevValue="v")         # drops the ttl
    c.put(p + "/b", value="v", ttl="1")
    c.put(p + "/b", refresh="true", prevExist="true", ttl="3")  # keeps it longer
    w = c.watch(p, recursive="true", waitIndex=str(c.idx(5)))
    c.wresult(w, 5.0)                                 # expire of /b (~3 s), not of /a
    c.get(p + "/a")                                   # still there, no ttl
    c.get(p + "/b")


@case
def listings(c):
    p = c.p
    c.put(p + "/a", value="1")
    c.put(p + "/b/c", value="2")
    c.put(p + "/b/d/e", value="3")
    c.put(p + "/_hidden", value="4")
    c.put(p + "/b/_h", value="5")
    c.put(p + "/_hdir/x", value="6")
    c.put(p + "/empty", dir="true")
    c.put(p + "/z", value="26")
    c.put(p + "/m", value="13")
    c.get(p)
    c.get(p + "/")
    c.get(p, recursive="true")
    c.get(p, ordered=True, recursive="true", sorted="true")
    c.get(p, ordered=True, sorted="true")
    c.get(p + "/_hidden")
    c.get(p + "/_hdir")
    c.get(p + "/_hdir/x")
    c.get(p + "/empty")
    c.get(p + "/empty", recursive="true")
    c.get(p + "/b/d/e/f")                             # through a file
    c.get(p + "/missing/child/deeper")                # cause = first missing component
    c.get(p + "/b/missing")
    c.get(p + "/a", quorum="true")
    c.get(p + "/a", recursive="true")
    c.get(p + "/a", sorted="true")


@case
def deletes(c):
    p = c.p
    c.put(p + "/k", value="v")
    c.delete(p + "/k")                                # delete
    c.delete(p + "/k")                                # 404 100
    c.put(p + "/k", value="v")
    c.delete(p + "/k", prevValue="zzz")               # 412 101
    c.delete(p + "/k", prevValue="v")                 # compareAndDelete
    r = c.put(p + "/k", value="v")
    mi = r.json["node"]["modifiedIndex"] if r is not None and r.json else 0
    c.delete(p + "/k", prevIndex=str(c.idx(1)))      # 412 101 [i+1 != mi]
    c.delete(p + "/k", prevIndex=str(mi))             # compareAndDelete
    c.delete(p + "/gone", prevValue="x")              # 404
    c.put(p + "/d/x", value="1")
    c.put(p + "/d/y/z", value="2")
    c.delete(p + "/d")                                # 403 102
    c.delete(p + "/d", dir="true")                    # 403 108
    c.put(p + "/e", dir="true")
    c.delete(p + "/e", dir="true")                    # delete empty dir
    w = c.watch(p + "/d/y/z")                         # key inside a dir deleted recursively
    c.delete(p + "/d", recursive="true")              # one delete event for the dir
    c.wresult(w)
    c.get(p + "/d")
    c.put(p + "/f", value="1")
    c.delete(p + "/f", dir="true")                    # dir=true on a file
    c.delete(p + "/f", recursive="true")              # recursive on a file
    c.put(p + "/g", dir="true")
    c.delete(p + "/g", prevValue="x")                 # CAD on a dir
    c.delete(p + "/g", recursive="true", dir="true")
    c.req("DELETE", "/v2/keys/", query={"recursive": "true"})   # root: 107?
    c.req("DELETE", "/v2/keys/", query={"recursive": "true", "dir": "true"})
    c.delete(p + "/_h")
    c.put(p + "/_h", value="1")
    c.delete(p + "/_h")


@case
def watch_history_and_actions(c):
    p = c.p
    c.put(p + "/k", value="1", prevExist="false")     # create      i+1
    c.put(p + "/k", value="2")                        # set         i+2
    c.put(p + "/k", value="3", prevExist="true")      # update      i+3
    c.put(p + "/k", value="4", prevValue="3")         # CAS         i+4
    c.delete(p + "/k", prevValue="4")                 # CAD         i+5
    c.put(p + "/k", value="5")                        # set         i+6
    c.delete(p + "/k")                                # delete      i+7
    c.put(p + "/o", value="x")                        # other key   i+8
    for i in range(1, 9):
        c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(i))), 1.0)  # i+8 for /k: blocks
    c.put(p + "/k", value="after")
    for i in range(1, 10):
        c.wresult(c.watch(p, recursive="true", waitIndex=str(c.idx(i))))
    c.wresult(c.watch(p, waitIndex=str(c.idx(1))), 1.0)    # non-recursive dir watch: none


@case
def watch_blocking(c):
    p = c.p
    c.put(p + "/d/x", value="1")
    w1 = c.watch(p + "/k")                             # missing key: blocks, no 404
    w2 = c.watch(p + "/d")                             # non-recursive dir: ignores children
    w3 = c.watch(p + "/d", recursive="true")
    w4 = c.watch(p, recursive="true", waitIndex=str(c.idx(50)))   # future index
    w5 = c.watch(p + "/k", waitIndex=str(c.idx(3)))
    c.put(p + "/d/y", value="2")                       # i+2
    c.put(p + "/k", value="v")                         # i+3
    c.wresult(w1)
    c.wresult(w2, 1.0)
    c.wresult(w3)
    c.wresult(w5)
    w4.close()
    c.note("future-index watch", "closed by client")
    w6 = c.watch(p + "/d")
    c.put(p + "/d", dir="true", prevExist="true", ttl="100")   # dir update wakes it
    c.wresult(w6)
    w7 = c.watch(p + "/d", recursive="true")
    c.delete(p + "/d", recursive="true")
    c.wresult(w7)
    w8 = c.watch(p + "/", recursive="true")            # trailing slash
    c.put(p + "/z", value="z")
    c.wresult(w8)
    c.get(p + "/k", wait="false")


@case
def watch_edges(c):
    p = c.p
    c.put(p + "/d/x", value="1")                       # i+1
    c.delete(p + "/d", recursive="true")               # i+2: dir delete reaches /d/x
    c.wresult(c.watch(p + "/d/x", waitIndex=str(c.idx(2))))   # from history
    c.put(p + "/_h", value="1")                        # i+3 hidden
    c.put(p + "/v", value="1")                         # i+4
    c.wresult(c.watch(p, recursive="true", waitIndex=str(c.idx(3))))  # skips the hidden key?
    c.wresult(c.watch(p + "/_h", waitIndex=str(c.idx(3))))            # direct watch sees it
    c.put(p + "/_hd/y", value="1")                     # i+5 inside a hidden dir
    c.put(p + "/v", value="2")                         # i+6
    c.wresult(c.watch(p, recursive="true", waitIndex=str(c.idx(5))))
    c.wresult(c.watch(p + "/_hd", recursive="true", waitIndex=str(c.idx(5))))
    c.wresult(c.watch("/", recursive="true", waitIndex=str(c.idx(6))))   # root watch
    c.wresult(c.watch(p + "/v", waitIndex="0"), 1.0)   # waitIndex=0: like none -> blocks
    w = c.watch(p + "/v", recursive="true")            # recursive on a file
    c.put(p + "/v", value="3")                         # i+7
    c.wresult(w)
    w1 = c.watch(p + "/m")
    w2 = c.watch(p + "/m")
    w3 = c.watch(p + "/m", recursive="true")
    c.put(p + "/m", value="all")                       # i+8: three watchers, one event
    c.wresult(w1)
    c.wresult(w2)
    c.wresult(w3)
    c.put(p + "/ed", dir="true", ttl="1")              # i+9
    c.put(p + "/ed/k", value="1")                      # i+10
    c.wresult(c.watch(p + "/ed/k", waitIndex=str(c.idx(11))), 4.0)   # the dir's expire
    c.wresult(c.watch(p + "/ed/k", waitIndex=str(c.idx(11))))       # same, from history


@case
def misc_writes(c):
    p = c.p
    c.put(p + "/f", value="1")
    c.put(p + "/f", dir="true", prevExist="false")     # 105 on a file
    c.put(p + "/e", value="")                          # explicit empty value
    c.get(p + "/e")
    c.get(p + "/f", recursive="true")                  # recursive GET on a file
    c.put(p + "/t/", dir="true")                       # dir with a trailing slash
    c.get(p + "/t/")
    c.put(p + "/t", value="x", prevExist="true")       # update a dir with a value -> 102
    c.put(p + "/n", value="x", prevIndex=str(c.idx(1)), prevExist="false")
    c.put(p + "/f", value="2", prevIndex=str(c.idx(1)), prevExist="false")
    c.req("HEAD", "/v2/keys" + p + "/t")
    c.req("HEAD", "/v2/keys" + p + "/nope")
    c.post(p + "/t", value="in-order", prevExist="false")
    c.post(p + "/t", dir="true")                       # in-order dir
    c.get(p + "/t", ordered=True, sorted="true", recursive="true")
    c.put(p + "/big", value="b" * 20000)
    c.get(p + "/big")
    c.put(p + "/ttlkids/a", value="1", ttl="100")
    c.put(p + "/ttlkids/b", value="2")
    c.get(p + "/ttlkids", recursive="true")            # children keep ttl/expiration
    c.get(p + "/ttlkids")
    c.put(p + "/dd/x", value="1")
    c.put(p + "/dd", value="v", prevIndex=str(c.idx(1)))        # CAS by index on a dir
    c.delete(p + "/dd", prevIndex=str(c.idx(1)))                # CAD by index on a dir
    c.put(p + "/dd", refresh="true", prevExist="true", ttl="30")  # refresh a dir, no dir=true
    c.put(p + "/dd", dir="false", value="x")                    # dir=false on a dir
    c.put(p + "/dd", dir="true", prevExist="true", value="x")   # dir update with a value
    c.put(p + "/ff", value="1")
    c.put(p + "/ff", dir="true", prevExist="true")              # dir update on a file
    c.delete(p + "/dd/x", dir="true")                           # dir=true on a file in a dir


@case
def watch_form_params(c):
    p = c.p
    c.put(p + "/k", value="1")
    # wait/waitIndex in the query but also as a GET form body: etcd reads r.Form (both).
    c.req("GET", "/v2/keys" + p + "/k", query={"wait": "true", "waitIndex": str(c.idx(1))})
    # Go's ParseForm reads no body for GET: etcd ignores waitIndex there and blocks.
    w = c.watch(p + "/k", _body="waitIndex=%d" % c.idx(1))
    c.wresult(w, 0.5)



@case
def watch_index_cleared(c):
    p = c.p
    c.put(p + "/k", value="0")
    for i in range(1, 1006):
        c.c.request("PUT", "/v2/keys" + p + "/k", form={"value": str(i)})
    c.note("1005 writes", "done")
    c.get(p + "/k")
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(1))))   # 400 401
    c.wresult(c.watch(p + "/k", waitIndex="1"))
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(5))))   # 400 401 (cleared)
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(7))))   # oldest kept is i+7 (1000 events)
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(6))))
    c.wresult(c.watch(p + "/k", waitIndex=str(c.idx(1006))))


@case
def params_query_and_form(c):
    p = c.p
    c.putq(p + "/k", value="fromquery")
    c.get(p + "/k")
    c.req("PUT", "/v2/keys" + p + "/k?prevExist=true", form={"value": "mixed"})
    c.get(p + "/k")
    c.putq(p + "/k2", value="x", ttl="100")
    c.putq(p + "/k", value="y", prevValue="mixed")
    c.req("PUT", "/v2/keys" + p + "/k3?value=q", form={"value": "f"})   # form wins?
    c.get(p + "/k3")
    c.req("PUT", "/v2/keys" + p + "/k4", body="value=a+b%26c%3Dd",
          headers={"Content-Type": "application/x-www-form-urlencoded"})
    c.get(p + "/k4")
    c.req("PUT", "/v2/keys" + p + "/k5", body="value=nocontenttype")
    c.get(p + "/k5")
    c.req("PUT", "/v2/keys" + p + "/k6", body='{"value":"json"}',
          headers={"Content-Type": "application/json"})
    c.get(p + "/k6")
    c.req("PUT", "/v2/keys" + p + "/k7", body="value=1&value=2",
          headers={"Content-Type": "application/x-www-form-urlencoded"})
    c.get(p + "/k7")
    c.req("DELETE", "/v2/keys" + p + "/k7", body="prevValue=zzz",
          headers={"Content-Type": "application/x-www-form-urlencoded"})
    c.put(p + "/k8", value="\u00e9t\u00e9 \"quoted\" \\ {json}\n\ttab")
    c.get(p + "/k8")


@case
def paths(c):
    p = c.p
    c.req("PUT", "/v2/keys" + p + "/a+b", form={"value": "plus"})      # literal +
    c.get(p + "/a+b")
    c.get(p + "/a%2Bb")
    c.get(p + "/a b".replace(" ", "%20"))
    c.req("PUT", "/v2/keys" + p + "/x%2Fy", form={"value": "slash"})   # %2F -> /
    c.get(p + "/x/y")
    c.get(p + "/x")
    c.req("PUT", "/v2/keys" + p + "/t/", form={"value": "trail"})      # trailing slash
    c.get(p + "/t")
    c.get(p + "/t/")
    c.req("PUT", "/v2/keys" + p + "/b64/QUJD+/=", form={"value": "b64"})
    c.get(p + "/b64", recursive="true")
    c.req("PUT", "/v2/keys" + p + "/sp%20ace", form={"value": "s"})
    c.get(p, recursive="true")
    c.req("GET", "/v2/keys" + p + "//a+b", label="GET // path")
    c.req("GET", "/v2/keys" + p + "/x/../a+b", label="GET .. path")
    c.req("GET", "/v2/keys" + p + "/./a+b", label="GET . path")
    c.req("PUT", "/v2/keys" + p + "//n", form={"value": "1"}, label="PUT // path")
    c.req("GET", "/v2/keys", label="GET /v2/keys (no slash)")
    c.req("GET", "/v2/keys" + p + "/%zz", label="GET bad escape")
    c.req("PUT", "/v2/keys" + p + "/u%C3%A9", form={"value": "utf8"})
    c.get(p + "/u%C3%A9")


@case
def other_endpoints(c):
    c.req("GET", "/v2/machines")
    r = c.c.request("GET", "/version")
    c.note("/version status %s ct %s" % (r.status, r.h("content-type")),
           {k: (r.json or {}).get(k) for k in ("etcdserver", "etcdcluster")})
    r = c.c.request("GET", "/v2/members")
    shape = "bad"
    if r.status == 200 and r.json and isinstance(r.json.get("members"), list):
        m = r.json["members"]
        ok = len(m) == 1 and set(m[0]) >= {"id", "name", "peerURLs", "clientURLs"} \
            and c.url in m[0]["clientURLs"]
        shape = "one member, fields id/name/peerURLs/clientURLs, own client URL" if ok \
            else "unexpected: %s" % r.body[:200]
    c.note("/v2/members status %s ct %s" % (r.status, r.h("content-type")), shape)
    r = c.c.request("GET", "/v2/members/leader")        # etcdctl member list asks for it
    ok = r.status == 200 and r.json is not None and \
        set(r.json) >= {"id", "name", "peerURLs", "clientURLs"} and c.url in r.json["clientURLs"]
    c.note("/v2/members/leader", "the one member" if ok else "bad: %s %s" % (r.status, r.body[:100]))
    r = c.c.request("GET", "/v2/stats/store")
    desc = "bad"
    if r.json is not None:
        desc = sorted((k, type(v).__name__) for k, v in r.json.items())
    c.note("/v2/stats/store status %s ct %s" % (r.status, r.h("content-type")), desc)
    r = c.c.request("GET", "/v2/stats/self")
    desc = "bad"
    if r.json is not None:
        desc = sorted(k for k in r.json.keys())
    c.note("/v2/stats/self status %s" % r.status, desc)
    c.req("PATCH", "/v2/keys" + c.p + "/k", label="PATCH /v2/keys/k (405)")
    c.req("HEAD", "/v2/keys" + c.p + "/k", label="HEAD missing key")
    c.put(c.p + "/k", value="v")
    r = c.c.request("HEAD", "/v2/keys" + c.p + "/k")
    c.note("HEAD existing key", (r.status, r.body, r.h("content-type"),
                                 c.rel(r.index() or 0)))


def informational(fn):
    """A case outside etcd-v2.md's scope: differences are printed but do not fail."""
    fn.informational = True
    return fn


@case
@informational
def routes(c):
    for path in ("/v2/keysx", "/v2/foo", "/v2", "/v2/", "/foo", "/v3/keys/a", "/v2/machinesx",
                 "/v2/stats/leader", "/health", "/v2/members/nope"):
        r = c.c.request("GET", path)
        c.note("GET %s" % path, (r.status, (r.h("content-type") or "").split(";")[0]))
    r = c.c.request("OPTIONS", "/v2/keys/x")
    c.note("OPTIONS /v2/keys/x", r.status)
    r = c.c.request("POST", "/v2/machines")
    c.note("POST /v2/machines", r.status)
    r = c.c.request("DELETE", "/version")
    c.note("DELETE /version", r.status)


# ---- runner -----------------------------------------------------------------------------------
def run_case(fn, url, name, out):
    try:
        ctx = Ctx(url, name, "/" + fn.__name__)
        fn(ctx)
        # Remove what the case left (unrecorded): a key with a TTL must not expire during a
        # later case, where the two servers, running at their own pace, would see the expire
        # event at different points of that case's sequence.
        ctx.c.request("DELETE", "/v2/keys" + ctx.p, query={"recursive": "true"})
        out[name] = ctx
    except Exception:  # noqa: BLE001
        out[name] = "crashed:\n" + traceback.format_exc()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="URL of the server under test")
    ap.add_argument("--b", required=True, help="URL of the reference etcd")
    ap.add_argument("--name-a", default="A")
    ap.add_argument("--name-b", default="B")
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("-v", action="store_true", help="print every observation")
    args = ap.parse_args()
    passed = failed = 0
    ids = {args.name_a: set(), args.name_b: set()}
    for fn in CASES:
        if args.k and args.k not in fn.__name__:
            continue
        out = {}
        ts = [threading.Thread(target=run_case, args=(fn, args.a, args.name_a, out)),
              threading.Thread(target=run_case, args=(fn, args.b, args.name_b, out))]
        t0 = time.time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        a, b = out[args.name_a], out[args.name_b]
        problems = []
        if isinstance(a, str) or isinstance(b, str):
            for n, x in ((args.name_a, a), (args.name_b, b)):
                if isinstance(x, str):
                    problems.append("%s %s" % (n, x))
        else:
            ids[args.name_a] |= a.cluster_ids
            ids[args.name_b] |= b.cluster_ids
            ra, rb = a.record, b.record
            for i in range(max(len(ra), len(rb))):
                la, oa = ra[i] if i < len(ra) else ("<none>", None)
                lb, ob = rb[i] if i < len(rb) else ("<none>", None)
                if args.v:
                    print("    #%d %s\n      %s: %s\n      %s: %s" % (
                        i + 1, la, args.name_a, _j(oa), args.name_b, _j(ob)))
                d = diff(oa, ob)
                # (labels carry index numbers that a tiny base index keeps absolute)
                if re.sub(r"i?[+-]?\d+", "N", la) != re.sub(r"i?[+-]?\d+", "N", lb):
                    d.insert(0, "request differs: %s / %s" % (la, lb))
                for line in d:
                    problems.append("#%d %s: %s" % (i + 1, la, line.replace(
                        " vs ", " (%s) vs (%s) " % (args.name_a, args.name_b), 1)))
        dt = time.time() - t0
        if problems and getattr(fn, "informational", False):
            passed += 1
            print("ok - %s (%.1fs; informational, %d differences)" % (
                fn.__name__, dt, len(problems)))
            for line in problems:
                print("    # " + line)
        elif problems:
            failed += 1
            print("not ok - %s (%.1fs)" % (fn.__name__, dt))
            for line in problems:
                print("    " + line)
        else:
            passed += 1
            print("ok - %s (%.1fs)" % (fn.__name__, dt))
        sys.stdout.flush()
    for n, s in ids.items():
        if len(s) != 1:
            failed += 1
            print("not ok - %s: X-Etcd-Cluster-Id must be one constant, saw %s" % (n, sorted(s)))
        else:
            passed += 1
            print("ok - %s: constant X-Etcd-Cluster-Id" % n)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
