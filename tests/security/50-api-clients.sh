# shellcheck shell=bash
# Security: hostile API clients against the real daemon.
#
# Oversized heads and bodies, slowloris connections and a connection
# flood, request smuggling in every form a proxy might read differently,
# malformed JSON at every route that takes a body, ids and names built to
# become host paths, and TCP clients without the key. Each is refused with
# the documented status and the connection closed where the framing is in
# doubt; a smuggled request never runs; nothing on the host is touched;
# the daemon never crashes and keeps serving. Sourced by tests/run-e2e.

json_post() { # PATH BODY -> API_STATUS, API_BODY
  api_call POST "$1" -H 'Content-Type: application/json' --data-binary "$2"
}

# The response was one whole 4xx of CODE, and the connection then closed.
assert_refused_and_closed() { # RAW STATUS CODE WHAT
  assert_eq "$2" "$(raw_http_status "$1")" "$4: status (${1:0:300})"
  assert_api_error "$(raw_http_body "$1")" "$3" "$4"
  assert_eq 1 "$(raw_http_count "$1")" "$4: responses"
  assert_contains "$1" "<<EOF>>" "$4: the connection closed"
}

# ---- oversized heads and bodies ----------------------------------------------

test_oversized_headers_get_431_and_close() {
  local out
  # One header line larger than the whole head limit (16 KiB), a little
  # and a lot.
  for n in 17000 100000 1000000; do
    out=$(raw_http "b'GET /v1/info HTTP/1.1\\r\\nX-Big: ' + b'x' * $n + b'\\r\\n\\r\\n'")
    assert_refused_and_closed "$out" 431 header_too_large "a $n-byte header"
  done
  # Many small headers: more than the count limit, and more than the size.
  out=$(raw_http "b'GET /v1/info HTTP/1.1\\r\\n' + b''.join(b'X-%d: v\\r\\n' % i for i in range(200)) + b'\\r\\n'")
  assert_refused_and_closed "$out" 431 header_too_large "200 headers"
  out=$(raw_http "b'GET /v1/info HTTP/1.1\\r\\n' + b''.join(b'X-%d: %s\\r\\n' % (i, b'v' * 200) for i in range(100)) + b'\\r\\n'")
  assert_refused_and_closed "$out" 431 header_too_large "100 headers of 200 bytes"
  # A huge request line, and a huge header name.
  out=$(raw_http "b'GET /' + b'a' * 20000 + b' HTTP/1.1\\r\\n\\r\\n'")
  assert_refused_and_closed "$out" 431 header_too_large "a 20 KB request line"
  out=$(raw_http "b'GET /v1/info HTTP/1.1\\r\\n' + b'X' * 20000 + b': v\\r\\n\\r\\n'")
  assert_refused_and_closed "$out" 431 header_too_large "a 20 KB header name"
  # Trailers of a chunked body count too.
  out=$(raw_http "b'POST /v1/sandboxes HTTP/1.1\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n' + b''.join(b'T-%d: %s\\r\\n' % (i, b'v' * 500) for i in range(40)) + b'\\r\\n'")
  assert_refused_and_closed "$out" 431 header_too_large "20 KB of trailers"
  assert_daemon_alive
}

