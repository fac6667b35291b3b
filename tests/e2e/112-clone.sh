# shellcheck shell=bash
# End-to-end: clone mode and git-remote-warren.
#
# The walkthrough's second half on a sample repository made here and owned
# by another user: `warren create --clone shell PATH` gives the sandbox its
# own clone in /workspace (every branch, the tags, the original's current
# branch; no hooks, no untracked or ignored files) while the original is
# read-only at /origin; a commit made inside arrives on the host with
# `git fetch warren-N BRANCH`, and a hook made inside does not; the host's
# working tree never changes; `warren rm` refuses while a branch has
# unfetched commits and removes the remote once the sandbox is gone; a
# sandbox that forges its bundle is refused; bad paths leave no sandbox.

OWNER=4242
GROUP=4343

# Host git runs as root on a repository owned by OWNER: a HOME of the
# test's own trusts it, and git finds git-remote-warren on PATH.
host_git_env() { # DIR
  export HOME=$1/home
  mkdir -p "$HOME"
  git config --global --add safe.directory '*'
  git config --global user.name host
  git config --global user.email host@example.invalid
  export PATH="$WR_BIN:$PATH"
}

# A repository under DIR/repo owned by OWNER:GROUP: main (2 commits) and
# feature (1 more), a lightweight and an annotated tag, feature checked
# out, an active pre-commit hook, an untracked file, an ignored file and
# an uncommitted edit. Everything under DIR is removed first.
make_repo() { # DIR
  local d=$1 r=$1/repo
  rm -rf "$d"
  host_git_env "$d"
  mkdir -p "$r"
  git -C "$r" init -q -b main
  printf 'print("hello")\n' >"$r/app.py"
  printf '# sample\n' >"$r/README.md"
  printf '*.log\n' >"$r/.gitignore"
  git -C "$r" add -A
  git -C "$r" commit -q -m initial
  printf 'def util(): pass\n' >"$r/util.py"
  git -C "$r" add util.py
  git -C "$r" commit -q -m util
  git -C "$r" tag v1
  git -C "$r" checkout -q -b feature
  printf 'feature\n' >"$r/feature.txt"
  git -C "$r" add feature.txt
  git -C "$r" commit -q -m feature
  git -C "$r" tag -a v2 -m "annotated"
  printf '#!/bin/sh\nexit 0\n' >"$r/.git/hooks/pre-commit"
  chmod 755 "$r/.git/hooks/pre-commit"
  printf 'untracked\n' >"$r/notes.txt"
  printf 'log\n' >"$r/debug.log"
  printf '# edited, not committed\n' >>"$r/README.md"
  chown -R "$OWNER:$GROUP" "$d"
  chown -R root:root "$HOME"
}

inside() { # NAME CMD...
  local name=$1
  shift
  "$WARREN" exec "$name" -- sh -c "$*"
}

# What must not change in the host repository: its working tree, HEAD,
# index and hooks (the remote's config section comes and goes).
repo_state() { # REPO
  local r=$1
  (
    cd "$r" || exit 1
    find . -path ./.git -prune -o -type f -print0 | sort -z |
      xargs -0 sha256sum
    git rev-parse HEAD
    git symbolic-ref HEAD
    git --no-optional-locks status --porcelain
    find .git/hooks -printf '%m %u %f\n' | sort
    stat -c '%u:%g %a' .git/index .
  )
}

