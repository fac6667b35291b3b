# shellcheck shell=bash
# Security: resource exhaustion by a hostile sandbox.
#
# Code inside fills the disk, runs out of inodes and fds, forks, spawns
# threads, eats memory (in processes and in tmpfs, where no kill frees
# it), ignores and blocks signals, and is removed while frozen or busy.
# Each test runs the attack (tests/helpers/exhaust_*.c) in a real sandbox
# and asserts the safe outcome: the limit stops it inside, the host's
# disk, inodes, fds and memory are kept, warrend and other sandboxes carry
# on, and stop or rm still win and leave nothing behind. Sourced by
# tests/run-e2e, which provides lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

MIB=$((1 << 20))

# Restart the test daemon with extra options; the normal one comes back
# when the test's shell exits, after its sandboxes are removed. (Create
# sandboxes with tracked_sandbox then: new_sandbox resets the trap.)
restart_daemon_with() { # OPTIONS...
  stop_daemon
  start_daemon "$@"
  # shellcheck disable=SC2154 # s is the trap's own loop variable
  trap 'for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done
        stop_daemon; start_daemon' EXIT
}

# Like new_sandbox, but leaves the EXIT trap alone.
tracked_sandbox() { # NAME [create args...]
  local name=$1
  shift
  WR_CLEANUP="${WR_CLEANUP:-} $name"
  "$WARREN" create --name "$name" "$@" >/dev/null || fail "create $name"
}

# Milliseconds that a command took; its output goes to stderr.
time_ms() {
  local t0
  t0=$(now_ms)
  "$@" >&2
  echo $(($(now_ms) - t0))
}

no_traces() { # ID
  [ -z "$(disk_traces "$1")" ]
}

# Nothing of the sandbox (mount, loop device, cgroup, directory, init) is
# left on the host, allowing a moment for the kernel to let go.
assert_no_traces() { # ID [what]
  wait_until 10 no_traces "$1" || true
  assert_eq "" "$(disk_traces "$1")" "${2:-what} left on the host"
}

pids_at_least() { # FILE N
  [ "$(cat "$1")" -ge "$2" ]
}

# ---- disk ----------------------------------------------------------------

# Writing until the disk is full stops at --disk with ENOSPC inside; the
# host's filesystem keeps its free space; the sandbox works again once the
# file is deleted.
test_disk_fill_stopped_by_disk_limit() {
  local id before after used out
  new_sandbox res-fill --disk 64m
  install_helper res-fill exhaust_disk
  id=$(sb_get res-fill .id)
  assert_eq $((64 * MIB)) "$(sb_get res-fill .limits.disk_bytes)" "disk_bytes"
  before=$(host_free_bytes)

  out=$("$WARREN" exec res-fill -- exhaust_disk fill /fill)
  assert_contains "$out" ", ENOSPC" "filling the disk"
  used=$(sed -n 's/^fill: \([0-9]*\) MiB.*/\1/p' <<<"$out")
  if [ "$used" -lt 40 ] || [ "$used" -gt 64 ]; then
    fail "wrote $used MiB under --disk 64m"
  fi
  out=$(must_fail "$WARREN" exec res-fill -- sh -c 'head -c 1M /dev/zero >/more')
  assert_contains "$out" "No space left on device" "another file"
  out=$("$WARREN" exec res-fill -- exhaust_disk fallocate /reserve 1024)
  assert_eq "fallocate: ENOSPC" "$out" "reserving 1 GiB"
  out=$(must_fail "$WARREN" exec res-fill -- dd if=/dev/zero of=/dd bs=1M \
    count=200)
  assert_contains "$out" "No space left on device" "dd"

  # On the host: the sandbox's files take at most its limit, and the
  # filesystem lost about that much (others may be writing too: slack).
  [ "$(du -sxB1 "$WR_ROOT/sandboxes/$id" | cut -f1)" -le $((65 * MIB)) ] ||
    fail "the sandbox's directory holds more than its limit"
  after=$(host_free_bytes)
  [ $((before - after)) -lt $((64 * MIB + 256 * MIB)) ] ||
    fail "host free space fell by $(((before - after) / MIB)) MiB"

  "$WARREN" exec res-fill -- rm -f /fill /reserve /dd
  assert_eq ok "$("$WARREN" exec res-fill -- sh -c 'echo ok >/x && cat /x')" \
    "writing after the delete"
  out=$("$WARREN" exec res-fill -- df -B1M --output=avail / | tail -1)
  [ "$out" -ge 40 ] || fail "only $out MiB free after the delete"
  assert_daemon_alive
}

