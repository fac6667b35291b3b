# shellcheck shell=bash
# End-to-end: the network of a sandbox. Egress through warren's proxy and
# DNS under the policy, secrets that only the upstream sees, published
# ports. Sourced by tests/run-e2e, which provides lib.sh.
#
# CI has no outside network, so the upstreams are local servers
# (tests/net/upstreams.py: HTTP, HTTPS with a test CA, raw TCP echo, a
# server-speaks-first banner, UDP, a mock npm registry) on the host's
# addresses, reached through rules that name them. The daemon of this file
# trusts the test CA (--upstream-ca) and resolves the test names from a
# hosts file (--hosts-file), both made by daemon_args below.
#
# Names (the hosts file): up.test, api.up.test (the secret's host),
# www.up.test, denied.test (no rule ever allows it), reg.test, flip.test
# and dual.test are on HOST_IP, the host's own global IPv4 address;
# dual.test is also on HOST_IP6 when the host has a global IPv6 one;
# other.test is on 127.0.0.2 (reachable through the proxy only: 127/8
# inside a sandbox is its own loopback, which nothing redirects);
# rebind.test is on 127.0.0.1; mixed.test on both HOST_IP and 127.0.0.1;
# meta.test on 169.254.169.254. HOST_IP is reserved or private, so every
# test name needs an IP rule for its address as well as a domain rule.
#
# Inside the sandbox tests/net/netprobe.py is /usr/local/bin/netprobe,
# the test CA is /tmp/test-ca.pem, /tmp/all-ca.pem is the system bundle
# plus the test CA (for upstreams that are tunnelled, not intercepted), and
# /tmp/node-ca.pem is warren's CA plus the test CA (NODE_EXTRA_CA_CERTS).
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

NET_TOOLS=$WR_TOP/tests/net
NET_DIR=$WR_RUN/net
NET_CA=$NET_DIR/ca
NET_HOSTS=$NET_DIR/hosts
PLACEHOLDER=warren-proxy-placeholder

net_host_ip() {
  ip -4 -o addr show scope global 2>/dev/null |
    awk '{ sub(/\/.*/, "", $4); print $4; exit }'
}

net_host_ip6() {
  ip -6 -o addr show scope global 2>/dev/null |
    awk '!/tentative|dadfailed|deprecated/ { sub(/\/.*/, "", $4); print $4; exit }'
}

HOST_IP=$(net_host_ip)
HOST_IP6=$(net_host_ip6)

net_hosts_content() {
  echo "# warren's network tests (tests/e2e/100-network.sh)"
  if [ -n "$HOST_IP" ]; then
    echo "$HOST_IP up.test api.up.test www.up.test denied.test reg.test flip.test dual.test mixed.test"
  fi
  if [ -n "$HOST_IP6" ]; then
    echo "$HOST_IP6 dual.test"
  fi
  echo "127.0.0.2 other.test"
  echo "127.0.0.1 rebind.test mixed.test"
  echo "169.254.169.254 meta.test"
}

# The daemon of this file trusts the test CA and reads the test names.
daemon_args() {
  mkdir -p "$NET_DIR"
  # shellcheck disable=SC2086 # absent addresses vanish
  "$NET_TOOLS/mkca.sh" "$NET_CA" $HOST_IP $HOST_IP6 >/dev/null
  net_hosts_content >"$NET_HOSTS"
  echo "--upstream-ca $NET_CA/ca.crt --hosts-file $NET_HOSTS"
}

# ---- cleanup -----------------------------------------------------------------

# Commands run when the test ends, last registered first, then the
# sandboxes of new_sandbox are removed. (new_sandbox sets its own EXIT
# trap; net_sandbox puts this one back.)
NET_EXIT=()
on_exit() {
  NET_EXIT+=("$1")
  trap net_cleanup EXIT
}

