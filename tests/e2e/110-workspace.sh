# shellcheck shell=bash
# End-to-end: a host directory as a sandbox's workspace, direct mode.
#
# The walkthrough's first half: `warren create --name N [AGENT] PATH` on a
# real git project made here; edits made inside appear on the host at
# once, owned by the user who owns PATH (id-mapped mount); nothing else of
# the host is visible; the agent kit's environment and policy rules, the
# secret placeholders and warren's CA are there; `ls` and `inspect` show
# it all; the workspace survives stop/start and a daemon restart; bad
# paths are refused; and a mount point the sandbox turned into a symlink
# never aims the mount at the host.

OWNER=4242
GROUP=4343

# A project owned by OWNER:GROUP under a fresh directory: a git repo with
# one commit, an untracked .env, and a file beside the project (outside it).
make_project() { # DIR
  local dir=$1
  rm -rf "$dir"
  mkdir -p "$dir/proj"
  git -C "$dir/proj" init -q -b main
  printf 'from flask import Flask\napp = Flask(__name__)\n' >"$dir/proj/app.py"
  printf '# demo\n' >"$dir/proj/README.md"
  git -C "$dir/proj" add -A
  git -C "$dir/proj" -c user.name=t -c user.email=t@example.invalid \
    commit -q -m initial
  printf 'DB_PASSWORD=hunter2\n' >"$dir/proj/.env"
  printf 'outside-secret\n' >"$dir/outside.txt"
  chown -R "$OWNER:$GROUP" "$dir"
}

inside() { # NAME CMD...
  local name=$1
  shift
  "$WARREN" exec "$name" -- sh -c "$*"
}

test_direct_mode_edits_appear_on_the_host_owned_by_its_user() {
  local d=/tmp/wr-ws-direct out
  make_project "$d"
  new_sandbox ws-direct shell "$d/proj"
  assert_eq /workspace "$(inside ws-direct pwd)" "working directory"
  # The owner's files are root's inside; root can write them.
  assert_eq "0 0" "$(inside ws-direct stat -c "'%u %g'" /workspace/app.py)" \
    "owner inside"
  inside ws-direct 'echo "print(1)" >/workspace/new.py &&
    mkdir -p /workspace/pkg && echo x >/workspace/pkg/mod.py &&
    rm /workspace/README.md && echo "# edited" >>/workspace/app.py'
  # At once, while the sandbox runs, with the project owner's ids.
  [ -f "$d/proj/new.py" ] || fail "new.py did not appear on the host"
  [ ! -e "$d/proj/README.md" ] || fail "README.md was not deleted on the host"
  assert_contains "$(cat "$d/proj/app.py")" "# edited" "app.py on the host"
  for f in new.py pkg pkg/mod.py app.py; do
    assert_eq "$OWNER:$GROUP" "$(stat -c %u:%g "$d/proj/$f")" "owner of $f"
  done
  # git on the host sees the edits.
  out=$(git -C "$d/proj" -c safe.directory='*' status --porcelain)
  assert_contains "$out" "D README.md" "git status"
  assert_contains "$out" "?? new.py" "git status"
  # And the host's edits are seen inside at once.
  echo host-edit >"$d/proj/from-host.txt"
  assert_eq host-edit "$(inside ws-direct cat /workspace/from-host.txt)" \
    "host edit inside"
}

test_nothing_outside_the_workspace_is_visible() {
  local d=/tmp/wr-ws-outside out
  make_project "$d"
  new_sandbox ws-outside shell "$d/proj"
  # The host path of the file beside the project, and the way up from the
  # workspace, lead nowhere.
  out=$(must_fail inside ws-outside cat "$d/outside.txt")
  assert_contains "$out" "No such file" "the host's path"
  out=$(must_fail inside ws-outside cat /workspace/../outside.txt)
  assert_contains "$out" "No such file" "up from the workspace"
  out=$(inside ws-outside 'grep -rs outside-secret / --exclude-dir=proc \
    --exclude-dir=sys --exclude-dir=dev -l || true')
  assert_eq "" "$out" "files with the outside secret"
  # The project itself is readable, ignored files included (as documented).
  assert_eq DB_PASSWORD=hunter2 "$(inside ws-outside cat /workspace/.env)" \
    ".env inside"
}