# Writes the daemon makes for the sandbox (files API uploads) land on the
# sandbox's disk and stop at its limit too: 507 no_space.
test_upload_fill_stopped_by_disk_limit() {
  local big
  new_sandbox res-upfill --disk 32m
  big=$(mktemp)
  # shellcheck disable=SC2064 # expanded now, on purpose
  trap "rm -f '$big'; \"\$WARREN\" rm -f res-upfill >/dev/null 2>&1" EXIT
  head -c $((48 * MIB)) /dev/zero >"$big"
  api_call PUT "$(files_url res-upfill /big)" --data-binary @"$big"
  assert_eq 507 "$API_STATUS" "status of a 48 MiB upload (body $API_BODY)"
  assert_api_error "$API_BODY" no_space "upload"
  "$WARREN" exec res-upfill -- rm -f /big
  assert_eq ok "$("$WARREN" exec res-upfill -- sh -c 'echo ok >/x && cat /x')"
  assert_daemon_alive
}

# The limit is a property of the sandbox: it holds after stop/start, after
# warrend is killed and restarted, and after a host reboot (the mounts and
# the loop device gone, made again on the next start).
test_disk_limit_survives_stop_start_restart_and_reboot() {
  local id out
  new_sandbox res-keep --disk 48m
  install_helper res-keep exhaust_disk
  id=$(sb_get res-keep .id)
  "$WARREN" exec res-keep -- sh -c 'echo kept >/root/kept'

  "$WARREN" stop res-keep >/dev/null
  "$WARREN" start res-keep >/dev/null
  assert_eq kept "$("$WARREN" exec res-keep -- cat /root/kept)" "after start"
  assert_contains "$("$WARREN" exec res-keep -- exhaust_disk fill /f)" \
    ", ENOSPC" "fill after stop/start"
  "$WARREN" exec res-keep -- rm /f

  kill_daemon
  start_daemon
  assert_eq running "$(sb_state res-keep)" "state after a daemon restart"
  assert_eq $((48 * MIB)) "$(sb_get res-keep .limits.disk_bytes)" \
    "disk_bytes after a daemon restart"
  assert_contains "$("$WARREN" exec res-keep -- exhaust_disk fill /f)" \
    ", ENOSPC" "fill after a daemon restart"
  "$WARREN" exec res-keep -- rm /f
  [ "$(sandbox_loop_devices "$id" | wc -l)" = 1 ] ||
    fail "loop devices: $(sandbox_loop_devices "$id")"

  # A reboot, as far as the disk goes: nothing mounted, no loop device.
  "$WARREN" stop res-keep >/dev/null
  stop_daemon
  umount "$WR_ROOT/sandboxes/$id/rootfs"
  umount "$WR_ROOT/sandboxes/$id/disk"
  assert_eq "" "$(sandbox_loop_devices "$id")" "loop devices after umount"
  start_daemon
  # The files API mounts what is missing for a stopped sandbox...
  out=$("$WARREN" cp res-keep:/root/kept - | tar -xO)
  assert_eq kept "$out" "reading a stopped sandbox's file after a reboot"
  [ "$(sandbox_loop_devices "$id" | wc -l)" = 1 ] ||
    fail "loop devices: $(sandbox_loop_devices "$id")"
  # ...and so does start; the limit is the same.
  "$WARREN" start res-keep >/dev/null
  assert_eq kept "$("$WARREN" exec res-keep -- cat /root/kept)" "after reboot"
  out=$("$WARREN" exec res-keep -- df -B1M --output=size / | tail -1)
  [ "$out" -le 48 ] || fail "the root is $out MiB after the reboot"
  assert_contains "$("$WARREN" exec res-keep -- exhaust_disk fill /f)" \
    ", ENOSPC" "fill after a reboot"
}

# Many creates with disk limits at once (a client flooding the API): each
# gets its own image and loop device (LOOP_CTL_GET_FREE races are
# retried), none hangs, and rm of all of them leaves nothing.
test_concurrent_disk_creates() {
  local i ids=() pids=() id
  for i in $(seq 8); do
    WR_CLEANUP="${WR_CLEANUP:-} res-many-$i"
    timeout 60 "$WARREN" create --name "res-many-$i" --disk 32m >/dev/null &
    pids+=($!)
  done
  trap 'for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  for i in "${pids[@]}"; do wait "$i" || fail "a create failed or hung"; done
  for i in $(seq 8); do
    id=$(sb_get "res-many-$i" .id)
    ids+=("$id")
    [ "$(sandbox_loop_devices "$id" | wc -l)" = 1 ] ||
      fail "res-many-$i: loop devices: $(sandbox_loop_devices "$id")"
    "$WARREN" exec "res-many-$i" -- sh -c "echo $i >/n"
  done
  for i in $(seq 8); do
    assert_eq "$i" "$("$WARREN" exec "res-many-$i" -- cat /n)" "res-many-$i"
  done
  pids=()
  for i in $(seq 8); do
    timeout 60 "$WARREN" rm -f "res-many-$i" >/dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || fail "an rm failed or hung"; done
  for id in "${ids[@]}"; do
    assert_no_traces "$id" "concurrent rm"
  done
}

