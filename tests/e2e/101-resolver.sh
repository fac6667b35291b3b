# shellcheck shell=bash
# End-to-end: the resolver behind the proxy and the sandboxes' DNS servers.
# A burst of connections to one name makes one upstream query per family,
# the sandbox's DNS server answers from the same cache (remaining TTL,
# EDNS0 sizes, TCP, TC when an answer does not fit), and a sandbox whose
# lookups never end does not hold up another's. Sourced by tests/run-e2e.
#
# The daemon of this file asks only tests/net/slowdns.py (--resolver),
# which each test starts on the same port: it answers at most a few
# queries per second, never answers names that begin with "hole", and
# logs every query it gets. Its names point at HOST_IP, where it also
# runs a TCP sink that says "ok". Inside, tests/net/dnsq.py is
# /usr/local/bin/dnsq.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

RES_TOOLS=$WR_TOP/tests/net
RES_DIR=$WR_RUN/resolver

res_host_ip() {
  ip -4 -o addr show scope global 2>/dev/null |
    awk '{ sub(/\/.*/, "", $4); print $4; exit }'
}
HOST_IP=$(res_host_ip)

daemon_args() {
  mkdir -p "$RES_DIR"
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    >"$RES_DIR/port"
  echo "--resolver 127.0.0.1:$(cat "$RES_DIR/port")" | tee "$RES_DIR/args"
}

