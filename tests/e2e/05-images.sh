# Base images: the one the harness built is described, has what an agent
# reaches for and a current Node.js from the npm registry, is reused and
# protected while in use; --minimal and --node build other images; bad
# requests are refused before anything is built; a corrupted cached
# tarball is never used.

# The tools the default image promises (docs/images.md), by command.
DEFAULT_TOOLS=(ps top free less nano editor make gcc g++ python3 pip pip3
  unzip zip jq rg wget ssh scp file tree lsof ip ss git curl node npm npx)

test_image_is_described() {
  local img
  img=$(api GET /v1/images/base)
  assert_eq ready "$(json_get "$img" .state)" state
  assert_contains "$(json_get "$img" '.packages | join(",")')" build-essential \
    packages
  assert_not_contains "$(json_get "$img" '.packages | join(",")')" nodejs \
    "Debian's nodejs in the default image"
  assert_eq false "$(json_get "$img" .minimal)" minimal
  assert_eq registry "$(json_get "$img" .node.source)" "node source"
  assert_contains "$(json_get "$img" .node.version)" "24." "node version"
  [ "$(json_get "$img" .size_bytes)" -gt $((100 << 20)) ] || fail "size: $img"
  # Stored read-only for sandboxes, owned by the host's root.
  [ -d "$WR_ROOT/images/base/rootfs/usr/bin" ] || fail "no image tree"
  assert_eq "0" "$(stat -c %u "$WR_ROOT/images/base/rootfs/usr/bin/env")" owner
  assert_eq "0" "$(stat -c %u "$WR_ROOT/images/base/rootfs/usr/local/bin/node")" \
    "node's owner"
  "$WARREN" image ls --json | jq -e '.[] | select(.name == "base")' >/dev/null
  assert_contains "$("$WARREN" image ls)" "(registry)" "image ls"
  assert_contains "$("$WARREN" image inspect base)" "kind:     default" inspect
}

test_default_image_has_the_tools() {
  local missing out
  new_sandbox tools
  # shellcheck disable=SC2016 # $t is the sandbox shell's
  missing=$("$WARREN" exec tools -- sh -c \
    'for t in "$@"; do command -v "$t" >/dev/null || printf " %s" "$t"; done' \
    sh "${DEFAULT_TOOLS[@]}") || fail "the tools check did not run"
  [ -z "$missing" ] || fail "missing from the default image:$missing"
  out=$("$WARREN" exec tools -- node --version)
  case $out in v24.*) ;; *) fail "node --version: $out" ;; esac
  assert_eq /usr/local/bin/node "$("$WARREN" exec tools -- sh -c 'command -v node')" \
    "the registry's node comes first"
  out=$("$WARREN" exec tools -- npm --version) || fail "npm --version: $out"
  [[ $out =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "npm --version: $out"
  assert_eq "$(json_get "$(api GET /v1/images/base)" .node.npm)" "$out" \
    "the npm the image reports"
  out=$("$WARREN" exec tools -- npx --version) || fail "npx --version: $out"
  assert_eq "$("$WARREN" exec tools -- npm --version)" "$out" npx
  # A native build and a venv work, as agents do them.
  "$WARREN" exec tools -- sh -c \
    'printf "int main(void){return 0;}" >/tmp/t.c && gcc -o /tmp/t /tmp/t.c && /tmp/t' ||
    fail "gcc"
  "$WARREN" exec tools -- python3 -m venv /tmp/venv || fail "python3 -m venv"
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
  local body out
  body=$(api POST /v1/images -d '{"name":"Bad/Name"}')
  assert_eq bad_request "$(json_get "$body" .error.code)" "bad name"
  body=$(api POST /v1/images -d '{"include":["--option-injection"]}')
  assert_eq bad_request "$(json_get "$body" .error.code)" "bad package"
  body=$(api POST /v1/images -d '{"includes":["x"]}')
  assert_contains "$(json_get "$body" .error.message)" "unknown field"
  body=$(api POST /v1/images -d '{"name":"n","node":24}')
  assert_eq bad_request "$(json_get "$body" .error.code)" "node as a number"
  assert_eq 404 "$(api_status GET /v1/images/no-such-image)" "missing image"
  # A Node.js too old, or not a version, is refused before any build.
  for spec in 7 abc 24.1 ""; do
    out=$(must_fail "$WARREN" image build badnode --node "$spec")
    assert_contains "$out" "use a Node.js major version" "--node '$spec'"
    assert_not_contains "$out" "building" "--node '$spec' started a build"
  done
  assert_eq 404 "$(api_status GET /v1/images/badnode)" "a record for badnode"
  [ -z "$(find "$WR_ROOT/images" -maxdepth 1 -name '.badnode.*')" ] ||
    fail "a work directory for badnode"
}

# --minimal is today's small image: Debian's Node.js, no compiler.
test_minimal_image() {
  local img out
  "$WARREN" image build mini --minimal 2>/dev/null >/dev/null ||
    fail "build --minimal"
  img=$(api GET /v1/images/mini)
  assert_eq true "$(json_get "$img" .minimal)" minimal
  assert_eq debian "$(json_get "$img" .node.source)" "node source"
  assert_contains "$(json_get "$img" '.packages | join(",")')" nodejs packages
  new_sandbox small --image mini
  must_fail "$WARREN" exec small -- sh -c 'command -v gcc' >/dev/null
  out=$("$WARREN" exec small -- node --version)
  case $out in v18.*) ;; *) fail "Debian's node --version: $out" ;; esac
  "$WARREN" exec small -- npm --version >/dev/null || fail "Debian's npm"
  assert_contains "$("$WARREN" image inspect mini)" "kind:     minimal" inspect
  [ "$(json_get "$img" .size_bytes)" -lt "$(json_get "$(api GET /v1/images/base)" .size_bytes)" ] ||
    fail "the minimal image is not smaller"
  "$WARREN" rm -f small >/dev/null
  "$WARREN" image rm mini >/dev/null || fail "image rm mini"
}

# The cache is keyed by sha512: a changed file no longer has its name's
# digest, so the build removes it and downloads again. The tarballs are
# fetched before mmdebstrap starts, so a package that does not exist ends
# the build there, without the minutes of a whole image.
test_corrupt_cached_tarball_is_refused() {
  local cache=$WR_ROOT/cache/npm small name out
  small=$(find "$cache" -name 'sha512-*.tgz' -size -20M | head -1)
  [ -n "$small" ] || fail "no cached npm tarball in $cache"
  head -c 4096 /dev/urandom >"$small"
  out=$(must_fail "$WARREN" image build cache-check --minimal --node 24 \
    --include warren-no-such-package)
  assert_contains "$out" "did not match its integrity" "the corrupt copy"
  assert_contains "$out" "from the cache, sha512 verified" "the good copy"
  assert_contains "$out" "warren-no-such-package" "the build's own failure"
  name=$(basename "$small" .tgz)
  assert_eq "${name#sha512-}" "$(sha512sum "$small" | cut -d' ' -f1)" \
    "the new copy"
  "$WARREN" image rm cache-check >/dev/null 2>&1 || true
}

test_image_in_use_cannot_be_removed() {
  new_sandbox img-user
  local out
  out=$(must_fail "$WARREN" image rm base)
  assert_contains "$out" "use" "rm while in use"
  [ -d "$WR_ROOT/images/base/rootfs" ] || fail "the image was removed"
}
