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

t_need_built "$MUSTERD"
t_need_cmd openssl openssl

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

sec_start_musterd() { t_start_musterd "$@"; }
sec_stop_musterd() { t_stop_musterd_checked; }
