# shellcheck shell=bash
# End-to-end: `warren run` and agent kits, following the walkthrough
# (docs/agents.md) with the `shell` kit, in real terminals: each `warren
# run` is started in a tmux window of a private tmux server, keys are sent
# with `tmux send-keys` and the screen is read with `tmux capture-pane`.
#
# The agent's session is a background tty process the daemon keeps:
# Ctrl-P Ctrl-Q detaches and says how to come back, the session keeps
# running (`warren ps`), a second `warren run` shows its recent screen and
# takes input again; exiting the shell ends `warren run` with its status
# and leaves the sandbox running; after `warren stop`, `warren run` starts
# the sandbox again with its files. `-- CMD` runs in sessions of its own
# (run-1, run-2) that `warren attach` reaches. A kit of the user's own
# (ROOT/kits/NAME.json) is used, with its variables; a broken one is
# refused naming its file and field; a kit whose secret is not set gets a
# hint. A kit's npm package is installed on first run, through the policy,
# from a mock registry (tests/net/upstreams.py, as in 100-network.sh).
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

command -v tmux >/dev/null || fail "tmux is missing (scripts/install-deps installs it)"

RUN_DIR=$WR_RUN/run-e2e
# Workspaces must be project directories, not under /run or the state root.
RUN_PROJECTS=/tmp/warren-e2e-run
RUN_TMUX=warren-e2e-run-$$
RUN_KITS=$WR_ROOT/kits
NET_TOOLS=$WR_TOP/tests/net
NET_DIR=$WR_RUN/net-run
NET_HOSTS=$NET_DIR/hosts

run_host_ip() {
  ip -4 -o addr show scope global 2>/dev/null |
    awk '{ sub(/\/.*/, "", $4); print $4; exit }'
}
HOST_IP=$(run_host_ip)

# The mock npm registry is reg.test, on the host's address (a private one,
# so the sandbox needs an IP rule for it as well as a name rule).
daemon_args() {
  mkdir -p "$NET_DIR"
  {
    echo "# warren's run tests (tests/e2e/113-run.sh)"
    if [ -n "$HOST_IP" ]; then echo "$HOST_IP reg.test"; fi
  } >"$NET_HOSTS"
  echo "--hosts-file $NET_HOSTS"
}

# ---- terminals ----------------------------------------------------------------

tm() { tmux -L "$RUN_TMUX" "$@"; }

# Kill our tmux server, our kits and the sandboxes when the test ends.
run_cleanup() {
  local s
  tm kill-server >/dev/null 2>&1 || true
  rm -f "$RUN_KITS"/e2e-*.json
  rm -rf "$RUN_PROJECTS"
  if [ -n "${UP_PID:-}" ]; then kill "$UP_PID" 2>/dev/null || true; fi
  for s in ${WR_CLEANUP:-}; do
    "$WARREN" rm -f "$s" >/dev/null 2>&1 || true
  done
}

run_sandbox() { # NAME [create args...]
  new_sandbox "$@"
  trap run_cleanup EXIT
  mkdir -p "$RUN_DIR"
}

# A project directory for a workspace, made fresh.
project_dir() { # NAME
  local d=$RUN_PROJECTS/$1
  rm -rf "$d"
  mkdir -p "$d"
  echo "hello from the host" >"$d/README"
  chown -R 4242:4343 "$d" # not root's: warren refuses those
  echo "$d"
}

# Start `warren ARGS...` in a new tmux window named WIN (120x40); its exit
# status goes to $RUN_DIR/WIN.rc when it ends.
term_start() { # WIN ARGS...
  local win=$1 cmd q
  shift
  rm -f "$RUN_DIR/$win.rc"
  printf -v q '%q ' "$WARREN" "$@"
  cmd="env WARREN_HOST=$WARREN_HOST $q; echo \$? >$RUN_DIR/$win.rc; sleep 600"
  if tm has-session -t e2e 2>/dev/null; then
    tm new-window -t e2e -n "$win" "$cmd"
  else
    tm new-session -d -s e2e -n "$win" -x 120 -y 40 "$cmd"
  fi
}

screen_of() { tm capture-pane -p -J -S -300 -t "e2e:$1"; }

screen_has() { screen_of "$1" | grep -qF -- "$2"; }

wait_screen() { # WIN TEXT [SECONDS]
  wait_until "${3:-15}" screen_has "$1" "$2" ||
    fail "window $1 never showed '$2'; it shows: $(screen_of "$1")"
}

keys() { # WIN KEYS...
  local win=$1
  shift
  tm send-keys -t "e2e:$win" "$@"
}

type_line() { keys "$1" -l "$2" && keys "$1" Enter; }

