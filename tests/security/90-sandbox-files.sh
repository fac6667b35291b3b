# shellcheck shell=bash
# Security: files the daemon reads or writes in a sandbox on its own behalf.
#
# The sandbox replaces the files warrend uses for itself (/etc/passwd and
# /etc/group for `exec --user`, the trust store it rewrites at every
# start) with a FIFO that would block an open for ever, a symlink to
# another file, a directory, or a sparse file of a terabyte. The safe
# outcome: the daemon keeps answering every client within a second; the
# operation that needed the file fails with a 4xx (or, for a start, a
# clear error) that names the file and what it is, or works by replacing
# what was planted; root's exec keeps working; and `rm -f` always cleans
# up. Sourced by tests/run-e2e, which provides lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

inside() { # NAME CMD...
  local name=$1
  shift
  "$WARREN" exec "$name" -- sh -c "$*"
}

# GET /v1/sandboxes answers within a second (the issue's bar for a daemon
# that nothing a sandbox does can stall).
assert_ls_quick() { # WHAT
  curl -sS -m 1 -o /dev/null --unix-socket "$WR_SOCK" \
    http://warren/v1/sandboxes ||
    fail "$1: warren ls did not answer within a second"
}

# While CMD runs in the background (at most 30 s), the daemon keeps
# answering; then BG_RC is CMD's exit status and BG_OUT its output.
while_daemon_answers() { # WHAT CMD...
  local what=$1 out
  shift
  out=$WR_RUN/sf-bg.out
  rm -f "$out" "$out.rc"
  (
    rc=0
    timeout 30 "$@" >"$out" 2>&1 || rc=$?
    echo "$rc" >"$out.rc"
  ) &
  for _ in 1 2 3 4 5; do
    sleep 0.2
    assert_ls_quick "$what"
  done
  wait_until 40 test -s "$out.rc" || fail "$what: still running after 40 s"
  BG_RC=$(cat "$out.rc")
  BG_OUT=$(cat "$out")
  [ "$BG_RC" != 124 ] || fail "$what: hung (killed by timeout)"
}

# The instance: a FIFO at /etc/passwd used to hang warrend for every
# client at the next exec (the user lookup opened it on the loop thread).
# Now the lookup runs on a worker, never opens what is not a regular
# file, and says what it found; root needs no passwd entry at all. After
# a daemon restart (the root is then opened again, by a job) the same.
test_fifo_passwd_does_not_stall_the_daemon() {
  local out
  new_sandbox sf-fifo
  inside sf-fifo 'rm /etc/passwd && mkfifo /etc/passwd && test -p /etc/passwd'
  for round in first after-restart; do
    while_daemon_answers "exec --user ($round)" \
      "$WARREN" exec --user nobody sf-fifo -- true
    out=$BG_OUT
    [ "$BG_RC" != 0 ] || fail "exec --user nobody worked ($round): $out"
    assert_contains "$out" \
      "/etc/passwd in the sandbox is a fifo, not a regular file" \
      "exec --user ($round)"
    api_call POST /v1/sandboxes/sf-fifo/exec \
      -d '{"cmd":["true"],"user":"nobody"}'
    assert_eq 400 "$API_STATUS" "API exec as nobody ($round)"
    assert_api_error "$API_BODY" bad_request "API exec as nobody ($round)"
    assert_contains "$API_BODY" "is a fifo" "API exec as nobody ($round)"
    # The default user does not depend on the sandbox's passwd.
    assert_eq "0 ok" "$(inside sf-fifo 'echo "$(id -u) ok"')" \
      "exec as root ($round)"
    assert_ls_quick "after the exec ($round)"
    assert_daemon_alive
    [ "$round" = first ] || break
    stop_daemon
    start_daemon
  done
  # Any other user needs the file, and says so.
  out=$(must_fail "$WARREN" exec --user 1234 sf-fifo -- true)
  assert_contains "$out" "/etc/passwd in the sandbox is a fifo" "a numeric uid"
}

