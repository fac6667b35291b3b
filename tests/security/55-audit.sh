# shellcheck shell=bash
# Security: audit and output that must survive what a sandbox does and
# what happens to warrend.
#
# A sandbox floods the connection log with cheap denied lookups
# (tests/helpers/flood_dns.c): it loses its own oldest entries, never a
# neighbour's, and how many it lost is said. A background process's kept
# output survives SIGKILL of warrend: `warren logs` shows what was printed
# before, and offsets carry on. A process that prints a gibibyte keeps at
# most 1.25 MiB on disk, and with a disk limit its files live on the
# sandbox's own filesystem. Sourced by tests/run-e2e, which provides
# lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

# A small log, so that a flood passes its limits in a second: each
# sandbox keeps 300 entries (trimmed 30 past that).
AUDIT_LOG_ARGS="--policy-log-sandbox-max 300"
daemon_args() { echo "$AUDIT_LOG_ARGS"; }

# The log's reply for one sandbox: entries, dropped, retention.
log_of() { # SANDBOX
  api GET "/v1/policy/log?sandbox=$(sec_uri "$1")&limit=10000"
}

log_has_host() { # SANDBOX HOST
  log_of "$1" | jq -e --arg h "$2" 'any(.entries[]; .host == $h)' >/dev/null
}

proc_json() { # SANDBOX TAG
  api GET "/v1/sandboxes/$1/processes/$2"
}

proc_ended() { # SANDBOX TAG
  [ "$(proc_json "$1" "$2" | jq -r .running)" = false ]
}

# The files that hold a sandbox's kept output on the host (either place).
output_files() { # ID
  find "$WR_ROOT/sandboxes/$1/output" "$WR_ROOT/sandboxes/$1/disk/output" \
    -type f 2>/dev/null || true
}

# Whether the kept output on disk holds TEXT yet.
output_saved() { # ID TEXT
  local f
  for f in $(output_files "$1"); do
    grep -qaF -- "$2" "$f" && return 0
  done
  return 1
}

# SIGKILL warrend and start this file's daemon again.
kill_and_restart() {
  kill_daemon
  # shellcheck disable=SC2086 # words, on purpose
  start_daemon $AUDIT_LOG_ARGS
}

logs_show() { # SANDBOX TAG TEXT
  "$WARREN" logs "$1" "$2" 2>&1 | grep -qF -- "$3"
}

# ---- the connection log ------------------------------------------------------

# A sandbox that makes a thousand denied lookups, more than three times
# its quota, pushes out only its own oldest entries: the neighbour's one
# entry from before the flood is still there, with its id; the flooder
# keeps its newest entries and is told how many of the rest were dropped,
# by the API and by `warren policy log`.
test_log_flood_keeps_the_neighbours_records() {
  local before a_id b_id out kept dropped
  new_sandbox audit-a
  new_sandbox audit-b
  install_helper audit-a flood_dns
  install_helper audit-b flood_dns
  a_id=$(sb_get audit-a .id)
  b_id=$(sb_get audit-b .id)
  "$WARREN" policy deny network --sandbox audit-a '*.flood.test' >/dev/null
  "$WARREN" policy deny network --sandbox audit-b '*.neighbour.test' >/dev/null

  out=$("$WARREN" exec audit-b -- flood_dns 1 before.neighbour.test)
  assert_eq "answered: 1 of 1" "$out" "the neighbour's lookup"
  wait_until 5 log_has_host audit-b q0.before.neighbour.test ||
    fail "the neighbour's lookup is not logged: $(log_of audit-b)"
  before=$(log_of audit-b | jq -c '.entries[] | {id, host, allow}')

  out=$("$WARREN" exec audit-a -- flood_dns 1000 flood.test)
  assert_eq "answered: 1000 of 1000" "$out" "the flood"
  wait_until 5 log_has_host audit-a q999.flood.test ||
    fail "the flood's last lookup is not logged"

  assert_eq "$before" "$(log_of audit-b | jq -c '.entries[] | {id, host, allow}')" \
    "the neighbour's entries after the flood"
  assert_eq 0 "$(log_of audit-b | jq .dropped)" "the neighbour's dropped entries"
  kept=$(log_of audit-a | jq '.entries | length')
  dropped=$(log_of audit-a | jq .dropped)
  if [ "$kept" -lt 300 ] || [ "$kept" -gt 330 ]; then
    fail "the flooder keeps $kept entries, not its quota (300 to 330)"
  fi
  assert_eq 1000 $((kept + dropped)) "kept + dropped of the flooder"
  assert_eq q999.flood.test "$(log_of audit-a | jq -r '.entries[-1].host')" \
    "the flooder's newest entry is kept"
  assert_eq "$a_id" "$(log_of audit-a | jq -r '.entries[-1].sandbox')" \
    "the entry's sandbox"
  assert_eq 300 "$(log_of audit-a | jq .retention.per_sandbox)" "retention"

  out=$("$WARREN" policy log --sandbox audit-a 2>&1)
  assert_contains "$out" "$dropped older entries of audit-a were dropped" \
    "policy log of the flooder"
  assert_contains "$out" "the newest 300 of each sandbox" "policy log"
  out=$("$WARREN" policy log --sandbox audit-b 2>&1)
  assert_contains "$out" "q0.before.neighbour.test" "policy log of the neighbour"
  assert_not_contains "$out" "dropped" "policy log of the neighbour"
  # The removed flooder's record stays, by id.
  "$WARREN" rm -f audit-a >/dev/null
  assert_eq "$dropped" "$(log_of "$a_id" | jq .dropped)" "dropped after rm"
  : "$b_id"
}

