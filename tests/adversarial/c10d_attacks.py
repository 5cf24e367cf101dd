"""Hostile TCPStore clients against musterd's c10d listener (tests/adversarial/c10d.sh runs
each case against one musterd). Python standard library, raw sockets, torch 1.13's framing
(docs/c10d.md). Prints TAP lines.

  c10d_attacks.py CASE HTTP_URL C10D_PORT MUSTERD_PID
"""
import os
import re
import socket
import struct
import sys
import time
import urllib.request

FAILS = 0
SANITIZED = os.environ.get("MU_SANITIZED", "0") == "1"
SET, CAS, GET, ADD, CHECK, WAIT, NUMKEYS, WATCH, DELETE = range(9)


def out(ok, what, why=""):
    global FAILS
    if not ok:
        FAILS += 1
    print(("ok - " if ok else "not ok - ") + what + (f": {why}" if why and not ok else ""))


def conn(port, source=None, timeout=5.0):
    s = socket.socket()
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def string(b):
    return struct.pack("<Q", len(b)) + b


def closed_within(s, limit):
    """True when the server closes `s` within `limit` seconds (reading what it sends)."""
    end = time.time() + limit
    while time.time() < end:
        s.settimeout(max(0.05, end - time.time()))
        try:
            if s.recv(65536) == b"":
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


def metric(url, name):
    body = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def closes(url, reason):
    return metric(url, f'musterd_c10d_closed_total{{reason="{reason}"}}')


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def still_serves(port, what, source="127.0.0.9"):
    """A fresh client from another address can set and get."""
    try:
        s = conn(port, source=source)
        s.sendall(bytes([SET]) + string(b"/alive") + string(what.encode()))
        s.sendall(bytes([GET]) + string(b"/alive"))
        n = struct.unpack("<Q", s.recv(8))[0]
        got = s.recv(n) if n else b""
        s.close()
        out(got == what.encode(), f"{what}: another client is still served", repr(got))
    except OSError as e:
        out(False, f"{what}: another client is still served", str(e))


def case_huge(url, port, pid):
    rss0 = rss_kb(pid)
    tries = [
        ("a key length of 2^62", "key_too_long", bytes([SET]) + struct.pack("<Q", 1 << 62)),
        ("a value over --c10d-max-value-bytes", "value_too_large",
         bytes([SET]) + string(b"/k") + struct.pack("<Q", 65537)),
        ("a WAIT of 2^40 keys", "too_many_keys", bytes([WAIT]) + struct.pack("<Q", 1 << 40)),
        ("an unknown query id", "unknown_query", bytes([200])),
    ]
    for what, reason, frame in tries:
        before = closes(url, reason)
        s = conn(port)
        s.sendall(frame)
        ok = closed_within(s, 5)
        s.close()
        out(ok and closes(url, reason) == before + 1,
            f"{what} closes the connection at once, counted as {reason}",
            f"closed={ok} count {before}->{closes(url, reason)}")
    grew = rss_kb(pid) - rss0
    out(grew < 16 * 1024, "the announced lengths allocated nothing (RSS grew < 16 MiB)",
        f"{grew} KiB")
    still_serves(port, "huge lengths")


def case_unfinished(url, port, pid):
    before = closes(url, "frame_timeout")
    s = conn(port)
    s.sendall(bytes([SET]) + string(b"/slow") + struct.pack("<Q", 100) + b"x" * 10)
    t0 = time.time()
    ok = closed_within(s, 6)
    took = time.time() - t0
    out(ok and 0.5 <= took <= 6, "a frame left unfinished is closed at --body-timeout-ms (1 s)",
        f"closed={ok} after {took:.1f} s")
    out(closes(url, "frame_timeout") == before + 1, "counted as frame_timeout")
    # frames in progress hold bytes: one address's are bounded (--max-body-bytes-per-address)
    before = closes(url, "memory")
    socks, shut = [], 0
    for i in range(24):
        c = conn(port, source="127.0.0.3")
        c.sendall(bytes([SET]) + string(b"/hoard%d" % i) + struct.pack("<Q", 65000) +
                  b"y" * 60000)
        socks.append(c)
    time.sleep(0.2)  # well inside the 1 s frame deadline
    for c in socks:
        shut += closed_within(c, 0.01)
        c.close()
    out(shut >= 1 and closes(url, "memory") >= before + 1,
        "unfinished frames from one address past its byte share are closed (memory)",
        f"{shut} closed, count {before}->{closes(url, 'memory')}")
    still_serves(port, "unfinished frames")