# The exit status of the warren in WIN, once it has ended.
term_rc() { # WIN
  wait_until 15 test -s "$RUN_DIR/$1.rc" ||
    fail "warren in window $1 did not end; it shows: $(screen_of "$1")"
  cat "$RUN_DIR/$1.rc"
}

proc_field() { # SANDBOX TAG FIELD
  api GET "/v1/sandboxes/$1/processes/$2" | jq -r ".$3"
}

# ---- the walkthrough with the shell kit -------------------------------------

test_run_detach_reattach_exit() {
  local dir out
  run_sandbox run-walk shell "$(project_dir walk)"
  assert_eq shell "$(sb_get run-walk .agent)" "agent"

  # The agent's session starts in the workspace.
  term_start w1 run --name run-walk
  wait_screen w1 "/workspace#"
  type_line w1 'echo marker-$((0+1)); pwd'
  wait_screen w1 "marker-1"
  screen_of w1 | grep -qx '/workspace' || fail "not in /workspace: $(screen_of w1)"

  # Detach: warren says how to come back and exits 0; the shell runs on.
  keys w1 C-p C-q
  wait_screen w1 "come back with: warren run --name run-walk"
  assert_eq 0 "$(term_rc w1)" "warren run after a detach"
  assert_eq true "$(proc_field run-walk agent running)" "the agent after detach"
  out=$("$WARREN" ps run-walk)
  assert_contains "$out" "agent" "warren ps"
  assert_contains "$out" "running" "warren ps"

  # Re-attach: the kept screen comes back before anything is typed.
  term_start w2 run --name run-walk
  wait_screen w2 "marker-1"
  type_line w2 'echo second-$((40+2))'
  wait_screen w2 "second-42"
  assert_eq 1 "$(api GET /v1/sandboxes/run-walk/processes | jq '.processes | length')" \
    "sessions after re-attaching (no second agent)"

  # Exiting the shell ends warren run with its status; the sandbox runs on
  # and the finished session is gone.
  type_line w2 'exit 3'
  wait_screen w2 "keeps running"
  assert_eq 3 "$(term_rc w2)" "warren run's exit status"
  assert_eq running "$(sb_state run-walk)" "the sandbox after the agent exited"
  assert_eq 404 "$(api_status GET /v1/sandboxes/run-walk/processes/agent)" \
    "the finished session"

  # The next run starts a new session.
  term_start w3 run --name run-walk
  wait_screen w3 "/workspace#"
  type_line w3 'exit 0'
  assert_eq 0 "$(term_rc w3)" "a new session's exit"
  dir=$(sb_get run-walk .workspace.path)
  [ -f "$dir/README" ] || fail "the workspace lost its file"
}

# The agent's session is the sandbox's, not warrend's: it outlives a
# killed daemon (the same shell, its history intact, its screen shown
# again).
test_run_session_outlives_a_daemon_restart() {
  local pid id
  run_sandbox run-restart shell "$(project_dir restart)"
  id=$(sb_get run-restart .id)
  term_start r1 run --name run-restart
  wait_screen r1 "/workspace#"
  type_line r1 'echo shell-pid=$$'
  wait_screen r1 "shell-pid="
  pid=$(screen_of r1 | sed -n 's/^shell-pid=\([0-9]*\)$/\1/p')
  [ -n "$pid" ] || fail "no pid on the screen: $(screen_of r1)"
  keys r1 C-p C-q
  assert_eq 0 "$(term_rc r1)" "detach"
  # The session's screen reaches the disk as it comes (outlog.c), so even
  # a killed daemon leaves it to the next one.
  wait_until 10 sh -c "cat '$WR_ROOT'/sandboxes/$id/output/*/* |
    grep -aq 'shell-pid=$pid'" || fail "the screen never reached the disk"
  kill_daemon
  # shellcheck disable=SC2046 # words, on purpose
  start_daemon $(daemon_args)
  # The kept screen comes back with the session.
  term_start r2 run --name run-restart
  wait_screen r2 "shell-pid=$pid"
  type_line r2 'echo now-pid=$$'
  wait_screen r2 "now-pid=$pid"
  type_line r2 'exit 5'
  assert_eq 5 "$(term_rc r2)" "the session's exit after the restart"
}