test_files_of_other_host_users_are_read_only_inside() {
  local d=/tmp/wr-ws-others out
  make_project "$d"
  echo root-owned >"$d/proj/root.txt" # made by root on the host
  new_sandbox ws-others shell "$d/proj"
  assert_eq root-owned "$(inside ws-others cat /workspace/root.txt)" "read"
  out=$(must_fail inside ws-others 'echo x >>/workspace/root.txt')
  assert_contains "$out" "ermission denied" "write to another user's file"
  assert_eq root-owned "$(cat "$d/proj/root.txt")" "root.txt on the host"
  # A setuid program made inside is the folder owner's on the host, never
  # root's, and nothing inside can give a file to another host id.
  inside ws-others 'cp /bin/true /workspace/suid && chmod 4755 /workspace/suid'
  assert_eq "$OWNER" "$(stat -c %u "$d/proj/suid")" "owner of a setuid file"
  assert_contains "$("$WARREN" diff ws-others)" \
    "A suid   (setuid/setgid: runs as its owner for whoever runs it)" \
    "warren diff"
  out=$(must_fail inside ws-others 'chown 1000 /workspace/app.py')
  assert_contains "$out" "chown" "chown to another id"
  assert_eq "$OWNER" "$(stat -c %u "$d/proj/app.py")" "app.py's owner"
}

test_kit_env_rules_placeholders_and_ca() {
  local d=/tmp/wr-ws-kit env rules
  make_project "$d"
  printf 'sk-test-not-a-real-key' | "$WARREN" secret set anthropic >/dev/null
  new_sandbox ws-kit claude "$d/proj"
  env=$(inside ws-kit env)
  assert_contains "$env" "IS_SANDBOX=1" "the kit's environment"
  assert_contains "$env" "ANTHROPIC_API_KEY=warren-proxy-placeholder" \
    "the secret's placeholder"
  assert_not_contains "$env" "sk-test-not-a-real-key" "the environment"
  assert_contains "$env" "HTTPS_PROXY=" "proxy variables"
  # warren's CA comes first in its file; the host's added CAs follow.
  cmp <(inside ws-kit "sed '/-----END CERTIFICATE-----/q' \
    /usr/local/share/ca-certificates/warren-ca.crt") \
    "$WR_ROOT/ca/ca.crt" || fail "warren's CA is not in the trust store"
  # The kit's hosts are the sandbox's own allow rules.
  rules=$("$WARREN" policy ls ws-kit)
  assert_contains "$rules" "api.anthropic.com" "policy ls"
  assert_eq claude "$(sb_get ws-kit .agent)" "agent"
  "$WARREN" secret rm anthropic >/dev/null
}

test_ls_and_inspect_show_agent_mode_workspace_ports() {
  local d=/tmp/wr-ws-ls row out
  make_project "$d"
  new_sandbox ws-ls codex "$d/proj"
  "$WARREN" ports ws-ls --publish 18431:8000 >/dev/null
  row=$("$WARREN" ls | grep '^ws-ls ')
  for want in running codex direct "$d/proj" "18431->8000"; do
    assert_contains "$row" "$want" "ls row"
  done
  assert_contains "$("$WARREN" ls | head -1)" "AGENT" "ls header"
  out=$("$WARREN" inspect ws-ls)
  assert_contains "$out" "$d/proj (direct mode): /workspace read-write" \
    "inspect workspace"
  assert_contains "$out" "$OWNER:$GROUP on the host" "inspect owner"
  assert_contains "$out" "preset" "inspect policy"
  assert_contains "$out" "allow api.openai.com (sandbox rule" "inspect rules"
  assert_contains "$out" "127.0.0.1:18431 -> 8000" "inspect ports"
  out=$("$WARREN" inspect --json ws-ls)
  assert_eq direct "$(json_get "$out" .workspace.mode)" "json mode"
  assert_eq "$OWNER" "$(json_get "$out" .workspace.uid)" "json uid"
  assert_contains "$(json_get "$out" '.policy.rules[].host')" api.openai.com \
    "json policy"
}

test_workspace_survives_stop_start_and_daemon_restart() {
  local d=/tmp/wr-ws-life
  make_project "$d"
  new_sandbox ws-life shell "$d/proj"
  inside ws-life 'apt-get --version >/dev/null; echo kept >/root/own.txt'
  "$WARREN" stop ws-life >/dev/null
  echo while-stopped >"$d/proj/stopped.txt"
  "$WARREN" start ws-life >/dev/null
  assert_eq while-stopped "$(inside ws-life cat /workspace/stopped.txt)" \
    "workspace after start"
  assert_eq kept "$(inside ws-life cat /root/own.txt)" "own files after start"
  stop_daemon
  start_daemon
  inside ws-life 'echo after-restart >/workspace/restart.txt'
  assert_eq "$OWNER:$GROUP" "$(stat -c %u:%g "$d/proj/restart.txt")" \
    "owner after a daemon restart"
}