# After a reboot, a start and files API calls racing to mount the same
# sandbox attach its image once: two loop devices on one image would be
# two filesystems writing it.
test_racing_mounts_attach_the_image_once() {
  local id round
  new_sandbox res-race-mount --disk 32m
  id=$(sb_get res-race-mount .id)
  "$WARREN" exec res-race-mount -- sh -c 'echo kept >/root/kept'
  for round in 1 2 3 4 5 6 7 8 9 10; do
    "$WARREN" stop --timeout 0 res-race-mount >/dev/null
    stop_daemon
    umount "$WR_ROOT/sandboxes/$id/rootfs"
    umount "$WR_ROOT/sandboxes/$id/disk"
    start_daemon
    # One start, then files API reads while its job mounts (a few ms
    # later each round): the reads mount on the loop thread meanwhile.
    python3 - "$WR_SOCK" res-race-mount "0.00$((round % 5))" <<'PYEOF'
import socket, sys, time
path, name, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(20)
    return s
start, reads = conn(), [conn() for _ in range(4)]
start.sendall(b"POST /v1/sandboxes/%s/start HTTP/1.1\r\nHost: w\r\n"
              b"Content-Length: 0\r\n\r\n" % name.encode())
time.sleep(delay)
for r in reads:
    r.sendall(b"GET /v1/sandboxes/%s/files?path=/root/kept HTTP/1.1\r\n"
              b"Host: w\r\nConnection: close\r\n\r\n" % name.encode())
    time.sleep(0.001)
for s in [start] + reads:
    status = s.recv(100).split(b"\r\n")[0]
    if not status.startswith(b"HTTP/1.1 200"):
        sys.exit("answer: %r" % status)
PYEOF
    [ "$(sandbox_loop_devices "$id" | wc -l)" = 1 ] ||
      fail "round $round: loop devices: $(sandbox_loop_devices "$id")"
    [ "$(grep -c " $WR_ROOT/sandboxes/$id/disk " /proc/self/mountinfo)" = 1 ] ||
      fail "round $round: the disk is mounted more than once"
    [ "$(grep -c " $WR_ROOT/sandboxes/$id/rootfs " /proc/self/mountinfo)" = 1 ] ||
      fail "round $round: the root is mounted more than once"
    assert_eq running "$(sb_state res-race-mount)" "round $round: state"
    assert_eq kept "$("$WARREN" exec res-race-mount -- cat /root/kept)" \
      "round $round"
  done
}

# Creating files until no inode is left ends in ENOSPC inside the
# sandbox's own filesystem; the host's inodes are kept.
test_inode_exhaustion_stopped_by_disk_limit() {
  local id before after made out
  new_sandbox res-inodes --disk 32m
  install_helper res-inodes exhaust_disk
  id=$(sb_get res-inodes .id)
  before=$(host_free_inodes)
  out=$("$WARREN" exec res-inodes -- exhaust_disk inodes /many 10000000)
  assert_contains "$out" ", ENOSPC" "creating files"
  made=$(sed -n 's/^inodes: \([0-9]*\) made.*/\1/p' <<<"$out")
  if [ "$made" -lt 500 ] || [ "$made" -gt 10000 ]; then
    fail "$made files under --disk 32m"
  fi
  out=$(must_fail "$WARREN" exec res-inodes -- mkdir /one-more)
  assert_contains "$out" "No space left on device" "mkdir"
  # The host holds a handful of inodes for the sandbox (its directory,
  # the image, the mount points), whatever it made inside.
  [ "$(find "$WR_ROOT/sandboxes/$id" -xdev | wc -l)" -lt 20 ] ||
    fail "host inodes in the sandbox's directory: $(find \
      "$WR_ROOT/sandboxes/$id" -xdev | wc -l)"
  after=$(host_free_inodes)
  [ $((before - after)) -lt 50000 ] ||
    fail "host free inodes fell by $((before - after))"

  "$WARREN" exec res-inodes -- rm -rf /many
  assert_eq ok "$("$WARREN" exec res-inodes -- sh -c 'mkdir /d && echo ok')" \
    "creating after the delete"
}