net_cleanup() {
  local rc=$? i s
  set +e
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    net_debug >&2
  fi
  for ((i = ${#NET_EXIT[@]} - 1; i >= 0; i--)); do
    eval "${NET_EXIT[i]}"
  done
  for s in ${WR_CLEANUP:-}; do
    "$WARREN" rm -f "$s" >/dev/null 2>&1
  done
}

# On failure: what the upstreams saw and what the policy log says.
net_debug() {
  if [ -n "${UP_LOG:-}" ] && [ -s "$UP_LOG" ]; then
    echo "--- upstreams' log (last 15 lines)"
    tail -15 "$UP_LOG" | cut -c1-400
  fi
  echo "--- policy log (last 15 entries)"
  "$WARREN" policy log --json --limit 15 2>&1 | jq -c '.entries[]?' 2>/dev/null |
    cut -c1-400 || true
}

need_host_ip() {
  [ -n "$HOST_IP" ] || fail "this host has no global IPv4 address: the network tests need one (127/8 inside a sandbox is the sandbox's own)"
}

# ---- sandboxes, upstreams, rules --------------------------------------------------

net_sandbox() { # NAME [create args...]
  new_sandbox "$@"
  trap net_cleanup EXIT
  "$WARREN" cp "$NET_CA/ca.crt" "$1:/tmp/test-ca.pem" >/dev/null ||
    fail "copy the test CA into $1"
  "$WARREN" cp "$NET_TOOLS/netprobe.py" "$1:/usr/local/bin/netprobe" >/dev/null ||
    fail "copy netprobe into $1"
  "$WARREN" exec "$1" -- sh -c 'chmod 755 /usr/local/bin/netprobe &&
    cat /etc/ssl/certs/ca-certificates.crt /tmp/test-ca.pem >/tmp/all-ca.pem &&
    cat /usr/local/share/ca-certificates/warren-ca.crt /tmp/test-ca.pem \
      >/tmp/node-ca.pem' || fail "set up the CA files in $1"
}

# netprobe inside: probe SANDBOX ARGS... (its exit status is the probe's)
probe() {
  local sb=$1
  shift
  "$WARREN" exec --timeout 60 "$sb" -- netprobe "$@"
}

# Start the upstreams on every test address; sets UP_HTTP, UP_HTTPS,
# UP_ECHO, UP_BANNER, UP_UDP, UP_REG, UP_REGS (ports), UP_LOG, UP_DIR.
up_start() {
  local addrs=(--addr 127.0.0.1 --addr 127.0.0.2)
  need_host_ip
  mkdir -p "$NET_DIR"
  UP_DIR=$(mktemp -d "$NET_DIR/up.XXXXXX")
  UP_LOG=$UP_DIR/log
  on_exit "rm -rf '$UP_DIR'"
  if ip -6 addr show dev lo 2>/dev/null | grep -q 'inet6 ::1/'; then
    addrs+=(--addr ::1)
  fi
  addrs+=(--addr "$HOST_IP")
  if [ -n "$HOST_IP6" ]; then
    addrs+=(--addr "$HOST_IP6")
  fi
  python3 "$NET_TOOLS/upstreams.py" "${addrs[@]}" --certs "$NET_CA" \
    --log "$UP_LOG" --ready "$UP_DIR/ready" >"$UP_DIR/out" 2>&1 &
  UP_PID=$!
  on_exit "kill $UP_PID 2>/dev/null; wait $UP_PID 2>/dev/null"
  wait_until 10 test -s "$UP_DIR/ready" ||
    fail "the upstreams did not start: $(cat "$UP_DIR/out")"
  UP_HTTP=$(jq -r .http "$UP_DIR/ready")
  UP_HTTPS=$(jq -r .https "$UP_DIR/ready")
  UP_ECHO=$(jq -r .echo "$UP_DIR/ready")
  UP_BANNER=$(jq -r .banner "$UP_DIR/ready")
  UP_UDP=$(jq -r .udp "$UP_DIR/ready")
  UP_REG=$(jq -r .registry "$UP_DIR/ready")
  UP_REGS=$(jq -r .registry_tls "$UP_DIR/ready")
}

# How many lines of the upstreams' log match a jq condition; hdr("name")
# is the list of values of a header. up_count COND [jq options...]
UP_JQ_DEFS='def hdr($n): [.headers[]? | select(.[0] | ascii_downcase == $n) | .[1]];'
up_count() {
  local cond=$1
  shift
  jq -c "$@" "$UP_JQ_DEFS select($cond)" "$UP_LOG" 2>/dev/null | wc -l
}
up_lines() {
  local cond=$1
  shift
  jq -c "$@" "$UP_JQ_DEFS select($cond)" "$UP_LOG" 2>/dev/null
}
# The same, shortened for messages.
up_show() { up_lines "$@" | cut -c1-600 | head -20; }
up_has() { [ "$(up_count "$@")" -gt 0 ]; }

# Nothing in the upstreams' log matches COND.
assert_upstream_never() { # COND WHAT [jq options...]
  local cond=$1 what=$2
  shift 2
  [ "$(up_count "$cond" "$@")" = 0 ] ||
    fail "$what reached an upstream: $(up_show "$cond" "$@")"
}

# A unique marker for paths and payloads.
mk() { echo "m$RANDOM$RANDOM"; }

# The HTTP status of a curl run inside ("000" when no response came).
# in_code SANDBOX URL [curl args...]
in_code() {
  local sb=$1 url=$2 out
  shift 2
  out=$("$WARREN" exec --timeout 60 "$sb" -- curl -s -o /dev/null -m 20 \
    --cacert /tmp/all-ca.pem -w '%{http_code}' "$@" "$url" 2>&1) || true
  [[ "$out" =~ ^[0-9]{3}$ ]] || fail "curl in $sb did not run: $out"
  echo "$out"
}

assert_denied_code() { # CODE WHAT
  [ "$1" != 200 ] || fail "$2 was allowed (200)"
}

# Add a rule (sets RULE_ID); it is removed when the test ends.
# rule allow|deny [--sandbox N] SPEC
rule() {
  local out
  out=$("$WARREN" policy "$1" network "${@:2}" 2>&1) ||
    fail "warren policy $1 network ${*:2}: $out"
  RULE_ID=$(sed -n 's/^rule \([^:]*\):.*/\1/p' <<<"$out" | head -1)
  [ -n "$RULE_ID" ] || fail "warren policy $1 network ${*:2} printed no rule id: $out"
  on_exit "\"\$WARREN\" policy rm '$RULE_ID' >/dev/null 2>&1"
}

# Set the preset; the one before is put back when the test ends.
set_preset() {
  local old
  old=$("$WARREN" policy ls --json 2>/dev/null | jq -r '.preset // empty' 2>/dev/null) ||
    true
  "$WARREN" policy init "$1" >/dev/null || fail "warren policy init $1"
  on_exit "\"\$WARREN\" policy init '${old:-balanced}' >/dev/null 2>&1"
}

# The exit status of `warren policy check network ARGS...`.
check_rc() {
  local rc=0
  "$WARREN" policy check network "$@" >/dev/null 2>&1 || rc=$?
  echo "$rc"
}

check_json() {
  "$WARREN" policy check network "$@" --json || true
}

# The policy log of a sandbox has an entry matching a jq condition.
log_has() { # SANDBOX COND
  local n
  n=$("$WARREN" policy log --json --sandbox "$1" --limit 1000 |
    jq "[.entries[] | select($2)] | length") || return 1
  [ "$n" -gt 0 ]
}

wait_log() { # SANDBOX COND WHAT
  wait_until 10 log_has "$1" "$2" || fail "no policy log entry for $3 ($2): $(
    "$WARREN" policy log --json --sandbox "$1" --limit 20 | jq -c '.entries[]' | cut -c1-300
  )"
}

# Set a secret (value on stdin); removed when the test ends.
set_secret() { # SERVICE VALUE [secret set args...]
  printf %s "$2" | "$WARREN" secret set "$1" "${@:3}" >/dev/null ||
    fail "warren secret set $1"
  on_exit "\"\$WARREN\" secret rm '$1' >/dev/null 2>&1"
}

random_value() { # PREFIX
  echo "$1$(head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 40)"
}

# Search a sandbox for VALUE without putting VALUE into it: netprobe scan
# gets a prefix and a hash.
scan_for() { # SANDBOX VALUE
  "$WARREN" exec --timeout 600 "$1" -- netprobe scan --prefix "${2:0:12}" --length "${#2}" \
    --sha256 "$(printf %s "$2" | sha256sum | cut -d' ' -f1)"
}

NODE_FETCH='fetch(process.argv[1], { redirect: "follow" })
  .then(async (r) => { await r.text(); console.log("status " + r.status); })
  .catch((e) => { console.log("error " + ((e.cause && (e.cause.code || e.cause.message)) || e.message)); process.exit(3); });'

# Node's fetch inside (it ignores the proxy variables): prints "status N"
# or "error CODE". node_fetch SANDBOX URL [exec options...]
node_fetch() {
  local sb=$1 url=$2
  shift 2
  "$WARREN" exec --timeout 60 -e NODE_NO_WARNINGS=1 "$@" "$sb" -- \
    node -e "$NODE_FETCH" "$url" 2>&1 || true
}

# A port that is free now and that the kernel will not hand out as some
# connection's local port meanwhile: one below the ephemeral range.
free_port() { # [ADDR]
  python3 -c 'import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
for _ in range(200):
    port = random.randrange(10000, max(low, 10001))
    s = socket.socket(fam)
    try:
        s.bind((sys.argv[1], port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    sys.exit("no free port below the ephemeral range")' "${1:-127.0.0.1}"
}

port_listening() { # ADDR PORT
  [ -n "$(ss -Hltn "src $1:$2")" ]
}

port_bindable() { # ADDR PORT
  python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)' "$1" "$2" 2>/dev/null
}

# ---- the sandbox's view ----------------------------------------------------------

# Every process gets the proxy variables and CA paths; resolv.conf points
# at warren's DNS; warren's CA is a CA and is in the system bundle; the
# daemon holds 3128 and 53 before anything inside can take them.
test_sandbox_network_environment() {
  local out v user
  net_sandbox net-env
  for user in root 1000; do
    out=$("$WARREN" exec -u "$user" net-env -- env)
    for v in HTTP_PROXY HTTPS_PROXY http_proxy https_proxy; do
      assert_line "$out" "$v=http://127.0.0.1:3128" "env of $user"
    done
    assert_line "$out" "NO_PROXY=localhost,127.0.0.1,::1" "env of $user"
    assert_line "$out" "no_proxy=localhost,127.0.0.1,::1" "env of $user"
    assert_line "$out" "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" "env of $user"
    assert_line "$out" "REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt" "env of $user"
    assert_line "$out" "PIP_CERT=/etc/ssl/certs/ca-certificates.crt" "env of $user"
    assert_line "$out" \
      "NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/warren-ca.crt" "env of $user"
  done
  out=$("$WARREN" exec net-env -- cat /etc/resolv.conf)
  assert_eq "nameserver 127.0.0.1" "$(grep '^nameserver' <<<"$out")" \
    "nameservers in resolv.conf"

  out=$("$WARREN" exec -i net-env -- python3 - <<'EOF'
import ssl
path = "/usr/local/share/ca-certificates/warren-ca.crt"
ca = open(path).read().strip()
bundle = open("/etc/ssl/certs/ca-certificates.crt").read()
print("in-bundle" if ca in bundle else "not in the bundle")
print("test-ca" if ca == open("/tmp/test-ca.pem").read().strip() else "own")
ctx = ssl.create_default_context(cafile=path)
print("ca-certs %d" % len(ctx.get_ca_certs()))
EOF
  )
  assert_line "$out" in-bundle "warren's CA"
  assert_line "$out" own "warren's CA"
  # warren's own, then the host's added CAs (tests/e2e/102-trust.sh).
  assert_line "$out" "ca-certs $((1 + $(api GET /v1/info | jq .sandbox_cas.count)))" \
    "CA certificates in warren-ca.crt"

  out=$("$WARREN" exec -i net-env -- python3 - <<'EOF'
import socket
def try_bind(name, kind, addr, port, reuseport=False):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, kind)
    if reuseport:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        s.bind((addr, port))
        if kind == socket.SOCK_STREAM:
            s.listen(1)
        print("%s bound" % name)
    except OSError as e:
        print("%s errno %d" % (name, e.errno))
try_bind("tcp3128", socket.SOCK_STREAM, "127.0.0.1", 3128)
try_bind("tcp3128-reuseport", socket.SOCK_STREAM, "127.0.0.1", 3128, True)
try_bind("tcp3128-any", socket.SOCK_STREAM, "0.0.0.0", 3128)
try_bind("udp53", socket.SOCK_DGRAM, "127.0.0.1", 53)
try_bind("udp53-any", socket.SOCK_DGRAM, "0.0.0.0", 53)
c = socket.create_connection(("127.0.0.1", 3128), timeout=5)
c.sendall(b"GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n")
print("proxy says %s" % c.recv(4096).split(b"\r\n")[0].decode("latin-1"))
EOF
  )
  assert_line "$out" "tcp3128 errno 98" "binding the proxy's port inside"
  assert_line "$out" "tcp3128-reuseport errno 98" "binding the proxy's port inside"
  assert_line "$out" "tcp3128-any errno 98" "binding the proxy's port inside"
  assert_line "$out" "udp53 errno 98" "binding the DNS port inside"
  assert_line "$out" "udp53-any errno 98" "binding the DNS port inside"
  assert_contains "$out" "proxy says HTTP/1." "the proxy inside"
}

# ---- curl, node, npm --------------------------------------------------------------

# curl, through the proxy (absolute URI, CONNECT) and past it (--noproxy:
# the namespace redirects the connection), to an allowed and a denied name
# on the same address: the name decides; a port in a rule limits it.
test_curl_allowed_and_denied() {
  local m code
  up_start
  set_preset balanced
  net_sandbox net-curl
  rule allow --sandbox net-curl up.test
  rule allow --sandbox net-curl "$HOST_IP"
  m=$(mk)

  assert_eq 200 "$(in_code net-curl "http://up.test:$UP_HTTP/$m-1")" \
    "http://up.test through the proxy"
  assert_eq 1 "$(up_count '.path == $p and .server == "http" and .local == $l and (.host | ascii_downcase | startswith("up.test"))' \
    --arg p "/$m-1" --arg l "$HOST_IP:$UP_HTTP")" "requests upstream for http://up.test"
  assert_eq 200 "$(in_code net-curl "https://up.test:$UP_HTTPS/$m-2")" \
    "https://up.test through the proxy"
  assert_eq 1 "$(up_count '.path == $p and .sni == "up.test"' --arg p "/$m-2")" \
    "requests upstream for https://up.test"
  assert_eq 200 "$(in_code net-curl "http://up.test:$UP_HTTP/$m-3" --noproxy '*')" \
    "http://up.test past the proxy"
  assert_eq 1 "$(up_count '.path == $p and .local == $l' --arg p "/$m-3" \
    --arg l "$HOST_IP:$UP_HTTP")" "requests upstream for http://up.test past the proxy"
  assert_eq 200 "$(in_code net-curl "https://up.test:$UP_HTTPS/$m-4" --noproxy '*')" \
    "https://up.test past the proxy"
  assert_eq 1 "$(up_count '.path == $p and .sni == "up.test"' --arg p "/$m-4")" \
    "requests upstream for https://up.test past the proxy"
  # Case and a trailing dot do not make another name.
  assert_eq 200 "$(in_code net-curl "http://UP.Test.:$UP_HTTP/$m-5")" "http://UP.Test."

  # denied.test is on the same address, which the IP rule allows: the
  # name denies it, whichever way it is asked for.
  assert_denied_code "$(in_code net-curl "http://denied.test:$UP_HTTP/$m-d1")" \
    "http://denied.test through the proxy"
  assert_denied_code "$(in_code net-curl "https://denied.test:$UP_HTTPS/$m-d2")" \
    "https://denied.test through the proxy"
  assert_denied_code "$(in_code net-curl "http://denied.test:$UP_HTTP/$m-d3" --noproxy '*')" \
    "http://denied.test past the proxy"
  assert_denied_code "$(in_code net-curl "http://denied.test:$UP_HTTP/$m-d4" --noproxy '*' \
    --resolve "denied.test:$UP_HTTP:$HOST_IP")" \
    "http://denied.test past the proxy and past DNS (Host: denied.test)"
  assert_denied_code "$(in_code net-curl "https://denied.test:$UP_HTTPS/$m-d5" --noproxy '*' \
    --resolve "denied.test:$UP_HTTPS:$HOST_IP")" \
    "https://denied.test past the proxy and past DNS (SNI denied.test)"
  assert_denied_code "$(in_code net-curl "http://$HOST_IP:$UP_HTTP/$m-d6" --noproxy '*' \
    -H "Host: denied.test:$UP_HTTP")" "a request to the allowed IP with Host: denied.test"
  assert_upstream_never '.path | startswith($p)' "a request to denied.test" \
    --arg p "/$m-d"
  assert_upstream_never '.host // "" | ascii_downcase | startswith("denied.test")' \
    "a request with Host: denied.test"

  # A rule with a port allows that port only.
  net_sandbox net-curl-port
  rule allow --sandbox net-curl-port "up.test:$UP_HTTPS"
  rule allow --sandbox net-curl-port "$HOST_IP"
  assert_eq 200 "$(in_code net-curl-port "https://up.test:$UP_HTTPS/$m-p1")" \
    "https://up.test:$UP_HTTPS with a rule for that port"
  assert_denied_code "$(in_code net-curl-port "http://up.test:$UP_HTTP/$m-p2")" \
    "http://up.test:$UP_HTTP with a rule for port $UP_HTTPS only"
  assert_upstream_never '.path == $p' "the request to another port" --arg p "/$m-p2"
  assert_eq 0 "$(check_rc --sandbox net-curl-port "up.test:$UP_HTTPS")" \
    "policy check up.test:$UP_HTTPS"
  assert_eq 1 "$(check_rc --sandbox net-curl-port "up.test:$UP_HTTP")" \
    "policy check up.test:$UP_HTTP"
}

