# shellcheck shell=bash
# Security: every limit of the daemon is checked where a request comes in.
#
# An exec too large for the one datagram warren-init takes, an environment
# at create that would leave no room for any later exec's command, secrets
# whose placeholders (which every process gets) would crowd every exec out,
# and smaller malformed parts of an exec. Each gets a 4xx whose message
# names the limit; nothing is created; the sandbox and the daemon go on
# serving. Sourced by tests/run-e2e.

json_post() { # PATH BODY -> API_STATUS, API_BODY
  api_call POST "$1" -H 'Content-Type: application/json' --data-binary "$2"
}

# N bytes of one letter.
letters() { # N [LETTER]
  head -c "$1" /dev/zero | tr '\0' "${2:-a}"
}

test_overlong_exec_gets_a_4xx_naming_the_limit() {
  local big out
  new_sandbox lim-exec
  big=$(letters 70000)
  json_post /v1/sandboxes/lim-exec/exec "{\"cmd\":[\"echo\",\"$big\"]}"
  assert_eq 400 "$API_STATUS" "a 70 KB argument"
  assert_api_error "$API_BODY" too_large "a 70 KB argument"
  assert_contains "$API_BODY" "at most 65024 bytes" "the limit named"
  # The same through the CLI: a clear line, not "internal".
  out=$(must_fail "$WARREN" exec lim-exec -- echo "$big")
  assert_contains "$out" "an exec carries at most 65024 bytes" "warren exec"
  assert_not_contains "$out" "internal" "warren exec"
  # An environment of its own too large, and too many variables.
  json_post /v1/sandboxes/lim-exec/exec \
    "{\"cmd\":[\"true\"],\"env\":{\"A\":\"$big\"}}"
  assert_api_error "$API_BODY" too_large "a 70 KB variable"
  json_post /v1/sandboxes/lim-exec/exec "$(jq -cn \
    '{cmd:["true"],env:([range(5000)|{key:"V\(.)",value:"1"}]|from_entries)}')"
  assert_api_error "$API_BODY" too_large "5000 variables"
  assert_contains "$API_BODY" "at most 4096" "the count named"
  # More arguments than an exec takes.
  json_post /v1/sandboxes/lim-exec/exec "$(jq -cn '{cmd:(["true"]+[range(5000)|"x"])}')"
  assert_eq 400 "$API_STATUS" "5000 arguments"
  assert_contains "$API_BODY" "4096" "5000 arguments: the count named"
  # Well under the limit still runs, whatever secrets this state root holds
  # (their placeholders take at most 8 KiB of every exec).
  out=$("$WARREN" exec lim-exec -- sh -c 'echo ${#1}' sh "$(letters 50000)")
  assert_eq 50000 "$out" "a 50 KB argument"
  assert_eq hi "$("$WARREN" exec lim-exec -- echo hi)" "a later exec"
  assert_daemon_alive
}

test_create_env_that_would_break_every_exec_refused() {
  local big out
  "$WARREN" rm -f lim-env >/dev/null 2>&1 || true
  big=$(letters 40000)
  json_post /v1/sandboxes "{\"name\":\"lim-env\",\"env\":{\"A\":\"$big\"}}"
  assert_eq 400 "$API_STATUS" "a 40 KB environment"
  assert_api_error "$API_BODY" too_large "a 40 KB environment"
  assert_contains "$API_BODY" "at most 32768 bytes" "the limit named"
  assert_eq 404 "$(api_status GET /v1/sandboxes/lim-env)" "nothing created"
  out=$(must_fail "$WARREN" create --name lim-env --env "A=$big")
  assert_contains "$out" "at most 32768 bytes" "warren create"
  json_post /v1/sandboxes "$(jq -cn \
    '{name:"lim-env",env:([range(1100)|{key:"V\(.)",value:"1"}]|from_entries)}')"
  assert_api_error "$API_BODY" too_large "1100 variables"
  assert_contains "$API_BODY" "1024 variables" "the count named"
  assert_eq 404 "$(api_status GET /v1/sandboxes/lim-env)" "nothing created"
  # The largest environment a sandbox may have still leaves room for a
  # command of 20 KB.
  new_sandbox lim-env --env "A=$(letters 32000)"
  out=$("$WARREN" exec lim-env -- sh -c 'echo ${#A} ${#1}' sh "$(letters 20000)")
  assert_eq "32000 20000" "$out" "an exec beside the largest environment"
  assert_daemon_alive
}

# The variant: secrets. Every process gets a placeholder for each
# secret's variables, so their names together are bounded when a secret
# is set, not found out at the next exec.
test_secret_placeholders_that_would_break_every_exec_refused() {
  local names1 names2
  trap 'api DELETE /v1/secrets/lim-one >/dev/null; api DELETE /v1/secrets/lim-two >/dev/null' EXIT
  names1=$(jq -cn --arg p "$(letters 240 A)" '[range(16)|"\($p)_ONE_\(.)"]')
  names2=$(jq -cn --arg p "$(letters 240 B)" '[range(16)|"\($p)_TWO_\(.)"]')
  api_call PUT /v1/secrets/lim-one -H 'Content-Type: application/json' \
    --data-binary "{\"value\":\"v\",\"hosts\":[\"one.example\"],\"header\":\"X-Key\",\"env\":$names1}"
  assert_eq 200 "$API_STATUS" "the first secret ($API_BODY)"
  api_call PUT /v1/secrets/lim-two -H 'Content-Type: application/json' \
    --data-binary "{\"value\":\"v\",\"hosts\":[\"two.example\"],\"header\":\"X-Key\",\"env\":$names2}"
  assert_eq 400 "$API_STATUS" "the second secret"
  assert_api_error "$API_BODY" too_large "the second secret"
  assert_contains "$API_BODY" "at most 8192" "the limit named"
  assert_eq "" "$(api GET /v1/secrets | jq -r '.secrets[].service | select(. == "lim-two")')" \
    "nothing stored"
  # Replacing the first with the same names is no growth.
  api_call PUT /v1/secrets/lim-one -H 'Content-Type: application/json' \
    --data-binary "{\"value\":\"w\",\"hosts\":[\"one.example\"],\"header\":\"X-Key\",\"env\":$names1}"
  assert_eq 200 "$API_STATUS" "the first secret again"
  new_sandbox lim-sec
  assert_eq warren-proxy-placeholder \
    "$("$WARREN" exec lim-sec -- printenv "$(letters 240 A)_ONE_3")" "a placeholder"
  assert_eq hi "$("$WARREN" exec lim-sec -- echo hi)" "an exec"
}

test_malformed_exec_parts_get_clear_errors() {
  new_sandbox lim-parts
  json_post /v1/sandboxes/lim-parts/exec '{"cmd":[""]}'
  assert_eq 400 "$API_STATUS" "an empty program name"
  assert_contains "$API_BODY" "cmd[0] must name a program" "an empty program name"
  json_post /v1/sandboxes/lim-parts/exec \
    "{\"cmd\":[\"true\"],\"cwd\":\"/$(letters 5000)\"}"
  assert_eq 400 "$API_STATUS" "a 5000-byte cwd"
  assert_contains "$API_BODY" "cwd" "a 5000-byte cwd"
  assert_daemon_alive
}
