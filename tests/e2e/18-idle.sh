# shellcheck shell=bash
# End-to-end: the idle pause. A sandbox created with --idle-pause 2 pauses
# itself about 2 s after its last activity, and does not while it works:
# a CPU loop, an exec stream or attached session, a download through the
# proxy. Any request wakes it and the clock starts again; a daemon killed
# and started again keeps the setting and never pauses a sandbox early.
# Sourced by tests/run-e2e, which provides lib.sh.

IDLE_DIR=$WR_RUN/idle
IDLE_IP=$(ip -4 -o addr show scope global 2>/dev/null |
  awk '{ sub(/\/.*/, "", $4); print $4; exit }')

state_of() { # NAME
  "$WARREN" inspect --json "$1" | jq -r .state
}

is_state() { # NAME STATE
  [ "$(state_of "$1")" = "$2" ]
}

# Stays in STATE for SECS seconds (checked every 0.2 s).
stays() { # SECS NAME STATE
  local end=$(($(now_ms) + $1 * 1000))
  while [ "$(now_ms)" -lt "$end" ]; do
    is_state "$2" "$3" || return 1
    sleep 0.2
  done
}

test_pauses_after_idle_and_wakes_on_exec() {
  local t0 t1 ms out
  new_sandbox idle-a --idle-pause 2
  out=$("$WARREN" inspect --json idle-a)
  assert_eq 2 "$(jq -r .idle.pause_after_s <<<"$out")" "pause_after_s"
  t0=$(now_ms)
  wait_until 8 is_state idle-a paused || fail "idle-a never paused: $(state_of idle-a)"
  t1=$(now_ms)
  ms=$((t1 - t0))
  [ "$ms" -ge 1500 ] || fail "paused after ${ms} ms, before its 2 s"
  out=$("$WARREN" inspect --json idle-a)
  assert_eq true "$(jq -r .idle.paused_by_idle <<<"$out")" "paused_by_idle"
  # A request wakes it and goes on; the clock starts again.
  assert_eq woke "$("$WARREN" exec idle-a -- echo woke)" "exec after the idle pause"
  assert_eq running "$(state_of idle-a)"
  out=$("$WARREN" inspect --json idle-a)
  assert_eq false "$(jq -r .idle.paused_by_idle <<<"$out")" "paused_by_idle after a wake"
  # The event stream tells an idle pause from a client's, and what woke it.
  # By id: the journal outlives sandboxes, and an earlier run's idle-a
  # had the same name.
  out=$("$WARREN" events --json --sandbox "$("$WARREN" inspect --json idle-a | jq -r .id)")
  assert_eq "created started idle-paused resumed" \
    "$(jq -r .type <<<"$out" | tr '\n' ' ' | sed 's/ $//')" "idle-a's events"
  assert_eq exec "$(jq -r 'select(.type == "resumed") | .by' <<<"$out")" "resumed by"
  assert_eq 2 "$(jq -r 'select(.type == "idle-paused") | .idle_s' <<<"$out")" "idle_s"
  wait_until 8 is_state idle-a paused || fail "idle-a did not pause again"
  # cp (the files API) wakes it too.
  echo hello >"$WR_RUN/idle-file"
  "$WARREN" cp "$WR_RUN/idle-file" idle-a:/tmp/f || fail "cp into an idle-paused sandbox"
  assert_eq hello "$("$WARREN" exec idle-a -- cat /tmp/f)"
  rm -f "$WR_RUN/idle-file"
}

test_never_and_the_daemon_default() {
  new_sandbox idle-never --idle-pause 0
  new_sandbox idle-default
  stays 4 idle-never running || fail "an --idle-pause 0 sandbox paused"
  assert_eq 300 "$("$WARREN" inspect --json idle-default | jq -r .idle.pause_after_s)" \
    "the daemon's default"
  is_state idle-default running || fail "a default sandbox paused within seconds"
  "$WARREN" ls | grep -E '^idle-never +running +[0-9]+s ' >/dev/null ||
    fail "ls shows no IDLE time: $("$WARREN" ls)"
}

test_cpu_loop_keeps_it_awake() {
  local kind
  new_sandbox idle-cpu --idle-pause 2
  "$WARREN" exec -d idle-cpu -- sh -c 'while :; do :; done' >/dev/null
  stays 5 idle-cpu running || fail "paused while a CPU loop ran"
  kind=$("$WARREN" inspect --json idle-cpu | jq -r .idle.last_activity.kind)
  assert_eq cpu "$kind" "what kept it awake"
  "$WARREN" exec idle-cpu -- pkill -f 'while :' || true
  wait_until 8 is_state idle-cpu paused || fail "did not pause once the loop ended"
}

test_exec_stream_and_attach_keep_it_awake() {
  local pid
  new_sandbox idle-stream --idle-pause 2
  # A foreground exec that prints nothing for 5 s: its stream is open.
  "$WARREN" exec idle-stream -- sleep 5 &
  pid=$!
  stays 4 idle-stream running || fail "paused while an exec stream was open"
  wait "$pid" || fail "the exec failed"
  wait_until 8 is_state idle-stream paused || fail "did not pause after the exec"
  # A background process with `logs --follow` attached to it.
  "$WARREN" exec idle-stream -- true >/dev/null
  "$WARREN" exec -d --tag quiet idle-stream -- sleep 600 >/dev/null
  "$WARREN" logs -f idle-stream quiet >/dev/null 2>&1 &
  pid=$!
  stays 4 idle-stream running || fail "paused while logs --follow was attached"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
  wait_until 8 is_state idle-stream paused || fail "did not pause once logs ended"
}

