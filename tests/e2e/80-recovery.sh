# Crash recovery: warrend is killed with SIGKILL (no chance to clean up),
# sometimes in the middle of an operation, and started again. Sandboxes
# must come back as they were, what died meanwhile must be cleaned up, and
# nothing may leak on the host. Sourced by tests/run-e2e, which provides
# lib.sh and runs the tests in name order: test_zz_* comes last.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

# Like new_sandbox, but the cleanup first makes sure a daemon runs: a test
# that fails while warrend is down must not leave the next one without.
rec_sandbox() { # NAME [create args...]
  local name=$1
  shift
  "$WARREN" rm -f "$name" >/dev/null 2>&1 || true
  "$WARREN" create --name "$name" "$@" >/dev/null || fail "create $name"
  REC_CLEANUP="${REC_CLEANUP:-} $name"
}

rec_cleanup() {
  local s
  set +e
  ensure_daemon >/dev/null 2>&1 || true
  for s in ${REC_CLEANUP:-}; do
    "$WARREN" rm -f "$s" >/dev/null 2>&1 || true
  done
  rm -rf "${REC_TMP:-/nonexistent}"
}

# The numbers N of the "line N" lines in a ticker's output, one per line.
line_numbers() {
  sed -n 's/^line \([0-9]*\)$/\1/p'
}

# Whether the numbers on stdin are consecutive.
consecutive() {
  awk 'NR > 1 && $1 != prev + 1 { bad = 1 } { prev = $1 } END { exit bad }'
}

# Traces of the given sandbox ids only (see root_traces).
traces_of() { # ID...
  local id pattern=
  for id in "$@"; do pattern="$pattern${pattern:+|}$id"; done
  root_traces "$@" | grep -E "($pattern)" || true
}

# Every trace on the host (see root_traces) must belong to a sandbox the
# daemon knows.
check_no_orphans() {
  local known line
  known=$("$WARREN" ls --json | jq -r '.[].id')
  while read -r line; do
    case "$known" in
      *"$(sed 's|.*\(sb-[a-z0-9]*\).*|\1|' <<<"$line")"*) ;;
      *) fail "orphan on the host: $line" ;;
    esac
  done < <(root_traces)
}

