# shellcheck shell=bash
# End-to-end: the byte relay of tunnels (CONNECT and transparently
# redirected TCP), which moves bytes with splice(2) once a tunnel is
# established. Every byte arrives (SHA-256 of many MiB, both ways, many
# tunnels at once), half-close works, a slow reader does not make warrend
# buffer, a reset ends the tunnel and the log has it.
#
# The server is tests/net/tunnels.py on the host's global IPv4 address
# (127/8 inside a sandbox is its own loopback), the client the same
# script inside the sandbox. tun.test names that address (--hosts-file),
# so a named CONNECT goes through the SNI check before it is spliced.
# Sourced by tests/run-e2e, which provides lib.sh.

TUN_TOOL=$WR_TOP/tests/net/tunnels.py
TUN_DIR=$WR_RUN/tunnels
TUN_IP=$(ip -4 -o addr show scope global 2>/dev/null |
  awk '{ sub(/\/.*/, "", $4); print $4; exit }')
TUN_MIB=64

daemon_args() {
  mkdir -p "$TUN_DIR"
  echo "${TUN_IP:-127.0.0.2} tun.test" >"$TUN_DIR/hosts"
  echo "--hosts-file $TUN_DIR/hosts"
}

# Commands run when the test ends, last registered first; then the
# sandboxes of new_sandbox go.
TUN_EXIT=()
tun_on_exit() {
  TUN_EXIT+=("$1")
  trap tun_cleanup EXIT
}