def case_no_read(url, port, pid):
    """A client pipelines 2,000 GETs of an 8 KiB value (16 MB of answers) without reading: the
    server stops reading it once 64 KiB of answers wait, holds no more than that plus the
    kernel's buffers, and answers every GET, in order, once the client reads."""
    s = conn(port)
    value = bytes(range(256)) * 32
    s.sendall(bytes([SET]) + string(b"/big") + string(value))
    rss0 = rss_kb(pid)
    s.sendall((bytes([GET]) + string(b"/big")) * 2000)
    time.sleep(0.5)
    grew = rss_kb(pid) - rss0
    out(grew < 16 * 1024, "answers nobody reads are not piled up in memory (RSS grew < 16 MiB)",
        f"{grew} KiB")
    want, got, buf = 2000, 0, b""
    s.settimeout(10)
    try:
        while got < want:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 8 + len(value):
                n = struct.unpack("<Q", buf[:8])[0]
                if n != len(value) or buf[8:8 + n] != value:
                    raise ValueError("answer %d: length %d" % (got, n))
                buf = buf[8 + n:]
                got += 1
    except (OSError, ValueError) as e:
        out(False, "every GET is answered once the client reads", str(e))
        return
    out(got == want, "every GET is answered, in order, once the client reads", f"{got} of {want}")
    s.close()
    still_serves(port, "a client that did not read")


def case_wait_flood(url, port, pid):
    # one address opens more connections than its share, each parking a WAIT
    socks, refused = [], 0
    for i in range(80):
        try:
            c = conn(port, source="127.0.0.4")
            c.sendall(bytes([WAIT]) + struct.pack("<Q", 1) + string(b"/flood%d" % i))
            socks.append(c)
        except OSError:
            refused += 1
    time.sleep(0.5)
    alive = [c for c in socks if not closed_within(c, 0.05)]
    out(len(alive) == 50, "one address keeps at most --max-connections-per-address (50) waits",
        f"{len(alive)} connections still open")
    out(closes(url, "address_limit") >= 30, "the others are closed, counted as address_limit",
        str(closes(url, "address_limit")))
    waited = metric(url, "musterd_c10d_waited_keys")
    out(waited == 50, "50 keys are waited on", str(waited))
    # pipelined WAITs on one connection replace each other: still one key waited
    c = alive[0]
    c.sendall(b"".join(bytes([WAIT]) + struct.pack("<Q", 1) + string(b"/re%d" % i)
                       for i in range(2000)))
    time.sleep(0.5)
    waited = metric(url, "musterd_c10d_waited_keys")
    out(waited == 50, "2,000 WAITs pipelined on one connection hold one waited key", str(waited))
    # a set wakes exactly its waiter
    s = conn(port, source="127.0.0.5")
    s.sendall(bytes([SET]) + string(b"/re1999") + string(b"v"))
    c.settimeout(5)
    out(c.recv(1) == b"\x00", "the last WAIT is woken by a SET of its key (STOP_WAITING)")
    for c in alive:
        c.close()
    s.close()
    # waited keys per address: WAITs of 30,000 keys each from one address, 131,072 at most
    before = closes(url, "wait_bound")
    big = []
    for j in range(5):
        c = conn(port, source="127.0.0.6")
        keys = b"".join(string(b"/big%d_%d" % (j, i)) for i in range(30000))
        c.sendall(bytes([WAIT]) + struct.pack("<Q", 30000) + keys)
        big.append(c)
    # wait for the server to have read them all (waited keys and the close), not a fixed time
    end = time.time() + 30
    while time.time() < end and (closes(url, "wait_bound") == before
                                 or metric(url, "musterd_c10d_waited_keys") != 120000):
        time.sleep(0.1)
    shut = sum(closed_within(c, 0.1) for c in big)
    out(shut == 1 and closes(url, "wait_bound") == before + 1,
        "the WAIT that takes one address past 131,072 waited keys is closed (wait_bound)",
        f"{shut} closed")
    for c in big:
        c.close()
    t0 = time.time()
    while metric(url, "musterd_c10d_waited_keys") != 0 and time.time() - t0 < 5:
        time.sleep(0.05)
    out(metric(url, "musterd_c10d_waited_keys") == 0,
        "closed connections give their waited keys back")
    still_serves(port, "wait flood")