# ---- kept output across a killed daemon -----------------------------------------

# A background process prints to stdout and stderr; warrend is killed
# with SIGKILL and started again. `warren logs` shows both streams as
# they were, the offsets in the API carry on from where they were (the
# next byte printed is at the old total), and new output follows.
test_logs_survive_sigkill_of_the_daemon() {
  local id tmp total out
  new_sandbox audit-logs
  tmp=$(mktemp -d)
  id=$(sb_get audit-logs .id)
  "$WARREN" exec -d --tag ticker audit-logs -- sh -c \
    'echo first-line; echo second-line >&2
     while [ ! -e /tmp/go ]; do sleep 0.1; done; echo third-line; exec sleep 1000' \
    >/dev/null
  wait_until 10 logs_show audit-logs ticker second-line ||
    fail "no output kept: $("$WARREN" logs audit-logs ticker 2>&1)"
  wait_until 10 output_saved "$id" second-line ||
    fail "the kept output never reached the disk: $(output_files "$id")"
  total=$(proc_json audit-logs ticker | jq -r .output_bytes)
  assert_eq 23 "$total" "output_bytes before"

  kill_and_restart
  wait_until 10 logs_show audit-logs ticker first-line ||
    fail "logs after SIGKILL of warrend: $("$WARREN" logs audit-logs ticker 2>&1)"
  "$WARREN" logs audit-logs ticker >"$tmp/o" 2>"$tmp/e"
  assert_eq first-line "$(cat "$tmp/o")" "stdout after the restart"
  assert_eq second-line "$(cat "$tmp/e")" "stderr after the restart"
  assert_eq "$total" "$(proc_json audit-logs ticker | jq -r .output_bytes)" \
    "output_bytes after the restart"

  "$WARREN" exec audit-logs -- touch /tmp/go
  wait_until 10 logs_show audit-logs ticker third-line || fail "no new output"
  out=$(api GET "/v1/sandboxes/audit-logs/processes/ticker/output?offset=$total")
  assert_eq "$total" "$(printf '%s\n' "$out" | jq -r 'select(.type=="stdout") | .offset' |
    head -1)" "the offset of the first byte after the restart"
  assert_eq third-line "$(printf '%s\n' "$out" | jq -r 'select(.type=="stdout") | .data' |
    base64 -d)" "what follows the old total"

  # Killed again, now with the new line: all three come back, in order.
  kill_and_restart
  wait_until 10 logs_show audit-logs ticker third-line ||
    fail "logs after a second kill: $("$WARREN" logs audit-logs ticker 2>&1)"
  assert_eq "first-line