test_clone_copies_branches_and_tags_not_hooks_or_untracked() {
  local d=/tmp/wr-clone-copy r out
  make_repo "$d"
  r=$d/repo
  new_sandbox cl-copy --clone shell "$r"
  assert_eq /workspace "$(inside cl-copy pwd)" "working directory"
  # Every branch as a local branch tracking origin, the current one out.
  out=$(inside cl-copy git branch --format="'%(refname:short) %(upstream:short)'")
  assert_eq "feature origin/feature
main origin/main" "$out" "branches"
  assert_eq feature "$(inside cl-copy git symbolic-ref --short HEAD)" "HEAD"
  assert_eq "$(git -C "$r" rev-parse main feature)" \
    "$(inside cl-copy git rev-parse main feature)" "commits"
  assert_eq "v1
v2" "$(inside cl-copy git tag)" "tags"
  assert_eq "tag" "$(inside cl-copy git cat-file -t v2)" "annotated tag"
  assert_eq /origin "$(inside cl-copy git remote get-url origin)" "origin"
  # The committed tree only: no untracked, ignored or uncommitted bytes.
  out=$(inside cl-copy 'ls -A /workspace')
  assert_eq ".git
.gitignore
README.md
app.py
feature.txt
util.py" "$out" "files in the clone"
  assert_eq "# sample" "$(inside cl-copy cat /workspace/README.md)" "README"
  assert_eq "" "$(inside cl-copy git status --porcelain)" "clone status"
  # No hook but git's inactive samples; objects of its own.
  out=$(inside cl-copy 'ls /workspace/.git/hooks | grep -v "\.sample$" || true')
  assert_eq "" "$out" "active hooks in the clone"
  inside cl-copy '! test -e /workspace/.git/objects/info/alternates' ||
    fail "the clone borrows objects from /origin"
  assert_eq 0 "$(inside cl-copy 'find /workspace/.git/objects -type f -links +1 | wc -l')" \
    "hard-linked objects"
  # The original is there, as it is, and cannot be written.
  assert_contains "$(inside cl-copy cat /origin/notes.txt)" untracked "/origin"
  for p in /origin/new /origin/.git/new /origin/.git/hooks/post-checkout; do
    out=$(must_fail inside cl-copy "echo x > $p")
    assert_contains "$out" "Read-only file system" "writing $p"
  done
  must_fail inside cl-copy 'cd /origin && git -c safe.directory="*" commit --allow-empty -qm x' >/dev/null
  # The host repository got the remote, and its config kept its owner.
  assert_eq "warren::cl-copy" "$(git -C "$r" config remote.warren-cl-copy.url)" "url"
  assert_eq "+refs/heads/*:refs/remotes/warren-cl-copy/*" \
    "$(git -C "$r" config remote.warren-cl-copy.fetch)" "refspec"
  assert_eq "$OWNER:$GROUP" "$(stat -c %u:%g "$r/.git/config")" "config owner"
}

test_fetch_brings_the_commits_and_not_the_hooks() {
  local d=/tmp/wr-clone-fetch r before out sha
  make_repo "$d"
  r=$d/repo
  new_sandbox cl-fetch --clone shell "$r"
  before=$(repo_state "$r")
  # The agent: a branch with an edit, a new file and a deleted one; hooks
  # and config that would run on the host if anything of it did.
  inside cl-fetch 'cd /workspace && git checkout -q -b agent-work &&
    printf "print(\"changed\")\n" > app.py && rm util.py &&
    printf "x = 1\n" > added.py && git add -A &&
    git -c user.name=agent -c user.email=agent@example.invalid \
      commit -q -m "agent change" &&
    for h in post-merge post-checkout reference-transaction fsmonitor-watchman; do
      printf "#!/bin/sh\ntouch '"$d"'/hook-ran-\$0\n" > .git/hooks/$h
      chmod 755 .git/hooks/$h
    done &&
    git config core.fsmonitor "touch '"$d"'/fsmonitor-ran" &&
    git config core.hooksPath /workspace/.git/hooks'
  sha=$(inside cl-fetch git rev-parse agent-work)
  out=$(cd "$r" && git fetch warren-cl-fetch agent-work 2>&1) ||
    fail "git fetch failed: $out"
  assert_contains "$out" "agent-work -> FETCH_HEAD" "git fetch"
  assert_eq "$sha" "$(git -C "$r" rev-parse FETCH_HEAD)" "FETCH_HEAD"
  assert_eq "$sha" "$(git -C "$r" rev-parse warren-cl-fetch/agent-work)" \
    "remote-tracking branch"
  out=$(git -C "$r" diff --stat HEAD FETCH_HEAD)
  assert_contains "$out" "added.py" "diff --stat"
  assert_contains "$out" "util.py" "diff --stat"
  assert_contains "$out" "app.py" "diff --stat"
  assert_contains "$(git -C "$r" show FETCH_HEAD:app.py)" changed "app.py"
  # Nothing ran, nothing of the sandbox's config came, the tree is as it was.
  out=$(ls "$d")
  assert_not_contains "$out" "ran" "files made by hooks"
  assert_eq "$before" "$(repo_state "$r")" "the host repository"
  assert_eq "" "$(git -C "$r" config --get core.hooksPath || true)" "hooksPath"
  assert_eq "" "$(git -C "$r" config --get core.fsmonitor || true)" "fsmonitor"
  # No pack stays kept, and the bundle left no file behind, here or inside.
  assert_eq "" "$(ls "$r"/.git/objects/pack/*.keep 2>/dev/null || true)" ".keep"
  assert_eq "" "$(inside cl-fetch 'ls -d /tmp/warren-bundle.* 2>/dev/null || true')" \
    "bundles left inside"
  # The fetch is recorded inside, for rm.
  assert_eq "$sha" "$(inside cl-fetch git rev-parse refs/warren/fetched/agent-work)" \
    "mark inside"
  # A second fetch with nothing new works too, and so does a fetch of all.
  (cd "$r" && git fetch -q warren-cl-fetch) || fail "fetch of every branch"
  assert_eq "$(inside cl-fetch git rev-parse main)" \
    "$(git -C "$r" rev-parse warren-cl-fetch/main)" "main fetched"
}