def case_budget(url, port, pid):
    """Server C: --max-buffer-bytes-per-client 1 MiB, --client-prefix-v4 24. Connections from
    five addresses of one /24 (one client, as HTTP counts it) each pipeline 40 GETs of a 200 KB
    value and do not read: past what the kernel takes, each holds about 257 KiB, less than the
    client's share, together more, so the ones that take the client past it are closed (budget)
    while a client of another /24 is served, big value too."""
    value = bytes(range(256)) * 800  # 204,800 bytes
    s = conn(port, source="127.0.1.9")
    s.sendall(bytes([SET]) + string(b"/budget") + string(value))
    s.sendall(bytes([GET]) + string(b"/budget"))
    got = b""
    while len(got) < 8 + len(value):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    out(got[8:] == value, "a 200 KB value is set and read back")
    before = closes(url, "budget")
    socks = []
    for i in range(5):
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.settimeout(5)
        c.bind(("127.0.0.%d" % (20 + i), 0))
        c.connect(("127.0.0.1", port))
        c.sendall((bytes([GET]) + string(b"/budget")) * 40)
        socks.append(c)
        time.sleep(0.2)
    end = time.time() + 5
    while closes(url, "budget") == before and time.time() < end:
        time.sleep(0.05)
    shut = closes(url, "budget") - before
    out(1 <= shut <= 4,
        "connections of one client (5 addresses of a /24) past --max-buffer-bytes-per-client: "
        "those over it are closed (budget), the first keep theirs",
        f"{shut} closed for budget")
    out(metric(url, "musterd_buffer_refused_total") >= shut,
        "musterd_budget_refused_total counts it with HTTP's refusals")
    s.sendall(bytes([GET]) + string(b"/budget"))
    got = b""
    while len(got) < 8 + len(value):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    out(got[8:] == value, "meanwhile a client of another /24 reads the 200 KB value")
    s.close()
    for c in socks:
        c.close()
    still_serves(port, "a client over its buffer share", source="127.0.2.9")


def case_wait_repeats(url, port, pid):
    """Issue 33/1 (HIGH): WAIT sized its array for the keys missing then wrote a slot for every
    key named, so SET b then WAIT [a, b, b, b] wrote past it (ASan at once, the release build
    died after 56-94 such frames; torch's store.wait(["a", "b"]) with b set does it). Principle:
    bounds checked before use: a WAIT holds a slot for each key missing, whatever it names."""
    s = conn(port, source="127.0.0.7")
    s.sendall(bytes([SET]) + string(b"/rep_b") + string(b"v"))
    frames = b"".join(bytes([WAIT]) + struct.pack("<Q", 4) + string(b"/rep_a%d" % i)
                      + string(b"/rep_b") * 3 for i in range(300))
    frames += bytes([WAIT]) + struct.pack("<Q", 5) + string(b"/rep_b") + string(b"/rep_a") \
        + string(b"/rep_b") + string(b"/rep_a") + string(b"/rep_b")
    s.sendall(frames)
    t0 = time.time()
    while metric(url, "musterd_c10d_waited_keys") != 2 and time.time() - t0 < 10:
        time.sleep(0.05)
    waited = metric(url, "musterd_c10d_waited_keys")
    out(waited == 2, "301 WAITs naming a key that is there (3 times) hold only the last one's "
        "missing keys (/rep_a twice)", str(waited))
    w = conn(port, source="127.0.0.8")
    w.sendall(bytes([SET]) + string(b"/rep_a") + string(b"v"))
    s.settimeout(10)
    try:
        got = s.recv(2)
    except OSError as e:
        got = repr(e).encode()
    out(got == b"\x00", "the last WAIT is woken by the SET of its missing key (STOP_WAITING once)",
        repr(got))
    s.sendall(bytes([WAIT]) + struct.pack("<Q", 4) + string(b"/rep_a") + string(b"/rep_b") * 3)
    try:
        got = s.recv(2)
    except OSError as e:
        got = repr(e).encode()
    out(got == b"\x00", "a WAIT of keys all there (repeated) answers STOP_WAITING at once",
        repr(got))
    s.close()
    w.close()
    try:
        os.kill(pid, 0)
        alive = True
    except OSError:
        alive = False
    out(alive, "musterd is still running")
    out(metric(url, "musterd_c10d_waited_keys") == 0, "no key is waited on after the wake")
    still_serves(port, "repeated keys in WAITs")


