#!/usr/bin/python3
"""Malformed and hostile HTTP against a server; after every case a fresh client must still get
a correct answer.

usage: etcd_bad_input.py URL [--etcd] [--pid PID] [--max-connections N] [--max-body N]
                             [--idle-ms N] [--many N]
--etcd: the server is a real etcd (Go net/http): skip the checks of musterd's own limits
(413 body limit, 414, 503 past --max-connections, idle timeout) whose answers differ there.
--pid: the server's PID, to watch its memory (VmRSS) under a client that never reads.
Prints ok/not ok per check and "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import os
import select
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from etcd_compat import Client, check, tap_done  # noqa: E402

ARGS = None
HOST = PORT = None
PROBE_VALUE = "probe-value-\u00e9"


def connect(timeout=5.0):
    s = socket.create_connection((HOST, PORT), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def exchange(data, timeout=3.0, shut=False):
    """Sends raw bytes, reads one complete response (or until the server closes, or `timeout`
    passes). Returns (bytes, closed_by_server)."""
    s = connect()
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        if shut:
            s.shutdown(socket.SHUT_WR)
        return read_response(s, timeout)
    finally:
        s.close()


def _complete(buf):
    """True when `buf` holds one whole HTTP response."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = buf[:end].lower()
    body = buf[end + 4:]
    st = status_of(buf)
    if st is not None and (100 <= st < 200 or st in (204, 304)):
        return True
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            try:
                return len(body) >= int(line.split(b":", 1)[1])
            except ValueError:
                return False
        if line.startswith(b"transfer-encoding:") and b"chunked" in line:
            return body.endswith(b"0\r\n\r\n")
    return False


def _recv(s):
    """One recv on s: (data, closed_by_server); data is None when the timeout passed."""
    try:
        d = s.recv(65536)
    except socket.timeout:
        return None, False
    except ConnectionResetError:
        return b"", True
    return d, not d


def read_response(s, timeout, wait_close=0.2):
    """Reads until one complete response, the server's close, or `timeout` without data.
    Returns (bytes, closed_by_server); closed_by_server also checks for a close that follows
    the response within 0.2 s."""
    out = b""
    s.settimeout(timeout)
    while True:
        d, closed = _recv(s)
        if d is None or closed:
            return out, closed
        out += d
        if _complete(out):
            if not wait_close:
                return out, False
            s.settimeout(wait_close)
            d, closed = _recv(s)
            return out + (d or b""), closed


def read_all(s, timeout):
    """Reads until the server closes or `timeout` passes without data.
    Returns (bytes, closed_by_server)."""
    out = b""
    s.settimeout(timeout)
    while True:
        d, closed = _recv(s)
        if d is None or closed:
            return out, closed
        out += d


def status_of(data):
    """Status code of the first response in `data`, or None."""
    line = data.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/1.") and parts[1].isdigit():
        return int(parts[1])
    return None


def probe(name):
    """A fresh client must get the probe key with the right value and X-Etcd-Index."""
    try:
        r = Client(ARGS.url, timeout=5).request("GET", "/v2/keys/bad/probe")
        ok = r.status == 200 and r.json and r.json["node"]["value"] == PROBE_VALUE \
            and r.index() is not None
        check("%s: server still answers a fresh client" % name, ok, repr(r))
    except Exception as e:  # noqa: BLE001
        check("%s: server still answers a fresh client" % name, False, repr(e))


