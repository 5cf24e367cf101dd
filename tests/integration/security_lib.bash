# Helpers for the security_*.sh tests (not a test itself: it does not end in .sh).
# Source after tests/lib.sh.
#
#   sec_make_pki DIR      a CA, a server certificate for 127.0.0.1/localhost and a client
#                         certificate, made with the openssl CLI: DIR/{ca,server,client}.{pem,key}
#                         plus DIR/rogue-ca.pem and DIR/rogue-client.{pem,key} (another CA's)
#   sec_start_musterd ARGS...   musterd on a free port with ARGS (TLS or not); sets MUSTERD_PORT,
#                         MUSTERD_PID, MUSTERD_URL (https:// when --tls-cert is among ARGS);
#                         waits for the start line in the log
#   sec_stop_musterd      SIGTERM, exit status 0 within 10 s, no sanitizer report

command -v openssl >/dev/null || { echo "# skip: needs the openssl CLI (apt-get install openssl)"; exit 77; }

sec_make_pki() {
  local d=$1
  mkdir -p "$d"
  (
    set -e
    cd "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=muster test CA" -keyout ca.key -out ca.pem \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=rogue CA" -keyout rogue-ca.key -out rogue-ca.pem \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
      -keyout server.key -out server.csr
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile server.ext -out server.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=trainer" \
      -keyout client.key -out client.csr
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile client.ext -out client.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=stranger" \
      -keyout rogue-client.key -out rogue-client.csr
    openssl x509 -req -in rogue-client.csr -CA rogue-ca.pem -CAkey rogue-ca.key \
      -CAcreateserial -days 2 -extfile client.ext -out rogue-client.pem
  ) >"$d/openssl.log" 2>&1 || { echo "not ok - openssl could not make the test certificates:"; tail -5 "$d/openssl.log"; return 1; }
}

sec_start_musterd() {
  local scheme=http a i
  for a in "$@"; do [ "$a" = --tls-cert ] && scheme=https; done
  MUSTERD_PORT=$(t_free_port)
  t_spawn musterd "$MUSTERD" --listen "127.0.0.1:$MUSTERD_PORT" "$@"
  MUSTERD_PID=$T_LAST_PID
  MUSTERD_URL="$scheme://127.0.0.1:$MUSTERD_PORT"
  for i in $(seq 200); do
    grep -q "musterd listening on" "$T_DIR/musterd.log" 2>/dev/null && return 0
    kill -0 "$MUSTERD_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "# musterd did not start:"; sed 's/^/#   /' "$T_DIR/musterd.log" | tail -10
  return 1
}

sec_stop_musterd() {
  local log="$T_DIR/musterd.log" rc i
  kill -0 "$MUSTERD_PID" 2>/dev/null || { t_fail "musterd died during the test"; tail -20 "$log"; return; }
  kill -TERM "$MUSTERD_PID"
  for i in $(seq 100); do kill -0 "$MUSTERD_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$MUSTERD_PID" 2>/dev/null; then t_fail "musterd did not exit within 10 s of SIGTERM"; return; fi
  wait "$MUSTERD_PID"; rc=$?
  t_expect_eq "musterd exits 0 on SIGTERM" "$rc" 0
  if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$log"; then
    t_fail "sanitizer report in the musterd log:"; grep -E -A15 'Sanitizer|runtime error:' "$log" | head -40
  fi
}
