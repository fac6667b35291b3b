# shellcheck shell=bash
# End-to-end: a paused sandbox wakes for any request and loses nothing.
#
# exec, cp and the files API, logs (attach's output stream) and a
# connection to a published port each wake a paused sandbox and then
# succeed, with no error and no change on the client's side; inspect
# says what woke it. Requests that come together share one thaw. Twenty
# rounds of pause and wake keep the same processes and pids, a counter
# that goes on counting, a loopback TCP connection inside and the files.

# The background processes of a sandbox and their pids: what must not
# change.
wk_pids() { # NAME
  "$WARREN" ps --json "$1" |
    jq -r '[.[] | select(.running) | "\(.tag)=\(.pid)"] | sort | join(" ")'
}

wk_paused() { # NAME
  "$WARREN" pause "$1" >/dev/null
  assert_eq paused "$(sb_state "$1")" "paused"
}

# The woken sandbox runs, and says what woke it.
wk_woken_by() { # NAME BY
  assert_eq running "$(sb_state "$1")" "state after the $2 request"
  assert_eq "$2" "$(sb_get "$1" .last_wake.by)" "what woke it"
  [ "$(sb_get "$1" .last_wake.at)" != null ] || fail "no last_wake.at"
}

# A port that is free now, below the ephemeral range.
wk_free_port() {
  python3 -c 'import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    port = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break'
}

test_exec_wakes_a_paused_sandbox() {
  new_sandbox wk-exec
  wk_paused wk-exec
  assert_eq null "$(sb_get wk-exec .last_wake)" "no wake yet"
  assert_eq hello "$("$WARREN" exec wk-exec -- echo hello)" "exec while paused"
  wk_woken_by wk-exec exec
  assert_contains "$("$WARREN" inspect wk-exec)" "woken:     by exec" "inspect"
  # pause then exec again: the explicit pause is undone by the exec.
  wk_paused wk-exec
  "$WARREN" exec wk-exec -- true
  wk_woken_by wk-exec exec
  # An explicit resume says so.
  wk_paused wk-exec
  "$WARREN" resume wk-exec >/dev/null
  wk_woken_by wk-exec api
}

test_files_and_logs_wake_a_paused_sandbox() {
  local tmp out
  tmp=$(mktemp -d)
  new_sandbox wk-files
  "$WARREN" exec wk-files -- sh -c 'echo kept >/root/f'
  "$WARREN" exec -d --tag talker wk-files -- sh -c 'echo said-it; sleep 1000' \
    >/dev/null
  wk_paused wk-files
  "$WARREN" cp wk-files:/root/f "$tmp/f"
  assert_eq kept "$(cat "$tmp/f")" "cp out of a paused sandbox"
  wk_woken_by wk-files files

  wk_paused wk-files
  api_call GET "/v1/sandboxes/wk-files/files/stat?path=/root/f"
  assert_eq 200 "$API_STATUS" "stat while paused ($API_BODY)"
  wk_woken_by wk-files files

  wk_paused wk-files
  out=$("$WARREN" logs wk-files talker)
  assert_eq said-it "$out" "logs while paused"
  wk_woken_by wk-files attach
  rm -rf "$tmp"
}

test_requests_together_share_one_wake() {
  local pids=() i before after
  new_sandbox wk-many
  wk_paused wk-many
  before=$(grep -c "sandbox wk-many woken" "$WR_LOG" || true)
  for i in 1 2 3 4 5 6; do
    "$WARREN" exec wk-many -- echo "n$i" >"$WR_RUN/wk-many.$i" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || fail "exec $((i + 1)): $(cat "$WR_RUN/wk-many.$((i + 1))")"
  done
  for i in 1 2 3 4 5 6; do
    assert_eq "n$i" "$(cat "$WR_RUN/wk-many.$i")" "exec $i"
  done
  after=$(grep -c "sandbox wk-many woken" "$WR_LOG" || true)
  assert_eq 1 "$((after - before))" "thaws for six requests"
  wk_woken_by wk-many exec
}