test_oversized_bodies_get_413_and_close() {
  local out before r
  new_sandbox api-big
  before=$("$WARREN" ls -q | sort | tr '\n' ' ')
  # Declared: refused from the head alone, before a body byte is sent.
  for r in "POST /v1/sandboxes" "POST /v1/sandboxes/api-big/exec" \
    "POST /v1/sandboxes/api-big/files/mkdir" "POST /v1/sandboxes/api-big/stop" \
    "POST /v1/images" "POST /v1/sandboxes/api-big/files/move"; do
    out=$(raw_http "b'$r HTTP/1.1\\r\\nContent-Type: application/json\\r\\nContent-Length: 2000000\\r\\n\\r\\n{'")
    assert_refused_and_closed "$out" 413 payload_too_large "$r with Content-Length 2 MB"
  done
  out=$(raw_http "b'POST /v1/sandboxes HTTP/1.1\\r\\nContent-Length: 999999999999999999\\r\\n\\r\\n{}'")
  assert_refused_and_closed "$out" 413 payload_too_large "Content-Length 10^18"
  out=$(raw_http "b'POST /v1/sandboxes HTTP/1.1\\r\\nContent-Length: 99999999999999999999999\\r\\n\\r\\n{}'")
  assert_refused_and_closed "$out" 400 bad_request "a Content-Length past 64 bits"
  # Chunked: cut off once the limit is passed.
  out=$(raw_http "b'POST /v1/sandboxes HTTP/1.1\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n' + (b'10000\\r\\n' + b' ' * 65536 + b'\\r\\n') * 40 + b'0\\r\\n\\r\\n'")
  assert_refused_and_closed "$out" 413 payload_too_large "a 2.6 MB chunked body"
  out=$(raw_http "b'POST /v1/sandboxes/api-big/exec HTTP/1.1\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n' + (b'1\\r\\n \\r\\n') * 1100000 + b'0\\r\\n\\r\\n'")
  assert_refused_and_closed "$out" 413 payload_too_large "1.1 million 1-byte chunks"
  assert_eq "$before" "$("$WARREN" ls -q | sort | tr '\n' ' ')" "sandboxes"
  assert_eq running "$(sb_state api-big)" "the sandbox's state"
  assert_daemon_alive
}

# ---- slowloris and a connection flood ------------------------------------------

