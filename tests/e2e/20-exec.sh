# shellcheck shell=bash
# End-to-end: `warren exec` in the foreground.
#
# Exit statuses (the command's, 124, 125, 126, 127, 128+N), separate
# stdout and stderr, output that streams as it happens, environment,
# working directory, users, timeouts, stdin, signals passed on, large
# output in both streams, and many execs in a row.

test_exit_codes() {
  local rc out
  new_sandbox ex-codes
  "$WARREN" exec ex-codes -- true
  rc=0; "$WARREN" exec ex-codes -- sh -c 'exit 3' || rc=$?
  assert_eq 3 "$rc" "exit 3"
  rc=0; "$WARREN" exec ex-codes -- false || rc=$?
  assert_eq 1 "$rc" "false"

  rc=0; out=$("$WARREN" exec ex-codes -- no-such-command 2>&1) || rc=$?
  assert_eq 127 "$rc" "missing command"
  assert_contains "$out" "no-such-command" "missing command message"
  assert_contains "$out" "not found" "missing command message"

  "$WARREN" exec ex-codes -- sh -c 'echo "#!/bin/sh" >/tmp/plain; chmod 644 /tmp/plain'
  rc=0; out=$("$WARREN" exec ex-codes -- /tmp/plain 2>&1) || rc=$?
  assert_eq 126 "$rc" "non-executable file"
  assert_contains "$out" "permission denied" "non-executable message"
  rc=0; out=$("$WARREN" exec ex-codes -- /tmp 2>&1) || rc=$?
  assert_eq 126 "$rc" "a directory as the command"

  rc=0; out=$("$WARREN" exec ex-no-such-sandbox -- true 2>&1) || rc=$?
  assert_eq 125 "$rc" "unknown sandbox"
  assert_contains "$out" "ex-no-such-sandbox" "unknown sandbox message"
}

test_death_by_signal() {
  local rc
  new_sandbox ex-sig
  rc=0; "$WARREN" exec ex-sig -- sh -c 'kill -KILL $$' || rc=$?
  assert_eq 137 "$rc" "SIGKILL"
  rc=0; "$WARREN" exec ex-sig -- sh -c 'kill -TERM $$' || rc=$?
  assert_eq 143 "$rc" "SIGTERM"
  rc=0; "$WARREN" exec ex-sig -- sh -c 'kill -SEGV $$' || rc=$?
  assert_eq 139 "$rc" "SIGSEGV"
}

test_stdout_and_stderr_are_separate() {
  local out tmp
  new_sandbox ex-split
  tmp=$(mktemp -d)
  "$WARREN" exec ex-split -- sh -c 'echo out; echo err >&2; echo out2' \
    >"$tmp/o" 2>"$tmp/e"
  assert_eq "out
out2" "$(cat "$tmp/o")" "stdout"
  assert_eq "err" "$(cat "$tmp/e")" "stderr"
  # Arguments arrive as they were given, spaces and empty ones included.
  out=$("$WARREN" exec ex-split -- printf '%s|' 'a b' '' 'c*' '$HOME')
  assert_eq 'a b||c*|$HOME|' "$out" "argv"
  # Without `--`, options after NAME belong to the command.
  assert_eq "/" "$("$WARREN" exec ex-split ls -d /)" "command options"
  rm -rf "$tmp"
}

test_output_streams_as_it_happens() {
  local tmp t0 t1 t2
  new_sandbox ex-stream
  tmp=$(mktemp)
  t0=$(now_ms)
  "$WARREN" exec ex-stream -- sh -c 'echo first; sleep 2; echo second' |
    while IFS= read -r line; do echo "$(now_ms) $line"; done >"$tmp"
  t1=$(awk '$2=="first" {print $1}' "$tmp")
  t2=$(awk '$2=="second" {print $1}' "$tmp")
  [ -n "$t1" ] && [ -n "$t2" ] || fail "lines missing: $(cat "$tmp")"
  [ $((t1 - t0)) -lt 1500 ] ||
    fail "the first line came after $((t1 - t0)) ms, not before the sleep"
  [ $((t2 - t1)) -ge 1500 ] ||
    fail "the lines came $((t2 - t1)) ms apart; the sleep was 2 s"
  # stderr streams too.
  t0=$(now_ms)
  "$WARREN" exec ex-stream -- sh -c 'echo early >&2; sleep 2' 2>&1 >/dev/null |
    while IFS= read -r line; do echo "$(now_ms) $line"; done >"$tmp"
  t1=$(awk '$2=="early" {print $1}' "$tmp")
  [ -n "$t1" ] && [ $((t1 - t0)) -lt 1500 ] ||
    fail "stderr line late or missing: $(cat "$tmp") (start $t0)"
  rm -f "$tmp"
}