RES_EXIT=()
res_on_exit() {
  RES_EXIT+=("$1")
  trap res_cleanup EXIT
}
res_cleanup() {
  local i s
  set +e
  for ((i = ${#RES_EXIT[@]} - 1; i >= 0; i--)); do
    eval "${RES_EXIT[i]}"
  done
  for s in ${WR_CLEANUP:-}; do
    "$WARREN" rm -f "$s" >/dev/null 2>&1
  done
}

# Start slowdns (RATE answers a second); sets DNS_LOG and SINK (its port).
dns_start() { # [RATE] [TTL]
  local dir
  [ -n "$HOST_IP" ] || fail "this host has no global IPv4 address"
  dir=$(mktemp -d "$RES_DIR/dns.XXXXXX")
  DNS_LOG=$dir/log
  python3 "$RES_TOOLS/slowdns.py" --listen "127.0.0.1:$(cat "$RES_DIR/port")" \
    --addr "$HOST_IP" --rate "${1:-4}" --ttl "${2:-60}" --log "$DNS_LOG" \
    --sink "$HOST_IP" --ready "$dir/ready" >"$dir/out" 2>&1 &
  DNS_PID=$!
  res_on_exit "kill $DNS_PID 2>/dev/null; wait $DNS_PID 2>/dev/null; rm -rf '$dir'"
  wait_until 10 test -s "$dir/ready" ||
    fail "slowdns did not start: $(cat "$dir/out")"
  SINK=$(jq -r .sink "$dir/ready")
}

# How many queries slowdns got for NAME (of TYPE, over PROTO: udp, or tcp
# when c-ares asks again because the UDP answer was truncated).
dns_count() { # NAME [TYPE] [PROTO]
  grep -c "^${3:-udp} ${2:-A} $1\$" "$DNS_LOG" || true
}

res_sandbox() { # NAME [create args...]
  new_sandbox "$@"
  trap res_cleanup EXIT
  "$WARREN" cp "$RES_TOOLS/dnsq.py" "$1:/usr/local/bin/dnsq" >/dev/null ||
    fail "copy dnsq into $1"
  "$WARREN" exec "$1" -- chmod 755 /usr/local/bin/dnsq
}

# Allow NAME and HOST_IP (reserved or private, so it needs its own rule).
res_allow() { # SANDBOX NAME
  "$WARREN" policy allow network --sandbox "$1" "$2" >/dev/null ||
    fail "allow $2"
  "$WARREN" policy allow network --sandbox "$1" "$HOST_IP" >/dev/null ||
    fail "allow $HOST_IP"
}

dnsq() { # SANDBOX ARGS...
  local sb=$1
  shift
  "$WARREN" exec --timeout 60 "$sb" -- dnsq "$@"
}

check_json() { # SANDBOX NAME
  "$WARREN" policy check network --sandbox "$1" "$2" --json
}

# ---- a burst -----------------------------------------------------------------------

# 500 connections at once to one name from one sandbox, through a server
# that answers four queries a second: every one reaches the sink, and the
# server saw one or two queries per family. (One lookup per connection
# would be 1000 queries, over four minutes at that rate.) All 500 fit in
# what warrend may hold for one sandbox (held.c: idle connections get the
# small tier).
test_burst_makes_one_query_per_family() {
  local name out before after
  dns_start 4
  name=burst$RANDOM.test
  res_sandbox res-burst1
  res_allow res-burst1 "$name"
  before=$(api GET /v1/info | jq '.resolver | .coalesced.A + .hits.A')

  out=$(dnsq res-burst1 burst "$name" "$SINK" 500 2>&1) || fail "burst: $out"
  [[ "$out" =~ ^ok\ ([0-9]+)$ ]] || fail "burst: $out"
  assert_eq 500 "${BASH_REMATCH[1]}" "connections through the proxy to $name"
  [[ "$(dns_count "$name" A)" =~ ^[12]$ ]] ||
    fail "A queries for $name: $(dns_count "$name" A) (want 1 or 2)"
  [ "$(dns_count "$name" AAAA)" -le 2 ] ||
    fail "AAAA queries for $name: $(dns_count "$name" AAAA) (want 1 or 2)"
  after=$(api GET /v1/info | jq '.resolver | .coalesced.A + .hits.A')
  [ $((after - before)) -ge 498 ] ||
    fail "A lookups shared or cached went from $before to $after"

  # The check shows the cached answer, its age and the upstream count.
  out=$(check_json res-burst1 "$name")
  assert_eq "$HOST_IP" "$(json_get "$out" '.cache.A.addresses[0]')" "cached A"
  assert_eq "$(dns_count "$name" A)" "$(json_get "$out" '.cache.A.queries')" \
    "upstream queries for $name in policy check"
  [ "$(json_get "$out" '.cache.A.ttl_left_s')" -le 60 ] ||
    fail "TTL left above the answer's: $out"
  out=$("$WARREN" policy check network --sandbox res-burst1 "$name")
  assert_contains "$out" "cached A: $HOST_IP (age" "policy check's text"
}

# ---- the sandbox's DNS server -----------------------------------------------------

# Over TCP, several queries on one connection; the TTL is what remains of
# the cached answer; a name the policy denies is refused over TCP too.
test_dns_tcp_and_remaining_ttl() {
  local name out first second
  dns_start 20 60
  res_sandbox res-tcp
  name=ttl$RANDOM.test
  res_allow res-tcp "$name"

  out=$(dnsq res-tcp query "$name" --tcp --repeat 3)
  assert_eq 3 "$(grep -c '^rcode 0$' <<<"$out")" "three answers on one TCP connection"
  assert_eq 3 "$(grep -c "^answer $HOST_IP\$" <<<"$out")" "the answers over TCP"
  first=$(sed -n 's/^ttl //p' <<<"$out" | head -1)
  sleep 2.2
  out=$(dnsq res-tcp query "$name")
  second=$(sed -n 's/^ttl //p' <<<"$out" | head -1)
  [ "$second" -lt "$first" ] || fail "TTL $first then, 2 s later, $second"
  [ "$second" -ge $((first - 4)) ] ||
    fail "TTL $first then, 2 s later, $second"
  assert_eq 1 "$(dns_count "$name" A)" "upstream queries for $name"

  out=$(dnsq res-tcp query "refused$RANDOM.test" --tcp)
  assert_line "$out" "rcode 5" "a denied name over TCP"
  # Lengths below a header or above the bound close the connection; bytes
  # that never make a whole query, and a client that leaves mid-query,
  # change nothing for the next one.
  out=$("$WARREN" exec res-tcp -- python3 -c '
import socket
for junk in (b"\x00\x00", b"\x00\x05hello", b"\xff\xff" + b"x" * 2000, b"\x00\x40abc"):
    s = socket.create_connection(("127.0.0.1", 53), timeout=5)
    s.sendall(junk)
    if len(junk) == 5:
        s.close()
        print("left")
        continue
    try:
        print("closed" if s.recv(10) == b"" else "answered")
    except ConnectionResetError:
        print("closed")  # with bytes unread: a reset
    except OSError as e:
        print("error", e.errno)
' 2>&1)
  assert_eq "closed
closed
closed
left" "$out" "garbage over TCP"
  out=$(dnsq res-tcp query "$name" --tcp)
  assert_line "$out" "answer $HOST_IP" "a query over TCP after garbage"
  out=$(dnsq res-tcp query "refused$RANDOM.test")
  assert_line "$out" "rcode 5" "a denied name over UDP"
  assert_daemon_alive
}

# An answer that does not fit 512 bytes says TC over UDP; with an EDNS0
# size it fits, with an OPT record in the reply; over TCP it is whole.
test_dns_edns_and_truncation() {
  local name out
  dns_start 20
  res_sandbox res-edns
  name=many$RANDOM.test
  res_allow res-edns "$name"

  out=$(dnsq res-edns query "$name")
  assert_line "$out" "tc 1" "32 addresses over UDP without EDNS"
  assert_line "$out" "opt 0" "no OPT record without one in the query"
  [ "$(sed -n 's/^size //p' <<<"$out")" -le 512 ] || fail "reply above 512: $out"
  out=$(dnsq res-edns query "$name" --edns 4096)
  assert_line "$out" "tc 0" "32 addresses with EDNS 4096"
  assert_line "$out" "count 32" "32 addresses with EDNS 4096"
  assert_line "$out" "opt 1" "the reply's OPT record"
  out=$(dnsq res-edns query "$name" --edns 540)
  assert_line "$out" "tc 1" "32 addresses with EDNS 540"
  [ "$(sed -n 's/^size //p' <<<"$out")" -le 540 ] || fail "reply above 540: $out"
  out=$(dnsq res-edns query "$name" --tcp)
  assert_line "$out" "tc 0" "32 addresses over TCP"
  assert_line "$out" "count 32" "32 addresses over TCP"
  # The resolver inside (glibc's) asks again over TCP by itself.
  out=$("$WARREN" exec res-edns -- python3 -c 'import socket, sys
print(len(socket.getaddrinfo(sys.argv[1], 80, socket.AF_INET, socket.SOCK_STREAM)))' "$name")
  assert_eq 32 "$out" "getaddrinfo inside, through TC and then TCP"
  # So does warrend's: 548 bytes do not fit the 512 of plain UDP.
  assert_eq 1 "$(dns_count "$name" A)" "upstream queries for $name over UDP"
  assert_eq 1 "$(dns_count "$name" A tcp)" "upstream queries for $name over TCP"
}

# ---- fairness ----------------------------------------------------------------------

# One sandbox floods lookups of names the server never answers, through
# its DNS server and its proxy; another's lookup of an answerable name is
# answered meanwhile, long before the flood's lookups time out.
test_flood_does_not_delay_another_sandbox() {
  local name out before after
  dns_start 20
  res_sandbox res-flood
  res_sandbox res-calm
  "$WARREN" policy allow network --sandbox res-flood '*.flood.test' >/dev/null ||
    fail "allow *.flood.test"
  name=calm$RANDOM.test
  res_allow res-calm "$name"

  before=$(api GET /v1/info | jq '.resolver.queries.A')
  dnsq res-flood flood "hole$RANDOM-%d.flood.test" 300 >/dev/null
  "$WARREN" exec -d res-flood -- dnsq burst "hole$RANDOM.flood.test" 80 60 \
    --timeout 20 >/dev/null
  wait_until 10 sh -c "[ \$(grep -c hole '$DNS_LOG') -ge 30 ]" ||
    fail "the flood did not reach the server: $(wc -l <"$DNS_LOG") queries"
  out=$(dnsq res-calm query "$name" --timeout 3)
  assert_line "$out" "answer $HOST_IP" "the other sandbox's lookup during the flood"
  out=$(dnsq res-calm burst "$name" "$SINK" 20 --timeout 5)
  assert_eq "ok 20" "$out" "the other sandbox's connections during the flood"
  # The flood is capped per sandbox: far fewer lookups than it asked for
  # (WR_RESOLVE_PER_SANDBOX, 32, and the other sandbox's one).
  after=$(api GET /v1/info | jq '.resolver.queries.A')
  [ $((after - before)) -le 34 ] ||
    fail "the flood made $((after - before)) upstream lookups"
  [ "$(api GET /v1/info | jq '.resolver.limited')" -gt 0 ] ||
    fail "no lookup was refused by the per-sandbox cap"
  assert_daemon_alive
}

# warrend takes the TCP listener back from warren-init after a restart of
# its own, like the others; the cache starts empty.
test_dns_tcp_after_daemon_restart() {
  local name out
  dns_start 20
  res_sandbox res-restart
  name=restart$RANDOM.test
  res_allow res-restart "$name"
  assert_line "$(dnsq res-restart query "$name" --tcp)" "answer $HOST_IP" \
    "DNS over TCP before the restart"
  stop_daemon
  # shellcheck disable=SC2046 # words, on purpose
  start_daemon $(cat "$RES_DIR/args")
  out=$(dnsq res-restart query "$name" --tcp)
  assert_line "$out" "answer $HOST_IP" "DNS over TCP after a daemon restart"
  assert_eq 2 "$(dns_count "$name" A)" "upstream queries: one before, one after"
}
