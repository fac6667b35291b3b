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
    --cgroup-parent warren-test --log-level debug "$@" >>"$WR_LOG" 2>&1 &
  echo $! >"$WR_RUN/warrend.pid"
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

stop_daemon() {
  local pid
  pid=$(daemon_pid)
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$WR_RUN/warrend.pid"
}

# The base image, built once per state root (about 90 s the first time).
ensure_image() {
  if ! "$WARREN" image ls --json 2>/dev/null | grep -q '"name": *"base"'; then
    echo "building the base image (first run only)..." >&2
    "$WARREN" image build base >&2 || fail "image build failed"
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
    ls -d /sys/fs/cgroup/*/warren-test/"$id" /sys/fs/cgroup/warren-test/"$id" 2>/dev/null || true
    ls -d "$WR_ROOT/sandboxes/$id" 2>/dev/null || true
  } | tr '\n' ' '
}
