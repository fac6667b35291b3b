# shellcheck shell=bash
# Adversarial: system calls a sandbox must not make. Each test runs
# tests/helpers/attack_syscalls.c inside a real sandbox, with the arguments
# an exploit would use, and asserts the exact outcome: EPERM from the
# seccomp allowlist, ENOSYS for clone3 and other ABIs, ESRCH for processes
# the sandbox cannot name. Sourced by tests/run-e2e, which provides lib.sh.

# The kernel keyring is not namespaced; none of it is reachable.
test_keyring_denied() {
  local out
  attack_sandbox sec-keys attack_syscalls
  out=$("$WARREN" exec sec-keys -- attack_syscalls keyring)
  assert_results "$out" EPERM keyctl keyctl_join add_key request_key
}

test_userfaultfd_denied() {
  local out
  attack_sandbox sec-uffd attack_syscalls
  out=$("$WARREN" exec sec-uffd -- attack_syscalls userfaultfd)
  assert_results "$out" EPERM userfaultfd userfaultfd_user_mode_only
  # Nor is there a device to get one from.
  assert_line "$out" "open_dev_userfaultfd: ENOENT"
}

test_io_uring_denied() {
  local out
  attack_sandbox sec-uring attack_syscalls
  out=$("$WARREN" exec sec-uring -- attack_syscalls io_uring)
  assert_results "$out" EPERM io_uring_setup io_uring_enter io_uring_register
}

# warren-init (PID 1) cannot be traced, read, written, or robbed of its
# fds, by root or anyone else inside: it is non-dumpable and its memory
# belongs to the host's user namespace. kill -0 reaches it (harmless: it
# ignores signals from inside).
test_ptrace_init_denied() {
  local out init_pid user
  attack_sandbox sec-ptinit attack_syscalls
  init_pid=$(sb_get sec-ptinit .pid)
  for user in root 1000; do
    out=$("$WARREN" exec -u "$user" sec-ptinit -- attack_syscalls trace 1)
    assert_results "$out" EPERM ptrace_attach ptrace_seize process_vm_readv \
      process_vm_writev pidfd_getfd kcmp
    assert_line "$out" "pidfd_open: ok" "as $user"
    assert_line "$out" "open_mem: EACCES" "as $user"
  done
  assert_eq running "$(sb_get sec-ptinit .state)" "state after the attack"
  assert_eq "$init_pid" "$(sb_get sec-ptinit .pid)" "init's pid"
  assert_eq ok "$("$WARREN" exec sec-ptinit -- echo ok)"
}

# A neighbour's processes have no name inside: their host pids (and so
# their neighbour's init) do not exist in this pid namespace.
test_ptrace_neighbour_unnamable() {
  local out nb_id pid name
  attack_sandbox sec-ptatk attack_syscalls
  new_sandbox sec-ptnb
  nb_id=$(sb_get sec-ptnb .id)
  "$WARREN" exec -d --tag victim sec-ptnb -- sleep 4243.5 >/dev/null
  pid=$(sandbox_host_pid_of "$nb_id" "sleep 4243.5") ||
    fail "the neighbour's sleep is not in its cgroup"
  for pid in "$pid" "$(sb_get sec-ptnb .pid)"; do
    name="neighbour pid $pid"
    "$WARREN" exec sec-ptatk -- test ! -e "/proc/$pid" ||
      fail "$name exists in the attacker's pid namespace"
    out=$("$WARREN" exec sec-ptatk -- attack_syscalls trace "$pid")
    assert_results "$out" ESRCH ptrace_attach ptrace_seize process_vm_readv \
      process_vm_writev pidfd_open kill_0
    # These two are refused by the filter before the pid is looked up.
    assert_results "$out" EPERM pidfd_getfd kcmp
    assert_line "$out" "open_mem: ENOENT" "$name"
  done
  assert_eq true "$("$WARREN" ps --json sec-ptnb |
    jq -r '.[] | select(.tag=="victim") | .running')" "the neighbour's sleep"
}

# By design a sandbox may debug its own processes (strace, gdb): one
# tenant. Fd theft and kcmp stay denied even there.
test_ptrace_own_processes_allowed() {
  local out
  attack_sandbox sec-ptown attack_syscalls
  out=$("$WARREN" exec sec-ptown -- attack_syscalls sibling)
  assert_results "$out" ok ptrace_attach_child process_vm_readv_child
  assert_line "$out" "read_from_child: sibling-secret"
  assert_results "$out" EPERM pidfd_getfd_child kcmp_child
}