# SIGKILL while three sandboxes run: one with a background process that
# writes all the time, one in the middle of a foreground exec, one paused.
test_kill_restart_keeps_sandboxes() {
  local before after client rc bg_init pz_init last first out ids
  trap rec_cleanup EXIT
  REC_TMP=$(mktemp -d)
  rec_sandbox rec-bg
  rec_sandbox rec-exec
  rec_sandbox rec-paused
  "$WARREN" exec -d --tag ticker rec-bg -- sh -c \
    'i=0; while :; do i=$((i+1)); echo "line $i"; sleep 0.2; done' >/dev/null
  "$WARREN" exec -d --tag sleeper rec-paused -- sleep 1000 >/dev/null
  "$WARREN" exec rec-exec -- sh -c 'echo started; sleep 30; echo finished' \
    >"$REC_TMP/exec.out" 2>&1 &
  client=$!
  wait_until 10 grep -q started "$REC_TMP/exec.out" || fail "exec did not start"
  "$WARREN" pause rec-paused >/dev/null
  bg_init=$(sb_get rec-bg .pid)
  pz_init=$(sb_get rec-paused .pid)
  ids="$(sb_get rec-bg .id) $(sb_get rec-exec .id) $(sb_get rec-paused .id)"
  sleep 0.5
  before=$(root_traces)
  last=$("$WARREN" logs rec-bg ticker | line_numbers | tail -n 1)
  # The kept output reaches the disk as it comes (outlog.c); what warrend
  # read in its last moment may be lost, so wait for line $last.
  wait_until 10 sh -c "cat '$WR_ROOT'/sandboxes/$(sb_get rec-bg .id)/output/*/* |
    grep -aq 'line $last\$'" || fail "line $last never reached the disk"

  kill_daemon
  pid_alive "$bg_init" || fail "rec-bg's init died with warrend"
  pid_alive "$pz_init" || fail "rec-paused's init died with warrend"
  # The client of the interrupted exec gives up rather than hang.
  wait_until 10 pid_gone "$client" || fail "exec client still waits"
  rc=0
  wait "$client" || rc=$?
  [ "$rc" != 0 ] || fail "interrupted exec exited 0: $(cat "$REC_TMP/exec.out")"
  sleep 1 # the ticker writes on with nobody reading
  start_daemon

  assert_eq running "$(sb_get rec-bg .state)" "rec-bg after restart"
  assert_eq running "$(sb_get rec-exec .state)" "rec-exec after restart"
  assert_eq paused "$(sb_get rec-paused .state)" "rec-paused after restart"
  assert_eq "$bg_init" "$(sb_get rec-bg .pid)" "rec-bg's init pid"
  after=$(root_traces)
  assert_eq "$before" "$after" "host traces across the restart"
  assert_eq ok "$("$WARREN" exec rec-bg -- echo ok)" "exec in rec-bg"
  assert_eq ok "$("$WARREN" exec rec-exec -- echo ok)" "exec in rec-exec"

  # The background process is managed again, its output never stopped,
  # what it printed before is kept (read back from disk) and nothing it
  # wrote while warrend was down is lost.
  out=$("$WARREN" ps rec-bg)
  assert_contains "$out" "ticker" "ps rec-bg"
  assert_contains "$out" "running" "ps rec-bg"
  out=$(timeout 2 "$WARREN" logs -f rec-bg ticker || true)
  assert_eq "$(seq 1 "$last")" "$(line_numbers <<<"$out" | head -n "$last")" \
    "the lines kept from before the restart"
  first=$(line_numbers <<<"$out" | sed -n "$((last + 1))p")
  [ -n "$first" ] || fail "no output from ticker after the restart: $out"
  if [ "$first" -le "$last" ] || [ "$first" -gt $((last + 5)) ]; then
    fail "output after the restart goes on at line $first; line $last was" \
      "the last one before"
  fi
  line_numbers <<<"$out" | tail -n +$((last + 1)) | consecutive ||
    fail "lines were lost: $out"
  [ "$(line_numbers <<<"$out" | tail -n 1)" -ge $((last + 10)) ] ||
    fail "logs -f showed no new lines: $out"

  "$WARREN" resume rec-paused >/dev/null
  assert_eq running "$(sb_get rec-paused .state)" "rec-paused resumed"
  assert_eq ok "$("$WARREN" exec rec-paused -- echo ok)" "exec in rec-paused"
  wait_until 5 sh -c "'$WARREN' ps rec-paused | grep -q 'sleeper.*running'" ||
    fail "rec-paused's background process: $("$WARREN" ps rec-paused)"

  "$WARREN" rm -f rec-bg rec-exec rec-paused >/dev/null
  # shellcheck disable=SC2086
  assert_eq "" "$(traces_of $ids)" "traces after rm"
}

# A sandbox whose processes die while warrend is down is stopped after the
# restart, with its cgroups gone, and starts again.
test_init_killed_while_down() {
  local id init out
  trap rec_cleanup EXIT
  rec_sandbox rec-dead
  id=$(sb_get rec-dead .id)
  init=$(sb_get rec-dead .pid)
  "$WARREN" exec -d --tag sleeper rec-dead -- sleep 1000 >/dev/null
  kill_daemon
  kill -KILL "$init"
  wait_until 10 pid_gone "$init" || fail "init $init survived SIGKILL"
  start_daemon

  assert_eq stopped "$(sb_get rec-dead .state)" "state after restart"
  assert_contains "$(sb_get rec-dead .error)" "ended while warrend was down"
  assert_eq null "$(sb_get rec-dead .pid)" "pid of a stopped sandbox"
  out=$(traces_of "$id" | grep -v '^mount \|^dir ' || true)
  assert_eq "" "$out" "cgroups and processes left"
  [ ! -e "$WR_ROOT/sandboxes/$id/ctl.sock" ] || fail "ctl.sock is left"
  [ -z "$(sandbox_host_pids "$id" 2>/dev/null)" ] || fail "processes are left"

  "$WARREN" start rec-dead >/dev/null
  assert_eq running "$(sb_get rec-dead .state)" "state after start"
  assert_eq ok "$("$WARREN" exec rec-dead -- echo ok)" "exec after start"
  "$WARREN" rm -f rec-dead >/dev/null
  assert_eq "" "$(traces_of "$id")" "traces after rm"
}