test_environment_and_precedence() {
  local out
  new_sandbox ex-env --env A=sandbox --env B=sandbox --env PATH=/bin:/usr/bin
  out=$("$WARREN" exec --env B=exec -e C=exec ex-env -- \
    sh -c 'echo "$A $B $C"')
  assert_eq "sandbox exec exec" "$out" "sandbox env, exec env on top"
  assert_eq "/bin:/usr/bin" "$("$WARREN" exec ex-env -- printenv PATH)" \
    "sandbox PATH overrides the default"
  assert_eq "/x:/bin:/usr/bin" \
    "$("$WARREN" exec -e PATH=/x:/bin:/usr/bin ex-env -- printenv PATH)" \
    "exec PATH overrides the sandbox's"
  assert_eq "a=b c" "$("$WARREN" exec -e 'V=a=b c' ex-env -- printenv V)" \
    "a value with = and a space"
  out=$("$WARREN" exec ex-env -- sh -c 'echo "$HOME $USER $HOSTNAME"')
  assert_eq "/root root ex-env" "$out" "default HOME USER HOSTNAME"
  # The daemon's own environment does not leak in.
  out=$("$WARREN" exec ex-env -- env)
  assert_not_contains "$out" "WARREN_HOST" "env inside"
  assert_not_contains "$out" "WR_RUN" "env inside"
  must_fail "$WARREN" exec -e 1BAD=x ex-env -- true >/dev/null
}

test_cwd() {
  local rc out
  new_sandbox ex-cwd
  assert_eq / "$("$WARREN" exec ex-cwd -- pwd)" "default cwd"
  assert_eq /tmp "$("$WARREN" exec --cwd /tmp ex-cwd -- pwd)" "--cwd"
  assert_eq /etc "$("$WARREN" exec -w /etc ex-cwd -- pwd)" "-w"
  rc=0; out=$("$WARREN" exec --cwd /no/such/dir ex-cwd -- pwd 2>&1) || rc=$?
  [ "$rc" = 126 ] || fail "--cwd to a missing dir: exit $rc ($out)"
  assert_contains "$out" "working directory" "missing cwd message"
}

test_users() {
  local out
  new_sandbox ex-user
  assert_eq "uid=0(root) gid=0(root) groups=0(root)" \
    "$("$WARREN" exec ex-user -- id)" "default user"
  out=$("$WARREN" exec --user nobody ex-user -- sh -c 'id -u; id -g; echo $HOME $USER')
  assert_eq "65534
65534
/nonexistent nobody" "$out" "--user nobody"
  out=$("$WARREN" exec -u 1000:1000 ex-user -- sh -c 'id -u; id -g; id -G')
  assert_eq "1000
1000
1000" "$out" "--user 1000:1000"
  assert_eq "1234 1234" "$("$WARREN" exec -u 1234 ex-user -- sh -c 'echo $(id -u) $(id -g)')" \
    "--user UID"
  assert_eq "65534 100" \
    "$("$WARREN" exec -u nobody:100 ex-user -- sh -c 'echo $(id -u) $(id -g)')" \
    "--user NAME:GID"
  # A user made inside, with its home and groups; groups by name too.
  "$WARREN" exec ex-user -- useradd -m -u 1500 -G audio,video alice
  assert_eq "1500 1500 1500 29 44 /home/alice alice" \
    "$("$WARREN" exec -u alice ex-user -- sh -c 'echo $(id -u) $(id -g) $(id -G) $HOME $USER')" \
    "--user alice"
  assert_eq "1500 29" "$("$WARREN" exec -u alice:audio ex-user -- sh -c 'echo $(id -u) $(id -g)')" \
    "--user NAME:GROUP"
  assert_eq "1234 44" "$("$WARREN" exec -u 1234:video ex-user -- sh -c 'echo $(id -u) $(id -g)')" \
    "--user UID:GROUP"
  assert_eq "alice /home/alice" \
    "$("$WARREN" exec -u 1500 ex-user -- sh -c 'echo $USER $HOME')" "--user UID of a named user"
  out=$(must_fail "$WARREN" exec -u alice:no-such-group ex-user -- true)
  assert_contains "$out" "no-such-group" "unknown group"
  # An unprivileged user really is one.
  must_fail "$WARREN" exec -u nobody ex-user -- sh -c 'echo x >/etc/x' >/dev/null
  out=$(must_fail "$WARREN" exec -u no-such-user ex-user -- true)
  assert_contains "$out" "no-such-user" "unknown user"
  # A sandbox that wrecks its /etc/passwd can still be repaired as root
  # (the default user), while named users are gone with it.
  "$WARREN" exec ex-user -- sh -c 'cp /etc/passwd /etc/passwd.bak; : >/etc/passwd'
  assert_eq "0 /root" "$("$WARREN" exec ex-user -- sh -c 'echo $(id -u) $HOME')" \
    "root without a passwd entry"
  must_fail "$WARREN" exec -u nobody ex-user -- true >/dev/null
  "$WARREN" exec ex-user -- mv /etc/passwd.bak /etc/passwd
  assert_eq 65534 "$("$WARREN" exec -u nobody ex-user -- id -u)" "after repair"
}

