# Lifecycle events (GET /v1/events, `warren events`): every transition
# once and in order; replay with Last-Event-ID after a reconnect and after
# a daemon restart, SIGKILL too; filters; a stalled reader is cut off
# without harm to the daemon or other readers; 100 readers at once.
# Sourced by tests/run-e2e, which provides lib.sh.
# shellcheck disable=SC2016

# A small journal, so that a stalled reader falls out of it quickly.
daemon_args() { echo --events-journal 64; }

ev_last_id() {
  api GET '/v1/events?limit=1' | jq -r .last_id
}

# The types of NAME's events in a journal reply (JSON on stdin), one line.
ev_types() { # NAME
  jq -r --arg n "$1" '[.events[] | select(.sandbox.name == $n) | .type] |
    join(" ")'
}

# Follow the SSE stream into FILE for SECS seconds (curl in the background).
ev_follow() { # FILE SECS [curl args...]
  local file=$1 secs=$2
  shift 2
  curl -sN -m "$secs" --unix-socket "$WR_SOCK" \
    -H 'Accept: text/event-stream' "$@" >"$file" 2>/dev/null &
}

# The "event:" names in an SSE capture, one line.
sse_types() { # FILE
  sed -n 's/^event: //p' "$1" | tr '\n' ' ' | sed 's/ $//'
}

ev_restart() {
  stop_daemon
  # shellcheck disable=SC2046
  start_daemon $(daemon_args)
}

test_cycle_appears_once_in_order() {
  local since out got journal ids
  out=$(mktemp)
  since=$(ev_last_id)
  ev_follow "$out" 30 "http://warren/v1/events?since=$since&sandbox=ev-cycle"
  sleep 0.3
  new_sandbox ev-cycle
  "$WARREN" pause ev-cycle >/dev/null
  "$WARREN" resume ev-cycle >/dev/null
  "$WARREN" stop ev-cycle >/dev/null
  "$WARREN" start ev-cycle >/dev/null
  "$WARREN" rm -f ev-cycle >/dev/null
  wait_until 5 grep -q '^event: removed' "$out" || fail "no removed event"
  got=$(sse_types "$out")
  assert_eq "created started paused resumed stopped started stopped removed" \
    "$got" "the stream's events"
  journal=$(api GET "/v1/events?since=$since")
  assert_eq "$got" "$(ev_types ev-cycle <<<"$journal")" "the journal's events"
  # Ids increase, and the stream's ids are the journal's.
  ids=$(sed -n 's/^id: //p' "$out" | tr '\n' ' ')
  assert_eq "$ids" "$(jq -r '[.events[] | select(.sandbox.name == "ev-cycle")
    | .id | tostring] | join(" ")' <<<"$journal") " "ids"
  sort -n -c <<<"$(tr ' ' '\n' <<<"$ids" | sed '/^$/d')" ||
    fail "ids do not increase: $ids"
  # A stop says why; the CLI prints the same, one line each.
  jq -e '.events[] | select(.type == "stopped") | .reason == "requested"' \
    <<<"$journal" >/dev/null || fail "stopped without its reason"
  got=$("$WARREN" events --since "$since" --sandbox ev-cycle | awk '{print $2}' |
    tr '\n' ' ')
  assert_eq "created started paused resumed stopped started stopped removed " \
    "$got" "warren events"
  "$WARREN" events --json --since "$since" --sandbox ev-cycle |
    jq -e -s 'length == 8 and .[0].type == "created"' >/dev/null ||
    fail "warren events --json"
}

test_replay_with_last_event_id() {
  local since out first rest
  since=$(ev_last_id)
  new_sandbox ev-replay
  "$WARREN" pause ev-replay >/dev/null
  "$WARREN" resume ev-replay >/dev/null
  sleep 0.1
  # A client saw the first two events and reconnects from the second.
  first=$(api GET "/v1/events?since=$since&sandbox=ev-replay" |
    jq -r '.events[1].id')
  out=$(mktemp)
  curl -sN -m 1 --unix-socket "$WR_SOCK" -H 'Accept: text/event-stream' \
    -H "Last-Event-ID: $first" "http://warren/v1/events?sandbox=ev-replay" \
    >"$out" || true
  assert_eq "paused resumed" "$(sse_types "$out")" "replayed after $first"
  # ?since means the same; Last-Event-ID wins over it.
  rest=$(api GET "/v1/events?follow=false&since=$first&sandbox=ev-replay" |
    ev_types ev-replay)
  assert_eq "paused resumed" "$rest" "since=$first"
  rest=$(api GET "/v1/events?follow=false&since=0&sandbox=ev-replay" \
    -H "Last-Event-ID: $first" | ev_types ev-replay)
  assert_eq "paused resumed" "$rest" "Last-Event-ID over since"
  assert_api_error "$(api GET '/v1/events' -H 'Last-Event-ID: abc')" \
    bad_request "a bad Last-Event-ID"
}

