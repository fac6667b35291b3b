# Isolation: what a sandbox's root can and cannot do to the host and to
# other sandboxes. Each test runs hostile or curious commands inside a real
# sandbox (often through tests/helpers/probe.c) and asserts the safe
# outcome. Sourced by tests/run-e2e, which provides lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

# Root inside is uid 0 there and an unprivileged uid on the host; the files
# it writes belong to that uid; image files look owned by root inside.
test_root_inside_is_unprivileged_outside() {
  local id base pid status f p
  new_sandbox iso-uid
  id=$(sb_get iso-uid .id)
  base=$(sb_get iso-uid .uid_base)
  [ "$base" -ge $((0x10000000)) ] || fail "uid_base $base is in the host's range"
  assert_eq 0 "$("$WARREN" exec iso-uid -- id -u)" "uid inside"
  assert_eq 0 "$("$WARREN" exec iso-uid -- id -g)" "gid inside"

  "$WARREN" exec -d --tag sleeper iso-uid -- sleep 1000 >/dev/null
  pid=
  for _ in $(seq 50); do
    for p in $(sandbox_host_pids "$id"); do
      if [ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" = "sleep 1000 " ]; then
        pid=$p
      fi
    done
    [ -z "$pid" ] || break
    sleep 0.1
  done
  [ -n "$pid" ] || fail "the sandbox's sleep is not in its cgroup"
  status=$(cat "/proc/$pid/status")
  assert_eq "Uid:	$base	$base	$base	$base" \
    "$(grep '^Uid:' <<<"$status")" "host uids of the sleep"
  assert_eq "Gid:	$base	$base	$base	$base" \
    "$(grep '^Gid:' <<<"$status")" "host gids of the sleep"
  # warren-init itself runs as the sandbox's root too, not as host root.
  assert_eq "$base" "$(awk '/^Uid:/ {print $3}' \
    "/proc/$(sb_get iso-uid .pid)/status")" "host euid of warren-init"

  "$WARREN" exec iso-uid -- sh -c 'echo x >/tmp/made-inside'
  "$WARREN" exec -u 1000:1000 iso-uid -- sh -c 'echo x >/tmp/made-by-1000'
  f="$WR_ROOT/sandboxes/$id/upper/tmp"
  assert_eq "$base:$base" "$(stat -c %u:%g "$f/made-inside")" \
    "host owner of a file root made inside"
  assert_eq "$((base + 1000)):$((base + 1000))" \
    "$(stat -c %u:%g "$f/made-by-1000")" "host owner of a file uid 1000 made"
  assert_eq "0 0" "$("$WARREN" exec iso-uid -- stat -c '%u %g' /usr/bin/env)" \
    "owner of an image file inside"
  assert_eq 0 "$(stat -c %u "$WR_ROOT/images/base/rootfs/usr/bin/env")" \
    "owner of the image file on the host"
}

# The sandbox sees its own processes only, and cannot look into init.
test_only_own_processes_visible() {
  local marker host_sleep out line list
  new_sandbox iso-pid
  "$WARREN" exec -d --tag sleeper iso-pid -- sleep 1000 >/dev/null
  marker="4$RANDOM.5"
  sleep "$marker" &
  host_sleep=$!
  # shellcheck disable=SC2064 # expanded now, on purpose
  trap "kill $host_sleep 2>/dev/null; \"\$WARREN\" rm -f iso-pid >/dev/null 2>&1" EXIT

  # One line per pid inside: "PID ARGV..." (a one-line script, so that
  # the listing shell's own entry is one line too).
  list='for p in /proc/[0-9]*; do printf "%s %s\n" "${p#/proc/}"'
  list="$list"' "$(tr "\0" " " <$p/cmdline)"; done 2>/dev/null'
  out=$("$WARREN" exec iso-pid -- sh -c "$list")
  assert_contains "$out" "1 warren-init --ctl-fd" "pid 1"
  assert_contains "$out" "sleep 1000" "the sandbox's own sleep"
  assert_not_contains "$out" "$marker" "processes inside"
  assert_not_contains "$out" "warrend" "processes inside"
  while read -r line; do
    # The listing shell itself, its $(...) and tr come and go.
    case "$line" in
      "1 warren-init "* | *" sleep 1000" | *" sh -c for p in /proc/"*) continue ;;
    esac
    [[ "$line" =~ ^[0-9]+$ ]] || fail "unexpected process inside: $line"
  done <<<"$out"
  [ "$(wc -l <<<"$out")" -le 6 ] || fail "too many processes inside: $out"
  # The host's pid of warrend means nothing inside (or is someone else).
  out=$("$WARREN" exec iso-pid -- sh -c \
    "tr '\0' ' ' </proc/$(daemon_pid)/cmdline 2>/dev/null || true")
  assert_not_contains "$out" warrend "pid $(daemon_pid) inside"

  out=$(must_fail "$WARREN" exec iso-pid -- cat /proc/1/environ)
  assert_contains "$out" "Permission denied" "reading init's environ"
  out=$(must_fail "$WARREN" exec iso-pid -- head -c 16 /proc/1/mem)
  assert_contains "$out" "Permission denied" "reading init's memory"
  out=$(must_fail "$WARREN" exec iso-pid -- ls /proc/1/root/)
  assert_contains "$out" "Permission denied" "listing init's root"
  out=$(must_fail "$WARREN" exec iso-pid -- ls -l /proc/1/exe)
  assert_contains "$out" "Permission denied" "reading init's exe link"
  out=$(must_fail "$WARREN" exec iso-pid -- cat /proc/1/maps)
  assert_contains "$out" "Permission denied" "reading init's maps"
  # init's fds (its control socket, kept output pipes) stay out of reach,
  # and a process gets its stdio and nothing else.
  out=$(must_fail "$WARREN" exec iso-pid -- ls /proc/1/fd)
  assert_contains "$out" "Permission denied" "listing init's fds"
  assert_eq "0 1 2 3" "$("$WARREN" exec iso-pid -- ls /proc/self/fd | xargs)" \
    "fds of a new process (3: ls's own directory)"
}