test_timeout() {
  local rc out start ms
  new_sandbox ex-timeout
  start=$(now_ms)
  rc=0; out=$("$WARREN" exec --timeout 1 ex-timeout -- sleep 10 2>&1) || rc=$?
  ms=$(($(now_ms) - start))
  assert_eq 124 "$rc" "exit status after --timeout"
  assert_contains "$out" "timed out" "timeout message"
  [ "$ms" -lt 3500 ] || fail "--timeout 1 took ${ms} ms"
  # Its children die with it.
  assert_eq "" "$("$WARREN" exec ex-timeout -- sh -c "$INSIDE_PS")" \
    "processes left after the timeout"
  # A quick command is not disturbed by a timeout.
  assert_eq hi "$("$WARREN" exec --timeout 500ms ex-timeout -- echo hi)" \
    "quick command with a timeout"
}

test_stdin() {
  local sum
  new_sandbox ex-stdin
  assert_eq hi "$(echo hi | "$WARREN" exec -i ex-stdin -- cat)" "-i"
  assert_eq HELLO "$(echo hello | "$WARREN" exec -i ex-stdin -- tr a-z A-Z)" "tr"
  # Without -i the command gets EOF at once instead of waiting.
  assert_eq "" "$(echo hi | timeout 10 "$WARREN" exec ex-stdin -- cat)" \
    "stdin without -i"
  # Binary and large input arrive whole.
  sum=$(head -c 5000000 /dev/urandom | tee /tmp/ex-stdin.$$ | sha256sum | cut -c1-64)
  assert_eq "$sum" "$("$WARREN" exec -i ex-stdin -- sha256sum </tmp/ex-stdin.$$ | cut -c1-64)" \
    "5 MB of stdin"
  rm -f /tmp/ex-stdin.$$
}

# A process that does not read its stdin holds the client back: warrend
# stops reading from the client instead of buffering without bound.
test_stdin_is_paced_by_the_process() {
  local hwm1 hwm2 n
  new_sandbox ex-stdin-slow
  hwm1=$(awk '/VmHWM/ {print $2}' /proc/"$(daemon_pid)"/status)
  n=$(head -c 100000000 /dev/zero |
    "$WARREN" exec -i ex-stdin-slow -- sh -c 'sleep 3; wc -c')
  assert_eq 100000000 "$n" "bytes read after the pause"
  hwm2=$(awk '/VmHWM/ {print $2}' /proc/"$(daemon_pid)"/status)
  [ $((hwm2 - hwm1)) -lt 32768 ] ||
    fail "warrend's peak memory grew by $(((hwm2 - hwm1) / 1024)) MiB"
}

test_signals_are_passed_on() {
  local pid rc tmp
  new_sandbox ex-sigfwd
  tmp=$(mktemp)
  "$WARREN" exec ex-sigfwd -- sh -c \
    'trap "echo got INT; exit 5" INT; echo ready; sleep 30 & wait' >"$tmp" &
  pid=$!
  wait_until 10 grep -q ready "$tmp" || fail "not started"
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  assert_eq 5 "$rc" "exit status after SIGINT"
  assert_contains "$(cat "$tmp")" "got INT" "the trap's output"
  rm -f "$tmp"
}

test_large_output() {
  local sum tmp
  new_sandbox ex-large
  tmp=$(mktemp -d)
  sum=$("$WARREN" exec ex-large -- sh -c \
    'head -c 50000000 /dev/urandom >/tmp/big; sha256sum </tmp/big' | cut -c1-64)
  "$WARREN" exec ex-large -- cat /tmp/big >"$tmp/out"
  assert_eq 50000000 "$(stat -c %s "$tmp/out")" "bytes of stdout"
  assert_eq "$sum" "$(sha256sum <"$tmp/out" | cut -c1-64)" "50 MB through stdout"
  # Both streams at once, with no deadlock when one is read slower.
  "$WARREN" exec ex-large -- sh -c \
    'head -c 10000000 /tmp/big; head -c 10000000 /tmp/big >&2; head -c 10000000 /tmp/big' \
    >"$tmp/o" 2>"$tmp/e"
  sum=$("$WARREN" exec ex-large -- sh -c 'head -c 10000000 /tmp/big | sha256sum' | cut -c1-64)
  assert_eq 20000000 "$(stat -c %s "$tmp/o")" "stdout bytes"
  assert_eq "$sum" "$(sha256sum <"$tmp/e" | cut -c1-64)" "10 MB of stderr"
  # A reader that goes away early does not hang anything.
  assert_eq 1000 "$("$WARREN" exec ex-large -- cat /tmp/big | head -c 1000 | wc -c)" \
    "early close of stdout"
  assert_eq ok "$("$WARREN" exec ex-large -- echo ok)" "exec afterwards"
  rm -rf "$tmp"
}