tun_cleanup() {
  local i s
  set +e
  for ((i = ${#TUN_EXIT[@]} - 1; i >= 0; i--)); do
    eval "${TUN_EXIT[i]}"
  done
  for s in ${WR_CLEANUP:-}; do
    "$WARREN" rm -f "$s" >/dev/null 2>&1
  done
}

# A rule for this test; removed when it ends. tun_rule SANDBOX SPEC
tun_rule() {
  local out id
  out=$("$WARREN" policy allow network --sandbox "$1" "$2" 2>&1) ||
    fail "warren policy allow network $2: $out"
  id=$(sed -n 's/^rule \([^:]*\):.*/\1/p' <<<"$out" | head -1)
  [ -n "$id" ] || fail "no rule id from: $out"
  tun_on_exit "\"\$WARREN\" policy rm '$id' >/dev/null 2>&1"
}

# A sandbox with the client in it, the server on the host, and rules for
# it (by address and port, and by name); sets TUN_PORT.
tun_setup() { # SANDBOX
  [ -n "$TUN_IP" ] || fail "this host has no global IPv4 address: the tunnel tests need one"
  new_sandbox "$1"
  trap tun_cleanup EXIT
  "$WARREN" cp "$TUN_TOOL" "$1:/usr/local/bin/tunnels" >/dev/null ||
    fail "copy tunnels.py into $1"
  "$WARREN" exec "$1" -- chmod 755 /usr/local/bin/tunnels
  mkdir -p "$TUN_DIR"
  rm -f "$TUN_DIR/ready"
  python3 "$TUN_TOOL" serve --addr "$TUN_IP" --ready "$TUN_DIR/ready" \
    >"$TUN_DIR/server.out" 2>&1 &
  tun_on_exit "kill $! 2>/dev/null; wait $! 2>/dev/null"
  wait_until 10 test -s "$TUN_DIR/ready" ||
    fail "the server did not start: $(cat "$TUN_DIR/server.out")"
  TUN_PORT=$(jq -r .port "$TUN_DIR/ready")
  tun_rule "$1" "$TUN_IP:$TUN_PORT"
  tun_rule "$1" "tun.test:$TUN_PORT"
}

# The client inside: tun SANDBOX ARGS...
tun() {
  local sb=$1
  shift
  "$WARREN" exec --timeout 120 "$sb" -- tunnels "$@"
}

tun_log() { # SANDBOX JQ-FILTER
  "$WARREN" policy log --json --sandbox "$1" --limit 1000 | jq -c "[.entries[] | $2]"
}

# At least N entries of the sandbox's log match COND. tun_log_count SANDBOX COND N
tun_log_count() {
  [ "$(tun_log "$1" "select($2)" | jq length)" -ge "$3" ]
}

# 64 MiB each way through each kind of tunnel, every byte checked; the
# upload's answer comes after the client's FIN (half-close), and the log
# counts what went each way.
test_bulk_both_ways() {
  local out bytes=$((TUN_MIB << 20)) path
  tun_setup tun-bulk
  for path in "--proxy 127.0.0.1:3128" ""; do
    # shellcheck disable=SC2086 # the proxy option, or nothing
    out=$(tun tun-bulk up "$TUN_IP" "$TUN_PORT" --bytes $bytes $path 2>&1) ||
      fail "upload ${path:-redirected}: $out"
    assert_contains "$out" "ok 1 x $bytes" "upload ${path:-redirected}"
    # shellcheck disable=SC2086
    out=$(tun tun-bulk down "$TUN_IP" "$TUN_PORT" --bytes $bytes $path 2>&1) ||
      fail "download ${path:-redirected}: $out"
    assert_contains "$out" "ok 1 x $bytes" "download ${path:-redirected}"
  done
  out=$(tun tun-bulk up tun.test "$TUN_PORT" --bytes $bytes --proxy 127.0.0.1:3128 2>&1) ||
    fail "upload through a named CONNECT: $out"
  assert_contains "$out" "ok 1 x $bytes" "upload through a named CONNECT"
  wait_until 10 tun_log_count tun-bulk ".allow and .bytes_up >= $bytes" 3 ||
    fail "the log does not count the uploads: $(tun_log tun-bulk '{kind, host, bytes_up, bytes_down}')"
  wait_until 10 tun_log_count tun-bulk ".allow and .bytes_down >= $bytes" 2 ||
    fail "the log does not count the downloads: $(tun_log tun-bulk '{kind, host, bytes_up, bytes_down}')"
}

# Many tunnels at once, each checked: one side's traffic never mixes with
# another's, and none is lost or stalls.
test_many_tunnels_at_once() {
  local out
  tun_setup tun-many
  out=$(tun tun-many up "$TUN_IP" "$TUN_PORT" --bytes $((2 << 20)) --parallel 48 \
    --proxy 127.0.0.1:3128 2>&1) || fail "48 CONNECT uploads: $out"
  assert_contains "$out" "ok 48 x" "48 CONNECT uploads"
  out=$(tun tun-many down "$TUN_IP" "$TUN_PORT" --bytes $((2 << 20)) --parallel 48 2>&1) ||
    fail "48 redirected downloads: $out"
  assert_contains "$out" "ok 48 x" "48 redirected downloads"
  assert_daemon_alive
}

# A sandbox's whole connection cap (512) of tunnels open at once, CONNECT
# and redirected: every one is admitted and echoes its own line (charging
# each its worst case at full size let about 90 in, held.c).
test_512_tunnels_held_open_at_once() {
  local out
  tun_setup tun-hold
  out=$(tun tun-hold hold "$TUN_IP" "$TUN_PORT" --parallel 512 \
    --proxy 127.0.0.1:3128 2>&1) || fail "512 CONNECT tunnels: $out"
  assert_contains "$out" "ok 512 held" "512 CONNECT tunnels"
  tun_setup tun-hold-r
  out=$(tun tun-hold-r hold "$TUN_IP" "$TUN_PORT" --parallel 512 2>&1) ||
    fail "512 redirected connections: $out"
  assert_contains "$out" "ok 512 held" "512 redirected connections"
  assert_daemon_alive
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$(daemon_pid)/status"; }

# An upstream that reads 80 KiB/s while the sandbox pushes as fast as it
# can: the tunnel takes only what the socket buffers and the pipe hold,
# and warrend's own memory does not grow with what the sandbox sends.
test_slow_reader_holds_little() {
  local before after sent pids=() i
  tun_setup tun-slow
  before=$(rss_kib)
  for i in 1 2 3 4 5 6 7 8; do
    tun tun-slow slow "$TUN_IP" "$TUN_PORT" --seconds 4 --proxy 127.0.0.1:3128 \
      >"$TUN_DIR/slow.$i" 2>&1 &
    pids+=($!)
  done
  sleep 3
  after=$(rss_kib)
  for i in "${pids[@]}"; do
    wait "$i" || fail "a slow push failed: $(cat "$TUN_DIR"/slow.*)"
  done
  for i in 1 2 3 4 5 6 7 8; do
    sent=$(cat "$TUN_DIR/slow.$i")
    [[ "$sent" =~ ^[0-9]+$ ]] || fail "slow push $i: $sent"
    # Sockets' buffers (the sandbox's, warrend's two, the server's) and a
    # pipe: a few MiB; an unbounded relay would take all 4 s could send.
    [ "$sent" -lt $((32 << 20)) ] ||
      fail "the tunnel took $sent bytes from a sandbox whose upstream reads 80 KiB/s"
  done
  [ $((after - before)) -lt $((16 << 10)) ] ||
    fail "warrend's RSS grew from $before to $after KiB under 8 slow tunnels"
}

# The server resets the connection after 1 MiB while the sandbox still
# sends: the sandbox sees the tunnel end (not a stall), the log has the
# connection with what it carried, and the next tunnel works.
test_reset_ends_tunnel() {
  local out path
  tun_setup tun-reset
  for path in "--proxy 127.0.0.1:3128" ""; do
    # shellcheck disable=SC2086
    out=$(tun tun-reset reset "$TUN_IP" "$TUN_PORT" --bytes $((1 << 20)) $path 2>&1) ||
      fail "after a reset upstream (${path:-redirected}): $out"
  done
  wait_until 10 tun_log_count tun-reset \
    ".allow and .port == $TUN_PORT and .bytes_up >= 1048576" 2 ||
    fail "the reset tunnels are not logged with their bytes: $(tun_log tun-reset '{kind, port, allow, bytes_up, reason}')"
  out=$(tun tun-reset down "$TUN_IP" "$TUN_PORT" --bytes 65536 --proxy 127.0.0.1:3128 2>&1) ||
    fail "a tunnel after the resets: $out"
  assert_daemon_alive
}