# A download through the proxy that trickles for 5 s: the connection is
# open, so the sandbox is busy even though it uses no CPU.
test_proxied_download_keeps_it_awake() {
  local srv port rule out
  [ -n "$IDLE_IP" ] || fail "this host has no global IPv4 address"
  mkdir -p "$IDLE_DIR"
  rm -f "$IDLE_DIR/port" # a file from an earlier run names a dead port
  python3 - "$IDLE_IP" "$IDLE_DIR/port" <<'EOF' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 0))
s.listen(4)
open(sys.argv[2], "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n")
    for _ in range(10):
        time.sleep(0.5)
        c.sendall(b"x")
    c.close()
EOF
  srv=$!
  # shellcheck disable=SC2154 # s is the trap's own loop variable
  trap 'kill '"$srv"' 2>/dev/null || true; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  wait_until 5 test -s "$IDLE_DIR/port" || fail "no trickle server"
  port=$(cat "$IDLE_DIR/port")
  WR_CLEANUP="${WR_CLEANUP:-} idle-net"
  "$WARREN" rm -f idle-net >/dev/null 2>&1 || true
  "$WARREN" create --name idle-net --idle-pause 2 >/dev/null || fail "create idle-net"
  out=$("$WARREN" policy allow network --sandbox idle-net "$IDLE_IP:$port" 2>&1) ||
    fail "policy allow: $out"
  rule=$(sed -n 's/^rule \([^:]*\):.*/\1/p' <<<"$out" | head -1)
  # In the background, so that no exec stream is open: only the
  # connection (no CPU, no request) keeps it awake for the 5 s.
  "$WARREN" exec -d --tag dl idle-net -- \
    curl -s -m 20 -o /tmp/body "http://$IDLE_IP:$port/" >/dev/null ||
    fail "could not start the download"
  stays 4 idle-net running ||
    fail "paused during the download ($("$WARREN" inspect --json idle-net | jq -c .idle); curl: $("$WARREN" logs idle-net dl 2>&1))"
  assert_eq network "$("$WARREN" inspect --json idle-net | jq -r .idle.last_activity.kind)" \
    "what kept it awake"
  wait_until 10 is_state idle-net paused || fail "did not pause after the download"
  assert_eq xxxxxxxxxx "$("$WARREN" exec idle-net -- cat /tmp/body)" "the trickled body"
  kill "$srv" 2>/dev/null
  wait "$srv" 2>/dev/null || true
  "$WARREN" policy rm "$rule" >/dev/null 2>&1 || true
}

# The setting is the sandbox's (stored); a daemon killed and started again
# starts the clock afresh for a running sandbox (never pauses it early),
# and one the idle pause paused stays paused and wakes on a request.
test_restart_keeps_idle_coherent() {
  new_sandbox idle-r1 --idle-pause 2
  new_sandbox idle-r2 --idle-pause 3
  wait_until 8 is_state idle-r1 paused || fail "idle-r1 never paused"
  kill -KILL "$(daemon_pid)"
  sleep 0.5
  start_daemon
  assert_eq paused "$(state_of idle-r1)" "idle-r1 after the restart"
  assert_eq 3 "$("$WARREN" inspect --json idle-r2 | jq -r .idle.pause_after_s)" \
    "idle-r2's setting after the restart"
  is_state idle-r2 running || is_state idle-r2 paused ||
    fail "idle-r2 is $(state_of idle-r2)"
  if is_state idle-r2 running; then
    stays 1 idle-r2 running || fail "idle-r2 paused at once after the restart"
  fi
  wait_until 8 is_state idle-r2 paused || fail "idle-r2 never paused after the restart"
  assert_eq back "$("$WARREN" exec idle-r1 -- echo back)" "exec wakes idle-r1"
}

# Each daemon start reattaches to a paused sandbox with a connection its
# frozen init never accepts: past its backlog (8), a start used to block
# for good in connect(). Twelve SIGKILLed starts later, the daemon starts,
# the sandbox is still paused, and a request wakes it.
test_many_restarts_with_a_paused_sandbox() {
  local i
  new_sandbox idle-frozen --idle-pause 0
  # The counter renames its file into place: a pause between the
  # truncation and the write of `echo >/tmp/n` would leave it empty.
  # shellcheck disable=SC2016 # expanded inside, by sh
  "$WARREN" exec -d --tag count idle-frozen -- sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.1; done' >/dev/null
  wait_until 5 "$WARREN" exec idle-frozen -- test -s /tmp/n ||
    fail "the counter never wrote"
  "$WARREN" pause idle-frozen >/dev/null
  for i in $(seq 1 12); do
    kill -KILL "$(daemon_pid)"
    sleep 0.2
    start_daemon
    assert_eq paused "$(state_of idle-frozen)" "after start $i"
  done
  assert_eq ok "$("$WARREN" exec idle-frozen -- sh -c 'test -s /tmp/n && echo ok')" \
    "exec after twelve restarts"
}

test_bad_values_refused() {
  local out
  out=$("$WARREN" create --name idle-bad --idle-pause 1.5s 2>&1) && fail "1.5s accepted"
  assert_contains "$out" "--idle-pause"
  out=$("$WARREN" create --name idle-bad --idle-pause 800h 2>&1) && fail "33 days accepted"
  assert_contains "$out" "30 days"
  out=$(api POST /v1/sandboxes -d '{"name":"idle-bad","idle_pause":-5}')
  assert_contains "$out" "idle_pause"
  out=$(api POST /v1/sandboxes -d '{"name":"idle-bad","idle_pause":"soon"}')
  assert_contains "$out" "idle_pause"
  "$WARREN" inspect idle-bad >/dev/null 2>&1 && fail "a refused create left a sandbox"
  return 0
}
