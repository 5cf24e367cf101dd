"""Shared helpers for the etcd compatibility tests (etcd_conformance.py, etcd_bad_input.py,
etcd_python_etcd.py) and the /v1 test (rdzv_api.py).

Raw HTTP over http.client/socket, stdlib only, so the bytes on the wire are exactly the ones
the test means (no client-side path normalisation, no retries).
"""
import http.client
import json
import re
import socket
import sys
import time
import urllib.parse


class Resp:
    """One HTTP answer: status, headers (lower-case names; last value wins), body text."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def h(self, name):
        return self.headers.get(name.lower())

    def index(self):
        v = self.h("x-etcd-index")
        return int(v) if v is not None and v.isdigit() else None

    def __repr__(self):
        return "Resp(%s, %s)" % (self.status, self.body[:200])


def _headers(resp):
    out = {}
    for k, v in resp.getheaders():
        out[k.lower()] = v
    return out


class Client:
    """A keep-alive HTTP/1.1 client for one server; reconnects after an error."""

    def __init__(self, url, timeout=10.0):
        u = urllib.parse.urlsplit(url)
        self.url = url.rstrip("/")
        self.host = u.hostname
        self.port = u.port
        self.timeout = timeout
        self.conn = None

    def _connect(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self.conn

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(self, method, path, query=None, form=None, body=None, headers=None):
        """path is sent as is (no quoting); query/form are dicts or lists of pairs."""
        target = path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        hdrs = dict(headers or {})
        if form is not None:
            body = urllib.parse.urlencode(form)
            hdrs.setdefault("Content-Type", "application/x-www-form-urlencoded")
        if isinstance(body, str):
            body = body.encode()
        for attempt in (0, 1):
            conn = self._connect()
            try:
                conn.request(method, target, body=body, headers=hdrs)
                r = conn.getresponse()
                data = r.read()
                if r.getheader("connection", "").lower() == "close":
                    self.close()
                return Resp(r.status, _headers(r), data.decode("utf-8", "replace"))
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt == 1:
                    raise
            except Exception:
                self.close()
                raise
        raise RuntimeError("unreachable")


class Watch:
    """A long poll: sends the request on its own connection and reads the headers; result()
    waits for the body. Any failure is kept as a string in .error."""

    def __init__(self, url, path, query, head_timeout=3.0, body=None):
        u = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=head_timeout)
        self.resp = None
        self.head = None
        self.error = None
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        try:
            hdrs = {}
            if body is not None:
                hdrs["Content-Type"] = "application/x-www-form-urlencoded"
            self.conn.request("GET", target, body=body, headers=hdrs)
            self.resp = self.conn.getresponse()
            self.head = Resp(self.resp.status, _headers(self.resp), "")
        except socket.timeout:
            self.error = "no response headers within %.1fs" % head_timeout
        except Exception as e:  # noqa: BLE001 - any failure is an observation
            self.error = "error before headers: %s" % type(e).__name__

    def result(self, timeout):
        """Resp with the full body, or the string 'timeout' / an error string."""
        if self.error:
            self.close()
            return self.error
        try:
            self.conn.sock.settimeout(timeout)
            data = self.resp.read()
            return Resp(self.head.status, self.head.headers, data.decode("utf-8", "replace"))
        except socket.timeout:
            return "timeout"
        except Exception as e:  # noqa: BLE001
            return "error reading body: %s" % type(e).__name__
        finally:
            self.close()

    def close(self):
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass


RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")


def parse_rfc3339(s):
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$", s)
    if not m:
        return None
    t = time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) - time.timezone
    if m.group(2):
        t += float(m.group(2))
    return t


def until(cond, limit=10):
    """Polls cond every 50 ms until it holds or LIMIT seconds pass; returns whether it held."""
    deadline = time.time() + limit
    while not cond():
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_http(url, limit=10.0):
    end = time.time() + limit
    while time.time() < end:
        try:
            Client(url, timeout=1).request("GET", "/version")
            return True
        except Exception:  # noqa: BLE001
            time.sleep(0.05)
    return False


# TAP output shared by the drivers: check() prints one "ok"/"not ok" line per check, tap_done()
# the totals ("N passed, N failed") and returns the driver's exit status (1 on any failure).
TAP = {"pass": 0, "fail": 0}


def check(name, cond, detail=""):
    if cond:
        TAP["pass"] += 1
        print("ok - %s" % name)
    else:
        TAP["fail"] += 1
        print("not ok - %s %s" % (name, detail))
    sys.stdout.flush()


def tap_done():
    print("%d passed, %d failed" % (TAP["pass"], TAP["fail"]))
    return 1 if TAP["fail"] else 0
