# shellcheck shell=bash
# End-to-end: a sandbox's life from create to rm, through the CLI.
#
# create with every option (and what inspect, ls and the sandbox itself
# then show), names, stop (with a process that ignores SIGTERM), what
# survives stop/start, pause/resume, and rm, after which nothing of the
# sandbox is left on the host: no mount, no cgroup, no directory, no
# process.

test_create_options_are_applied() {
  local j id out mem rc
  new_sandbox lc-opts --memory 256m --cpus 1.5 --pids 200 \
    --env FOO=bar --env EMPTY= --label team=infra --label tier=one \
    --workdir /srv
  j=$(sb_json lc-opts)
  assert_eq lc-opts "$(json_get "$j" .name)" name
  assert_eq running "$(json_get "$j" .state)" state
  assert_eq base "$(json_get "$j" .image)" image
  assert_eq lc-opts "$(json_get "$j" .hostname)" hostname
  assert_eq 268435456 "$(json_get "$j" .limits.memory_bytes)" memory
  assert_eq 1.5 "$(json_get "$j" .limits.cpus)" cpus
  assert_eq 200 "$(json_get "$j" .limits.pids)" pids
  assert_eq bar "$(json_get "$j" .env.FOO)" env
  assert_eq "" "$(json_get "$j" .env.EMPTY)" "empty env value"
  assert_eq infra "$(json_get "$j" .labels.team)" label
  assert_eq one "$(json_get "$j" .labels.tier)" label
  assert_eq /srv "$(json_get "$j" .workdir)" workdir
  id=$(json_get "$j" .id)
  case "$id" in sb-*) ;; *) fail "id $id" ;; esac
  [ "$(json_get "$j" .pid)" -gt 1 ] || fail "no init pid: $j"

  # The plain inspect names the same things.
  out=$("$WARREN" inspect lc-opts)
  assert_contains "$out" "$id" "inspect"
  assert_contains "$out" "infra" "inspect"

  # And the sandbox itself lives by them.
  assert_eq lc-opts "$("$WARREN" exec lc-opts -- hostname)" "hostname inside"
  assert_eq lc-opts "$("$WARREN" exec lc-opts -- cat /etc/hostname)" \
    "/etc/hostname"
  assert_eq /srv "$("$WARREN" exec lc-opts -- pwd)" "working directory"
  assert_eq bar "$("$WARREN" exec lc-opts -- printenv FOO)" "env inside"
  # The id works wherever a name does.
  assert_eq lc-opts "$("$WARREN" exec "$id" -- hostname)" "exec by id"

  # The limits are real: the cgroups hold them and the kernel enforces them.
  assert_eq 200 "$(cat /sys/fs/cgroup/pids/"$WR_CG_PARENT/$id"/pids.max \
    2>/dev/null || cat /sys/fs/cgroup/unified/"$WR_CG_PARENT/$id"/pids.max)" \
    "pids cgroup limit"
  mem=$(cat /sys/fs/cgroup/memory/"$WR_CG_PARENT/$id"/memory.limit_in_bytes \
    2>/dev/null || cat /sys/fs/cgroup/unified/"$WR_CG_PARENT/$id"/memory.max)
  assert_eq 268435456 "$mem" "memory cgroup limit"
  out=$("$WARREN" exec lc-opts -- python3 -c '
import os, time
n = 0
try:
    for i in range(300):
        if os.fork() == 0:
            time.sleep(1); os._exit(0)
        n += 1
except OSError:
    print("fork failed after", n)
')
  assert_contains "$out" "fork failed after 19" "forks under --pids 200"
  rc=0
  "$WARREN" exec lc-opts -- python3 -c 'b = [bytearray(1 << 20) for i in range(400)]' \
    2>/dev/null || rc=$?
  assert_eq 137 "$rc" "allocating 400 MiB under --memory 256m"
}

test_ls_json_and_label_filter() {
  local all
  new_sandbox lc-ls-a --label team=a --label env=ci
  new_sandbox lc-ls-b --label team=b --label env=ci
  "$WARREN" create --name lc-ls-c --no-start --label team=a >/dev/null
  WR_CLEANUP="$WR_CLEANUP lc-ls-c"

  all=$("$WARREN" ls --json)
  [ "$(json_get "$all" 'type')" = array ] || fail "ls --json: not an array"
  for n in lc-ls-a lc-ls-b lc-ls-c; do
    assert_contains "$(json_get "$all" '.[].name')" "$n" "ls --json"
  done
  assert_eq stopped "$(json_get "$all" '.[] | select(.name=="lc-ls-c") | .state')" \
    "state of a --no-start sandbox"

  assert_eq "lc-ls-a
lc-ls-c" "$("$WARREN" ls --json --label team=a | jq -r '.[].name' | sort)" \
    "ls --label team=a"
  assert_eq "lc-ls-a" \
    "$("$WARREN" ls -q --label team=a --label env=ci | sort)" \
    "two labels must both match"
  assert_eq "lc-ls-b" "$("$WARREN" ls -q --label team=b)" "ls -q --label"
  assert_eq "lc-ls-c" "$("$WARREN" ls -q --label team=a --state stopped)" \
    "--label with --state"
  assert_eq "" "$("$WARREN" ls -q --label team=nobody)" "no match"
  # The table has a header and one line per sandbox.
  assert_contains "$("$WARREN" ls)" "lc-ls-b" "ls table"
}