# rm removes the mounts, the loop device and the image, whatever state
# the sandbox is in.
test_disk_sandbox_rm_leaves_no_loop_device() {
  local id ids=() name
  new_sandbox res-rm-run --disk 32m
  "$WARREN" exec res-rm-run -- sh -c 'head -c 8M /dev/urandom >/data'
  new_sandbox res-rm-stop --disk 32m
  "$WARREN" stop res-rm-stop >/dev/null
  new_sandbox res-rm-new --disk 32m --no-start
  for name in res-rm-run res-rm-stop res-rm-new; do
    id=$(sb_get $name .id)
    ids+=("$id")
    [ -f "$WR_ROOT/sandboxes/$id/disk.img" ] || fail "$name has no disk.img"
    [ "$(sandbox_loop_devices "$id" | wc -l)" = 1 ] ||
      fail "$name: loop devices: $(sandbox_loop_devices "$id")"
  done
  "$WARREN" rm -f res-rm-run res-rm-stop res-rm-new >/dev/null
  for id in "${ids[@]}"; do
    assert_no_traces "$id" "rm of $id"
  done
  assert_eq "" "$(losetup -a | grep -F "$WR_ROOT/sandboxes/" | grep -F \
    -e "${ids[0]}" -e "${ids[1]}" -e "${ids[2]}" || true)" "losetup -a"
}

# warrend killed (SIGKILL) while it formats, attaches or mounts a disk
# image, or while it removes one: after the restart the sandbox is whole
# or marked `error`, and rm -f then leaves no mount, loop device or file.
test_daemon_killed_during_disk_create_and_rm() {
  local delay i=0 client id state seen=
  for delay in 0 0.005 0.01 0.02 0.04 0.08; do
    i=$((i + 1))
    WR_CLEANUP="${WR_CLEANUP:-} res-kill-$i"
    trap 'for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
    "$WARREN" create --name "res-kill-$i" --disk 2g >/dev/null 2>&1 &
    client=$!
    sleep "$delay"
    kill_daemon
    wait "$client" || true
    start_daemon
    # A daemon killed before the request reached it never heard of the
    # sandbox: inspect fails and prints nothing (the pipe's status is
    # jq's, so that shows as an empty state).
    state=$(sb_state "res-kill-$i" 2>/dev/null)
    [ -n "$state" ] || state=absent
    case "$state" in
      running | error | absent) ;;
      *) fail "res-kill-$i is $state after the restart" ;;
    esac
    if [ "$state" = running ]; then
      assert_eq ok "$("$WARREN" exec "res-kill-$i" -- echo ok)" "res-kill-$i"
    fi
    id=$("$WARREN" inspect --json "res-kill-$i" 2>/dev/null | jq -r .id) || id=
    seen="$seen $delay:$state"
    if [ -z "$id" ]; then
      continue
    fi
    # Now kill it again half way through the rm.
    "$WARREN" rm -f "res-kill-$i" >/dev/null 2>&1 &
    client=$!
    sleep "$delay"
    kill_daemon
    wait "$client" || true
    start_daemon
    "$WARREN" rm -f "res-kill-$i" >/dev/null 2>&1 || true
    assert_no_traces "$id" "res-kill-$i"
  done
  echo "states seen (delay:state):$seen"
}

