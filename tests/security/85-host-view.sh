# shellcheck shell=bash
# Security: what a sandbox learns about the host, and how big it thinks
# the machine is.
#
# Code inside reads /proc for the host's boot parameters, the host paths
# of the state root, its disks and modules; and sizes itself by
# /proc/meminfo, /proc/cpuinfo, /proc/stat, /proc/uptime, /proc/loadavg
# and the CPUs it may run on. Each test asserts that nothing names the
# host, and that `free`, `nproc`, Node and Python see the sandbox's own
# limits (LXCFS, served by one lxcfs per state root that outlives
# warrend; src/runtime/view.c). Sourced by tests/run-e2e, which provides
# lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

GIB=$((1 << 30))

# The pid of this state root's lxcfs, if it runs.
lxcfs_pid() {
  local pid
  pid=$(cat "$WR_ROOT/lxcfs.pid" 2>/dev/null) || return 1
  pid_alive "$pid" && echo "$pid"
}

# The views need lxcfs on the host (scripts/packages.txt installs it).
need_lxcfs() {
  command -v lxcfs >/dev/null || skip "no lxcfs on this host: apt-get install lxcfs"
}

# MemTotal of /proc/meminfo inside, in bytes.
inside_memtotal() { # SANDBOX
  "$WARREN" exec "$1" -- awk '$1 == "MemTotal:" { printf "%.0f\n", $2 * 1024 }' /proc/meminfo
}

host_memtotal() {
  awk '$1 == "MemTotal:" { printf "%.0f\n", $2 * 1024 }' /proc/meminfo
}

# "TOTALMEM CPUS PARALLELISM" as Node sees them.
node_view() { # SANDBOX
  "$WARREN" exec "$1" -- node -e \
    'const os = require("os"); console.log(os.totalmem(), os.cpus().length, os.availableParallelism())'
}