test_names_clash_and_invalid() {
  local out n before after
  new_sandbox lc-name
  out=$(must_fail "$WARREN" create --name lc-name)
  assert_contains "$out" "already exists" "name clash"
  # The clash did not disturb the first one.
  assert_eq running "$(sb_state lc-name)" "the first sandbox"

  before=$("$WARREN" ls -q | wc -l)
  for n in Upper 'a/b' '-dash' '.dot' 'sp ace' 'x;y' "$(printf 'a%.0s' $(seq 64))" \
    '../x' 'é'; do
    out=$(must_fail "$WARREN" create --name "$n")
    assert_contains "$out" "name" "refusal of name '$n'"
  done
  after=$("$WARREN" ls -q | wc -l)
  assert_eq "$before" "$after" "sandboxes after invalid names"
  # 63 characters is the longest name allowed.
  n=$(printf 'b%.0s' $(seq 63))
  new_sandbox "$n" --no-start
  assert_eq "$n" "$(sb_get "$n" .name)" "63-character name"
}

test_stop_kills_a_process_ignoring_term() {
  local id pid start secs
  new_sandbox lc-stop
  id=$(sb_get lc-stop .id)
  pid=$(sb_get lc-stop .pid)
  "$WARREN" exec -d --tag stubborn lc-stop -- \
    sh -c 'trap "" TERM; while :; do sleep 0.2; done' >/dev/null
  sleep 0.3
  start=$(now_ms)
  "$WARREN" stop --timeout 2 lc-stop >/dev/null
  secs=$((($(now_ms) - start)))
  [ "$secs" -ge 1800 ] || fail "stop took ${secs} ms, before the 2 s grace"
  [ "$secs" -lt 6000 ] || fail "stop took ${secs} ms for a 2 s grace"
  assert_eq stopped "$(sb_state lc-stop)" "state after stop"
  assert_eq null "$(sb_get lc-stop .pid)" "pid after stop"
  ! kill -0 "$pid" 2>/dev/null || fail "warren-init $pid still alive"
  assert_eq "" "$(procs_in_sandbox_cgroup "$id")" "processes after stop"
  # exec on a stopped sandbox is refused with a reason.
  out=$(must_fail "$WARREN" exec lc-stop -- true)
  assert_contains "$out" "not running" "exec when stopped"
}

test_stop_of_willing_processes_is_quick() {
  local start ms pid rc
  new_sandbox lc-stopq
  "$WARREN" exec -d lc-stopq -- sleep 1000 >/dev/null
  # A foreground exec in flight ends with the sandbox instead of hanging.
  "$WARREN" exec lc-stopq -- sleep 1000 &
  pid=$!
  sleep 0.3
  start=$(now_ms)
  "$WARREN" stop --timeout 10 lc-stopq >/dev/null
  ms=$(($(now_ms) - start))
  [ "$ms" -lt 3000 ] || fail "stop waited ${ms} ms although all obeyed TERM"
  assert_eq stopped "$(sb_state lc-stopq)" "state"
  rc=0
  timeout 5 tail --pid="$pid" -f /dev/null || fail "the exec outlived the sandbox"
  wait "$pid" || rc=$?
  assert_eq 143 "$rc" "status of the exec cut short by stop"
  # stop is idempotent too.
  "$WARREN" stop lc-stopq >/dev/null
}

test_files_and_software_survive_stop_start() {
  local pid1 pid2
  new_sandbox lc-persist
  "$WARREN" exec lc-persist -- sh -c '
    echo precious >/root/data.txt
    printf "#!/bin/sh\necho hello from tool\n" >/usr/local/bin/tool
    chmod 755 /usr/local/bin/tool
    mkdir -p /opt/app && echo v1 >/opt/app/VERSION
    rm /etc/motd'
  pid1=$(sb_get lc-persist .pid)
  "$WARREN" stop lc-persist >/dev/null
  assert_eq stopped "$(sb_state lc-persist)" "state"
  "$WARREN" start lc-persist >/dev/null
  assert_eq running "$(sb_state lc-persist)" "state"
  pid2=$(sb_get lc-persist .pid)
  [ "$pid1" != "$pid2" ] || fail "init pid unchanged after a restart"
  assert_eq precious "$("$WARREN" exec lc-persist -- cat /root/data.txt)" \
    "file after restart"
  assert_eq "hello from tool" "$("$WARREN" exec lc-persist -- tool)" \
    "installed program after restart"
  assert_eq v1 "$("$WARREN" exec lc-persist -- cat /opt/app/VERSION)" "dir"
  "$WARREN" exec lc-persist -- test ! -e /etc/motd ||
    fail "a deleted image file came back"
  # start on a running sandbox is a no-op that succeeds.
  "$WARREN" start lc-persist >/dev/null
  assert_eq "$pid2" "$(sb_get lc-persist .pid)" "pid after a second start"
  assert_eq precious "$("$WARREN" exec lc-persist -- cat /root/data.txt)" \
    "exec after a second start"
}

