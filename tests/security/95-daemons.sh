# shellcheck shell=bash
# Security: one state root, one daemon; two daemons, two worlds.
#
# A second warrend on the test daemon's root is refused, naming the first
# (whose socket and service are untouched), and so are five at once. A
# warrend of a second root gets host uids and a cgroup parent of its own,
# may not take the first's socket or cgroup parent, and its registration
# goes when its root does. A daemon whose socket was replaced by another's
# leaves that socket alone when it stops. Each test that needs a second
# daemon starts it on its own root and socket and stops it again. Sourced
# by tests/run-e2e, which provides lib.sh.

ROOTS_DB=/var/lib/warren-roots/roots.db
SECOND_ROOT=$WR_ROOT-second
SECOND_SOCK=$WR_RUN/second.sock
SECOND_LOG=$WR_RUN/second.log

# Run warrend in the foreground with the given options; prints its output
# and exits with its status (for daemons that must refuse to start).
warrend_once() { # OPTIONS...
  timeout 20 "$WR_BIN/warrend" --log-level debug --netns-pool 0 "$@" 2>&1
}

second_pid() { cat "$WR_RUN/second.pid" 2>/dev/null; }

# A daemon's exit status RC says it refused to start (not 0, and it did
# not run until warrend_once's timeout).
assert_refused() { # RC OUTPUT
  if [ "$1" = 0 ] || [ "$1" = 124 ]; then
    fail "warrend did not refuse (status $1): $2"
  fi
}

# A second daemon on its own root and socket, in the background.
start_second() {
  mkdir -p "$SECOND_ROOT"
  "$WR_BIN/warrend" --root "$SECOND_ROOT" --socket "$SECOND_SOCK" \
    --log-level debug --netns-pool 0 >>"$SECOND_LOG" 2>&1 &
  echo $! >"$WR_RUN/second.pid"
  disown $! 2>/dev/null || true
  wait_until 20 curl -sf --unix-socket "$SECOND_SOCK" http://w/v1/info ||
    fail "the second warrend did not start: $(tail -5 "$SECOND_LOG")"
}

stop_second() {
  local pid
  pid=$(second_pid)
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait_until 10 pid_gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
  rm -f "$WR_RUN/second.pid"
}

second() { WARREN_HOST="unix:$SECOND_SOCK" "$WARREN" "$@"; }

# The second root's sandboxes, its daemon and the root itself go; the
# test daemon is left running (started again if a test stopped it).
second_cleanup() {
  local s
  set +e
  if [ -n "$(second_pid)" ]; then
    for s in $(second ls --json 2>/dev/null | jq -r '.[].name'); do
      second rm -f "$s" >/dev/null 2>&1
    done
  fi
  stop_second
  remove_root "$SECOND_ROOT"
  rm -f "$SECOND_SOCK"
  for s in ${WR_CLEANUP:-}; do "$WARREN" rm -f "$s" >/dev/null 2>&1; done
  ensure_daemon >/dev/null 2>&1
}

# Give the second root the test root's base image (hard links: images are
# read-only) and its record, so that it can make sandboxes without a build.
seed_second_image() {
  start_second
  stop_second
  mkdir -p "$SECOND_ROOT/images"
  cp -al "$WR_ROOT/images/base" "$SECOND_ROOT/images/base"
  sqlite3 "$SECOND_ROOT/warren.db" "INSERT INTO images (name, state, \
    packages_json, suite, size_bytes, created_ms) VALUES ('base', 'ready', \
    '[]', 'bookworm', 0, 0)"
}

# The cgroup directories (any hierarchy) warren-init of a sandbox is in.
init_cgroups() { # CLI-FUNCTION NAME
  local pid
  pid=$("$1" inspect --json "$2" | jq -r .pid)
  [ "$pid" -gt 0 ] || fail "no init pid for $2"
  cut -d: -f3 "/proc/$pid/cgroup" | sort -u
}

# ---- one daemon per root --------------------------------------------------------

# A second warrend on the same root exits non-zero before it touches
# anything, naming the first's pid; the first still serves on its socket,
# which is still there (the same inode). With the first's socket too, the
# same. Five at once: all five refused.
test_second_daemon_on_the_same_root_refused() {
  local first ino out rc i pids
  first=$(daemon_pid)
  ino=$(stat -c %i "$WR_SOCK")
  rc=0
  out=$(warrend_once --root "$WR_ROOT" --socket "$WR_RUN/other.sock") || rc=$?
  assert_refused "$rc" "$out"
  assert_contains "$out" "in use by another warrend (pid $first)" "its message"
  assert_contains "$out" "$WR_ROOT" "its message"
  [ ! -e "$WR_RUN/other.sock" ] || fail "the refused daemon made a socket"
  assert_eq "$first" "$(cat "$WR_ROOT/warrend.lock")" "the lock file's pid"

  rc=0
  out=$(warrend_once --root "$WR_ROOT" --socket "$WR_SOCK") || rc=$?
  assert_refused "$rc" "$out"
  assert_contains "$out" "pid $first" "its message"

  pids=()
  for i in 1 2 3 4 5; do
    warrend_once --root "$WR_ROOT" --socket "$WR_SOCK" >"$WR_RUN/five.$i" &
    pids[i]=$!
  done
  for i in 1 2 3 4 5; do
    rc=0
    wait "${pids[i]}" || rc=$?
    assert_refused "$rc" "$(cat "$WR_RUN/five.$i")"
    assert_contains "$(cat "$WR_RUN/five.$i")" "pid $first" "daemon $i of five"
  done
  rm -f "$WR_RUN"/five.*

  assert_eq "$first" "$(daemon_pid)" "the first daemon"
  pid_alive "$first" || fail "the first warrend died"
  assert_daemon_alive
  [ -S "$WR_SOCK" ] || fail "the first's socket is gone"
  assert_eq "$ino" "$(stat -c %i "$WR_SOCK")" "the first's socket"
  assert_eq "$WR_ROOT" "$(api GET /v1/info | jq -r .root)" "who answers"
}