test_bad_workspaces_are_refused_and_leave_nothing() {
  local d=/tmp/wr-ws-bad out before
  make_project "$d"
  before=$("$WARREN" ls -q | sort)
  out=$(must_fail "$WARREN" create --name ws-bad shell /nonexistent/dir)
  assert_contains "$out" "No such file" "missing directory"
  out=$(must_fail "$WARREN" create --name ws-bad shell "$d/outside.txt")
  assert_contains "$out" "is not a directory" "a file"
  mkdir -p "$d/root-owned"
  out=$(must_fail "$WARREN" create --name ws-bad shell "$d/root-owned")
  assert_contains "$out" "is owned by root" "a root-owned folder"
  out=$(must_fail "$WARREN" create --name ws-bad shell /)
  assert_contains "$out" "would expose the host" "the root"
  out=$(must_fail "$WARREN" create --name ws-bad shell "$WR_ROOT/images")
  assert_contains "$out" "would expose the host or warren's state" "state root"
  out=$(must_fail "$WARREN" create --name ws-bad shell /proc/self)
  assert_contains "$out" "choose a project directory" "/proc"
  out=$(must_fail "$WARREN" create --name ws-bad no-such-kit "$d/proj")
  assert_contains "$out" "no agent kit \`no-such-kit\`" "unknown kit"
  api_call POST /v1/sandboxes \
    -d '{"name":"ws-bad","workspace":{"path":"relative/dir"}}'
  assert_eq 400 "$API_STATUS" "API: relative path"
  assert_contains "$API_BODY" "must be absolute" "API: relative path"
  api_call POST /v1/sandboxes \
    -d "{\"name\":\"ws-bad\",\"workspace\":{\"path\":\"$d/proj\",\"mode\":\"copy\"}}"
  assert_eq 400 "$API_STATUS" "API: bad mode"
  assert_contains "$API_BODY" "direct or clone" "API: bad mode"
  api_call POST /v1/sandboxes -d '{"name":"ws-bad","workspace":{"mode":"direct"}}'
  assert_eq 400 "$API_STATUS" "API: no path"
  assert_contains "$API_BODY" "path" "API: no path"
  assert_eq "$before" "$("$WARREN" ls -q | sort)" "sandboxes after the errors"
  assert_daemon_alive
}

# A workspace's mount point is in the sandbox's own layer. If it ever is
# a symlink when the workspace is mounted (the sandbox made it while the
# mount was away, e.g. across a host reboot), the start fails: the mount
# never follows it to the host.
test_a_symlinked_mount_point_never_reaches_the_host() {
  local d=/tmp/wr-ws-link id root out
  make_project "$d"
  new_sandbox ws-link shell "$d/proj"
  id=$(sb_get ws-link .id)
  root=$WR_ROOT/sandboxes/$id/rootfs
  "$WARREN" stop ws-link >/dev/null
  umount "$root/workspace"
  rmdir "$root/workspace"
  ln -s /etc "$root/workspace"
  out=$(must_fail "$WARREN" start ws-link)
  assert_contains "$out" "/workspace in the sandbox is a symlink, not a directory" "start"
  if grep -q " /etc .*idmapped" /proc/self/mountinfo; then
    fail "something was mounted on the host's /etc"
  fi
  [ ! -e /etc/app.py ] || fail "the workspace appeared in the host's /etc"
}

# The walkthrough's user is not root: with `warrend --socket-group G`, a
# member of G runs warren and `git fetch warren-N` as themselves, and
# what the sandbox makes is theirs.
test_a_socket_group_member_works_as_themselves() {
  local d=/tmp/wr-ws-group out
  make_project "$d"
  stop_daemon
  start_daemon --socket-group "$GROUP"
  assert_eq "root:$GROUP 660" "$(stat -c '%U:%g %a' "$WR_SOCK")" "socket"
  as_owner() {
    HOME=$d setpriv --reuid "$OWNER" --regid "$GROUP" --clear-groups \
      env PATH="$WR_BIN:$PATH" "$@"
  }
  as_owner "$WARREN" create --name ws-group --clone shell "$d/proj" >/dev/null
  WR_CLEANUP=ws-group
  trap '"$WARREN" rm -f $WR_CLEANUP >/dev/null 2>&1 || true' EXIT
  "$WARREN" exec ws-group -- sh -c 'git checkout -qb work &&
    echo "# more" >>README.md && git -c user.name=a -c user.email=a@b.invalid \
    commit -qam more'
  out=$(as_owner git -C "$d/proj" fetch warren-ws-group work 2>&1)
  assert_contains "$out" "work       -> FETCH_HEAD" "fetch as the owner"
  out=$(as_owner git -C "$d/proj" diff --stat HEAD FETCH_HEAD)
  assert_contains "$out" "README.md | 1 +" "the fetched commit"
  assert_eq "$OWNER:$GROUP" "$(stat -c %u:%g "$d/proj/.git/config")" \
    ".git/config's owner"
  # Someone outside the group is turned away.
  out=$(must_fail setpriv --reuid 4444 --regid 4444 --clear-groups \
    "$WARREN" ls)
  assert_contains "$out" "ermission denied" "a user outside the group"
  "$WARREN" rm -f ws-group >/dev/null
  stop_daemon
  start_daemon
}