second-line
third-line" "$("$WARREN" logs audit-logs ticker 2>&1)" "logs after a second kill"
  # Forgetting the process removes its files; rm removes everything.
  "$WARREN" kill audit-logs ticker >/dev/null
  wait_until 10 proc_ended audit-logs ticker || fail "ticker did not end"
  api_call DELETE /v1/sandboxes/audit-logs/processes/ticker
  assert_eq 204 "$API_STATUS" "forget the process"
  wait_until 10 sh -c "[ -z \"\$(find '$WR_ROOT/sandboxes/$id/output' -type f)\" ]" ||
    fail "files of a forgotten process: $(output_files "$id")"
  "$WARREN" rm -f audit-logs >/dev/null
  [ ! -e "$WR_ROOT/sandboxes/$id" ] || fail "rm left $WR_ROOT/sandboxes/$id"
  rm -rf "$tmp"
}

# A process that prints a gibibyte: warrend keeps its last mebibyte in
# memory and at most 1.25 MiB on disk; the daemon answers throughout;
# what is kept is the end, and it is still there after SIGKILL.
test_output_of_a_gibibyte_writer_stays_bounded() {
  local id size stop worst out
  new_sandbox audit-big
  id=$(sb_get audit-big .id)
  stop=$(mktemp -u)
  max_info_latency_until "$stop" >"$stop.latency" &
  "$WARREN" exec -d --tag big audit-big -- sh -c \
    'head -c 1073741824 /dev/zero | tr "\0" x; echo; echo END-MARKER' >/dev/null
  wait_until 120 proc_ended audit-big big || fail "big did not finish"
  touch "$stop"
  wait
  worst=$(cat "$stop.latency")
  rm -f "$stop" "$stop.latency"
  [ "$worst" -lt 1000 ] || fail "warrend took ${worst} ms to answer during the flood"
  assert_eq 1073741836 "$(proc_json audit-big big | jq -r .output_bytes)" "output_bytes"
  wait_until 10 output_saved "$id" END-MARKER || fail "the end never reached the disk"
  size=$(output_files "$id" | xargs cat | wc -c)
  [ "$size" -le $((1280 * 1024)) ] || fail "kept output on disk: $size bytes"
  [ "$size" -ge $((1024 * 1024)) ] || fail "kept output on disk: only $size bytes"
  kill_and_restart
  wait_until 10 logs_show audit-big big END-MARKER ||
    fail "the end after SIGKILL: $("$WARREN" logs audit-big big 2>&1 | tail -c 100)"
  out=$("$WARREN" logs audit-big big | wc -c)
  assert_eq 1048576 "$out" "bytes kept after the restart (the last 1 MiB)"
  assert_eq 1073741836 "$(proc_json audit-big big | jq -r .output_bytes)" \
    "output_bytes after the restart"
}

# With a disk limit the files are on the sandbox's own filesystem (they
# count against it), never in the host-side directory; a new start of
# the sandbox removes them with the last run's processes.
test_kept_output_counts_against_the_disk_limit() {
  local id
  new_sandbox audit-disk --disk 64m
  id=$(sb_get audit-disk .id)
  "$WARREN" exec -d --tag d audit-disk -- sh -c 'echo on-its-own-disk; exec sleep 1000' \
    >/dev/null
  wait_until 10 output_saved "$id" on-its-own-disk || fail "nothing on disk"
  [ -n "$(find "$WR_ROOT/sandboxes/$id/disk/output" -type f)" ] ||
    fail "no file on the sandbox's disk"
  [ ! -e "$WR_ROOT/sandboxes/$id/output" ] ||
    fail "files in the host-side directory: $(output_files "$id")"
  [ "$(stat -c %d "$WR_ROOT/sandboxes/$id/disk/output")" != \
    "$(stat -c %d "$WR_ROOT/sandboxes/$id")" ] || fail "disk/output is on the host's disk"
  # A new run starts from nothing: the last run's processes and their
  # files go.
  "$WARREN" stop audit-disk >/dev/null
  "$WARREN" start audit-disk >/dev/null
  wait_until 10 sh -c "[ -z \"\$(find '$WR_ROOT/sandboxes/$id/disk/output' -type f)\" ]" ||
    fail "files of the last run after a start: $(output_files "$id")"
}
