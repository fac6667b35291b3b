# shellcheck shell=bash
# Security: kernel memory and kernel objects a sandbox makes the host hold.
#
# Code inside fills socket buffers, pipes and unix sockets that nobody
# reads, and takes inotify instances and POSIX message queues, which the
# kernel counts per user. Each test runs the attack (tests/helpers/
# pin_kernel.c) in a real sandbox and asserts the safe outcome: what it
# pins is charged to the sandbox and stops at its limit, the host's TCP
# memory stays far from the point where every TCP socket on the host
# fails, and a neighbour and the host's root keep their own share of
# every per-user count. docs/isolation.md has the table of bounds.
# Sourced by tests/run-e2e, which provides lib.sh.

MIB=$((1 << 20))

# The host's TCP memory in pages (/proc/net/sockstat "TCP: ... mem N").
host_tcp_pages() {
  awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "mem") print $(i + 1) }' \
    /proc/net/sockstat
}

# Field N (1-3) of /proc/sys/net/ipv4/tcp_mem, in pages.
tcp_mem() { # N
  cut -f"$1" /proc/sys/net/ipv4/tcp_mem
}

cgroup_version() {
  api GET /v1/info | jq -r .cgroup
}

# Bytes of socket buffers charged to the sandbox: v1's TCP counter, or
# the "sock" line of v2's memory.stat.
sandbox_sock_bytes() { # ID
  local f
  if f=$(sandbox_cgroup_file "$1" memory memory.kmem.tcp.usage_in_bytes); then
    cat "$f"
  elif f=$(sandbox_cgroup_file "$1" memory memory.stat); then
    awk '$1 == "sock" { print $2 }' "$f"
  else
    fail "no memory cgroup for $1"
  fi
}

# Run `pin_kernel ARGS...` in SANDBOX in the background, its output in
# FILE, and wait until it holds what it pinned.
pin_in_background() { # SANDBOX FILE ARGS...
  local sb=$1 file=$2
  shift 2
  "$WARREN" exec "$sb" -- pin_kernel "$@" >"$file" 2>&1 &
  wait_until 60 grep -q '^holding' "$file" || fail "pin_kernel $*: $(cat "$file")"
}

# The MiB a pin_kernel line reports: "tcp: 63 MiB queued in ..." -> 63.
pinned_mib() { # OUTPUT-FILE
  sed -n 's/^[a-z]*: \([0-9]*\) MiB.*/\1/p' "$1" | head -1
}

# A TCP connection on the host's loopback carries 4 MiB and an answer.
host_tcp_works() {
  timeout 20 python3 - <<'PYEOF'
import socket, threading
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
def serve():
    s, _ = l.accept(); n = 0
    while n < 4 << 20:
        b = s.recv(65536)
        if not b:
            break
        n += len(b)
    s.sendall(b"ok" if n == 4 << 20 else b"short")
threading.Thread(target=serve, daemon=True).start()
c = socket.create_connection(l.getsockname(), timeout=10)
c.sendall(b"x" * (4 << 20))
print(c.recv(8).decode())
PYEOF
}