# Node's fetch ignores the proxy variables: it resolves the name through
# warren's DNS and connects itself, and the namespace hands the
# connection to the proxy, which checks the TLS SNI and the address.
test_node_fetch_ignores_proxy() {
  local m out
  up_start
  set_preset balanced
  net_sandbox net-node
  m=$(mk)
  rule allow --sandbox net-node up.test
  # The name alone is not enough: its address is the host's own.
  out=$(node_fetch net-node "https://up.test:$UP_HTTPS/$m-1")
  assert_contains "$out" "error" "fetch of up.test without a rule for its address"
  assert_upstream_never '.path == $p' "fetch without a rule for the address" \
    --arg p "/$m-1"

  rule allow --sandbox net-node "$HOST_IP"
  out=$(node_fetch net-node "https://up.test:$UP_HTTPS/$m-2" \
    -e NODE_EXTRA_CA_CERTS=/tmp/node-ca.pem)
  assert_eq "status 200" "$out" "fetch https://up.test"
  assert_eq 1 "$(up_count '.path == $p and .sni == "up.test" and .local == $l' \
    --arg p "/$m-2" --arg l "$HOST_IP:$UP_HTTPS")" "requests upstream for the fetch"
  assert_eq "status 200" "$(node_fetch net-node "http://up.test:$UP_HTTP/$m-3")" \
    "fetch http://up.test"
  # With the proxy variables pointing nowhere, fetch works all the same:
  # it never used them, the redirect did the work.
  assert_eq "status 200" "$(node_fetch net-node "https://up.test:$UP_HTTPS/$m-4" \
    -e NODE_EXTRA_CA_CERTS=/tmp/node-ca.pem -e HTTPS_PROXY=http://127.0.0.1:9 \
    -e HTTP_PROXY=http://127.0.0.1:9)" "fetch with bogus proxy variables"
  wait_log net-node '.kind == "tcp" and .host == "up.test" and .port == '"$UP_HTTPS"' and .allow' \
    "the redirected fetch"

  out=$(node_fetch net-node "https://denied.test:$UP_HTTPS/$m-d1" \
    -e NODE_EXTRA_CA_CERTS=/tmp/node-ca.pem)
  assert_contains "$out" "error" "fetch https://denied.test"
  out=$(node_fetch net-node "http://denied.test:$UP_HTTP/$m-d2")
  assert_contains "$out" "error" "fetch http://denied.test"
  assert_upstream_never '.path | startswith($p)' "a fetch of denied.test" --arg p "/$m-d"
}

npm_in() { # SANDBOX ARGS...
  local sb=$1
  shift
  "$WARREN" exec --timeout 180 -w /tmp/proj "$sb" -- npm "$@" --no-audit \
    --no-fund --fetch-retries=0 --fetch-timeout=30000 --cache /tmp/npm-cache 2>&1
}

# npm install from a registry (a mock one on the host), over HTTP and
# HTTPS, through the proxy: refused without a rule, installed with one.
test_npm_install_through_proxy() {
  local out
  up_start
  set_preset balanced
  net_sandbox net-npm
  "$WARREN" exec net-npm -- mkdir -p /tmp/proj
  if out=$(npm_in net-npm install --registry "http://reg.test:$UP_REG/" warren-demo-pkg); then
    fail "npm install without a rule worked: $out"
  fi
  assert_upstream_never '.server == "registry"' "npm without a rule"

  rule allow --sandbox net-npm reg.test
  rule allow --sandbox net-npm "$HOST_IP"
  out=$(npm_in net-npm install --registry "http://reg.test:$UP_REG/" warren-demo-pkg) ||
    fail "npm install over http: $out"
  out=$("$WARREN" exec -w /tmp/proj net-npm -- node -e \
    'const m = require("warren-demo-pkg"); console.log(m.name + " " + m.marker)')
  assert_eq "warren-demo-pkg from-mock-registry" "$out" "the installed package"
  [ "$(up_count '.server == "registry" and (.path | endswith("/warren-demo-pkg-1.0.0.tgz")) and (.host | startswith("reg.test"))')" -ge 1 ] ||
    fail "the registry did not serve the tarball to reg.test: $(up_show '.server == "registry"')"

  out=$(npm_in net-npm install --registry "https://reg.test:$UP_REGS/" \
    --cafile /tmp/all-ca.pem @warren/scoped-demo) || fail "npm install over https: $out"
  out=$("$WARREN" exec -w /tmp/proj net-npm -- node -e \
    'console.log(require("@warren/scoped-demo").marker)')
  assert_eq from-mock-registry "$out" "the package installed over https"
  [ "$(up_count '.server == "registry_tls" and .sni == "reg.test"')" -ge 2 ] ||
    fail "the TLS registry saw no packument and tarball requests"
}

# ---- raw TCP, DNS -----------------------------------------------------------------

# A plain TCP connection to an IP:port (no TLS, no HTTP) is redirected to
# the proxy and decided by the address and port alone.
test_raw_tcp_by_ip_port() {
  local m out
  up_start
  set_preset balanced
  net_sandbox net-raw
  m=$(mk)
  out=$(probe net-raw tcp "$HOST_IP" "$UP_ECHO" --send "$m-1") &&
    fail "raw TCP to $HOST_IP:$UP_ECHO without a rule: $out"
  assert_contains "$out" "fail" "raw TCP without a rule"
  rule allow --sandbox net-raw "$HOST_IP:$UP_BANNER"
  out=$(probe net-raw tcp "$HOST_IP" "$UP_ECHO" --send "$m-2") &&
    fail "raw TCP to $HOST_IP:$UP_ECHO with a rule for port $UP_BANNER: $out"
  assert_upstream_never '.server == "echo"' "raw TCP without a rule for the port"
  wait_log net-raw '.kind == "tcp" and .addr == "'"$HOST_IP"'" and .port == '"$UP_ECHO"' and (.allow | not)' \
    "the refused connection"

  rule allow --sandbox net-raw "$HOST_IP:$UP_ECHO"
  out=$(probe net-raw tcp "$HOST_IP" "$UP_ECHO" --send "$m-3") ||
    fail "raw TCP with a rule: $out"
  wait_until 5 up_has '.server == "echo" and .event == "close" and .data == $d and .local == $l' \
    --arg d "$m-3" --arg l "$HOST_IP:$UP_ECHO" ||
    fail "the echo server did not see $m-3: $(up_show '.server == "echo"')"
  wait_log net-raw '.kind == "tcp" and .addr == "'"$HOST_IP"'" and .port == '"$UP_ECHO"' and .allow and .bytes_up > 0 and .bytes_down > 0' \
    "the allowed connection"
  # The same through CONNECT, for proxy-aware programs.
  out=$(probe net-raw tcp "$HOST_IP" "$UP_ECHO" --proxy 127.0.0.1:3128 --send "$m-4") ||
    fail "CONNECT $HOST_IP:$UP_ECHO: $out"
  # A protocol where the server speaks first (SMTP, MySQL, ...) works too.
  out=$(probe net-raw tcp "$HOST_IP" "$UP_BANNER" --read-first --send x --timeout 15) ||
    fail "a server-speaks-first connection: $out"
  assert_line "$out" "banner 220 warren-banner" "what the banner server said"
  if [ -n "$HOST_IP6" ]; then
    out=$(probe net-raw tcp "$HOST_IP6" "$UP_ECHO" --send "$m-5") &&
      fail "raw TCP to [$HOST_IP6]:$UP_ECHO without a rule: $out"
    rule allow --sandbox net-raw "[$HOST_IP6]:$UP_ECHO"
    out=$(probe net-raw tcp "$HOST_IP6" "$UP_ECHO" --send "$m-6") ||
      fail "raw TCP to [$HOST_IP6]:$UP_ECHO with a rule: $out"
  fi
}

# warren's DNS answers allowed names with their addresses, refuses denied
# ones (REFUSED, so getaddrinfo fails), logs both, and survives garbage.
test_dns_answers_and_refusals() {
  local out
  need_host_ip
  set_preset balanced
  net_sandbox net-dns
  rule allow --sandbox net-dns up.test
  rule allow --sandbox net-dns "$HOST_IP"

  assert_eq "$HOST_IP" "$(probe net-dns resolve up.test --family 4)" "getaddrinfo up.test"
  out=$(probe net-dns resolve denied.test) && fail "getaddrinfo denied.test: $out"
  assert_contains "$out" "error gaierror" "getaddrinfo denied.test"
  out=$(probe net-dns dns up.test)
  assert_line "$out" "rcode 0" "A up.test"
  assert_line "$out" "answer $HOST_IP" "A up.test"
  out=$(probe net-dns dns denied.test)
  assert_line "$out" "rcode 5" "A denied.test (REFUSED)"
  assert_not_contains "$out" "answer" "A denied.test"
  out=$(probe net-dns dns denied.test --type AAAA)
  assert_line "$out" "rcode 5" "AAAA denied.test (REFUSED)"
  # An allowed name with no IPv6 address: no AAAA answer, no error.
  out=$(probe net-dns dns up.test --type AAAA)
  assert_line "$out" "rcode 0" "AAAA up.test"
  assert_not_contains "$out" "answer" "AAAA up.test"
  # (DNS decides by the name alone and answers with the real addresses,
  # loopback ones included: the proxy checks every address before it
  # dials, and 127/8 inside is the sandbox's own. test_rebinding_denied.)
  wait_log net-dns '.kind == "dns" and .host == "denied.test" and (.allow | not)' \
    "the refused lookup"
  wait_log net-dns '.kind == "dns" and .host == "up.test" and .allow' "the answered lookup"

  if [ -n "$HOST_IP6" ]; then
    rule allow --sandbox net-dns dual.test
    rule allow --sandbox net-dns "$HOST_IP6"
    out=$(probe net-dns dns dual.test --type AAAA)
    assert_line "$out" "rcode 0" "AAAA dual.test"
    assert_line "$out" "answer $HOST_IP6" "AAAA dual.test"
    assert_eq "$HOST_IP6" "$(probe net-dns resolve dual.test --family 6)" \
      "getaddrinfo AF_INET6 dual.test"
    out=$(probe net-dns dns dual.test)
    assert_line "$out" "answer $HOST_IP" "A dual.test"
  fi

  # Garbage, then a real question: still answered.
  "$WARREN" exec -i net-dns -- python3 - <<'EOF'
import os, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for n in (0, 1, 5, 12, 13, 100, 511, 512, 513, 4096, 65000):
    try:
        s.sendto(os.urandom(n), ("127.0.0.1", 53))
    except OSError:
        pass
# A header that claims 65535 questions, and a compression loop.
s.sendto(b"\x12\x34\x01\x00\xff\xff\x00\x00\x00\x00\x00\x00\xc0\x0c\x00\x01\x00\x01",
         ("127.0.0.1", 53))
EOF
  out=$(probe net-dns dns up.test)
  assert_line "$out" "rcode 0" "A up.test after garbage"
  assert_daemon_alive
  # (Other DNS servers: test_udp_and_icmp_blocked.)
}

# ---- addresses that are never reached by a name -----------------------------------

flip_is_loopback() {
  "$WARREN" policy check network --sandbox net-rebind flip.test --json |
    jq -e '[.addresses[]?.addr] | index("127.0.0.1")' >/dev/null
}

