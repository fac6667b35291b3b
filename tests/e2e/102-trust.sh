# shellcheck shell=bash
# End-to-end: the CAs a sandbox trusts, and the hosts the host's own
# configuration names (docs/network.md, "The host's CAs" and "Hosts the
# host chose").
#
# CAs: the daemon of this file reads a CA directory of the test's own
# (--host-ca-dir, standing in for /usr/local/share/ca-certificates) that
# holds a test CA (tests/net/mkca.sh) beside a junk file and a private
# key. A TLS server on the host (tests/net/upstreams.py, certificate
# signed by that CA) is reached through the proxy from inside: curl,
# node and python trust it with no option of their own; --no-host-cas
# takes it away; a CA put into the directory after create reaches the
# sandbox at its next start; --sandbox-ca adds a file; /v1/info and
# `warren version` list what is trusted. And on this host, whose outbound
# TLS is inspected: `npm view vite version` under the balanced preset.
#
# Host-chosen hosts: npm's registry (npm_config_registry in the daemon's
# environment) is a name that the hosts file maps to a private address,
# where a mock registry listens in a network namespace of its own
# (192.168.254.2 behind a veth pair: not an address of this host). The
# balanced preset reaches it with no IP rule; a user's rule for another
# name at the same address is refused; loopback and metadata addresses
# stay refused for the registry's name too.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

NET_TOOLS=$WR_TOP/tests/net
TRUST_DIR=$WR_RUN/trust
TRUST_CA=$TRUST_DIR/ca          # the test CA and the TLS server's certificate
TRUST_OP=$TRUST_DIR/op          # another CA, for --sandbox-ca
TRUST_HOST_CAS=$TRUST_DIR/host-cas
TRUST_HOSTS=$TRUST_DIR/hosts
TRUST_NS=wrt-trust-reg
TRUST_VETH=wrt-trust0
REG_NET=192.168.254
REG_IP=$REG_NET.2

trust_host_ip() {
  ip -4 -o addr show scope global 2>/dev/null |
    awk '{ sub(/\/.*/, "", $4); print $4; exit }'
}
HOST_IP=$(trust_host_ip)

# The CAs, the host CA directory (a good CA, junk, a key) and the names.
trust_files() {
  mkdir -p "$TRUST_HOST_CAS/corp"
  "$NET_TOOLS/mkca.sh" "$TRUST_CA" tls.trust.test >/dev/null
  "$NET_TOOLS/mkca.sh" "$TRUST_OP" tls.trust.test >/dev/null
  cp "$TRUST_CA/ca.crt" "$TRUST_HOST_CAS/corp/test-ca.crt"
  printf 'not a certificate\n' >"$TRUST_HOST_CAS/junk.crt"
  cp "$TRUST_CA/ca.key" "$TRUST_HOST_CAS/oops-a-key.crt"
  {
    echo "# warren's trust tests (tests/e2e/102-trust.sh)"
    if [ -n "$HOST_IP" ]; then echo "$HOST_IP tls.trust.test"; fi
    echo "$REG_IP reg.trust.test other.trust.test"
    echo "127.0.0.1 lo.trust.test"
    echo "169.254.169.254 meta.trust.test"
  } >"$TRUST_HOSTS"
}

trust_args() {
  echo "--hosts-file $TRUST_HOSTS --host-ca-dir $TRUST_HOST_CAS"
}

daemon_args() {
  trust_files
  trust_args
}

# Start this file's daemon again with other options (and the environment
# of the caller, e.g. npm_config_registry).
restart() {
  stop_daemon
  # shellcheck disable=SC2046 # words, on purpose
  start_daemon $(trust_args) "$@"
}

# ---- cleanup --------------------------------------------------------------

TRUST_EXIT=()
on_exit() {
  TRUST_EXIT+=("$1")
  trap trust_cleanup EXIT
}