# GET /v1/info answered within a second.
assert_daemon_quick() {
  local t
  t=$(curl -s -o /dev/null -w '%{time_total}' -m 10 --unix-socket "$WR_SOCK" \
    http://warren/v1/info) || fail "warrend does not answer"
  [ "$(echo "$t < 1" | bc)" = 1 ] || fail "GET /v1/info took ${t}s"
}

# The TCP limits a sandbox was given, on v1: its own and the parent's.
assert_v1_tcp_limits() { # ID WANT-BYTES
  local f budget
  f=$(sandbox_cgroup_file "$1" memory memory.kmem.tcp.limit_in_bytes) ||
    fail "no memory.kmem.tcp.limit_in_bytes for $1"
  budget=$(($(tcp_mem 2) / 2 * $(getconf PAGESIZE)))
  assert_eq "$budget" "$(cat "/sys/fs/cgroup/memory/$WR_CG_PARENT/memory.kmem.tcp.limit_in_bytes")" \
    "the parent's TCP budget (half of tcp_mem's pressure threshold)"
  [ "$2" -le "$budget" ] || set -- "$1" "$budget"
  assert_eq "$2" "$(cat "$f")" "the sandbox's TCP limit"
}

# Pin TCP buffers in SANDBOX (trying for 512 MiB) and check that no more
# than LIMIT MiB is held, by the sandbox's count and by the host's, while
# the host's own TCP and warrend carry on.
assert_tcp_pinning_bounded() { # SANDBOX ID LIMIT-MIB
  local sb=$1 id=$2 limit=$3 out before during pinned charged
  out=$(mktemp)
  before=$(host_tcp_pages)
  pin_in_background "$sb" "$out" tcp 512 8
  pinned=$(pinned_mib "$out")
  during=$(host_tcp_pages)
  charged=$(sandbox_sock_bytes "$id")
  echo "pinned: $(head -1 "$out"); charged $((charged / MIB)) MiB;" \
    "host TCP $((before * 4096 / MIB)) -> $((during * 4096 / MIB)) MiB;" \
    "tcp_mem $(cat /proc/sys/net/ipv4/tcp_mem)"
  # The kernel grants every socket a page or two beyond the limit (the
  # sockets themselves are charged to --memory, which bounds how many
  # there can be): 16 MiB of slack for the helper's 1024 connections.
  [ "$pinned" -le $((limit + 16)) ] ||
    fail "the sandbox queued $pinned MiB in TCP buffers under a $limit MiB limit"
  [ $((charged / MIB)) -le $((limit + 16)) ] ||
    fail "$((charged / MIB)) MiB of socket buffers charged (limit $limit MiB)"
  [ $((charged / MIB)) -ge $((pinned / 2)) ] ||
    fail "only $((charged / MIB)) of $pinned MiB queued is charged to the sandbox"
  # Other suites may use TCP at the same time: generous slack.
  [ $(((during - before) * 4096 / MIB)) -le $((limit + 80)) ] ||
    fail "the host's TCP memory grew by $(((during - before) * 4096 / MIB)) MiB"
  [ "$during" -lt $(($(tcp_mem 2) / 2)) ] ||
    fail "the host's TCP memory ($during pages) is near tcp_mem"
  assert_eq ok "$(host_tcp_works)" "a host TCP connection during the attack"
  assert_daemon_quick
  wait
  rm -f "$out"
}

# A --memory 64m sandbox fills loopback TCP connections that nobody
# reads, with the largest buffers it may ask for: it cannot queue more
# than its limit (v1: memory.kmem.tcp.limit_in_bytes, set from --memory;
# v2: memory.max), the host's TCP memory stays far below tcp_mem, and a
# TCP connection on the host and warrend work meanwhile.
test_tcp_buffers_pinned_by_a_sandbox_are_charged() {
  local id
  new_sandbox km-tcp --memory 64m
  install_helper km-tcp pin_kernel
  id=$(sb_get km-tcp .id)
  if [ "$(cgroup_version)" = v1 ]; then
    assert_v1_tcp_limits "$id" $((64 * MIB))
  fi
  assert_tcp_pinning_bounded km-tcp "$id" 64
  # The sandbox's own TCP works again once the pinner is gone.
  assert_eq "tcp: 1 MiB queued in 1 connections, target" \
    "$("$WARREN" exec km-tcp -- pin_kernel tcp 1 0 | head -1)" \
    "a small TCP transfer inside afterwards"
}

# Without --memory a sandbox still gets a TCP bound (256 MiB on v1, never
# more than the budget of all sandboxes together): the host-wide tcp_mem
# is not its to spend.
test_tcp_buffers_of_a_sandbox_without_limits_are_bounded() {
  local id
  new_sandbox km-tcp-free
  install_helper km-tcp-free pin_kernel
  id=$(sb_get km-tcp-free .id)
  if [ "$(cgroup_version)" != v1 ]; then
    echo "note: cgroup v2 charges socket buffers to memory.max; without" \
      "--memory only the host's RAM bounds them (docs/isolation.md)"
    return 0
  fi
  assert_v1_tcp_limits "$id" $((256 * MIB))
  assert_tcp_pinning_bounded km-tcp-free "$id" 256
}

# One sandbox takes every inotify instance and all the POSIX message
# queue space the kernel allows a user, and holds them. Another sandbox
# and the host's root still get theirs: each sandbox's user namespace is
# owned by its own host uid, so the kernel's per-user counts (ucounts)
# are the sandbox's own at the host's level too.
test_inotify_and_mqueues_of_one_sandbox_leave_the_others_theirs() {
  local ino mq max n
  new_sandbox km-greedy
  new_sandbox km-other
  install_helper km-greedy pin_kernel
  install_helper km-other pin_kernel
  max=$(cat /proc/sys/fs/inotify/max_user_instances)
  ino=$(mktemp)
  mq=$(mktemp)
  pin_in_background km-greedy "$ino" inotify 100000 8
  pin_in_background km-greedy "$mq" mqueue 100000 8
  echo "greedy: $(head -1 "$ino"); $(head -1 "$mq")"
  n=$(sed -n 's/^inotify: \([0-9]*\) instances.*/\1/p' "$ino")
  if [ "$n" -le 0 ] || [ "$n" -gt "$max" ]; then
    fail "the greedy sandbox got $n inotify instances (per-user max $max)"
  fi
  assert_contains "$(head -1 "$ino")" "EMFILE" "the greedy sandbox's inotify"
  assert_contains "$(head -1 "$mq")" "EMFILE" "the greedy sandbox's mqueues"

  assert_eq "inotify: 32 instances, target" \
    "$("$WARREN" exec km-other -- pin_kernel inotify 32 0 | head -1)" \
    "the neighbour's inotify instances"
  assert_eq "mqueue: 4 queues, target" \
    "$("$WARREN" exec km-other -- pin_kernel mqueue 4 0 | head -1)" \
    "the neighbour's message queues"
  assert_eq "inotify: 1 instances, target" \
    "$("$WR_HELPERS/pin_kernel" inotify 1 0 | head -1)" "host root's inotify"
  assert_eq "mqueue: 1 queues, target" \
    "$("$WR_HELPERS/pin_kernel" mqueue 1 0 | head -1)" \
    "host root's message queues"
  assert_daemon_quick
  wait
  rm -f "$ino" "$mq"
}

# Full pipes (grown with F_SETPIPE_SZ) and unix socket buffers that
# nobody reads are kernel memory of no process: the memory cgroup charges
# them to the sandbox, which stops at --memory. The OOM killer cannot
# tell which process pins them, so it may take warren-init and stop the
# sandbox; nothing outside it is touched, and it starts again.
test_pipe_and_unix_socket_buffers_are_charged_to_the_sandbox() {
  local id kind out peak usage sampler
  new_sandbox km-pipes --memory 64m
  install_helper km-pipes pin_kernel
  new_sandbox km-bystander
  id=$(sb_get km-pipes .id)
  usage=$(sandbox_cgroup_file "$id" memory memory.usage_in_bytes) ||
    usage=$(sandbox_cgroup_file "$id" memory memory.current) ||
    fail "no memory cgroup for $id"
  for kind in pipes unix; do
    [ "$(sb_state km-pipes)" = running ] || "$WARREN" start km-pipes >/dev/null
    out=$(mktemp)
    peak=$(mktemp)
    # The largest charge seen while the attack runs.
    (while [ ! -e "$out.done" ]; do cat "$usage" 2>/dev/null; sleep 0.02; done |
      sort -n | tail -1 >"$peak") &
    sampler=$!
    "$WARREN" exec km-pipes -- pin_kernel "$kind" 512 0 >"$out" 2>&1 || true
    touch "$out.done"
    wait "$sampler"
    echo "$kind: $(head -1 "$out"), peak charge $(($(cat "$peak") / MIB)) MiB," \
      "sandbox $(sb_state km-pipes)"
    if grep -q "^$kind: " "$out"; then
      [ "$(pinned_mib "$out")" -le 64 ] ||
        fail "$kind: pinned $(pinned_mib "$out") MiB under --memory 64m"
    fi
    assert_daemon_quick
    assert_eq ok "$("$WARREN" exec km-bystander -- echo ok)" "the neighbour"
    if [ "$(sb_state km-pipes)" = running ]; then
      "$WARREN" stop km-pipes >/dev/null
    fi
    [ "$(cat "$peak")" -ge $((32 * MIB)) ] ||
      fail "$kind: the sandbox's charge peaked at $(($(cat "$peak") / MIB)) MiB: the buffers are not charged to it"
    rm -f "$out" "$out.done" "$peak"
  done
  "$WARREN" start km-pipes >/dev/null
  assert_eq ok "$("$WARREN" exec km-pipes -- echo ok)" "the sandbox after a restart"
}

# A TCP server on a host address that sends without end to whoever
# connects (with small buffers of its own, so that what it holds is
# known); prints its port. SOURCE_IP must be set.
start_source() {
  python3 - "$SOURCE_IP" <<'PYEOF' &
import os, socket, sys, threading
l = socket.socket(); l.bind((sys.argv[1], 0)); l.listen(1024)
print(l.getsockname()[1], flush=True)
os.close(1)
buf = b"y" * 65536
def serve(s):
    try:
        while True:
            s.sendall(buf)
    except OSError:
        pass
while True:
    s, _ = l.accept()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    threading.Thread(target=serve, args=(s,), daemon=True).start()
PYEOF
}

# N connections from inside to SOURCE_IP:PORT (through warrend's proxy,
# as every connection goes), never read, held for SECS seconds. Prints
# "connected N" once they are all open.
SINK_CLIENT='
import socket, sys, time
ip, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
cs = []
for i in range(n):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        c.connect((ip, port)); cs.append(c)
    except OSError:
        pass
print("connected", len(cs), flush=True)
time.sleep(secs)
'

# Resident memory of warrend, in bytes.
daemon_rss() {
  awk '$1 == "VmRSS:" { print $2 * 1024 }' "/proc/$(daemon_pid)/status"
}

# Proxied connections whose answers the sandbox never reads: warrend's
# sockets for them have fixed buffers on the sandbox's side and bounded
# ones upstream, and every connection holds its worst case out of a
# budget of 128 MiB per sandbox (and one for all sandboxes), beyond which
# new connections are refused. The host's TCP memory and warrend's own
# memory grow by no more than that, and another sandbox, the host and
# warrend carry on.
test_proxy_connections_nobody_reads_keep_warrends_memory_bounded() {
  local port rule rule2 out before during rss0 rss1 src ok
  SOURCE_IP=$(ip -4 -o addr show scope global 2>/dev/null |
    awk '{ sub(/\/.*/, "", $4); print $4; exit }')
  [ -n "$SOURCE_IP" ] || skip "no global IPv4 address on this host for an upstream"
  new_sandbox km-stall
  new_sandbox km-stall-other
  out=$(mktemp)
  start_source >"$out"
  src=$!
  wait_until 10 test -s "$out" || fail "the source did not start"
  port=$(cat "$out")
  rule=$("$WARREN" policy allow network --sandbox km-stall "$SOURCE_IP:$port" |
    sed -n 's/^rule \([^:]*\):.*/\1/p')
  rule2=$("$WARREN" policy allow network --sandbox km-stall-other "$SOURCE_IP:$port" |
    sed -n 's/^rule \([^:]*\):.*/\1/p')
  # shellcheck disable=SC2064,SC2154 # expanded now, on purpose; s is the trap's
  trap "kill $src 2>/dev/null; \"\$WARREN\" policy rm $rule >/dev/null 2>&1
        \"\$WARREN\" policy rm $rule2 >/dev/null 2>&1
        for s in \$WR_CLEANUP; do \"\$WARREN\" rm -f \"\$s\" >/dev/null 2>&1; done" EXIT
  before=$(host_tcp_pages)
  rss0=$(daemon_rss)
  "$WARREN" exec km-stall -- python3 -c "$SINK_CLIENT" "$SOURCE_IP" "$port" 128 15 \
    >"$out" 2>&1 &
  wait_until 60 grep -q '^connected' "$out" || fail "the client: $(cat "$out")"
  sleep 3 # the buffers fill
  during=$(host_tcp_pages)
  rss1=$(daemon_rss)
  echo "$(cat "$out"); host TCP +$(((during - before) * 4096 / MIB)) MiB," \
    "warrend +$(((rss1 - rss0) / MIB)) MiB resident"
  # The budget, the source's own 256 KiB a connection, slack for others.
  [ $(((during - before) * 4096 / MIB)) -le $((128 + 32 + 48)) ] ||
    fail "the host's TCP memory grew by $(((during - before) * 4096 / MIB)) MiB"
  [ $(((rss1 - rss0) / MIB)) -le 128 ] ||
    fail "warrend grew by $(((rss1 - rss0) / MIB)) MiB"

  ok=$("$WARREN" exec km-stall-other -- python3 -c "
import socket
c = socket.create_connection(('$SOURCE_IP', $port), timeout=10)
n = 0
while n < 1 << 20:
    n += len(c.recv(65536))
print('ok')")
  assert_eq ok "$ok" "a neighbour's download through the proxy"
  assert_eq ok "$(host_tcp_works)" "a host TCP connection"
  assert_daemon_quick
  wait %2 2>/dev/null || true
  rm -f "$out"
}

# cgroup v2 has no TCP counter of its own: socket buffers are charged to
# memory.max with everything else (memory.stat "sock"). Where the v2
# hierarchy has the memory controller, the same attack stops at
# --memory; where it has none (this hybrid host), a --memory limit is
# refused, so no sandbox is promised a bound it would not have.
test_tcp_buffers_on_cgroup_v2_are_charged_to_memory_max() {
  local id out
  v2_daemon
  if v2_has memory; then
    "$WARREN" create --name km-v2-tcp --memory 64m >/dev/null
    install_helper km-v2-tcp pin_kernel
    id=$(sb_get km-v2-tcp .id)
    assert_eq $((64 * MIB)) "$(cat "$V2_MOUNT/$V2_PARENT/$id/memory.max")" \
      "memory.max"
    assert_tcp_pinning_bounded km-v2-tcp "$id" 64
  else
    echo "note: this host's cgroup2 hierarchy has no memory controller"
    assert_eq false "$(api GET /v1/info | jq -r .limits.memory)" \
      "/v1/info limits.memory on v2"
    out=$(must_fail "$WARREN" create --name km-v2-tcp --memory 64m)
    assert_contains "$out" "this host cannot limit memory" "create --memory on v2"
  fi
}