test_replay_after_restart_and_sigkill() {
  local since before after out err
  since=$(ev_last_id)
  out=$(mktemp)
  err=$(mktemp)
  "$WARREN" events --follow --since "$since" --sandbox ev-restart \
    >"$out" 2>"$err" &
  local follower=$!
  new_sandbox ev-restart
  "$WARREN" pause ev-restart >/dev/null
  sleep 0.2 # the journal's batch is written (at most 20 ms)
  ev_restart
  assert_eq "created started paused" \
    "$(api GET "/v1/events?since=$since" | ev_types ev-restart)" \
    "the journal after a restart"
  before=$(ev_last_id)
  "$WARREN" resume ev-restart >/dev/null
  sleep 0.2
  kill_daemon
  # shellcheck disable=SC2046
  start_daemon $(daemon_args)
  assert_eq "created started paused resumed" \
    "$(api GET "/v1/events?since=$since" | ev_types ev-restart)" \
    "the journal after SIGKILL"
  "$WARREN" stop ev-restart >/dev/null
  after=$(api GET "/v1/events?since=$before&type=stopped" |
    jq -r '.events[0].id')
  [ "$after" -gt "$before" ] || fail "ids went back after SIGKILL: $after"
  # The follower went on across both restarts, printing each event once.
  wait_until 10 grep -q ' stopped ' "$out" || fail "the follower missed stop"
  kill "$follower" 2>/dev/null || true
  assert_eq "created started paused resumed stopped" \
    "$(awk '{print $2}' "$out" | tr '\n' ' ' | sed 's/ $//')" "followed"
  assert_contains "$(cat "$err")" "reconnecting from event" "the follower"
}

test_filters() {
  local since all
  since=$(ev_last_id)
  new_sandbox ev-fa
  new_sandbox ev-fb
  "$WARREN" pause ev-fa ev-fb >/dev/null
  "$WARREN" resume ev-fb >/dev/null
  sleep 0.1
  all=$(api GET "/v1/events?since=$since&sandbox=ev-fa")
  assert_eq "created started paused" "$(ev_types ev-fa <<<"$all")" "by name"
  assert_eq "" "$(ev_types ev-fb <<<"$all")" "other sandbox"
  all=$(api GET "/v1/events?since=$since&sandbox=$(sb_get ev-fb .id)")
  assert_eq "created started paused resumed" "$(ev_types ev-fb <<<"$all")" \
    "by id"
  all=$(api GET "/v1/events?since=$since&type=paused,resumed")
  assert_eq "paused" "$(ev_types ev-fa <<<"$all")" "by type (a)"
  assert_eq "paused resumed" "$(ev_types ev-fb <<<"$all")" "by type (b)"
  assert_api_error "$(api GET '/v1/events?type=Paused')" bad_request "type"
  assert_api_error "$(api GET '/v1/events?type=a,,b')" bad_request "type"
  assert_api_error "$(api GET '/v1/events?since=-1')" bad_request "since"
}

# A reader that never reads: the daemon queues at most a little for it
# (its socket buffer and 64 KiB), cuts it off with a last "cutoff" event
# once events it has not had leave the journal, and meanwhile serves a
# normal reader every event and answers requests.
test_stalled_client_is_cut_off() {
  local since out stalled urls i id n
  since=$(ev_last_id)
  out=$(mktemp)
  stalled=$(mktemp)
  new_sandbox ev-stall
  ev_follow "$out" 120 "http://warren/v1/events?since=$since&sandbox=ev-stall"
  python3 - "$WR_SOCK" "$stalled" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/events?follow=true HTTP/1.1\r\nHost: w\r\n\r\n")
for _ in range(1200):  # stalled: reads nothing until told to
    try:
        open(sys.argv[2] + ".go").close()
        break
    except OSError:
        time.sleep(0.05)
data = b""
s.settimeout(10)
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except socket.timeout:
    data += b"\nTIMEOUT\n"
open(sys.argv[2], "wb").write(data)
PY
  local stalled_pid=$!
  sleep 0.5
  id=$(sb_get ev-stall .id)
  urls=()
  for i in $(seq 1 3000); do
    urls+=("http://warren/v1/sandboxes/$id/pause"
      "http://warren/v1/sandboxes/$id/resume")
  done
  curl -s --unix-socket "$WR_SOCK" -X POST "${urls[@]}" >/dev/null
  grep -q 'cut off' "$WR_LOG" || fail "the stalled reader was not cut off"
  assert_daemon_alive
  api GET /v1/info >/dev/null || fail "the daemon does not answer"
  # The other reader got all 6000 transitions, in order.
  wait_until 20 test "$(grep -c '^event: resumed' "$out")" -ge 3000 ||
    fail "the normal reader missed events: $(grep -c '^event:' "$out")"
  n=$(grep -c '^event: paused' "$out")
  assert_eq 3000 "$n" "paused events"
  sed -n 's/^event: //p' "$out" | awk 'NR > 2 {
      if ($0 != (NR % 2 ? "paused" : "resumed")) bad = 1 } END { exit bad }' ||
    fail "the normal reader's events are out of order"
  touch "$stalled.go"
  wait "$stalled_pid"
  assert_not_contains "$(tail -c 200 "$stalled")" TIMEOUT "the cut stream"
  assert_eq "cutoff" "$(sed -n 's/^event: //p' "$stalled" | tail -1)" \
    "the stalled reader's last event"
}

test_hundred_clients() {
  local since dir i
  since=$(ev_last_id)
  dir=$(mktemp -d)
  new_sandbox ev-many
  for i in $(seq 1 100); do
    ev_follow "$dir/$i" 20 "http://warren/v1/events?since=$since&type=paused,resumed&sandbox=ev-many"
  done
  sleep 1
  "$WARREN" pause ev-many >/dev/null
  "$WARREN" resume ev-many >/dev/null
  for i in $(seq 1 100); do
    wait_until 10 grep -q '^event: resumed' "$dir/$i" ||
      fail "reader $i missed events: $(cat "$dir/$i")"
    assert_eq "paused resumed" "$(sse_types "$dir/$i")" "reader $i"
  done
  assert_daemon_alive
  rm -rf "$dir"
}
