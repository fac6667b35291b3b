# Base images: the one the harness built is described, reused, protected
# while in use, and bad requests are refused before anything is built.

test_image_is_described() {
  local img
  img=$(api GET /v1/images/base)
  assert_eq ready "$(json_get "$img" .state)" state
  assert_contains "$(json_get "$img" '.packages | join(",")')" nodejs packages
  [ "$(json_get "$img" .size_bytes)" -gt $((100 << 20)) ] || fail "size: $img"
  # Stored read-only for sandboxes, owned by the host's root.
  [ -d "$WR_ROOT/images/base/rootfs/usr/bin" ] || fail "no image tree"
  assert_eq "0" "$(stat -c %u "$WR_ROOT/images/base/rootfs/usr/bin/env")" owner
  "$WARREN" image ls --json | jq -e '.[] | select(.name == "base")' >/dev/null
}

test_second_build_reuses_the_image() {
  local out start end
  start=$(date +%s%N)
  out=$("$WARREN" image build base 2>&1)
  end=$(date +%s%N)
  assert_contains "$out" "already built" "second build"
  [ $(((end - start) / 1000000)) -lt 2000 ] || fail "reuse took too long"
  api POST /v1/images -d '{"name":"base"}' | tail -1 |
    jq -e '.type == "done" and .reused == true' >/dev/null ||
    fail "the API did not report reuse"
}

test_build_refuses_bad_input() {
  local body
  body=$(api POST /v1/images -d '{"name":"Bad/Name"}')
  assert_eq bad_request "$(json_get "$body" .error.code)" "bad name"
  body=$(api POST /v1/images -d '{"include":["--option-injection"]}')
  assert_eq bad_request "$(json_get "$body" .error.code)" "bad package"
  body=$(api POST /v1/images -d '{"includes":["x"]}')
  assert_contains "$(json_get "$body" .error.message)" "unknown field"
  assert_eq 404 "$(api_status GET /v1/images/no-such-image)" "missing image"
}

test_image_in_use_cannot_be_removed() {
  new_sandbox img-user
  local out
  out=$(must_fail "$WARREN" image rm base)
  assert_contains "$out" "use" "rm while in use"
  [ -d "$WR_ROOT/images/base/rootfs" ] || fail "the image was removed"
}