# DNS rebinding: an allowed name that resolves to 127.0.0.1 (at once, or
# later) is denied, and nothing on the host's loopback is reached. An
# address that an IP rule names is reachable: that is how a loopback
# upstream is allowed on purpose.
test_rebinding_denied() {
  local m out orig
  up_start
  set_preset balanced
  net_sandbox net-rebind
  m=$(mk)
  rule allow --sandbox net-rebind rebind.test
  assert_denied_code "$(in_code net-rebind "http://rebind.test:$UP_HTTP/$m-1")" \
    "http://rebind.test (127.0.0.1) through the proxy"
  assert_denied_code "$(in_code net-rebind "https://rebind.test:$UP_HTTPS/$m-2")" \
    "https://rebind.test (127.0.0.1) through the proxy"
  assert_denied_code "$(in_code net-rebind "http://rebind.test:$UP_HTTP/$m-3" --noproxy '*')" \
    "http://rebind.test past the proxy"
  out=$(check_json --sandbox net-rebind "rebind.test:$UP_HTTP")
  assert_eq false "$(json_get "$out" .allow)" "policy check rebind.test ($out)"
  assert_eq 127.0.0.1 "$(json_get "$out" '.addresses[0].addr')" "checked address ($out)"
  assert_eq false "$(json_get "$out" '.addresses[0].allow')" "127.0.0.1 allowed? ($out)"
  assert_contains "$(json_get "$out" '.addresses[0].reason')" loopback "why ($out)"
  wait_log net-rebind '.host == "rebind.test" and (.allow | not) and ((.reason // "") | test("loopback"))' \
    "the rebinding attempt"

  # Every address of a name must pass.
  rule allow --sandbox net-rebind mixed.test
  rule allow --sandbox net-rebind "$HOST_IP"
  assert_denied_code "$(in_code net-rebind "http://mixed.test:$UP_HTTP/$m-4")" \
    "mixed.test ($HOST_IP and 127.0.0.1)"
  out=$(check_json --sandbox net-rebind mixed.test)
  assert_eq false "$(json_get "$out" .allow)" "policy check mixed.test ($out)"
  assert_eq "$HOST_IP true,127.0.0.1 false" \
    "$(json_get "$out" '[.addresses[] | "\(.addr) \(.allow)"] | sort_by(. | startswith("127")) | join(",")')" \
    "the addresses of mixed.test ($out)"

  # A loopback upstream named by an IP rule.
  rule allow --sandbox net-rebind other.test
  rule allow --sandbox net-rebind 127.0.0.2
  assert_eq 200 "$(in_code net-rebind "http://other.test:$UP_HTTP/$m-5")" \
    "other.test (127.0.0.2, allowed by an IP rule)"
  assert_eq 1 "$(up_count '.path == $p and .local == $l' --arg p "/$m-5" \
    --arg l "127.0.0.2:$UP_HTTP")" "requests at 127.0.0.2"

  # Rebinding over time: flip.test moves from the host's address to
  # 127.0.0.1 after it was allowed and used.
  rule allow --sandbox net-rebind flip.test
  assert_eq 200 "$(in_code net-rebind "http://flip.test:$UP_HTTP/$m-6")" \
    "flip.test before it moved"
  orig=$UP_DIR/hosts.orig
  cp "$NET_HOSTS" "$orig"
  on_exit "cat '$orig' >'$NET_HOSTS'"
  { sed 's/ flip\.test//' "$orig"; echo "127.0.0.1 flip.test"; } >"$UP_DIR/hosts.new"
  cat "$UP_DIR/hosts.new" >"$NET_HOSTS" # in place: same file, new contents
  wait_until 15 flip_is_loopback ||
    fail "the daemon did not re-read $NET_HOSTS: $(check_json --sandbox net-rebind flip.test)"
  assert_denied_code "$(in_code net-rebind "http://flip.test:$UP_HTTP/$m-7")" \
    "flip.test once it moved to 127.0.0.1"
  assert_denied_code "$(in_code net-rebind "http://flip.test:$UP_HTTP/$m-8" --noproxy '*')" \
    "flip.test once it moved, past the proxy"

  assert_upstream_never '.local | startswith("127.0.0.1:") or startswith("[::1]:")' \
    "a connection to the host's 127.0.0.1 or ::1"
  assert_upstream_never '(.path // "") | test($r)' "a request of a rebound name" \
    --arg r "^/$m-(1|2|3|4|7|8)$"
}

# 169.254.169.254 (and the other clouds' metadata addresses) is denied
# even under the open preset and when a name points at it; the log says
# why.
test_metadata_address_denied() {
  local out a
  need_host_ip
  set_preset open
  net_sandbox net-meta
  assert_denied_code "$(in_code net-meta "http://169.254.169.254/latest/meta-data/")" \
    "the metadata address through the proxy"
  assert_denied_code "$(in_code net-meta "http://169.254.169.254/latest/meta-data/" \
    --noproxy '*')" "the metadata address past the proxy"
  rule allow --sandbox net-meta meta.test
  assert_denied_code "$(in_code net-meta "http://meta.test/latest/meta-data/")" \
    "meta.test (on 169.254.169.254)"
  out=$(check_json --sandbox net-meta 169.254.169.254:80)
  assert_eq false "$(json_get "$out" .allow)" "policy check 169.254.169.254 ($out)"
  assert_contains "$out" metadata "policy check 169.254.169.254"
  for a in 169.254.169.254 0xa9fea9fe 2852039166 0251.0376.0251.0376 \
    "[::ffff:169.254.169.254]" 100.100.100.200 "[fd00:ec2::254]" meta.test; do
    assert_eq 1 "$(check_rc --sandbox net-meta "$a")" "policy check $a"
  done
  wait_log net-meta '.addr == "169.254.169.254" and (.allow | not) and ((.reason // "") | test("metadata"; "i"))' \
    "the metadata address"
}

# IP literals in every spelling a resolver or browser accepts are one
# address: the loopback ones are always denied, through the proxy and past
# it, and nothing on the host's loopback sees a request; the host's own
# address is denied in every spelling, then allowed in every spelling by
# one IP rule.
test_ip_literal_encodings() {
  local m out e i code encs v4encs
  up_start
  set_preset open
  net_sandbox net-ipenc
  m=$(mk)
  i=0
  for e in 127.0.0.1 0x7f000001 2130706433 017700000001 0177.0.0.1 0x7f.0.0.1 \
    127.1 127.0.1 0x7f.1 "[::1]" "[::ffff:127.0.0.1]" "[::ffff:7f00:1]" \
    "[0:0:0:0:0:ffff:7f00:1]" "[::127.0.0.1]" "[64:ff9b::7f00:1]"; do
    i=$((i + 1))
    out=$(probe net-ipenc raw 127.0.0.1 3128 --wait 5 --data \
      "GET http://$e:$UP_HTTP/$m-a$i HTTP/1.1\r\nHost: $e:$UP_HTTP\r\nConnection: close\r\n\r\n")
    assert_not_contains "$(head -1 <<<"$out")" " 200 " "GET http://$e:$UP_HTTP/ through the proxy"
    out=$(probe net-ipenc raw 127.0.0.1 3128 --wait 5 --data \
      "CONNECT $e:$UP_ECHO HTTP/1.1\r\nHost: $e:$UP_ECHO\r\n\r\nhello")
    assert_not_contains "$(head -1 <<<"$out")" " 200 " "CONNECT $e:$UP_ECHO"
    out=$(check_json --sandbox net-ipenc "$e:$UP_HTTP")
    assert_eq false "$(json_get "$out" .allow)" "policy check $e ($out)"
    assert_contains "$out" loopback "policy check $e"
  done
  for e in 0x7f000001 2130706433 017700000001 127.1 "[::1]" "[::ffff:127.0.0.1]"; do
    code=$(in_code net-ipenc "http://$e:$UP_HTTP/$m-c" -g)
    assert_denied_code "$code" "curl http://$e through the proxy"
    code=$(in_code net-ipenc "http://$e:$UP_HTTP/$m-c" -g --noproxy '*')
    assert_denied_code "$code" "curl http://$e past the proxy"
  done
  assert_upstream_never '.local | startswith("127.0.0.1:") or startswith("[::1]:")' \
    "a loopback literal"

  # The host's own address, spelt every way.
  encs=$(python3 - "$HOST_IP" <<'EOF'
import ipaddress, sys
a = ipaddress.IPv4Address(sys.argv[1]); n = int(a); b = a.packed
print(a); print(n); print(hex(n)); print(".".join("0%o" % x for x in b))
print(".".join("0x%x" % x for x in b)); print("%d.%d" % (b[0], n & 0xffffff))
print("%d.%d.%d" % (b[0], b[1], n & 0xffff)); print("[::ffff:%s]" % a)
EOF
  )
  i=0
  for e in $encs; do
    i=$((i + 1))
    out=$(probe net-ipenc raw 127.0.0.1 3128 --wait 5 --data \
      "GET http://$e:$UP_HTTP/$m-h$i HTTP/1.1\r\nHost: $e:$UP_HTTP\r\nConnection: close\r\n\r\n")
    assert_not_contains "$(head -1 <<<"$out")" " 200 " "http://$e without a rule"
    out=$(check_json --sandbox net-ipenc "$e:$UP_HTTP")
    assert_eq false "$(json_get "$out" .allow)" "policy check $e without a rule ($out)"
  done
  assert_upstream_never '.path | startswith($p)' "the host's address without a rule" \
    --arg p "/$m-h"
  rule allow --sandbox net-ipenc "$HOST_IP:$UP_HTTP"
  i=0
  # (The IPv4-mapped IPv6 form is left out here: an IPv4 rule need not
  # match an IPv6 address; above, it must not get through unasked.)
  mapfile -t v4encs < <(grep -v '^\[' <<<"$encs")
  for e in "${v4encs[@]}"; do
    i=$((i + 1))
    out=$(probe net-ipenc raw 127.0.0.1 3128 --wait 5 --data \
      "GET http://$e:$UP_HTTP/$m-r$i HTTP/1.1\r\nHost: $e:$UP_HTTP\r\nConnection: close\r\n\r\n")
    assert_contains "$(head -1 <<<"$out")" " 200 " "http://$e with a rule for $HOST_IP:$UP_HTTP"
    assert_eq 1 "$(up_count '.path == $p and .local == $l' --arg p "/$m-r$i" \
      --arg l "$HOST_IP:$UP_HTTP")" "requests upstream for http://$e"
    out=$(check_json --sandbox net-ipenc "$e:$UP_HTTP")
    assert_eq true "$(json_get "$out" .allow)" "policy check $e with the rule ($out)"
  done
}

# ---- mismatches and smuggling -----------------------------------------------------

