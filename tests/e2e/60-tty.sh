# shellcheck shell=bash
# End-to-end: terminals. `warren exec -it`, `warren sh` and `warren attach`
# run on a real pseudo-terminal made by tests/helpers/ptydrive, which types
# into it, resizes it and watches what appears.
#
# The process gets a pty of the client's size (`tty`, `stty size`); Ctrl-C
# typed at the terminal interrupts the process inside; a resize reaches it
# as SIGWINCH with the new size; Ctrl-P Ctrl-Q detaches `attach` from a
# background tty process, which keeps running; and the client's terminal
# is restored however warren ends.

PTYDRIVE="$WR_HELPERS/ptydrive"

# drive ROWS COLS CMD... < SCRIPT: the session's output goes to $WR_RUN/pty.out
drive() {
  [ -x "$PTYDRIVE" ] || fail "build first: no $PTYDRIVE"
  "$PTYDRIVE" "$@" >"$WR_RUN/pty.out" ||
    fail "terminal session failed; it showed: $(tr -d '\r' <"$WR_RUN/pty.out")"
}

pty_out() { tr -d '\r' <"$WR_RUN/pty.out"; }

test_tty_and_size() {
  new_sandbox tty-basic
  drive 33 101 "$WARREN" exec -it tty-basic -- \
    sh -c 'tty; stty size; echo "TERM=$TERM"; echo out; echo err >&2; exit 6' <<'EOF'
exit 6
EOF
  out=$(pty_out)
  [[ "$out" =~ /dev/pts/[0-9]+ ]] || fail "tty: $out"
  assert_contains "$out" "33 101" "stty size"
  assert_contains "$out" "TERM=xterm-256color" "TERM"
  assert_contains "$out" "out" "stdout on the terminal"
  assert_contains "$out" "err" "stderr on the terminal"
  # Without -t there is no terminal inside, even when warren has one.
  drive 24 80 "$WARREN" exec -i tty-basic -- sh -c 'tty; exit 0' <<'EOF'
exit 0
EOF
  assert_contains "$(pty_out)" "not a tty" "exec -i on a terminal"
  # -t needs a terminal.
  out=$(must_fail "$WARREN" exec -t tty-basic -- true </dev/null)
  assert_contains "$out" "terminal" "-t without a terminal"
}

test_ctrl_c_interrupts_inside() {
  local start ms
  new_sandbox tty-intr
  start=$(now_ms)
  # The program that says ready is the one Ctrl-C must stop. Not `sh -c
  # 'echo ready; sleep 30'`: dash -c catches SIGINT, and one that comes
  # between the echo and the fork of sleep waits until sleep ends.
  drive 24 80 "$WARREN" exec -it tty-intr -- \
    perl -e '$| = 1; print "ready\n"; sleep 30' <<'EOF'
wait ready
send \x03
exit 130 5
EOF
  ms=$(($(now_ms) - start))
  [ "$ms" -lt 5000 ] || fail "Ctrl-C took ${ms} ms"
  # In a shell, Ctrl-C stops the foreground command and the shell lives on.
  drive 24 80 "$WARREN" exec -it tty-intr -- sh <<'EOF'
wait #
send sleep 30\r
sleep 300
send \x03
send echo alive-$((40+2))\r
wait alive-42 5
send exit 4\r
exit 4
EOF
  assert_eq "" "$("$WARREN" exec tty-intr -- sh -c "$INSIDE_PS")" \
    "processes left after Ctrl-C"
}

test_resize_reaches_the_process() {
  new_sandbox tty-resize
  drive 30 100 "$WARREN" exec -it tty-resize -- \
    sh -c 'trap "stty size" WINCH; echo ready; while :; do sleep 0.05; done' <<'EOF'
wait ready
resize 40 120
wait 40 120
resize 12 34
wait 12 34
send \x03
exit 130
EOF
  # And a shell sees the new size on its next command.
  drive 30 100 "$WARREN" exec -it tty-resize -- sh <<'EOF'
wait #
send stty size\r
wait 30 100
resize 55 66
send stty size\r
wait 55 66
send exit\r
exit 0
EOF
}

test_attach_and_detach_keys() {
  new_sandbox tty-attach
  assert_eq repl "$("$WARREN" exec -d -t --tag repl tty-attach -- sh)" "tag"
  drive 24 80 "$WARREN" attach tty-attach repl <<'EOF'
wait #
send echo hi-$((1+1))\r
wait hi-2
send \x10\x11
wait detached from repl
exit 0
EOF
  assert_eq true "$(api GET /v1/sandboxes/tty-attach/processes/repl | jq -r .running)" \
    "the process after Ctrl-P Ctrl-Q"
  # Ctrl-P alone, or followed by another key, is passed on.
  drive 24 80 "$WARREN" attach tty-attach repl <<'EOF'
wait hi-2
send echo x\x10y-$((3+3))\r
wait y-6
send \x10\x11
exit 0
EOF
  # Again: the kept output first, then the shell, which ends with its code.
  drive 24 80 "$WARREN" attach tty-attach repl <<'EOF'
wait hi-2
send echo again-$((2+2))\r
wait again-4
send exit 7\r
exit 7
EOF
  assert_eq 7 "$(api GET /v1/sandboxes/tty-attach/processes/repl | jq -r .exit_code)" \
    "the process's status"
}

test_warren_sh() {
  new_sandbox tty-sh
  drive 24 80 "$WARREN" sh tty-sh <<'EOF'
sleep 200
send echo "shell=${BASH_VERSINFO}-$((6*7))"\r
wait shell=5-42
send exit 3\r
exit 3
EOF
}

# The terminal's settings before and after warren, in one session.
test_terminal_is_restored() {
  local before i
  new_sandbox tty-restore
  "$WARREN" exec -d -t --tag bg tty-restore -- sh >/dev/null
  drive 24 80 sh -c "
    echo \"before=\$(stty -g)\"
    '$WARREN' exec -it tty-restore -- true
    echo \"after1=\$(stty -g)\"
    '$WARREN' exec -it --timeout 1 tty-restore -- sleep 10
    echo \"after2=\$(stty -g)\"
    '$WARREN' exec -it tty-restore -- sh -c 'kill -KILL \$\$'
    echo \"after3=\$(stty -g)\"
    echo 'SENTINEL'
    '$WARREN' attach tty-restore bg
    echo \"after4=\$(stty -g)\"" <<'EOF'
wait SENTINEL
sleep 300
send \x10\x11
wait after4=
exit 0
EOF
  before=$(pty_out | sed -n 's/^before=//p')
  [ -n "$before" ] || fail "no settings: $(pty_out)"
  for i in 1 2 3 4; do
    assert_eq "$before" "$(pty_out | sed -n "s/^after$i=//p")" \
      "terminal settings after case $i"
  done
}
