# shellcheck shell=bash
# End-to-end: a project's lease. One holder at a time; the next asker
# waits in FIFO with its place streamed, or hears at once (409) who holds
# it; a release or an expiry hands it to the first in line; a renew keeps
# it; a waiter that goes leaves the line; a wrong token is refused; a
# removed project tells its waiters; the planner leaves a leased project
# alone; readers never wait.
# Sourced by tests/run-e2e, which provides lib.sh.

daemon_args() {
  echo --plan-interval 0 --plan-slots 1 --plan-free 1
}

lease() { "$WARREN" project lease "$@"; }

lease_setup() { # NAME
  "$WARREN" project rm "$1" >/dev/null 2>&1 || true
  "$WARREN" project create "$1" --image base >/dev/null || fail "create $1"
}

test_grant_refuse_release() {
  local t out
  lease_setup le
  t=$(lease le --holder agent-1) || fail "take"
  assert_contains "$t" "lease-"
  out=$(lease le --no-wait --holder agent-2 2>&1) && fail "a second holder"
  assert_contains "$out" "leased to agent-1"
  out=$(api POST /v1/projects/le/lease -d '{"wait":false}')
  assert_eq false "$(jq -r .wait <<<"$out")"
  assert_eq agent-1 "$(jq -r .holder <<<"$out")"
  assert_eq 409 "$(api_status POST /v1/projects/le/lease -d '{"wait":false}')"
  assert_contains "$(lease le --show)" "leased to agent-1"
  assert_eq null "$(api GET /v1/projects/le/lease | jq -r .token)" \
    "the token is the holder's only"
  out=$(lease le --release not-the-token 2>&1) && fail "a wrong token"
  assert_contains "$out" "not the token"
  assert_eq 409 "$(api_status PUT /v1/projects/le/lease -d '{"token":"x"}')"
  lease le --release "$t" || fail "release"
  assert_contains "$(lease le --show)" "not leased"
  assert_eq 404 "$(api_status PUT /v1/projects/le/lease -d "{\"token\":\"$t\"}")" \
    "a released lease cannot be renewed"
  assert_eq 404 "$(api_status POST /v1/projects/no-such/lease -d '{}')"
  assert_eq 400 "$(api_status POST /v1/projects/le/lease -d '{"ttl":0}')"
  assert_eq 400 "$(api_status POST /v1/projects/le/lease -d '{"ttl":"x"}')"
  "$WARREN" project rm le >/dev/null
}

test_fifo_line_with_positions_and_hand_over() {
  local t i
  lease_setup lf
  t=$(lease lf --holder first) || fail "take"
  for i in 1 2 3; do
    lease lf --holder "w$i" >"$WR_RUN/lf-$i.out" 2>"$WR_RUN/lf-$i.err" &
    echo $! >"$WR_RUN/lf-$i.pid"
    wait_until 10 sh -c "[ \"\$(curl -s --unix-socket '$WR_SOCK' http://w/v1/projects/lf/lease | jq .waiting)\" = $i ]" ||
      fail "waiter $i is not in line"
  done
  assert_contains "$(cat "$WR_RUN/lf-3.err")" "#3 in line"
  lease lf --release "$t"
  wait "$(cat "$WR_RUN/lf-1.pid")" || fail "w1"
  assert_contains "$(lease lf --show)" "leased to w1"
  wait_until 10 grep -q "#2 in line" "$WR_RUN/lf-3.err" ||
    fail "w3 did not move up: $(cat "$WR_RUN/lf-3.err")"
  lease lf --release "$(cat "$WR_RUN/lf-1.out")"
  wait "$(cat "$WR_RUN/lf-2.pid")" || fail "w2"
  assert_contains "$(lease lf --show)" "leased to w2" "first in, first served"
  lease lf --release "$(cat "$WR_RUN/lf-2.out")"
  wait "$(cat "$WR_RUN/lf-3.pid")" || fail "w3"
  assert_contains "$(lease lf --show)" "leased to w3"
  "$WARREN" project rm lf >/dev/null
}

test_expiry_hands_over_and_renew_keeps_it() {
  local t t2 pid
  lease_setup lx
  t=$(lease lx --holder short --ttl 2) || fail "take"
  t2=$(lease lx --renew "$t" --ttl 3) || fail "renew"
  assert_eq "$t" "$t2" "a renew keeps the token"
  sleep 2.2
  assert_contains "$(lease lx --show)" "leased to short" "renewed, not expired"
  lease lx --holder next >"$WR_RUN/lx.out" 2>/dev/null &
  pid=$!
  wait "$pid" || fail "the waiter never got it"
  assert_contains "$(lease lx --show)" "leased to next" "the expiry handed it on"
  assert_eq 409 "$(api_status PUT /v1/projects/lx/lease -d "{\"token\":\"$t\"}")" \
    "an expired lease's token is no one's"
  "$WARREN" project rm lx >/dev/null
}

test_a_waiter_that_goes_leaves_the_line() {
  local t pid
  lease_setup lg
  t=$(lease lg --holder h) || fail "take"
  "$WARREN" project lease lg --holder gone >/dev/null 2>&1 &
  pid=$!
  wait_until 10 sh -c "[ \"\$(curl -s --unix-socket '$WR_SOCK' http://w/v1/projects/lg/lease | jq .waiting)\" = 1 ]" ||
    fail "not in line"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  wait_until 10 sh -c "[ \"\$(curl -s --unix-socket '$WR_SOCK' http://w/v1/projects/lg/lease | jq .waiting)\" = 0 ]" ||
    fail "the gone waiter kept its place"
  lease lg --release "$t"
  assert_contains "$(lease lg --show)" "not leased" "nobody got it"
  assert_daemon_alive
  "$WARREN" project rm lg >/dev/null
}

test_removing_the_project_tells_its_waiters() {
  local t pid out
  lease_setup lr
  t=$(lease lr --holder h) || fail "take"
  lease lr --holder w >"$WR_RUN/lr.out" 2>"$WR_RUN/lr.err" &
  pid=$!
  wait_until 10 sh -c "[ \"\$(curl -s --unix-socket '$WR_SOCK' http://w/v1/projects/lr/lease | jq .waiting)\" = 1 ]" ||
    fail "not in line"
  "$WARREN" project rm lr >/dev/null || fail "rm"
  wait "$pid" && fail "the waiter got a removed project's lease"
  out=$(cat "$WR_RUN/lr.err")
  assert_contains "$out" "removed"
  : "$t"
}

test_the_planner_leaves_a_leased_project_and_readers_never_wait() {
  local t out
  lease_setup lp
  "$WARREN" project open lp >/dev/null || fail "open"
  "$WARREN" pause project-lp >/dev/null
  t=$(lease lp --holder builder) || fail "take"
  # one slot, kept free: lp would be demoted, but it is leased
  assert_not_contains "$("$WARREN" plan)" "lp: warm -> cool"
  out=$("$WARREN" project log lp) || fail "log while leased"
  assert_contains "$out" "Start from template base"
  "$WARREN" exec project-lp -- true || fail "exec while leased"
  "$WARREN" pause project-lp >/dev/null # the exec woke it
  lease lp --release "$t"
  assert_contains "$("$WARREN" plan)" "lp: warm -> cool"
  "$WARREN" project rm lp >/dev/null
}