# No route out but warrend's proxy: a connection to the internet, to the
# host or to the metadata service lands on the proxy (the namespace's
# filter redirects it), which refuses it by policy and logs why; nothing
# else exists but lo, root cannot change that; lo itself works.
test_no_route_out_but_the_proxy() {
  local host_ip gw out addr log
  new_sandbox iso-net
  install_helper iso-net probe
  if command -v ip >/dev/null; then
    host_ip=$(ip -4 route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p')
    gw=$(ip -4 route get 1.1.1.1 | sed -n 's/.* via \([0-9.]*\).*/\1/p')
  else
    host_ip=$(hostname -I | awk '{print $1}')
  fi
  for addr in 1.1.1.1:80 1.1.1.1:443 169.254.169.254:80 \
    2606:4700:4700::1111:443 ${host_ip:+$host_ip:22} ${host_ip:+$host_ip:80} \
    ${gw:+$gw:53}; do
    out=$("$WARREN" exec iso-net -- python3 -c '
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
try:
    data = s.recv(100)
    print("closed" if data == b"" else "answered %r" % data)
except ConnectionResetError:
    print("closed")
' "$addr" 2>&1)
    assert_eq "closed" "$out" "a connection to $addr"
    log=$("$WARREN" policy log --json --sandbox iso-net)
    assert_eq false "$(printf '%s' "$log" | jq -r --arg a "${addr%:*}" \
      '[.entries[] | select(.addr == $a)] | last | .allow')" \
      "the log's verdict on $addr"
  done

  out=$("$WARREN" exec iso-net -- cat /proc/net/dev |
    awk -F: 'NR > 2 { gsub(/ /, "", $1); print $1 }')
  assert_eq lo "$out" "interfaces inside"

  out=$("$WARREN" exec iso-net -- probe netadmin)
  assert_contains "$out" "ifup_lo: EPERM"
  assert_contains "$out" "route_add_ioctl: EPERM"
  assert_contains "$out" "route_add_netlink: EPERM"
  out=$(must_fail "$WARREN" exec iso-net -- sh -c \
    'echo 1 >/proc/sys/net/ipv4/ip_forward')
  assert_contains "$out" "Read-only file system" "enabling forwarding"

  # Loopback works, on a low port too (ip_unprivileged_port_start=0).
  "$WARREN" exec iso-net -- sh -c \
    'mkdir -p /srv/www && echo hello-from-lo >/srv/www/hello.txt'
  "$WARREN" exec -d --tag web iso-net -- \
    python3 -m http.server --bind 127.0.0.1 --directory /srv/www 80 >/dev/null
  out=$("$WARREN" exec iso-net -- sh -c \
    'for i in $(seq 100); do
       curl -sf http://127.0.0.1:80/hello.txt && exit 0; sleep 0.1
     done; exit 1') || fail "no answer on 127.0.0.1:80 inside: $out"
  assert_eq hello-from-lo "$out" "loopback HTTP inside"
}

# Nothing of the host's filesystem is reachable, by any path.
test_host_files_unreachable() {
  local marker host_dev out line host_name
  new_sandbox iso-fs
  install_helper iso-fs probe
  marker=/root/warren-marker-$$-$RANDOM
  echo "host secret" >"$marker"
  # shellcheck disable=SC2064 # expanded now, on purpose
  trap "rm -f '$marker'; \"\$WARREN\" rm -f iso-fs >/dev/null 2>&1" EXIT

  "$WARREN" exec iso-fs -- test ! -e "$marker" || fail "$marker is visible"
  "$WARREN" exec iso-fs -- test ! -e "/proc/self/root$marker" ||
    fail "$marker is visible through /proc/self/root"
  out=$(must_fail "$WARREN" exec iso-fs -- cat "/proc/1/root$marker")
  assert_not_contains "$out" "host secret" "init's root"
  out=$("$WARREN" exec iso-fs -- find / -name "${marker##*/}" 2>/dev/null || true)
  assert_eq "" "$out" "find / for the marker"
  out=$("$WARREN" exec iso-fs -- probe escape "$marker")
  assert_contains "$out" "escape_stat: ENOENT" "chroot escape"

  # Only the sandbox's own mounts: no host paths, nothing from the host's
  # root device, no sysfs.
  host_dev=$(awk '$5 == "/" { print $3; exit }' /proc/self/mountinfo)
  out=$("$WARREN" exec iso-fs -- cat /proc/self/mountinfo)
  assert_not_contains "$out" "$WR_ROOT" "mountinfo inside"
  assert_not_contains "$out" "/var/lib" "mountinfo inside"
  assert_not_contains "$out" " - sysfs " "mountinfo inside"
  while read -r line; do
    # shellcheck disable=SC2086 # split into mountinfo's fields
    set -- $line
    [ "$3" != "$host_dev" ] || fail "a host device is mounted inside: $line"
    case "$5" in
      / | /dev | /dev/* | /proc | /proc/*) ;;
      *) fail "unexpected mount inside: $line" ;;
    esac
  done <<<"$out"
  assert_eq "" "$("$WARREN" exec iso-fs -- ls -A /sys)" "/sys inside"

  host_name=$(hostname)
  for f in /proc/sysrq-trigger /proc/sys/kernel/hostname \
    /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches \
    /proc/sys/kernel/modprobe; do
    out=$(must_fail "$WARREN" exec iso-fs -- sh -c "echo x >$f")
    assert_not_contains "$out" "warren:" "writing $f"
  done
  assert_eq "$host_name" "$(hostname)" "the host's hostname"
  assert_eq "" "$("$WARREN" exec iso-fs -- cat /proc/keys /proc/timer_list)" \
    "masked /proc entries"
}

# Running out of memory kills the process inside, nothing else.
test_memory_limit_kills_only_inside() {
  local id rc out dpid
  new_sandbox iso-mem --memory 64m
  new_sandbox iso-mem-peer
  install_helper iso-mem probe
  id=$(sb_get iso-mem .id)
  if [ -r "/sys/fs/cgroup/memory/$WR_CG_PARENT/$id/memory.limit_in_bytes" ]; then
    assert_eq 67108864 \
      "$(cat "/sys/fs/cgroup/memory/$WR_CG_PARENT/$id/memory.limit_in_bytes")" \
      "memory.limit_in_bytes"
  fi
  dpid=$(daemon_pid)
  rc=0
  out=$("$WARREN" exec iso-mem -- probe memhog 200 2>&1) || rc=$?
  assert_eq 137 "$rc" "exit code of memhog 200 under 64m (output: $out)"
  assert_not_contains "$out" "allocated 200 MiB"
  pid_alive "$dpid" || fail "warrend died"
  assert_eq running "$(sb_get iso-mem .state)" "state after the OOM kill"
  assert_eq alive "$("$WARREN" exec iso-mem -- echo alive)" "exec after OOM"
  assert_eq alive "$("$WARREN" exec iso-mem-peer -- echo alive)" \
    "exec in another sandbox"
  # A smaller allocation still fits.
  assert_eq "allocated 16 MiB" "$("$WARREN" exec iso-mem -- probe memhog 16)"
}

# A fork bomb hits the pids limit; the host and other sandboxes stay
# responsive, and the sandbox recovers.
test_fork_bomb_contained() {
  local bomb out made refused t0 t1
  new_sandbox iso-bomb --pids 64
  new_sandbox iso-calm
  install_helper iso-bomb probe
  out=$(mktemp)
  "$WARREN" exec iso-bomb -- probe forkbomb 5 >"$out" 2>&1 &
  bomb=$!
  sleep 1.5

  # Containment, not a benchmark: generous bounds.
  t0=$(date +%s%N)
  for _ in $(seq 50); do /bin/true; done
  t1=$(date +%s%N)
  [ $(((t1 - t0) / 1000000)) -lt 5000 ] ||
    fail "50 host forks took $(((t1 - t0) / 1000000)) ms during the bomb"
  t0=$(date +%s%N)
  assert_eq calm "$("$WARREN" exec iso-calm -- echo calm)"
  "$WARREN" ls >/dev/null
  t1=$(date +%s%N)
  [ $(((t1 - t0) / 1000000)) -lt 5000 ] ||
    fail "exec in another sandbox took $(((t1 - t0) / 1000000)) ms"
  kill -0 "$bomb" 2>/dev/null || fail "the bomb ended early: $(cat "$out")"

  wait "$bomb" || true
  made=$(sed -n 's/^forks: \([0-9]*\) made, \([0-9]*\) refused$/\1/p' "$out")
  refused=$(sed -n 's/^forks: \([0-9]*\) made, \([0-9]*\) refused$/\2/p' "$out")
  [ -n "$made" ] || fail "no report from the bomb: $(cat "$out")"
  [ "$refused" -gt 0 ] || fail "no fork was refused: $(cat "$out")"
  [ "$made" -lt 64 ] || fail "$made forks made under --pids 64"
  rm -f "$out"
  assert_eq ok "$("$WARREN" exec iso-bomb -- echo ok)" "exec after the bomb"
  assert_eq running "$(sb_get iso-bomb .state)"
}

# Dangerous system calls fail; the capability set is Docker's; no new
# privileges; seccomp filtering is on.
test_denied_syscalls_and_caps() {
  local out init_pid
  new_sandbox iso-sys
  install_helper iso-sys probe
  init_pid=$(sb_get iso-sys .pid)
  out=$("$WARREN" exec iso-sys -- probe syscalls)
  for call in keyctl add_key bpf mount umount unshare_user unshare_mnt \
    unshare_net ptrace_init sethostname init_module reboot userfaultfd \
    io_uring_setup setns_net open_by_handle_at perf_event_open kexec_load \
    pivot_root fsopen open_tree move_mount pidfd_getfd swapon clock_settime \
    syslog mknod_block; do
    assert_contains "$out" "$call: EPERM" "probe syscalls"
  done
  assert_contains "$out" "clone3: ENOSYS" "probe syscalls"
  # kill(1, SIGKILL) may "succeed", but init must not die of it.
  sleep 0.2
  assert_eq running "$(sb_get iso-sys .state)" "state after kill -9 1"
  assert_eq "$init_pid" "$(sb_get iso-sys .pid)" "init's pid"
  assert_eq ok "$("$WARREN" exec iso-sys -- echo ok)"

  out=$("$WARREN" exec iso-sys -- grep -E '^(Cap|NoNewPrivs|Seccomp)' \
    /proc/self/status)
  assert_contains "$out" "CapBnd:	00000000a80425fb" "capabilities"
  assert_contains "$out" "CapAmb:	0000000000000000" "capabilities"
  assert_contains "$out" "CapInh:	0000000000000000" "capabilities"
  assert_contains "$out" "NoNewPrivs:	1" "no_new_privs"
  assert_contains "$out" "Seccomp:	2" "seccomp mode"
  # An unprivileged user inside has no capabilities at all.
  out=$("$WARREN" exec -u 1000 iso-sys -- grep '^CapEff' /proc/self/status)
  assert_eq "CapEff:	0000000000000000" "$out" "uid 1000's capabilities"
}

# Two sandboxes see neither each other's processes nor files.
test_sandboxes_isolated_from_each_other() {
  local a_id b_id a_base b_base out secret
  new_sandbox iso-a
  new_sandbox iso-b
  a_id=$(sb_get iso-a .id)
  b_id=$(sb_get iso-b .id)
  a_base=$(sb_get iso-a .uid_base)
  b_base=$(sb_get iso-b .uid_base)
  [ "$a_base" -ge $((b_base + 65536)) ] || [ "$b_base" -ge $((a_base + 65536)) ] ||
    fail "uid ranges overlap: $a_base and $b_base"
  secret="secret-$RANDOM$RANDOM"
  "$WARREN" exec iso-a -- sh -c "echo $secret >/tmp/$secret"
  "$WARREN" exec -d --tag marked iso-a -- sleep 4343.5 >/dev/null

  out=$("$WARREN" exec iso-b -- sh -c 'cat /proc/[0-9]*/cmdline | tr "\0" " "')
  assert_not_contains "$out" "4343.5" "processes in iso-b"
  "$WARREN" exec iso-b -- test ! -e "/tmp/$secret" ||
    fail "iso-a's file is visible in iso-b"
  out=$("$WARREN" exec iso-b -- find / -name "$secret" 2>/dev/null || true)
  assert_eq "" "$out" "find in iso-b"
  out=$("$WARREN" exec iso-b -- cat /proc/self/mountinfo)
  assert_not_contains "$out" "$a_id" "iso-b's mounts"
  assert_not_contains "$out" "$b_id" "iso-b's mounts"
  assert_eq "$secret" "$("$WARREN" exec iso-a -- cat "/tmp/$secret")"
}
