# shellcheck shell=bash
# Security: what a clone-mode sandbox's bundle makes the host's git spend.
#
# The sandbox controls its own git, so the bundle `git fetch warren-N`
# downloads can hold any pack. Here its git is replaced by one whose
# `git bundle create` writes a valid bundle of `main` (a commit the host
# already has) around a pack made by tests/helpers/pack_bomb: a few
# hundred bytes that expand to a gigabyte through deltas, or many objects
# that add up to more than the total, or gigabytes of hashing work; or
# by one that never finishes its bundle; or the sandbox's own git
# bundles a file of a gigabyte of zeros. Each fetch must fail with an
# error that names the limit and how to raise it, leave the host
# repository's objects, packs and refs exactly as they were, and keep
# the host's git within its memory and time. The limits are git config
# of the host repository (docs/cli.md).

OWNER=4242
GROUP=4343

# The last test fetches as a member of the socket's group, not root: the
# helper then may make no cgroup, and rlimits and the deadline must hold.
daemon_args() {
  echo "--socket-group $GROUP"
}

# A repository under DIR/repo owned by OWNER with one commit on main.
# root's git (HOME=DIR/home) trusts it; OWNER's HOME is DIR/owner.
make_repo() { # DIR
  local d=$1
  rm -rf "$d"
  mkdir -p "$d/home" "$d/owner"
  export HOME=$d/home PATH="$WR_BIN:$PATH"
  git config --global --add safe.directory '*'
  git init -q -b main "$d/repo"
  echo hello >"$d/repo/README.md"
  git -C "$d/repo" add -A
  git -C "$d/repo" -c user.name=a -c user.email=a@example.invalid \
    commit -qm initial
  chown -R "$OWNER:$GROUP" "$d/repo" "$d/owner"
}

as_owner() { # DIR CMD...
  local d=$1
  shift
  HOME=$d/owner setpriv --reuid "$OWNER" --regid "$GROUP" --clear-groups \
    env PATH="$WR_BIN:$PATH" "$@"
}