# Slow clients on TCP (no key) send their head a byte a second; a flood of
# idle connections fills the cap. The slow ones are closed after the
# header timeout (10 s), connections past the cap are closed at once, and
# meanwhile the unix socket and a keyed keep-alive TCP client are served.
test_slowloris_and_connection_flood() {
  local report
  ensure_tcp_daemon
  report=$(python3 - "$WR_SOCK" "$WR_TCP_PORT" "$WR_API_KEY" <<'EOF'
import json, resource, socket, sys, time
sock_path, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
SLOW, FLOOD, CAP = 60, 1100, 1024

def tcp():
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    return s

def closed(s):
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True

def get_info(s, auth):
    s.settimeout(5)
    s.sendall(b"GET /v1/info HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
    while len(body) < n:
        body += s.recv(65536)
    return int(head.split(b" ")[1])

def unix_latency():
    t = time.monotonic()
    s = socket.socket(socket.AF_UNIX); s.connect(sock_path)
    st = get_info(s, b"")
    s.close()
    return st, time.monotonic() - t

keyed = socket.create_connection(("127.0.0.1", port))
assert get_info(keyed, b"Authorization: Bearer " + key.encode() + b"\r\n") == 200
t0 = time.monotonic()
slow = [tcp() for _ in range(SLOW)]
for s in slow:
    s.send(b"G")
slow_closed = {}
flood, flood_t = [], []
for _ in range(FLOOD):
    flood.append(tcp()); flood_t.append(time.monotonic())
time.sleep(1.0)
refused = [i for i, s in enumerate(flood) if closed(s)]
kept = [i for i in range(FLOOD) if i not in set(refused)]
worst_unix, keyed_ok, sent = 0.0, 0, 1
request = b"ET /v1/info HTTP/1.1\r\nX-Slow: " + b"a" * 100
while time.monotonic() - t0 < 14 and len(slow_closed) < SLOW:
    tick = time.monotonic()
    for i, s in enumerate(slow):
        if i in slow_closed:
            continue
        if closed(s):
            slow_closed[i] = time.monotonic() - t0
            continue
        try:
            s.send(request[sent - 1:sent])
        except OSError:
            slow_closed[i] = time.monotonic() - t0
    sent += 1
    st, lat = unix_latency()
    worst_unix = max(worst_unix, lat) if st == 200 else 99
    keyed_ok += get_info(keyed, b"Authorization: Bearer " + key.encode() + b"\r\n") == 200
    time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
# The idle connections that were let in had their 10 s too.
time.sleep(max(0.0, 12.0 - (time.monotonic() - t0)))
flood_closed_late = sum(1 for i in kept if closed(flood[i]))
new = socket.create_connection(("127.0.0.1", port))
after = get_info(new, b"Authorization: Bearer " + key.encode() + b"\r\n")
print(json.dumps({
    "refused": len(refused), "kept": len(kept),
    "slow_closed": len(slow_closed),
    "slow_first": min(slow_closed.values(), default=-1),
    "slow_last": max(slow_closed.values(), default=-1),
    "flood_closed_late": flood_closed_late,
    "worst_unix_ms": int(worst_unix * 1000), "keyed_ok": keyed_ok,
    "after": after}))
EOF
  )
  echo "$report"
  # The cap holds: what was kept, with the slow ones and the keyed client,
  # is within 1024; the rest was refused within the second.
  [ $(($(json_get "$report" .kept) + 61)) -le 1024 ] || fail "the cap did not hold: $report"
  [ "$(json_get "$report" .refused)" -ge $((1100 + 61 - 1024)) ] ||
    fail "too few connections refused: $report"
  # Every slow connection was closed after the header timeout.
  assert_eq 60 "$(json_get "$report" .slow_closed)" "slow connections closed"
  [ "$(json_get "$report" '.slow_first > 9 and .slow_last < 13.5')" = true ] ||
    fail "slow connections were not closed at the 10 s header timeout: $report"
  # The idle ones that were let in went the same way.
  assert_eq "$(json_get "$report" .kept)" "$(json_get "$report" .flood_closed_late)" \
    "idle connections closed at the header timeout"
  # And the normal clients were served all along.
  [ "$(json_get "$report" .worst_unix_ms)" -lt 500 ] || fail "the unix socket was slow: $report"
  [ "$(json_get "$report" .keyed_ok)" -ge 8 ] || fail "the keyed client was not served: $report"
  assert_eq 200 "$(json_get "$report" .after)" "a new TCP client after the flood"
  assert_daemon_alive
}

# ---- request smuggling ---------------------------------------------------------

# Write a smuggling attempt to FILE: a mkdir request framed by HEADERS
# (printf %b escapes; @LEN@ is the body's length), whose body is an empty
# chunked body followed by a hidden exec that would touch /smuggled-N.
smuggle_file() { # FILE HEADERS N
  local j="{\"cmd\":[\"touch\",\"/smuggled-$3\"]}" len
  printf '0\r\n\r\nPOST /v1/sandboxes/api-smuggle/exec HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' \
    "${#j}" "$j" >"$1.body"
  len=$(stat -c %s "$1.body")
  {
    printf 'POST /v1/sandboxes/api-smuggle/files/mkdir HTTP/1.1\r\nHost: x\r\n'
    printf '%b' "${2//@LEN@/$len}"
    printf '\r\n'
    cat "$1.body"
  } >"$1"
}

# Each form frames a body two ways. Whichever a proxy in front believes,
# a request hidden after the first one would run an exec that leaves
# /smuggled-N in the sandbox. Each must get one 400, then a closed
# connection, and the hidden request must never run.
test_request_smuggling_forms_refused() {
  local forms form out i=0 f
  new_sandbox api-smuggle
  f=$(mktemp)
  forms=(
    'cl-then-te|Content-Length: @LEN@\r\nTransfer-Encoding: chunked\r\n'
    'te-then-cl|Transfer-Encoding: chunked\r\nContent-Length: @LEN@\r\n'
    'cl-twice-same|Content-Length: @LEN@\r\nContent-Length: @LEN@\r\n'
    'cl-twice-differ|Content-Length: 5\r\nContent-Length: @LEN@\r\n'
    'cl-list|Content-Length: @LEN@, @LEN@\r\n'
    'cl-plus|Content-Length: +@LEN@\r\n'
    'cl-hex|Content-Length: 0x10\r\n'
    'cl-space-inside|Content-Length: 1 0\r\n'
    'cl-space-before-colon|Content-Length : @LEN@\r\n'
    'te-xchunked|Transfer-Encoding: xchunked\r\n'
    'te-chunkedx|Transfer-Encoding: chunkedx\r\n'
    'te-quoted|Transfer-Encoding: "chunked"\r\n'
    'te-chunked-identity|Transfer-Encoding: chunked, identity\r\n'
    'te-identity-chunked|Transfer-Encoding: identity, chunked\r\n'
    'te-gzip-chunked|Transfer-Encoding: gzip, chunked\r\n'
    'te-twice|Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n'
    'te-twice-differ|Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n'
    'te-space-before-colon|Transfer-Encoding : chunked\r\n'
    'te-tab-before-colon|Transfer-Encoding\t: chunked\r\n'
    'te-folded-value|Transfer-Encoding:\r\n chunked\r\n'
    'te-folded-tab-value|Transfer-Encoding:\r\n\tchunked\r\n'
    'te-line-after-fold|X-Pad: a\r\n Transfer-Encoding: chunked\r\n'
    'te-leading-space-line| Transfer-Encoding: chunked\r\nX-Pad: a\r\n'
    'te-vtab-value|Transfer-Encoding: \x0bchunked\r\n'
    'te-formfeed-value|Transfer-Encoding: \x0cchunked\r\n'
    'te-nul-value|Transfer-Encoding: chunked\x00\r\n'
    'te-bare-cr|Transfer-Encoding: chunked\rX: y\r\n'
    'te-semicolon|Transfer-Encoding: chunked;q=1\r\n'
    'te-nbsp|Transfer-Encoding: \xa0chunked\r\n'
    'te-and-cl-zero|Transfer-Encoding: chunked\r\nContent-Length: 0\r\n'
    'host-twice|Host: y\r\nTransfer-Encoding: chunked\r\n'
  )
  for form in "${forms[@]}"; do
    i=$((i + 1))
    smuggle_file "$f.$i" "${form#*|}" "$i"
  done
  # Send each on its own connection: "N STATUS RESPONSES CLOSED CODE".
  out=$(python3 - "$WR_SOCK" "$f" "$i" <<'EOF'
import json, socket, sys
sock, base, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(1, count + 1):
    s = socket.socket(socket.AF_UNIX); s.connect(sock); s.settimeout(3)
    s.sendall(open("%s.%d" % (base, i), "rb").read())
    out, closed = b"", False
    try:
        while True:
            b = s.recv(65536)
            if not b:
                closed = True
                break
            out += b
    except (socket.timeout, ConnectionResetError) as e:
        closed = isinstance(e, ConnectionResetError)
    try:
        code = json.loads(out.partition(b"\r\n\r\n")[2])["error"]["code"]
    except Exception:
        code = "-"
    print(i, out.split(b" ", 2)[1].decode() if out else "-",
          out.count(b"HTTP/1.1 "), "closed" if closed else "open", code)
EOF
  )
  i=0
  for form in "${forms[@]}"; do
    i=$((i + 1))
    assert_eq "$i 400 1 closed bad_request" "$(sed -n "${i}p" <<<"$out")" \
      "smuggling form ${form%%|*} (status, responses, connection, code)"
    rm -f "$f.$i" "$f.$i.body"
  done
  # HTTP/1.0 with Transfer-Encoding.
  smuggle_file "$f" 'Transfer-Encoding: chunked\r\n' 0
  sed -i '1s|HTTP/1.1|HTTP/1.0|' "$f"
  out=$(raw_http "open('$f', 'rb').read()")
  assert_refused_and_closed "$out" 400 bad_request "HTTP/1.0 with Transfer-Encoding"
  # The check itself: the hidden request, sent in the open after a proper
  # chunked body, does run and leave its trace.
  smuggle_file "$f" 'Transfer-Encoding: chunked\r\n' ok
  out=$(WAIT=1 raw_http "open('$f', 'rb').read()")
  assert_eq 2 "$(raw_http_count "$out")" "a chunked request and a pipelined exec"
  wait_until 5 "$WARREN" exec api-smuggle -- test -e /smuggled-ok ||
    fail "the control exec left no trace"
  assert_eq "/smuggled-ok" \
    "$("$WARREN" exec api-smuggle -- sh -c 'ls -d /smuggled-* 2>/dev/null || true')" \
    "traces in the sandbox (only the control's)"
  rm -f "$f" "$f.body"
  assert_daemon_alive
}

# ---- malformed JSON ----------------------------------------------------------

test_malformed_json_at_every_body_route() {
  local ops report
  new_sandbox api-json
  "$WARREN" exec -d --tag bg api-json -- sleep 1000 >/dev/null
  ops=$(api_operations | awk '$3 == "application/json"')
  [ "$(wc -l <<<"$ops")" -ge 7 ] || fail "docs/api.yaml lists too few JSON bodies: $ops"
  printf '%s\n' "$ops" >"$WR_RUN/json-ops"
  # One line per attempt that was not a 400 bad_request JSON error.
  report=$(python3 - "$WR_SOCK" "$WR_RUN/json-ops" <<'EOF'
import json, socket, sys
sock, ops = sys.argv[1], [l.split() for l in open(sys.argv[2]) if l.strip()]
bodies = [b'{', b'{"a":', b'[]', b'[1,2]', b'null', b'true', b'"str"', b'42',
          b'{"x":1} trailing', b'{"x":1}{"y":2}', b'\xef\xbb\xbf{}', b'\xff\xfe{}',
          b'{"cmd":["\\ud800"]}', b'{"name":"a\\u0000b"}', b'[' * 100000,
          b'{"a":' * 50000, b'{"a":1,"a":2}', b"{'a':1}", b'{a:1}', b'{"a":NaN}',
          b'{"a":1e99999}', b'{"a":123456789012345678901234567890}', b'{"a":"\\x"}',
          b'{"a":"\x01"}', b'{"a":[1,]}', b'{"a":1,}', b'{,}', b'{"a" 1}',
          b'/* c */{}', b'{"a":"\xc3\x28"}', b'\x00{}', b'{}\x00', b'{"cmd":"x",}']
n = 0
for method, path, _ in ops:
    url = path.replace("{id}", "api-json").replace("{tag}", "bg").replace("{name}", "base")
    for body in bodies:
        n += 1
        s = socket.socket(socket.AF_UNIX); s.connect(sock); s.settimeout(10)
        s.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                  % (method.encode(), url.encode(), len(body), body))
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
        s.close()
        status = out.split(b" ", 2)[1] if out else b"-"
        try:
            code = json.loads(out.partition(b"\r\n\r\n")[2])["error"]["code"]
        except Exception:
            code = "(not a JSON error)"
        if status != b"400" or code != "bad_request":
            print(method, url, repr(body[:40]), status.decode(), code, out[-200:])
print("tried", n, "bodies at", len(ops), "routes")
EOF
  )
  echo "$report"
  assert_eq "tried $(($(wc -l <<<"$ops") * 33)) bodies at $(wc -l <<<"$ops") routes" \
    "$report" "malformed bodies not refused with 400 bad_request"
  assert_eq running "$(sb_state api-json)" "the sandbox's state"
  assert_eq 1 "$("$WARREN" ls -q | grep -c '^api-json$')" "sandboxes"
  "$WARREN" ps api-json | grep -q bg || fail "the background process is gone"
  assert_not_contains "$("$WARREN" image ls --json | jq -r '.[].state')" "building" \
    "an image build started by a malformed body"
  assert_daemon_alive
}