# unshare and clone with each namespace flag (high bits too: the kernel
# reads clone's flags as 32 bits).
test_unshare_and_clone_namespaces_denied() {
  local out ns
  attack_sandbox sec-ns attack_syscalls
  out=$("$WARREN" exec sec-ns -- attack_syscalls namespaces)
  for ns in newns newuts newipc newuser newpid newnet newcgroup; do
    assert_results "$out" EPERM "unshare_$ns" "clone_$ns"
  done
  assert_results "$out" EPERM unshare_newtime clone_newuser_high_bits \
    unshare_files
  # The image's own tool fails the same way.
  out=$(must_fail "$WARREN" exec sec-ns -- unshare -U -r true)
  assert_contains "$out" "Operation not permitted" "unshare -U -r"
}

# clone3 cannot have its flags checked, so it fails with ENOSYS, and
# glibc falls back to clone: threads, fork and posix_spawn work.
test_clone3_enosys_and_libc_falls_back() {
  local out
  attack_sandbox sec-clone3 attack_syscalls
  out=$("$WARREN" exec sec-clone3 -- attack_syscalls clone3)
  assert_results "$out" ENOSYS clone3 clone3_newuser
  assert_results "$out" ok pthread_create fork posix_spawn
  out=$("$WARREN" exec sec-clone3 -- python3 -c '
import subprocess, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
print(subprocess.run(["echo", "spawned"], capture_output=True).stdout.decode().strip())')
  assert_eq spawned "$out" "python threads and subprocess"
}

# Every mount system call, old and new API.
test_mount_api_denied() {
  local out
  attack_sandbox sec-mount attack_syscalls
  out=$("$WARREN" exec sec-mount -- attack_syscalls mount)
  assert_results "$out" EPERM mount_tmpfs mount_bind_root mount_remount_proc \
    mount_make_shared umount2_proc_keys umount2_proc_sys pivot_root \
    open_tree move_mount fsopen fsconfig fsmount fspick mount_setattr
  "$WARREN" exec sec-mount -- cat /proc/keys >/dev/null
  assert_eq "" "$("$WARREN" exec sec-mount -- cat /proc/keys)" \
    "/proc/keys is still masked"
}

# setns into every namespace kind: init's namespace files cannot even be
# opened, and setns itself is refused (with the caller's own, and with a
# pidfd of init).
test_setns_denied() {
  local out ns
  attack_sandbox sec-setns attack_syscalls
  out=$("$WARREN" exec sec-setns -- attack_syscalls setns)
  for ns in cgroup ipc mnt net pid time user uts; do
    assert_line "$out" "open_init_ns_$ns: EACCES"
    assert_line "$out" "setns_$ns: EPERM"
  done
  assert_line "$out" "setns_pidfd_init: EPERM"
}

# Interfaces to the kernel itself: bpf, perf, modules, kexec, reboot,
# port I/O, accounting, swap.
test_kernel_interfaces_denied() {
  local out
  attack_sandbox sec-kernel attack_syscalls
  out=$("$WARREN" exec sec-kernel -- attack_syscalls kernel)
  assert_results "$out" EPERM bpf_map_create bpf_prog_load perf_event_open \
    init_module finit_module delete_module kexec_load kexec_file_load reboot \
    iopl ioperm acct swapoff
  assert_eq running "$(sb_get sec-kernel .state)" "state after reboot()"
}

# The "shocker" escape: open_by_handle_at with a real handle.
test_open_by_handle_at_denied() {
  local out
  attack_sandbox sec-handle attack_syscalls
  out=$("$WARREN" exec sec-handle -- attack_syscalls handle)
  assert_line "$out" "name_to_handle_at: ok"
  assert_line "$out" "open_by_handle_at: EPERM"
}

# personality(2): the Linux values (and the query) are allowed; flags that
# weaken the address space are not, high bits included.
test_personality_unsafe_values_denied() {
  local out
  attack_sandbox sec-pers attack_syscalls
  out=$("$WARREN" exec sec-pers -- attack_syscalls personality \
    0 8 20000 ffffffff 400000 40000 100400000 8000000)
  assert_results "$out" ok personality_0 personality_0x8 \
    personality_0x20000 personality_0xffffffff
  # READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC with high
  # bits, ADDR_LIMIT_3GB.
  assert_results "$out" EPERM personality_0x400000 personality_0x40000 \
    personality_0x100400000 personality_0x8000000
  assert_eq "$(date +%Y)" "$("$WARREN" exec sec-pers -- date +%Y)" \
    "a process after the attempts"
}

test_clock_setting_denied() {
  local out
  attack_sandbox sec-clock attack_syscalls
  out=$("$WARREN" exec sec-clock -- attack_syscalls clock)
  assert_results "$out" EPERM clock_settime settimeofday adjtimex \
    clock_adjtime
}

# TIOCSTI and TIOCLINUX on the caller's controlling terminal (where the
# kernel would allow TIOCSTI), with and without high bits in the
# request; ordinary terminal ioctls still work.
test_tiocsti_tioclinux_denied() {
  local out
  attack_sandbox sec-tty attack_syscalls
  out=$("$WARREN" exec sec-tty -- attack_syscalls tty)
  assert_line "$out" "controlling_tty: ok"
  assert_results "$out" ok tiocgwinsz tiocgwinsz_high_bits
  assert_results "$out" EPERM tiocsti tiocsti_high_bits \
    tiocsti_all_high_bits tioclinux tioclinux_high_bits
  assert_line "$out" "injected: none"
}

# The same on the terminal `warren exec -t` gives a process.
test_tiocsti_denied_on_exec_tty() {
  local out
  attack_sandbox sec-ttyx attack_syscalls
  "$WR_HELPERS/ptydrive" 24 80 "$WARREN" exec -it sec-ttyx -- \
    attack_syscalls tty_stdin >"$WR_RUN/sec-tty.out" <<'EOF' ||
exit 0
EOF
    fail "terminal session failed: $(cat "$WR_RUN/sec-tty.out")"
  out=$(tr -d '\r' <"$WR_RUN/sec-tty.out")
  assert_line "$out" "tiocgwinsz: ok"
  assert_results "$out" EPERM tiocsti tiocsti_high_bits \
    tiocsti_all_high_bits tioclinux tioclinux_high_bits
}

# vsock is not network-namespaced: on a virtual machine it reaches the
# hypervisor, past the sandbox's network. The family is denied, high bits
# or not; ordinary sockets work.
test_vsock_denied() {
  local out
  attack_sandbox sec-vsock attack_syscalls
  out=$("$WARREN" exec sec-vsock -- attack_syscalls vsock)
  assert_results "$out" EPERM socket_vsock socket_vsock_dgram \
    socket_vsock_high_bits
  assert_results "$out" ok socket_inet socket_unix
}

# x32 (x86-64 numbers with bit 30 set) and i386 (int $0x80) system calls
# get ENOSYS, dangerous ones included.
test_x32_and_i386_syscalls_enosys() {
  local out
  attack_sandbox sec-abi attack_syscalls
  out=$("$WARREN" exec sec-abi -- attack_syscalls abi)
  assert_results "$out" ENOSYS x32_getpid x32_keyctl x32_unshare \
    x32_ioctl_512_range int80_getpid int80_mount int80_unshare int80_keyctl
}

# This kernel has no x32 ABI, so the call above would get ENOSYS anyway.
# Read the filters actually installed on a sandbox process (from the
# host) and evaluate them: every x32 and i386 number, and numbers beyond
# the table, are refused whatever the kernel supports; masked arguments
# hold.
test_installed_filters_close_other_abis() {
  local out pid
  attack_sandbox sec-filter
  "$WARREN" exec -d --tag sl sec-filter -- sleep 4244.5 >/dev/null
  pid=$(sandbox_host_pid_of "$(sb_get sec-filter .id)" "sleep 4244.5") ||
    fail "no sleep in the sandbox's cgroup"
  out=$("$WR_HELPERS/attack_syscalls" filter "$pid")
  case "$out" in
    "read_filters: EINVAL"* | "read_filters: EIO"*)
      skip "PTRACE_SECCOMP_GET_FILTER needs CONFIG_CHECKPOINT_RESTORE: $out" ;;
  esac
  assert_line "$out" "filters: 2"
  assert_line "$out" "x86_64_getpid: ALLOW"
  assert_line "$out" "x86_64_keyctl: ERRNO(EPERM)"
  assert_line "$out" "x86_64_clone3: ERRNO(ENOSYS)"
  assert_results "$out" "ERRNO(EPERM)" x86_64_ioctl_tiocsti_high_bits \
    x86_64_socket_vsock_high_bits x86_64_clone_newuser_high_bits
  assert_results "$out" "ERRNO(ENOSYS)" x32_getpid x32_all i386_all
  assert_line "$out" "x86_64_out_of_range: ERRNO(EPERM)"
  assert_not_contains "$(grep '^x86_64_top:' <<<"$out")" ALLOW
  assert_not_contains "$out" EVAL_ERROR
  assert_eq true "$("$WARREN" ps --json sec-filter | jq -r '.[0].running')" \
    "the traced sleep"
}
