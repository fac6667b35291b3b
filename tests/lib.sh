# Shared helpers for warren's end-to-end, isolation and security tests.
#
# Each test file defines functions named test_*; tests/run-e2e sources this
# file and the test file, starts one warrend for the file, and runs every
# test function in a subshell. A test fails by calling `fail` (or by any
# command failing: tests run with `set -e`), and skips with `skip REASON`
# only for a missing kernel feature; with WARREN_MUST_WORK=1 a skip fails.

WR_TOP=${WR_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
WR_BIN=${WR_BIN:-$WR_TOP/build/bin}
WR_HELPERS=${WR_HELPERS:-$WR_TOP/build/helpers}
# The state root is kept between runs so the base image is built once.
WR_ROOT=${WARREN_TEST_ROOT:-/var/lib/warren-test}
WR_RUN=${WR_RUN:-/run/warren-test}
# The cgroup below which the test daemon puts sandboxes (start_daemon's
# --cgroup-parent). Several test daemons may share it on one host, so
# cgroups and processes are attributed to a state root by sandbox id.
WR_CG_PARENT=${WR_CG_PARENT:-warren-test}
WR_SOCK=$WR_RUN/warrend.sock
WR_LOG=${WR_LOG:-$WR_RUN/warrend.log}
export WARREN_HOST="unix:$WR_SOCK"
WARREN="$WR_BIN/warren"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

skip() {
  if [ "${WARREN_MUST_WORK:-0}" = 1 ]; then
    fail "skipped, but WARREN_MUST_WORK=1: $*"
  fi
  echo "SKIP: $*" >&2
  exit 77
}

assert_eq() { # expected actual [what]
  [ "$1" = "$2" ] || fail "${3:-value}: expected '$1', got '$2'"
}

assert_contains() { # haystack needle [what]
  case "$1" in
    *"$2"*) ;;
    *) fail "${3:-output} does not contain '$2': $1" ;;
  esac
}

assert_not_contains() { # haystack needle [what]
  case "$1" in
    *"$2"*) fail "${3:-output} contains '$2': $1" ;;
    *) ;;
  esac
}

# Run a command that must fail; prints its combined output.
must_fail() {
  local out
  if out=$("$@" 2>&1); then
    fail "expected failure: $* (output: $out)"
  fi
  printf '%s' "$out"
}

# curl against the API on the unix socket: api METHOD PATH [curl args...]
api() {
  local method=$1 path=$2
  shift 2
  curl -sS --unix-socket "$WR_SOCK" -X "$method" "http://warren$path" "$@"
}

# HTTP status only.
api_status() {
  local method=$1 path=$2
  shift 2
  curl -s -o /dev/null -w '%{http_code}' --unix-socket "$WR_SOCK" \
    -X "$method" "http://warren$path" "$@"
}

json_get() { # JSON JQ-FILTER
  printf '%s' "$1" | jq -r "$2"
}

daemon_pid() {
  cat "$WR_RUN/warrend.pid" 2>/dev/null
}

start_daemon() {
  mkdir -p "$WR_RUN"
  "$WR_BIN/warrend" --root "$WR_ROOT" --socket "$WR_SOCK" \
    --cgroup-parent "$WR_CG_PARENT" --log-level debug "$@" >>"$WR_LOG" 2>&1 &
  echo $! >"$WR_RUN/warrend.pid"
  disown $! 2>/dev/null || true
  for _ in $(seq 1 200); do
    if [ -S "$WR_SOCK" ] && api GET /v1/info >/dev/null 2>&1; then
      return 0
    fi
    if ! kill -0 "$(daemon_pid)" 2>/dev/null; then
      tail -20 "$WR_LOG" >&2
      fail "warrend exited during start"
    fi
    sleep 0.05
  done
  fail "warrend did not start"
}

# The next daemon can start only once this one is gone: it holds the state
# root's lock until it exits.
stop_daemon() {
  local pid
  pid=$(daemon_pid || true)
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    pid_alive "$pid" || break
    sleep 0.05
  done
  rm -f "$WR_RUN/warrend.pid"
}