# stop, then run: the sandbox starts again and its files are still there.
test_run_starts_a_stopped_sandbox() {
  local out
  run_sandbox run-stop shell "$(project_dir stop)"
  "$WARREN" exec run-stop -- sh -c 'echo kept-$((6*7)) >/root/kept'
  "$WARREN" stop run-stop >/dev/null
  assert_eq stopped "$(sb_state run-stop)"
  out=$("$WARREN" run --name run-stop -- cat /root/kept </dev/null 2>&1) ||
    fail "run on a stopped sandbox: $out"
  assert_contains "$out" "starting sandbox \`run-stop\`" "run's message"
  assert_contains "$out" "kept-42" "the file written before the stop"
  assert_eq running "$(sb_state run-stop)"
  # Paused: resumed.
  "$WARREN" pause run-stop >/dev/null
  out=$("$WARREN" run --name run-stop -- true </dev/null 2>&1) ||
    fail "run on a paused sandbox: $out"
  assert_contains "$out" "resuming" "run's message"
  assert_eq running "$(sb_state run-stop)"
  # And in a terminal, the agent's session after a stop and start.
  "$WARREN" stop run-stop >/dev/null
  term_start s1 run --name run-stop
  wait_screen s1 "/workspace#"
  type_line s1 'cat /root/kept; exit 5'
  wait_screen s1 "kept-42"
  assert_eq 5 "$(term_rc s1)"
}

# `-- CMD`: its own sessions, run-1 then run-2, reachable with attach.
test_run_command_sessions() {
  local out rc
  run_sandbox run-cmd
  rc=0
  out=$("$WARREN" run --name run-cmd -- sh -c 'echo out-$((1+1)); exit 4' </dev/null) ||
    rc=$?
  assert_eq 4 "$rc" "exit status of -- CMD"
  assert_contains "$out" "out-2" "output of -- CMD"

  term_start c1 run --name run-cmd -- sh
  wait_screen c1 "#"
  type_line c1 'echo one-$((2*3))'
  wait_screen c1 "one-6"
  keys c1 C-p C-q
  wait_screen c1 "come back with: warren attach run-cmd run-1"
  assert_eq true "$(proc_field run-cmd run-1 running)" "run-1 after detach"
  # A second command gets run-2 while run-1 runs; the agent is untouched.
  term_start c2 run --name run-cmd -- sh -c 'echo two; sleep 600'
  wait_screen c2 "two"
  assert_eq true "$(proc_field run-cmd run-2 running)" "run-2"
  assert_eq 404 "$(api_status GET /v1/sandboxes/run-cmd/processes/agent)" \
    "no agent session for -- CMD"
  keys c2 C-p C-q
  wait_screen c2 "detached"
  # attach reaches run-1 with its screen.
  term_start c3 attach run-cmd run-1
  wait_screen c3 "one-6"
  type_line c3 'exit 9'
  assert_eq 9 "$(term_rc c3)" "attach's exit status"
  # Options of the command belong to it; a missing command is refused.
  out=$("$WARREN" run --name run-cmd -- echo --name x </dev/null)
  assert_contains "$out" "--name x" "the command's own options"
  out=$(must_fail "$WARREN" run --name run-cmd -- no-such-program </dev/null)
  assert_contains "$out" "command not found"
  "$WARREN" run --name run-cmd -- no-such-program </dev/null >/dev/null 2>&1 ||
    assert_eq 127 "$?" "exit status for a missing program"
}

# A kit of the user's own: its command and its variables.
test_run_custom_kit() {
  local out
  mkdir -p "$RUN_KITS"
  cat >"$RUN_KITS/e2e-kit.json" <<'EOF'
{
  "description": "a test kit",
  "command": ["sh", "-c", "echo kit-ok; exec sh"],
  "env": {"FOO": "bar"},
  "allow": ["kit.example.test"]
}
EOF
  out=$(api GET /v1/kits/e2e-kit)
  assert_eq "$RUN_KITS/e2e-kit.json" "$(json_get "$out" .source)" "the kit's file"
  assert_eq bar "$(json_get "$out" .env.FOO)" "the kit's env"
  api GET /v1/kits | jq -e '.kits | map(.name) | index("e2e-kit") and index("shell") and index("claude") and index("codex")' >/dev/null ||
    fail "GET /v1/kits: $(api GET /v1/kits)"
  run_sandbox run-kit e2e-kit "$(project_dir kit)"
  term_start k1 run --name run-kit
  wait_screen k1 "kit-ok"
  type_line k1 'echo "foo=$FOO in $(pwd)"'
  wait_screen k1 "foo=bar in /workspace"
  type_line k1 'exit 0'
  assert_eq 0 "$(term_rc k1)"

  # A broken kit is refused with its file and field named.
  echo '{"command": ["sh"], "alow": []}' >"$RUN_KITS/e2e-broken.json"
  api_call GET /v1/kits/e2e-broken
  assert_eq 400 "$API_STATUS" "a broken kit"
  assert_contains "$(json_get "$API_BODY" .error.message)" "$RUN_KITS/e2e-broken.json"
  assert_contains "$(json_get "$API_BODY" .error.message)" "\`alow\`"
  api_call GET /v1/kits/e2e-nosuch
  assert_eq 404 "$API_STATUS" "an unknown kit"
  assert_contains "$(json_get "$API_BODY" .error.message)" "shell"
  api GET /v1/kits | jq -e '.kits[] | select(.name == "e2e-broken") | .error' >/dev/null ||
    fail "the list does not show the broken kit's error"
}