# Sizes below 16 MiB or above the host's free space are refused with a
# clear 400; a daemon default applies to sandboxes created without one,
# and a client cannot opt out of it.
test_disk_limit_sizes_refused() {
  local out free name
  api_call POST /v1/sandboxes -d '{"name":"res-tiny","disk":"1m"}'
  assert_eq 400 "$API_STATUS" "1 MiB disk"
  assert_api_error "$API_BODY" bad_request "1 MiB disk"
  assert_contains "$API_BODY" "at least 16 MiB"
  free=$(host_free_bytes)
  api_call POST /v1/sandboxes -d "{\"name\":\"res-huge\",\"disk\":$((free + 1024 * MIB))}"
  assert_eq 400 "$API_STATUS" "a disk larger than the host's free space"
  assert_contains "$API_BODY" "more than the host has free"
  api_call POST /v1/sandboxes -d '{"name":"res-neg","disk":-1}'
  assert_eq 400 "$API_STATUS" "negative disk"
  out=$(must_fail "$WARREN" create --name res-tiny --disk 4k)
  assert_contains "$out" "at least 16 MiB" "warren create --disk 4k"
  out=$("$WARREN" ls -q)
  for name in res-tiny res-huge res-neg; do
    assert_not_contains "$out" "$name" "sandboxes left by refusals"
  done

  out=$(must_fail "$WR_BIN/warrend" --default-disk 1m --root /nonexistent)
  assert_contains "$out" "at least 16m" "warrend --default-disk 1m"

  restart_daemon_with --default-disk 32m
  tracked_sandbox res-default
  assert_eq $((32 * MIB)) "$(sb_get res-default .limits.disk_bytes)" \
    "disk_bytes from --default-disk"
  out=$("$WARREN" exec res-default -- df -B1M --output=size / | tail -1)
  [ "$out" -le 32 ] || fail "the root is $out MiB under --default-disk 32m"
  tracked_sandbox res-bigger --disk 48m
  assert_eq $((48 * MIB)) "$(sb_get res-bigger .limits.disk_bytes)"
  api_call POST /v1/sandboxes -d '{"name":"res-optout","disk":0}'
  assert_eq 400 "$API_STATUS" "opting out of the default"
  assert_contains "$API_BODY" "every sandbox of this daemon has a disk limit"
}

# Without a limit nothing changes: no image, no loop device, the upper
# layer on the state root, and create stays fast.
test_no_disk_limit_uses_no_loop_device() {
  local id ms
  ms=$(time_ms "$WARREN" create --name res-plain)
  WR_CLEANUP="${WR_CLEANUP:-} res-plain"
  trap 'for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  id=$(sb_get res-plain .id)
  assert_eq null "$(sb_get res-plain .limits.disk_bytes)" "disk_bytes"
  [ ! -e "$WR_ROOT/sandboxes/$id/disk.img" ] || fail "an image without --disk"
  [ -d "$WR_ROOT/sandboxes/$id/upper" ] || fail "no upper layer on the host"
  assert_eq "" "$(sandbox_loop_devices "$id")" "loop devices"
  [ "$ms" -lt 2000 ] || fail "create took $ms ms"
}

# ---- file descriptors -------------------------------------------------------

# Opening fds until the kernel refuses ends in EMFILE (RLIMIT_NOFILE), not
# ENFILE (the host's file-max); the hard limit cannot be raised; warrend
# and other sandboxes are fine.
test_fd_exhaustion_stopped_by_rlimit_nofile() {
  local out soft hard opened
  new_sandbox res-fds
  new_sandbox res-fds-peer
  install_helper res-fds exhaust_fds
  out=$("$WARREN" exec res-fds -- exhaust_fds one)
  soft=$(sed -n 's/^nofile: \([0-9]*\) .*/\1/p' <<<"$out")
  hard=$(sed -n 's/^nofile: [0-9]* \([0-9]*\)$/\1/p' <<<"$out")
  assert_eq "$hard" "$soft" "soft limit raised to the hard one"
  [ "$hard" -le 1048576 ] || fail "RLIMIT_NOFILE is $hard inside"
  assert_contains "$out" "raise_hard: EPERM" "raising the hard limit"
  assert_contains "$out" ", EMFILE" "opening fds"
  opened=$(sed -n 's/^fds: \([0-9]*\) opened.*/\1/p' <<<"$out")
  if [ "$opened" -gt "$hard" ] || [ "$opened" -lt $((hard - 16)) ]; then
    fail "$opened fds opened under a limit of $hard"
  fi
  assert_daemon_alive
  assert_eq ok "$("$WARREN" exec res-fds-peer -- echo ok)" "another sandbox"
  assert_eq ok "$("$WARREN" exec res-fds -- echo ok)" "the sandbox itself"
}