test_many_quick_execs() {
  local fds1 fds2 start ms i
  new_sandbox ex-many
  "$WARREN" exec ex-many -- true
  fds1=$(ls /proc/"$(daemon_pid)"/fd | wc -l)
  start=$(now_ms)
  for i in $(seq 1 100); do
    [ "$("$WARREN" exec ex-many -- echo "$i")" = "$i" ] || fail "exec $i"
  done
  ms=$(($(now_ms) - start))
  [ "$ms" -lt 30000 ] || fail "100 execs took ${ms} ms"
  # Failed starts and nonzero exits must not leak either.
  for i in $(seq 1 20); do
    "$WARREN" exec ex-many -- no-such-cmd 2>/dev/null && fail "ran?"
    "$WARREN" exec ex-many -- sh -c 'exit 7' && fail "exit 7 was 0"
  done
  fds2=$(ls /proc/"$(daemon_pid)"/fd | wc -l)
  [ "$fds2" -le $((fds1 + 2)) ] || fail "warrend fds grew from $fds1 to $fds2"
  # No zombies or leftover processes inside.
  assert_eq "" "$("$WARREN" exec ex-many -- sh -c "$INSIDE_PS")" \
    "processes left inside"
}

test_concurrent_execs() {
  local i pids=() tmp
  new_sandbox ex-conc
  tmp=$(mktemp -d)
  for i in $(seq 1 10); do
    "$WARREN" exec ex-conc -- sh -c "sleep 0.5; echo $i" >"$tmp/$i" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "a concurrent exec failed"; done
  for i in $(seq 1 10); do
    assert_eq "$i" "$(cat "$tmp/$i")" "output of concurrent exec $i"
  done
  rm -rf "$tmp"
}

# No process of an exec is left behind when its client dies, even one that
# never writes (the daemon only learns of a dead client when it writes).
test_dead_client_kills_its_process() {
  local pid
  new_sandbox ex-dead
  "$WARREN" exec ex-dead -- sh -c 'sleep 100' &
  pid=$!
  wait_until 5 sandbox_runs ex-dead sleep ||
    fail "sleep did not start"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  wait_until 5 sandbox_quiet ex-dead ||
    fail "left running after the client died: $("$WARREN" exec ex-dead -- sh -c "$INSIDE_PS")"
  # The same for a plain (NDJSON) exec over curl.
  curl -sS -N --unix-socket "$WR_SOCK" -d '{"cmd":["sleep","100"]}' \
    http://warren/v1/sandboxes/ex-dead/exec >/dev/null &
  pid=$!
  wait_until 5 sandbox_runs ex-dead sleep ||
    fail "sleep did not start (curl)"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  wait_until 5 sandbox_quiet ex-dead ||
    fail "left running after curl died"
}

# A raw client that sends its input, then shuts down its sending side,
# still gets the rest of the output and the exit.
test_half_closed_client_gets_the_output() {
  local out
  new_sandbox ex-half
  out=$(python3 - "$WR_SOCK" <<'PY'
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
body = json.dumps({"cmd": ["sh", "-c", "cat; sleep 0.3; echo tail"]}).encode()
s.sendall(b"POST /v1/sandboxes/ex-half/exec HTTP/1.1\r\nConnection: Upgrade\r\n"
          b"Upgrade: warren-exec\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
out = b""
while b"\r\n\r\n" not in out:
    out += s.recv(65536)
s.sendall(b"\x00" + struct.pack(">I", 3) + b"in\n")
s.shutdown(socket.SHUT_WR)
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
out = out[out.index(b"\r\n\r\n") + 4:]
text, code = b"", None
while out:
    t, n = out[0], struct.unpack(">I", out[1:5])[0]
    if t == 11:
        text += out[5:5 + n]
    if t == 13:
        code = json.loads(out[5:5 + n])["exit_code"]
    out = out[5 + n:]
print(repr(text), code)
PY
)
  assert_eq "b'in\\ntail\\n' 0" "$out" "output after a half-close"
}
