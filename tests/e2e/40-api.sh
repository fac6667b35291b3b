# shellcheck shell=bash
# End-to-end: the HTTP API's quality, with curl and raw sockets.
#
# Bad JSON, unknown fields, wrong types, oversized bodies, unknown
# sandboxes and routes, name clashes: each is a 4xx whose body is
# {"error":{"code","message"}}. A barrage of garbage (random bytes,
# broken HTTP, huge heads, cut-off bodies, bad frames) leaves the daemon
# alive and serving. On TCP, every request needs the key from
# ROOT/api.key, and the CLI works there with --host and --api-key.

# expect_error STATUS CODE METHOD PATH [curl args...]
expect_error() {
  local status=$1 code=$2 method=$3 path=$4
  shift 4
  api_call "$method" "$path" "$@"
  assert_eq "$status" "$API_STATUS" "status of $method $path $* ($API_BODY)"
  assert_api_error "$API_BODY" "$code" "$method $path $*"
}

json_post() { # PATH BODY -> API_STATUS, API_BODY
  api_call POST "$1" -H 'Content-Type: application/json' --data-binary "$2"
}

# Send raw bytes on a fresh connection to the socket (or host:port), print
# what came back (at most 64 KiB, 3 s). With WAIT=0 the connection is
# closed right after sending: a client that goes away.
raw_send() { # PYTHON-BYTES-EXPRESSION [tcp-port]
  python3 - "$WR_SOCK" "${2:-}" "$1" "${WAIT:-3}" <<'EOF'
import os, socket, sys
sock, port, expr, wait = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
data = eval(expr)
if port:
    s = socket.create_connection(("127.0.0.1", int(port)))
else:
    s = socket.socket(socket.AF_UNIX); s.connect(sock)
s.settimeout(float(wait))
try:
    s.sendall(data)
except OSError:
    pass
if float(wait) == 0:
    sys.exit(0)
out = b""
try:
    while len(out) < 65536:
        b = s.recv(65536)
        if not b:
            break
        out += b
except OSError:
    pass
sys.stdout.write(out.decode("latin-1"))
EOF
}

# The status and the JSON body of a raw HTTP response.
raw_status() { printf '%s' "$1" | head -1 | cut -d' ' -f2; }
raw_body() { printf '%s' "$1" | tr -d '\r' | sed '1,/^$/d'; }

test_malformed_json() {
  local b
  for b in '{' '{"name":' '[]' 'null' '"x"' '42' '{"name":"a"} trailing' \
    $'\xff\xfe{}' '{"name":"a","name":"b"}'; do
    json_post /v1/sandboxes "$b"
    assert_eq 400 "$API_STATUS" "POST /v1/sandboxes '$b' ($API_BODY)"
    assert_api_error "$API_BODY" bad_request "body '$b'"
  done
  json_post /v1/sandboxes '{"name":'
  assert_contains "$API_BODY" "line" "a JSON error says where"
  assert_not_contains "$("$WARREN" ls -q)" "a" "a sandbox made from bad JSON"
}

test_unknown_fields_and_wrong_types() {
  local b
  new_sandbox api-types
  json_post /v1/sandboxes '{"nmae":"x"}'
  assert_eq 400 "$API_STATUS" "unknown field"
  assert_contains "$API_BODY" "nmae" "unknown field message"
  for b in '{"name":5}' '{"memory":true}' '{"memory":"lots"}' \
    '{"memory":-1}' '{"cpus":"x"}' '{"cpus":-2}' '{"pids":1.5}' '{"pids":"9"}' \
    '{"env":{"A":1}}' '{"env":["A=1"]}' '{"env":{"1A":"x"}}' \
    '{"labels":[]}' '{"labels":{"k":2}}' '{"workdir":"relative"}' \
    '{"start":"yes"}' '{"image":7}' '{"name":"api-x","memory":"1k"}'; do
    json_post /v1/sandboxes "$b"
    if [ "$API_STATUS" = 201 ]; then
      "$WARREN" rm -f "$(json_get "$API_BODY" .id)" >/dev/null
    fi
    assert_eq 400 "$API_STATUS" "create $b ($API_BODY)"
    assert_api_error "$API_BODY" bad_request "create $b"
  done
  for b in '{}' '{"cmd":"ls"}' '{"cmd":[]}' '{"cmd":[1]}' '{"cmd":["ls"],"tty":1}' \
    '{"cmd":["ls"],"timeout":"x"}' '{"cmd":["ls"],"timeout":-1}' \
    '{"cmd":["ls"],"env":{"A":null}}' '{"cmd":["ls"],"cwd":"tmp"}' \
    '{"cmd":["ls"],"rows":0}' '{"cmd":["ls"],"tag":"x"}' \
    '{"cmd":["ls"],"background":true,"tag":"Bad Tag"}' '{"cmd":["ls"],"extra":1}' \
    '{"cmd":["ls"],"tty":true}'; do
    json_post /v1/sandboxes/api-types/exec "$b"
    assert_eq 400 "$API_STATUS" "exec $b ($API_BODY)"
    assert_api_error "$API_BODY" bad_request "exec $b"
  done
  json_post /v1/sandboxes/api-types/stop '{"timeout":"soon"}'
  assert_eq 400 "$API_STATUS" "stop with a string timeout"
  json_post /v1/sandboxes/api-types/files/mkdir '{"path":1}'
  assert_eq 400 "$API_STATUS" "mkdir with a number path"
  expect_error 400 bad_request DELETE "/v1/sandboxes/api-types?force=maybe"
  expect_error 400 bad_request GET "/v1/sandboxes/api-types/files/list?path=/&depth=x"
  expect_error 400 bad_request GET "/v1/sandboxes?state=sleeping"
  # After all that the sandbox is as it was.
  assert_eq running "$(sb_state api-types)" "state"
  assert_eq 1 "$("$WARREN" ls -q | grep -c '^api-types$')" "one sandbox"
}