# Many processes each opening all the fds they may, together: bounded by
# --pids times RLIMIT_NOFILE, they get EMFILE, never ENFILE, and the
# host's open files stay far below fs.file-max while they hold them.
test_fd_exhaustion_by_many_processes_bounded_by_pids() {
  local out hard max nr pid
  new_sandbox res-fdmany --pids 16
  new_sandbox res-fdmany-peer
  install_helper res-fdmany exhaust_fds
  hard=$("$WARREN" exec res-fdmany -- sh -c 'ulimit -Hn')
  max=$(cat /proc/sys/fs/file-max)
  [ $((16 * hard)) -lt $((max / 2)) ] ||
    fail "--pids 16 x RLIMIT_NOFILE $hard is not far below file-max $max"
  out=$(mktemp)
  "$WARREN" exec res-fdmany -- exhaust_fds many 32 6 >"$out" 2>&1 &
  pid=$!
  wait_until 30 grep -q holding "$out" || fail "no report: $(cat "$out")"
  nr=$(cut -f1 /proc/sys/fs/file-nr)
  [ "$nr" -lt $((max / 2)) ] || fail "$nr files open on the host (max $max)"
  assert_contains "$(cat "$out")" "ENFILE=0 other=0" "how openers stopped"
  [ "$(sed -n 's/^procs: \([0-9]*\) started.*/\1/p' "$out")" -lt 16 ] ||
    fail "more processes than --pids: $(cat "$out")"
  # The host, warrend and another sandbox can still open files.
  assert_eq ok "$("$WARREN" exec res-fdmany-peer -- sh -c 'cat /etc/hostname \
    >/dev/null && echo ok')" "another sandbox"
  assert_daemon_alive
  wait "$pid" || true
  rm -f "$out"
}

# ---- processes ------------------------------------------------------------

# A fork bomb whose every process ignores and blocks SIGTERM (and every
# other signal it can) fills --pids and no more; the host and another
# sandbox stay responsive; `stop --timeout 1` still ends it, at once after
# the grace period, and the sandbox starts again.
test_fork_bomb_ignoring_signals_stopped() {
  local id cur max ms t0 t1
  new_sandbox res-bomb --pids 48
  new_sandbox res-bomb-peer
  install_helper res-bomb exhaust_pids
  id=$(sb_get res-bomb .id)
  "$WARREN" exec -d --tag bomb res-bomb -- exhaust_pids forkbomb >/dev/null
  cur=$(sandbox_cgroup_file "$id" pids pids.current)
  max=$(sandbox_cgroup_file "$id" pids pids.max)
  assert_eq 48 "$(cat "$max")" "pids.max"
  wait_until 20 pids_at_least "$cur" 46 || fail "bomb at $(cat "$cur")"
  sleep 1
  [ "$(cat "$cur")" -le 48 ] || fail "pids.current $(cat "$cur") over 48"

  t0=$(now_ms)
  for _ in $(seq 50); do /bin/true; done
  t1=$(now_ms)
  [ $((t1 - t0)) -lt 5000 ] || fail "50 host forks took $((t1 - t0)) ms"
  assert_eq calm "$("$WARREN" exec res-bomb-peer -- echo calm)" "peer"
  assert_daemon_alive

  ms=$(time_ms "$WARREN" stop --timeout 1 res-bomb)
  [ "$ms" -lt 6000 ] || fail "stop --timeout 1 took $ms ms"
  assert_eq stopped "$(sb_state res-bomb)"
  assert_eq "" "$(procs_in_sandbox_cgroup "$id")" "processes after stop"
  "$WARREN" start res-bomb >/dev/null
  assert_eq ok "$("$WARREN" exec res-bomb -- echo ok)" "after a restart"
}

# A thread bomb: threads count against --pids too (RLIMIT_NPROC plays no
# part), so it stops below the limit.
test_thread_bomb_stopped_by_pids_limit() {
  local out made
  new_sandbox res-threads --pids 32
  install_helper res-threads exhaust_pids
  out=$("$WARREN" exec res-threads -- exhaust_pids threads)
  assert_contains "$out" ", EAGAIN" "creating threads"
  made=$(sed -n 's/^threads: \([0-9]*\) made.*/\1/p' <<<"$out")
  [ "$made" -lt 32 ] || fail "$made threads under --pids 32"
  assert_eq ok "$("$WARREN" exec res-threads -- echo ok)" "after the bomb"
}

# ---- memory ---------------------------------------------------------------

# Memory cgroup peak usage of a sandbox (v1 or v2).
memory_peak() { # ID
  local f
  f=$(sandbox_cgroup_file "$1" memory memory.max_usage_in_bytes) ||
    f=$(sandbox_cgroup_file "$1" memory memory.peak) || return 1
  cat "$f"
}