# The base image, built once per state root (a few minutes the first
# time), and again over one from before images said which Node.js they
# have (the tests expect the default image's tools and Node).
ensure_image() {
  local images
  images=$("$WARREN" image ls --json) || fail "image ls failed"
  if ! jq -e '.[] | select(.name == "base" and .state == "ready" and
      .node != null)' <<<"$images" >/dev/null; then
    echo "building the base image (first run only)..." >&2
    "$WARREN" image build base --force >&2 || fail "image build failed"
  fi
}

# A fresh sandbox for one test; removed when the test's shell exits.
new_sandbox() { # NAME [create args...]
  local name=$1
  shift
  "$WARREN" rm -f "$name" >/dev/null 2>&1 || true
  "$WARREN" create --name "$name" "$@" >/dev/null || fail "create $name"
  WR_CLEANUP="${WR_CLEANUP:-} $name"
  trap 'for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
}

# Copy a test helper binary into a sandbox at /usr/local/bin.
install_helper() { # SANDBOX HELPER
  "$WARREN" cp "$WR_HELPERS/$2" "$1:/usr/local/bin/$2" >/dev/null ||
    fail "copy helper $2"
  "$WARREN" exec "$1" -- chmod 755 "/usr/local/bin/$2"
}

# Everything that a sandbox may leave on the host, for leak checks.
host_traces() { # ID
  local id=$1
  {
    grep -c " $WR_ROOT/sandboxes/$id" /proc/self/mountinfo || true
    ls -d /sys/fs/cgroup/*/"$WR_CG_PARENT/$id" /sys/fs/cgroup/"$WR_CG_PARENT/$id" 2>/dev/null || true
    ls -d "$WR_ROOT/sandboxes/$id" 2>/dev/null || true
  } | tr '\n' ' '
}

# ---- helpers for the functional e2e tests (tests/e2e/[1-6]0-*.sh) ----------

# Milliseconds since the epoch.
now_ms() {
  date +%s%3N
}

# Poll until a command succeeds: wait_until SECONDS CMD... (every 50 ms).
wait_until() {
  local secs=$1 end
  shift
  end=$(($(now_ms) + secs * 1000))
  until "$@" >/dev/null 2>&1; do
    [ "$(now_ms)" -lt "$end" ] || return 1
    sleep 0.05
  done
}

sb_json() { # NAME
  "$WARREN" inspect --json "$1"
}

sb_get() { # NAME JQ-FILTER
  sb_json "$1" | jq -r "$2"
}

sb_state() { # NAME
  sb_get "$1" .state
}

# Host pids whose cgroup (in any hierarchy, /proc/PID/cgroup) is the
# sandbox's or below it: nothing of the sandbox can hide from this.
procs_in_sandbox_cgroup() { # ID
  grep -l -- "/$WR_CG_PARENT/$1\(/\|$\)" /proc/[0-9]*/cgroup 2>/dev/null |
    sed 's|/proc/\([0-9]*\)/cgroup|\1|' | tr '\n' ' ' || true
}

# Assert an API error body: {"error":{"code":CODE,"message":non-empty}}.
assert_api_error() { # BODY CODE [what]
  local code msg
  code=$(printf '%s' "$1" | jq -r '.error.code' 2>/dev/null) ||
    fail "${3:-error} is not JSON: $1"
  msg=$(printf '%s' "$1" | jq -r '.error.message // ""' 2>/dev/null)
  assert_eq "$2" "$code" "${3:-error} code (body $1)"
  [ -n "$msg" ] || fail "${3:-error} has no message: $1"
}

# curl on the socket printing "STATUS BODY" on one line pair: sets
# API_STATUS and API_BODY. api_call METHOD PATH [curl args...]
api_call() {
  local method=$1 path=$2 out
  shift 2
  out=$(curl -sS --unix-socket "$WR_SOCK" -X "$method" -w '\n%{http_code}' \
    "http://warren$path" "$@") || fail "curl $method $path failed"
  API_STATUS=${out##*$'\n'}
  API_BODY=${out%$'\n'*}
}

# The daemon process is still alive and answering.
assert_daemon_alive() {
  kill -0 "$(daemon_pid)" 2>/dev/null || fail "warrend died"
  api GET /v1/info >/dev/null || fail "warrend does not answer"
}

# A shell snippet listing the sandbox's processes as "PID (COMM) STATE",
# leaving out PID 1 and the listing shell (the image has no ps):
#   warren exec N -- sh -c "$INSIDE_PS"
INSIDE_PS='for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = $$ ] && continue
[ "$p" = 1 ] && continue; read -r a b c r <"$d/stat" 2>/dev/null &&
echo "$a $b $c"; done; true'

# ---- helpers for the isolation, recovery and cgroup v2 tests -------------

# Remove a state root a test made for a daemon of its own: its lxcfs
# (a FUSE mount in the root, which outlives the daemon by design), the
# root, and the cgroup parent the host's registry gave it.
remove_root() { # DIR
  local dir=$1 parent pid d
  parent=$(sqlite3 /var/lib/warren-roots/roots.db \
    "SELECT cgroup_parent FROM roots WHERE path = '$dir'" 2>/dev/null || true)
  pid=$(cat "$dir/lxcfs.pid" 2>/dev/null || true)
  umount "$dir/lxcfs" 2>/dev/null || true
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
  [ -n "$parent" ] || return 0
  for d in /sys/fs/cgroup/*/"$parent" "/sys/fs/cgroup/$parent"; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null
  done
  return 0
}

# Whether PID exists and is not a zombie waiting to be reaped.
pid_alive() {
  local state
  state=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

pid_gone() { ! pid_alive "$1"; }

# SIGKILL warrend (no chance to clean up) and wait until it is gone.
kill_daemon() {
  local pid
  pid=$(daemon_pid || true)
  [ -n "$pid" ] || return 0
  # If this shell started it, bash would report it "Killed" on stderr.
  disown "$pid" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  wait_until 10 pid_gone "$pid" || fail "warrend $pid survived SIGKILL"
  rm -f "$WR_RUN/warrend.pid"
}

# Start warrend unless the one in the pid file is alive.
ensure_daemon() {
  local pid
  pid=$(daemon_pid || true)
  if [ -n "$pid" ] && pid_alive "$pid"; then
    return 0
  fi
  start_daemon "$@"
}

# The host pids in a sandbox's cgroup (freezer on v1, the group on v2).
sandbox_host_pids() { # ID
  local f
  for f in "/sys/fs/cgroup/freezer/$WR_CG_PARENT/$1/cgroup.procs" \
    "/sys/fs/cgroup/$WR_CG_PARENT/$1/cgroup.procs" \
    "/sys/fs/cgroup/unified/$WR_CG_PARENT/$1/cgroup.procs"; do
    if [ -r "$f" ]; then
      cat "$f"
      return 0
    fi
  done
  return 1
}

# Ids of the sandboxes of this state root: known to the daemon, or with a
# directory under the root; plus any given as arguments.
root_ids() { # [ID...]
  {
    "$WARREN" ls --json 2>/dev/null | jq -r '.[].id' 2>/dev/null || true
    ls "$WR_ROOT/sandboxes" 2>/dev/null || true
    printf '%s\n' "$@"
  } | grep -E '^sb-[a-z0-9]+$' | sort -u || true
}

# The warren-init processes on the host, as "PID ID" (ID from its cgroup).
init_processes() {
  local d arg0 id
  for d in /proc/[0-9]*; do
    arg0=
    { IFS= read -r -d '' arg0 <"$d/cmdline"; } 2>/dev/null || true
    [ "$arg0" = warren-init ] || continue
    id=$(grep -m1 -o "/$WR_CG_PARENT/sb-[a-z0-9]*" "$d/cgroup" 2>/dev/null |
      sed 's|.*/||') || true
    echo "${d#/proc/} ${id:-?}"
  done
}

# Everything the sandboxes of this state root hold on the host, one line
# each, sorted: "mount PATH", "cgroup PATH", "dir PATH", "init ID". Ids
# given as arguments are looked for too (sandboxes already forgotten).
# The root's own lxcfs (ROOT/lxcfs, shared by all its sandboxes and meant
# to outlive them) is not a trace.
root_traces() { # [ID...]
  local ids id cg
  ids=$(root_ids "$@" | tr '\n' ' ')
  {
    awk -v r="$WR_ROOT/" 'index($5, r) == 1 && $5 != r "lxcfs" { print "mount " $5 }' \
      /proc/self/mountinfo
    for id in $ids; do
      for cg in /sys/fs/cgroup/*/"$WR_CG_PARENT/$id" \
        "/sys/fs/cgroup/$WR_CG_PARENT/$id"; do
        if [ -d "$cg" ]; then echo "cgroup $cg"; fi
      done
      if [ -e "$WR_ROOT/sandboxes/$id" ]; then
        echo "dir $WR_ROOT/sandboxes/$id"
      fi
    done
    init_processes | while read -r _ id; do
      case " $ids " in *" $id "*) echo "init $id" ;; esac
    done
  } | sort
}

# True when nothing but PID 1 (and the probe itself) runs in the sandbox.
sandbox_quiet() { # NAME
  [ -z "$("$WARREN" exec "$1" -- sh -c "$INSIDE_PS")" ]
}

# True when a process named COMM runs in the sandbox.
sandbox_runs() { # NAME COMM
  "$WARREN" exec "$1" -- sh -c "$INSIDE_PS" | grep -q "($2)"
}

# ---- helpers for the security suite (tests/security/) ---------------------

# A value percent-encoded for a URL query or path segment.
sec_uri() {
  jq -rn --arg v "$1" '$v|@uri'
}

# The files API URL of sandbox SB: files_url SB [ROUTE] PATH, where ROUTE is
# "", stat, list, archive, mkdir...
files_url() {
  echo "/v1/sandboxes/$1/files${3:+/$2}?path=$(sec_uri "${3-$2}")"
}

# What must not change on the host: "PATH INODE SIZE MTIME MODE UID LINKS
# SHA256" for each file, and "PATH INODE MTIME ENTRIES" for each directory.
host_fingerprint_of() { # PATH...
  local p
  for p in "$@"; do
    if [ -d "$p" ]; then
      echo "$p $(stat -c '%i %Y' "$p") $(ls -A "$p" | sha256sum | cut -c1-16)"
    elif [ -e "$p" ]; then
      echo "$p $(stat -c '%i %s %Y %a %u %h' "$p") $(sha256sum <"$p" | cut -c1-16)"
    else
      echo "$p absent"
    fi
  done
}

# The host's /etc, its key files and /: a write that escaped would show.
host_etc_fingerprint() {
  host_fingerprint_of / /etc /etc/passwd /etc/shadow /etc/group \
    /etc/hostname /etc/hosts
}

# Send raw bytes to the daemon and print everything that came back, then
# "<<EOF>>" if the daemon closed the connection or "<<OPEN>>" if it was
# still open after WAIT seconds (default 3). BYTES is a Python expression;
# TARGET is "unix" (default) or a TCP port.
#   raw_http 'b"GET /v1/info HTTP/1.1\r\n\r\n"' [TARGET]
raw_http() {
  python3 - "$WR_SOCK" "${2:-unix}" "$1" "${WAIT:-3}" <<'PYEOF'
import os, socket, sys
sock, target, expr, wait = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
data = eval(expr)
if target == "unix":
    s = socket.socket(socket.AF_UNIX); s.connect(sock)
else:
    s = socket.create_connection(("127.0.0.1", int(target)))
s.settimeout(wait)
try:
    s.sendall(data)
except OSError:
    pass
out, end = b"", b"<<OPEN>>"
try:
    while len(out) < (1 << 22):
        b = s.recv(65536)
        if not b:
            end = b"<<EOF>>"
            break
        out += b
except ConnectionResetError:
    end = b"<<EOF>>"
except OSError:
    pass
sys.stdout.write((out + end).decode("latin-1"))
PYEOF
}

# The status of the first response in raw_http's output, and how many
# responses there were.
raw_http_status() { printf '%s' "$1" | head -1 | cut -d' ' -f2; }
raw_http_count() { printf '%s' "$1" | grep -c '^HTTP/1\.[01] [0-9]' || true; }
# The body of the first response (no chunked coding expected).
raw_http_body() {
  printf '%s' "$1" | tr -d '\r' | sed '1,/^$/d' | sed 's/<<\(EOF\|OPEN\)>>$//'
}

# Restart this file's daemon with a TCP listener, once per daemon: sets
# WR_TCP_PORT and WR_API_KEY. Sandboxes keep running across the restart.
ensure_tcp_daemon() {
  local state pid port
  state="$WR_RUN/tcp-listener"
  pid=$(daemon_pid || true)
  if [ -s "$state" ] && [ "$(cut -d' ' -f1 "$state")" = "$pid" ] &&
    pid_alive "$pid"; then
    WR_TCP_PORT=$(cut -d' ' -f2 "$state")
  else
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    stop_daemon
    start_daemon --listen "127.0.0.1:$port"
    wait_until 5 test -s "$WR_ROOT/api.key" || fail "no $WR_ROOT/api.key"
    echo "$(daemon_pid) $port" >"$state"
    WR_TCP_PORT=$port
  fi
  WR_API_KEY=$(tr -d '\n' <"$WR_ROOT/api.key")
}

# Every operation in docs/api.yaml as "METHOD PATH BODY", BODY being the
# request body's media type or "-".
api_operations() {
  awk '
    function flush() { if (m != "") print toupper(m), p, (b == "" ? "-" : b); m = ""; b = "" }
    /^  \/[^ ]*:$/ { flush(); p = $1; sub(/:$/, "", p); next }
    /^    (get|put|post|delete|patch):$/ { flush(); m = $1; sub(/:$/, "", m); inbody = 0; next }
    /^      requestBody:/ { inbody = 1; next }
    inbody && /^          [a-z]+\/[a-z.+-]+:$/ { b = $1; sub(/:$/, "", b); inbody = 0; next }
    /^[a-z]/ { flush(); p = "" }
    END { flush() }
  ' "$WR_TOP/docs/api.yaml"
}

# The host pid of a process in sandbox ID whose command line is CMDLINE
# (arguments joined by spaces), waiting up to 5 s for it to appear.
sandbox_host_pid_of() { # ID CMDLINE
  local p _
  for _ in $(seq 50); do
    for p in $(sandbox_host_pids "$1"); do
      if [ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" = "$2 " ]; then
        echo "$p"
        return 0
      fi
    done
    sleep 0.1
  done
  return 1
}

# Latency of GET /v1/info on the unix socket, sampled every 50 ms until
# the file STOP exists; prints the largest, in milliseconds.
max_info_latency_until() { # STOP
  local worst=0 t
  while [ ! -e "$1" ]; do
    t=$(curl -s -o /dev/null -w '%{time_total}' -m 10 --unix-socket "$WR_SOCK" \
      http://warren/v1/info)
    t=$(echo "$t * 1000 / 1" | bc)
    [ "$t" -gt "$worst" ] && worst=$t
    sleep 0.05
  done
  echo "$worst"
}

# ---- helpers for the resource tests (tests/security/70-resources.sh) -----

# Loop devices whose backing file is in the sandbox's directory, as
# "/dev/loopN FILE" (FILE ends in " (deleted)" once it is unlinked).
sandbox_loop_devices() { # ID
  local f back
  for f in /sys/block/loop*/loop/backing_file; do
    [ -r "$f" ] || continue
    back=$(cat "$f" 2>/dev/null) || continue
    case "$back" in
      "$WR_ROOT/sandboxes/$1/"*) echo "/dev/$(basename "$(dirname "$(dirname "$f")")") $back" ;;
    esac
  done
}

# root_traces plus the loop devices: everything a sandbox with a disk
# limit may leave on the host, one line each.
disk_traces() { # ID
  root_traces "$1" | grep -F "$1" || true
  sandbox_loop_devices "$1" | sed 's/^/loop /'
}

# A file of one of the sandbox's cgroups, v1 (per controller) or v2.
sandbox_cgroup_file() { # ID CONTROLLER FILE
  local f
  for f in "/sys/fs/cgroup/$2/$WR_CG_PARENT/$1/$3" \
    "/sys/fs/cgroup/$WR_CG_PARENT/$1/$3" \
    "/sys/fs/cgroup/unified/$WR_CG_PARENT/$1/$3"; do
    if [ -r "$f" ]; then
      echo "$f"
      return 0
    fi
  done
  return 1
}

# Bytes and inodes free on the state root's filesystem.
host_free_bytes() { df -B1 --output=avail "$WR_ROOT" | tail -1 | tr -d ' '; }
host_free_inodes() { df --output=iavail "$WR_ROOT" | tail -1 | tr -d ' '; }

# ---- helpers for the syscall, privilege and runtime attacks ---------------
# (tests/security/10-syscalls.sh, 20-privileges.sh, 30-runtime.sh; their
# hostile programs are tests/helpers/attack_*.c)

# A fresh sandbox for one test with the given helpers installed.
attack_sandbox() { # NAME HELPER...
  local name=$1 h
  shift
  new_sandbox "$name"
  for h in "$@"; do
    install_helper "$name" "$h"
  done
}

# OUTPUT has exactly the line LINE (a helper's "NAME: RESULT").
assert_line() { # OUTPUT LINE [what]
  grep -qxF -- "$2" <<<"$1" || fail "${3:-output} lacks the line '$2': $1"
}

# Every NAME has the result RESULT in OUTPUT: assert_results OUT EPERM a b
assert_results() { # OUTPUT RESULT NAME...
  local out=$1 want=$2 name
  shift 2
  for name in "$@"; do
    assert_line "$out" "$name: $want"
  done
}

# ---- a second daemon on cgroup v2 (tests/e2e/90-cgroup-v2.sh and the
# v2 checks of tests/security/75-kernel-memory.sh) -------------------------
# It has its own state root (WR_ROOT-cgv2), socket and cgroup parent. Its
# base image is the main root's, linked in (and recorded in its database
# with sqlite3) so that it is not built twice; without sqlite3 it is built.

# Point lib.sh's helpers at a second daemon, started with --cgroup v2.
v2_daemon() {
  local main_root=$WR_ROOT
  V2_MOUNT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
  [ -n "$V2_MOUNT" ] || skip "no cgroup2 hierarchy is mounted on this host"
  V2_PARENT="warren-test-v2-${main_root##*/}"
  WR_ROOT="${main_root%/}-cgv2"
  WR_RUN="$WR_RUN/cgv2"
  WR_SOCK="$WR_RUN/warrend.sock"
  WR_LOG="$WR_RUN/warrend.log"
  WR_CG_PARENT=$V2_PARENT
  export WARREN_HOST="unix:$WR_SOCK"
  trap v2_cleanup EXIT
  v2_seed_image "$main_root"
  start_daemon --cgroup v2 --cgroup-parent "$V2_PARENT"
  ensure_image
  assert_eq v2 "$(api GET /v1/info | jq -r .cgroup)" "the daemon's cgroup layout"
}

# Give the v2 root the main root's base image: a link to its directory and
# a copy of its database without the sandboxes.
v2_seed_image() { # MAIN_ROOT
  local main=$1
  [ ! -e "$WR_ROOT/warren.db" ] || return 0
  mkdir -p "$WR_ROOT/images"
  if ! command -v sqlite3 >/dev/null || [ ! -f "$main/warren.db" ] ||
    [ ! -d "$main/images/base/rootfs" ]; then
    return 0
  fi
  ln -sfn "$main/images/base" "$WR_ROOT/images/base"
  sqlite3 "$main/warren.db" ".backup '$WR_ROOT/warren.db'"
  sqlite3 "$WR_ROOT/warren.db" \
    "DELETE FROM sandboxes; DELETE FROM images WHERE name <> 'base';"
}

# Remove the second daemon's sandboxes, stop it, remove its cgroup parent.
v2_cleanup() {
  local s
  set +e
  for s in $("$WARREN" ls -q 2>/dev/null); do
    "$WARREN" rm -f "$s" >/dev/null 2>&1 || true
  done
  if [ -e "$WR_RUN/warrend.pid" ]; then
    stop_daemon
  fi
  if [ -n "${V2_MOUNT:-}" ] && [ -d "$V2_MOUNT/$V2_PARENT" ]; then
    rmdir "$V2_MOUNT/$V2_PARENT" 2>/dev/null || true
  fi
}

# Whether the cgroup2 root offers a controller.
v2_has() { # CONTROLLER
  grep -qw "$1" "$V2_MOUNT/cgroup.controllers"
}