# ---- two roots, two worlds --------------------------------------------------------

# A sandbox of each root: different host uid ranges (uid_base, and the
# uid its root runs as on the host), different cgroup parents (the second
# root's own default, warren-ID); the registry lists both roots, and
# forgets the second once it is gone.
test_two_roots_get_distinct_uid_ranges_and_cgroups() {
  local base1 base2 rid cg1 cg2 pid1 pid2 uid1 uid2
  trap second_cleanup EXIT
  new_sandbox roots-one
  trap second_cleanup EXIT
  seed_second_image
  start_second
  second create --name roots-two >/dev/null || fail "create on the second root"

  base1=$(sb_get roots-one .uid_base)
  base2=$(second inspect --json roots-two | jq -r .uid_base)
  [ "$base1" != "$base2" ] || fail "both sandboxes have uid_base $base1"
  pid1=$(sb_get roots-one .pid)
  pid2=$(second inspect --json roots-two | jq -r .pid)
  uid1=$(awk '/^Uid:/ {print $2}' "/proc/$pid1/status")
  uid2=$(awk '/^Uid:/ {print $2}' "/proc/$pid2/status")
  assert_eq "$base1" "$uid1" "the host uid of root inside the first"
  assert_eq "$base2" "$uid2" "the host uid of root inside the second"

  rid=$(cat "$SECOND_ROOT/root-id")
  cg1=$(init_cgroups "$WARREN" roots-one)
  cg2=$(init_cgroups second roots-two)
  assert_contains "$cg1" "/$WR_CG_PARENT/$(sb_get roots-one .id)" "first's cgroups"
  assert_contains "$cg2" "/warren-${rid:0:8}/" "second's cgroups"
  assert_not_contains "$cg2" "/$WR_CG_PARENT/" "second's cgroups"

  assert_eq 1 "$(sqlite3 "$ROOTS_DB" "SELECT COUNT(*) FROM roots WHERE \
    path = '$SECOND_ROOT' AND cgroup_parent = 'warren-${rid:0:8}'")" \
    "the second root's record"
  assert_eq 1 "$(sqlite3 "$ROOTS_DB" "SELECT COUNT(*) FROM uid_slots s JOIN \
    roots r ON r.id = s.root_id WHERE r.path = '$SECOND_ROOT'")" \
    "the second root's slots"

  # The second root goes (its daemon stopped, its sandboxes removed, the
  # directory deleted): the next daemon's start forgets it.
  second rm -f roots-two >/dev/null
  stop_second
  remove_root "$SECOND_ROOT"
  stop_daemon
  start_daemon
  assert_eq 0 "$(sqlite3 "$ROOTS_DB" "SELECT COUNT(*) FROM roots WHERE \
    path = '$SECOND_ROOT'")" "the gone root's record"
}

# A daemon of another root may not take the first's socket (it is served)
# nor its cgroup parent (nor one inside it); each refusal names the first.
test_second_root_refused_the_first_ones_socket_and_cgroup_parent() {
  local out rc
  trap second_cleanup EXIT
  mkdir -p "$SECOND_ROOT"
  rc=0
  out=$(warrend_once --root "$SECOND_ROOT" --socket "$WR_SOCK") || rc=$?
  assert_refused "$rc" "$out"
  assert_contains "$out" "served by the warrend of state root \`$WR_ROOT\`" \
    "the socket's refusal"
  assert_contains "$out" "pid $(daemon_pid)" "the socket's refusal"
  assert_daemon_alive

  for parent in "$WR_CG_PARENT" "$WR_CG_PARENT/inner"; do
    rc=0
    out=$(warrend_once --root "$SECOND_ROOT" --socket "$SECOND_SOCK" \
      --cgroup-parent "$parent") || rc=$?
    assert_refused "$rc" "$out"
    assert_contains "$out" "cgroup parent \`$parent\`" "the parent's refusal"
    assert_contains "$out" "state root \`$WR_ROOT\`" "the parent's refusal"
    [ ! -e "$SECOND_SOCK" ] || fail "the refused daemon made a socket"
  done
  rc=0
  out=$(warrend_once --root "$SECOND_ROOT" --socket "$SECOND_SOCK" \
    --cgroup-parent ../escape) || rc=$?
  [ "$rc" != 0 ] || fail "a parent outside the hierarchy was taken: $out"
  assert_contains "$out" "invalid cgroup parent" "the bad parent's refusal"
}

# Another daemon's socket is renamed over the test daemon's path (as a
# start racing it would): when the test daemon stops, it leaves that
# socket in place, and the other daemon still answers there.
test_replaced_socket_is_not_unlinked_at_stop() {
  local ino
  trap second_cleanup EXIT
  start_second
  mv "$SECOND_SOCK" "$WR_SOCK"
  ino=$(stat -c %i "$WR_SOCK")
  stop_daemon
  [ -S "$WR_SOCK" ] || fail "the stopped daemon removed the other's socket"
  assert_eq "$ino" "$(stat -c %i "$WR_SOCK")" "the socket at $WR_SOCK"
  assert_eq "$SECOND_ROOT" "$(api GET /v1/info | jq -r .root)" \
    "who answers at $WR_SOCK"
  stop_second
  start_daemon
  assert_eq "$WR_ROOT" "$(api GET /v1/info | jq -r .root)" "who answers now"
}