# A variant: the file is a sparse terabyte (no disk used inside), or a
# symlink to a file the sandbox may not show, or a directory. Each is
# refused by what it is, before a byte is read.
test_huge_or_odd_user_databases_are_refused_quickly() {
  local out t0 t
  new_sandbox sf-huge
  inside sf-huge 'truncate -s 1T /etc/group && ls -ls /etc/group'
  t0=$(now_ms)
  while_daemon_answers "exec --user with a 1 TiB /etc/group" \
    "$WARREN" exec --user nobody sf-huge -- true
  out=$BG_OUT
  t=$(($(now_ms) - t0))
  [ "$BG_RC" != 0 ] || fail "exec --user nobody worked: $out"
  assert_contains "$out" \
    "/etc/group in the sandbox is 1.0 TiB, more than the 4.0 MiB it may be" \
    "a huge /etc/group"
  [ "$t" -lt 10000 ] || fail "refusing a huge /etc/group took $t ms"
  assert_eq 0 "$(inside sf-huge id -u)" "exec as root with a huge group file"
  inside sf-huge 'rm /etc/group && ln -s /etc/shadow /etc/group'
  out=$(must_fail "$WARREN" exec --user nobody sf-huge -- true)
  assert_contains "$out" "/etc/group in the sandbox is a symlink, not a regular file" \
    "a symlinked /etc/group"
  inside sf-huge 'rm /etc/group && mkdir /etc/group'
  out=$(must_fail "$WARREN" exec --user nobody sf-huge -- true)
  assert_contains "$out" "/etc/group in the sandbox is a directory, not a regular file" \
    "a directory at /etc/group"
  assert_daemon_alive
}

# Another variant, the other direction: files warrend writes at every
# start (warren's CA, in its own file and in the system bundle). A FIFO
# there used to hang the start's job with the sandbox marked busy, so
# that even `rm -f` got 409 for ever; a symlink made it fail. Now what
# stands there is replaced, never opened or written through; a directory
# fails the start with a clear error; `rm -f` cleans up either way.
test_planted_trust_store_does_not_hang_a_start() {
  local bundle=/etc/ssl/certs/ca-certificates.crt id out
  local own=/usr/local/share/ca-certificates/warren-ca.crt
  new_sandbox sf-trust
  id=$(sb_get sf-trust .id)
  inside sf-trust "echo secret >/root/secret && rm $bundle $own &&
    mkfifo $bundle && ln -s /root/secret $own"
  "$WARREN" stop sf-trust >/dev/null
  while_daemon_answers "start with a FIFO bundle" \
    "$WARREN" start sf-trust
  out=$BG_OUT
  assert_eq 0 "$BG_RC" "start with a FIFO bundle and a symlinked CA ($out)"
  assert_eq running "$(sb_state sf-trust)" "state after the start"
  inside sf-trust "test -f $bundle && test ! -L $own && test -f $own" ||
    fail "the planted files were not replaced by regular ones"
  assert_contains "$(inside sf-trust "cat $bundle")" "warren's CA" "the bundle"
  assert_eq secret "$(inside sf-trust cat /root/secret)" \
    "the symlink's target (never written through)"

  inside sf-trust "rm $bundle && mkdir $bundle"
  "$WARREN" stop sf-trust >/dev/null
  while_daemon_answers "start with a directory bundle" \
    "$WARREN" start sf-trust
  out=$BG_OUT
  [ "$BG_RC" != 0 ] || fail "a start with a directory as the bundle worked"
  assert_contains "$out" "$bundle in the sandbox is a directory, not a file" \
    "start with a directory bundle"
  assert_eq stopped "$(sb_state sf-trust)" "state after the failed start"
  assert_contains "$(sb_get sf-trust .error)" "is a directory" "the error"
  timeout 30 "$WARREN" rm -f sf-trust >/dev/null || fail "rm -f failed"
  wait_until 10 test -z "$(root_traces "$id" | grep -F "$id")" || true
  assert_eq "" "$(root_traces "$id" | grep -F "$id" || true)" \
    "what the sandbox left on the host"
  assert_daemon_alive
}
