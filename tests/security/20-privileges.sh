# shellcheck shell=bash
# Adversarial: privileges. setuid binaries and file capabilities give
# nothing (no_new_privs); every process of a sandbox holds the capability
# sets docs/isolation.md promises; nested user namespaces, /proc's
# kernel knobs and cgroupfs stay out of reach. The hostile program is
# tests/helpers/attack_privs.c. Sourced by tests/run-e2e.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

DOCKER_CAPS=00000000a80425fb
NO_CAPS=0000000000000000

# The capability lines of a status file (or attack_privs caps output) are
# those of a process that holds the bounding set and, when HELD is given,
# that set as permitted and effective too; never anything inheritable or
# ambient.
assert_caps() { # STATUS PERMITTED_AND_EFFECTIVE WHAT
  assert_line "$1" "CapBnd:	$DOCKER_CAPS" "$3"
  assert_line "$1" "CapPrm:	$2" "$3"
  assert_line "$1" "CapEff:	$2" "$3"
  assert_line "$1" "CapInh:	$NO_CAPS" "$3"
  assert_line "$1" "CapAmb:	$NO_CAPS" "$3"
}

# A setuid-root copy of id, run as nobody: no_new_privs keeps euid.
test_setuid_binary_gives_nothing() {
  local out
  attack_sandbox sec-suid attack_privs
  "$WARREN" exec sec-suid -- sh -c '
    cp /usr/bin/id /usr/local/bin/id-suid &&
    cp /usr/local/bin/attack_privs /usr/local/bin/caps-suid &&
    chmod 4755 /usr/local/bin/id-suid /usr/local/bin/caps-suid'
  assert_eq "-rwsr-xr-x 0" \
    "$("$WARREN" exec sec-suid -- stat -c '%A %u' /usr/local/bin/id-suid)" \
    "the setuid copy"
  out=$("$WARREN" exec -u nobody sec-suid -- id-suid)
  assert_eq "uid=65534(nobody) gid=65534(nogroup) groups=65534(nogroup)" \
    "$out" "id run setuid root by nobody"
  out=$("$WARREN" exec -u nobody sec-suid -- caps-suid caps)
  assert_line "$out" "Uid:	65534	65534	65534	65534" "setuid caps"
  assert_line "$out" "NoNewPrivs:	1" "setuid caps"
  assert_caps "$out" "$NO_CAPS" "a setuid-root program run by nobody"
}

