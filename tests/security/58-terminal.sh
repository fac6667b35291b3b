# shellcheck shell=bash
# Security: strings a sandbox (or an API client) controls never reach the
# user's terminal raw.
#
# A file name made inside a sandbox, a label set by a client, a user name
# that the daemon echoes in an error: each may carry escape sequences that
# move the cursor, retitle the terminal, clear the screen or hide lines.
# Plain output quotes them the way `ls` quotes file names
# ('evil'$'\033''[2J'), error lines escape them in place, and --json keeps
# the exact value, JSON-escaped. Sourced by tests/run-e2e.

OWNER=4242
GROUP=4343

# A name with every kind of trouble: OSC (retitle), CSI (clear screen,
# hide), a carriage return, a C1 CSI in UTF-8. (The CLI only sends UTF-8
# commands, so the sandbox's printf makes it.)
EVIL_PRINTF='evil\033]0;pwned\007\033[2J\rhidden\302\233name'
EVIL=$(printf "$EVIL_PRINTF")

# The bytes a terminal would obey must not be in the output.
assert_no_raw_controls() { # TEXT WHAT
  local n
  n=$(printf '%s' "$1" | LC_ALL=C tr -d '\n\t' | LC_ALL=C grep -c $'[\x01-\x1f\x7f]' || true)
  assert_eq 0 "$n" "$2: raw control bytes"
  if printf '%s' "$1" | LC_ALL=C grep -q $'\xc2\x9b'; then
    fail "$2: a raw C1 CSI"
  fi
}

make_project() { # DIR
  rm -rf "$1"
  mkdir -p "$1/proj"
  git -C "$1/proj" init -q -b main
  echo hi >"$1/proj/README"
  git -C "$1/proj" add -A
  git -C "$1/proj" -c user.name=t -c user.email=t@example.invalid \
    commit -q -m initial
  chown -R "$OWNER:$GROUP" "$1"
}

test_diff_shows_hostile_file_names_quoted() {
  local d=/tmp/wr-term-diff out json
  make_project "$d"
  new_sandbox term-diff shell "$d/proj"
  "$WARREN" exec term-diff -- sh -c 'touch "/workspace/$(printf "$1")"' sh \
    "$EVIL_PRINTF"
  out=$("$WARREN" diff term-diff)
  assert_no_raw_controls "$out" "warren diff"
  assert_contains "$out" "'evil'\$'\\033'']0;pwned'\$'\\a\\033''[2J'\$'\\r''hidden'\$'\\302\\233''name'" \
    "the name as ls quotes it"
  # Pasted into a shell, the quoted form is the name again.
  assert_eq "$EVIL" "$(eval "printf %s $(printf '%s' "$out" | sed -n 's/^A //p')")" \
    "the quoted name read back by a shell"
  # --json keeps the exact value, escaped, in plain ASCII.
  json=$("$WARREN" diff --json term-diff)
  assert_no_raw_controls "$json" "warren diff --json"
  assert_contains "$json" '\u001B]0;pwned\u0007\u001B[2J\rhidden\u009Bname' \
    "the JSON escapes"
  assert_eq "$EVIL" "$(printf '%s' "$json" | jq -r '.changes[0].path')" \
    "the exact name from the JSON"
  # A name that is not UTF-8 at all: no raw byte of it is printed.
  rm -f "$d/proj/$EVIL"
  "$WARREN" exec term-diff -- sh -c 'touch "/workspace/$(printf "bad\377\376")"'
  out=$("$WARREN" diff term-diff)
  if printf '%s' "$out" | LC_ALL=C grep -q $'[\xfe\xff]'; then
    fail "a byte that is not UTF-8 reached the output: $out"
  fi
  rm -rf "$d"
}

# The variant: what API clients and the daemon's messages carry.
test_labels_and_echoed_names_are_escaped() {
  local out
  "$WARREN" rm -f term-label >/dev/null 2>&1 || true
  api_call POST /v1/sandboxes -H 'Content-Type: application/json' \
    --data-binary "$(jq -cn --arg v "$(printf 'x\033[8mhidden\033[0m')" \
      '{name:"term-label",labels:{note:$v}}')"
  assert_eq 201 "$API_STATUS" "create with a label ($API_BODY)"
  WR_CLEANUP="term-label"
  trap '"$WARREN" rm -f term-label >/dev/null 2>&1 || true' EXIT
  out=$("$WARREN" inspect term-label)
  assert_no_raw_controls "$out" "warren inspect"
  assert_contains "$out" "'note=x'\$'\\033''[8mhidden'\$'\\033''[0m'" \
    "the label quoted"
  # An error that echoes what a client sent: the user name comes back in
  # the daemon's message and is escaped on the error line.
  out=$(must_fail "$WARREN" exec --user "$(printf 'nobody\033[2J')" term-label -- true)
  assert_no_raw_controls "$out" "the error line"
  assert_contains "$out" 'nobody\033[2J' "the user name, escaped in place"
  # A file that does not exist, named with a carriage return.
  out=$(must_fail "$WARREN" cp "term-label:/tmp/$(printf 'a\rb')" /tmp/)
  assert_no_raw_controls "$out" "warren cp's error"
}
