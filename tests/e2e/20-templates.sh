# shellcheck shell=bash
# End-to-end: templates. A real Vite + React app (tests/fixtures/vite-app)
# is built from its Dockerfile: `npm install` through the balanced policy,
# once (the layers are cached under the state root, so the later tests and
# a later run reuse them). A second build reuses every layer; a change to
# a file copied late reruns only that step; a failing RUN names itself and
# keeps the layers before it. A sandbox made from the template serves the
# app's page as soon as its create returns (its CMD started, its EXPOSE
# port answering); --no-wait returns before; a CMD that never listens
# fails the create with its last output, after --ready-timeout; a stop and
# start runs CMD again; a fork of a template sandbox serves too.
# Sourced by tests/run-e2e, which provides lib.sh.

TPL_FIXTURE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures/vite-app" && pwd)
TPL_DIR=$WR_RUN/templates

# Skip (77) unless npm on the host reaches its registry (the install in
# the template's RUN needs it, as tests/e2e/120-install.sh does).
tpl_need_registry() {
  command -v npm >/dev/null || skip "npm is not installed on the host"
  timeout 60 npm view vite@5 version >/dev/null 2>&1 ||
    skip "npm on the host cannot reach its registry"
}

# The Vite template, built once per daemon state root (later calls find
# every layer cached, which is what test_rebuild_reuses_every_layer checks).
tpl_vite() {
  tpl_need_registry
  "$WARREN" policy init balanced >/dev/null
  "$WARREN" image build vite -f "$TPL_FIXTURE/Dockerfile" "$TPL_FIXTURE" \
    >"$WR_RUN/vite-build.out" 2>&1 ||
    fail "the vite template did not build: $(tail -20 "$WR_RUN/vite-build.out")"
}

# A small context of its own: DIR gets the Dockerfile read from stdin.
tpl_context() { # DIR
  rm -rf "$1"
  mkdir -p "$1"
  cat >"$1/Dockerfile"
}

# The page, fetched inside the sandbox from the dev server.
tpl_page() { # SANDBOX [PORT]
  "$WARREN" exec "$1" -- curl -fsS --noproxy '*' --max-time 5 \
    "http://127.0.0.1:${2:-5173}/"
}

test_vite_template_builds_and_rebuild_reuses_every_layer() {
  local out
  tpl_vite
  out=$("$WARREN" image build vite -f "$TPL_FIXTURE/Dockerfile" \
    "$TPL_FIXTURE" 2>&1) || fail "rebuild: $out"
  assert_contains "$out" "Step 3/7 : COPY package.json ./ (cached)"
  assert_contains "$out" "Step 4/7 : RUN npm install --no-audit --no-fund (cached)"
  assert_contains "$out" "Step 5/7 : COPY . . (cached)"
  assert_contains "$out" "(0 steps run, 3 cached"
  out=$("$WARREN" image ls)
  assert_contains "$out" "template" "image ls"
  out=$("$WARREN" image ls --json)
  assert_eq base "$(jq -r '.[] | select(.name == "vite") | .parent' <<<"$out")"
  out=$("$WARREN" image inspect vite)
  assert_contains "$out" 'cmd:      ["npx","vite","--host","0.0.0.0"]'
  assert_contains "$out" "expose:   5173"
  assert_contains "$out" "workdir:  /app"
}

test_a_change_reruns_only_the_steps_after_it() {
  local ctx=$TPL_DIR/vite-changed out
  tpl_vite
  rm -rf "$ctx"
  mkdir -p "$TPL_DIR"
  cp -a "$TPL_FIXTURE" "$ctx"
  echo "// changed $(now_ms)" >>"$ctx/src/main.jsx"
  out=$("$WARREN" image build vite-changed -f "$ctx/Dockerfile" "$ctx" 2>&1) ||
    fail "build: $out"
  assert_contains "$out" "Step 3/7 : COPY package.json ./ (cached)"
  assert_contains "$out" "Step 4/7 : RUN npm install --no-audit --no-fund (cached)"
  assert_not_contains "$out" "Step 5/7 : COPY . . (cached)"
  assert_contains "$out" "(1 step run, 2 cached"
  "$WARREN" image rm vite-changed >/dev/null
}