# A file with capabilities (written by hand: the image has no setcap),
# every one the bounding set allows, effective: nothing for its user.
test_file_capabilities_give_nothing() {
  local out user
  attack_sandbox sec-fcap attack_privs
  out=$("$WARREN" exec sec-fcap -- sh -c '
    cp /usr/local/bin/attack_privs /usr/local/bin/capped &&
    attack_privs setfcap /usr/local/bin/capped a80425fb')
  assert_results "$out" ok setfcap getfcap
  for user in nobody 1000; do
    out=$("$WARREN" exec -u "$user" sec-fcap -- capped caps)
    assert_caps "$out" "$NO_CAPS" "a file-capability program run by $user"
  done
}

# Every process of a sandbox, as the host sees it and as it sees itself:
# init, a root process, non-root ones, one that switched user with su or
# setpriv, a background one.
test_capability_sets_of_every_process() {
  local id init_pid out p status uid n user
  attack_sandbox sec-caps attack_privs
  id=$(sb_get sec-caps .id)
  init_pid=$(sb_get sec-caps .pid)
  status=$(cat "/proc/$init_pid/status")
  assert_caps "$status" "$DOCKER_CAPS" "warren-init (host pid $init_pid)"
  assert_line "$status" "NoNewPrivs:	1" "warren-init"
  assert_line "$status" "Seccomp:	2" "warren-init"

  out=$("$WARREN" exec sec-caps -- attack_privs caps)
  assert_caps "$out" "$DOCKER_CAPS" "a root process"
  for user in 1000 nobody 1000:1000; do
    out=$("$WARREN" exec -u "$user" sec-caps -- attack_privs caps)
    assert_caps "$out" "$NO_CAPS" "a process of $user"
  done
  out=$("$WARREN" exec sec-caps -- su -s /bin/sh nobody -c 'attack_privs caps')
  assert_line "$out" "Uid:	65534	65534	65534	65534" "after su"
  assert_caps "$out" "$NO_CAPS" "a process su started"
  out=$("$WARREN" exec sec-caps -- setpriv --reuid=1000 --regid=1000 \
    --clear-groups attack_privs caps)
  assert_caps "$out" "$NO_CAPS" "a process setpriv started"

  # All of them at once from the host, background ones included.
  "$WARREN" exec -d --tag bg-root sec-caps -- sleep 4245.5 >/dev/null
  "$WARREN" exec -d -u 1000 --tag bg-user sec-caps -- sleep 4246.5 >/dev/null
  sandbox_host_pid_of "$id" "sleep 4246.5" >/dev/null || fail "no bg-user"
  sandbox_host_pid_of "$id" "sleep 4245.5" >/dev/null || fail "no bg-root"
  n=0
  for p in $(sandbox_host_pids "$id"); do
    status=$(cat "/proc/$p/status" 2>/dev/null) || continue
    n=$((n + 1))
    uid=$(awk '/^Uid:/ {print $3}' <<<"$status")
    if [ "$uid" = "$(sb_get sec-caps .uid_base)" ]; then
      assert_caps "$status" "$DOCKER_CAPS" "host pid $p (root inside)"
    else
      assert_caps "$status" "$NO_CAPS" "host pid $p (uid $uid)"
    fi
  done
  [ "$n" -ge 3 ] || fail "only $n processes in the sandbox's cgroup"
}

# Nested user namespaces stay off: the sysctl cannot be written (through
# /proc/sys or a fresh proc mount), and unshare still fails.
test_nested_userns_cannot_be_reenabled() {
  local out before
  attack_sandbox sec-userns attack_privs
  before=$(cat /proc/sys/user/max_user_namespaces)
  out=$("$WARREN" exec sec-userns -- attack_privs userns)
  assert_not_contains "$(grep '^write_max_user_namespaces:' <<<"$out")" ": ok"
  assert_not_contains "$(grep '^write_unprivileged_userns_clone:' <<<"$out")" \
    ": ok"
  assert_results "$out" EPERM mount_fresh_proc unshare_newuser
  out=$(must_fail "$WARREN" exec sec-userns -- sh -c \
    'echo 100000 >/proc/sys/user/max_user_namespaces')
  assert_not_contains "$out" "warren:" "the shell's write"
  must_fail "$WARREN" exec sec-userns -- unshare -U true >/dev/null
  assert_eq "$before" "$(cat /proc/sys/user/max_user_namespaces)" \
    "the host's max_user_namespaces"
}

# Nothing under /proc that belongs to the kernel (not to a process) can be
# opened for writing, except the masked entries, which are /dev/null.
# This kernel has no /proc/sysrq-trigger (CONFIG_MAGIC_SYSRQ is off); when
# a kernel has one, it is read-only inside like /proc/sys, /proc/irq and
# /proc/bus.
test_proc_kernel_knobs_not_writable() {
  local out line path dir
  attack_sandbox sec-proc attack_privs
  out=$("$WARREN" exec sec-proc -- attack_privs procwrite /proc/sys /proc/irq \
    /proc/bus /proc/fs /proc/pressure)
  for dir in /proc/sys /proc/irq /proc/bus /proc/fs /proc/pressure; do
    line=$(grep "^$dir: " <<<"$out") || fail "no report for $dir: $out"
    [[ "$line" =~ ^$dir:\ [1-9][0-9]*\ files,\ 0\ writable$ ]] ||
      fail "writable files under $dir: $out"
  done
  out=$("$WARREN" exec sec-proc -- attack_privs procwrite /proc)
  while read -r line; do
    case "$line" in
      "writable: "*)
        path=${line#writable: }
        assert_eq "character special file 1:3" \
          "$("$WARREN" exec sec-proc -- stat -c '%F %t:%T' "$path")" \
          "writable $path (must be a /dev/null mask)"
        ;;
    esac
  done <<<"$out"
  if [ -e /proc/sysrq-trigger ]; then
    must_fail "$WARREN" exec sec-proc -- sh -c 'echo h >/proc/sysrq-trigger' \
      >/dev/null
  else
    echo "note: no /proc/sysrq-trigger on this kernel (CONFIG_MAGIC_SYSRQ off)"
    "$WARREN" exec sec-proc -- test ! -e /proc/sysrq-trigger ||
      fail "/proc/sysrq-trigger inside but not on the host"
  fi
  for path in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches \
    /proc/sys/kernel/modprobe /proc/irq/default_smp_affinity; do
    must_fail "$WARREN" exec sec-proc -- sh -c "echo x >$path" >/dev/null
  done
}

# No cgroupfs can be mounted (v1 with a release agent, v2), none is
# mounted, and no cgroup.procs exists anywhere to write a pid into.
test_cgroup_escapes_fail() {
  local out
  attack_sandbox sec-cgroup attack_privs
  out=$("$WARREN" exec sec-cgroup -- attack_privs cgroupfs)
  assert_results "$out" EPERM mount_cgroup_v1_release_agent \
    mount_cgroup_v1_memory mount_cgroup2 fsopen_cgroup2 fsopen_cgroup
  "$WARREN" exec sec-cgroup -- test ! -e /sys/fs/cgroup ||
    fail "/sys/fs/cgroup exists inside"
  out=$("$WARREN" exec sec-cgroup -- cat /proc/self/mountinfo)
  assert_not_contains "$out" " - cgroup" "mountinfo inside"
  out=$("$WARREN" exec sec-cgroup -- find / -path /proc -prune -o \
    \( -name cgroup.procs -o -name release_agent -o -name tasks \) -print)
  assert_eq "" "$out" "cgroup files reachable inside"
  assert_eq "0::/" "$("$WARREN" exec sec-cgroup -- cat /proc/self/cgroup |
    grep '^0::')" "the sandbox's own cgroup is its namespace root"
  must_fail "$WARREN" exec sec-cgroup -- sh -c \
    'echo $$ >/sys/fs/cgroup/cgroup.procs' >/dev/null
}