test_oversized_body() {
  local tmp
  tmp=$(mktemp)
  python3 -c 'import json; print(json.dumps({"name": "big", "labels": {"k%d" % i: "v" * 1000 for i in range(1500)}}))' >"$tmp"
  [ "$(stat -c %s "$tmp")" -gt 1048576 ] || fail "test body too small"
  expect_error 413 payload_too_large POST /v1/sandboxes \
    -H 'Content-Type: application/json' --data-binary @"$tmp"
  # The same without a Content-Length (chunked).
  expect_error 413 payload_too_large POST /v1/sandboxes \
    -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/json' -T "$tmp"
  assert_not_contains "$("$WARREN" ls -q)" big "a sandbox from a refused body"
  # A head that is too large.
  expect_error 431 header_too_large GET /v1/info \
    -H "X-Big: $(head -c 100000 /dev/zero | tr '\0' x)"
  rm -f "$tmp"
  assert_daemon_alive
}

test_not_found_and_method() {
  local p
  new_sandbox api-404
  for p in /v1/sandboxes/nope /v1/sandboxes/sb-zzzzzz; do
    expect_error 404 not_found GET "$p"
    assert_contains "$API_BODY" "${p##*/}" "404 names what was missing"
  done
  expect_error 404 not_found DELETE "/v1/sandboxes/nope?force=true"
  expect_error 404 not_found POST /v1/sandboxes/nope/stop
  expect_error 404 not_found POST /v1/sandboxes/nope/exec -d '{"cmd":["true"]}'
  expect_error 404 not_found GET "/v1/sandboxes/nope/files?path=/etc/passwd"
  expect_error 404 not_found GET /v1/sandboxes/api-404/processes/nope
  expect_error 404 not_found GET /v1/images/nope
  expect_error 404 not_found GET /v1/nothing-here
  expect_error 404 not_found GET /
  expect_error 405 method_not_allowed PUT /v1/sandboxes
  expect_error 405 method_not_allowed DELETE /v1/info
  json_post /v1/sandboxes '{"name":"api-x","image":"no-such-image"}'
  assert_eq 404 "$API_STATUS" "create from a missing image"
  # docs/api.yaml: POST /v1/sandboxes answers 404 image_not_found.
  assert_api_error "$API_BODY" image_not_found
}

test_name_clash_is_409() {
  new_sandbox api-clash
  json_post /v1/sandboxes '{"name":"api-clash"}'
  assert_eq 409 "$API_STATUS" "name clash ($API_BODY)"
  # docs/api.yaml: a name clash is 409 name_conflict.
  assert_api_error "$API_BODY" name_conflict "name clash"
}

test_state_conflicts_are_409() {
  new_sandbox api-state
  expect_error 409 not_stopped DELETE /v1/sandboxes/api-state
  "$WARREN" stop api-state >/dev/null
  api_call POST /v1/sandboxes/api-state/exec -d '{"cmd":["true"]}'
  assert_eq 409 "$API_STATUS" "exec on a stopped sandbox"
  assert_api_error "$API_BODY" not_running
  api_call POST /v1/sandboxes/api-state/pause
  assert_eq 409 "$API_STATUS" "pause of a stopped sandbox"
  assert_api_error "$API_BODY" not_running
}

