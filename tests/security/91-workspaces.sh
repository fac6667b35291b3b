# shellcheck shell=bash
# Security: workspaces that an API client or a neighbouring sandbox aims
# somewhere else.
#
# A client that skips the CLI asks for clone mode on /etc, on a plain
# directory, on a "repository" whose .git is a FIFO; a sandbox whose
# workspace contains another sandbox's workspace (nested projects)
# replaces that directory, while its mount is away (a host reboot), by a
# symlink to another directory of the same user, or by another directory.
# The safe outcome: the daemon refuses what the CLI refuses, with a 400
# and nothing created; the inner sandbox's start, files and diff are
# refused with a message that says the workspace changed, the other
# directory never appears inside, and `rm -f` cleans up. Sourced by
# tests/run-e2e, which provides lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

OWNER=4242
GROUP=4343

inside() { # NAME CMD...
  local name=$1
  shift
  "$WARREN" exec "$name" -- sh -c "$*"
}

# What exists: the daemon's sandboxes and the state root's directories.
sandboxes_now() {
  "$WARREN" ls -q | sort
  ls "$WR_ROOT/sandboxes" | sort
}

# POST a create with a workspace object; sets API_STATUS and API_BODY.
create_with() { # NAME PATH MODE
  api_call POST /v1/sandboxes -H 'Content-Type: application/json' \
    -d "{\"name\":\"$1\",\"workspace\":{\"path\":\"$2\",\"mode\":\"$3\"}}"
}

# The instance: clone mode through the API used to accept any directory,
# /etc included (the host's shadow file read-only inside). The daemon now
# makes the CLI's checks itself, reading the directory the way it reads a
# sandbox's files (a FIFO in it blocks nothing).
test_clone_of_a_non_repository_is_refused() {
  local d=/tmp/wr-sec-ws-clone before t0
  rm -rf "$d"
  mkdir -p "$d/plain" "$d/fifo" "$d/nobranch/.git/objects" \
    "$d/nobranch/.git/refs/heads"
  mkfifo "$d/fifo/.git"
  printf 'ref: refs/heads/main\n' >"$d/nobranch/.git/HEAD"
  printf '[core]\n' >"$d/nobranch/.git/config"
  mkfifo "$d/nobranch/.git/packed-refs"
  chown -R "$OWNER:$GROUP" "$d"
  before=$(sandboxes_now)

  create_with ws-etc /etc clone
  assert_eq 400 "$API_STATUS" "clone mode on /etc ($API_BODY)"
  assert_api_error "$API_BODY" bad_request "clone mode on /etc"
  assert_contains "$API_BODY" "owned by root" "clone mode on /etc"
  create_with ws-root /root direct
  assert_eq 400 "$API_STATUS" "direct mode on /root ($API_BODY)"

  create_with ws-plain "$d/plain" clone
  assert_eq 400 "$API_STATUS" "clone mode on a plain directory ($API_BODY)"
  assert_contains "$API_BODY" "is not a git repository" "a plain directory"

  t0=$(now_ms)
  create_with ws-fifo "$d/fifo" clone
  assert_eq 400 "$API_STATUS" "a FIFO as .git ($API_BODY)"
  assert_contains "$API_BODY" "is a fifo" "a FIFO as .git"
  create_with ws-nobranch "$d/nobranch" clone
  assert_eq 400 "$API_STATUS" "a FIFO as packed-refs ($API_BODY)"
  assert_contains "$API_BODY" "has no commits" "a FIFO as packed-refs"
  [ $(($(now_ms) - t0)) -lt 10000 ] || fail "the FIFO checks took too long"

  assert_eq "$before" "$(sandboxes_now)" "sandboxes after the refusals"
  assert_daemon_alive
}

# Nested projects: OUTER's workspace holds INNER's. Prints nothing; sets
# NEST (the base directory) and INNER_ID. A canary sits in a directory of
# the same owner outside both, where a re-aimed workspace would lead.
make_nest() {
  NEST=/tmp/wr-sec-ws-nest
  rm -rf "$NEST"
  mkdir -p "$NEST/home/.ssh" "$NEST/home/proj/inner"
  echo canary >"$NEST/home/.ssh/id_canary"
  echo inner-work >"$NEST/home/proj/inner/work.txt"
  chown -R "$OWNER:$GROUP" "$NEST"
  new_sandbox ws-outer shell "$NEST/home/proj"
  new_sandbox ws-inner shell "$NEST/home/proj/inner"
  INNER_ID=$(sb_get ws-inner .id)
  assert_eq inner-work "$(inside ws-inner cat /workspace/work.txt)" "inner"
}