# ---- ids and names -------------------------------------------------------------

test_hostile_ids_and_names_refused() {
  local sentinel print ids id p out long b before
  new_sandbox api-ids
  sentinel=$(mktemp -d /tmp/warren-sentinel-XXXXXX)
  echo keep >"$sentinel/file"
  print=$(host_fingerprint_of "$sentinel" "$sentinel/file" /etc /etc/passwd)
  long=$(head -c 5000 /dev/zero | tr '\0' a)
  before=$(ls "$WR_ROOT/sandboxes" | sort | tr '\n' ' ')
  ids=("..%2F..%2Fetc" "..%2F..%2F..%2F..%2F..${sentinel//\//%2F}" "%2E%2E" ".." "."
    "%2e" "x%00y" "%00" "..%00" "a%2Fb" "%2F" "%252E%252E%252F" "..%5C..%5Cetc"
    "sb-%2A" "*" "$long" "API-IDS" "%C0%AE%C0%AE" "%EF%BC%8E%EF%BC%8E" "%20"
    "%0Ainjected:%201" "%0D%0AX-Injected:%201" "api-ids%2F..%2F..%2Fapi-ids"
    "api-ids%00" "api-ids%20" "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd")
  for id in "${ids[@]}"; do
    for p in "GET /v1/sandboxes/$id" "DELETE /v1/sandboxes/$id?force=true" \
      "POST /v1/sandboxes/$id/stop" "GET /v1/sandboxes/$id/files?path=/etc/passwd" \
      "PUT /v1/sandboxes/$id/files?path=/x" "GET /v1/sandboxes/$id/processes/$id" \
      "GET /v1/images/$id" "DELETE /v1/images/$id"; do
      out=$(curl -sS -i --unix-socket "$WR_SOCK" -X "${p%% *}" --data-binary '{}' \
        "http://warren${p#* }")
      case "$(head -1 <<<"$out" | cut -d' ' -f2)" in
        400 | 404 | 405) ;;
        *) fail "$p: ${out:0:300}" ;;
      esac
      assert_not_contains "$(sed '/^\r$/q' <<<"$out" | tr '[:upper:]' '[:lower:]')" \
        "injected:" "the response head of $p"
    done
  done
  # Names that are not names are refused at create.
  for b in '"../x"' '"a/b"' '".."' '"."' '"a\u0000b"' '"%2F"' '"-lead"' '"UPPER"' \
    '"x y"' '"a\nb"' '"\u00f6"' '""' "\"$long\"" \
    "\"$(head -c 64 /dev/zero | tr '\0' n)\"" '"sb-../.."' '"/etc"'; do
    json_post /v1/sandboxes "{\"name\":$b}"
    if [ "$API_STATUS" = 201 ]; then
      "$WARREN" rm -f "$(json_get "$API_BODY" .id)" >/dev/null
      fail "created a sandbox named $b"
    fi
    assert_eq 400 "$API_STATUS" "create with name $b ($API_BODY)"
    json_post /v1/images "{\"name\":$b}"
    assert_eq 400 "$API_STATUS" "image build named $b ($API_BODY)"
    json_post /v1/sandboxes/api-ids/exec "{\"cmd\":[\"true\"],\"background\":true,\"tag\":$b}"
    assert_eq 400 "$API_STATUS" "a process tagged $b ($API_BODY)"
  done
  assert_eq "$print" "$(host_fingerprint_of "$sentinel" "$sentinel/file" /etc /etc/passwd)" \
    "the host sentinel and /etc"
  assert_eq "$before" "$(ls "$WR_ROOT/sandboxes" | sort | tr '\n' ' ')" \
    "the state root's sandboxes"
  assert_eq running "$(sb_state api-ids)" "the sandbox's state"
  rm -rf "$sentinel"
  assert_daemon_alive
}