def case_value_readback(url, port, pid):
    """Issue 33 LOW: with --max-output-bytes as large as the largest value, a value of exactly
    that size was taken by SET and could never be read back (its GET's answer, 8 bytes more,
    closed the connection). Principle: no value is accepted that cannot be read back. Server D:
    --max-output-bytes 65536, the c10d value bound at its default (8 MiB)."""
    before = closes(url, "value_too_large")
    s = conn(port, source="127.0.0.11")
    s.sendall(bytes([SET]) + string(b"/rb_over") + string(b"x" * 65536))
    out(closed_within(s, 10), "a SET of 65,536 bytes (its GET would be 65,544) closes its "
        "connection")
    out(closes(url, "value_too_large") == before + 1, "counted as value_too_large",
        str(closes(url, "value_too_large") - before))
    s.close()
    s = conn(port, source="127.0.0.11")
    s.sendall(bytes([SET]) + string(b"/rb_max") + string(b"y" * 65528))
    s.sendall(bytes([GET]) + string(b"/rb_max"))
    got = b""
    s.settimeout(10)
    try:
        while len(got) < 8 + 65528:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    out(got[:8] == struct.pack("<Q", 65528) and got[8:] == b"y" * 65528,
        "a value of 65,528 bytes (the bound: its answer fills --max-output-bytes) reads back",
        f"{len(got)} bytes")
    s.close()
    still_serves(port, "a value too large to read back", source="127.0.0.12")


def v2_conn(port, source):
    """A TCPStore connection of torch 2.x's numbering, its VALIDATE sent."""
    s = conn(port, source=source, timeout=30)
    s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))
    return s


def recv_exact(s, n):
    got = b""
    while len(got) < n:
        chunk = s.recv(min(1 << 20, n - len(got)))
        if not chunk:
            break
        got += chunk
    return got


def case_queue_flood(url, port, pid):
    """Issue 33/3: each QUEUE_POP scanned the whole queue and a client's pipelined frames ran
    without yielding: 3,000 pops in one write against a 200k-item queue cost 12 s of CPU and
    /health waited 57 s. Principle: queue operations are O(1); a client's pipelined frames get a
    bounded share of a loop turn; /health and other clients stay answered while one floods."""
    V2_GET, V2_QPUSH, V2_QPOP = 3, 14, 15
    items = 40000 if SANITIZED else 200000
    pops = 3000
    s = v2_conn(port, "127.0.0.13")
    batch = 20000
    for start in range(0, items, batch):
        s.sendall(b"".join(bytes([V2_QPUSH]) + string(b"/q") + string(b"%08d" % i)
                           for i in range(start, min(items, start + batch))))
    # a GET after the pushes answers once they all ran
    s.sendall(bytes([V2_GET]) + string(b"/nokey"))
    got = recv_exact(s, 8)
    out(len(got) == 8, f"{items} items pushed (QUEUE_PUSH pipelined)", repr(got))
    before = metric(url, "musterd_c10d_yielded_total")
    s.sendall((bytes([V2_QPOP]) + string(b"/q")) * pops)
    t0 = time.time()
    try:
        urllib.request.urlopen(url + "/health", timeout=60).read()
        health = time.time() - t0
    except OSError as e:
        health = 999.0
        print(f"# /health: {e}")
    o = v2_conn(port, "127.0.0.14")
    t1 = time.time()
    o.sendall(bytes([V2_GET]) + string(b"/nokey"))
    other = len(recv_exact(o, 8)) == 8
    other_s = time.time() - t1
    o.close()
    # each answer: u64 items queued, then the value (u64 length + 8 bytes)
    want = b"".join(struct.pack("<Q", items - i) + string(b"%08d" % i) for i in range(pops))
    got = recv_exact(s, len(want))
    elapsed = time.time() - t0
    out(got == want, f"{pops} pops in one write answer the oldest items in order",
        f"{len(got)} of {len(want)} bytes")
    bound = 20.0 if SANITIZED else 5.0
    out(elapsed < bound, f"the {pops} pops of a {items}-item queue take under {bound:.0f} s "
        "(each is O(1))", f"{elapsed:.1f} s")
    out(health < bound, f"/health is answered while they run (under {bound:.0f} s)",
        f"{health:.1f} s")
    out(other and other_s < bound, "another TCPStore client is answered while they run",
        f"{other_s:.1f} s")
    out(metric(url, "musterd_c10d_yielded_total") > before,
        "the flooding connection yielded its turn (musterd_c10d_yielded_total)")
    s.close()
    still_serves(port, "a queue flood", source="127.0.0.15")