test_pause_resume() {
  local a b c init
  new_sandbox lc-pause
  "$WARREN" exec -d --tag counter lc-pause -- sh -c \
    'i=0; while :; do i=$((i+1)); echo $i >/tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.05; done' >/dev/null
  sleep 0.5
  "$WARREN" pause lc-pause >/dev/null
  assert_eq paused "$(sb_state lc-pause)" "state"
  # Read from the host: a request through warren would wake it
  # (15-wake.sh).
  init=$(sb_get lc-pause .pid)
  a=$(cat "/proc/$init/root/tmp/n")
  sleep 0.6
  b=$(cat "/proc/$init/root/tmp/n")
  assert_eq "$a" "$b" "counter while paused"
  assert_eq paused "$(sb_state lc-pause)" "state after reading"

  # pause twice is fine.
  "$WARREN" pause lc-pause >/dev/null

  "$WARREN" resume lc-pause >/dev/null
  assert_eq running "$(sb_state lc-pause)" "state"
  sleep 0.5
  c=$("$WARREN" exec lc-pause -- cat /tmp/n)
  [ "$c" -gt "$b" ] || fail "the counter did not go on after resume ($b -> $c)"
  assert_eq true "$("$WARREN" ps --json lc-pause | jq -r '.[0].running')" \
    "the process after resume"
}

# Everything a sandbox had on the host is gone.
assert_no_traces() { # ID INIT-PID
  local t
  t=$(host_traces "$1")
  assert_eq "0 " "$t" "mounts, cgroups and directories left of $1"
  ! kill -0 "$2" 2>/dev/null || fail "warren-init ($2) of $1 still runs"
  assert_eq "" "$(procs_in_sandbox_cgroup "$1")" "processes left of $1"
}

test_rm_refuses_running_without_force() {
  local out
  new_sandbox lc-rm1
  out=$(must_fail "$WARREN" rm lc-rm1)
  assert_contains "$out" "lc-rm1" "rm message"
  assert_contains "$out" "running" "rm message"
  assert_eq running "$(sb_state lc-rm1)" "state after a refused rm"
  "$WARREN" exec lc-rm1 -- true
}

test_rm_force_running_leaves_nothing() {
  local id pid out
  new_sandbox lc-rm2 --memory 128m
  "$WARREN" exec -d lc-rm2 -- sh -c 'sleep 1000 & sleep 1000' >/dev/null
  "$WARREN" exec lc-rm2 -- sh -c 'echo x >/root/f'
  id=$(sb_get lc-rm2 .id)
  pid=$(sb_get lc-rm2 .pid)
  [ -n "$(procs_in_sandbox_cgroup "$id")" ] || fail "test broken: no pids found"
  [ "$(host_traces "$id")" != "0 " ] || fail "test broken: no traces found"
  "$WARREN" rm -f lc-rm2 >/dev/null
  assert_no_traces "$id" "$pid"
  out=$(must_fail "$WARREN" inspect lc-rm2)
  assert_contains "$out" "no sandbox" "inspect after rm"
  assert_not_contains "$("$WARREN" ls -q)" lc-rm2 "ls after rm"
  # The name is free again.
  new_sandbox lc-rm2
}

test_rm_force_paused_leaves_nothing() {
  local id pid
  new_sandbox lc-rm3
  "$WARREN" exec -d lc-rm3 -- sleep 1000 >/dev/null
  id=$(sb_get lc-rm3 .id)
  pid=$(sb_get lc-rm3 .pid)
  "$WARREN" pause lc-rm3 >/dev/null
  assert_eq paused "$(sb_state lc-rm3)" "state"
  must_fail "$WARREN" rm lc-rm3 >/dev/null
  "$WARREN" rm -f lc-rm3 >/dev/null
  assert_no_traces "$id" "$pid"
}

test_rm_stopped_without_force() {
  local id pid
  new_sandbox lc-rm4
  id=$(sb_get lc-rm4 .id)
  pid=$(sb_get lc-rm4 .pid)
  "$WARREN" stop lc-rm4 >/dev/null
  "$WARREN" rm lc-rm4 >/dev/null
  assert_no_traces "$id" "$pid"
  # Several names: each done, the missing one reported, exit 1.
  new_sandbox lc-rm5 --no-start
  new_sandbox lc-rm6 --no-start
  out=$(must_fail "$WARREN" rm lc-rm5 lc-nonexistent lc-rm6)
  assert_contains "$out" "lc-nonexistent" "rm of a missing sandbox"
  assert_not_contains "$("$WARREN" ls -q)" lc-rm6 "the one after the failure"
}