test_failing_run_names_itself_and_keeps_earlier_layers() {
  local ctx=$TPL_DIR/failing out
  tpl_context "$ctx" <<'EOF'
FROM base
RUN echo first > /first
RUN echo "about to fail"; exit 3
EOF
  out=$(must_fail "$WARREN" image build failing -f "$ctx/Dockerfile" "$ctx")
  assert_contains "$out" "step 3/3 (line 3)"
  assert_contains "$out" 'RUN echo "about to fail"; exit 3'
  assert_contains "$out" "exit code 3"
  assert_contains "$out" "about to fail"
  must_fail "$WARREN" image inspect failing >/dev/null
  # Fixed, it reruns only the step that failed.
  printf 'FROM base\nRUN echo first > /first\nRUN cat /first\n' >"$ctx/Dockerfile"
  out=$("$WARREN" image build failing -f "$ctx/Dockerfile" "$ctx" 2>&1) ||
    fail "build: $out"
  assert_contains "$out" "Step 2/3 : RUN echo first > /first (cached)"
  assert_contains "$out" "first"
  "$WARREN" image rm failing >/dev/null
}

test_bad_dockerfiles_are_refused_with_their_line() {
  local ctx=$TPL_DIR/bad out
  tpl_context "$ctx" <<'EOF'
FROM base
ENTRYPOINT ["sh"]
EOF
  out=$(must_fail "$WARREN" image build bad -f "$ctx/Dockerfile" "$ctx")
  assert_contains "$out" "Dockerfile line 2: \`ENTRYPOINT\` is not supported"
  printf 'FROM nothing-like-this\n' >"$ctx/Dockerfile"
  out=$(must_fail "$WARREN" image build bad -f "$ctx/Dockerfile" "$ctx")
  assert_contains "$out" "no image or template \`nothing-like-this\`"
  printf 'FROM base\nCOPY missing.txt /x\n' >"$ctx/Dockerfile"
  out=$(must_fail "$WARREN" image build bad -f "$ctx/Dockerfile" "$ctx")
  assert_contains "$out" "\`missing.txt\` is not in the build context"
  out=$(must_fail "$WARREN" image build base -f "$ctx/Dockerfile" "$ctx")
  assert_contains "$out" "is an image"
  assert_daemon_alive
}

