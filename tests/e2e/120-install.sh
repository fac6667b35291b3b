# shellcheck shell=bash
# End-to-end: a real install through the policy, as a new user makes one.
# Under the balanced preset and no rule of the test's own, a fresh sandbox
# creates a Vite + React + TypeScript app from the registry that npm on
# the host is configured with, installs it, type-checks and builds it,
# starts Vite's dev server, and the host fetches the page and a module
# through a published port.
#
# What this proves, beyond the app working: the registry is reached on
# whatever address the host's resolver gives it (a company mirror or a
# resolver that answers with private addresses: `@npm-registry` is a name
# the operator chose), TLS works behind a TLS-inspecting proxy (the host's
# own CAs are trusted inside), no connection to the registry is denied,
# and the connections of an install (dozens with npm's keep-alive, hundreds
# without) make only a handful of upstream DNS queries (the resolver's
# cache and coalescing).
#
# It needs the registry: when npm on the host cannot reach it, the test
# skips with that reason (and fails under WARREN_MUST_WORK=1).
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

INSTALL_PORT_SANDBOX=5173

# The registry npm on the host uses, and its host name.
install_registry() {
  npm config get registry 2>/dev/null || echo https://registry.npmjs.org/
}

install_registry_host() {
  install_registry | sed -E 's|^[a-z]+://([^/:]+).*|\1|'
}

# Skip (77) unless npm on the host reaches its registry.
install_need_registry() {
  local out
  command -v npm >/dev/null || skip "npm is not installed on the host"
  if ! out=$(timeout 60 npm view vite@5 version 2>&1 | tail -1); then
    skip "npm on the host cannot reach $(install_registry): $out"
  fi
}

# A free TCP port on the host's loopback.
install_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

test_vite_react_ts_installs_builds_and_serves() {
  local reg_host log denied allowed hp page mod queries
  install_need_registry
  reg_host=$(install_registry_host)
  "$WARREN" policy init balanced >/dev/null
  new_sandbox vite --memory 2g
  "$WARREN" exec vite -- node --version

  # The template, from the registry (create-vite), then its 170-odd
  # packages. --yes: npm asks before running a package it must fetch.
  "$WARREN" exec --timeout 5m -w /root -e npm_config_yes=true vite -- \
    npm create vite@5 app -- --template react-ts ||
    fail "npm create vite@5 failed"
  "$WARREN" exec vite -- test -f /root/app/package.json
  "$WARREN" exec --timeout 10m -w /root/app vite -- \
    npm install --no-audit --no-fund || fail "npm install failed"
  "$WARREN" exec -w /root/app vite -- test -x node_modules/.bin/vite

  # The template's own checks: types, then a production build.
  "$WARREN" exec --timeout 5m -w /root/app vite -- \
    npx tsc --noEmit -p tsconfig.app.json || fail "tsc found errors"
  "$WARREN" exec --timeout 5m -w /root/app vite -- npx vite build ||
    fail "vite build failed"
  "$WARREN" exec -w /root/app vite -- sh -c 'ls dist/assets/*.js >/dev/null'

  # The dev server, in the background, reached from the host.
  "$WARREN" exec -d --tag dev -w /root/app vite -- \
    npx vite --host 127.0.0.1 --port "$INSTALL_PORT_SANDBOX" --strictPort \
    >/dev/null
  hp=$(install_free_port)
  "$WARREN" ports vite --publish "$hp:$INSTALL_PORT_SANDBOX" >/dev/null
  wait_until 60 curl -fsS "http://127.0.0.1:$hp/" ||
    fail "the dev server never answered: $("$WARREN" logs vite dev 2>&1 | tail -5)"
  page=$(curl -fsS "http://127.0.0.1:$hp/")
  assert_contains "$page" '<div id="root"></div>' "the app's page"
  assert_contains "$page" '/src/main.tsx' "the page loads the entry module"
  # Vite serves TypeScript as JavaScript, with React resolved to its
  # pre-bundled dependency.
  mod=$(curl -fsS "http://127.0.0.1:$hp/src/main.tsx")
  assert_contains "$mod" 'createRoot' "the entry module"
  assert_contains "$mod" '/node_modules/.vite/deps/react' "React, pre-bundled"
  # The source says getElementById('root')!: TypeScript's `!` is gone.
  assert_contains "$mod" 'getElementById("root")).render' "TypeScript, stripped"
  curl -fsS -o /dev/null "http://127.0.0.1:$hp$(printf '%s' "$mod" |
    grep -o '/node_modules/.vite/deps/react\.js[^"]*' | head -1)" ||
    fail "the pre-bundled React module is not served"

  # Nothing to the registry was denied, and no rule of ours allowed it.
  log=$("$WARREN" policy log --sandbox vite --limit 10000 --json)
  denied=$(printf '%s' "$log" | jq --arg h "$reg_host" \
    '[.entries[] | select(.host == $h and .allow == false)] | length')
  assert_eq 0 "$denied" "denied connections to $reg_host"
  allowed=$(printf '%s' "$log" | jq --arg h "$reg_host" \
    '[.entries[] | select(.host == $h and .allow)] | length')
  [ "$allowed" -gt 0 ] || fail "the log has no connection to $reg_host"
  echo "$allowed connections to $reg_host, none denied"
  # The preset alone allowed it: no rule names the registry or an address.
  assert_eq 0 "$("$WARREN" policy ls --json | jq --arg h "$reg_host" \
    '[.rules[] | select(.host == $h or (.host | test("^[0-9.:]+(/[0-9]+)?$")))] | length')" \
    "rules naming the registry or an address"

  # Many connections, a handful of upstream queries for the name.
  queries=$("$WARREN" policy check network "$reg_host:443" --json |
    jq '.cache.queries // empty')
  [ -n "$queries" ] || fail "policy check shows no resolver counts"
  echo "$queries upstream DNS queries for $reg_host"
  [ "$queries" -le 8 ] ||
    fail "$queries upstream DNS queries for $reg_host: the cache should answer most"
}