def case_silent(url, port, pid):
    """Issue 33/4 (MED): 3,050 idle sockets from 4 addresses against --max-connections 3000 left
    a torch client 0 of 5 answers; TCPStore connections had no idle deadline at all. Principle:
    connections nobody vouched for go first: a connection that has sent no whole frame has the
    deadline of a request's headers, and at --max-connections it is evicted before a new client
    is refused. Server E: --max-connections 60 --header-timeout-ms 3000."""
    silent = []
    for i in range(60):
        silent.append(conn(port, source="127.0.0.%d" % (30 + i % 4)))
    time.sleep(0.2)  # accepted (the server's count is what the client below meets)
    served = 0
    for i in range(5):
        try:
            s = conn(port, source="127.0.0.40")
            s.sendall(bytes([SET]) + string(b"/silent%d" % i) + string(b"v"))
            s.sendall(bytes([GET]) + string(b"/silent%d" % i))
            got = recv_exact(s, 9)
            served += got == struct.pack("<Q", 1) + b"v"
            s.close()
        except OSError as e:
            print(f"# client {i}: {e}")
    out(served == 5, "with --max-connections (60) held by silent connections, a client that "
        "speaks is served 5 of 5 times (a silent one is evicted)", f"{served} of 5")
    end = time.time() + 30
    left = len(silent)
    while left > 0 and time.time() < end:
        left = sum(not closed_within(c, 0.01) for c in silent)
        time.sleep(0.2)
    out(left == 0, "silent connections are closed after --header-timeout-ms (3 s)",
        f"{left} still open")
    for c in silent:
        c.close()
    still_serves(port, "silent connections", source="127.0.0.41")


def case_allow(url, port, pid):
    """Issue 33/5 (MED): the job's TCPStore port answered strangers, who read and rewrote
    torch.rendezvous.<run>. Principle: the port answers only the job: --c10d-allow lists the
    job's nodes, and a peer outside it is closed at accept, before a byte is read. Server E:
    --c10d-allow 127.0.0.0/26 (the last address in it is 127.0.0.63, the first outside .64)."""
    before = closes(url, "not_allowed")
    for source in ("127.0.0.64", "127.0.0.200"):
        try:
            s = conn(port, source=source)
            try:
                s.sendall(bytes([SET]) + string(b"/stranger") + string(b"x"))
            except OSError:
                pass
            out(closed_within(s, 5), f"a peer outside --c10d-allow ({source}) is closed")
            s.close()
        except OSError as e:
            out(True, f"a peer outside --c10d-allow ({source}) is closed", str(e))
    out(closes(url, "not_allowed") - before == 2, "... counted as not_allowed in /metrics",
        f"{closes(url, 'not_allowed') - before}")
    s = conn(port, source="127.0.0.9")
    s.sendall(bytes([CHECK]) + struct.pack("<Q", 1) + string(b"/stranger"))
    got = recv_exact(s, 1)
    s.close()
    out(got == b"\x01", "... and its SET never reached the store (CHECK says missing)",
        repr(got))
    still_serves(port, "the last address inside the prefix", source="127.0.0.63")


def wait_frame(tag, nkeys):
    """A WAIT of `nkeys` 8,000-byte keys of 0xff bytes (each written %FF in the store: 24 KB a
    path), about 2 MiB for 262 keys."""
    keys = b"".join(string(b"\xff" * 7990 + b"%s%06d" % (tag, i)) for i in range(nkeys))
    return bytes([WAIT]) + struct.pack("<Q", nkeys) + keys


def wait_settled(url, before, n, keys_each, limit=60):
    """Polls until each of `n` WAITs is either waiting (its keys counted) or closed (budget)."""
    end = time.time() + limit
    while time.time() < end:
        shut = closes(url, "budget") - before
        held = metric(url, "musterd_c10d_waited_keys") / keys_each
        if shut + held >= n:
            return int(shut), int(held)
        time.sleep(0.1)
    return int(closes(url, "budget") - before), int(metric(url, "musterd_c10d_waited_keys")
                                                    / keys_each)