# Nothing in /proc names the host: its boot command line, the state
# root's paths (the control socket is bound in the host's network
# namespace, so /proc/net/unix lists only the sandbox's own sockets), its
# disks, their statistics and its modules.
test_proc_names_nothing_of_the_host() {
  local out f
  new_sandbox hv-names
  [ -s /proc/cmdline ] || fail "the host has no /proc/cmdline to hide"
  assert_eq "" "$("$WARREN" exec hv-names -- cat /proc/cmdline)" "/proc/cmdline"
  for f in partitions diskstats modules; do
    assert_eq "" "$("$WARREN" exec hv-names -- sh -c "cat /proc/$f 2>/dev/null")" \
      "/proc/$f"
  done

  # A socket of the sandbox's own is listed; nothing of the host is.
  out=$("$WARREN" exec hv-names -- python3 -c '
import socket
s = socket.socket(socket.AF_UNIX); s.bind("/tmp/own.sock"); s.listen(1)
print(open("/proc/net/unix").read())')
  assert_contains "$out" "/tmp/own.sock" "/proc/net/unix"
  assert_not_contains "$out" "$WR_ROOT" "/proc/net/unix"
  assert_not_contains "$out" "ctl.sock" "/proc/net/unix"

  # No top-level /proc file and no mount names the state root.
  out=$("$WARREN" exec hv-names -- sh -c \
    "grep -l -s -F '$WR_ROOT' /proc/* /proc/net/* /proc/self/mountinfo /proc/self/mounts 2>/dev/null; true")
  assert_eq "" "$out" "files under /proc naming $WR_ROOT"
  # The control socket still works across namespaces: exec, and after a
  # daemon restart, reattaching.
  kill_daemon
  start_daemon
  assert_eq ok "$("$WARREN" exec hv-names -- echo ok)" "exec after a restart"
}

# In a --memory 1g --cpus 1 sandbox, free, nproc, Node and Python say
# 1 GiB and 1 CPU; /proc/uptime counts from the sandbox's start and
# /proc/loadavg counts its own tasks.
test_proc_views_show_the_sandbox_limits() {
  local out uptime host_up
  need_lxcfs
  [ "$(host_memtotal)" -gt $((2 * GIB)) ] || fail "the host has 2 GiB or less"
  new_sandbox hv-limits --memory 1g --cpus 1
  assert_eq "$GIB" "$(inside_memtotal hv-limits)" "MemTotal in /proc/meminfo"
  if "$WARREN" exec hv-limits -- sh -c 'command -v free' >/dev/null; then
    assert_eq "$GIB" "$("$WARREN" exec hv-limits -- free -b | awk '$1 == "Mem:" { print $2 }')" \
      "free -b"
  else
    echo "note: the base image has no free (procps); MemTotal above is what it reads"
  fi
  out=$(node_view hv-limits)
  assert_eq "$GIB 1 1" "$out" "Node's os.totalmem(), os.cpus().length, os.availableParallelism()"
  if [ "$(nproc)" -ge 2 ]; then
    assert_eq 1 "$("$WARREN" exec hv-limits -- nproc)" "nproc"
    assert_eq "1 1" "$("$WARREN" exec hv-limits -- python3 -c \
      'import os; print(os.cpu_count(), len(os.sched_getaffinity(0)))')" \
      "Python's cpu_count and affinity"
    assert_eq 1 "$("$WARREN" exec hv-limits -- grep -c '^processor' /proc/cpuinfo)" \
      "processors in /proc/cpuinfo"
  else
    echo "note: a one-CPU host: nproc is 1 either way"
  fi
  uptime=$("$WARREN" exec hv-limits -- cut -d. -f1 /proc/uptime)
  host_up=$(cut -d. -f1 /proc/uptime)
  [ "$uptime" -lt 60 ] || fail "/proc/uptime inside is ${uptime}s"
  [ "$host_up" -lt 120 ] || [ "$uptime" -lt "$host_up" ] ||
    fail "/proc/uptime inside (${uptime}s) is the host's (${host_up}s)"
  out=$("$WARREN" exec hv-limits -- cut -d' ' -f4 /proc/loadavg)
  [ "${out#*/}" -le 10 ] ||
    fail "/proc/loadavg counts ${out#*/} tasks: the host's, not the sandbox's"
}

# Without limits a sandbox sees the host's memory and CPUs: the host's
# figures, not zeros.
test_proc_views_without_limits_show_the_host() {
  need_lxcfs
  new_sandbox hv-free
  assert_eq "$(host_memtotal)" "$(inside_memtotal hv-free)" "MemTotal"
  assert_eq "$(nproc)" "$("$WARREN" exec hv-free -- nproc)" "nproc"
  assert_eq "$(host_memtotal) $(nproc) $(nproc)" "$(node_view hv-free)" \
    "Node's view"
  [ "$("$WARREN" exec hv-free -- cut -d. -f1 /proc/uptime)" -lt 60 ] ||
    fail "/proc/uptime is not the sandbox's"
}

# lxcfs outlives warrend, as the sandboxes do: after SIGKILL of warrend
# the same lxcfs serves the old sandbox and a new one.
test_proc_views_survive_a_daemon_restart() {
  local pid
  need_lxcfs
  new_sandbox hv-keep --memory 512m
  pid=$(lxcfs_pid) || fail "no lxcfs for $WR_ROOT"
  kill_daemon
  pid_alive "$pid" || fail "lxcfs died with warrend"
  start_daemon
  assert_eq "$pid" "$(lxcfs_pid)" "the lxcfs after a restart"
  assert_eq $((GIB / 2)) "$(inside_memtotal hv-keep)" "MemTotal after a restart"
  new_sandbox hv-keep2 --memory 256m
  assert_eq $((GIB / 4)) "$(inside_memtotal hv-keep2)" \
    "MemTotal of a sandbox made after the restart"
  [ "$(grep -c " $WR_ROOT/lxcfs " /proc/self/mountinfo)" = 1 ] ||
    fail "lxcfs is mounted $(grep -c " $WR_ROOT/lxcfs " /proc/self/mountinfo) times"
}

# When lxcfs dies, a running sandbox loses only its views (ENOTCONN),
# never the daemon's attention; the next start brings a new lxcfs, and a
# restarted sandbox has its views again.
test_lxcfs_death_costs_only_the_views() {
  local pid out
  need_lxcfs
  new_sandbox hv-dead --memory 512m
  pid=$(lxcfs_pid) || fail "no lxcfs for $WR_ROOT"
  kill -KILL "$pid"
  wait_until 10 pid_gone "$pid" || fail "lxcfs $pid survived SIGKILL"
  out=$("$WARREN" exec hv-dead -- sh -c 'cat /proc/meminfo >/dev/null 2>&1; echo $?')
  assert_eq 1 "$out" "reading /proc/meminfo once lxcfs is dead"
  assert_eq ok "$("$WARREN" exec hv-dead -- echo ok)" "exec with lxcfs dead"
  assert_daemon_alive
  new_sandbox hv-new --memory 256m
  assert_eq $((GIB / 4)) "$(inside_memtotal hv-new)" "MemTotal of a new sandbox"
  [ "$(lxcfs_pid)" != "$pid" ] || fail "no new lxcfs"
  [ "$(grep -c " $WR_ROOT/lxcfs " /proc/self/mountinfo)" = 1 ] ||
    fail "lxcfs is mounted $(grep -c " $WR_ROOT/lxcfs " /proc/self/mountinfo) times"
  "$WARREN" stop hv-dead >/dev/null
  "$WARREN" start hv-dead >/dev/null
  assert_eq $((GIB / 2)) "$(inside_memtotal hv-dead)" "MemTotal after a restart"
}
