# shellcheck shell=bash
# End-to-end: background processes (`warren exec -d`).
#
# Tags, ps, logs (kept output, bounded to the last 1 MiB, stdout and
# stderr apart), logs -f until the exit, kill, tag clashes, forgetting a
# finished process, reading from an offset, and attaching again after
# the first client went away.

proc_json() { # SANDBOX TAG
  api GET "/v1/sandboxes/$1/processes/$2"
}

proc_running() { # SANDBOX TAG
  [ "$(proc_json "$1" "$2" | jq -r .running)" = true ]
}

proc_ended() { ! proc_running "$@"; }

test_detach_ps_logs() {
  local tag tmp j
  new_sandbox bg-basic
  tmp=$(mktemp -d)
  tag=$("$WARREN" exec -d --tag web bg-basic -- \
    sh -c 'echo started; echo oops >&2; exec sleep 1000')
  assert_eq web "$tag" "exec -d prints the tag"
  tag=$("$WARREN" exec -d bg-basic -- sleep 1000)
  case "$tag" in p-[0-9]*) ;; *) fail "default tag: $tag" ;; esac
  # A foreground exec is not a background process.
  "$WARREN" exec bg-basic -- true
  wait_until 5 sh -c "'$WARREN' logs bg-basic web 2>&1 | grep -q oops" ||
    fail "no output kept"

  j=$("$WARREN" ps --json bg-basic)
  assert_eq "$tag web" "$(json_get "$j" '[.[].tag] | sort | join(" ")')" \
    "ps --json lists both, nothing else"
  assert_eq "true sh" "$(json_get "$j" '.[] | select(.tag=="web") | "\(.running) \(.cmd[0])"')" \
    "ps --json of web"
  [ "$(json_get "$j" '.[] | select(.tag=="web") | .pid')" -gt 0 ] || fail "pid: $j"
  out=$("$WARREN" ps bg-basic)
  assert_contains "$out" "web" "ps table"
  assert_contains "$out" "running" "ps table"

  "$WARREN" logs bg-basic web >"$tmp/o" 2>"$tmp/e"
  assert_eq started "$(cat "$tmp/o")" "logs stdout"
  assert_eq oops "$(cat "$tmp/e")" "logs stderr"
  rm -rf "$tmp"
}

test_tag_clash_and_bad_tags() {
  local out
  new_sandbox bg-clash
  "$WARREN" exec -d --tag job bg-clash -- sleep 1000 >/dev/null
  out=$(must_fail "$WARREN" exec -d --tag job bg-clash -- true)
  assert_contains "$out" "job" "tag clash message"
  assert_contains "$out" "exists" "tag clash message"
  assert_eq 1 "$("$WARREN" ps --json bg-clash | jq length)" "processes after a clash"
  out=$(must_fail "$WARREN" exec -d --tag 'Bad/Tag' bg-clash -- true)
  assert_contains "$out" "tag" "invalid tag"
  must_fail "$WARREN" logs bg-clash no-such-tag >/dev/null
  must_fail "$WARREN" kill bg-clash no-such-tag >/dev/null
}

test_kill_and_delete_finished() {
  local j
  new_sandbox bg-kill
  "$WARREN" exec -d --tag victim bg-kill -- sleep 1000 >/dev/null
  "$WARREN" exec -d --tag trapper bg-kill -- \
    sh -c 'trap "echo got INT; exit 9" INT; while :; do sleep 0.1; done' >/dev/null
  sleep 0.2
  # A running process cannot be forgotten.
  api_call DELETE /v1/sandboxes/bg-kill/processes/victim
  assert_eq 409 "$API_STATUS" "DELETE of a running process"
  assert_api_error "$API_BODY" running

  assert_eq victim "$("$WARREN" kill bg-kill victim)" "kill prints the tag"
  wait_until 5 proc_ended bg-kill victim || fail "victim still runs"
  j=$(proc_json bg-kill victim)
  assert_eq "false 143 TERM" "$(json_get "$j" '"\(.running) \(.exit_code) \(.signal)"')" \
    "a killed process"
  [ "$(json_get "$j" .finished_at)" != null ] || fail "no finished_at: $j"
  assert_contains "$("$WARREN" ps bg-kill)" "killed" "ps of a killed process"

  "$WARREN" kill -s INT bg-kill trapper >/dev/null
  wait_until 5 proc_ended bg-kill trapper || fail "trapper still runs"
  assert_eq 9 "$(proc_json bg-kill trapper | jq -r .exit_code)" "exit after INT"
  assert_eq "got INT" "$("$WARREN" logs bg-kill trapper)" "its output"
  out=$(must_fail "$WARREN" kill bg-kill trapper)
  assert_contains "$out" "exited" "kill of a finished process"
  api_call POST /v1/sandboxes/bg-kill/processes/victim/signal -d '{"signal":"NOPE"}'
  assert_eq 400 "$API_STATUS" "unknown signal"

  # Forget it: gone from ps, and the tag is free again.
  api_call DELETE /v1/sandboxes/bg-kill/processes/victim
  assert_eq 204 "$API_STATUS" "DELETE of a finished process"
  assert_eq trapper "$("$WARREN" ps --json bg-kill | jq -r '.[].tag')" "ps after DELETE"
  api_call GET /v1/sandboxes/bg-kill/processes/victim
  assert_eq 404 "$API_STATUS" "GET after DELETE"
  "$WARREN" exec -d --tag victim bg-kill -- true >/dev/null
  wait_until 5 proc_ended bg-kill victim || fail "second victim"
  assert_eq 0 "$(proc_json bg-kill victim | jq -r .exit_code)" "reused tag"
  # No processes left inside.
  assert_eq "" "$("$WARREN" exec bg-kill -- sh -c "$INSIDE_PS")" "processes inside"
}

