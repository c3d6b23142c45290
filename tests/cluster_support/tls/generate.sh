#!/usr/bin/env bash
# Regenerates the test-only TLS material of tests/cluster_security.rs: a CA, a server
# certificate for 127.0.0.1 / localhost and a client certificate, all signed by the CA and valid
# for 100 years. Test fixtures, never secrets: the keys are committed on purpose.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=procsched test CA" \
  -keyout ca-key.pem -out ca.pem
for who in server client; do
  openssl req -newkey rsa:2048 -nodes -subj "/CN=procsched test $who" \
    -keyout "$who-key.pem" -out "$who.csr"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=%s\n' \
    "$([ "$who" = server ] && echo serverAuth || echo clientAuth)" > "$who.ext"
  openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
    -days "$days" -extfile "$who.ext" -out "$who-cert.pem"
  rm "$who.csr" "$who.ext"
done
rm -f ca.srl ca-key.pem