test_create_from_the_template_serves_the_page() {
  local page out
  tpl_vite
  new_sandbox tpl-web --image vite
  # No wait here: the create returned once the port answered.
  page=$(tpl_page tpl-web) || fail "the page did not answer right after create"
  assert_contains "$page" 'data-app="warren-vite-fixture"'
  assert_contains "$page" "/src/main.jsx"
  page=$("$WARREN" exec tpl-web -- curl -fsS --noproxy '*' \
    http://127.0.0.1:5173/src/main.jsx)
  assert_contains "$page" "Hello from a warren template"
  assert_contains "$("$WARREN" ps tpl-web)" "npx vite --host 0.0.0.0"
  assert_eq /app "$("$WARREN" exec tpl-web -- pwd)"
  out=$("$WARREN" events --json --sandbox "$(sb_get tpl-web .id)" |
    jq -r 'select(.type == "template") | "\(.phase) \(.port)"')
  assert_eq "ready 5173" "$out" "the template event"
  # A template in use is not removed.
  assert_contains "$(must_fail "$WARREN" image rm vite)" "used by 1 sandbox"
}

# A warm pool of the template: its spare was created with its dev server
# answering, so a claim serves the page at once; the start command keeps
# the pool's environment unless --restart-start asks for the create's.
tpl_pool_ready() {
  [ "$(api GET /v1/pools | jq '.pools[] | select(.image == "vite") | .ready')" = 1 ]
}

start_env() { # SANDBOX: the environment of its dev server
  "$WARREN" exec "$1" -- sh -c \
    'tr "\0" "\n" </proc/$(pgrep -o -f "vite --host")/environ'
}

test_a_pool_of_the_template_serves_at_claim() {
  local out page env
  tpl_vite
  WR_CLEANUP="${WR_CLEANUP:-} tpl-pooled tpl-restarted"
  trap '"$WARREN" pool rm vite >/dev/null 2>&1 || true; for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  "$WARREN" rm -f tpl-pooled tpl-restarted >/dev/null 2>&1 || true
  "$WARREN" pool set vite --size 1 >/dev/null || fail "pool set vite"
  wait_until 120 tpl_pool_ready || fail "the pool never filled: $(api GET /v1/pools)"
  out=$("$WARREN" create --name tpl-pooled --image vite --env GREETING=hi --json) ||
    fail "create from the pool"
  assert_eq true "$(jq -r .from_pool <<<"$out")" "from the pool"
  page=$(tpl_page tpl-pooled) || fail "the page did not answer right after the claim"
  assert_contains "$page" 'data-app="warren-vite-fixture"'
  assert_eq hi "$("$WARREN" exec tpl-pooled -- printenv GREETING)" "an exec's env"
  env=$(start_env tpl-pooled) || fail "no environment of the start command"
  if grep -q '^GREETING=' <<<"$env"; then
    fail "the start command has the create's env"
  fi
  wait_until 120 tpl_pool_ready || fail "the pool did not refill"
  out=$("$WARREN" create --name tpl-restarted --image vite --env GREETING=hi \
    --restart-start --json) || fail "create with --restart-start"
  assert_eq true "$(jq -r .from_pool <<<"$out")" "from the pool (restarted)"
  page=$(tpl_page tpl-restarted) || fail "no page after the restart"
  assert_contains "$page" 'data-app="warren-vite-fixture"'
  env=$(start_env tpl-restarted) || fail "no environment of the restarted command"
  grep -qx 'GREETING=hi' <<<"$env" ||
    fail "the restarted start command lacks the create's env: $env"
  "$WARREN" pool rm vite >/dev/null
}

test_stop_start_restarts_the_start_command() {
  local page
  tpl_vite
  new_sandbox tpl-restart --image vite
  "$WARREN" stop tpl-restart >/dev/null
  must_fail tpl_page tpl-restart >/dev/null
  "$WARREN" start tpl-restart >/dev/null
  page=$(tpl_page tpl-restart) || fail "no page right after start"
  assert_contains "$page" 'data-app="warren-vite-fixture"'
}

test_fork_of_a_template_sandbox_serves_too() {
  local page
  tpl_vite
  new_sandbox tpl-src --image vite
  "$WARREN" exec tpl-src -- sh -c 'sed -i "s/Hello from/Forked from/" src/main.jsx'
  "$WARREN" snapshot tpl-src --name tpl-snap >/dev/null || fail "snapshot"
  new_sandbox tpl-fork --snapshot tpl-snap
  page=$(tpl_page tpl-fork) || fail "the fork did not serve right after create"
  assert_contains "$page" 'data-app="warren-vite-fixture"'
  page=$("$WARREN" exec tpl-fork -- curl -fsS --noproxy '*' \
    http://127.0.0.1:5173/src/main.jsx)
  assert_contains "$page" "Forked from a warren template"
  "$WARREN" rm -f tpl-fork >/dev/null
  api DELETE /v1/snapshots/tpl-snap >/dev/null
}

# A server that listens only after 3 s: --no-wait returns before.
test_no_wait_returns_before_the_port_answers() {
  local ctx=$TPL_DIR/slow
  tpl_context "$ctx" <<'EOF'
FROM base
WORKDIR /srv
RUN echo slow > index.html
EXPOSE 8000
CMD ["sh", "-c", "sleep 3; exec python3 -m http.server 8000"]
EOF
  "$WARREN" image build slow -f "$ctx/Dockerfile" "$ctx" >/dev/null 2>&1 ||
    fail "build slow"
  new_sandbox tpl-slow --image slow --no-wait
  must_fail tpl_page tpl-slow 8000 >/dev/null
  wait_until 30 tpl_page tpl-slow 8000 || fail "it never answered"
  assert_contains "$(tpl_page tpl-slow 8000)" "slow"
  # Without --no-wait the create waits for it.
  new_sandbox tpl-slow2 --image slow
  assert_contains "$(tpl_page tpl-slow2 8000)" "slow"
}

test_ready_timeout_fails_with_the_last_output() {
  local ctx=$TPL_DIR/deaf out
  tpl_context "$ctx" <<'EOF'
FROM base
EXPOSE 9
CMD ["sh", "-c", "echo never listening; sleep 1000"]
EOF
  "$WARREN" image build deaf -f "$ctx/Dockerfile" "$ctx" >/dev/null 2>&1 ||
    fail "build deaf"
  WR_CLEANUP="tpl-deaf"
  trap 'for s in $WR_CLEANUP; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done' EXIT
  out=$(must_fail "$WARREN" create --name tpl-deaf --image deaf \
    --ready-timeout 2)
  assert_contains "$out" "did not answer on port 9 within 2 s"
  assert_contains "$out" "never listening"
  assert_eq not_ready "$("$WARREN" events --json --sandbox \
    "$(sb_get tpl-deaf .id)" | jq -r 'select(.type == "template") | .phase')"
  # Left running, to be looked at.
  assert_eq running "$(sb_state tpl-deaf)"
  assert_contains "$("$WARREN" logs tpl-deaf start)" "never listening"
  # A CMD that exits says so at once.
  printf 'FROM base\nEXPOSE 9\nCMD ["sh", "-c", "echo bye; exit 4"]\n' \
    >"$ctx/Dockerfile"
  "$WARREN" image build quits -f "$ctx/Dockerfile" "$ctx" >/dev/null 2>&1 ||
    fail "build quits"
  WR_CLEANUP="tpl-deaf tpl-quits"
  out=$(must_fail "$WARREN" create --name tpl-quits --image quits)
  assert_contains "$out" "exited with status 4"
  assert_contains "$out" "bye"
  assert_daemon_alive
}

# A daemon killed during a RUN: the next one removes the build sandbox and
# the half-made layer, and the build runs again from the layers that were
# complete. A template sandbox that was serving keeps serving.
test_a_killed_daemon_leaves_no_build_behind() {
  local ctx=$TPL_DIR/killed out
  tpl_context "$ctx" <<'EOF2'
FROM base
RUN echo done-before > /before
RUN sleep 600
EOF2
  # Step 2 completes (its layer is cached), step 3 runs when it dies.
  "$WARREN" image build killed -f "$ctx/Dockerfile" "$ctx" >"$WR_RUN/killed.out" 2>&1 &
  wait_until 30 grep -q "Step 3/3" "$WR_RUN/killed.out" ||
    fail "step 3 never began: $(cat "$WR_RUN/killed.out")"
  wait_until 20 sh -c "\"$WARREN\" ps \$(\"$WARREN\" ls -q | grep build-) | grep -q sleep" ||
    fail "no build sandbox runs the sleep: $("$WARREN" ls)"
  kill_daemon
  wait || true
  start_daemon
  wait_until 20 sh -c "! \"$WARREN\" ls | grep -q build-" ||
    fail "the build sandbox is still there: $("$WARREN" ls)"
  assert_eq "" "$(ls -A "$WR_ROOT/templates/tmp" 2>/dev/null)" "work dirs"
  assert_eq "" "$(find "$WR_ROOT/templates/layers" -maxdepth 1 -name '.*tmp-*')" \
    "half-made layers"
  printf 'FROM base\nRUN echo done-before > /before\nRUN cat /before\n' \
    >"$ctx/Dockerfile"
  out=$("$WARREN" image build killed -f "$ctx/Dockerfile" "$ctx" 2>&1) ||
    fail "build after the restart: $out"
  assert_contains "$out" "Step 2/3 : RUN echo done-before > /before (cached)"
  assert_contains "$out" "done-before"
  "$WARREN" image rm killed >/dev/null
}

# What a client may send that is not a build context, or a client that
# goes away in the middle: clear errors, and the daemon carries on.
test_bad_contexts_and_gone_clients() {
  local ctx=$TPL_DIR/gone out
  out=$(head -c 5000 /dev/urandom | api POST /v1/templates/junk/build \
    -H 'Content-Type: application/x-tar' --data-binary @-)
  assert_api_error "$out" bad_request "garbage"
  out=$(api POST /v1/templates/junk/build -H 'Content-Type: application/x-tar' \
    --data-binary @/dev/null)
  assert_api_error "$out" bad_request "an empty body"
  out=$(api POST "/v1/templates/..bad/build" --data-binary @/dev/null)
  assert_api_error "$out" bad_request "a bad name"
  tar -C "$TPL_FIXTURE" -cf "$WR_RUN/no-dockerfile.tar" package.json
  out=$(api POST /v1/templates/junk/build --data-binary @"$WR_RUN/no-dockerfile.tar")
  assert_contains "$out" "has no Dockerfile"
  # A Dockerfile that is a symlink out of the context is never read.
  rm -rf "$WR_RUN/linkctx"
  mkdir -p "$WR_RUN/linkctx"
  ln -s /etc/shadow "$WR_RUN/linkctx/.warren-Dockerfile"
  tar -C "$WR_RUN/linkctx" -cf "$WR_RUN/link.tar" .warren-Dockerfile
  out=$(api POST /v1/templates/junk/build --data-binary @"$WR_RUN/link.tar")
  assert_api_error "$out" bad_request "a symlinked Dockerfile"
  assert_not_contains "$out" "root:"
  # A client that leaves during a RUN: the build goes on and is cached.
  tpl_context "$ctx" <<'EOF2'
FROM base
RUN sleep 1; echo finished > /finished
EOF2
  timeout 0.5 "$WARREN" image build gone -f "$ctx/Dockerfile" "$ctx" \
    >/dev/null 2>&1 || true
  wait_until 20 "$WARREN" image inspect gone || fail "the build did not finish"
  out=$("$WARREN" image build gone -f "$ctx/Dockerfile" "$ctx" 2>&1)
  assert_contains "$out" "(cached)"
  "$WARREN" image rm gone >/dev/null
  assert_daemon_alive
}

# COPY into a directory of the image keeps that directory as it was (a
# layer's copy of it is what sandboxes see); WORKDIR exists for RUN.
test_copy_keeps_directory_modes_and_workdir_exists() {
  local ctx=$TPL_DIR/modes out
  tpl_context "$ctx" <<'EOF2'
FROM base
COPY f.txt /tmp/
COPY f.txt /root/deep/
WORKDIR /work/here
RUN pwd > /where
EOF2
  echo x >"$ctx/f.txt"
  "$WARREN" image build modes -f "$ctx/Dockerfile" "$ctx" >/dev/null 2>&1 ||
    fail "build modes"
  new_sandbox tpl-modes --image modes
  out=$("$WARREN" exec tpl-modes -- stat -c '%a %U %n' /tmp /root /root/deep/f.txt)
  assert_contains "$out" "1777 root /tmp"
  assert_contains "$out" "700 root /root"
  assert_contains "$out" "644 root /root/deep/f.txt"
  assert_eq /work/here "$("$WARREN" exec tpl-modes -- cat /where)"
  assert_eq /work/here "$("$WARREN" exec tpl-modes -- pwd)"
}

# FROM a template: its layers and settings carry over; the parent may go,
# the child keeps the layers it needs.
test_from_a_template() {
  local ctx=$TPL_DIR/parent out
  tpl_context "$ctx" <<'EOF2'
FROM base
ENV FROM_PARENT=1
WORKDIR /srv
RUN echo parent > /srv/index.html
EXPOSE 8000
CMD ["python3", "-m", "http.server", "8000"]
EOF2
  "$WARREN" image build tpl-parent -f "$ctx/Dockerfile" "$ctx" >/dev/null 2>&1 ||
    fail "build the parent"
  printf 'FROM tpl-parent\nRUN echo child >> /srv/index.html\n' >"$ctx/Dockerfile"
  "$WARREN" image build tpl-child -f "$ctx/Dockerfile" "$ctx" >/dev/null 2>&1 ||
    fail "build the child"
  assert_eq tpl-parent "$("$WARREN" image ls --json |
    jq -r '.[] | select(.name == "tpl-child") | .parent')"
  "$WARREN" image rm tpl-parent >/dev/null
  new_sandbox tpl-kid --image tpl-child
  out=$(tpl_page tpl-kid 8000) || fail "the child's CMD does not serve"
  assert_contains "$out" "parent"
  assert_contains "$out" "child"
  assert_eq 1 "$("$WARREN" exec tpl-kid -- printenv FROM_PARENT)"
  "$WARREN" rm -f tpl-kid >/dev/null
  "$WARREN" image rm tpl-child >/dev/null
}

# A SIGKILLed daemon: the template sandbox keeps serving (its CMD is
# init's), and the next daemon knows its layers and CMD: a stop and start
# serves again.
test_template_sandbox_survives_a_daemon_kill() {
  local ctx=$TPL_DIR/kept
  tpl_context "$ctx" <<'EOF2'
FROM base
WORKDIR /srv
RUN echo kept > index.html
EXPOSE 8000
CMD ["python3", "-m", "http.server", "8000"]
EOF2
  "$WARREN" image build kept -f "$ctx/Dockerfile" "$ctx" >/dev/null 2>&1 ||
    fail "build kept"
  new_sandbox tpl-kept --image kept
  assert_contains "$(tpl_page tpl-kept 8000)" "kept"
  kill_daemon
  start_daemon
  assert_contains "$(tpl_page tpl-kept 8000)" "kept" "after the restart"
  "$WARREN" stop tpl-kept >/dev/null
  "$WARREN" start tpl-kept >/dev/null
  assert_contains "$(tpl_page tpl-kept 8000)" "kept" "after stop and start"
  assert_contains "$(must_fail "$WARREN" image rm kept)" "used by 1 sandbox"
}

# A .dockerignore removes what it matches from the context before COPY.
test_dockerignore() {
  local ctx=$TPL_DIR/ignore out
  tpl_context "$ctx" <<'EOF2'
FROM base
COPY . /app/
EOF2
  mkdir -p "$ctx/node_modules/x" "$ctx/src/deep" "$ctx/dist"
  echo keep >"$ctx/src/deep/keep.js"
  echo junk >"$ctx/node_modules/x/junk.js"
  echo log >"$ctx/src/deep/debug.log"
  echo out >"$ctx/dist/out.js"
  printf '# comments and blanks are skipped\n\nnode_modules\n**/*.log\n/dist/\n' \
    >"$ctx/.dockerignore"
  "$WARREN" image build ignore -f "$ctx/Dockerfile" "$ctx" >/dev/null 2>&1 ||
    fail "build ignore"
  new_sandbox tpl-ignore --image ignore
  out=$("$WARREN" exec tpl-ignore -- sh -c 'cd /app && find . -type f | sort')
  assert_contains "$out" "./src/deep/keep.js"
  assert_not_contains "$out" "node_modules"
  assert_not_contains "$out" "debug.log"
  assert_not_contains "$out" "dist"
  printf 'node_modules\n!node_modules/keep\n' >"$ctx/.dockerignore"
  out=$(must_fail "$WARREN" image build ignore -f "$ctx/Dockerfile" "$ctx")
  assert_contains "$out" "exceptions"
}
