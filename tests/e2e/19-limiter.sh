# shellcheck shell=bash
# End-to-end: the limiter. With --max-running 2, a third create pauses the
# least recently active idle sandbox; with both busy (an open exec
# stream), it waits as #1 in line and gets the slot when one stops; a wait
# times out with 503 queue_timeout and Retry-After; --max-resident stops
# the least recently active paused one; an exec on a paused sandbox under
# a full limit evicts another idle one; twenty concurrent creates never
# take more than two slots; a daemon killed under a waiting create leaves
# a retryable error. Sandboxes never pause on their own here (--idle-pause
# 0), so every pause is the limiter's.
# Sourced by tests/run-e2e, which provides lib.sh.

daemon_args() { echo --max-running 2 --idle-pause 0 --queue-timeout 60; }

LIM_DIR=$WR_RUN/limiter

state_of() { # NAME
  "$WARREN" inspect --json "$1" | jq -r .state
}

is_state() { # NAME STATE
  [ "$(state_of "$1")" = "$2" ]
}

limiter() { # JQ-FILTER
  api GET /v1/info | jq -r ".limiter | $1"
}

running_count() {
  "$WARREN" ls --json | jq '[.[] | select(.state == "running")] | length'
}

# An exec stream held open in the background: the sandbox is busy while
# it lasts. Its pid goes in $LIM_DIR/NAME.hold.
hold_busy() { # NAME
  mkdir -p "$LIM_DIR"
  "$WARREN" exec "$1" -- sh -c 'touch /tmp/held; exec sleep 600' >/dev/null 2>&1 &
  echo $! >"$LIM_DIR/$1.hold"
  wait_until 10 busy_seen "$1" || fail "the exec stream in $1 never started"
}

busy_seen() { # NAME
  "$WARREN" exec "$1" -- test -f /tmp/held 2>/dev/null
}