test_garbage_does_not_kill_the_daemon() {
  local out
  new_sandbox api-garbage
  # Random bytes, 20 times (one python, many connections).
  python3 - "$WR_SOCK" <<'EOF'
import os, socket, sys
for i in range(20):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    try:
        s.sendall(os.urandom(65536)); s.recv(4096)
    except OSError:
        pass
    s.close()
EOF
  raw_send 'b"\x00" * 100000' >/dev/null
  out=$(raw_send 'b"GARBAGE / HTTP/1.1\r\nHost: x\r\n\r\n"')
  [ "$(raw_status "$out")" = 400 ] || [ "$(raw_status "$out")" = 405 ] ||
    fail "unknown method: $out"
  out=$(raw_send 'b"GET /v1/info HTTP/1.1\r\nContent-Length: -5\r\n\r\n"')
  assert_eq 400 "$(raw_status "$out")" "negative Content-Length"
  out=$(raw_send 'b"POST /v1/sandboxes HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n{}"')
  case "$(raw_status "$out")" in 400 | 413) ;; *) fail "huge Content-Length: $out" ;; esac
  out=$(raw_send 'b"POST /v1/sandboxes HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"')
  assert_eq 400 "$(raw_status "$out")" "bad chunk size"
  assert_api_error "$(raw_body "$out")" bad_request "bad chunk size"
  out=$(raw_send 'b"GET /v1/info HTTP/1.1\r\nX: a\x00b\r\n\r\n"')
  assert_eq 400 "$(raw_status "$out")" "NUL in a header"
  # A body cut short, a head cut short, a connection that just closes.
  WAIT=0 raw_send 'b"POST /v1/sandboxes HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"na"'
  WAIT=0 raw_send 'b"GET /v1/inf"'
  WAIT=0 raw_send 'b""'
  # A 1 MB URL.
  out=$(raw_send 'b"GET /" + b"a" * 1000000 + b" HTTP/1.1\r\n\r\n"')
  case "$(raw_status "$out")" in 4*) ;; *) fail "1 MB URL: ${out:0:200}" ;; esac
  # Pipelined requests are all answered, in order.
  out=$(raw_send '(b"GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n" * 29 +
    b"GET /v1/info HTTP/1.1\r\nConnection: close\r\n\r\n")')
  assert_eq 30 "$(printf '%s' "$out" | grep -c '^HTTP/1.1 200')" "pipelined answers"
  # Frames from a hostile client on an upgraded exec: a huge length, an
  # unknown type, a bad signal.
  for frame in 'b"\x00\xff\xff\xff\xff"' 'b"\x63\x00\x00\x00\x00"' \
    'b"\x03\x00\x00\x00\x04NOPE"' 'b"\x02\x00\x00\x00\x01x"'; do
    raw_send "(lambda b: b'POST /v1/sandboxes/api-garbage/exec HTTP/1.1\r\n'
      b'Connection: Upgrade\r\nUpgrade: warren-exec\r\n'
      b'Content-Length: %d\r\n\r\n' % len(b) + b)(b'{\"cmd\":[\"sleep\",\"10\"]}') + $frame" \
      >"$WR_RUN/frame.out"
    assert_contains "$(head -1 "$WR_RUN/frame.out")" " 101 " "upgrade for $frame"
  done
  # Many connections at once, left idle, then dropped.
  python3 - "$WR_SOCK" <<'EOF'
import socket, sys
conns = []
for i in range(200):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); conns.append(s)
for s in conns[:100]:
    s.sendall(b"GET /v1/info HTTP/1.1\r\n")
for s in conns:
    s.close()
EOF
  assert_daemon_alive
  assert_eq ok "$("$WARREN" exec api-garbage -- echo ok)" "exec after the barrage"
  # The hostile execs were killed with their connections.
  wait_until 5 sandbox_quiet api-garbage ||
    fail "processes left: $("$WARREN" exec api-garbage -- sh -c "$INSIDE_PS")"
}