def case_wait_budget(url, port, pid):
    """Issue 33/2 (HIGH): WAIT state was outside every memory budget: 11 connections sending 76
    MiB of WAIT frames took RSS from 8 MB to 1,095 MB with --max-buffer-bytes 64 MiB (a key's
    bytes outside [A-Za-z0-9._~-] are written %XX, and the hub keeps its own copy of each path).
    Principle: one memory budget for every byte a client makes musterd hold: what a WAIT holds
    counts with its client's buffers and HTTP's, and a WAIT past it is refused (its connection
    closed, reason budget, logged naming the limit), not grown. Server F: --max-buffer-bytes
    64 MiB (--max-buffer-bytes-per-client 32 MiB by default). Each WAIT here holds ~12.6 MiB."""
    nkeys = 262
    # one client: two such WAITs fit its 32 MiB share, the third does not
    before = closes(url, "budget")
    one = []
    for i in range(3):
        c = conn(port, source="127.0.5.1", timeout=30)
        c.sendall(wait_frame(b"one%d" % i, nkeys))
        one.append(c)
        wait_settled(url, before, i + 1, nkeys)
    shut, held = wait_settled(url, before, 3, nkeys)
    out(shut == 1 and held == 2, "one client's third ~12.6 MiB WAIT passes its share "
        "(--max-buffer-bytes-per-client 32 MiB): closed (budget), the first two wait",
        f"{shut} closed, {held} waiting")
    wb = metric(url, "musterd_c10d_wait_bytes")
    out(24 << 20 <= wb <= 32 << 20, "musterd_c10d_wait_bytes counts what the two hold",
        f"{wb / 1048576:.1f} MiB")
    for c in one:
        c.close()
    end = time.time() + 10
    while metric(url, "musterd_c10d_wait_bytes") != 0 and time.time() < end:
        time.sleep(0.05)
    out(metric(url, "musterd_c10d_wait_bytes") == 0, "closed connections give the bytes back")
    # many clients (one address each): together past --max-buffer-bytes
    n = 6 if SANITIZED else 20
    rss0 = rss_kb(pid)
    before = closes(url, "budget")
    many = []
    for i in range(n):
        c = conn(port, source="127.0.6.%d" % (1 + i), timeout=30)
        try:
            c.sendall(wait_frame(b"many%d" % i, nkeys))
        except OSError:
            pass
        many.append(c)
    shut, held = wait_settled(url, before, n, nkeys)
    grew = (rss_kb(pid) - rss0) // 1024
    wb = metric(url, "musterd_c10d_wait_bytes")
    out(wb <= 64 << 20, "the waits of all clients stay within --max-buffer-bytes (64 MiB)",
        f"{wb / 1048576:.1f} MiB")
    print(f"# {n} WAITs: {shut} closed, {held} waiting, RSS grew {grew} MiB")
    if not SANITIZED:
        out(shut >= n - 5 and held <= 5, f"of {n} clients' ~12.6 MiB WAITs, those past "
            "--max-buffer-bytes are closed (budget)", f"{shut} closed, {held} waiting")
        out(grew < 128, f"{n} WAITs of ~12.6 MiB each: RSS grew < 128 MiB", f"{grew} MiB")
    for c in many:
        c.close()
    still_serves(port, "WAITs past the memory budget")


def set_closed(port, source, key, value):
    """SETs key to value on a fresh connection, then GETs it. Returns: the value read, or None
    when the server closed the connection."""
    s = conn(port, source=source, timeout=30)
    try:
        s.sendall(bytes([SET]) + string(key) + string(value))
        s.sendall(bytes([GET]) + string(key))
        n = struct.unpack("<Q", recv_exact(s, 8))[0]
        return recv_exact(s, n)
    except (OSError, struct.error):
        return None
    finally:
        s.close()


