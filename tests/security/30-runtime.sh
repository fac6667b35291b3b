# shellcheck shell=bash
# Adversarial: attacks on the runtime itself. Overwriting the binaries
# that run a sandbox through /proc/*/exe, fds of the daemon or of init
# leaking into processes, a working directory through /proc/self/fd,
# init's /proc entries, and PID reuse redirecting a signal. The hostile
# program is tests/helpers/attack_runtime.c. Sourced by tests/run-e2e.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

# warren-init runs from a sealed memfd: nothing inside can even open its
# exe, and the host sees a memfd that no one can write, whoever opens it.
test_init_exe_overwrite_fails() {
  local out init_pid user
  attack_sandbox sec-initexe attack_runtime
  init_pid=$(sb_get sec-initexe .pid)
  for user in root 1000; do
    out=$("$WARREN" exec -u "$user" sec-initexe -- attack_runtime exe \
      /proc/1/exe)
    assert_results "$out" EACCES "open_wronly /proc/1/exe" \
      "open_rdwr /proc/1/exe"
  done
  assert_eq "/memfd:warren-init (deleted)" "$(readlink "/proc/$init_pid/exe")" \
    "init's exe on the host"
  out=$("$WR_HELPERS/attack_runtime" seals "/proc/$init_pid/exe")
  assert_eq "seals: seal shrink grow write" "$out" "seals of init's memfd"
  # Even host root cannot open it for writing while it runs.
  out=$("$WR_HELPERS/attack_runtime" exe "/proc/$init_pid/exe")
  assert_not_contains "$out" ": ok" "host root opening init's exe"
  assert_eq ok "$("$WARREN" exec sec-initexe -- echo ok)" "after the attack"
}

# A program from the image, running: neither its own /proc/self/exe nor
# another process's /proc/PID/exe opens for writing. And overwriting an
# image file by name changes the sandbox's own copy only: the host's
# image and a neighbour's view stay as they were.
test_image_binary_overwrite_fails() {
  local out pid image_sum
  attack_sandbox sec-imgexe attack_runtime
  new_sandbox sec-imgnb
  image_sum=$(sha256sum <"$WR_ROOT/images/base/rootfs/usr/bin/sleep")
  "$WARREN" exec -d --tag victim sec-imgexe -- sleep 4247.5 >/dev/null
  pid=$("$WARREN" ps --json sec-imgexe |
    jq -r '.[] | select(.tag=="victim") | .pid')
  out=$("$WARREN" exec sec-imgexe -- attack_runtime exe "/proc/$pid/exe" \
    /proc/self/exe)
  assert_results "$out" ETXTBSY "open_wronly /proc/$pid/exe" \
    "open_rdwr /proc/$pid/exe" "open_wronly /proc/self/exe" \
    "open_rdwr /proc/self/exe"
  out=$("$WARREN" exec -u 1000 sec-imgexe -- attack_runtime exe \
    "/proc/$pid/exe" /proc/self/exe)
  assert_not_contains "$out" ": ok" "writing running programs as uid 1000"
  assert_eq "$image_sum" \
    "$("$WARREN" exec sec-imgexe -- sh -c 'sha256sum </usr/bin/sleep')" \
    "the sandbox's sleep"

  "$WARREN" kill -s KILL sec-imgexe victim >/dev/null
  "$WARREN" exec sec-imgexe -- sh -c \
    'printf EVIL | dd of=/usr/bin/sleep conv=notrunc status=none'
  assert_not_contains "$("$WARREN" exec sec-imgexe -- sh -c \
    'sha256sum </usr/bin/sleep')" "$image_sum" "the sandbox's own copy"
  assert_eq "$image_sum" "$(sha256sum <"$WR_ROOT/images/base/rootfs/usr/bin/sleep")" \
    "the host's image file"
  assert_eq "$image_sum" \
    "$("$WARREN" exec sec-imgnb -- sh -c 'sha256sum </usr/bin/sleep')" \
    "the neighbour's sleep"
}

# Every kind of process holds its stdio and nothing else: no fd of the
# daemon (which holds other sandboxes' sockets) or of init.
test_no_fd_leaks_into_processes() {
  local out tty_out user tag
  attack_sandbox sec-fds attack_runtime
  new_sandbox sec-fds-other
  for user in root nobody; do
    assert_eq "fds: 0 1 2" \
      "$("$WARREN" exec -u "$user" sec-fds -- attack_runtime fds)" \
      "fds of a process of $user"
  done
  "$WARREN" exec -d --tag bg sec-fds -- attack_runtime fds >/dev/null
  "$WARREN" exec -d -t --tag bgtty sec-fds -- attack_runtime fds >/dev/null
  for tag in bg bgtty; do
    wait_until 5 sh -c "'$WARREN' logs sec-fds $tag | grep -q '^fds'" ||
      fail "no output from $tag"
    assert_eq "fds: 0 1 2" "$("$WARREN" logs sec-fds "$tag" | tr -d '\r')" \
      "fds of the background process $tag"
  done
  tty_out="$WR_RUN/sec-fds-tty.out"
  "$WR_HELPERS/ptydrive" 24 80 "$WARREN" exec -it sec-fds -- \
    attack_runtime fds >"$tty_out" <<'EOF' ||
exit 0
EOF
    fail "terminal session failed: $(cat "$tty_out")"
  out=$(tr -d '\r' <"$tty_out")
  assert_eq "fds: 0 1 2" "$out" "fds of a process on a terminal"
}