# A host reboot, as far as the inner workspace goes: its mount is gone
# (and warrend restarted) and is made again when something needs it.
inner_mount_away() {
  "$WARREN" stop ws-inner >/dev/null
  stop_daemon
  umount "$WR_ROOT/sandboxes/$INNER_ID/rootfs/workspace"
  start_daemon
}

# Whatever the start, the files API and diff say, the canary never shows
# up: not on the inner sandbox's mount point, not in a listing, not in a
# diff, and nothing is mounted from there.
assert_canary_never_inside() {
  local out
  [ ! -e "$WR_ROOT/sandboxes/$INNER_ID/rootfs/workspace/id_canary" ] ||
    fail "the canary is on the inner sandbox's mount point"
  if grep -q "$NEST/home/.ssh" /proc/self/mountinfo; then
    fail "the other directory is mounted somewhere"
  fi
  api_call GET "/v1/sandboxes/ws-inner/files/list?path=/workspace"
  assert_not_contains "$API_BODY" id_canary "a listing of /workspace"
  out=$("$WARREN" diff ws-inner 2>&1 || true)
  assert_not_contains "$out" id_canary "warren diff"
}

# The instance: the outer sandbox replaces the inner workspace by a
# symlink to another directory of the same user. The next mount used to
# follow it, and the inner sandbox got that directory read-write.
test_reaimed_workspace_is_refused() {
  local out
  make_nest
  inner_mount_away
  inside ws-outer "rm -rf /workspace/inner && ln -s $NEST/home/.ssh /workspace/inner"
  out=$(must_fail "$WARREN" start ws-inner)
  assert_contains "$out" \
    "the workspace \`$NEST/home/proj/inner\` is not the directory it was" \
    "start after the re-aim"
  assert_contains "$out" "is a symlink, not a directory" "start"
  assert_eq stopped "$(sb_state ws-inner)" "state after the refused start"
  assert_canary_never_inside
  api_call GET "/v1/sandboxes/ws-inner/files/list?path=/workspace"
  assert_eq 409 "$API_STATUS" "files API after the re-aim ($API_BODY)"
  out=$(must_fail "$WARREN" diff ws-inner)
  assert_contains "$out" "is not the directory it was" "diff after the re-aim"
  timeout 30 "$WARREN" rm -f ws-inner >/dev/null || fail "rm -f failed"
  assert_eq "" "$(root_traces "$INNER_ID" | grep -F "$INNER_ID" || true)" \
    "what the inner sandbox left"
  assert_eq canary "$(cat "$NEST/home/.ssh/id_canary")" "the canary"
  assert_daemon_alive
}

# A variant: no symlink at all, but another directory of the same owner
# in its place (the inner one moved aside, a fresh one made). Refused by
# its identity; put back, the same workspace starts again.
test_workspace_replaced_by_another_directory_is_refused() {
  local out
  make_nest
  inner_mount_away
  inside ws-outer 'mv /workspace/inner /workspace/inner.old &&
    mkdir /workspace/inner && echo planted >/workspace/inner/planted'
  out=$(must_fail "$WARREN" start ws-inner)
  assert_contains "$out" "is not the directory it was" "start"
  assert_contains "$out" "recorded inode" "start"
  assert_eq stopped "$(sb_state ws-inner)" "state after the refused start"
  [ ! -e "$WR_ROOT/sandboxes/$INNER_ID/rootfs/workspace/planted" ] ||
    fail "the other directory was mounted"
  out=$(must_fail "$WARREN" diff ws-inner)
  assert_contains "$out" "is not the directory it was" "diff"
  inside ws-outer 'rm -rf /workspace/inner && mv /workspace/inner.old /workspace/inner'
  "$WARREN" start ws-inner >/dev/null || fail "the restored workspace"
  assert_eq inner-work "$(inside ws-inner cat /workspace/work.txt)" \
    "the restored workspace inside"
  "$WARREN" rm -f ws-inner >/dev/null
  assert_eq "" "$(root_traces "$INNER_ID" | grep -F "$INNER_ID" || true)" \
    "what the inner sandbox left"
}