def case_store_bytes(url, port, pid):
    """Issue 33 (MED): 48 unauthenticated 8 MiB SETs took RSS to 452 MB (the Kubernetes musterd
    task has a 512M limit): keys were bounded in number, their bytes not at all. Principle: one
    bound on what the store holds of TCPStore keys, values and queued items
    (--c10d-max-store-bytes); a write that adds bytes past it is refused (its connection
    closed, store_full, logged naming the bound), and the store still serves. Server G:
    --c10d-max-store-bytes 16 MiB. Each value here is 4 MiB."""
    big = b"x" * (4 << 20)
    rss0 = rss_kb(pid)
    before = closes(url, "store_full")
    n = 8 if SANITIZED else 24
    stored = sum(set_closed(port, "127.0.7.%d" % (1 + i), b"/big%d" % i, big) == big
                 for i in range(n))
    shut = closes(url, "store_full") - before
    grew = (rss_kb(pid) - rss0) // 1024
    print(f"# {n} SETs of 4 MiB: {stored} stored, {int(shut)} closed, RSS grew {grew} MiB")
    out(stored == 3 and shut == n - 3, f"of {n} SETs of 4 MiB, the 3 that fit "
        "--c10d-max-store-bytes (16 MiB) are stored; the others are closed (store_full)",
        f"{stored} stored, {shut} closed")
    if not SANITIZED:
        out(grew < 64, f"{n} SETs of 4 MiB: RSS grew < 64 MiB", f"{grew} MiB")
    # the store still serves at its bound: reads, a write that adds no bytes, a delete
    out(set_closed(port, "127.0.7.100", b"/big0", b"y" * (4 << 20)) == b"y" * (4 << 20),
        "at the bound, a SET that replaces a value with one as large is taken")
    s = conn(port, source="127.0.7.101")
    s.sendall(bytes([GET]) + string(b"/big1"))
    n1 = struct.unpack("<Q", recv_exact(s, 8))[0]
    out(n1 == len(big) and recv_exact(s, n1) == big, "... a GET reads a stored value")
    before = closes(url, "store_full")
    s.sendall(bytes([SET]) + string(b"/new") + string(big))
    out(closed_within(s, 5) and closes(url, "store_full") == before + 1,
        "... a SET of a new key past the bound is closed (store_full)")
    s.close()
    s = conn(port, source="127.0.7.102")
    s.sendall(bytes([DELETE]) + string(b"/big1"))
    out(recv_exact(s, 8) == struct.pack("<Q", 1), "... a DELETE is served")
    s.close()
    out(set_closed(port, "127.0.7.103", b"/after", big) == big,
        "... and what it gave back takes a new value")
    # queued items count too (torch 2.x: QUEUE_PUSH after VALIDATE)
    before = closes(url, "store_full")
    q = v2_conn(port, "127.0.7.104")
    q.sendall(bytes([14]) + string(b"/q") + string(big))
    out(closed_within(q, 5) and closes(url, "store_full") == before + 1,
        "... a QUEUE_PUSH of a 4 MiB item past the bound is closed (store_full)")
    q.close()
    still_serves(port, "the store at --c10d-max-store-bytes")



def case_many_keys(url, port, pid):
    """Issue 33/2 (frames): a query of many keys grew its connection's array of spans (16 bytes
    a key), kept for the connection's life and outside the budget: connections that each sent
    one CHECK of 131,072 keys kept 2 MiB apiece. Principle: every byte a client makes musterd
    hold counts in the memory budget; an array that big is freed after its query."""
    n = 10 if SANITIZED else 60
    keys = b"".join(string(b"k%d" % i) for i in range(131072))
    frame = bytes([CHECK]) + struct.pack("<Q", 131072) + keys
    rss0 = rss_kb(pid)
    socks, answered = [], 0
    for i in range(n):  # one at a time (together they would pass the budget while they parse)
        c = conn(port, source="127.0.8.%d" % (1 + i), timeout=30)
        try:
            c.sendall(frame)
            answered += recv_exact(c, 1) == b"\x01"  # NOT_READY
        except OSError:
            pass
        socks.append(c)
    grew = (rss_kb(pid) - rss0) // 1024
    print(f"# {n} connections after a CHECK of 131,072 keys each: RSS grew {grew} MiB")
    out(answered == n, f"{n} CHECKs of 131,072 keys are answered (NOT_READY)", f"{answered}")
    if not SANITIZED:
        out(grew < 48, f"the {n} connections, idle after them, hold no 2 MiB array each "
            "(RSS grew < 48 MiB)", f"{grew} MiB")
    for c in socks:
        c.close()
    still_serves(port, "queries of many keys")


