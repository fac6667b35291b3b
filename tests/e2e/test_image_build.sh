#!/bin/sh
# End-to-end: build a base image through a running warrend and check what
# the API and the state root say about it afterwards.
#
# Usage: tests/e2e/test_image_build.sh [NAME]     (default NAME: base)
#   WARREN_SOCKET   the daemon's unix socket (default /run/warren/warrend.sock)
#   WARREN_ROOT     its state root, to check the files (default /var/lib/warren)
#   WARREN_MUST_WORK=1  fail instead of skipping when no daemon answers
#
# Needs curl, root (the socket is root's) and a daemon whose host has apt
# sources for its own release. A first build takes minutes (about 90 s on
# a quiet 2-core machine); later runs reuse the image. An image other than
# the default one is deleted again at the end.
set -eu

NAME=${1:-base}
SOCK=${WARREN_SOCKET:-/run/warren/warrend.sock}
ROOT=${WARREN_ROOT:-/var/lib/warren}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() {
  if [ "${WARREN_MUST_WORK:-0}" = 1 ]; then fail "$*"; fi
  echo "SKIP: $*"
  exit 77
}
# api METHOD PATH [BODY]: the body goes to $TMP/body, the status to stdout.
api() {
  curl -sS --unix-socket "$SOCK" -o "$TMP/body" -w '%{http_code}' \
    -X "$1" ${3:+-d "$3"} "http://warren$2"
}

command -v curl >/dev/null || skip "curl is not installed"
[ -S "$SOCK" ] || skip "no daemon socket at $SOCK"
api GET /v1/images >/dev/null || skip "no daemon answers on $SOCK"

echo "== build $NAME"
start=$(date +%s)
curl -sS -N --unix-socket "$SOCK" -X POST -d "{\"name\":\"$NAME\"}" \
  http://warren/v1/images | tee "$TMP/events" |
  sed -u -n 's/^{"type":"progress","message":"\(.*\)"}$/  \1/p'
echo "   took $(($(date +%s) - start)) s"
last=$(tail -n 1 "$TMP/events")
case "$last" in
  *'"type":"done"'*) ;;
  *) fail "the build did not end with a done event: $last" ;;
esac
grep -q '^{' "$TMP/events" || fail "not NDJSON"

echo "== the image is ready"
[ "$(api GET "/v1/images/$NAME")" = 200 ] || fail "GET: $(cat "$TMP/body")"
grep -q '"state":"ready"' "$TMP/body" || fail "not ready: $(cat "$TMP/body")"
[ "$(api GET /v1/images)" = 200 ] || fail "list: $(cat "$TMP/body")"
grep -q "\"name\":\"$NAME\"" "$TMP/body" || fail "not listed"

if [ -d "$ROOT/images/$NAME" ]; then
  echo "== its files"
  rootfs="$ROOT/images/$NAME/rootfs"
  for f in usr/bin/git usr/bin/curl usr/bin/node usr/bin/npm usr/bin/python3 \
    etc/ssl/certs/ca-certificates.crt; do
    [ -e "$rootfs/$f" ] || fail "missing /$f"
  done
  [ ! -e "$rootfs/etc/hostname" ] || fail "/etc/hostname is still there"
  for d in proc sys dev tmp; do
    [ -d "$rootfs/$d" ] || fail "no /$d"
  done
  grep -q '"size_bytes"' "$ROOT/images/$NAME/image.json" || fail "image.json"
  ls -d "$ROOT"/images/.*.tmp-* 2>/dev/null && fail "a temp dir is left"
else
  echo "   (no $ROOT/images/$NAME here; set WARREN_ROOT to check files)"
fi

echo "== a second build reuses it"
[ "$(api POST /v1/images "{\"name\":\"$NAME\"}")" = 200 ] || fail "POST"
[ "$(wc -l <"$TMP/body")" = 1 ] || fail "more than one event: $(cat "$TMP/body")"
grep -q '"reused":true' "$TMP/body" || fail "not reused: $(cat "$TMP/body")"

echo "== bad requests are refused before any stream"
[ "$(api POST /v1/images '{"include":["--variant=x"]}')" = 400 ] ||
  fail "option injection: $(cat "$TMP/body")"
[ "$(api POST /v1/images '{"name":"Bad/Name"}')" = 400 ] || fail "bad name"
[ "$(api POST /v1/images '{"nmae":"x"}')" = 400 ] || fail "unknown field"
[ "$(api GET /v1/images/no-such-image)" = 404 ] || fail "GET missing"

if [ "$NAME" != base ]; then
  echo "== delete $NAME"
  [ "$(api DELETE "/v1/images/$NAME")" = 204 ] || fail "DELETE: $(cat "$TMP/body")"
  [ "$(api GET "/v1/images/$NAME")" = 404 ] || fail "still there"
  [ ! -e "$ROOT/images/$NAME" ] || fail "its directory is still there"
fi
echo "PASS: image build ($NAME)"