def expect_status(name, data, want, timeout=3.0, shut=False, closed=None, etcd_also=()):
    """etcd_also: answers also accepted from a real etcd (its quirks, where musterd is
    meant to be stricter); None there = no answer at all."""
    got, was_closed = exchange(data, timeout, shut)
    st = status_of(got)
    wants = tuple(want) if isinstance(want, (tuple, list)) else (want,)
    if ARGS.etcd:
        wants += tuple(etcd_also)
        closed = None
    check("%s: HTTP %s" % (name, "/".join(map(str, wants))), st in wants,
          "got %r" % got[:200])
    if closed is not None:
        check("%s: connection %s" % (name, "closed" if closed else "kept"), was_closed == closed)
    probe(name)
    return got


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# ---- cases ------------------------------------------------------------------------------------
def case_garbage():
    # etcd's cmux drops what it cannot sniff as HTTP: no answer there.
    nothing = (None,)
    expect_status("garbage bytes", b"\x00\xff\xfe garbage \x01\x02\r\n\r\n", 400, closed=True,
                  timeout=1.5, etcd_also=nothing)
    expect_status("garbage request line", b"HELLO WORLD\r\n\r\n", (400, 405, 501),
                  timeout=1.5, etcd_also=nothing)
    expect_status("binary noise", bytes(range(256)) * 8, 400, timeout=1.5, etcd_also=nothing)
    expect_status("bad HTTP version", b"GET /v2/keys/bad/probe HTTP/9.9\r\nHost: x\r\n\r\n",
                  (400, 505), timeout=1.5, etcd_also=nothing)
    expect_status("space in target",
                  b"GET /v2/keys/a b HTTP/1.1\r\nHost: x\r\n\r\n", 400, timeout=1.5,
                  etcd_also=nothing)
    expect_status("header without colon",
                  b"GET /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400)
    got, _ = exchange(b"\r\n\r\n\r\n", 1.0, shut=True)
    check("blank lines then EOF: no crash", True)
    probe("blank lines")


def case_truncated():
    s = connect()
    s.sendall(b"PUT /v2/keys/bad/trunc HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
              b"value=only-ten")
    time.sleep(0.2)
    s.close()
    time.sleep(0.2)
    r = Client(ARGS.url).request("GET", "/v2/keys/bad/trunc")
    check("truncated body then close: key not written", r.status == 404, repr(r))
    probe("truncated body")
    # Headers cut in the middle, then close.
    s = connect()
    s.sendall(b"PUT /v2/keys/bad/trunc2 HTTP/1.1\r\nHost: x\r\nContent-Le")
    s.close()
    probe("truncated headers")
    # Truncated body with a half-closed socket: server must not wait forever or crash.
    got, closed = exchange(b"PUT /v2/keys/bad/trunc3 HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: 50\r\n\r\nvalue=x", 2.0, shut=True)
    # (etcd parses the form from what arrived and writes the key: musterd must not)
    check("truncated body + EOF: closed without a success", ARGS.etcd or closed and
          status_of(got) in (None, 400), repr(got[:100]))
    probe("truncated body + EOF")


def case_body_limit():
    big = b"value=" + b"x" * (ARGS.max_body + 1024)
    req = (b"PUT /v2/keys/bad/big HTTP/1.1\r\nHost: x\r\n"
           b"Content-Type: application/x-www-form-urlencoded\r\n"
           b"Content-Length: %d\r\n\r\n" % len(big)) + big
    expect_status("body over --max-body-bytes", req, 413)
    r = Client(ARGS.url).request("GET", "/v2/keys/bad/big")
    check("body over the limit: key not written", r.status == 404, repr(r))
    # A chunked body over the limit.
    chunk = b"x" * 4096
    n = ARGS.max_body // 4096 + 2
    body = b"%x\r\nvalue=\r\n" % 6 + (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * n + b"0\r\n\r\n"
    expect_status("chunked body over the limit",
                  b"PUT /v2/keys/bad/big2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Type: application/x-www-form-urlencoded\r\n\r\n" + body, 413)
    # Just under the limit works.
    ok_body = b"value=" + b"y" * (ARGS.max_body - 1024)
    got, _ = exchange(b"PUT /v2/keys/bad/fits HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/x-www-form-urlencoded\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(ok_body) + ok_body, 2.0)
    check("body under the limit: stored", status_of(got) == 201, repr(got[:120]))


def case_header_limits():
    huge = b"X-Big: " + b"h" * (64 * 1024) + b"\r\n"
    expect_status("64 KiB header", b"GET /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\n" + huge +
                  b"\r\n", 431)
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(5000))
    expect_status("5000 headers", b"GET /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\n" + many +
                  b"\r\n", 431)
    url = b"/v2/keys/bad/" + b"u" * (64 * 1024)
    expect_status("64 KiB URL", b"GET " + url + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414)
    q = b"/v2/keys/bad/probe?x=" + b"q" * (64 * 1024)
    expect_status("64 KiB query", b"GET " + q + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414)


def case_numbers_and_paths():
    got = expect_status("ttl=abc", b"PUT /v2/keys/bad/n?value=1&ttl=abc HTTP/1.1\r\n"
                        b"Host: x\r\nContent-Length: 0\r\n\r\n", 400)
    check("ttl=abc: errorCode 202", b'"errorCode":202' in got, repr(got[-120:]))
    got = expect_status("prevIndex=1e3", b"PUT /v2/keys/bad/n?value=1&prevIndex=1e3 HTTP/1.1"
                        b"\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 400)
    check("prevIndex=1e3: errorCode 203", b'"errorCode":203' in got, repr(got[-120:]))
    got = expect_status("waitIndex huge", b"GET /v2/keys/bad/n?wait=true&waitIndex="
                        b"999999999999999999999999 HTTP/1.1\r\nHost: x\r\n\r\n", 400)
    check("waitIndex huge: errorCode 203", b'"errorCode":203' in got, repr(got[-120:]))
    got = expect_status("ttl huge", b"PUT /v2/keys/bad/n?value=1&ttl=99999999999999999999999"
                        b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 400)
    check("ttl huge: errorCode 202", b'"errorCode":202' in got, repr(got[-120:]))
    for path in (b"/v2/keys/bad/../probe", b"/v2/keys//bad/probe", b"/v2/keys/bad/./probe",
                 b"/v2//keys/bad/probe", b"/v2/keys/bad/probe/.."):
        got = expect_status("path %s" % path.decode(), b"GET " + path +
                            b" HTTP/1.1\r\nHost: x\r\n\r\n", 301)
        loc = [ln for ln in got.split(b"\r\n") if ln.lower().startswith(b"location:")]
        check("path %s: Location is clean" % path.decode(), len(loc) == 1 and
              b"//" not in loc[0][9:] and b".." not in loc[0], repr(loc))
    expect_status("bad %-escape", b"GET /v2/keys/bad/%zz HTTP/1.1\r\nHost: x\r\n\r\n",
                  (400, 404))
    expect_status("NUL via %00", b"GET /v2/keys/bad/a%00b HTTP/1.1\r\nHost: x\r\n\r\n",
                  (400, 404))


def case_methods():
    expect_status("PATCH on keys", b"PATCH /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 0\r\n\r\n", 405)
    expect_status("unknown method", b"FROBNICATE /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\n"
                  b"\r\n", (400, 405, 501))
    expect_status("lower-case method", b"get /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\n\r\n",
                  (400, 405, 501))
    expect_status("CONNECT", b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n",
                  (400, 404, 405, 501))


def case_chunked():
    head = b"PUT /v2/keys/bad/ch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" \
           b"Content-Type: application/x-www-form-urlencoded\r\n\r\n"
    expect_status("chunk size not hex", head + b"zz\r\nvalue=1\r\n0\r\n\r\n", 400)
    expect_status("chunk longer than its size", head + b"3\r\nvalue=1\r\n0\r\n\r\n", 400)
    expect_status("chunk size overflow", head + b"ffffffffffffffffffff\r\nx\r\n", (400, 413))
    # (Go lets chunked win over Content-Length; llhttp rejects the pair: request smuggling)
    expect_status("both Content-Length and chunked", etcd_also=(201,), data=
                  b"PUT /v2/keys/bad/ch2 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", want=400)
    expect_status("two different Content-Lengths",
                  b"PUT /v2/keys/bad/ch HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                  b"Content-Length: 7\r\n\r\nvalue=1", 400)
    expect_status("negative Content-Length",
                  b"PUT /v2/keys/bad/ch HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400)
    r = Client(ARGS.url).request("GET", "/v2/keys/bad/ch")
    check("no bad chunked request wrote the key", r.status == 404, repr(r))
    # A correct chunked body, split in odd places, works.
    got, _ = exchange(head + b"3\r\nval\r\n5\r\nue=ok\r\n0\r\n\r\n", 2.0)
    check("valid chunked body: 201", status_of(got) == 201, repr(got[:100]))
    r = Client(ARGS.url).request("GET", "/v2/keys/bad/ch")
    check("valid chunked body: stored", r.status == 200 and r.json["node"]["value"] == "ok",
          repr(r))


def exchange_all(data, timeout):
    s = connect()
    try:
        s.sendall(data)
        return read_all(s, timeout)
    finally:
        s.close()


def case_keepalive_pipelining():
    reqs = b"".join(b"GET /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\n\r\n" for _ in range(50))
    reqs += b"GET /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    got, closed = exchange_all(reqs, 5.0)
    check("51 pipelined requests: 51 answers", got.count(b"HTTP/1.1 200") == 51,
          "got %d" % got.count(b"HTTP/1.1 200"))
    check("Connection: close honoured", closed)
    # pipelined write then read of the same key answer in order
    pipe = (b"PUT /v2/keys/bad/pipe HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\n"
            b"value=1"
            b"GET /v2/keys/bad/pipe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got, _ = exchange_all(pipe, 3.0)
    check("pipelined PUT then GET: in order", status_of(got) == 201 and got.count(b"HTTP/1.1")
          == 2 and got.rfind(b'"value":"1"') > got.find(b"HTTP/1.1 200"), repr(got[:300]))


def case_expect_and_http10():
    s = connect()
    try:
        s.sendall(b"PUT /v2/keys/bad/expect HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n"
                  b"Content-Type: application/x-www-form-urlencoded\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        s.settimeout(2.0)
        try:
            interim = s.recv(100)
        except socket.timeout:
            interim = b""
        check("Expect: 100-continue gets 100 Continue", interim.startswith(
            b"HTTP/1.1 100 Continue\r\n\r\n"), repr(interim))
        s.sendall(b"value=1")
        got, _ = read_response(s, 2.0, wait_close=0)
        check("... then the request is answered", status_of(interim[25:] + got) == 201,
              repr(got[:80]))
    finally:
        s.close()
    got, closed = exchange(b"GET /v2/keys/bad/probe HTTP/1.0\r\n\r\n", 2.0)
    check("HTTP/1.0 request: answered and closed", status_of(got) == 200 and closed,
          repr(got[:80]))
    probe("Expect / HTTP/1.0")


def case_many_idle(n):
    """n idle connections; the server must keep answering others; with --max-connections,
    connections past the limit are served and the oldest idle ones (nobody authenticated
    them) are closed for them (issue 33/4: they go first)."""
    socks = []
    t0 = time.time()
    failed = 0
    for _ in range(n):
        try:
            s = socket.socket()
            s.settimeout(5)
            s.connect((HOST, PORT))
            socks.append(s)
        except OSError:
            failed += 1
    check("%d idle connections opened (%.1fs)" % (n, time.time() - t0), failed == 0,
          "%d failed" % failed)
    try:
        t1 = time.time()
        probe("%d idle connections" % n)
        check("answer time with %d idle connections < 5 s" % n, time.time() - t1 < 5.0)
        if ARGS.max_connections and not ARGS.etcd:
            # Open past the limit: each newcomer is served, the oldest idle ones closed for them.
            extra = []
            for _ in range(ARGS.max_connections - len(socks) + 5):
                try:
                    extra.append(connect(timeout=5))
                except OSError:
                    pass
            served = 0
            for s in extra:
                try:
                    s.sendall(b"GET /v2/keys/bad/probe HTTP/1.0\r\n\r\n")
                    served += status_of(s.recv(4096)) == 200
                except OSError:
                    pass
                s.close()
            check("past --max-connections: the newcomers are served", served == len(extra),
                  "%d of %d" % (served, len(extra)))
            poller = select.poll()  # (select() stops at fd 1024; there are 10,000 here)
            for s in socks[:5]:
                poller.register(s, select.POLLIN)
            deadline = time.time() + 10
            while time.time() < deadline and len(poller.poll(100)) < 5:
                pass
            gone = 0
            for s in socks[:5]:
                s.setblocking(False)
                try:
                    gone += s.recv(4096) == b""
                except OSError:
                    gone += 1
            check("past --max-connections: the oldest idle connections were closed for them",
                  gone == 5, "%d of the 5 oldest closed" % gone)
    finally:
        for s in socks:
            s.close()
    time.sleep(0.5)
    probe("after closing %d idle connections" % n)


def case_never_reads(pid):
    """A client pipelines GETs of a 48 KiB value and never reads: memory must stay bounded
    and other clients must be served meanwhile."""
    val = "v" * (48 * 1024)
    r = Client(ARGS.url).request("PUT", "/v2/keys/bad/bigval", form={"value": val})
    check("48 KiB value stored", r.status in (200, 201), repr(r))
    before = rss_kb(pid) if pid else None
    s = connect()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    req = b"GET /v2/keys/bad/bigval HTTP/1.1\r\nHost: x\r\n\r\n"
    batch = req * 256
    sent = 0
    deadline = time.time() + 4.0
    served_meanwhile = []
    peak = before or 0
    while time.time() < deadline and sent < 20000 * len(req):
        try:
            _, w, _ = select.select([], [s], [], 0.05)
            if w:
                sent += s.send(batch)
        except (BlockingIOError, InterruptedError):
            pass
        except (BrokenPipeError, ConnectionResetError):
            break
        if pid:
            peak = max(peak, rss_kb(pid) or 0)
        if len(served_meanwhile) < 5:
            t = time.time()
            try:
                rr = Client(ARGS.url, timeout=3).request("GET", "/v2/keys/bad/probe")
                served_meanwhile.append((rr.status, time.time() - t))
            except Exception as e:  # noqa: BLE001
                served_meanwhile.append((repr(e), time.time() - t))
    time.sleep(1.0)
    if pid:
        peak = max(peak, rss_kb(pid) or 0)
    check("others served while a client never reads", all(
        st == 200 and dt < 5.0 for st, dt in served_meanwhile) and served_meanwhile,
        repr(served_meanwhile))
    print("# never-reading client: sent %d requests (%d KiB of answers asked for)" % (
        sent // len(req), sent // len(req) * 48))
    if pid and before:
        grow = (peak - before) / 1024.0
        limit = 96.0 if os.environ.get("MU_SANITIZED") == "1" else 48.0
        check("memory bounded under a never-reading client (grew %.1f MiB, limit %.0f)" % (
            grow, limit), grow < limit)
    s.close()
    probe("never-reading client")


def case_slowloris():
    """Clients dribble header bytes; others are still served promptly."""
    socks = []
    for i in range(50):
        s = connect()
        s.sendall(b"GET /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    t_end = time.time() + 2.0
    i = 0
    while time.time() < t_end:
        for s in socks:
            try:
                s.sendall(b"X-Slow-%d: a\r\n" % i)
            except OSError:
                pass
        i += 1
        if i <= 3:
            t = time.time()
            probe("slowloris round %d" % i)
            check("slowloris round %d: answer < 3 s" % i, time.time() - t < 3.0)
        time.sleep(0.3)
    # Finish the requests: each must still get its answer.
    done = 0
    for s in socks:
        try:
            s.sendall(b"\r\n")
            data, _ = read_response(s, 2.0, wait_close=0)
            done += status_of(data) == 200
        except OSError:
            pass
        s.close()
    check("slowloris clients answered once their headers completed", done == len(socks),
          "%d of %d" % (done, len(socks)))


def watchers():
    r = Client(ARGS.url).request("GET", "/v2/stats/store")
    return r.json.get("watchers") if r.json else None


def case_watch_gone():
    """Clients that drop their watch: the server must free every watcher."""
    base = watchers()
    socks = []
    for i in range(200):
        s = connect()
        s.sendall(b"GET /v2/keys/bad/gone%d?wait=true&recursive=true HTTP/1.1\r\nHost: x\r\n\r\n"
                  % (i % 7))
        socks.append(s)
    deadline = time.time() + 5
    while time.time() < deadline and watchers() != base + 200:
        time.sleep(0.05)
    check("200 watches registered", watchers() == base + 200, "watchers=%s" % watchers())
    for s in socks[:100]:
        s.close()
    for s in socks[100:]:   # reset instead of FIN
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    deadline = time.time() + 5
    while time.time() < deadline and watchers() != base:
        time.sleep(0.05)
    check("watchers freed after the clients went away", watchers() == base,
          "watchers=%s, want %s" % (watchers(), base))
    probe("dropped watches")


def case_idle_timeout():
    s = connect()
    t0 = time.time()
    data, closed = read_all(s, ARGS.idle_ms / 1000.0 + 3.0)
    check("idle connection closed after --idle-timeout-ms (%.1fs)" % (time.time() - t0),
          closed and time.time() - t0 >= ARGS.idle_ms / 1000.0 * 0.8, repr(data[:80]))
    s.close()
    s = connect()
    s.sendall(b"GET /v2/keys/bad/probe HTTP/1.1\r\nHost: x\r\n")
    t0 = time.time()
    data, closed = read_all(s, ARGS.idle_ms / 1000.0 + 3.0)
    check("half-sent request closed after the idle timeout (%.1fs)" % (time.time() - t0),
          closed, repr(data[:80]))
    s.close()
    # A long poll is exempt from the idle timeout.
    s = connect()
    s.sendall(b"GET /v2/keys/bad/idlewatch?wait=true HTTP/1.1\r\nHost: x\r\n\r\n")
    data, closed = read_all(s, ARGS.idle_ms / 1000.0 + 1.0)
    check("a watch outlives the idle timeout", not closed, repr(data[:80]))
    Client(ARGS.url).request("PUT", "/v2/keys/bad/idlewatch", form={"value": "w"})
    more, _ = read_all(s, 2.0)
    check("the watch then gets its event", b'"value":"w"' in data + more, repr(more[:200]))
    s.close()
    probe("idle timeout")


def main():
    global ARGS, HOST, PORT
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--etcd", action="store_true")
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--max-connections", type=int, default=0)
    ap.add_argument("--max-body", type=int, default=1 << 20)
    ap.add_argument("--idle-ms", type=int, default=0)
    ap.add_argument("--many", type=int, default=10000)
    ap.add_argument("-k", default="")
    ARGS = ap.parse_args()
    u = urllib.parse.urlsplit(ARGS.url)
    HOST, PORT = u.hostname, u.port
    r = Client(ARGS.url).request("PUT", "/v2/keys/bad/probe", form={"value": PROBE_VALUE})
    check("probe key written", r.status in (200, 201), repr(r))
    cases = [("garbage", case_garbage), ("truncated", case_truncated),
             ("numbers_paths", case_numbers_and_paths), ("methods", case_methods),
             ("chunked", case_chunked), ("pipelining", case_keepalive_pipelining),
             ("expect_http10", case_expect_and_http10),
             ("slowloris", case_slowloris), ("watch_gone", case_watch_gone),
             ("never_reads", lambda: case_never_reads(ARGS.pid)),
             ("many_idle", lambda: case_many_idle(ARGS.many))]
    if not ARGS.etcd:
        cases[2:2] = [("body_limit", case_body_limit), ("header_limits", case_header_limits)]
        if ARGS.idle_ms:
            cases.append(("idle_timeout", case_idle_timeout))
    for name, fn in cases:
        if ARGS.k and ARGS.k not in name:
            continue
        print("# case %s" % name)
        t0 = time.time()
        try:
            fn()
            print("# case %s: %.1fs" % (name, time.time() - t0))
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            check("case %s ran to the end" % name, False, repr(e))
    return tap_done()


if __name__ == "__main__":
    sys.exit(main())
