"""Crash-test client for musterd/etcd durability (tests/integration/durability_crash.sh,
bench/bench_crash_etcd.sh).

  write URL ACKDIR CLIENTS SECONDS   several threads write steadily (PUT of new keys, some with a
                                     TTL, some deletes) until the server dies or SECONDS pass;
                                     every ACKNOWLEDGED write is appended to ACKDIR/<client>.ack
                                     (kind, key, value, modifiedIndex, expiration) after its reply
  check URL ACKDIR                   reads the acks and checks that every acknowledged write is in
                                     the server with its index and value (and deletes stay
                                     deleted); prints one line per problem and a summary

Standard library only (runs under /usr/bin/python3).
"""
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse


def conn_for(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=10)


def writer(url, ackdir, cid, deadline, run):
    path = os.path.join(ackdir, "%s-%d.ack" % (run, cid))
    c = conn_for(url)
    prev = None
    n = 0
    with open(path, "a", buffering=1) as ack:
        while time.time() < deadline:
            n += 1
            try:
                if prev is not None and n % 7 == 0:
                    # an intent first: a delete whose reply never came may still have happened
                    ack.write(json.dumps({"k": "d?", "key": prev}) + "\n")
                    c.request("DELETE", "/v2/keys" + prev)
                    r = c.getresponse()
                    body = r.read()
                    if r.status != 200:
                        print("client %d: delete %s: HTTP %d %s" % (cid, prev, r.status, body),
                              file=sys.stderr)
                        return
                    ev = json.loads(body)
                    ack.write(json.dumps({"k": "D", "key": prev,
                                          "index": ev["node"]["modifiedIndex"]}) + "\n")
                    prev = None
                    continue
                key = "/crash/%s/c%d/k%06d" % (run, cid, n)
                value = "v%d-%d" % (n, random.randint(0, 1 << 30))
                form = {"value": value}
                if n % 5 == 0:
                    form["ttl"] = "3600"
                c.request("PUT", "/v2/keys" + key, body=urllib.parse.urlencode(form),
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
                r = c.getresponse()
                body = r.read()
                if r.status not in (200, 201):
                    print("client %d: put %s: HTTP %d %s" % (cid, key, r.status, body),
                          file=sys.stderr)
                    return
                node = json.loads(body)["node"]
                ack.write(json.dumps({"k": "P", "key": key, "value": value,
                                      "index": node["modifiedIndex"],
                                      "exp": node.get("expiration")}) + "\n")
                prev = key
            except (OSError, http.client.HTTPException, ValueError):
                return  # the server died: this write was never acknowledged


def cmd_write(url, ackdir, clients, seconds):
    run = "r%d" % int(time.time() * 1000)
    deadline = time.time() + seconds
    ts = [threading.Thread(target=writer, args=(url, ackdir, i, deadline, run))
          for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return 0


def cmd_check(url, ackdir):
    expect = {}  # key -> last acknowledged state
    intended = set()  # keys with a delete sent (acknowledged or not)
    maxidx = 0
    nacks = 0
    for name in sorted(os.listdir(ackdir)):
        if not name.endswith(".ack"):
            continue
        with open(os.path.join(ackdir, name)) as f:
            for line in f:
                if not line.endswith("\n"):
                    continue  # the client was killed mid-line: not a recorded ack
                a = json.loads(line)
                if a["k"] == "d?":
                    intended.add(a["key"])
                    continue
                nacks += 1
                maxidx = max(maxidx, a["index"])
                expect[a["key"]] = a
    c = conn_for(url)
    got = {}

    def walk(n):
        if n.get("dir"):
            for ch in n.get("nodes", []):
                walk(ch)
        else:
            got[n["key"]] = n

    # one GET per client directory: the whole tree would pass the server's output cap
    c.request("GET", "/v2/keys/crash")
    r = c.getresponse()
    body = r.read()
    index = int(r.getheader("X-Etcd-Index", "0"))
    if r.status not in (200, 404):
        print("check: GET /v2/keys/crash: HTTP %d" % r.status)
        return 1
    runs = [n["key"] for n in json.loads(body)["node"].get("nodes", [])] if r.status == 200 else []
    for run in runs:
        c.request("GET", "/v2/keys" + run)
        r = c.getresponse()
        clients = [n["key"] for n in json.loads(r.read())["node"].get("nodes", [])]
        for cdir in clients:
            c.request("GET", "/v2/keys" + cdir + "?recursive=true")
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                print("check: GET %s: HTTP %d" % (cdir, r.status))
                return 1
            walk(json.loads(body)["node"])
    bad = 0
    for key, a in sorted(expect.items()):
        n = got.get(key)
        if a["k"] == "D":
            if n is not None and n["modifiedIndex"] <= a["index"]:
                print("LOST delete of %s at index %d: key is back" % (key, a["index"]))
                bad += 1
            continue
        if n is None and key in intended:
            continue  # deleted by a delete that was sent but not acknowledged: allowed
        if n is None:
            print("LOST write of %s at index %d: key missing" % (key, a["index"]))
            bad += 1
        elif n.get("value") != a["value"] or n["modifiedIndex"] != a["index"]:
            print("WRONG %s: got value %r index %s, acknowledged %r index %d" %
                  (key, n.get("value"), n["modifiedIndex"], a["value"], a["index"]))
            bad += 1
        elif a.get("exp") is not None and n.get("expiration") != a["exp"]:
            print("WRONG %s: expiration %r, acknowledged %r" % (key, n.get("expiration"), a["exp"]))
            bad += 1
    if index < maxidx:
        print("WRONG global index %d < highest acknowledged index %d" % (index, maxidx))
        bad += 1
    print("checked %d acknowledged writes on %d keys (highest index %d, server index %d): "
          "%d problems" % (nacks, len(expect), maxidx, index, bad))
    return 1 if bad else 0


def main(argv):
    if len(argv) == 6 and argv[1] == "write":
        return cmd_write(argv[2], argv[3], int(argv[4]), float(argv[5]))
    if len(argv) == 4 and argv[1] == "check":
        return cmd_check(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