# A memory bomb spread over many processes, none of them big: the OOM
# killer acts inside the sandbox only; warrend, the sandbox's init and
# another sandbox carry on.
test_memory_bomb_many_processes_oom_only_inside() {
  local id out dpid init peer_init peak
  new_sandbox res-mem --memory 64m --pids 64
  new_sandbox res-mem-peer
  install_helper res-mem exhaust_mem
  id=$(sb_get res-mem .id)
  dpid=$(daemon_pid)
  init=$(sb_get res-mem .pid)
  peer_init=$(sb_get res-mem-peer .pid)
  out=$("$WARREN" exec res-mem -- exhaust_mem procs 12 24 3) || true
  assert_contains "$out" "12 started" "memory bomb"
  [ "$(sed -n 's/.* \([0-9]*\) killed.*/\1/p' <<<"$out")" -ge 1 ] ||
    fail "nothing was OOM-killed: $out"
  if peak=$(memory_peak "$id"); then
    [ "$peak" -le $((64 * MIB)) ] || fail "peak memory $peak over 64 MiB"
  fi
  assert_eq "$dpid" "$(daemon_pid)" "warrend's pid"
  pid_alive "$dpid" || fail "warrend died"
  assert_eq "$init" "$(sb_get res-mem .pid)" "the sandbox's init"
  assert_eq "$peer_init" "$(sb_get res-mem-peer .pid)" "the peer's init"
  assert_eq alive "$("$WARREN" exec res-mem -- echo alive)" "after the OOM"
  assert_eq alive "$("$WARREN" exec res-mem-peer -- echo alive)" "peer"
}

# A memory bomb in tmpfs (/dev/shm): pages that belong to no process, so
# no kill frees them. They are charged to the sandbox and stop at
# --memory; removing the file gives the memory back.
test_memory_bomb_in_tmpfs_stopped_by_memory_limit() {
  local id out rc dpid peak usage
  new_sandbox res-shm --memory 64m
  new_sandbox res-shm-peer
  install_helper res-shm exhaust_mem
  id=$(sb_get res-shm .id)
  dpid=$(daemon_pid)
  rc=0
  out=$("$WARREN" exec res-shm -- exhaust_mem shm /dev/shm/fill 512 2>&1) ||
    rc=$?
  # Either the writer was OOM-killed or its write failed; it never got
  # all 512 MiB.
  assert_not_contains "$out" "shm: 512 MiB" "tmpfs bomb"
  [ "$rc" = 137 ] || assert_contains "$out" "shm: " "tmpfs bomb (rc $rc)"
  if peak=$(memory_peak "$id"); then
    [ "$peak" -le $((64 * MIB)) ] || fail "peak memory $peak over 64 MiB"
  fi
  pid_alive "$dpid" || fail "warrend died"
  assert_eq alive "$("$WARREN" exec res-shm-peer -- echo alive)" "peer"
  assert_eq running "$(sb_state res-shm)" "state"
  "$WARREN" exec res-shm -- rm -f /dev/shm/fill
  usage=$(cat "$(sandbox_cgroup_file "$id" memory memory.usage_in_bytes ||
    sandbox_cgroup_file "$id" memory memory.current)")
  [ "$usage" -lt $((32 * MIB)) ] || fail "usage $usage after the delete"
  assert_eq alive "$("$WARREN" exec res-shm -- echo alive)" "after the delete"
}

# ---- signals, stop and rm ---------------------------------------------------

# A shell that ignores SIGTERM (trap '' TERM, inherited by its children)
# and a process that ignores and blocks every signal it can are still
# stopped by `stop --timeout 1`, right after the grace period.
test_sigterm_ignoring_processes_stopped_by_timeout() {
  local id ms
  new_sandbox res-term
  install_helper res-term exhaust_pids
  id=$(sb_get res-term .id)
  "$WARREN" exec -d --tag trap res-term -- \
    sh -c "trap '' TERM; while :; do sleep 1; done" >/dev/null
  "$WARREN" exec -d --tag immortal res-term -- exhaust_pids immortal >/dev/null
  wait_until 10 sandbox_runs res-term exhaust_pids || fail "not running"
  ms=$(time_ms "$WARREN" stop --timeout 1 res-term)
  [ "$ms" -ge 900 ] || fail "stop took $ms ms: were the processes running?"
  [ "$ms" -lt 5000 ] || fail "stop --timeout 1 took $ms ms"
  assert_eq stopped "$(sb_state res-term)"
  assert_eq "" "$(procs_in_sandbox_cgroup "$id")" "processes after stop"
}

