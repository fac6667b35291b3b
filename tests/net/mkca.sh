#!/usr/bin/env bash
# Make the test CA and one server certificate signed by it, for the local
# upstream servers of the network tests (tests/net/upstreams.py).
#
#   tests/net/mkca.sh DIR [EXTRA_SAN...]
#
# Writes DIR/ca.crt, DIR/ca.key, DIR/server.crt, DIR/server.key. The server
# certificate names every host the tests use (up.test, api.up.test,
# *.up.test, other.test, ...), 127.0.0.1, 127.0.0.2 and ::1, plus each
# EXTRA_SAN (an IP address or a DNS name, e.g. the host's own address).
# Idempotent: an existing CA is kept; the server certificate is made again
# only when its names changed or it no longer verifies against the CA.
set -euo pipefail

dir=${1:?usage: mkca.sh DIR [EXTRA_SAN...]}
shift
mkdir -p "$dir"
cd "$dir"

names=(up.test api.up.test '*.up.test' other.test denied.test reg.test
  rebind.test flip.test dual.test mixed.test localhost)
ips=(127.0.0.1 127.0.0.2 ::1)
for extra in "$@"; do
  [ -n "$extra" ] || continue
  if [[ "$extra" =~ ^[0-9.]+$ || "$extra" == *:* ]]; then
    ips+=("$extra")
  else
    names+=("$extra")
  fi
done
san=
for n in "${names[@]}"; do san="${san:+$san,}DNS:$n"; done
for i in "${ips[@]}"; do san="${san:+$san,}IP:$i"; done

umask 077
if [ ! -s ca.key ] || [ ! -s ca.crt ]; then
  rm -f ca.key ca.crt server.crt server.key san.txt
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -keyout ca.key -out ca.crt -subj "/CN=warren test CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null
fi

if [ -s server.crt ] && [ -s server.key ] && [ "$(cat san.txt 2>/dev/null)" = "$san" ] &&
  openssl verify -CAfile ca.crt server.crt >/dev/null 2>&1; then
  chmod 644 ca.crt server.crt
  exit 0
fi

ext=$(mktemp)
trap 'rm -f "$ext" server.csr' EXIT
cat >"$ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid,issuer
subjectAltName=$san
EXT
openssl req -newkey rsa:2048 -nodes -sha256 -keyout server.key \
  -out server.csr -subj "/CN=up.test" 2>/dev/null
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
  -days 3650 -sha256 -extfile "$ext" -out server.crt 2>/dev/null
printf '%s' "$san" >san.txt
# The certificates are public; the keys stay 0600 (the daemon never needs
# them: only upstreams.py reads server.key).
chmod 644 ca.crt server.crt
