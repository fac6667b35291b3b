# shellcheck shell=bash
# Security: two sandboxes on one host are strangers.
#
# Sandbox A offers processes, files, a loopback listener, an abstract unix
# socket and System V IPC objects; sandbox B (root inside, with
# tests/helpers/hostile_ns.c) tries to see, signal, read or reach each of
# them, by pids and ids seen on the host or guessed, by key, by name and
# by every path that leads to A's files on the host. A's own attempts
# succeed (so the probes work); B's all fail. Sourced by tests/run-e2e.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

# Two fresh sandboxes with the helper: A=PREFIX-a (A_ID) and B=PREFIX-b.
two_sandboxes() { # PREFIX
  A=$1-a
  B=$1-b
  new_sandbox "$A"
  new_sandbox "$B"
  install_helper "$A" hostile_ns
  install_helper "$B" hostile_ns
  A_ID=$(sb_get "$A" .id)
}

# The pid, as seen inside sandbox NAME, of its process running CMDLINE.
inside_pid_of() { # NAME CMDLINE
  "$WARREN" exec "$1" -- sh -c 'for d in /proc/[0-9]*; do
    [ "$(tr "\0" " " <$d/cmdline 2>/dev/null)" = "$0 " ] && echo ${d#/proc/}
    done; true' "$2" | head -1
}

test_neighbours_cannot_see_each_others_processes() {
  local out host_pid
  two_sandboxes nb-see
  "$WARREN" exec -d --tag marked "$A" -- sleep 4242.5 >/dev/null
  host_pid=$(sandbox_host_pid_of "$A_ID" "sleep 4242.5") || fail "A's sleep not found"
  out=$("$WARREN" exec "$B" -- sh -c 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" " "')
  assert_not_contains "$out" "4242.5" "B's view of processes"
  # Not by the host's pid either, nor by A's pid inside A.
  out=$("$WARREN" exec "$B" -- sh -c "tr '\\0' ' ' </proc/$host_pid/cmdline; true" 2>&1)
  assert_not_contains "$out" "4242.5" "B's /proc/$host_pid"
  out=$("$WARREN" exec "$B" -- sh -c "cat /proc/$(inside_pid_of "$A" "sleep 4242.5")/cmdline 2>/dev/null | tr '\0' ' '; true")
  assert_not_contains "$out" "4242.5" "B's /proc at A's pid"
  # A sees its own.
  assert_contains "$("$WARREN" exec "$A" -- sh -c 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" " "')" \
    "4242.5" "A's view of its processes"
  assert_daemon_alive
}

test_neighbours_cannot_signal_each_others_processes() {
  local host_pid a_pid out scan
  two_sandboxes nb-kill
  "$WARREN" exec -d --tag victim "$A" -- sleep 4343.5 >/dev/null
  host_pid=$(sandbox_host_pid_of "$A_ID" "sleep 4343.5") || fail "A's sleep not found"
  a_pid=$(inside_pid_of "$A" "sleep 4343.5")
  [ -n "$a_pid" ] || fail "A's sleep has no pid inside A"
  # By the pid the host sees, and pidfd_open on it.
  out=$("$WARREN" exec "$B" -- hostile_ns kill "$host_pid")
  assert_eq "kill $host_pid: ESRCH" "$out" "B kills A's process by its host pid"
  out=$("$WARREN" exec "$B" -- hostile_ns pidfd "$host_pid")
  assert_eq "pidfd $host_pid: ESRCH" "$out" "B's pidfd_open of A's host pid"
  # By guessing: every pid B can signal is one of B's own, visible in its
  # /proc, and there are only a few.
  scan=$("$WARREN" exec "$B" -- hostile_ns kill-scan 5000)
  assert_eq "hidden:" "$(sed -n 2p <<<"$scan")" "pids B can signal but not see"
  [ "$(sed -n 1p <<<"$scan" | wc -w)" -le 8 ] || fail "B can signal many pids: $scan"
  # A's pid inside A, killed from B, is not A's process (B has none, or
  # its own, by that number).
  "$WARREN" exec "$B" -- hostile_ns kill "$a_pid" >/dev/null
  sleep 0.2
  assert_eq "$host_pid" "$(sandbox_host_pid_of "$A_ID" "sleep 4343.5")" \
    "A's sleep after B's attempts"
  pid_alive "$host_pid" || fail "A's sleep died"
  assert_eq running "$(sb_state "$A")" "A's state"
  # A itself can signal it (the probe works).
  assert_eq "kill $a_pid: ok" "$("$WARREN" exec "$A" -- hostile_ns kill "$a_pid")" \
    "A kills its own process"
  wait_until 5 pid_gone "$host_pid" || fail "A could not kill its own process"
  assert_daemon_alive
}

test_neighbours_cannot_read_each_others_files() {
  local secret out a_root a_pid p
  two_sandboxes nb-files
  secret="secret-$RANDOM$RANDOM"
  "$WARREN" exec "$A" -- sh -c "echo $secret >/tmp/$secret; echo $secret >/root/$secret"
  "$WARREN" exec -d --tag holder "$A" -- sleep 4444.5 >/dev/null
  a_pid=$(sandbox_host_pid_of "$A_ID" "sleep 4444.5") || fail "A's sleep not found"
  a_root="$WR_ROOT/sandboxes/$A_ID"
  # Inside B: nothing of A by any name, including A's paths on the host
  # and /proc/*/root.
  out=$("$WARREN" exec "$B" -- sh -c "
    for p in /tmp/$secret $a_root/rootfs/tmp/$secret $a_root/upper/tmp/$secret \
      /proc/$a_pid/root/tmp/$secret /proc/1/root/tmp/$secret \
      /proc/*/root/tmp/$secret /proc/*/cwd/tmp/$secret /var/lib/warren*; do
      cat \"\$p\" 2>/dev/null && echo \"read \$p\"
    done; find / -xdev -name '$secret' 2>/dev/null; true")
  assert_not_contains "$out" "$secret" "what B can read"
  # Through B's files API: B's symlinks to A's host paths resolve in B.
  "$WARREN" exec "$B" -- sh -c "ln -s $a_root/rootfs /a-rootfs; ln -s $a_root/upper /a-upper
    ln -s /proc/$a_pid/root /a-proc"
  for p in "/a-rootfs/tmp/$secret" "/a-upper/tmp/$secret" "/a-proc/tmp/$secret" \
    "$a_root/rootfs/tmp/$secret" "/proc/$a_pid/root/tmp/$secret" \
    "/../../../../../$a_root/rootfs/root/$secret"; do
    api_call GET "$(files_url "$B" "$p")"
    [ "$API_STATUS" = 404 ] || fail "B's files API for $p: $API_STATUS $API_BODY"
    api_call GET "$(files_url "$B" list "$(dirname "$p")")"
    assert_not_contains "$API_BODY" "$secret" "B's listing of $(dirname "$p")"
  done
  # A still reads its own.
  assert_eq "$secret" "$("$WARREN" exec "$A" -- cat "/tmp/$secret")" "A's own file"
  assert_eq "$secret" "$(curl -sS --fail --unix-socket "$WR_SOCK" \
    "http://warren$(files_url "$A" "/tmp/$secret")")" "A's file through A's API"
  assert_daemon_alive
}

test_neighbours_loopback_ports_are_separate() {
  local out
  two_sandboxes nb-port
  "$WARREN" exec -d --tag listener "$A" -- \
    hostile_ns tcp-listen 8080 "A-secret-$A_ID" 60 >/dev/null
  wait_until 5 sh -c "'$WARREN' exec '$A' -- hostile_ns tcp-connect 8080 | grep -q A-secret" ||
    fail "A cannot reach its own listener"
  out=$("$WARREN" exec "$B" -- hostile_ns tcp-connect 8080)
  assert_eq "tcp-connect: ECONNREFUSED" "$out" "B connects to 127.0.0.1:8080"
  # B's own listener on the same port is its own.
  "$WARREN" exec -d --tag listener "$B" -- \
    hostile_ns tcp-listen 8080 "B-secret" 60 >/dev/null
  wait_until 5 sh -c "'$WARREN' exec '$B' -- hostile_ns tcp-connect 8080 | grep -q B-secret" ||
    fail "B cannot listen on the same port"
  assert_contains "$("$WARREN" exec "$A" -- hostile_ns tcp-connect 8080)" "A-secret" \
    "A reaches its own port"
  # The network namespaces differ.
  [ "$(readlink "/proc/$(sb_get "$A" .pid)/ns/net")" != \
    "$(readlink "/proc/$(sb_get "$B" .pid)/ns/net")" ] || fail "one network namespace"
  assert_daemon_alive
}

test_neighbours_abstract_unix_sockets_are_separate() {
  local out name
  two_sandboxes nb-unix
  name="warren-neighbour-$RANDOM"
  "$WARREN" exec -d --tag listener "$A" -- \
    hostile_ns unix-listen "$name" "A-secret" 60 >/dev/null
  wait_until 5 sh -c "'$WARREN' exec '$A' -- hostile_ns unix-connect $name | grep -q A-secret" ||
    fail "A cannot reach its own abstract socket"
  out=$("$WARREN" exec "$B" -- hostile_ns unix-connect "$name")
  assert_eq "unix-connect: ECONNREFUSED" "$out" "B connects to @$name"
  out=$("$WARREN" exec "$B" -- sh -c 'cat /proc/net/unix')
  assert_not_contains "$out" "$name" "B's /proc/net/unix"
  # Nor the host's (the daemon's sockets are in the host's namespace).
  out=$("$WARREN" exec "$B" -- sh -c 'cat /proc/net/unix')
  assert_not_contains "$out" "warrend" "host sockets in B's /proc/net/unix"
  assert_daemon_alive
}

test_neighbours_sysv_ipc_and_shm_are_separate() {
  local out ids key
  two_sandboxes nb-ipc
  key=0x5747$((RANDOM % 9000 + 1000))
  out=$("$WARREN" exec "$A" -- hostile_ns ipc-create "$key" "A-secret")
  [[ "$out" =~ ^ipc-create:\ ok\ (.*)$ ]] || fail "A's IPC objects: $out"
  ids=${BASH_REMATCH[1]}
  "$WARREN" exec "$A" -- sh -c 'echo A-secret >/dev/shm/nb-posix-shm'
  # A finds its own objects by key.
  assert_contains "$("$WARREN" exec "$A" -- hostile_ns ipc-probe "$key")" \
    "shmget: ok A-secret" "A's own shared memory"
  # B finds none: not by key, not by the ids A got, not in ipcs.
  # shellcheck disable=SC2086 # ids are three words
  out=$("$WARREN" exec "$B" -- hostile_ns ipc-probe "$key" $ids)
  assert_eq "shmget: ENOENT
msgget: ENOENT
semget: ENOENT
shmctl-id: EINVAL
msgctl-id: EINVAL
semctl-id: EINVAL" "$out" "B's probes of A's IPC objects"
  out=$("$WARREN" exec "$B" -- sh -c 'ipcs -a; ls -A /dev/shm')
  assert_not_contains "$out" "$(printf '0x%08x' "$key")" "B's ipcs"
  assert_not_contains "$out" "nb-posix-shm" "B's /dev/shm"
  assert_contains "$("$WARREN" exec "$A" -- ipcs -m)" "$(printf '0x%08x' "$key")" "A's ipcs"
  # The IPC namespaces differ.
  [ "$(readlink "/proc/$(sb_get "$A" .pid)/ns/ipc")" != \
    "$(readlink "/proc/$(sb_get "$B" .pid)/ns/ipc")" ] || fail "one IPC namespace"
  assert_daemon_alive
}