# A working directory through /proc/self/fd/N (the runc "leaky vessels"
# escape) or through init's cwd or root either fails or lands inside the
# sandbox, and no host file is reachable relative to it.
test_exec_cwd_through_proc_fd_stays_inside() {
  local marker rel cwd out rc
  attack_sandbox sec-cwd attack_runtime
  marker=/root/warren-marker-$$-$RANDOM
  echo "host secret" >"$marker"
  # shellcheck disable=SC2064 # expanded now, on purpose
  trap "rm -f '$marker'; \"\$WARREN\" rm -f sec-cwd >/dev/null 2>&1" EXIT
  rel=../../../../../../../..$marker
  for cwd in /proc/self/fd/{3..10} /proc/1/cwd /proc/1/root /proc/self/root \
    /proc/self/cwd /proc/1/task/1/cwd; do
    rc=0
    out=$("$WARREN" exec --cwd "$cwd" sec-cwd -- attack_runtime cwd "$rel" \
      2>&1) || rc=$?
    if [ "$rc" != 0 ]; then
      assert_contains "$out" "cannot enter the working directory" \
        "exec with cwd $cwd"
      continue
    fi
    [[ "$out" =~ ^cwd:\ / ]] || fail "cwd $cwd is outside the root: $out"
    assert_line "$out" "relative: ENOENT" "the marker relative to cwd $cwd"
  done
}

# init's sensitive /proc entries cannot be read, listed, followed or
# written, by root or anyone else inside.
test_init_proc_entries_unreadable() {
  local out user entry init_pid
  attack_sandbox sec-proc1 attack_runtime
  for user in root 1000; do
    out=$("$WARREN" exec -u "$user" sec-proc1 -- attack_runtime proc1)
    for entry in environ mem auxv maps smaps pagemap syscall stack \
      personality io task/1/environ task/1/mem; do
      assert_line "$out" "read_$entry: EACCES" "as $user"
    done
    for entry in root cwd exe fd/0 fd/3 task/1/root ns/user; do
      assert_line "$out" "readlink_$entry: EACCES" "as $user"
    done
    for entry in fd fdinfo map_files task/1/fd root/ cwd/; do
      assert_line "$out" "list_$entry: EACCES" "as $user"
    done
    assert_not_contains "$(grep '^write_' <<<"$out")" ": ok" \
      "writes to init's entries as $user"
  done
  # init is as it was.
  init_pid=$(sb_get sec-proc1 .pid)
  assert_line "$(cat "/proc/$init_pid/status")" "NSpid:	$init_pid	1" \
    "init's status"
  assert_eq 0 "$(cat "/proc/$init_pid/oom_score_adj")" "init's oom_score_adj"
  assert_eq warren-init "$(tr '\0' '\n' <"/proc/$init_pid/cmdline" | head -1)" \
    "init's command line"
  assert_eq ok "$("$WARREN" exec sec-proc1 -- echo ok)" "after the attack"
}

# PID reuse: a background process exits and its pid goes to a new
# process (the test makes the namespace hand it out next through
# ns_last_pid, from the host: cycling through the namespace's 4194304
# pids from inside would take minutes). Signalling the exited process's
# tag is refused, and the new process is untouched.
test_pid_reuse_cannot_redirect_signal() {
  local pid init_pid sentinel out status sig
  attack_sandbox sec-pidreuse
  init_pid=$(sb_get sec-pidreuse .pid)
  "$WARREN" exec -d --tag gone sec-pidreuse -- true >/dev/null
  wait_until 5 sh -c "'$WARREN' ps --json sec-pidreuse |
    jq -e '.[] | select(.tag==\"gone\") | .running == false'" ||
    fail "the process did not end"
  pid=$("$WARREN" ps --json sec-pidreuse |
    jq -r '.[] | select(.tag=="gone") | .pid')
  nsenter --target "$init_pid" --pid -- /bin/sh -c \
    "echo $((pid - 1)) >/proc/sys/kernel/ns_last_pid" ||
    skip "cannot set ns_last_pid (needs CONFIG_CHECKPOINT_RESTORE)"
  "$WARREN" exec -d --tag sentinel sec-pidreuse -- sleep 4248.5 >/dev/null
  sentinel=$("$WARREN" ps --json sec-pidreuse |
    jq -r '.[] | select(.tag=="sentinel") | .pid')
  assert_eq "$pid" "$sentinel" "the sentinel's pid (the recycled one)"

  for sig in TERM KILL; do
    out=$(must_fail "$WARREN" kill -s "$sig" sec-pidreuse gone)
    assert_contains "$out" "has exited" "kill -s $sig of the exited process"
  done
  status=$(api_status POST /v1/sandboxes/sec-pidreuse/processes/gone/signal \
    -H 'Content-Type: application/json' -d '{"signal":"KILL"}')
  assert_eq 409 "$status" "signalling the exited process through the API"
  sleep 0.2
  assert_eq true "$("$WARREN" ps --json sec-pidreuse |
    jq -r '.[] | select(.tag=="sentinel") | .running')" "the sentinel"
  assert_eq "sleep 4248.5" "$("$WARREN" exec sec-pidreuse -- sh -c \
    "tr '\0' ' ' </proc/$pid/cmdline | sed 's/ \$//'")" "pid $pid inside"
}