let_go() { # NAME
  local pid
  pid=$(cat "$LIM_DIR/$1.hold" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  rm -f "$LIM_DIR/$1.hold"
}

lim_cleanup() {
  local f
  for f in "$LIM_DIR"/*.hold; do
    [ -e "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  return 0
}

test_info_shows_the_limits() {
  assert_eq 2 "$(limiter .max_running)" "max_running"
  assert_eq 0 "$(limiter .max_resident)" "max_resident (no limit)"
  assert_eq 60 "$(limiter .queue_timeout)" "queue_timeout"
  assert_eq 0 "$(limiter .queued)" "queued"
}

test_third_create_pauses_the_least_recently_active() {
  new_sandbox lim-a
  new_sandbox lim-b
  # lim-a is the more recently active: lim-b must go.
  "$WARREN" exec lim-a -- true
  new_sandbox lim-c
  assert_eq paused "$(state_of lim-b)" "lim-b (least recently active)"
  assert_eq running "$(state_of lim-a)" "lim-a"
  assert_eq running "$(state_of lim-c)" "lim-c"
  assert_eq 2 "$(running_count)" "running"
  local id out
  id=$("$WARREN" inspect --json lim-b | jq -r .id)
  out=$("$WARREN" events --json --sandbox "$id" | jq -c 'select(.type == "evicted")')
  assert_eq paused "$(jq -r .action <<<"$out")" "evicted's action"
  assert_eq create "$(jq -r .for <<<"$out")" "evicted for"
}

test_exec_on_a_paused_one_evicts_another() {
  new_sandbox lim-a
  new_sandbox lim-b
  "$WARREN" pause lim-a >/dev/null
  new_sandbox lim-c
  "$WARREN" exec lim-c -- true # lim-b is now the least recently active
  assert_eq woke "$("$WARREN" exec lim-a -- echo woke)" "exec on a paused sandbox"
  assert_eq paused "$(state_of lim-b)" "lim-b made room"
  assert_eq running "$(state_of lim-a)" "lim-a"
  assert_eq 2 "$(running_count)" "running"
}

test_waits_in_line_when_both_are_busy() {
  trap 'lim_cleanup; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  new_sandbox lim-a
  new_sandbox lim-b
  hold_busy lim-a
  hold_busy lim-b
  "$WARREN" rm -f lim-c >/dev/null 2>&1 || true
  WR_CLEANUP="$WR_CLEANUP lim-c"
  "$WARREN" create --name lim-c >"$LIM_DIR/c.out" 2>"$LIM_DIR/c.err" &
  local pid=$!
  wait_until 10 grep -q "waiting for a free sandbox, #1 in line" "$LIM_DIR/c.err" ||
    fail "no place in line printed: $(cat "$LIM_DIR/c.err")"
  assert_eq 1 "$(limiter .queued)" "queued"
  # No phantom: the sandbox is not there until it has its slot.
  "$WARREN" inspect lim-c >/dev/null 2>&1 && fail "lim-c exists while it waits"
  assert_eq running "$(state_of lim-a)" "a busy sandbox is not evicted"
  assert_eq running "$(state_of lim-b)" "a busy sandbox is not evicted"
  let_go lim-b
  "$WARREN" stop lim-b >/dev/null
  wait "$pid" || fail "the waiting create failed: $(cat "$LIM_DIR/c.err")"
  assert_eq lim-c "$(cat "$LIM_DIR/c.out")" "the create's output"
  assert_eq running "$(state_of lim-c)" "lim-c"
  assert_eq 2 "$(running_count)" "running"
  local out
  out=$("$WARREN" events --json --type dequeued | jq -c 'select(.for == "create")' | tail -1)
  assert_eq granted "$(jq -r .outcome <<<"$out")" "dequeued's outcome"
  [ "$(jq -r .waited_ms <<<"$out")" -gt 0 ] || fail "waited_ms: $out"
}

test_queue_timeout_is_503_and_retryable() {
  trap 'lim_cleanup; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  new_sandbox lim-a
  new_sandbox lim-b
  hold_busy lim-a
  hold_busy lim-b
  local head rc=0
  head=$(curl -s -i --unix-socket "$WR_SOCK" -X POST -H 'Content-Type: application/json' \
    -d '{"name":"lim-t","queue_timeout":1}' http://warren/v1/sandboxes)
  assert_contains "$head" "HTTP/1.1 503" "status"
  assert_contains "$head" "Retry-After: " "Retry-After"
  assert_contains "$head" '"code":"queue_timeout"' "code"
  "$WARREN" inspect lim-t >/dev/null 2>&1 && fail "a timed out create made a sandbox"
  # The CLI: the message, non-zero, and that it can be retried.
  "$WARREN" create --name lim-t --queue-timeout 1 >/dev/null 2>"$LIM_DIR/t.err" || rc=$?
  assert_eq 124 "$rc" "create's exit status"
  assert_contains "$(cat "$LIM_DIR/t.err")" "it can be retried" "the message"
  # The streamed form ends with the error as its last line.
  local body
  body=$(curl -s --unix-socket "$WR_SOCK" -X POST -H 'Content-Type: application/json' \
    -d '{"name":"lim-t","queue_timeout":1,"stream":true}' http://warren/v1/sandboxes)
  assert_eq 1 "$(head -1 <<<"$body" | jq -r .queued.position)" "the first line"
  assert_eq queue_timeout "$(tail -1 <<<"$body" | jq -r .error.code)" "the last line"
  assert_eq 0 "$(limiter .queued)" "nothing left in line"
}

test_a_client_that_leaves_leaves_the_line() {
  trap 'lim_cleanup; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  new_sandbox lim-a
  new_sandbox lim-b
  hold_busy lim-a
  hold_busy lim-b
  timeout 1 "$WARREN" create --name lim-gone >/dev/null 2>&1 || true
  wait_until 5 [ "$(limiter .queued)" = 0 ] || fail "still in line: $(limiter .queued)"
  let_go lim-b
  "$WARREN" stop lim-b >/dev/null
  "$WARREN" inspect lim-gone >/dev/null 2>&1 && fail "a create whose client left made a sandbox"
  assert_eq 1 "$(running_count)" "running"
}

test_twenty_concurrent_creates_never_exceed_two() {
  local i pids=() max=0 n rc ok=0
  mkdir -p "$LIM_DIR"
  for i in $(seq 1 20); do
    "$WARREN" rm -f "lim-p$i" >/dev/null 2>&1 || true
    WR_CLEANUP="${WR_CLEANUP:-} lim-p$i"
  done
  trap 'for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  for i in $(seq 1 20); do
    "$WARREN" create --name "lim-p$i" >/dev/null 2>"$LIM_DIR/p$i.err" &
    pids+=($!)
  done
  while :; do
    n=$(limiter .running)
    [ "$n" -gt "$max" ] && max=$n
    n=$(running_count)
    [ "$n" -gt "$max" ] && max=$n
    jobs -r | grep -q . || break
  done
  for i in "${!pids[@]}"; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    [ "$rc" = 0 ] && ok=$((ok + 1))
    [ "$rc" = 0 ] || [ "$rc" = 124 ] ||
      fail "create lim-p$((i + 1)) failed ($rc): $(cat "$LIM_DIR/p$((i + 1)).err")"
  done
  [ "$max" -le 2 ] || fail "$max running at once, with --max-running 2"
  assert_eq 20 "$ok" "creates that succeeded"
  assert_eq 2 "$(running_count)" "running at the end"
  assert_eq 18 "$("$WARREN" ls --json | jq '[.[] | select(.name | startswith("lim-p")) | select(.state == "paused")] | length')" "paused at the end"
}

test_max_resident_stops_the_least_recent_paused() {
  stop_daemon
  start_daemon --max-running 2 --max-resident 3 --idle-pause 0
  new_sandbox lim-a
  new_sandbox lim-b
  new_sandbox lim-c # pauses lim-a
  assert_eq paused "$(state_of lim-a)" "lim-a"
  new_sandbox lim-d # resident 3 of 3: stops lim-a, then pauses lim-b
  assert_eq stopped "$(state_of lim-a)" "lim-a (least recent paused)"
  assert_eq paused "$(state_of lim-b)" "lim-b"
  assert_eq running "$(state_of lim-d)" "lim-d"
  assert_eq 3 "$(limiter .resident)" "resident"
  assert_eq 3 "$(limiter .max_resident)" "max_resident"
  # A start of the stopped one needs both slots again.
  "$WARREN" start lim-a >/dev/null
  assert_eq running "$(state_of lim-a)" "lim-a started"
  assert_eq 3 "$(limiter .resident)" "resident after the start"
  stop_daemon
  start_daemon $(daemon_args)
}

# A warm pool's spares count as resident, are the first to go when a
# create needs room (removed, not stopped: they are no one's), never take
# a slot by evicting or waiting themselves, and come back once there is
# room; a claim under a full --max-running takes its running slot as any
# start does.
spares() {
  "$WARREN" ls --all --json | jq '[.[] | select(.pooled)] | length'
}

spares_are() { # N
  [ "$(spares)" = "$1" ] && [ "$(api GET /v1/pools | jq '.pools[0].filling')" = 0 ]
}

test_pool_spares_go_first_and_wait_for_room() {
  local out
  stop_daemon
  start_daemon --max-running 2 --max-resident 3 --idle-pause 0
  trap '"$WARREN" pool rm base >/dev/null 2>&1 || true; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  "$WARREN" pool set base --size 2 >/dev/null || fail "pool set"
  wait_until 60 spares_are 2 || fail "the pool never filled: $(api GET /v1/pools)"
  new_sandbox lim-a --no-pool # resident 3 of 3
  new_sandbox lim-b --no-pool # a spare goes for it, not lim-a
  # (the spare's removal ends just after lim-b has its slot)
  wait_until 10 spares_are 1 || fail "spares after lim-b: $(spares)"
  assert_eq running "$(state_of lim-a)" "lim-a"
  out=$("$WARREN" events --json | jq -r 'select(.type == "evicted") | .action' | tail -1)
  assert_eq removed "$out" "the spare's eviction"
  new_sandbox lim-c --no-pool # pauses lim-a, and the last spare goes
  wait_until 10 spares_are 0 || fail "spares after lim-c: $(spares)"
  assert_eq paused "$(state_of lim-a)" "lim-a (paused, not stopped)"
  sleep 2 # the pool looks again every second: it must not take a slot
  assert_eq 0 "$(spares)" "spares while the limits are reached"
  assert_eq 3 "$(limiter .resident)" "resident"
  "$WARREN" rm -f lim-c >/dev/null
  wait_until 30 spares_are 1 || fail "the pool did not refill into the room"
  assert_eq 3 "$(limiter .resident)" "resident after the refill"
  # A claim: lim-b runs, lim-a is paused, one spare; the claim needs a
  # running slot, which is free.
  out=$("$WARREN" create --name lim-d --json) || fail "create lim-d"
  WR_CLEANUP="$WR_CLEANUP lim-d"
  assert_eq true "$(jq -r .from_pool <<<"$out")" "lim-d from the pool"
  assert_eq 2 "$(running_count)" "running after the claim"
  "$WARREN" pool rm base >/dev/null
  stop_daemon
  start_daemon $(daemon_args)
}

test_daemon_killed_while_waiting_is_retryable() {
  trap 'lim_cleanup; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  local rc=0 pid
  new_sandbox lim-a
  new_sandbox lim-b
  hold_busy lim-a
  hold_busy lim-b
  "$WARREN" create --name lim-k >/dev/null 2>"$LIM_DIR/k.err" &
  pid=$!
  wait_until 10 grep -q "#1 in line" "$LIM_DIR/k.err" || fail "not in line"
  kill_daemon
  wait "$pid" || rc=$?
  [ "$rc" != 0 ] || fail "the create succeeded without a daemon"
  assert_contains "$(cat "$LIM_DIR/k.err")" "it can be retried" "the message"
  lim_cleanup
  start_daemon $(daemon_args)
  "$WARREN" inspect lim-k >/dev/null 2>&1 && fail "lim-k exists after the restart"
  return 0
}

test_a_wake_waits_in_line_and_its_client_can_leave() {
  trap 'lim_cleanup; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  local pid
  new_sandbox lim-w
  "$WARREN" pause lim-w >/dev/null
  new_sandbox lim-a
  new_sandbox lim-b
  hold_busy lim-a
  hold_busy lim-b
  "$WARREN" exec lim-w -- echo woke >"$LIM_DIR/w.out" 2>&1 &
  pid=$!
  wait_until 10 [ "$(limiter .queued)" = 1 ] || fail "the wake is not in line"
  assert_eq paused "$(state_of lim-w)" "lim-w waits"
  kill "$pid" 2>/dev/null || true
  wait_until 5 [ "$(limiter .queued)" = 0 ] || fail "the wake stayed in line"
  assert_eq paused "$(state_of lim-w)" "lim-w after its client left"
  # Another wake gets the slot once one is free.
  let_go lim-b
  "$WARREN" stop lim-b >/dev/null
  assert_eq woke "$("$WARREN" exec lim-w -- echo woke)" "the next wake"
  assert_eq running "$(state_of lim-w)" "lim-w"
}

test_start_waits_and_resume_evicts() {
  trap 'lim_cleanup; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  local pid
  new_sandbox lim-s --no-start
  new_sandbox lim-r
  "$WARREN" pause lim-r >/dev/null
  new_sandbox lim-a
  new_sandbox lim-b
  # resume of a paused one under a full limit: the least recent idle one
  # (lim-a) makes room.
  "$WARREN" exec lim-b -- true
  assert_eq lim-r "$("$WARREN" resume lim-r)" "resume's output"
  assert_eq paused "$(state_of lim-a)" "lim-a made room for the resume"
  assert_eq running "$(state_of lim-r)" "lim-r"
  # start of a stopped one with both running busy: it waits in line.
  hold_busy lim-r
  hold_busy lim-b
  "$WARREN" start lim-s >"$LIM_DIR/s.out" 2>"$LIM_DIR/s.err" &
  pid=$!
  wait_until 10 grep -q "waiting for a free sandbox, #1 in line" "$LIM_DIR/s.err" ||
    fail "no place in line printed: $(cat "$LIM_DIR/s.err")"
  assert_eq stopped "$(state_of lim-s)" "lim-s while it waits"
  let_go lim-b
  "$WARREN" stop lim-b >/dev/null
  wait "$pid" || fail "the waiting start failed: $(cat "$LIM_DIR/s.err")"
  assert_eq lim-s "$(cat "$LIM_DIR/s.out")" "start's output"
  assert_eq running "$(state_of lim-s)" "lim-s"
  assert_eq 2 "$(running_count)" "running"
}