trust_cleanup() {
  local i s
  set +e
  for ((i = ${#TRUST_EXIT[@]} - 1; i >= 0; i--)); do
    eval "${TRUST_EXIT[i]}"
  done
  for s in ${WR_CLEANUP:-}; do
    "$WARREN" rm -f "$s" >/dev/null 2>&1
  done
  # The next test (and file) gets the daemon of this file as it was.
  if [ -n "${TRUST_RESTARTED:-}" ]; then
    unset npm_config_registry
    stop_daemon
    # shellcheck disable=SC2046
    start_daemon $(trust_args) >/dev/null 2>&1
  fi
}

trust_sandbox() { # NAME [create args...]
  new_sandbox "$@"
  trap trust_cleanup EXIT
}

rule() {
  local out id
  out=$("$WARREN" policy "$1" network "${@:2}" 2>&1) ||
    fail "warren policy $1 network ${*:2}: $out"
  id=$(sed -n 's/^rule \([^:]*\):.*/\1/p' <<<"$out" | head -1)
  [ -n "$id" ] || fail "no rule id in: $out"
  on_exit "\"\$WARREN\" policy rm '$id' >/dev/null 2>&1"
}

# The TLS server on the host, signed by the test CA (TLS_PORT).
tls_start() {
  local dir
  [ -n "$HOST_IP" ] || fail "this host has no global IPv4 address"
  dir=$(mktemp -d "$TRUST_DIR/up.XXXXXX")
  python3 "$NET_TOOLS/upstreams.py" --addr "$HOST_IP" --services https \
    --certs "$TRUST_CA" --log "$dir/log" --ready "$dir/ready" >"$dir/out" 2>&1 &
  on_exit "kill $! 2>/dev/null; wait $! 2>/dev/null; rm -rf '$dir'"
  wait_until 10 test -s "$dir/ready" || fail "no TLS server: $(cat "$dir/out")"
  TLS_PORT=$(jq -r .https "$dir/ready")
  TLS_URL=https://tls.trust.test:$TLS_PORT/hello
  rule allow tls.trust.test
  rule allow "$HOST_IP"
}

# What each TLS client inside makes of the server: "curl:200 node:200
# python:200" when all trust it.
clients() { # SANDBOX
  local c n p
  c=$("$WARREN" exec --timeout 60 "$1" -- curl -s -o /dev/null -m 20 \
    -w '%{http_code}' "$TLS_URL" 2>&1) || true
  n=$("$WARREN" exec --timeout 60 "$1" -- node -e '
    require("https").get(process.argv[1], r => { console.log(r.statusCode); process.exit(0); })
      .on("error", e => { console.log(e.code); process.exit(0); });' "$TLS_URL" 2>&1) || true
  p=$("$WARREN" exec --timeout 60 "$1" -- python3 -c '
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=20).status)
except Exception as e:
    print(type(getattr(e, "reason", e)).__name__)' "$TLS_URL" 2>&1) || true
  echo "curl:$c node:$n python:$p"
}

info_cas() { api GET /v1/info | jq -c '.sandbox_cas'; }

# git reads the system bundle (no variable of its own): what it says of
# the server's certificate. The server is no git server, so a trusted one
# ends in "not valid: is this a git repository?", an untrusted one in a
# verification error.
git_says() { # SANDBOX
  "$WARREN" exec --timeout 60 "$1" -- git ls-remote "$TLS_URL" 2>&1 || true
}

# ---- the host's CAs ----------------------------------------------------------

test_host_cas_trusted_inside() {
  local out info
  tls_start
  trust_sandbox trust-host
  out=$(clients trust-host)
  assert_eq "curl:200 node:200 python:200" "$out" "TLS clients inside"
  out=$(git_says trust-host)
  assert_not_contains "$out" "certificate" "git inside"
  assert_contains "$out" "not valid: is this a git repository" "git inside"
  # Every variable points at a file that holds the CA.
  out=$("$WARREN" exec trust-host -- sh -c 'for f in "$SSL_CERT_FILE" \
      "$NODE_EXTRA_CA_CERTS" "$REQUESTS_CA_BUNDLE" "$PIP_CERT"; do
      printf "%s " "$f"; grep -c "CN=warren test CA" "$f"; done')
  assert_not_contains "$out" " 0" "a CA file inside without the test CA"
  assert_contains "$out" "/usr/local/share/ca-certificates/warren-ca.crt"
  # Neither the junk nor the key went in; both are reported.
  out=$("$WARREN" exec trust-host -- cat /etc/ssl/certs/ca-certificates.crt)
  assert_not_contains "$out" "PRIVATE KEY"
  assert_not_contains "$out" "not a certificate"
  info=$(info_cas)
  assert_eq 1 "$(jq '.count' <<<"$info")" "CAs in /v1/info: $info"
  assert_eq "CN=warren test CA" "$(jq -r '.cas[0].subject' <<<"$info")"
  assert_eq "$TRUST_HOST_CAS/corp/test-ca.crt" "$(jq -r '.cas[0].file' <<<"$info")"
  assert_eq host "$(jq -r '.cas[0].source' <<<"$info")"
  jq -e '.cas[0].not_after | test("^20[0-9][0-9]-")' <<<"$info" >/dev/null ||
    fail "no not_after: $info"
  assert_eq 2 "$(jq '.skipped | length' <<<"$info")" "skipped files: $info"
  jq -e '.skipped[] | select(.file | endswith("oops-a-key.crt")) |
    .reason | test("PRIVATE KEY")' <<<"$info" >/dev/null ||
    fail "the key file is not reported as a key: $info"
  grep -q "junk.crt: no PEM certificate in it; skipped" "$WR_LOG" ||
    fail "no warning for junk.crt in the daemon's log"
  out=$("$WARREN" version)
  assert_contains "$out" "sandbox CAs: 1 besides the image's and warren's (2 file(s) skipped"
  out=$("$WARREN" version --json | jq -r '.daemon.sandbox_cas.cas[0].subject')
  assert_eq "CN=warren test CA" "$out" "warren version --json"
}

test_no_host_cas() {
  local out
  TRUST_RESTARTED=1
  restart --no-host-cas
  tls_start
  trust_sandbox trust-off
  out=$(clients trust-off)
  assert_contains "$out" "curl:000" "curl without the CA"
  assert_not_contains "$out" "node:200" "node without the CA"
  assert_contains "$out" "python:SSLCertVerificationError" "python without the CA"
  assert_contains "$(git_says trust-off)" "certificate" "git without the CA"
  assert_eq 0 "$(info_cas | jq '.count')"
  assert_eq null "$(info_cas | jq '.host_dir')"
}

test_ca_added_later_reaches_next_start() {
  local later=$TRUST_DIR/later-cas out
  TRUST_RESTARTED=1
  rm -rf "$later"
  mkdir -p "$later"
  on_exit "rm -rf '$later'"
  stop_daemon
  start_daemon --hosts-file "$TRUST_HOSTS" --host-ca-dir "$later"
  tls_start
  trust_sandbox trust-later
  assert_contains "$(clients trust-later)" "curl:000" "before the CA is added"
  cp "$TRUST_CA/ca.crt" "$later/added.crt"
  # A running sandbox keeps what it had; its next start has the CA.
  assert_contains "$(clients trust-later)" "curl:000" "running, CA just added"
  "$WARREN" stop trust-later >/dev/null
  "$WARREN" start trust-later >/dev/null
  out=$(clients trust-later)
  assert_eq "curl:200 node:200 python:200" "$out" "after stop and start"
  assert_eq "$later/added.crt" "$(info_cas | jq -r '.cas[0].file')"
  # And when it is gone from the host, it is gone at the next start.
  rm "$later/added.crt"
  "$WARREN" stop trust-later >/dev/null
  "$WARREN" start trust-later >/dev/null
  assert_contains "$(clients trust-later)" "curl:000" "CA removed on the host"
}

test_sandbox_ca_option() {
  local out
  TRUST_RESTARTED=1
  # A file that is not a CA is a mistake in the daemon's options.
  stop_daemon
  if "$WR_BIN/warrend" --root "$WR_ROOT" --socket "$WR_SOCK" \
    --cgroup-parent "$WR_CG_PARENT" --sandbox-ca "$TRUST_HOST_CAS/junk.crt" \
    >"$TRUST_DIR/bad.out" 2>&1; then
    fail "warrend started with a junk --sandbox-ca"
  fi
  assert_contains "$(cat "$TRUST_DIR/bad.out")" "--sandbox-ca $TRUST_HOST_CAS/junk.crt: no PEM certificate"
  # The operator's own CA, with no host CAs: the server is signed by the
  # test CA, so trusting TRUST_OP's is not enough; both are.
  start_daemon --hosts-file "$TRUST_HOSTS" --no-host-cas \
    --sandbox-ca "$TRUST_OP/ca.crt" --sandbox-ca "$TRUST_CA/ca.crt"
  tls_start
  trust_sandbox trust-op
  assert_eq "curl:200 node:200 python:200" "$(clients trust-op)" "--sandbox-ca"
  out=$(info_cas)
  assert_eq 2 "$(jq '.count' <<<"$out")" "$out"
  assert_eq "sandbox-ca sandbox-ca" "$(jq -r '[.cas[].source] | join(" ")' <<<"$out")"
}

# The real thing on this host: npm's registry over TLS, through warren's
# proxy, under the balanced preset with no rule, with the host's CAs.
test_npm_view_under_balanced() {
  local out
  command -v npm >/dev/null || skip "npm is not installed on the host"
  if ! out=$(timeout 60 npm view vite version 2>&1); then
    skip "the host's own \`npm view vite version\` fails: $(tail -1 <<<"$out")"
  fi
  TRUST_RESTARTED=1
  stop_daemon
  start_daemon # the defaults: /usr/local/share/ca-certificates
  "$WARREN" policy init balanced >/dev/null
  wait_until 15 sh -c '"$0" policy ls --wide | grep -q "npm registry"' "$WARREN" ||
    fail "the preset never got npm's registry: $("$WARREN" policy ls --wide)"
  trust_sandbox trust-npm
  out=$("$WARREN" exec --timeout 120 trust-npm -- npm view vite version \
    --fetch-retries=0 --fetch-timeout=30000 2>&1) ||
    fail "npm view vite version inside: $out"
  [[ "$out" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || fail "npm view printed: $out"
}

# ---- host-chosen hosts -----------------------------------------------------------

# The mock registry behind a veth pair, in a namespace of its own: a
# private address that is not this host's. Sets REG_PORT.
reg_start() {
  local dir
  ip netns del "$TRUST_NS" 2>/dev/null || true
  ip link del "$TRUST_VETH" 2>/dev/null || true
  # Reached only through the default route: the network is free here.
  if ! ip -4 route get "$REG_IP" 2>/dev/null | head -1 | grep -q ' via '; then
    skip "$REG_NET.0/30 is a network of this host: $(ip -4 route get "$REG_IP")"
  fi
  ip netns add "$TRUST_NS" || skip "cannot make a network namespace"
  on_exit "ip netns del '$TRUST_NS' 2>/dev/null; ip link del '$TRUST_VETH' 2>/dev/null"
  ip link add "$TRUST_VETH" type veth peer name wrt-trust1 netns "$TRUST_NS"
  ip addr add "$REG_NET.1/30" dev "$TRUST_VETH"
  ip link set "$TRUST_VETH" up
  ip -n "$TRUST_NS" addr add "$REG_IP/30" dev wrt-trust1
  ip -n "$TRUST_NS" link set wrt-trust1 up
  ip -n "$TRUST_NS" link set lo up
  dir=$(mktemp -d "$TRUST_DIR/reg.XXXXXX")
  ip netns exec "$TRUST_NS" python3 "$NET_TOOLS/upstreams.py" --addr "$REG_IP" \
    --services registry --log "$dir/log" --ready "$dir/ready" >"$dir/out" 2>&1 &
  on_exit "kill $! 2>/dev/null; wait $! 2>/dev/null; rm -rf '$dir'"
  wait_until 10 test -s "$dir/ready" || fail "no registry: $(cat "$dir/out")"
  REG_PORT=$(jq -r .registry "$dir/ready")
}

# Restart the daemon with npm's registry at http://NAME:PORT/ and wait
# until the preset has it.
registry_is() { # NAME PORT
  TRUST_RESTARTED=1
  export npm_config_registry="http://$1:$2/"
  restart
  "$WARREN" policy init balanced >/dev/null
  wait_until 15 sh -c '"$0" policy ls --wide | grep -Eq "$1"' "$WARREN" \
    "^- +allow +$1 +$2 .*npm registry" ||
    fail "the preset never got $1:$2: $("$WARREN" policy ls --wide)"
}

test_host_chosen_registry_on_a_private_address() {
  local out
  command -v npm >/dev/null || skip "npm is not installed on the host"
  reg_start
  registry_is reg.trust.test "$REG_PORT"
  out=$("$WARREN" policy ls --wide)
  assert_contains "$out" "preset balanced: npm registry (host-chosen: private addresses allowed)"
  out=$("$WARREN" policy check network "reg.trust.test:$REG_PORT")
  assert_contains "$out" "allowed: allow reg.trust.test:$REG_PORT (preset balanced: npm registry)"
  assert_contains "$out" "host-chosen: private addresses allowed"
  assert_contains "$out" "$REG_IP: allowed (allow reg.trust.test:$REG_PORT (preset balanced: npm registry); $REG_IP is private, allowed for a host-chosen name)"
  # Only on the port npm's configuration names.
  out=$("$WARREN" policy check network "reg.trust.test:443" || true)
  assert_contains "$out" "denied"
  trust_sandbox trust-reg
  out=$("$WARREN" exec --timeout 90 trust-reg -- npm view warren-demo-pkg version \
    --registry "http://reg.trust.test:$REG_PORT/" --fetch-retries=0 2>&1) ||
    fail "npm view from the host-chosen registry: $out"
  assert_eq "1.0.0" "$out" "npm view"
  # A user's rule for another name at the same address: the full check.
  rule allow --sandbox trust-reg other.trust.test
  out=$("$WARREN" exec --timeout 60 trust-reg -- curl -s -o /dev/null -m 20 \
    -w '%{http_code}' "http://other.trust.test:$REG_PORT/warren-demo-pkg" 2>&1) || true
  assert_eq 403 "$out" "a user's name at the registry's private address"
  out=$("$WARREN" policy check network --sandbox trust-reg "other.trust.test:$REG_PORT" || true)
  assert_contains "$out" "$REG_IP is private and no rule names it"
  assert_not_contains "$out" "host-chosen"
}

# warrend --npm-registry names the registry without asking npm (a host
# without npm, or one whose npm is configured for someone else): the preset
# has it, host-chosen, and a URL that is not http(s) stops the start.
test_npm_registry_option() {
  local out
  reg_start
  TRUST_RESTARTED=1
  restart --npm-registry "http://reg.trust.test:$REG_PORT/"
  "$WARREN" policy init balanced >/dev/null
  out=$("$WARREN" policy ls --wide)
  assert_contains "$out" "reg.trust.test"
  assert_contains "$out" "preset balanced: npm registry (host-chosen: private addresses allowed)"
  out=$("$WARREN" policy check network "reg.trust.test:$REG_PORT")
  assert_contains "$out" "allowed: allow reg.trust.test:$REG_PORT (preset balanced: npm registry)"
  stop_daemon
  out=$(timeout 20 "$WR_BIN/warrend" --root "$WR_ROOT" --socket "$WR_SOCK" \
    --cgroup-parent "$WR_CG_PARENT" --npm-registry ftp://reg.trust.test/ 2>&1) &&
    fail "warrend started with an ftp registry"
  assert_contains "$out" "--npm-registry: \`ftp://reg.trust.test/\` is not an http(s) URL"
}

test_host_chosen_registry_never_loopback_or_metadata() {
  local out name
  command -v npm >/dev/null || skip "npm is not installed on the host"
  for name in lo.trust.test meta.trust.test; do
    registry_is "$name" 4873
    out=$("$WARREN" policy check network "$name:4873" || true)
    assert_contains "$out" "host-chosen: private addresses allowed" "$name"
    case $name in
      lo.*) assert_contains "$out" "127.0.0.1: denied (127.0.0.1 is loopback and no rule names it)" ;;
      meta.*) assert_contains "$out" "169.254.169.254: denied (169.254.169.254 is metadata and no rule names it)" ;;
    esac
    assert_contains "$out" "denied:"
  done
}
