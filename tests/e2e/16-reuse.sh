# shellcheck shell=bash
# End-to-end: named get-or-create (`"reuse": true`, `warren create
# --reuse`).
#
# A create that reuses answers 201 when it makes the sandbox and 200 with
# "reused": true when one of that name exists, which it starts or wakes;
# several at once make one sandbox; options that conflict with the
# existing sandbox are refused with 409; reuse needs a name.

# POST /v1/sandboxes with BODY into FILE: "STATUS" on the first line,
# the body after.
ru_post() { # BODY FILE
  curl -sS --unix-socket "$WR_SOCK" -X POST -w '\n%{http_code}' \
    -H 'Content-Type: application/json' -d "$1" "http://warren/v1/sandboxes" >"$2"
}

ru_status() { tail -1 "$1"; }
ru_body() { sed '$d' "$1"; }

test_reuse_creates_then_reuses() {
  local j
  "$WARREN" rm -f ru-one >/dev/null 2>&1 || true
  trap '"$WARREN" rm -f ru-one >/dev/null 2>&1 || true' EXIT
  api_call POST /v1/sandboxes -d '{"name":"ru-one","reuse":true}'
  assert_eq 201 "$API_STATUS" "the first ($API_BODY)"
  assert_eq false "$(json_get "$API_BODY" .reused)" "reused the first time"
  j=$API_BODY
  api_call POST /v1/sandboxes -d '{"name":"ru-one","reuse":true}'
  assert_eq 200 "$API_STATUS" "the second ($API_BODY)"
  assert_eq true "$(json_get "$API_BODY" .reused)" "reused the second time"
  assert_eq "$(json_get "$j" .id)" "$(json_get "$API_BODY" .id)" "the same sandbox"
  # Without reuse the name is taken, as before.
  api_call POST /v1/sandboxes -d '{"name":"ru-one"}'
  assert_eq 409 "$API_STATUS" "a plain create of a taken name"
  assert_api_error "$API_BODY" name_conflict
  # The CLI says so and prints the name.
  assert_eq ru-one "$("$WARREN" create --name ru-one --reuse 2>/dev/null)" "warren create --reuse"
  assert_contains "$("$WARREN" create --name ru-one --reuse 2>&1 >/dev/null)" "reused" \
    "warren create --reuse's message"
}

test_two_at_once_make_one_sandbox() {
  local d i ids
  d=$(mktemp -d)
  "$WARREN" rm -f ru-race >/dev/null 2>&1 || true
  trap '"$WARREN" rm -f ru-race >/dev/null 2>&1 || true' EXIT
  for i in 1 2 3 4; do
    ru_post '{"name":"ru-race","reuse":true}' "$d/$i" &
  done
  wait
  for i in 1 2 3 4; do
    case "$(ru_status "$d/$i")" in 200 | 201) ;; *) fail "create $i: $(cat "$d/$i")" ;; esac
  done
  assert_eq 1 "$(grep -lx 201 "$d"/[1-4] | wc -l)" "creates that made it"
  assert_eq 3 "$(grep -lx 200 "$d"/[1-4] | wc -l)" "creates that reused it"
  ids=$(for i in 1 2 3 4; do ru_body "$d/$i" | jq -r .id; done | sort -u)
  assert_eq 1 "$(echo "$ids" | wc -l)" "ids ($ids)"
  for i in 1 2 3 4; do
    assert_eq running "$(ru_body "$d/$i" | jq -r .state)" "state in answer $i"
  done
  assert_eq 1 "$("$WARREN" ls --json | jq '[.[] | select(.name == "ru-race")] | length')" \
    "sandboxes named ru-race"
  rm -rf "$d"
}

test_reuse_wakes_a_paused_one_and_starts_a_stopped_one() {
  local pid
  new_sandbox ru-life
  "$WARREN" exec -d --tag sleeper ru-life -- sleep 1000 >/dev/null
  pid=$("$WARREN" ps --json ru-life | jq -r '.[0].pid')
  "$WARREN" pause ru-life >/dev/null
  api_call POST /v1/sandboxes -d '{"name":"ru-life","reuse":true}'
  assert_eq 200 "$API_STATUS" "reuse of a paused one ($API_BODY)"
  assert_eq running "$(json_get "$API_BODY" .state)" "woken"
  assert_eq api "$(sb_get ru-life .last_wake.by)" "what woke it"
  assert_eq "$pid" "$("$WARREN" ps --json ru-life | jq -r '.[0].pid')" "its process"

  "$WARREN" exec ru-life -- sh -c 'echo kept >/root/f'
  "$WARREN" stop ru-life >/dev/null
  api_call POST /v1/sandboxes -d '{"name":"ru-life","reuse":true}'
  assert_eq 200 "$API_STATUS" "reuse of a stopped one ($API_BODY)"
  assert_eq running "$(json_get "$API_BODY" .state)" "started"
  assert_eq kept "$("$WARREN" exec ru-life -- cat /root/f)" "its files"

  # start: false leaves a stopped one stopped.
  "$WARREN" stop ru-life >/dev/null
  api_call POST /v1/sandboxes -d '{"name":"ru-life","reuse":true,"start":false}'
  assert_eq 200 "$API_STATUS" "reuse with start false"
  assert_eq stopped "$(json_get "$API_BODY" .state)" "left stopped"
}

test_reuse_refuses_what_conflicts() {
  new_sandbox ru-conf
  api_call POST /v1/sandboxes -d '{"name":"ru-conf","reuse":true,"image":"another"}'
  assert_eq 409 "$API_STATUS" "another image"
  assert_api_error "$API_BODY" conflict
  assert_contains "$API_BODY" "image \`base\`, not \`another\`" "the message"
  api_call POST /v1/sandboxes -d '{"name":"ru-conf","reuse":true,"image":"base"}'
  assert_eq 200 "$API_STATUS" "the same image"
  api_call POST /v1/sandboxes -d '{"reuse":true}'
  assert_eq 400 "$API_STATUS" "reuse without a name"
  assert_api_error "$API_BODY" bad_request
  must_fail "$WARREN" create --reuse >/dev/null
}