test_rm_refuses_until_the_work_is_fetched() {
  local d=/tmp/wr-clone-rm r out
  make_repo "$d"
  r=$d/repo
  new_sandbox cl-rm --clone shell "$r"
  # Cloned commits are not "unfetched": a fresh clone goes with plain rm.
  inside cl-rm 'cd /workspace && git checkout -q -b more &&
    for i in 1 2; do echo $i > m$i; git add m$i
      git -c user.name=a -c user.email=a@example.invalid commit -q -m m$i
    done'
  out=$(must_fail "$WARREN" rm cl-rm)
  assert_contains "$out" "never fetched" "rm"
  assert_contains "$out" "more: 2 commits" "rm"
  assert_contains "$out" "git fetch warren-cl-rm more" "rm"
  assert_contains "$out" "warren rm -f cl-rm" "rm"
  assert_eq running "$(sb_state cl-rm)" "state after the refusal"
  # Stopped: started for the check, stopped again by the refusal.
  "$WARREN" stop cl-rm >/dev/null
  out=$(must_fail "$WARREN" rm cl-rm)
  assert_contains "$out" "more: 2 commits" "rm of a stopped sandbox"
  assert_eq stopped "$(sb_state cl-rm)" "state after the second refusal"
  # Fetched, it goes, and so does its remote.
  "$WARREN" start cl-rm >/dev/null
  (cd "$r" && git fetch -q warren-cl-rm more) || fail "fetch"
  "$WARREN" stop cl-rm >/dev/null
  out=$("$WARREN" rm cl-rm 2>&1) || fail "rm after the fetch: $out"
  assert_contains "$out" "removed git remote \`warren-cl-rm\`" "rm"
  must_fail "$WARREN" inspect cl-rm >/dev/null
  assert_eq "" "$(git -C "$r" config --get remote.warren-cl-rm.url || true)" \
    "remote after rm"
  assert_eq "$OWNER:$GROUP" "$(stat -c %u:%g "$r/.git/config")" "config owner"
  assert_eq "$(git -C "$r" rev-parse warren-cl-rm/more)" \
    "$(git -C "$r" rev-parse FETCH_HEAD)" "what was fetched stays"
}

test_rm_force_deletes_unfetched_work() {
  local d=/tmp/wr-clone-force r
  make_repo "$d"
  r=$d/repo
  new_sandbox cl-force --clone shell "$r"
  inside cl-force 'cd /workspace && echo x > x && git add x &&
    git -c user.name=a -c user.email=a@example.invalid commit -q -m x'
  must_fail "$WARREN" rm cl-force >/dev/null
  "$WARREN" rm -f cl-force >/dev/null 2>&1 || fail "rm -f"
  must_fail "$WARREN" inspect cl-force >/dev/null
  assert_eq "" "$(git -C "$r" config --get remote.warren-cl-force.url || true)" \
    "remote after rm -f"
}

test_fetch_errors_say_what_to_do() {
  local d=/tmp/wr-clone-errors r out
  make_repo "$d"
  r=$d/repo
  new_sandbox cl-err --clone shell "$r"
  # A paused one is woken by the fetch, as by any request, and runs on.
  "$WARREN" pause cl-err >/dev/null
  (cd "$r" && git fetch -q warren-cl-err feature) ||
    fail "fetch from a paused sandbox"
  assert_eq running "$(sb_state cl-err)" "a paused sandbox after the fetch"
  # A stopped one is started for the fetch and stopped again.
  "$WARREN" stop cl-err >/dev/null
  (cd "$r" && git fetch -q warren-cl-err feature) ||
    fail "fetch from a stopped sandbox"
  git -C "$r" rev-parse -q --verify FETCH_HEAD >/dev/null || fail "FETCH_HEAD"
  assert_eq stopped "$(sb_state cl-err)" "state after the fetch"
  out=$(cd "$r" && must_fail git fetch warren::cl-missing main)
  assert_contains "$out" "warren: " "fetch from a missing sandbox"
  assert_contains "$out" "cl-missing" "fetch from a missing sandbox"
  new_sandbox cl-plain
  out=$(cd "$r" && must_fail git fetch warren::cl-plain main)
  assert_contains "$out" "not in clone mode" "fetch from a plain sandbox"
  out=$(cd "$r" && must_fail git fetch "warren::NOT/A/NAME" main)
  assert_contains "$out" "warren::NAME" "a bad address"
}