# After a restart, every trace on the host must belong to a sandbox the
# daemon knows. Checks that, then removes NAME (if it exists) and checks
# that nothing of it is left. Sets REC_STATE to the state NAME was in.
check_consistent_then_rm() { # NAME
  local name=$1 id=
  REC_STATE=gone
  if "$WARREN" inspect "$name" >/dev/null 2>&1; then
    REC_STATE=$(sb_get "$name" .state)
    id=$(sb_get "$name" .id)
  fi
  check_no_orphans
  case "$REC_STATE" in
    running)
      assert_eq ok "$("$WARREN" exec "$name" -- echo ok)" "exec in $name" ;;
    error | stopped | gone) ;;
    *) fail "$name is $REC_STATE after the restart" ;;
  esac
  if [ "$REC_STATE" != gone ]; then
    "$WARREN" rm -f "$name" >/dev/null || fail "rm -f $name"
    assert_eq "" "$(traces_of "$id")" "traces of $name after rm -f"
  fi
}

# SIGKILL right after a create was sent, at several delays.
test_kill_during_create() {
  local delay i=0 client seen=
  trap rec_cleanup EXIT
  for delay in 0 0.002 0.005 0.01 0.02 0.05; do
    i=$((i + 1))
    REC_CLEANUP="${REC_CLEANUP:-} rec-mid-$i"
    "$WARREN" create --name "rec-mid-$i" >/dev/null 2>&1 &
    client=$!
    sleep "$delay"
    kill_daemon
    wait "$client" || true
    start_daemon
    check_consistent_then_rm "rec-mid-$i"
    seen="$seen $delay:$REC_STATE"
  done
  echo "states seen (delay:state):$seen"
}

# SIGKILL right after an rm -f was sent, at several delays.
test_kill_during_rm() {
  local delay i=0 client seen=
  trap rec_cleanup EXIT
  for delay in 0 0.002 0.005 0.01 0.02 0.05; do
    i=$((i + 1))
    rec_sandbox "rec-rm-$i"
    "$WARREN" exec -d --tag sleeper "rec-rm-$i" -- sleep 1000 >/dev/null
    "$WARREN" rm -f "rec-rm-$i" >/dev/null 2>&1 &
    client=$!
    sleep "$delay"
    kill_daemon
    wait "$client" || true
    start_daemon
    check_consistent_then_rm "rec-rm-$i"
    seen="$seen $delay:$REC_STATE"
  done
  echo "states seen (delay:state):$seen"
}

# Last: removing every sandbox these tests made (all named rec-*, kept or
# not by earlier tests) leaves nothing on the host, and no trace on the
# host belongs to a sandbox the daemon does not know. Sandboxes of other
# names in the state root are left alone.
test_zz_rm_everything_leaves_nothing() {
  local ids names
  ids=$("$WARREN" ls --json | jq -r '.[] | select(.name | startswith("rec-")) | .id')
  names=$("$WARREN" ls -q | grep '^rec-' || true)
  if [ -n "$names" ]; then
    # shellcheck disable=SC2086
    "$WARREN" rm -f $names >/dev/null
  fi
  assert_eq "" "$("$WARREN" ls -q | grep '^rec-' || true)" "sandboxes left"
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    assert_eq "" "$(traces_of $ids)" "host traces left"
  fi
  check_no_orphans
}
