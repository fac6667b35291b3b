# shellcheck shell=bash
# Security: a project's commits leave its sandbox for a real upstream (a
# smart-HTTP git server with basic auth: nginx, fcgiwrap, git
# http-backend), and nothing of the way out is the sandbox's to bend.
#
# The safe outcome: a commit made inside reaches the upstream with the
# credential from warren's secret store, and that credential is nowhere
# inside (files, environments, command lines, readable memory: the same
# search finds a planted decoy, so a broken search cannot pass); a wrong
# password keeps the version in the mirror and says the push failed; a
# forged bundle and forged ref names are refused with the mirror as it
# was; a rewritten history is refused; hooks and configuration set inside
# never run on the host. Sourced by tests/run-e2e, which provides lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

GIT_SRV=$(cd "$(dirname "${BASH_SOURCE[0]}")/../net" && pwd)/git-http-server.sh
UP_DIR=$WR_RUN/upstream
UP_PORT_FILE=$WR_RUN/upstream.port
UP_PASS_FILE=$WR_RUN/upstream.pass

up_port() { cat "$UP_PORT_FILE"; }
up_pass() { cat "$UP_PASS_FILE"; }
up_url() { echo "http://127.0.0.1:$(up_port)/$1.git"; }

# The server, once per file, with a long random password.
up_start() {
  if [ -f "$UP_PORT_FILE" ] && curl -s -o /dev/null "http://127.0.0.1:$(up_port)/"; then
    return 0
  fi
  command -v nginx >/dev/null && [ -x /usr/sbin/fcgiwrap ] ||
    skip "nginx-light and fcgiwrap are not installed (scripts/packages.txt)"
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    >"$UP_PORT_FILE"
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$UP_PASS_FILE"
  rm -rf "$UP_DIR"
  "$GIT_SRV" start "$UP_DIR" "$(up_port)" pusher "$(up_pass)" ||
    fail "the git server did not start"
}

up_repo() { # NAME
  rm -rf "$UP_DIR/repos/$1.git"
  "$GIT_SRV" repo "$UP_DIR" "$1"
}

up_heads() { # NAME: the upstream's refs, read with the password
  git ls-remote "http://pusher:$(up_pass)@127.0.0.1:$(up_port)/$1.git" 2>&1
}

mirror_refs() { # PROJECT
  git --git-dir="$WR_ROOT/projects/$1.git" for-each-ref \
    --format='%(refname) %(objectname)'
}

secret_set() { # NAME VALUE
  printf %s "$2" | "$WARREN" secret set "$1" --host 127.0.0.1 \
    --header X-Warren-Unused >/dev/null || fail "secret set $1"
}

# A pushing project on base, opened, with one file committed.
pushing_project() { # NAME
  up_start
  up_repo "$1"
  secret_set "$1-push" "pusher:$(up_pass)"
  "$WARREN" project rm "$1" >/dev/null 2>&1 || true
  "$WARREN" project create "$1" --image base --remote "$(up_url "$1")" \
    --remote-secret "$1-push" >/dev/null || fail "create $1"
  "$WARREN" project open "$1" >/dev/null || fail "open $1"
}

# Every place inside where a secret could be: files, environments and
# command lines, and the readable memory of every process. Prints the
# places where NEEDLE is found.
search_inside() { # SANDBOX NEEDLE
  "$WARREN" exec -i "$1" -- python3 - "$2" <<'PY'
import os, re, sys
needle = sys.argv[1].encode()
found = []
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for f in files:
        p = os.path.join(root, f)
        try:
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as fh:
                if needle in fh.read():
                    found.append("file " + p)
        except OSError:
            pass
me = os.getpid()
for pid in [d for d in os.listdir("/proc") if d.isdigit()]:
    if int(pid) == me:
        continue
    for what in ("environ", "cmdline"):
        try:
            with open("/proc/%s/%s" % (pid, what), "rb") as fh:
                if needle in fh.read():
                    found.append("%s of %s" % (what, pid))
        except OSError:
            pass
    try:
        maps = open("/proc/%s/maps" % pid).read().splitlines()
        mem = open("/proc/%s/mem" % pid, "rb", 0)
    except OSError:
        continue
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
        if not m:
            continue
        start, end = int(m.group(1), 16), int(m.group(2), 16)
        if end - start > (256 << 20):
            continue
        try:
            mem.seek(start)
            if needle in mem.read(end - start):
                found.append("memory of %s" % pid)
                break
        except (OSError, ValueError, OverflowError):
            pass
print("\n".join(found))
PY
}