# A sandbox in control of its own git: the bundle it makes lists a ref
# that climbs out of refs/heads, or another remote's ref, or carries a
# broken pack for a commit the host lacks (cut short, or with a bad
# checksum: refused by the host's index-pack, which says why). Each is
# refused, and nothing reaches the host's refs or packs.
test_forged_bundles_are_refused() {
  local d=/tmp/wr-clone-forged r out refs_before
  make_repo "$d"
  r=$d/repo
  new_sandbox cl-forge --clone shell "$r"
  refs_before=$(git -C "$r" for-each-ref)
  inside cl-forge "cat > /usr/local/bin/git <<'EOF'
#!/bin/sh
if [ \"\$1\" = bundle ] && [ \"\$2\" = create ]; then
  { printf '# v2 git bundle\n%s %s\n\n' \"\$(cat /forged-oid)\" \"\$(cat /forged-ref)\"
    cat /forged-pack; } > \"\$4\"
  exit 0
fi
exec /usr/bin/git \"\$@\"
EOF
chmod 755 /usr/local/bin/git
cd /workspace && git rev-parse HEAD > /forged-oid
printf 'PACK\0\0\0\2\0\0\0\1' > /forged-pack
echo refs/heads/../../config > /forged-ref"
  out=$(cd "$r" && must_fail git fetch warren-cl-forge)
  assert_contains "$out" "not a valid branch or tag name" "forged ref name"
  inside cl-forge "echo refs/remotes/origin/main > /forged-ref"
  out=$(cd "$r" && must_fail git fetch warren-cl-forge)
  assert_contains "$out" "not a valid branch or tag name" "a remote's ref"
  # A valid header for a new commit, with a pack cut short.
  inside cl-forge 'cd /workspace && git -c user.name=a \
    -c user.email=a@example.invalid commit -q --allow-empty -m new &&
    git rev-parse HEAD > /forged-oid && echo refs/heads/main > /forged-ref'
  out=$(cd "$r" && must_fail git fetch warren-cl-forge)
  assert_contains "$out" "index-pack refused the pack from sandbox \`cl-forge\` (exit 128): fatal: early EOF" \
    "a pack cut short"
  # An empty pack with a checksum of zeros: the host's index-pack refuses
  # it, and says why.
  inside cl-forge "{ printf 'PACK\0\0\0\2\0\0\0\0'; head -c 20 /dev/zero; } \
    > /forged-pack"
  out=$(cd "$r" && must_fail git fetch warren-cl-forge)
  assert_contains "$out" "index-pack refused the pack from sandbox \`cl-forge\` (exit 128): fatal: pack is corrupted" \
    "bad checksum"
  assert_eq "$refs_before" "$(git -C "$r" for-each-ref)" "host refs"
  assert_eq "" "$(ls "$r"/.git/objects/pack/*.pack 2>/dev/null || true)" \
    "host packs"
}

test_bad_paths_leave_no_sandbox() {
  local d=/tmp/wr-clone-bad out
  rm -rf "$d"
  host_git_env "$d"
  mkdir -p "$d/plain" "$d/empty"
  git -C "$d/empty" init -q
  out=$(must_fail "$WARREN" create --name cl-bad --clone shell "$d/plain")
  assert_contains "$out" "is not a git repository" "a plain directory"
  assert_contains "$out" "git commit" "a plain directory"
  must_fail "$WARREN" inspect cl-bad >/dev/null
  out=$(must_fail "$WARREN" create --name cl-bad --clone shell "$d/empty")
  assert_contains "$out" "has no commits: commit the starting code first" \
    "a repository without commits"
  must_fail "$WARREN" inspect cl-bad >/dev/null
  # A remote of that name that is not ours is left alone.
  make_repo "$d"
  git -C "$d/repo" remote add warren-cl-bad https://example.invalid/x.git
  out=$(must_fail "$WARREN" create --name cl-bad --clone shell "$d/repo")
  assert_contains "$out" "already has a remote \`warren-cl-bad\`" "a clash"
  must_fail "$WARREN" inspect cl-bad >/dev/null
  assert_eq https://example.invalid/x.git \
    "$(git -C "$d/repo" config remote.warren-cl-bad.url)" "the user's remote"
}

# A bundle header much larger than the first read: 3000 tags with long
# names, all listed by `git ls-remote` and fetched.
test_many_refs_are_listed() {
  local d=/tmp/wr-clone-many r n
  make_repo "$d"
  r=$d/repo
  new_sandbox cl-many --clone shell "$r"
  inside cl-many 'cd /workspace && h=$(git rev-parse HEAD) &&
    i=0; while [ $i -lt 3000 ]; do
      echo "create refs/tags/release-with-a-rather-long-name-$i $h"
      i=$((i + 1)); done | git update-ref --stdin'
  n=$(cd "$r" && git ls-remote warren-cl-many | grep -c refs/tags/release-) ||
    fail "ls-remote"
  assert_eq 3000 "$n" "tags listed"
  (cd "$r" && git fetch -q --tags warren-cl-many) || fail "fetch --tags"
  assert_eq 3000 "$(git -C "$r" tag -l 'release-*' | wc -l)" "tags fetched"
}