test_success_bodies_are_json() {
  local j
  j=$(api GET /v1/info)
  assert_eq 1 "$(json_get "$j" .api_version)" "api_version"
  assert_eq ns "$(json_get "$j" .driver)" "driver"
  assert_eq "$WR_ROOT" "$(json_get "$j" .root)" "root"
  new_sandbox api-ok --label a=b
  j=$(api GET '/v1/sandboxes?label=a=b')
  assert_eq api-ok "$(json_get "$j" '.sandboxes[0].name')" "label filter"
  api_call GET /v1/sandboxes/api-ok
  assert_eq 200 "$API_STATUS" "GET sandbox"
  [[ "$(json_get "$API_BODY" .created_at)" =~ ^20[0-9-]+T[0-9:.]+Z$ ]] ||
    fail "created_at is not RFC 3339 UTC: $API_BODY"
  # A plain exec is NDJSON: started, output, exit.
  j=$(api POST /v1/sandboxes/api-ok/exec -d '{"cmd":["sh","-c","echo hi; exit 4"]}')
  assert_eq "started stdout exit" "$(printf '%s\n' "$j" | jq -r .type | tr '\n' ' ' | sed 's/ $//')" \
    "exec events"
  assert_eq hi "$(printf '%s\n' "$j" | jq -r 'select(.type=="stdout") | .data' | base64 -d)" \
    "exec output"
  assert_eq 4 "$(printf '%s\n' "$j" | jq -r 'select(.type=="exit") | .exit_code')" \
    "exec exit code"
  j=$(api POST /v1/sandboxes/api-ok/exec -d '{"cmd":["cat"],"stdin":"given"}')
  assert_eq given "$(printf '%s\n' "$j" | jq -r 'select(.type=="stdout") | .data' | base64 -d)" \
    "exec with stdin text"
  api_call POST /v1/sandboxes/api-ok/exec -d '{"cmd":["no-such-thing"]}'
  assert_eq 400 "$API_STATUS" "missing command"
  assert_api_error "$API_BODY" command_not_found
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Restart this file's daemon with a TCP listener too (sandboxes keep
# running across the restart).
test_tcp_needs_the_key() {
  local port key url p out pid
  port=$(free_port)
  stop_daemon
  start_daemon --listen "127.0.0.1:$port"
  wait_until 5 test -s "$WR_ROOT/api.key" || fail "no $WR_ROOT/api.key"
  assert_eq 600 "$(stat -c %a "$WR_ROOT/api.key")" "api.key mode"
  key=$(tr -d '\n' <"$WR_ROOT/api.key")
  [ "${#key}" -ge 32 ] || fail "a short key: ${#key} characters"
  url="http://127.0.0.1:$port"
  for p in /v1/info /v1/sandboxes /v1/sandboxes/nope /v1/nope /; do
    for auth in "" "Authorization: Bearer wrong" "Authorization: Bearer " \
      "Authorization: Basic $key" "Authorization: Bearer ${key}x" \
      "Authorization: Bearer ${key:0:${#key}-1}"; do
      out=$(curl -sS -w '\n%{http_code}' ${auth:+-H "$auth"} "$url$p")
      assert_eq 401 "${out##*$'\n'}" "GET $p with '$auth'"
      assert_api_error "${out%$'\n'*}" unauthorized "GET $p with '$auth'"
    done
  done
  out=$(curl -sS -w '\n%{http_code}' -X POST -d '{"name":"api-tcp-x"}' \
    "$url/v1/sandboxes")
  assert_eq 401 "${out##*$'\n'}" "POST without a key"
  assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $key" "$url/v1/info")" "with the key"
  assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $key" "$url/v1/nope")" "a missing path with the key"
  # Raw garbage on TCP does not hurt either.
  raw_send 'os.urandom(4096)' "$port" >/dev/null

  # The CLI over TCP: create, exec (upgraded stream), cp, rm.
  out=$(must_fail "$WARREN" --host "tcp://127.0.0.1:$port" ls)
  assert_contains "$out" "key" "the CLI without a key"
  out=$(must_fail "$WARREN" --host "tcp://127.0.0.1:$port" --api-key wrong ls)
  assert_contains "$out" "key" "the CLI with a wrong key"
  W() { "$WARREN" --host "tcp://127.0.0.1:$port" --api-key "$key" "$@"; }
  W create --name api-tcp >/dev/null
  WR_CLEANUP="${WR_CLEANUP:-} api-tcp"
  # shellcheck disable=SC2154 # s is the loop's, when the trap runs
  trap 'for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  assert_contains "$(W ls -q)" api-tcp "ls over TCP"
  assert_eq "out err" "$(W exec api-tcp -- sh -c 'echo out; echo err >&2' 2>&1 | tr '\n' ' ' | sed 's/ $//')" \
    "exec over TCP"
  assert_eq HI "$(echo hi | W exec -i api-tcp -- tr a-z A-Z)" "exec -i over TCP"
  # A TCP client that dies takes its (quiet) process with it.
  "$WARREN" --host "tcp://127.0.0.1:$port" --api-key "$key" \
    exec api-tcp -- sleep 100 &
  pid=$!
  wait_until 5 sandbox_runs api-tcp sleep ||
    fail "sleep did not start over TCP"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  wait_until 5 sandbox_quiet api-tcp ||
    fail "left running after the TCP client died: $("$WARREN" exec api-tcp -- sh -c "$INSIDE_PS")"
  W cp /etc/services api-tcp:/tmp/s
  assert_eq "$(sha256sum </etc/services | cut -c1-64)" \
    "$(W exec api-tcp -- sh -c 'sha256sum </tmp/s' | cut -c1-64)" "cp over TCP"
  WARREN_API_KEY=$key "$WARREN" --host "tcp://127.0.0.1:$port" ls -q >/dev/null ||
    fail "WARREN_API_KEY"
  W rm -f api-tcp >/dev/null
  # The unix socket still needs no key.
  assert_eq 200 "$(api_status GET /v1/info)" "unix socket"
}