# What the proxy dials is the address of the name it checked: TLS SNI or
# a Host header naming an allowed host does not carry a connection to
# another address, and a CONNECT to an allowed name is not redirected by
# the SNI inside.
test_sni_and_host_mismatch() {
  local m out
  up_start
  set_preset balanced
  net_sandbox net-sni
  m=$(mk)
  rule allow --sandbox net-sni other.test
  rule allow --sandbox net-sni 127.0.0.2
  # Control: CONNECT other.test with SNI other.test arrives at 127.0.0.2.
  out=$(probe net-sni tls x 0 --proxy 127.0.0.1:3128 --target "other.test:$UP_HTTPS" \
    --sni other.test --cafile /tmp/all-ca.pem \
    --request "GET /$m-ok HTTP/1.1\r\nHost: other.test:$UP_HTTPS\r\nConnection: close\r\n\r\n")
  assert_contains "$out" "HTTP/1.1 200" "the control request ($out)"
  assert_eq 1 "$(up_count '.path == $p and .local == $l' --arg p "/$m-ok" \
    --arg l "127.0.0.2:$UP_HTTPS")" "the control request at 127.0.0.2"

  # Redirected TLS to the host's address (no rule names it) with SNI
  # other.test: it reaches other.test's address or nothing.
  probe net-sni tls "$HOST_IP" "$UP_HTTPS" --sni other.test --cafile /tmp/all-ca.pem \
    --request "GET /$m-a HTTP/1.1\r\nHost: other.test:$UP_HTTPS\r\nConnection: close\r\n\r\n" \
    >/dev/null || true
  # Redirected plain HTTP to the host's address with Host: other.test.
  probe net-sni raw "$HOST_IP" "$UP_HTTP" --wait 5 \
    --data "GET /$m-b HTTP/1.1\r\nHost: other.test:$UP_HTTP\r\nConnection: close\r\n\r\n" \
    >/dev/null || true
  # CONNECT other.test, then SNI up.test (not allowed here; on HOST_IP).
  probe net-sni tls x 0 --proxy 127.0.0.1:3128 --target "other.test:$UP_HTTPS" \
    --sni up.test --cafile /tmp/all-ca.pem \
    --request "GET /$m-c HTTP/1.1\r\nHost: up.test:$UP_HTTPS\r\nConnection: close\r\n\r\n" \
    >/dev/null || true
  if [ -n "$HOST_IP6" ]; then
    # Redirected TLS to the host's IPv6 address with SNI other.test.
    probe net-sni tls "$HOST_IP6" "$UP_HTTPS" --sni other.test --cafile /tmp/all-ca.pem \
      --request "GET /$m-d HTTP/1.1\r\nHost: other.test:$UP_HTTPS\r\nConnection: close\r\n\r\n" \
      >/dev/null || true
  fi
  assert_upstream_never '.local | startswith($a) or startswith($b)' \
    "a connection to an address no rule allows" --arg a "$HOST_IP:" \
    --arg b "[${HOST_IP6:-none}]:"
  assert_upstream_never '((.path // "") | test($r)) and (.local | startswith("127.0.0.2:") | not)' \
    "a mismatched request anywhere but other.test's address" --arg r "^/$m-(a|b|c|d)$"
}

# Requests smuggled past the proxy's policy in every form a proxy and an
# upstream might frame differently never reach an upstream: the upstream
# here is lenient (it prefers chunked, takes the first Content-Length,
# accepts odd header spellings), so any desync shows.
test_smuggling_forms() {
  local out
  up_start
  set_preset balanced
  net_sandbox net-smug
  rule allow --sandbox net-smug up.test
  rule allow --sandbox net-smug "$HOST_IP"
  out=$("$WARREN" exec -i --timeout 180 net-smug -- python3 - "$UP_HTTP" <<'EOF'
import socket, sys
P = int(sys.argv[1])
U = ("up.test:%d" % P).encode()
D = ("denied.test:%d" % P).encode()

def send(name, data, host="127.0.0.1", port=3128, wait=4):
    out = b""
    try:
        s = socket.create_connection((host, port), timeout=wait)
        s.sendall(data)
        while len(out) < 1 << 20:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    codes = [l.split(b" ")[1].decode() for l in out.split(b"\r\n")
             if l.startswith(b"HTTP/1.") and len(l.split(b" ")) > 1]
    print("%s: %s" % (name, " ".join(codes) or "-"), flush=True)

def smug(name):
    return b"GET /smuggled-" + name + b" HTTP/1.1\r\nHost: " + D + b"\r\n\r\n"

def post(name, te_lines, body, cl=None):
    head = b"POST http://" + U + b"/ok HTTP/1.1\r\nHost: " + U + b"\r\n" + te_lines
    head += b"Content-Length: %d\r\n" % (len(body) if cl is None else cl)
    return head + b"\r\n" + body

cases = {}
cases[b"pipelined"] = (b"GET http://" + U + b"/ok HTTP/1.1\r\nHost: " + U + b"\r\n\r\n"
    b"GET http://" + D + b"/smuggled-pipelined HTTP/1.1\r\nHost: " + D +
    b"\r\nConnection: close\r\n\r\n")
cases[b"cl-te"] = post(b"cl-te", b"Transfer-Encoding: chunked\r\n",
                       b"0\r\n\r\n" + smug(b"cl-te"))
for name, te in ((b"te-xchunked", b"Transfer-Encoding: xchunked\r\n"),
                 (b"te-leading-space", b"Transfer-Encoding:  chunked\r\n"),
                 (b"te-tab", b"Transfer-Encoding:\tchunked\r\n"),
                 (b"te-vtab", b"Transfer-Encoding:\x0bchunked\r\n"),
                 (b"te-list", b"Transfer-Encoding: identity, chunked\r\n"),
                 (b"te-chunked-identity", b"Transfer-Encoding: chunked, identity\r\n"),
                 (b"te-caps", b"Transfer-Encoding: CHUNKED\r\n"),
                 (b"te-space-before-colon", b"Transfer-Encoding : chunked\r\n"),
                 (b"te-twice", b"Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n"),
                 (b"te-obs-fold", b"X-A: 1\r\n Transfer-Encoding: chunked\r\n"),
                 (b"te-quoted", b'Transfer-Encoding: "chunked"\r\n')):
    cases[name] = post(name, te, b"0\r\n\r\n" + smug(name))
cases[b"te-cl"] = post(b"te-cl", b"Transfer-Encoding: chunked\r\n",
                       b"%x\r\n" % len(smug(b"te-cl")) + smug(b"te-cl") + b"\r\n0\r\n\r\n", cl=4)
cases[b"dup-cl"] = (b"POST http://" + U + b"/ok HTTP/1.1\r\nHost: " + U +
    b"\r\nContent-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(smug(b"dup-cl")) +
    smug(b"dup-cl"))
cases[b"cl-list"] = (b"POST http://" + U + b"/ok HTTP/1.1\r\nHost: " + U +
    b"\r\nContent-Length: 0, %d\r\n\r\n" % len(smug(b"cl-list")) + smug(b"cl-list"))
cases[b"cl-plus"] = (b"POST http://" + U + b"/ok HTTP/1.1\r\nHost: " + U +
    b"\r\nContent-Length: +%d\r\n\r\n" % len(smug(b"cl-plus")) + smug(b"cl-plus"))
cases[b"userinfo"] = (b"GET http://" + U + b"@" + D + b"/smuggled-userinfo HTTP/1.1\r\n"
    b"Host: " + U + b"\r\nConnection: close\r\n\r\n")
cases[b"host-mismatch"] = (b"GET http://" + U + b"/ok-host-mismatch HTTP/1.1\r\n"
    b"Host: " + D + b"\r\nConnection: close\r\n\r\n")
cases[b"two-hosts"] = (b"GET http://" + U + b"/ok-two-hosts HTTP/1.1\r\n"
    b"Host: " + U + b"\r\nHost: " + D + b"\r\nConnection: close\r\n\r\n")
cases[b"lf-only"] = (b"GET http://" + U + b"/ok HTTP/1.1\nHost: " + U + b"\n\n"
    b"GET http://" + D + b"/smuggled-lf-only HTTP/1.1\nHost: " + D +
    b"\nConnection: close\n\n")
cases[b"nul-in-host"] = (b"GET http://up.test\x00.denied.test:%d/smuggled-nul HTTP/1.1\r\n"
    b"Host: " + U + b"\r\nConnection: close\r\n\r\n") % P
cases[b"connect-denied-then-data"] = (b"CONNECT " + D + b" HTTP/1.1\r\nHost: " + D +
    b"\r\n\r\n" + smug(b"connect-denied"))
cases[b"get-then-connect"] = (b"GET http://" + U + b"/ok HTTP/1.1\r\nHost: " + U +
    b"\r\n\r\nCONNECT " + D + b" HTTP/1.1\r\nHost: " + D + b"\r\n\r\n" +
    smug(b"get-then-connect"))
cases[b"chunk-size-overflow"] = post(b"overflow", b"Transfer-Encoding: chunked\r\n",
    b"ffffffffffffffff1\r\n" + smug(b"overflow") + b"\r\n0\r\n\r\n")
cases[b"upgrade-h2c"] = (b"GET http://" + U + b"/ok HTTP/1.1\r\nHost: " + U +
    b"\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
    b"Connection: Upgrade, HTTP2-Settings\r\n\r\n" + smug(b"h2c"))
cases[b"origin-form"] = smug(b"origin-form")
cases[b"absolute-https-in-plain"] = (b"GET https://denied.test:%d/smuggled-https HTTP/1.1\r\n"
    b"Host: denied.test\r\nConnection: close\r\n\r\n") % P
for name, data in cases.items():
    send(name.decode(), data)
send("after", b"GET http://" + U + b"/after HTTP/1.1\r\nHost: " + U +
     b"\r\nConnection: close\r\n\r\n")
EOF
  ) || fail "the smuggling script failed: $out"
  echo "$out" >&2 # what the proxy answered to each, for the record
  assert_contains "$out" "after: 200" "a plain request after the attempts ($out)"
  assert_upstream_never '(.path // "") | test("smuggled")' "a smuggled request"
  assert_upstream_never '.host // "" | ascii_downcase | startswith("denied.test")' \
    "a request with Host: denied.test"
  assert_upstream_never '[.headers[]? | select(.[0] | ascii_downcase == "host")] | length > 1' \
    "a request with two Host headers"
  [ "$(up_count '.path == "/ok"')" -ge 1 ] ||
    fail "no allowed request reached the upstream: the test proves nothing ($out)"
  assert_daemon_alive
}

# A redirected plain-HTTP connection is checked request by request: once
# the first request (Host: up.test) is let through, a second one on the
# same connection naming denied.test does not reach the upstream.
test_transparent_http_checks_every_request() {
  local out
  up_start
  set_preset balanced
  net_sandbox net-tph
  rule allow --sandbox net-tph up.test
  rule allow --sandbox net-tph "$HOST_IP"
  out=$(probe net-tph raw "$HOST_IP" "$UP_HTTP" --wait 5 --data \
    "GET /ok HTTP/1.1\r\nHost: up.test:$UP_HTTP\r\n\r\nGET /smuggled-transparent HTTP/1.1\r\nHost: denied.test:$UP_HTTP\r\nConnection: close\r\n\r\n")
  assert_contains "$(head -1 <<<"$out")" " 200 " "the first request ($out)"
  assert_eq 1 "$(up_count '.path == "/ok"')" "the allowed request upstream"
  assert_upstream_never '.path == "/smuggled-transparent"' \
    "a second request for denied.test on an allowed connection"
}

# ---- secrets -----------------------------------------------------------------------