# rm -f of a paused (frozen) sandbox whose processes ignore signals: the
# frozen processes cannot run a handler, so only the cgroup's kill works.
test_rm_force_of_frozen_sandbox() {
  local id ms f
  new_sandbox res-frozen --disk 32m
  install_helper res-frozen exhaust_pids
  id=$(sb_get res-frozen .id)
  "$WARREN" exec -d res-frozen -- exhaust_pids immortal >/dev/null
  "$WARREN" exec -d res-frozen -- sh -c 'while :; do :; done' >/dev/null
  "$WARREN" exec res-frozen -- sh -c 'head -c 4M /dev/urandom >/data'
  "$WARREN" pause res-frozen >/dev/null
  assert_eq paused "$(sb_state res-frozen)"
  if f=$(sandbox_cgroup_file "$id" freezer freezer.state); then
    assert_eq FROZEN "$(cat "$f")" "freezer.state"
  fi
  ms=$(time_ms "$WARREN" rm -f res-frozen)
  [ "$ms" -lt 5000 ] || fail "rm -f of a frozen sandbox took $ms ms"
  assert_not_contains "$("$WARREN" ls -q)" res-frozen "ls"
  assert_no_traces "$id" "rm -f of a frozen sandbox"
}

# rm -f while an exec streams output: the exec ends (with an error), the
# sandbox goes, and nothing is left.
test_rm_force_mid_exec_streaming() {
  local id out pid rc
  new_sandbox res-busy --disk 32m
  id=$(sb_get res-busy .id)
  out=$(mktemp)
  "$WARREN" exec res-busy -- sh -c 'while :; do echo line; done' >"$out" 2>&1 &
  pid=$!
  wait_until 10 test -s "$out" || fail "no output from the exec"
  "$WARREN" rm -f res-busy >/dev/null
  wait_until 10 pid_gone "$pid" || fail "the exec client still runs"
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" != 0 ] || fail "the exec of a removed sandbox exited 0"
  rm -f "$out"
  assert_no_traces "$id" "rm -f mid-exec"
  assert_daemon_alive
}

# rm -f in the middle of an upload into a sandbox with a disk limit: rm
# returns at once; the upload fails; once it ends, no mount, loop device or
# file is left.
test_rm_force_mid_upload() {
  local id big out pid ms
  new_sandbox res-upload --disk 64m
  id=$(sb_get res-upload .id)
  big=$(mktemp)
  out=$(mktemp)
  head -c $((24 * MIB)) /dev/urandom >"$big"
  curl -sS --unix-socket "$WR_SOCK" -X PUT --limit-rate 4M -T "$big" \
    -o "$out" -w '%{http_code}' "http://warren$(files_url res-upload /big)" \
    >"$out.status" 2>&1 &
  pid=$!
  sleep 1
  kill -0 "$pid" 2>/dev/null || fail "the upload ended early: $(cat "$out")"
  ms=$(time_ms "$WARREN" rm -f res-upload)
  [ "$ms" -lt 5000 ] || fail "rm -f mid-upload took $ms ms"
  wait "$pid" || true
  case $(cat "$out.status") in
    2*) fail "the upload into a removed sandbox succeeded: $(cat "$out")" ;;
  esac
  rm -f "$big" "$out" "$out.status"
  assert_no_traces "$id" "rm -f mid-upload"
  assert_daemon_alive
}

# A tar upload still streaming into a sandbox that rm -f removed must not
# harm a sandbox made meanwhile: its files get nothing of the upload
# (whose job still holds the removed root's fd number), and the daemon
# keeps serving it (fd numbers freed under the upload are reused by the
# new sandboxes' sockets and pipes).
test_tar_upload_racing_rm_harms_no_other_sandbox() {
  local dir tarball pid i out
  new_sandbox res-race-a
  dir=$(mktemp -d)
  mkdir "$dir/tree"
  for i in $(seq 400); do head -c 32768 /dev/urandom >"$dir/tree/f$i"; done
  tarball="$dir/t.tar"
  tar -C "$dir" -cf "$tarball" tree
  curl -sS --unix-socket "$WR_SOCK" -X PUT --limit-rate 2M \
    -T "$tarball" -o /dev/null \
    "http://warren$(files_url res-race-a archive /landed)" &
  pid=$!
  sleep 1
  "$WARREN" rm -f res-race-a >/dev/null
  for i in 1 2 3; do
    new_sandbox "res-race-b$i"
    api GET "$(files_url "res-race-b$i" stat /)" >/dev/null
  done
  wait "$pid" || true
  # The others are intact and still answer (a daemon that lost track of
  # its fds might not).
  for i in 1 2 3; do
    out=$(timeout 20 "$WARREN" exec "res-race-b$i" -- \
      sh -c 'ls -d /landed /tree 2>/dev/null; echo finished') ||
      fail "exec in res-race-b$i failed or hung: $out"
    assert_eq finished "$out" "what the upload left in res-race-b$i"
  done
  assert_daemon_alive
  rm -rf "$dir"
}