def http_get(url, path, source, keep=False):
    """A GET of `path` from address `source` on a fresh HTTP connection: (the socket, what was
    read: up to the status line, or with `keep` the whole head, the connection left open)."""
    host, port = url.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))
    try:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n"
                  % (path.encode(), host.encode(), b"" if keep else b"Connection: close\r\n"))
        end, head = (b"\r\n\r\n" if keep else b"\r\n"), b""
        while end not in head:
            got = s.recv(4096)
            if not got:
                break
            head += got
    except OSError:
        s.close()
        raise
    return s, head


def http_status(url, path, source):
    """The status of a GET of `path` from address `source` (a fresh HTTP connection)."""
    s, head = http_get(url, path, source)
    s.close()
    return int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0


def case_share_apart(url, port, pid):
    """Issue 33/4 (a limit left by the first fix): TCPStore connections, which never
    authenticate, counted in the same --max-connections-per-address share as the client's HTTP
    connections: 50 idle TCPStore connections left an HTTP client of the same address 503.
    Principle: anonymous connections cannot take another's share: the TCPStore's connections
    have a share of their own (still bounded), and count in the same memory budget."""
    socks = []
    for i in range(50):  # the whole share (server B: 50), each one has spoken
        c = conn(port, source="127.0.0.12")
        c.sendall(bytes([SET]) + string(b"/share%d" % i) + string(b"v"))
        socks.append(c)
    time.sleep(0.3)
    alive = [c for c in socks if not closed_within(c, 0.05)]
    out(len(alive) == 50, "an address's 50 TCPStore connections (its share) stay open",
        f"{len(alive)} open")
    extra = conn(port, source="127.0.0.12")
    extra.sendall(bytes([SET]) + string(b"/share-extra") + string(b"v"))
    out(closed_within(extra, 30), "its 51st TCPStore connection is closed (the share still holds)")
    got = [http_status(url, "/health", "127.0.0.12") for _ in range(5)]
    out(got == [200] * 5, "with its TCPStore share full, the same address's HTTP client is "
        "answered (5 of 5 /health, not 503)", str(got))
    alive = [c for c in socks if not closed_within(c, 0.05)]
    out(len(alive) == 50, "and none of the TCPStore connections was taken for it",
        f"{len(alive)} open")
    for c in socks:
        c.close()
    extra.close()
    still_serves(port, "a full TCPStore share")


def server_side_timers(port, source):
    """The `ss -o` timer of musterd's side of each established connection on `port` whose peer
    is `source`."""
    import subprocess
    got = subprocess.run(["ss", "-tnoH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, timeout=10).stdout
    timers = []
    for line in got.splitlines():
        f = line.split()  # Recv-Q Send-Q Local:Port Peer:Port [timer:(...)]
        if len(f) >= 4 and f[3].startswith(source + ":"):
            m = re.search(r"timer:\((\w+)", line)
            timers.append(m.group(1) if m else "none")
    return timers


def case_keepalive(url, port, pid):
    """Issue 30/2 and 29/3 (one accept for both listeners): musterd's side of every connection it
    accepts carries TCP keepalive (and TCP_USER_TIMEOUT), so that a client host cut off without
    a word is dropped in seconds: the TCPStore listener's connections as well as HTTP's (the
    TCPStore's had none: a silent host's WAIT stayed open, its share held, until the eviction).
    Principle: one stream layer under both listeners; what one has, the other has."""
    source = "127.0.0.13"
    c = conn(port, source=source)
    c.sendall(bytes([SET]) + string(b"/keepalive") + string(b"v"))
    c.sendall(bytes([GET]) + string(b"/keepalive"))
    n = struct.unpack("<Q", recv_exact(c, 8))[0]
    recv_exact(c, n)
    h, head = http_get(url, "/health", source, keep=True)
    hport = url.rsplit(":", 1)[1]
    out(head.startswith(b"HTTP/1.1 200"), "an HTTP client's /health is answered, its "
        "connection kept open", repr(head[:40]))
    for what, p in (("TCPStore", port), ("HTTP", int(hport))):
        timers = server_side_timers(p, source)
        out(timers == ["keepalive"], f"musterd's side of an idle {what} connection has a "
            "keepalive timer (ss -o)", str(timers))
    c.close()
    h.close()
    still_serves(port, "keepalive")


if __name__ == "__main__":
    case, url, port, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    globals()["case_" + case](url, port, pid)
    sys.exit(1 if FAILS else 0)