# ---- TCP without the key ---------------------------------------------------------

# Every route, for sandboxes that exist and that do not, with no key or a
# wrong one, with and without a body: the same 401, byte for byte, and the
# connection closed after it.
test_tcp_without_key_gets_identical_401s() {
  local id report
  ensure_tcp_daemon
  new_sandbox api-auth
  "$WARREN" exec -d --tag bg api-auth -- sleep 1000 >/dev/null
  id=$(sb_get api-auth .id)
  api_operations >"$WR_RUN/api-ops"
  report=$(python3 - "$WR_TCP_PORT" "$WR_API_KEY" "$id" "$WR_RUN/api-ops" <<'EOF'
import socket, sys
port, key, sid = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ops = [l.split() for l in open(sys.argv[4]) if l.strip()]
auths = [b"", b"Authorization: Bearer wrong\r\n", b"Authorization: Bearer \r\n",
         b"Authorization: Basic " + key.encode() + b"\r\n",
         b"Authorization: Bearer " + key.encode() + b"x\r\n",
         b"Authorization: Bearer " + key[:-1].encode() + b"\r\n",
         b"Authorization: bearer" + key.encode() + b"\r\n",
         b"X-Api-Key: " + key.encode() + b"\r\n"]
fills = [("api-auth", "bg", "base"), (sid, "bg", "base"), ("sb-zzzzzz", "nope", "nope"),
         ("nope", "x", "..")]

def send(req):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(5)
    s.sendall(req)
    out, closed = b"", False
    try:
        while True:
            b = s.recv(65536)
            if not b:
                closed = True
                break
            out += b
    except (socket.timeout, ConnectionResetError) as e:
        closed = isinstance(e, ConnectionResetError)
    s.close()
    return out, closed

answers, n, open_after = set(), 0, 0
for method, path, body in ops + [["OPTIONS", "/v1/sandboxes/{id}", "-"],
                                 ["PATCH", "/v1/sandboxes/{id}", "-"]]:
    for sb, tag, name in fills:
        p = path.replace("{id}", sb).replace("{tag}", tag).replace("{name}", name)
        for auth in auths:
            for payload in ([b""] if body == "-" else [b"", b'{"name":"x","cmd":["true"]}']):
                head = f"{method} {p}?path=/etc/passwd HTTP/1.1\r\nHost: x\r\n".encode() + auth
                if payload:
                    head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(payload)
                out, closed = send(head + b"\r\n" + payload)
                answers.add(out)
                n += 1
                open_after += not closed
# A body the server never reads, declared huge, and a chunked one.
for extra in (b"Content-Length: 1000000000\r\n\r\n{", b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"):
    out, closed = send(b"PUT /v1/sandboxes/api-auth/files?path=/x HTTP/1.1\r\nHost: x\r\n" + extra)
    answers.add(out); n += 1; open_after += not closed
print(n, len(answers), open_after)
for a in answers:
    print(repr(a))
EOF
  )
  echo "$report"
  read -r n distinct open_after <<<"$(head -1 <<<"$report")"
  [ "$n" -gt 500 ] || fail "only $n requests were tried"
  assert_eq 1 "$distinct" "distinct answers to $n unauthenticated requests"
  assert_contains "$(sed -n 2p <<<"$report")" "HTTP/1.1 401 Unauthorized" "the answer"
  assert_contains "$(sed -n 2p <<<"$report")" '"code":"unauthorized"' "the answer"
  assert_eq 0 "$open_after" "connections left open after a 401"
  # With the key, the same requests do reach the routes.
  assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $WR_API_KEY" \
    "http://127.0.0.1:$WR_TCP_PORT/v1/sandboxes/sb-zzzzzz")" "a missing sandbox with the key"
  assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $WR_API_KEY" \
    "http://127.0.0.1:$WR_TCP_PORT/v1/sandboxes/api-auth")" "a sandbox with the key"
  assert_eq running "$(sb_state api-auth)" "the sandbox's state"
  "$WARREN" ps api-auth | grep -q bg || fail "the background process is gone"
  assert_daemon_alive
}
