# cgroup v2: warrend --cgroup v2 on whatever cgroup2 hierarchy the host
# has. On a hybrid host (v1 controllers, plus a unified hierarchy at
# /sys/fs/cgroup/unified without memory, pids or cpu controllers) sandboxes
# must still work, pause and resume through cgroup.freeze, and leave no
# cgroup behind; limits the host cannot enforce are refused clearly.
#
# Each test starts a second warrend next to the one run-e2e started
# (v2_daemon in lib.sh), with its own state root (WR_ROOT-cgv2), socket and
# cgroup parent. Sourced by tests/run-e2e, which provides lib.sh.

test_v2_create_and_exec() {
  local id cg
  v2_daemon
  "$WARREN" create --name cg2-a >/dev/null
  id=$(sb_get cg2-a .id)
  cg="$V2_MOUNT/$V2_PARENT/$id"
  [ -d "$cg" ] || fail "no cgroup $cg"
  grep -qx "$(sb_get cg2-a .pid)" "$cg/cgroup.procs" ||
    fail "warren-init is not in $cg"
  assert_eq hello "$("$WARREN" exec cg2-a -- echo hello)" "exec"
  assert_eq 0 "$("$WARREN" exec cg2-a -- id -u)" "uid inside"
  "$WARREN" exec -d --tag sleeper cg2-a -- sleep 1000 >/dev/null
  wait_until 5 sh -c "[ \$(wc -l <'$cg/cgroup.procs') -ge 2 ]" ||
    fail "the background process is not in $cg"
}

# Pause freezes every process through cgroup.freeze; resume thaws them.
test_v2_pause_resume() {
  local id cg tick n1 n2
  v2_daemon
  "$WARREN" create --name cg2-p >/dev/null
  id=$(sb_get cg2-p .id)
  cg="$V2_MOUNT/$V2_PARENT/$id"
  tick="$WR_ROOT/sandboxes/$id/upper/tmp/tick"
  "$WARREN" exec -d --tag ticker cg2-p -- sh -c \
    'while :; do echo t >>/tmp/tick; sleep 0.05; done' >/dev/null
  wait_until 5 test -s "$tick" || fail "the ticker does not tick"

  "$WARREN" pause cg2-p >/dev/null
  assert_eq paused "$(sb_get cg2-p .state)" "state after pause"
  assert_eq 1 "$(cat "$cg/cgroup.freeze")" "cgroup.freeze"
  grep -qx "frozen 1" "$cg/cgroup.events" || fail "$cg is not frozen"
  n1=$(wc -l <"$tick")
  sleep 0.5
  n2=$(wc -l <"$tick")
  assert_eq "$n1" "$n2" "ticks while paused"

  "$WARREN" resume cg2-p >/dev/null
  assert_eq running "$(sb_get cg2-p .state)" "state after resume"
  assert_eq 0 "$(cat "$cg/cgroup.freeze")" "cgroup.freeze"
  grep -qx "frozen 0" "$cg/cgroup.events" || fail "$cg is still frozen"
  wait_until 5 sh -c "[ \$(wc -l <'$tick') -gt $n2 ]" ||
    fail "the ticker did not go on after resume"
  assert_eq ok "$("$WARREN" exec cg2-p -- echo ok)" "exec after resume"
}

# Stop removes the sandbox's cgroup, start makes it again, rm -f leaves
# nothing at all.
test_v2_stop_and_rm_remove_cgroup() {
  local id cg t0 t1
  v2_daemon
  "$WARREN" create --name cg2-s >/dev/null
  id=$(sb_get cg2-s .id)
  cg="$V2_MOUNT/$V2_PARENT/$id"
  "$WARREN" exec -d --tag sleeper cg2-s -- sleep 1000 >/dev/null
  [ -d "$cg" ] || fail "no cgroup $cg"
  "$WARREN" stop --timeout 2 cg2-s >/dev/null
  assert_eq stopped "$(sb_get cg2-s .state)" "state after stop"
  [ ! -d "$cg" ] || fail "$cg is left after stop"

  "$WARREN" start cg2-s >/dev/null
  [ -d "$cg" ] || fail "no cgroup $cg after start"
  assert_eq ok "$("$WARREN" exec cg2-s -- echo ok)" "exec after start"
  "$WARREN" exec -d --tag sleeper2 cg2-s -- sleep 1000 >/dev/null

  "$WARREN" rm -f cg2-s >/dev/null
  [ ! -d "$cg" ] || fail "$cg is left after rm -f"
  assert_eq "" "$(root_traces "$id")" "host traces after rm -f"
  # Nothing still works on the removed sandbox (a kill job waiting for the
  # vanished cgroup to empty, say): the daemon stops at once.
  t0=$(date +%s%N)
  stop_daemon
  t1=$(date +%s%N)
  [ $(((t1 - t0) / 1000000)) -lt 2000 ] ||
    fail "warrend took $(((t1 - t0) / 1000000)) ms to stop after rm -f"
}

# Limits need controllers; where the hierarchy has none, create says so
# and makes nothing.
test_v2_limits_without_controllers() {
  local out id
  v2_daemon
  if v2_has memory; then
    "$WARREN" create --name cg2-m --memory 64m >/dev/null
    id=$(sb_get cg2-m .id)
    assert_eq 67108864 "$(cat "$V2_MOUNT/$V2_PARENT/$id/memory.max")" \
      "memory.max"
  else
    assert_eq false "$(api GET /v1/info | jq -r .limits.memory)" \
      "/v1/info limits.memory"
    out=$(must_fail "$WARREN" create --name cg2-m --memory 64m)
    assert_contains "$out" "this host cannot limit memory" "create --memory"
    "$WARREN" inspect cg2-m >/dev/null 2>&1 && fail "cg2-m was created"
  fi
  if ! v2_has pids; then
    out=$(must_fail "$WARREN" create --name cg2-n --pids 64)
    assert_contains "$out" "this host cannot limit pids" "create --pids"
  fi
  if ! v2_has cpu; then
    out=$(must_fail "$WARREN" create --name cg2-c --cpus 1)
    assert_contains "$out" "this host cannot limit cpus" "create --cpus"
  fi
  assert_eq "" "$(ls -A "$WR_ROOT/sandboxes" 2>/dev/null)" \
    "sandbox directories after refused creates"
  # Without limits the same daemon still creates sandboxes.
  "$WARREN" create --name cg2-ok >/dev/null
  assert_eq ok "$("$WARREN" exec cg2-ok -- echo ok)"
}
