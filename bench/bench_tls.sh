#!/usr/bin/env bash
# What a TLS connection costs before any credential (issue 24, finding 4: pre-auth memory per
# connection below 16 KiB), musterd side by side with etcd 3.4 serving TLS on loopback (the same
# P-256 certificate), alternating etcd, musterd, etcd, musterd... (and a BEFORE musterd binary
# when set). Each round, on a fresh server: 20 sessions first (what is made once), then CONNS
# connections from 50 loopback addresses that finish the handshake (TLS 1.3; MEM_TLS=1.2 for
# TLS 1.2) and send a partial header; KiB of RSS growth per connection, and the same for CONNS
# silent sockets. Prints one summary line "bench_tls ..." with the medians and musterd's share of
# etcd's figure.
#
#   bench/bench_tls.sh    env: MU_BUILD_DIR (./build), CONNS (2000), ROUNDS (3), MEM_TLS (1.3),
#                              BEFORE (an older musterd binary, optional)
# Not a test: it never fails on a figure.
. "$(dirname "$0")/lib.sh"
. "$MU_SOURCE_DIR/tests/integration/security_lib.bash" # sec_make_pki

CONNS=${CONNS:-2000}
ROUNDS=${ROUNDS:-3}
MEM_TLS=${MEM_TLS:-1.3}
bench_need_exe "$MUSTERD" musterd
[ -z "${BEFORE:-}" ] || bench_need_exe "$BEFORE" musterd
bench_need_tools etcd curl openssl
bench_need_fds $((2 * CONNS + 100)) "$((2 * CONNS)) TLS connections"
sec_make_pki "$T_DIR/pki" >/dev/null || die "openssl could not make the certificates"
CERT=$T_DIR/pki/server.pem
KEY=$T_DIR/pki/server.key

# etcd 3.4 with TLS on free loopback ports; sets SERVER_PORT and SERVER_PID.
start_etcd() {
  local peer _
  for _ in 1 2 3; do
    SERVER_PORT=$(t_free_port)
    peer=$(t_free_port)
    rm -rf "$T_DIR/etcd-data"
    t_spawn etcd etcd --name bench-tls --data-dir "$T_DIR/etcd-data" --enable-v2=true \
      --listen-client-urls "https://127.0.0.1:$SERVER_PORT" \
      --advertise-client-urls "https://127.0.0.1:$SERVER_PORT" \
      --cert-file "$CERT" --key-file "$KEY" \
      --listen-peer-urls "http://127.0.0.1:$peer" \
      --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "bench-tls=http://127.0.0.1:$peer" --initial-cluster-state new
    SERVER_PID=$T_LAST_PID
    local deadline=$((SECONDS + 20))
    until curl -sk -o /dev/null --max-time 1 "https://127.0.0.1:$SERVER_PORT/version"; do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      [ "$SECONDS" -lt "$deadline" ] || break
      t_tick
    done
    curl -sk -o /dev/null --max-time 1 "https://127.0.0.1:$SERVER_PORT/version" && return 0
    kill "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  done
  die "etcd did not start: $(tail -3 "$T_DIR/etcd.log")"
}

start_musterd() { # binary
  MUSTERD=$1 t_start_musterd --tls-cert "$CERT" --tls-key "$KEY" --header-timeout-ms 120000 \
    --max-connections $((2 * CONNS + 200)) --max-connections-per-address $((2 * CONNS + 200)) ||
    die "$1 did not start: $(tail -3 "$T_DIR/musterd.log")"
  SERVER_PORT=$MUSTERD_PORT
  SERVER_PID=$MUSTERD_PID
}

# measure: prints "PARTIAL SILENT", KiB of RSS per connection of the server started last.
measure() {
  "$PY" - "$SERVER_PORT" "$SERVER_PID" "$CONNS" "$MEM_TLS" <<'PY' || die "the memory run failed"
import socket, ssl, sys, time
port, pid, n, ver = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
if ver == "1.2":
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
def rss():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
def sock(i):
    return socket.create_connection(("127.0.0.1", port),
                                    source_address=("127.0.7.%d" % (10 + i % 50), 0))
keep = []
for i in range(20):
    s = ctx.wrap_socket(sock(i))
    s.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(4096)
    keep.append(s)
time.sleep(0.5)
figures = []
for mode in ("partial", "silent"):
    base = rss()
    for i in range(n):
        s = sock(i)
        if mode == "partial":
            s = ctx.wrap_socket(s)
            s.sendall(b"GET /v2/keys/x HTTP/1.1\r\nHost: x\r\n")
        keep.append(s)
    time.sleep(1.0)
    figures.append("%.2f" % ((rss() - base) / float(n)))
print(" ".join(figures))
PY
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
}

declare -A PARTIAL SILENT
names=(etcd musterd)
[ -n "${BEFORE:-}" ] && names+=(before)
for round in $(seq "$ROUNDS"); do
  for name in "${names[@]}"; do
    case $name in
      etcd) start_etcd ;;
      musterd) start_musterd "$MUSTERD" ;;
      before) start_musterd "$BEFORE" ;;
    esac
    read -r p s <<<"$(measure)"
    stop_server
    echo "# round $round $name: $p KiB per TLS $MEM_TLS connection (partial header), $s silent"
    PARTIAL[$name]+="$p "
    SILENT[$name]+="$s "
  done
done

median() {
  tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g |
    awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
pe=$(median "${PARTIAL[etcd]}")
pm=$(median "${PARTIAL[musterd]}")
se=$(median "${SILENT[etcd]}")
sm=$(median "${SILENT[musterd]}")
line="bench_tls ${ROUNDS}x$CONNS, KiB of RSS per TLS $MEM_TLS connection, median:"
line+=" handshake done + partial header musterd=$pm etcd=$pe ($(ratio "$pm" "$pe")x);"
line+=" silent musterd=$sm etcd=$se ($(ratio "$sm" "$se")x)"
if [ -n "${BEFORE:-}" ]; then
  line+="; before: partial=$(median "${PARTIAL[before]}") silent=$(median "${SILENT[before]}")"
fi
echo "$line"