# A kit that names a secret that is not set: one line of advice, then the
# agent runs anyway.
test_run_secret_advice() {
  local out
  mkdir -p "$RUN_KITS"
  echo '{"command": ["sh", "-c", "echo agent-ran"], "secret": "e2e-unset"}' \
    >"$RUN_KITS/e2e-secret.json"
  run_sandbox run-secret e2e-secret "$(project_dir secret)"
  out=$("$WARREN" run --name run-secret </dev/null 2>&1) || fail "run: $out"
  assert_contains "$out" "secret \`e2e-unset\` is not set"
  assert_contains "$out" "warren secret set e2e-unset"
  assert_contains "$out" "agent-ran"
}

test_run_errors() {
  local out
  out=$(must_fail "$WARREN" run --name run-nosuch)
  assert_contains "$out" "no sandbox \`run-nosuch\`: create one with warren create --name run-nosuch [AGENT] PATH"
  out=$(must_fail "$WARREN" run)
  assert_contains "$out" "--name"
  out=$(must_fail "$WARREN" run --name x --)
  assert_contains "$out" "followed by a command"
  out=$(must_fail "$WARREN" run --name x --detach-keys ctrl-1)
  assert_contains "$out" "detach key"
  "$WARREN" run --help | grep -q "Ctrl-P Ctrl-Q" || fail "run --help"
}

# --detach-keys: another sequence detaches; Ctrl-P Ctrl-Q then does not.
test_run_detach_keys() {
  run_sandbox run-keys
  term_start d1 run --name run-keys --detach-keys ctrl-a,d
  wait_screen d1 "#"
  keys d1 C-p C-q
  type_line d1 'echo still-$((5+5))'
  wait_screen d1 "still-10"
  keys d1 C-a d
  wait_screen d1 "come back with"
  assert_eq 0 "$(term_rc d1)"
  assert_eq true "$(proc_field run-keys agent running)"
}

# A kit's npm package is installed on first run, through the policy: from
# the mock registry, which the kit's npm_config_registry names. The mock
# package has no program, so run then says the kit and its package do not
# match. Without a rule for the registry, the install fails and says where
# to look.
test_run_npm_install_on_first_run() {
  local out ready
  [ -n "$HOST_IP" ] || skip "this host has no global IPv4 address for the mock registry"
  mkdir -p "$NET_DIR/up"
  rm -f "$NET_DIR/up/ready"
  python3 "$NET_TOOLS/upstreams.py" --addr "$HOST_IP" \
    --log "$NET_DIR/up/log" --ready "$NET_DIR/up/ready" \
    --services registry >"$NET_DIR/up/out" 2>&1 &
  UP_PID=$!
  trap run_cleanup EXIT
  wait_until 10 test -s "$NET_DIR/up/ready" ||
    fail "the mock registry did not start: $(cat "$NET_DIR/up/out")"
  ready=$(jq -r .registry "$NET_DIR/up/ready")
  mkdir -p "$RUN_KITS"
  cat >"$RUN_KITS/e2e-npm.json" <<EOF
{
  "command": ["warren-e2e-tool"],
  "npm": "warren-e2e-tool",
  "env": {"npm_config_registry": "http://reg.test:$ready/",
          "npm_config_fetch_retries": "0", "npm_config_audit": "false",
          "npm_config_fund": "false"}
}
EOF
  run_sandbox run-npm e2e-npm "$(project_dir npm)"
  out=$("$WARREN" run --name run-npm </dev/null 2>&1) &&
    fail "install without a rule worked: $out"
  assert_contains "$out" "installing warren-e2e-tool"
  assert_contains "$out" "could not install warren-e2e-tool"
  assert_contains "$out" "warren policy log --sandbox run-npm"

  "$WARREN" policy allow network --sandbox run-npm reg.test >/dev/null
  "$WARREN" policy allow network --sandbox run-npm "$HOST_IP" >/dev/null
  out=$("$WARREN" run --name run-npm </dev/null 2>&1) &&
    fail "a package without the kit's program was accepted: $out"
  assert_contains "$out" "installing warren-e2e-tool"
  assert_contains "$out" "still not found"
  "$WARREN" exec run-npm -- test -f /usr/local/lib/node_modules/warren-e2e-tool/package.json ||
    fail "the package was not installed globally"
  grep -q '"path": "/warren-e2e-tool"' "$NET_DIR/up/log" ||
    fail "the registry never saw the package: $(tail -5 "$NET_DIR/up/log")"
}