# The credential is set by the proxy, on HTTPS to the secret's host only:
# curl, Node (past the proxy) and Python see warren's CA and the upstream
# sees the real value; plain HTTP carries the placeholder; the sandbox's
# files, environment, command lines and memory never hold the value (a
# decoy planted the same way is found, so the search works); neither the
# API, nor warrend's log, nor the policy log shows it.
test_credential_never_in_sandbox() {
  local m out secret decoy
  up_start
  set_preset balanced
  secret=$(random_value wsk)
  set_secret mysvc "$secret" --host api.up.test --header X-Api-Key --env MYSVC_KEY
  out=$("$WARREN" secret ls --json)
  assert_contains "$out" mysvc "secret ls"
  assert_not_contains "$out" "$secret" "secret ls"
  assert_not_contains "$(api GET /v1/secrets)" "$secret" "GET /v1/secrets"
  net_sandbox net-cred
  rule allow --sandbox net-cred api.up.test
  rule allow --sandbox net-cred "$HOST_IP"
  m=$(mk)

  assert_line "$("$WARREN" exec net-cred -- env)" "MYSVC_KEY=$PLACEHOLDER" \
    "the placeholder in the environment"
  # curl through the proxy, trusting only the system bundle.
  out=$("$WARREN" exec net-cred -- sh -c 'curl -sS -m 20 -o /dev/null -w "%{http_code}" \
    -H "X-Api-Key: $MYSVC_KEY" "$0"' "https://api.up.test:$UP_HTTPS/quiet/$m-1") ||
    fail "curl to the secret's host: $out"
  assert_eq 200 "$out" "curl to the secret's host"
  assert_eq "[\"$secret\"]" "$(up_lines '.path == $p' --arg p "/quiet/$m-1" |
    jq -c "$UP_JQ_DEFS"' hdr("x-api-key")')" "X-Api-Key upstream (curl sent the placeholder)"
  # Without a header from the sandbox, it is set all the same.
  assert_eq 200 "$(in_code net-cred "https://api.up.test:$UP_HTTPS/quiet/$m-2")" \
    "curl without the header"
  assert_eq 1 "$(up_count '.path == $p and hdr("x-api-key") == [$s]' \
    --arg p "/quiet/$m-2" --arg s "$secret")" "the credential on a request without one"
  # The sandbox talks TLS with warren's CA, trusted by default.
  out=$(probe net-cred tls x 0 --proxy 127.0.0.1:3128 --target "api.up.test:$UP_HTTPS" \
    --sni api.up.test) || fail "TLS to the secret's host with the default trust: $out"
  # warren's CA is the first certificate of warren-ca.crt (the host's
  # added CAs follow it).
  "$WARREN" exec net-cred -- sh -c 'sed "/-----END CERTIFICATE-----/q" \
    /usr/local/share/ca-certificates/warren-ca.crt >/tmp/warren-only.pem'
  assert_line "$out" "issuer $(probe net-cred cert-cn /tmp/warren-only.pem)" \
    "the certificate the sandbox sees"
  # Node's fetch past the proxy, with the default NODE_EXTRA_CA_CERTS.
  assert_eq "status 200" "$(node_fetch net-cred "https://api.up.test:$UP_HTTPS/quiet/$m-3")" \
    "fetch of the secret's host"
  assert_eq 1 "$(up_count '.path == $p and hdr("x-api-key") == [$s]' \
    --arg p "/quiet/$m-3" --arg s "$secret")" "the credential on Node's fetch"
  # Python's urllib through the proxy, with SSL_CERT_FILE.
  out=$("$WARREN" exec net-cred -- python3 -c 'import os, sys, urllib.request
r = urllib.request.Request(sys.argv[1], headers={"X-Api-Key": os.environ["MYSVC_KEY"]})
print(urllib.request.urlopen(r, timeout=20).status)' "https://api.up.test:$UP_HTTPS/quiet/$m-4")
  assert_eq 200 "$out" "urllib to the secret's host"
  assert_eq 1 "$(up_count '.path == $p and hdr("x-api-key") == [$s]' \
    --arg p "/quiet/$m-4" --arg s "$secret")" "the credential on urllib's request"
  # Plain HTTP to the secret's host never carries it.
  assert_eq 200 "$(in_code net-cred "http://api.up.test:$UP_HTTP/quiet/$m-5" \
    -H "X-Api-Key: $PLACEHOLDER")" "plain http to the secret's host"
  assert_eq "[\"$PLACEHOLDER\"]" "$(up_lines '.path == $p' --arg p "/quiet/$m-5" |
    jq -c "$UP_JQ_DEFS"' hdr("x-api-key")')" "X-Api-Key on plain http"
  wait_log net-cred '.host == "api.up.test" and .port == '"$UP_HTTPS"' and .intercepted and .allow' \
    "the intercepted connection"

  # A process that used the secret's host stays for the memory search.
  "$WARREN" exec -d --tag holder net-cred -- python3 -c 'import os, sys, time, urllib.request
r = urllib.request.Request(sys.argv[1], headers={"X-Api-Key": os.environ["MYSVC_KEY"]})
body = urllib.request.urlopen(r, timeout=20).read()
time.sleep(600)' "https://api.up.test:$UP_HTTPS/quiet/$m-6" >/dev/null
  wait_until 20 up_has '.path == $p' --arg p "/quiet/$m-6" ||
    fail "the holder's request did not arrive"
  # The control: a decoy in a file, an environment and a process's memory.
  decoy=$(random_value wdk)
  "$WARREN" exec -i net-cred -- sh -c 'cat >/tmp/decoy.txt' <<<"$decoy"
  "$WARREN" exec -d --tag decoy -e "DECOY=$decoy" net-cred -- sleep 600 >/dev/null
  out=$(scan_for net-cred "$decoy")
  assert_contains "$out" "found file /tmp/decoy.txt" "the decoy search ($out)"
  assert_contains "$out" "found environ of pid" "the decoy search ($out)"
  assert_contains "$out" "found memory of pid" "the decoy search ($out)"

  out=$(scan_for net-cred "$secret")
  assert_not_contains "$out" "found" "the search for the credential inside"
  [[ "$out" =~ scanned\ ([0-9]+)\ files\ [0-9]+\ bytes\ ([0-9]+)\ processes ]] ||
    fail "no scan summary: $out"
  [ "${BASH_REMATCH[1]}" -gt 1000 ] || fail "the search saw too few files: $out"
  [ "${BASH_REMATCH[2]}" -ge 3 ] || fail "the search saw too few processes: $out"
  assert_not_contains "$("$WARREN" exec net-cred -- env)" "$secret" "env inside"
  assert_not_contains "$(sb_json net-cred)" "$secret" "inspect"
  assert_not_contains "$("$WARREN" policy log --json --limit 1000)" "$secret" "the policy log"
  assert_eq 0 "$(grep -c -F -- "$secret" "$WR_LOG" || true)" "lines of warrend's log with the credential"

  # Once the secret is gone, the placeholder goes through untouched.
  "$WARREN" secret rm mysvc >/dev/null
  assert_eq 200 "$(in_code net-cred "https://api.up.test:$UP_HTTPS/quiet/$m-7" \
    -H "X-Api-Key: $PLACEHOLDER")" "https to the host after secret rm"
  assert_eq "[\"$PLACEHOLDER\"]" "$(up_lines '.path == $p' --arg p "/quiet/$m-7" |
    jq -c "$UP_JQ_DEFS"' hdr("x-api-key")')" "X-Api-Key after secret rm"
}

# A redirect from the secret's host to another host, or to plain HTTP,
# does not take the credential along (curl, Node).
test_redirect_carries_no_credential() {
  local m secret out
  up_start
  set_preset balanced
  secret=$(random_value wsk)
  set_secret mysvc "$secret" --host api.up.test --header X-Api-Key --env MYSVC_KEY
  net_sandbox net-redir
  for r in api.up.test up.test other.test "$HOST_IP" 127.0.0.2; do
    rule allow --sandbox net-redir "$r"
  done
  m=$(mk)
  out=$("$WARREN" exec net-redir -- sh -c 'curl -sS -m 20 -L --cacert /tmp/all-ca.pem \
    -o /dev/null -w "%{http_code} %{num_redirects}" -H "X-Api-Key: $MYSVC_KEY" "$0"' \
    "https://api.up.test:$UP_HTTPS/redirect?to=https://other.test:$UP_HTTPS/quiet/$m-1")
  assert_eq "200 1" "$out" "curl -L to other.test"
  assert_eq 1 "$(up_count '.path == "/redirect" and .sni == "api.up.test" and hdr("x-api-key") == [$s]' \
    --arg s "$secret")" "the first request (to the secret's host)"
  assert_eq 1 "$(up_count '.path == $p and .sni == "other.test"' --arg p "/quiet/$m-1")" \
    "the redirected request"
  assert_upstream_never '(.path // "") != "/redirect" and (hdr("x-api-key") | any(. == $s))' \
    "the credential on a request to another host" --arg s "$secret"

  # To the same host over plain http.
  out=$("$WARREN" exec net-redir -- sh -c 'curl -sS -m 20 -L --cacert /tmp/all-ca.pem \
    -o /dev/null -w "%{http_code}" -H "X-Api-Key: $MYSVC_KEY" "$0"' \
    "https://api.up.test:$UP_HTTPS/redirect?to=http://api.up.test:$UP_HTTP/quiet/$m-2")
  assert_eq 200 "$out" "curl -L to plain http"
  assert_eq 1 "$(up_count '.path == $p and (hdr("x-api-key") | any(. == $s) | not)' \
    --arg p "/quiet/$m-2" --arg s "$secret")" "the request after the redirect to http"

  # A 307 keeps the method and body: still no credential on the new host.
  out=$("$WARREN" exec net-redir -- sh -c 'curl -sS -m 20 -L --cacert /tmp/all-ca.pem \
    -o /dev/null -w "%{http_code}" -H "X-Api-Key: $MYSVC_KEY" -d payload "$0"' \
    "https://api.up.test:$UP_HTTPS/redirect?code=307&to=https://other.test:$UP_HTTPS/quiet/$m-3")
  assert_eq 200 "$out" "curl -L after a 307"
  assert_eq 1 "$(up_count '.path == $p and .method == "POST"' --arg p "/quiet/$m-3")" \
    "the POST after a 307"

  # Node's fetch follows redirects itself, past the proxy.
  assert_eq "status 200" "$(node_fetch net-redir \
    "https://api.up.test:$UP_HTTPS/redirect?to=https://up.test:$UP_HTTPS/quiet/$m-4" \
    -e NODE_EXTRA_CA_CERTS=/tmp/node-ca.pem)" "fetch following a redirect to up.test"
  assert_eq 1 "$(up_count '.path == $p and .sni == "up.test"' --arg p "/quiet/$m-4")" \
    "fetch's redirected request"
  assert_upstream_never '(.path // "") != "/redirect" and (hdr("x-api-key") | any(. == $s))' \
    "the credential on a request to another host" --arg s "$secret"
}

# The credential goes only with requests for the secret's host: a
# request inside an intercepted connection that names another host does
# not get it.
# A secret's variables cannot take the names warren sets in every process.
test_secret_env_cannot_take_warren_variables() {
  local out v
  for v in HTTPS_PROXY no_proxy NODE_EXTRA_CA_CERTS PATH HOME; do
    out=$(printf x | must_fail "$WARREN" secret set envsvc \
      --host api.up.test --header X-Api-Key --env "$v")
    assert_contains "$out" "\`$v\` is set by warren itself" "--env $v"
  done
  assert_not_contains "$("$WARREN" secret ls)" envsvc "secret ls"
}