test_logs_keep_the_last_mebibyte() {
  local tmp n total
  new_sandbox bg-big
  tmp=$(mktemp -d)
  "$WARREN" exec -d --tag big bg-big -- sh -c \
    'head -c 2400000 /dev/urandom | base64 -w 100 | tee /tmp/all; echo END-MARKER | tee -a /tmp/all' \
    >/dev/null
  wait_until 20 proc_ended bg-big big || fail "big did not finish"
  "$WARREN" exec bg-big -- cat /tmp/all >"$tmp/all"
  total=$(stat -c %s "$tmp/all")
  [ "$total" -gt 3000000 ] || fail "test broken: wrote $total bytes"
  assert_eq "$total" "$(proc_json bg-big big | jq -r .output_bytes)" "output_bytes"
  "$WARREN" logs bg-big big >"$tmp/kept"
  n=$(stat -c %s "$tmp/kept")
  assert_eq 1048576 "$n" "bytes kept (the last 1 MiB)"
  assert_eq $((total - 1048576)) "$(api GET /v1/sandboxes/bg-big/processes/big/output |
    head -1 | jq -r .offset)" "offset of the oldest kept byte"
  assert_eq END-MARKER "$(tail -n1 "$tmp/kept")" "the last line is kept"
  # What is kept is exactly the end of the output.
  assert_eq "$(tail -c "$n" "$tmp/all" | sha256sum)" "$(sha256sum <"$tmp/kept")" \
    "the kept bytes are the last bytes"
  rm -rf "$tmp"
}

test_logs_follow_until_exit() {
  local tmp start ms rc
  new_sandbox bg-follow
  tmp=$(mktemp)
  "$WARREN" exec -d --tag slow bg-follow -- \
    sh -c 'for i in 1 2 3; do echo line$i; sleep 0.5; done; exit 4' >/dev/null
  start=$(now_ms)
  rc=0
  timeout 10 "$WARREN" logs -f bg-follow slow >"$tmp" || rc=$?
  ms=$(($(now_ms) - start))
  [ "$rc" != 124 ] || fail "logs -f did not end with the process"
  assert_eq "line1
line2
line3" "$(cat "$tmp")" "logs -f output"
  [ "$ms" -ge 900 ] || fail "logs -f returned after ${ms} ms, before the process ended"
  # Without -f, logs of a finished process returns at once.
  start=$(now_ms)
  assert_eq "line1
line2
line3" "$("$WARREN" logs bg-follow slow)" "logs after exit"
  [ $(($(now_ms) - start)) -lt 2000 ] || fail "logs without -f waited"
  # Without -f on a running process it returns at once too.
  "$WARREN" exec -d --tag forever bg-follow -- sh -c 'echo here; exec sleep 1000' >/dev/null
  wait_until 5 sh -c "'$WARREN' logs bg-follow forever | grep -q here" ||
    fail "logs of a running process"
  rm -f "$tmp"
}