test_published_port_wakes_a_paused_sandbox() {
  local hp out
  new_sandbox wk-port
  "$WARREN" exec wk-port -- sh -c 'mkdir -p /srv/www && echo served >/srv/www/index.html'
  "$WARREN" exec -d --tag web wk-port -- \
    python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/www >/dev/null
  hp=$(wk_free_port)
  "$WARREN" ports wk-port --publish "$hp:8000" >/dev/null || fail "publish $hp"
  wait_until 10 curl -sf "http://127.0.0.1:$hp/" || fail "the server never answered"
  wk_paused wk-port
  out=$(curl -sS --max-time 10 "http://127.0.0.1:$hp/") || fail "curl while paused"
  assert_eq served "$out" "the answer of a paused sandbox's server"
  wk_woken_by wk-port port
}

# Twenty rounds of pause and wake: the same processes, a counter that
# counts on, a TCP connection on loopback inside that carries on, and
# files unchanged.
test_twenty_wakes_lose_nothing() {
  local before after sum1 sum2 a b i lines1 lines2 init tag
  new_sandbox wk-keep
  "$WARREN" exec wk-keep -- sh -c 'head -c 1048576 /dev/urandom >/root/blob'
  sum1=$("$WARREN" exec wk-keep -- sha256sum /root/blob)
  "$WARREN" exec -d --tag counter wk-keep -- sh -c \
    'i=0; while :; do i=$((i+1)); echo $i >/tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.02; done' >/dev/null
  # A server and a client on one loopback connection: the client writes a
  # line every 20 ms and counts the echoes in /tmp/echoes; a broken
  # connection ends it. Both counters are replaced whole (rename), so
  # that a read never sees a file half written.
  "$WARREN" exec -d --tag echo-server wk-keep -- python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7000)); s.listen(1)
c, _ = s.accept()
while True:
    d = c.recv(4096)
    if not d:
        break
    c.sendall(d)' >/dev/null
  sleep 0.3
  "$WARREN" exec -d --tag echo-client wk-keep -- python3 -c '
import os, socket, time
c = socket.create_connection(("127.0.0.1", 7000))
n = 0
while True:
    c.sendall(b"x\n")
    if c.recv(16) != b"x\n":
        raise SystemExit("bad echo")
    n += 1
    open("/tmp/echoes.new", "w").write(str(n))
    os.replace("/tmp/echoes.new", "/tmp/echoes")
    time.sleep(0.02)' >/dev/null
  wait_until 10 "$WARREN" exec wk-keep -- test -s /tmp/echoes ||
    fail "the echo client never counted"
  before=$(wk_pids wk-keep)
  init=$(sb_get wk-keep .pid)
  lines1=$("$WARREN" exec wk-keep -- cat /tmp/echoes)
  for i in $(seq 1 20); do
    "$WARREN" pause wk-keep >/dev/null
    case $((i % 3)) in
      0) "$WARREN" exec wk-keep -- true ;;
      1) "$WARREN" cp wk-keep:/tmp/n - >/dev/null ;;
      2) "$WARREN" resume wk-keep >/dev/null ;;
    esac
    assert_eq running "$(sb_state wk-keep)" "round $i"
  done
  a=$("$WARREN" exec wk-keep -- cat /tmp/n)
  sleep 0.3
  b=$("$WARREN" exec wk-keep -- cat /tmp/n)
  [ "$b" -gt "$a" ] || fail "the counter stopped ($a -> $b)"
  lines2=$("$WARREN" exec wk-keep -- cat /tmp/echoes)
  [ "$lines2" -gt "$lines1" ] || fail "the loopback connection stopped ($lines1 -> $lines2)"
  after=$(wk_pids wk-keep)
  assert_eq "$before" "$after" "the processes and their pids"
  assert_eq "$init" "$(sb_get wk-keep .pid)" "init's pid"
  for tag in counter echo-server echo-client; do
    assert_eq true "$("$WARREN" ps --json wk-keep |
      jq -r --arg t "$tag" '.[] | select(.tag == $t) | .running')" "$tag runs"
  done
  sum2=$("$WARREN" exec wk-keep -- sha256sum /root/blob)
  assert_eq "$sum1" "$sum2" "the file after 20 wakes"
}