# The sandbox's `git bundle create` writes a bundle of main whose pack is
# `pack_bomb ARGS...`: a new commit on main (which the header lists) and
# the bomb; every other git command is git's.
plant_bomb() { # NAME ARGS...
  local name=$1
  shift
  install_helper "$name" pack_bomb
  "$WARREN" exec "$name" -- sh -c "echo '$*' > /bomb-args
cat > /usr/local/bin/git <<'EOF'
#!/bin/sh
if [ \"\$1\" = bundle ] && [ \"\$2\" = create ]; then
  pack_bomb \"\$(/usr/bin/git -C /workspace rev-parse main)\" /tmp/bomb-id \
    \$(cat /bomb-args) > /tmp/bomb-pack || exit 1
  { printf '# v2 git bundle\n%s refs/heads/main\n\n' \"\$(cat /tmp/bomb-id)\"
    cat /tmp/bomb-pack; } > \"\$4\"
  exit
fi
exec /usr/bin/git \"\$@\"
EOF
chmod 755 /usr/local/bin/git"
}

# Everything of the repository a fetch could add to: objects (loose,
# packs, indexes, keeps, temporary files and directories) and refs.
repo_objects() { # REPO
  (
    cd "$1/.git" || exit 1
    find objects refs -printf '%p %y %s\n' | sort
    cat packed-refs 2>/dev/null || true
    git --git-dir=. for-each-ref
  )
}

assert_peak_below() { # FILE MIB what
  local kib
  kib=$(cat "$1")
  [ "$kib" -lt $(($2 * 1024)) ] ||
    fail "$3: the fetch's largest process peaked at $((kib / 1024)) MiB, over $2 MiB"
}

test_delta_bomb_bundle_refused() {
  local d=/tmp/wr-fetch-bomb r before out size
  make_repo "$d"
  r=$d/repo
  new_sandbox fb-bomb --clone shell "$r"
  plant_bomb fb-bomb delta 1g
  size=$("$WARREN" exec fb-bomb -- sh -c \
    'pack_bomb $(git -C /workspace rev-parse main) /tmp/id delta 1g | wc -c')
  [ "$size" -lt 1024 ] || fail "the bomb is $size bytes, not under a KiB"
  before=$(repo_objects "$r")
  # The limits as they come: git may allocate at most warren.maxMemory,
  # which follows warren.maxObjectSize, at once.
  out=$(must_fail "$WR_HELPERS/peak_rss" "$d/rss" \
    git -C "$r" fetch warren-fb-bomb main)
  assert_contains "$out" "warren: git index-pack needed more memory for the pack from sandbox \`fb-bomb\` than warren.maxMemory (768.0 MiB, from warren.maxObjectSize: twice it and 256 MiB); nothing was fetched" \
    "the refusal"
  assert_contains "$out" "To allow more: git config warren.maxObjectSize 1g" \
    "how to raise it"
  assert_eq "$before" "$(repo_objects "$r")" "the host repository"
  assert_peak_below "$d/rss" 768 "the refused bomb"
  # The sandbox's own git again: its real work comes, so nothing of the
  # refused fetch stood in the way.
  "$WARREN" exec fb-bomb -- sh -c 'rm /usr/local/bin/git && cd /workspace &&
    echo more >> README.md && git -c user.name=a -c user.email=a@b.invalid \
    commit -qam more'
  out=$(git -C "$r" fetch warren-fb-bomb main 2>&1) || fail "fetch: $out"
  assert_eq "$("$WARREN" exec fb-bomb -- git -C /workspace rev-parse main)" \
    "$(git -C "$r" rev-parse FETCH_HEAD)" "the real commit"
}

# The sandbox's own git, no crafted pack: a commit of a sparse file of
# 1 GiB of zeros, whose blob git compresses to a MiB. The host's
# index-pack streams it (no memory to speak of) into the quarantine,
# where git's sizes show it over warren.maxObjectSize: it never moves in.
test_huge_blob_refused_by_the_object_limit() {
  local d=/tmp/wr-fetch-huge r before out
  make_repo "$d"
  r=$d/repo
  new_sandbox fb-huge --clone shell "$r"
  "$WARREN" exec fb-huge -- sh -c 'cd /workspace && truncate -s 1g big &&
    git add big && git -c user.name=a -c user.email=a@b.invalid \
    commit -qm big' || fail "commit the big file"
  before=$(repo_objects "$r")
  out=$(must_fail "$WR_HELPERS/peak_rss" "$d/rss" \
    git -C "$r" fetch warren-fb-huge main)
  assert_contains "$out" "warren: the pack from sandbox \`fb-huge\` holds an object of 1.0 GiB, more than warren.maxObjectSize (256.0 MiB); nothing was fetched" \
    "the refusal"
  assert_contains "$out" "To allow more: git config warren.maxObjectSize 1g" \
    "how to raise it"
  assert_eq "$before" "$(repo_objects "$r")" "the host repository"
  assert_peak_below "$d/rss" 768 "the refused blob"
}

# Each object under the limit, together over it: 20 of 16 MiB from a pack
# of a few KiB, against a total lowered to 256 MiB.
test_many_objects_over_the_total_refused() {
  local d=/tmp/wr-fetch-many r before out
  make_repo "$d"
  r=$d/repo
  new_sandbox fb-many --clone shell "$r"
  plant_bomb fb-many many 20 16m
  as_owner "$d" git -C "$r" config warren.maxTotalSize 256m
  before=$(repo_objects "$r")
  out=$(must_fail "$WR_HELPERS/peak_rss" "$d/rss" \
    git -C "$r" fetch warren-fb-many main)
  assert_contains "$out" "warren: the objects in the pack from sandbox \`fb-many\` expand to 337." \
    "the refusal"
  assert_contains "$out" "more than warren.maxTotalSize (256.0 MiB); nothing was fetched. To allow more: git config warren.maxTotalSize 512m" \
    "how to raise it"
  assert_eq "$before" "$(repo_objects "$r")" "the host repository"
  assert_peak_below "$d/rss" 768 "the refused objects"
}

# With the object limit raised past the bomb and the memory set low, the
# memory limit is what stops the host's git: as root in a memory cgroup
# of its own, as the socket group's member under rlimits. Either way
# index-pack's leftovers stay in the quarantine and go with it.
test_memory_limit_stops_index_pack() {
  local d=/tmp/wr-fetch-memory r before out who
  make_repo "$d"
  r=$d/repo
  new_sandbox fb-mem --clone shell "$r"
  plant_bomb fb-mem delta 1g
  as_owner "$d" git -C "$r" config warren.maxObjectSize 2g
  as_owner "$d" git -C "$r" config warren.maxMemory 128m
  before=$(repo_objects "$r")
  for who in root owner; do
    if [ $who = root ]; then
      out=$(must_fail "$WR_HELPERS/peak_rss" "$d/rss" \
        git -C "$r" fetch -v warren-fb-mem main)
      assert_contains "$out" "git index-pack ran in a memory cgroup of its own" \
        "root's fetch"
    else
      out=$(must_fail as_owner "$d" "$WR_HELPERS/peak_rss" "$d/owner/rss" \
        git -C "$r" fetch -v warren-fb-mem main)
      assert_contains "$out" "git index-pack ran under rlimits" "the owner's fetch"
      mv "$d/owner/rss" "$d/rss"
    fi
    rm -f "$r/.git/FETCH_HEAD" # root's, which the owner could not write
    assert_contains "$out" "warren: git index-pack needed more memory for the pack from sandbox \`fb-mem\` than warren.maxMemory (128.0 MiB); nothing was fetched. To allow more: git config warren.maxMemory 512m" \
      "$who's refusal"
    assert_eq "$before" "$(repo_objects "$r")" "the host repository after $who's fetch"
    assert_peak_below "$d/rss" 128 "$who's fetch"
  done
}

# index-pack hashing 32 GiB (512 objects of 64 MiB, all within the raised
# size limits) is stopped at the deadline, here 10 s for the whole fetch,
# as the socket group's member: git fetch returns, no index-pack is left
# running, and the repository is as it was.
test_endless_index_pack_stopped_by_the_time_limit() {
  local d=/tmp/wr-fetch-slow r before out start secs pid
  make_repo "$d"
  r=$d/repo
  new_sandbox fb-slow --clone shell "$r"
  plant_bomb fb-slow many 512 64m
  as_owner "$d" git -C "$r" config warren.maxObjectSize 1g
  as_owner "$d" git -C "$r" config warren.maxTotalSize 64g
  as_owner "$d" git -C "$r" config warren.fetchTimeout 10s
  before=$(repo_objects "$r")
  start=$(date +%s)
  out=$(must_fail as_owner "$d" git -C "$r" fetch warren-fb-slow main)
  secs=$(($(date +%s) - start))
  assert_contains "$out" "warren: git index-pack on the pack from sandbox \`fb-slow\` took longer than warren.fetchTimeout (10 s); nothing was fetched. To allow more: git config warren.fetchTimeout 1m" \
    "the refusal"
  [ "$secs" -lt 60 ] || fail "git fetch took $secs s to give up"
  for pid in $(pgrep -f 'index-pack --stdin --strict --keep=git-remote-warren' || true); do
    [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" != "$r" ] ||
      fail "index-pack $pid still runs"
  done
  assert_eq "$before" "$(repo_objects "$r")" "the host repository"
}

# The sandbox's side of the fetch is under the same deadline: a
# `git bundle create` that never ends is stopped there (by warrend's exec
# timeout), git fetch returns, and nothing of it keeps running inside.
test_endless_bundle_stopped_by_the_time_limit() {
  local d=/tmp/wr-fetch-sleep r before out start secs left
  make_repo "$d"
  r=$d/repo
  new_sandbox fb-sleep --clone shell "$r"
  "$WARREN" exec fb-sleep -- sh -c "cat > /usr/local/bin/git <<'EOF'
#!/bin/sh
if [ \"\$1\" = bundle ] && [ \"\$2\" = create ]; then
  exec sleep 3600
fi
exec /usr/bin/git \"\$@\"
EOF
chmod 755 /usr/local/bin/git"
  as_owner "$d" git -C "$r" config warren.fetchTimeout 5s
  before=$(repo_objects "$r")
  start=$(date +%s)
  out=$(must_fail timeout 120 git -C "$r" fetch warren-fb-sleep main)
  secs=$(($(date +%s) - start))
  assert_contains "$out" "warren: making the bundle in sandbox \`fb-sleep\` took longer than warren.fetchTimeout (5 s); nothing was fetched. To allow more: git config warren.fetchTimeout 1m" \
    "the refusal"
  [ "$secs" -lt 60 ] || fail "git fetch took $secs s to give up"
  left=$("$WARREN" exec fb-sleep -- sh -c 'for f in /proc/[0-9]*/cmdline; do
    tr "\0" " " < "$f" 2>/dev/null; echo; done | grep -c "^sleep 3600" || true')
  assert_eq "0" "$left" "sleeps left in the sandbox"
  assert_eq "$before" "$(repo_objects "$r")" "the host repository"
}