test_output_from_an_offset() {
  local out
  new_sandbox bg-offset
  "$WARREN" exec -d --tag o bg-offset -- printf 0123456789 >/dev/null
  wait_until 5 proc_ended bg-offset o || fail "not finished"
  out=$(api GET "/v1/sandboxes/bg-offset/processes/o/output?offset=4")
  assert_eq 456789 "$(printf '%s\n' "$out" | jq -r 'select(.type=="stdout") | .data' |
    base64 -d)" "output from offset 4"
  assert_eq 4 "$(printf '%s\n' "$out" | jq -r 'select(.type=="stdout") | .offset' | head -1)" \
    "the offset field"
  assert_eq 0 "$(printf '%s\n' "$out" | jq -r 'select(.type=="exit") | .exit_code')" \
    "exit event"
  out=$(api GET "/v1/sandboxes/bg-offset/processes/o/output?offset=100")
  assert_eq "" "$(printf '%s\n' "$out" | jq -r 'select(.type=="stdout") | .data')" \
    "offset past the end"
  api_call GET "/v1/sandboxes/bg-offset/processes/o/output?offset=-1"
  assert_eq 400 "$API_STATUS" "negative offset"
}

test_reattach_after_the_client_left() {
  local pid tmp rc
  new_sandbox bg-attach
  tmp=$(mktemp -d)
  "$WARREN" exec -d --tag r bg-attach -- sh -c \
    'i=0; while [ $i -lt 25 ]; do echo tick$i; i=$((i+1)); sleep 0.1; done; exit 3' \
    >/dev/null
  # A follower that goes away (killed) does not take the process with it.
  "$WARREN" logs -f bg-attach r >"$tmp/first" &
  pid=$!
  sleep 0.5
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  assert_contains "$(cat "$tmp/first")" tick0 "the first client's output"
  proc_running bg-attach r || fail "the process died with its first client"
  # An attach that detaches with a signal (Ctrl-C without a tty).
  "$WARREN" attach bg-attach r >"$tmp/second" 2>"$tmp/second.err" &
  pid=$!
  sleep 0.3
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  assert_eq 0 "$rc" "attach detached by SIGINT"
  assert_contains "$(cat "$tmp/second.err")" "detached from r" "detach message"
  proc_running bg-attach r || fail "the process died when attach detached"
  # Attach again: everything from the start, then live, then the exit code.
  rc=0
  timeout 10 "$WARREN" attach bg-attach r </dev/null >"$tmp/third" || rc=$?
  assert_eq 3 "$rc" "attach exits with the process's status"
  assert_eq "$(seq 0 24 | sed 's/^/tick/')" "$(cat "$tmp/third")" "attach output"
  rm -rf "$tmp"
}

test_background_survives_stdin_and_fds() {
  local fds1 fds2 i
  new_sandbox bg-fds
  # A background process gets EOF on stdin rather than a hang.
  "$WARREN" exec -d --tag cat bg-fds -- cat >/dev/null
  wait_until 5 proc_ended bg-fds cat || fail "cat waits on stdin"
  api DELETE /v1/sandboxes/bg-fds/processes/cat
  fds1=$(ls /proc/"$(daemon_pid)"/fd | wc -l)
  for i in $(seq 1 30); do
    "$WARREN" exec -d --tag "t$i" bg-fds -- echo "$i" >/dev/null
  done
  for i in $(seq 1 30); do
    wait_until 5 proc_ended bg-fds "t$i" || fail "t$i did not end"
    assert_eq "$i" "$("$WARREN" logs bg-fds "t$i")" "output of t$i"
    api DELETE "/v1/sandboxes/bg-fds/processes/t$i"
  done
  fds2=$(ls /proc/"$(daemon_pid)"/fd | wc -l)
  [ "$fds2" -le $((fds1 + 2)) ] || fail "warrend fds grew from $fds1 to $fds2"
  assert_eq 0 "$("$WARREN" ps --json bg-fds | jq length)" "all forgotten"
}

# A sandbox keeps at most 256 processes; the refusal says how to get out,
# and the way out works.
test_process_table_limit() {
  local i out
  new_sandbox bg-limit
  for i in $(seq 1 256); do
    "$WARREN" exec -d --tag "s$i" bg-limit -- sleep 1000 >/dev/null ||
      fail "background process $i refused"
  done
  out=$(must_fail "$WARREN" exec -d bg-limit -- true)
  assert_contains "$out" "warren kill" "the refusal's advice"
  out=$(must_fail "$WARREN" exec bg-limit -- true)
  assert_contains "$out" "256" "a foreground exec at the limit"
  "$WARREN" kill -s KILL bg-limit s1 >/dev/null
  wait_until 5 proc_ended bg-limit s1 || fail "s1 still runs"
  # A finished process still holds its place until it is forgotten.
  must_fail "$WARREN" exec bg-limit -- true >/dev/null
  api DELETE /v1/sandboxes/bg-limit/processes/s1
  assert_eq ok "$("$WARREN" exec bg-limit -- echo ok)" "exec after forgetting one"
}