test_secret_not_sent_on_host_mismatch() {
  local m secret
  up_start
  set_preset balanced
  secret=$(random_value wsk)
  set_secret mysvc "$secret" --host api.up.test --header X-Api-Key --env MYSVC_KEY
  net_sandbox net-mism
  for r in api.up.test other.test up.test "$HOST_IP" 127.0.0.2; do
    rule allow --sandbox net-mism "$r"
  done
  m=$(mk)
  # CONNECT api.up.test, SNI api.up.test, then Host: other.test.
  probe net-mism tls x 0 --proxy 127.0.0.1:3128 --target "api.up.test:$UP_HTTPS" \
    --sni api.up.test --request "GET /quiet/$m-1 HTTP/1.1\r\nHost: other.test:$UP_HTTPS\r\nConnection: close\r\n\r\n" \
    >/dev/null || true
  # Redirected TLS to api.up.test's address with SNI api.up.test, Host: up.test.
  probe net-mism tls "$HOST_IP" "$UP_HTTPS" --sni api.up.test \
    --request "GET /quiet/$m-2 HTTP/1.1\r\nHost: up.test:$UP_HTTPS\r\nConnection: close\r\n\r\n" \
    >/dev/null || true
  # Two requests on one intercepted connection: the second names another host.
  probe net-mism tls x 0 --proxy 127.0.0.1:3128 --target "api.up.test:$UP_HTTPS" \
    --sni api.up.test --request "GET /quiet/$m-3 HTTP/1.1\r\nHost: api.up.test:$UP_HTTPS\r\n\r\nGET /quiet/$m-4 HTTP/1.1\r\nHost: up.test:$UP_HTTPS\r\nConnection: close\r\n\r\n" \
    >/dev/null || true
  assert_eq 1 "$(up_count '.path == $p and hdr("x-api-key") == [$s]' \
    --arg p "/quiet/$m-3" --arg s "$secret")" \
    "the credential on the request for api.up.test (the control)"
  assert_upstream_never '(hdr("x-api-key") | any(. == $s)) and ((.host // "") | ascii_downcase | startswith("api.up.test") | not)' \
    "the credential with a Host other than api.up.test" --arg s "$secret"
}

# ---- UDP, ICMP ---------------------------------------------------------------------

# No UDP but DNS to warren, and no ICMP, leaves the sandbox, whatever the
# policy allows for TCP; UDP on the sandbox's own loopback works.
test_udp_and_icmp_blocked() {
  local out dns_dir dns_pid
  up_start
  set_preset open
  net_sandbox net-udp
  rule allow --sandbox net-udp "$HOST_IP"
  if [ -n "$HOST_IP6" ]; then
    rule allow --sandbox net-udp "$HOST_IP6"
  fi
  # Control: the host reaches the UDP listener.
  python3 -c 'import socket, sys
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"control", (sys.argv[1], int(sys.argv[2])))' \
    "$HOST_IP" "$UP_UDP"
  wait_until 5 up_has '.server == "udp" and .data == "control"' ||
    fail "the UDP listener does not work: $(cat "$UP_DIR/out")"

  probe net-udp udp "$HOST_IP" "$UP_UDP" --count 5
  if [ -n "$HOST_IP6" ]; then
    probe net-udp udp "$HOST_IP6" "$UP_UDP" --count 5
  fi
  probe net-udp udp 169.254.169.254 "$UP_UDP" --count 2

  # DNS to another server does not leave either (a listener on the host's
  # port 53 records it), unless that port is taken on this host.
  dns_dir=$UP_DIR/dns53
  mkdir -p "$dns_dir"
  python3 "$NET_TOOLS/upstreams.py" --addr "$HOST_IP" --services udp --port udp=53 \
    --log "$dns_dir/log" --ready "$dns_dir/ready" >"$dns_dir/out" 2>&1 &
  dns_pid=$!
  on_exit "kill $dns_pid 2>/dev/null"
  if wait_until 5 test -s "$dns_dir/ready"; then
    python3 -c 'import socket, sys
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"control", (sys.argv[1], 53))' "$HOST_IP"
    wait_until 5 grep -q control "$dns_dir/log" || fail "the port 53 listener does not work"
    probe net-udp dns up.test --server "$HOST_IP" --timeout 2 >/dev/null || true
  else
    echo "note: $HOST_IP:53 is taken on this host; DNS to another server not checked" >&2
  fi

  sleep 1
  assert_eq 1 "$(up_count '.server == "udp"')" \
    "datagrams that reached the upstream (1: the host's own)"
  if [ -s "$dns_dir/ready" ]; then
    assert_eq 1 "$(grep -c . "$dns_dir/log")" \
      "datagrams that reached $HOST_IP:53 (1: the host's own)"
  fi

  out=$("$WARREN" exec net-udp -- python3 -c 'import socket
a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); a.bind(("127.0.0.1", 5599))
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); b.sendto(b"lo", ("127.0.0.1", 5599))
a.settimeout(3); print(a.recv(10).decode())')
  assert_eq lo "$out" "UDP on the sandbox's loopback"

  for a in "$HOST_IP" 169.254.169.254 ${HOST_IP6:+"$HOST_IP6"}; do
    out=$(probe net-udp icmp "$a")
    if grep -Eq '^(dgram|raw) reply$' <<<"$out"; then
      fail "an ICMP echo to $a was answered: $out"
    fi
    [ "$(wc -l <<<"$out")" = 2 ] || fail "the ICMP probe of $a did not run: $out"
  done
}

# ---- the policy: log, check, rules, presets, open connections -----------------------

# After a denied and an allowed request (and a lookup, a redirected
# connection), the sandbox's policy log has matching rows: host, port,
# kind, verdict, bytes; --limit and --follow work; another sandbox's log
# does not show them; the API returns the same.
test_policy_log_rows() {
  local id out n follow
  up_start
  set_preset balanced
  net_sandbox net-log
  net_sandbox net-log-other
  id=$(sb_get net-log .id)
  rule allow --sandbox net-log up.test
  rule allow --sandbox net-log "$HOST_IP"
  assert_denied_code "$(in_code net-log "http://denied.test:$UP_HTTP/x")" "denied.test"
  assert_eq 200 "$(in_code net-log "https://up.test:$UP_HTTPS/big?n=200000")" "up.test"
  assert_eq 200 "$(in_code net-log "http://up.test:$UP_HTTP/y" --noproxy '*')" \
    "up.test past the proxy"
  probe net-log resolve denied.test >/dev/null || true

  wait_log net-log '.kind == "http" and .host == "denied.test" and .port == '"$UP_HTTP"' and (.allow | not) and (.reason | length > 0)' \
    "the denied request"
  wait_log net-log '.kind == "connect" and .host == "up.test" and .port == '"$UP_HTTPS"' and .allow and (.intercepted | not) and .addr == "'"$HOST_IP"'" and .bytes_down >= 200000 and .bytes_up > 0' \
    "the allowed CONNECT"
  wait_log net-log '.kind == "tcp" and .port == '"$UP_HTTP"' and .allow and .addr == "'"$HOST_IP"'" and .bytes_down > 0' \
    "the redirected connection"
  wait_log net-log '.kind == "dns" and .host == "denied.test" and (.allow | not)' \
    "the refused lookup"
  out=$("$WARREN" policy log --json --sandbox net-log --limit 1000)
  assert_eq "[\"$id\"]" "$(json_get "$out" '[.entries[].sandbox] | unique | tostring')" \
    "the sandbox of every entry"
  assert_eq true "$(json_get "$out" '[.entries[] | (.id != null) and (.time != null) and (.rule | type == "string" or type == "null")] | all')" \
    "entry fields"
  assert_eq true "$(json_get "$out" '[.entries[] | select(.allow and .kind != "dns") | .rule != null] | all')" \
    "allowed entries name their rule"
  n=$("$WARREN" policy log --json --sandbox net-log --limit 1 | jq '.entries | length')
  assert_eq 1 "$n" "entries with --limit 1"
  out=$("$WARREN" policy log --json --sandbox net-log-other --limit 1000)
  assert_eq 0 "$(json_get "$out" '[.entries[] | select(.host == "denied.test" or .host == "up.test")] | length')" \
    "the other sandbox's log"
  api_call GET "/v1/policy/log?sandbox=$id&limit=1000"
  assert_eq 200 "$API_STATUS" "GET /v1/policy/log"
  assert_eq "[\"$id\"]" "$(json_get "$API_BODY" '[.entries[].sandbox] | unique | tostring')" \
    "GET /v1/policy/log?sandbox="

  # --follow prints what happens next.
  follow=$UP_DIR/follow
  "$WARREN" policy log --follow --json --sandbox net-log >"$follow" 2>&1 &
  n=$!
  on_exit "kill $n 2>/dev/null"
  sleep 1
  in_code net-log "http://other.test:$UP_HTTP/z" >/dev/null
  wait_until 10 grep -q other.test "$follow" ||
    fail "policy log --follow did not show the new entry: $(cat "$follow")"
  kill "$n" 2>/dev/null || true
}

# policy check: exit status and JSON; per-sandbox rules affect that
# sandbox only; deny wins; "*.x" covers names below x, not x; presets:
# open allows every name (addresses still need their rules), locked only
# what rules allow; bad rules are refused.
test_policy_check_rules_and_presets() {
  local out before bad deny_id
  up_start
  set_preset balanced
  net_sandbox net-pa
  net_sandbox net-pb
  rule allow "$HOST_IP"
  rule allow --sandbox net-pa up.test

  assert_eq 200 "$(in_code net-pa "http://up.test:$UP_HTTP/a")" "up.test from net-pa (its rule)"
  assert_denied_code "$(in_code net-pb "http://up.test:$UP_HTTP/b")" "up.test from net-pb"
  assert_eq 0 "$(check_rc --sandbox net-pa "up.test:$UP_HTTP")" "check up.test for net-pa"
  assert_eq 1 "$(check_rc --sandbox net-pb "up.test:$UP_HTTP")" "check up.test for net-pb"
  assert_eq 1 "$(check_rc "up.test:$UP_HTTP")" "check up.test globally"
  out=$(check_json --sandbox net-pa "up.test:$UP_HTTP")
  assert_eq "up.test $UP_HTTP true" "$(json_get "$out" '"\(.host) \(.port) \(.allow)"')" \
    "check JSON ($out)"
  assert_contains "$(json_get "$out" .rule)" up.test "the deciding rule ($out)"
  assert_eq "$HOST_IP true" "$(json_get "$out" '.addresses | map("\(.addr) \(.allow)") | join(",")')" \
    "the checked addresses ($out)"
  [ -n "$(json_get "$out" .reason)" ] || fail "no reason: $out"
  out=$(check_json --sandbox net-pb "up.test:$UP_HTTP")
  assert_eq false "$(json_get "$out" .allow)" "check JSON for net-pb ($out)"
  [ -n "$(json_get "$out" .reason)" ] || fail "no reason: $out"
  out=$("$WARREN" policy check network --sandbox net-pa "up.test:$UP_HTTP")
  assert_contains "$out" up.test "policy check's text"
  assert_contains "$("$WARREN" policy ls net-pa)" up.test "policy ls net-pa"
  assert_contains "$("$WARREN" policy ls --json)" "$HOST_IP" "policy ls --json"

  # Deny wins over allow; removing it restores the allow.
  rule deny up.test
  deny_id=$RULE_ID
  assert_denied_code "$(in_code net-pa "http://up.test:$UP_HTTP/c")" "up.test with a global deny"
  out=$(check_json --sandbox net-pa "up.test:$UP_HTTP")
  assert_eq false "$(json_get "$out" .allow)" "check with a deny ($out)"
  assert_contains "$(json_get "$out" .rule)" deny "the deciding rule ($out)"
  "$WARREN" policy rm "$deny_id" >/dev/null || fail "policy rm $deny_id"
  assert_eq 200 "$(in_code net-pa "http://up.test:$UP_HTTP/d")" "up.test after policy rm"

  # A wildcard: names below it, not the name itself.
  rule allow --sandbox net-pb '*.up.test'
  assert_eq 200 "$(in_code net-pb "http://api.up.test:$UP_HTTP/e")" "api.up.test under *.up.test"
  assert_eq 200 "$(in_code net-pb "http://www.up.test:$UP_HTTP/f")" "www.up.test under *.up.test"
  assert_denied_code "$(in_code net-pb "http://up.test:$UP_HTTP/g")" "up.test under *.up.test"

  # Presets.
  set_preset open
  assert_eq 200 "$(in_code net-pb "http://up.test:$UP_HTTP/h")" \
    "up.test under open (its address allowed by the global rule)"
  assert_denied_code "$(in_code net-pb "http://rebind.test:$UP_HTTP/i")" \
    "rebind.test (127.0.0.1) under open"
  set_preset locked
  assert_denied_code "$(in_code net-pb "http://up.test:$UP_HTTP/j")" "up.test under locked"
  assert_eq 200 "$(in_code net-pa "http://up.test:$UP_HTTP/k")" "up.test under locked, with a rule"

  # Bad rules are refused and change nothing.
  before=$("$WARREN" policy ls --json)
  for bad in "exa mple.test" "a..b.test" "up.test:99999" "up.test:http" "10.0.0.0/33" \
    "bad_host!.test" "" "*.*.test" "up.test:1:2"; do
    must_fail "$WARREN" policy allow network "$bad" >/dev/null
  done
  assert_eq "$before" "$("$WARREN" policy ls --json)" "the rules after refused ones"
}