test_a_commit_reaches_the_upstream_and_the_credential_stays_out() {
  local out decoy b64
  pushing_project pu
  decoy="warren-decoy-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  # The decoy is planted where the credential must not be: a file, an
  # environment, a process's memory.
  "$WARREN" exec project-pu -- sh -c "echo $decoy > /root/decoy.txt" || fail "decoy"
  "$WARREN" exec -d --tag decoy --env "DECOY=$decoy" project-pu -- \
    python3 -c "import time; s = '$decoy'.upper().lower(); time.sleep(600)" \
    >/dev/null || fail "decoy process"
  "$WARREN" exec project-pu -- sh -c 'echo pushed > /app/up.txt'
  out=$("$WARREN" project commit pu -m "Up we go" 2>&1) || fail "commit: $out"
  assert_contains "$out" "pushed to $(up_url pu)"
  assert_contains "$(up_heads pu)" "refs/heads/main"
  assert_eq "$(mirror_refs pu | awk '/refs\/heads\/main/ {print $2}')" \
    "$(up_heads pu | awk '/refs\/heads\/main/ {print $1}')" \
    "the upstream has the mirror's commit"
  rm -rf "$WR_RUN/pu-clone"
  git clone -q "http://pusher:$(up_pass)@127.0.0.1:$(up_port)/pu.git" \
    "$WR_RUN/pu-clone" || fail "clone from the upstream"
  assert_eq pushed "$(cat "$WR_RUN/pu-clone/up.txt")"
  # The search finds the decoy in a file, an environment and memory ...
  out=$(search_inside project-pu "$decoy")
  assert_contains "$out" "file /root/decoy.txt" "the search reads files"
  assert_contains "$out" "environ of" "the search reads environments"
  assert_contains "$out" "memory of" "the search reads memory"
  # ... and not the credential, in any form.
  b64=$(printf %s "pusher:$(up_pass)" | base64 -w0)
  assert_eq "" "$(search_inside project-pu "$(up_pass)")" "the password inside"
  assert_eq "" "$(search_inside project-pu "$b64")" "the Basic header inside"
  "$WARREN" project rm pu >/dev/null
}

test_a_wrong_password_keeps_the_version_and_says_so() {
  local out
  pushing_project pw
  secret_set pw-push "pusher:not-the-password"
  "$WARREN" exec project-pw -- sh -c 'echo one > /app/a.txt'
  out=$("$WARREN" project commit pw -m one 2>&1) || fail "commit: $out"
  assert_contains "$out" "pw: version 2"
  assert_contains "$out" "the push to $(up_url pw) failed"
  assert_not_contains "$(up_heads pw)" "refs/heads/main"
  assert_contains "$(mirror_refs pw)" "refs/heads/main" "the mirror kept it"
  assert_not_contains "$out" "not-the-password" "the message shows no secret"
  secret_set pw-push "pusher:$(up_pass)"
  "$WARREN" exec project-pw -- sh -c 'echo two > /app/b.txt'
  out=$("$WARREN" project commit pw -m two 2>&1) || fail "commit: $out"
  assert_contains "$out" "pushed"
  assert_eq "$(mirror_refs pw | awk '/refs\/heads\/main/ {print $2}')" \
    "$(up_heads pw | awk '/refs\/heads\/main/ {print $1}')" "both went"
  "$WARREN" project rm pw >/dev/null
}