# Changing the policy closes open connections it now denies: a CONNECT
# tunnel when its name is denied, a redirected connection when the rules
# that allowed its address go away.
test_deny_cuts_open_tunnel() {
  local out hold ip_rule port_rule
  up_start
  set_preset balanced
  net_sandbox net-cut
  rule allow --sandbox net-cut up.test
  rule allow --sandbox net-cut "$HOST_IP"
  ip_rule=$RULE_ID
  out=$UP_DIR/hold1
  "$WARREN" exec net-cut -- netprobe hold up.test "$UP_ECHO" --proxy 127.0.0.1:3128 \
    --seconds 30 >"$out" 2>&1 &
  hold=$!
  on_exit "kill $hold 2>/dev/null"
  wait_until 15 grep -q '^open' "$out" || fail "the tunnel did not open: $(cat "$out")"
  sleep 1
  kill -0 "$hold" 2>/dev/null || fail "the tunnel ended by itself: $(cat "$out")"
  rule deny --sandbox net-cut up.test
  wait "$hold" || fail "the tunnel stayed open after the deny: $(cat "$out")"
  assert_contains "$(cat "$out")" "cut after" "the tunnel after the deny"
  out=$(probe net-cut tcp up.test "$UP_ECHO" --proxy 127.0.0.1:3128 --send again) &&
    fail "a new tunnel after the deny: $out"

  rule allow --sandbox net-cut "$HOST_IP:$UP_ECHO"
  port_rule=$RULE_ID
  out=$UP_DIR/hold2
  "$WARREN" exec net-cut -- netprobe hold "$HOST_IP" "$UP_ECHO" --seconds 30 >"$out" 2>&1 &
  hold=$!
  on_exit "kill $hold 2>/dev/null"
  wait_until 15 grep -q '^open' "$out" || fail "the connection did not open: $(cat "$out")"
  sleep 1
  "$WARREN" policy rm "$port_rule" >/dev/null
  "$WARREN" policy rm "$ip_rule" >/dev/null
  wait "$hold" || fail "the connection stayed open after its rules went: $(cat "$out")"
  assert_contains "$(cat "$out")" "cut after" "the connection after its rules went"
}

# ---- lifecycle -----------------------------------------------------------------------

proxy_works() { # SANDBOX URL
  [ "$(in_code "$1" "$2")" = 200 ]
}

# The proxy and DNS come back with the sandbox after stop/start and
# pause/resume, and after a daemon restart; rules persist.
test_network_survives_lifecycle() {
  local url
  up_start
  set_preset balanced
  net_sandbox net-life
  rule allow --sandbox net-life up.test
  rule allow --sandbox net-life "$HOST_IP"
  url="http://up.test:$UP_HTTP/life"
  proxy_works net-life "$url" || fail "before anything"
  "$WARREN" stop net-life >/dev/null
  "$WARREN" start net-life >/dev/null
  proxy_works net-life "$url" || fail "the proxy after stop and start"
  assert_line "$(probe net-life dns up.test)" "answer $HOST_IP" "DNS after stop and start"
  "$WARREN" pause net-life >/dev/null
  "$WARREN" resume net-life >/dev/null
  proxy_works net-life "$url" || fail "the proxy after pause and resume"
  stop_daemon
  # shellcheck disable=SC2046 # words, on purpose
  start_daemon $(daemon_args)
  wait_until 15 proxy_works net-life "$url" || fail "the proxy after a daemon restart"
  assert_line "$(probe net-life dns up.test)" "answer $HOST_IP" "DNS after a daemon restart"
  assert_eq 0 "$(check_rc --sandbox net-life up.test)" "the rule after a daemon restart"
}

ws_client() {
  python3 "$NET_TOOLS/ws.py" client "$@"
}

ws_server_start() { # SANDBOX TAG
  "$WARREN" exec -d --tag "$2" "$1" -- python3 /tmp/ws.py server --port 8000 >/dev/null
  wait_until 15 "$WARREN" exec "$1" -- python3 -c 'import socket
socket.create_connection(("127.0.0.1", 8000), timeout=1)' ||
    fail "the WebSocket server in $1 did not start"
}

ports_json_has() { # SANDBOX ADDR HOSTPORT PORT
  "$WARREN" ports "$1" --json | jq -e --arg a "$2" --argjson h "$3" --argjson p "$4" \
    '.ports | any(.addr == $a and .host_port == $h and .port == $p)' >/dev/null
}

# A published port carries a WebSocket round trip from the host to a
# server inside; a connection wakes a paused sandbox; it survives
# stop/start (the server is started again) and a daemon restart; ADDR:
# publishes on that address only; a taken port is refused; --unpublish
# and rm free the host port.
test_published_port_websocket() {
  local hp hp2 hp3 out id holder t0
  need_host_ip
  net_sandbox net-ws
  id=$(sb_get net-ws .id)
  "$WARREN" cp "$NET_TOOLS/ws.py" net-ws:/tmp/ws.py >/dev/null
  ws_server_start net-ws ws1
  hp=$(free_port)
  "$WARREN" ports net-ws --publish "$hp:8000" >/dev/null || fail "publish $hp:8000"
  ports_json_has net-ws 127.0.0.1 "$hp" 8000 ||
    fail "ports --json: $("$WARREN" ports net-ws --json)"
  api_call GET "/v1/sandboxes/$id/ports"
  assert_eq 200 "$API_STATUS" "GET /v1/sandboxes/ID/ports"
  assert_eq true "$(json_get "$API_BODY" ".ports | any(.host_port == $hp and .port == 8000)")" \
    "the API's ports ($API_BODY)"
  assert_contains "$("$WARREN" ports net-ws)" "$hp" "warren ports"

  assert_eq hello "$(ws_client --url "ws://127.0.0.1:$hp/chat" --message hello)" "round trip"
  assert_eq net-ws "$(ws_client --url "ws://127.0.0.1:$hp/" --message __whoami__)" \
    "who answered"
  assert_eq "ok 70000" "$(ws_client --url "ws://127.0.0.1:$hp/" --size 70000)" \
    "a 70000-byte message"

  # Paused: the connection wakes it (15-wake.sh has more).
  "$WARREN" pause net-ws >/dev/null
  assert_eq while-paused "$(ws_client --url "ws://127.0.0.1:$hp/" \
    --message while-paused --timeout 30)" "the round trip to a paused sandbox"
  assert_eq running "$(sb_get net-ws .state)" "the state after the connection"
  assert_eq port "$(sb_get net-ws .last_wake.by)" "what woke it"

  # Stopped: the publication stays, connections fail at once.
  "$WARREN" stop net-ws >/dev/null
  ports_json_has net-ws 127.0.0.1 "$hp" 8000 || fail "the port after stop"
  t0=$(now_ms)
  if out=$(ws_client --url "ws://127.0.0.1:$hp/" --timeout 10 2>&1); then
    fail "a round trip to a stopped sandbox: $out"
  fi
  [ $(($(now_ms) - t0)) -lt 5000 ] || fail "a stopped sandbox's port hung for $(($(now_ms) - t0)) ms"
  "$WARREN" start net-ws >/dev/null
  ws_server_start net-ws ws2
  assert_eq again "$(ws_client --url "ws://127.0.0.1:$hp/" --message again)" \
    "round trip after stop and start"

  # A daemon restart: the publication and the server remain.
  stop_daemon
  # shellcheck disable=SC2046 # words, on purpose
  start_daemon $(daemon_args)
  wait_until 15 ws_client --url "ws://127.0.0.1:$hp/" --message restarted --timeout 3 ||
    fail "no round trip after a daemon restart"
  ports_json_has net-ws 127.0.0.1 "$hp" 8000 || fail "the port after a daemon restart"

  # ADDR:HOSTPORT:PORT publishes on that address only.
  hp2=$(free_port "$HOST_IP")
  "$WARREN" ports net-ws --publish "$HOST_IP:$hp2:8000" >/dev/null ||
    fail "publish $HOST_IP:$hp2:8000"
  assert_eq via-ip "$(ws_client --url "ws://$HOST_IP:$hp2/" --message via-ip)" \
    "round trip on $HOST_IP"
  if out=$(ws_client --url "ws://127.0.0.1:$hp2/" --timeout 3 2>&1); then
    fail "$hp2 answers on 127.0.0.1 too: $out"
  fi
  ports_json_has net-ws "$HOST_IP" "$hp2" 8000 || fail "ports --json for $HOST_IP:$hp2"

  # Taken ports are refused.
  must_fail "$WARREN" ports net-ws --publish "$hp:8001" >/dev/null
  hp3=$(free_port)
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
time.sleep(60)' "$hp3" &
  holder=$!
  on_exit "kill $holder 2>/dev/null"
  # Watched, not probed: a probe that binds could take the port from the
  # holder before it gets there.
  wait_until 5 port_listening 127.0.0.1 "$hp3" ||
    fail "the host process did not take $hp3"
  must_fail "$WARREN" ports net-ws --publish "$hp3:8000" >/dev/null
  kill "$holder" 2>/dev/null || true

  # --unpublish frees the host port; rm frees the others.
  "$WARREN" ports net-ws --unpublish "$hp" >/dev/null || fail "unpublish $hp"
  if out=$(ws_client --url "ws://127.0.0.1:$hp/" --timeout 3 2>&1); then
    fail "a round trip after --unpublish: $out"
  fi
  port_bindable 127.0.0.1 "$hp" || fail "127.0.0.1:$hp is still taken after --unpublish"
  if ports_json_has net-ws 127.0.0.1 "$hp" 8000; then
    fail "ports --json still lists $hp"
  fi
  "$WARREN" rm -f net-ws >/dev/null
  wait_until 5 port_bindable "$HOST_IP" "$hp2" ||
    fail "$HOST_IP:$hp2 is still taken after rm"
}