# A git inside that answers `git bundle create` with what the script in
# $1 writes to the bundle's path.
forge_bundle() { # SANDBOX SCRIPT
  "$WARREN" exec "$1" -- sh -c "cat > /usr/local/bin/git <<'EOF'
#!/bin/sh
if [ \"\$1\" = bundle ] && [ \"\$2\" = create ]; then
  f=\$4
  $2
  exit 0
fi
exec /usr/bin/git \"\$@\"
EOF
chmod 755 /usr/local/bin/git" || fail "forged git"
}

test_forged_bundles_and_ref_names_are_refused() {
  local before out forge
  pushing_project fb
  before=$(mirror_refs fb)
  for forge in \
    'printf "# v2 git bundle\n" > "$f"; printf "%040d refs/heads/../../evil\n\nPACK" 0 >> "$f"' \
    'printf "# v2 git bundle\n" > "$f"; printf "%040d refs/heads/a..b\n\nPACK" 0 >> "$f"' \
    'printf "# v2 git bundle\n" > "$f"; printf "%040d refs/remotes/x\n\nPACK" 0 >> "$f"' \
    'printf "# v2 git bundle\n" > "$f"; printf "%040d refs/heads/main\n\nPACKnot a pack" 0 >> "$f"' \
    'head -c 100000 /dev/urandom > "$f"'; do
    forge_bundle project-fb "$forge"
    "$WARREN" exec project-fb -- sh -c 'echo x$RANDOM >> /app/f.txt'
    out=$("$WARREN" project commit fb -m forged 2>&1) && fail "a forged bundle was taken: $forge"
    assert_contains "$out" "take the commits of sandbox"
    assert_eq "$before" "$(mirror_refs fb)" "the mirror after: $forge"
  done
  assert_not_contains "$(up_heads fb)" "evil"
  assert_daemon_alive
  "$WARREN" project rm fb >/dev/null
}

test_a_rewritten_history_is_refused() {
  local before out
  pushing_project rh
  "$WARREN" exec project-rh -- sh -c 'echo a > /app/a.txt'
  "$WARREN" project commit rh -m a >/dev/null || fail "commit a"
  before=$(mirror_refs rh)
  "$WARREN" exec project-rh -- sh -c 'cd /app && git reset -q --hard HEAD~1 &&
    echo b > b.txt'
  out=$("$WARREN" project commit rh -m b 2>&1) && fail "a rewrite was taken"
  assert_contains "$out" "non-fast-forward"
  assert_eq "$before" "$(mirror_refs rh)" "the mirror kept its history"
  "$WARREN" project rm rh >/dev/null
}

test_hooks_and_config_inside_never_run_on_the_host() {
  local tag m
  pushing_project hk
  tag=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
  m=/tmp/warren-pwned-$tag
  "$WARREN" exec project-hk -- sh -c "cd /app &&
    for h in post-commit pre-push reference-transaction post-checkout \
      pre-auto-gc post-rewrite; do
      printf '#!/bin/sh\ntouch $m-hook-\$(basename \$0)\n' > .git/hooks/\$h
      chmod 755 .git/hooks/\$h
    done
    git config core.fsmonitor 'touch $m-fsmonitor'
    git config core.sshCommand 'touch $m-ssh'
    git config credential.helper '!touch $m-credential'
    git config uploadpack.packObjectsHook 'touch $m-pack'
    git config filter.x.clean 'touch $m-filter'
    echo '* filter=x' > .gitattributes
    echo hooked > h.txt" || fail "hooks"
  "$WARREN" project commit hk -m hooked >/dev/null 2>&1 || fail "commit"
  "$WARREN" project log hk >/dev/null || fail "log"
  "$WARREN" project diff hk 1 >/dev/null || fail "diff"
  # The commit ran inside, so the hooks ran there; never on the host.
  assert_eq "" "$(ls /tmp/warren-pwned-"$tag"* 2>/dev/null)" \
    "markers on the host"
  assert_contains "$(up_heads hk)" "refs/heads/main" "and the push went"
  "$WARREN" project rm hk >/dev/null
  "$GIT_SRV" stop "$UP_DIR" || true
}
