# shellcheck shell=bash
# End-to-end: files in and out of a sandbox.
#
# `warren cp` with docker cp's rules, the files API with curl (binary and
# 100 MB streamed contents, list, stat, mkdir, rm, move, chmod, archives),
# all of it while the sandbox runs, is paused (which wakes it) and is
# stopped; and hostile sandboxes: symlinks to the host's / and
# /etc/passwd, `..`, tar entries that try to climb out, absurd path
# lengths. The host's files never change and reads return the sandbox's
# own files.

uri() { jq -rn --arg v "$1" '$v|@uri'; }

# files API shorthands on sandbox $SB: fput PATH [curl args] (body from -T
# or --data-binary), fget PATH [curl args], fstat PATH, flist PATH DEPTH.
fput() {
  local p=$1
  shift
  api_call PUT "/v1/sandboxes/$SB/files?path=$(uri "$p")" "$@"
}
fget() {
  local p=$1
  shift
  curl -sS --fail --unix-socket "$WR_SOCK" \
    "http://warren/v1/sandboxes/$SB/files?path=$(uri "$p")" "$@"
}
fstat() {
  api_call GET "/v1/sandboxes/$SB/files/stat?path=$(uri "$1")"
}
flist() {
  api_call GET "/v1/sandboxes/$SB/files/list?path=$(uri "$1")&depth=${2:-1}"
}
fpost() { # OP JSON
  api_call POST "/v1/sandboxes/$SB/files/$1" -H 'Content-Type: application/json' \
    -d "$2"
}
fdelete() { # PATH [recursive]
  api_call DELETE "/v1/sandboxes/$SB/files?path=$(uri "$1")${2:+&recursive=true}"
}

sum() { sha256sum | cut -c1-64; }

test_cp_into_sandbox() {
  local tmp
  new_sandbox fl-cpin
  tmp=$(mktemp -d)
  printf 'one\n' >"$tmp/f"
  mkdir -p "$tmp/d/sub"
  printf 'two\n' >"$tmp/d/sub/g"
  printf '#!/bin/sh\necho run\n' >"$tmp/d/tool"
  chmod 755 "$tmp/d/tool"
  ln -s sub/g "$tmp/d/link"

  "$WARREN" cp "$tmp/f" fl-cpin:/tmp/ # file to a dir: DIR/BASENAME
  "$WARREN" cp "$tmp/f" fl-cpin:/tmp/renamed # file to a path: that path
  "$WARREN" cp "$tmp/d" fl-cpin:/srv # dir to an existing dir: DEST/BASENAME
  "$WARREN" cp "$tmp/d" fl-cpin:/newdir # dir to a new path: the copy
  "$WARREN" exec fl-cpin -- mkdir /into
  "$WARREN" cp "$tmp/d/." fl-cpin:/into # contents
  out=$("$WARREN" exec fl-cpin -- sh -c '
    cat /tmp/f /tmp/renamed /srv/d/sub/g /newdir/sub/g /into/sub/g
    /srv/d/tool; readlink /srv/d/link; cat /srv/d/link
    test -d /into/sub && test ! -e /into/d && echo contents-only')
  assert_eq "one
one
two
two
two
run
sub/g
two
contents-only" "$out" "files after cp in"
  # Replacing a file.
  printf 'new\n' >"$tmp/f"
  "$WARREN" cp "$tmp/f" fl-cpin:/tmp/renamed
  assert_eq new "$("$WARREN" exec fl-cpin -- cat /tmp/renamed)" "replaced file"
  # A tar stream on stdin.
  tar -C "$tmp" -c d | "$WARREN" cp - fl-cpin:/fromtar
  assert_eq two "$("$WARREN" exec fl-cpin -- cat /fromtar/d/sub/g)" "cp -"
  # A file to a missing directory (path ends in /) is refused.
  must_fail "$WARREN" cp "$tmp/f" fl-cpin:/no/such/dir/ >/dev/null
  must_fail "$WARREN" cp "$tmp/missing" fl-cpin:/tmp/ >/dev/null
  rm -rf "$tmp"
}

test_cp_out_of_sandbox() {
  local tmp
  new_sandbox fl-cpout
  tmp=$(mktemp -d)
  "$WARREN" exec fl-cpout -- sh -c '
    mkdir -p /srv/app/lib && echo a >/srv/app/a && echo b >/srv/app/lib/b
    ln -s lib/b /srv/app/lb; chmod 700 /srv/app/lib; echo log >/var/log/x.log'
  "$WARREN" cp fl-cpout:/var/log/x.log "$tmp"
  assert_eq log "$(cat "$tmp/x.log")" "file into a dir"
  "$WARREN" cp fl-cpout:/var/log/x.log "$tmp/other"
  assert_eq log "$(cat "$tmp/other")" "file to a path"
  "$WARREN" cp fl-cpout:/srv/app "$tmp/backup"
  assert_eq b "$(cat "$tmp/backup/lib/b")" "dir to a new path"
  assert_eq lib/b "$(readlink "$tmp/backup/lb")" "symlink kept as a link"
  assert_eq 700 "$(stat -c %a "$tmp/backup/lib")" "mode kept"
  "$WARREN" cp fl-cpout:/srv/app "$tmp/backup"
  assert_eq a "$(cat "$tmp/backup/app/a")" "dir into an existing dir"
  # Again, onto the copy: the trees merge, files are replaced.
  echo mine >"$tmp/backup/app/lib/mine"
  "$WARREN" exec fl-cpout -- sh -c 'echo a2 >/srv/app/a'
  "$WARREN" cp fl-cpout:/srv/app "$tmp/backup"
  assert_eq a2 "$(cat "$tmp/backup/app/a")" "a file replaced by the merge"
  assert_eq mine "$(cat "$tmp/backup/app/lib/mine")" "a host file kept by the merge"
  assert_eq b "$(cat "$tmp/backup/app/lib/b")" "a file merged into a directory"
  assert_eq "" "$(find "$tmp" -name '.warren-*')" "temporary files"
  out=$("$WARREN" cp fl-cpout:/srv/app - | tar -t | sort)
  assert_eq "app/
app/a
app/lb
app/lib/
app/lib/b" "$out" "cp to - (tar)"
  must_fail "$WARREN" cp fl-cpout:/no/such/file "$tmp/" >/dev/null
  rm -rf "$tmp"
}

test_api_put_get_binary_and_stat() {
  local tmp
  new_sandbox fl-bin
  SB=fl-bin
  tmp=$(mktemp -d)
  head -c 300000 /dev/urandom >"$tmp/bin"
  printf '\0\1\2\377\r\n\0' >>"$tmp/bin"
  fput /data/blob.bin -T "$tmp/bin"
  assert_eq 201 "$API_STATUS" "PUT ($API_BODY)"
  assert_eq file "$(json_get "$API_BODY" .type)" "PUT's FileInfo type"
  assert_eq 300007 "$(json_get "$API_BODY" .size)" "PUT's FileInfo size"
  assert_eq /data/blob.bin "$(json_get "$API_BODY" .path)" "PUT's FileInfo path"
  assert_eq "$(sum <"$tmp/bin")" "$(fget /data/blob.bin | sum)" "GET of binary"
  assert_eq "$(sum <"$tmp/bin")" \
    "$("$WARREN" exec fl-bin -- sha256sum /data/blob.bin | cut -c1-64)" \
    "the file as the sandbox sees it"
  # Owned by the sandbox's root, with the mode asked for.
  api_call PUT "/v1/sandboxes/$SB/files?path=/data/script.sh&mode=0750" \
    --data-binary $'#!/bin/sh\necho hi\n'
  assert_eq 201 "$API_STATUS" "PUT with mode ($API_BODY)"
  assert_eq "0750 0 0" "$(json_get "$API_BODY" '"\(.mode) \(.uid) \(.gid)"')" \
    "mode and owner"
  assert_eq "750 root root" \
    "$("$WARREN" exec fl-bin -- stat -c '%a %U %G' /data/script.sh)" \
    "mode and owner inside"
  assert_eq hi "$("$WARREN" exec fl-bin -- /data/script.sh)" "run it"
  # An empty file.
  fput /data/empty --data-binary ''
  assert_eq 201 "$API_STATUS" "empty PUT"
  assert_eq 0 "$(fget /data/empty | wc -c)" "empty GET"
  # stat of a dir, a symlink, a missing file.
  "$WARREN" exec fl-bin -- ln -s blob.bin /data/link
  fstat /data/link
  assert_eq "symlink blob.bin" "$(json_get "$API_BODY" '"\(.type) \(.link_target)"')" \
    "stat of a symlink"
  fstat /data
  assert_eq dir "$(json_get "$API_BODY" .type)" "stat of a dir"
  fstat /data/missing
  assert_eq 404 "$API_STATUS" "stat of a missing file"
  assert_api_error "$API_BODY" not_found
  api_call GET "/v1/sandboxes/$SB/files?path=/data"
  assert_eq 400 "$API_STATUS" "GET of a directory"
  assert_api_error "$API_BODY" is_directory
  api_call GET "/v1/sandboxes/$SB/files?path=/nope"
  assert_eq 404 "$API_STATUS" "GET of a missing file"
  api_call GET "/v1/sandboxes/$SB/files"
  assert_eq 400 "$API_STATUS" "no path"
  assert_api_error "$API_BODY" bad_request
  rm -rf "$tmp"
}

test_api_large_streamed_file() {
  local tmp hwm1 hwm2 s
  new_sandbox fl-big
  SB=fl-big
  tmp=$(mktemp -d)
  head -c 100000000 /dev/urandom >"$tmp/big"
  s=$(sum <"$tmp/big")
  hwm1=$(awk '/VmHWM/ {print $2}' /proc/"$(daemon_pid)"/status)
  # With a Content-Length...
  fput /big -T "$tmp/big"
  assert_eq 201 "$API_STATUS" "PUT 100 MB ($API_BODY)"
  assert_eq 100000000 "$(json_get "$API_BODY" .size)" "size"
  # ... and chunked.
  fput /big2 -H 'Transfer-Encoding: chunked' -T - <"$tmp/big"
  assert_eq 201 "$API_STATUS" "chunked PUT 100 MB ($API_BODY)"
  assert_eq "$s" "$(fget /big | sum)" "GET of 100 MB"
  assert_eq "$s" "$(fget /big2 | sum)" "GET of the chunked upload"
  assert_eq "$s" "$("$WARREN" exec fl-big -- sha256sum /big2 | cut -c1-64)" \
    "the file inside"
  hwm2=$(awk '/VmHWM/ {print $2}' /proc/"$(daemon_pid)"/status)
  [ $((hwm2 - hwm1)) -lt 65536 ] ||
    fail "warrend's peak memory grew by $(((hwm2 - hwm1) / 1024)) MiB: not streamed"
  # cp streams too, both ways.
  "$WARREN" cp "$tmp/big" fl-big:/big3
  "$WARREN" cp fl-big:/big3 "$tmp/back"
  assert_eq "$s" "$(sum <"$tmp/back")" "cp of 100 MB round trip"
  rm -rf "$tmp"
}

test_api_list_mkdir_rm() {
  local names
  new_sandbox fl-tree
  SB=fl-tree
  fpost mkdir '{"path":"/t/a/b/c"}'
  assert_eq 201 "$API_STATUS" "mkdir -p ($API_BODY)"
  assert_eq dir "$(json_get "$API_BODY" .type)" "mkdir's FileInfo"
  "$WARREN" exec fl-tree -- sh -c 'echo 1 >/t/f1; echo 22 >/t/a/f2; echo 3 >/t/a/b/c/f3'
  flist /t 1
  assert_eq 200 "$API_STATUS" "list"
  assert_eq "/t/a /t/f1" "$(json_get "$API_BODY" '[.entries[].path] | join(" ")')" \
    "list depth 1"
  assert_eq false "$(json_get "$API_BODY" .truncated)" "truncated"
  flist /t 2
  names=$(json_get "$API_BODY" '[.entries[].path] | sort | join(" ")')
  assert_eq "/t/a /t/a/b /t/a/f2 /t/f1" "$names" "list depth 2"
  assert_eq 3 "$(json_get "$API_BODY" '.entries[] | select(.path=="/t/a/f2") | .size')" \
    "size in a listing"
  api_call GET "/v1/sandboxes/$SB/files/list?path=/t&depth=5&limit=2"
  assert_eq "2 true" "$(json_get "$API_BODY" '"\(.entries | length) \(.truncated)"')" \
    "list with a limit"
  flist /t/f1
  [ "$API_STATUS" = 400 ] || fail "list of a file: $API_STATUS $API_BODY"

  # mkdir without parents under a missing dir fails; an existing dir with
  # parents is fine; a mode is applied.
  fpost mkdir '{"path":"/u/v","parents":false}'
  [ "$API_STATUS" = 404 ] || fail "mkdir without parents: $API_STATUS $API_BODY"
  fpost mkdir '{"path":"/t/a","parents":true}'
  [ "${API_STATUS#2}" != "$API_STATUS" ] || fail "mkdir -p of an existing dir: $API_BODY"
  fpost mkdir '{"path":"/t/m","mode":"0700","parents":false}'
  assert_eq 0700 "$(json_get "$API_BODY" .mode)" "mkdir mode"

  # rm: a non-empty dir needs recursive; then it is gone.
  fdelete /t/a
  [ "$API_STATUS" = 400 ] || [ "$API_STATUS" = 409 ] ||
    fail "rm of a non-empty dir: $API_STATUS $API_BODY"
  "$WARREN" exec fl-tree -- test -f /t/a/b/c/f3 || fail "files gone after refusal"
  fdelete /t/a recursive
  assert_eq 204 "$API_STATUS" "rm -r ($API_BODY)"
  "$WARREN" exec fl-tree -- test ! -e /t/a || fail "/t/a still there"
  fdelete /t/f1
  assert_eq 204 "$API_STATUS" "rm of a file"
  fdelete /t/f1
  assert_eq 404 "$API_STATUS" "rm of a missing file"
  fdelete / recursive
  [ "${API_STATUS#4}" != "$API_STATUS" ] || fail "rm -r / was not refused: $API_STATUS"
  "$WARREN" exec fl-tree -- test -x /bin/sh || fail "rm -r / did something"
}

test_api_move_and_chmod() {
  new_sandbox fl-mv
  SB=fl-mv
  "$WARREN" exec fl-mv -- sh -c 'echo a >/a; echo b >/b; mkdir /dir'
  fpost move '{"from":"/a","to":"/b"}'
  assert_eq 409 "$API_STATUS" "move onto an existing file"
  assert_api_error "$API_BODY" conflict
  assert_eq "a b" "$("$WARREN" exec fl-mv -- sh -c 'echo $(cat /a /b)')" \
    "both files after a refused move"
  fpost move '{"from":"/a","to":"/b","overwrite":true}'
  assert_eq 200 "$API_STATUS" "move with overwrite ($API_BODY)"
  assert_eq /b "$(json_get "$API_BODY" .path)" "moved FileInfo"
  assert_eq a "$("$WARREN" exec fl-mv -- cat /b)" "content after overwrite"
  "$WARREN" exec fl-mv -- test ! -e /a || fail "/a still there"
  fpost move '{"from":"/b","to":"/dir/c"}'
  assert_eq 200 "$API_STATUS" "move into a dir"
  assert_eq a "$("$WARREN" exec fl-mv -- cat /dir/c)" "moved file"
  fpost move '{"from":"/dir","to":"/dir2"}'
  assert_eq 200 "$API_STATUS" "move a dir"
  fpost move '{"from":"/nope","to":"/x"}'
  assert_eq 404 "$API_STATUS" "move of a missing file"

  fpost chmod '{"path":"/dir2/c","mode":"0751"}'
  assert_eq 200 "$API_STATUS" "chmod ($API_BODY)"
  assert_eq 0751 "$(json_get "$API_BODY" .mode)" "chmod FileInfo"
  assert_eq 751 "$("$WARREN" exec fl-mv -- stat -c %a /dir2/c)" "mode inside"
  fpost chmod '{"path":"/dir2/c","mode":"4755"}'
  assert_eq 400 "$API_STATUS" "setuid refused"
  fpost chmod '{"path":"/dir2/c","mode":"rwx"}'
  assert_eq 400 "$API_STATUS" "non-octal mode"
  fpost chmod '{"path":"/dir2/c"}'
  assert_eq 400 "$API_STATUS" "chmod without mode"
}

test_api_archive_round_trip() {
  local tmp
  new_sandbox fl-tar
  SB=fl-tar
  tmp=$(mktemp -d)
  "$WARREN" exec fl-tar -- sh -c '
    mkdir -p /proj/src/deep && echo main >/proj/src/main.c
    head -c 200000 /dev/urandom >/proj/blob; chmod 750 /proj/src
    ln -s src/main.c /proj/m; echo x >/proj/src/deep/x'
  curl -sS --fail --unix-socket "$WR_SOCK" -o "$tmp/a.tar" \
    "http://warren/v1/sandboxes/$SB/files/archive?path=/proj"
  assert_eq "proj/
proj/blob
proj/m
proj/src/
proj/src/deep/
proj/src/deep/x
proj/src/main.c" "$(tar tf "$tmp/a.tar" | sort)" "tar tf of the archive"
  mkdir "$tmp/x" && tar -C "$tmp/x" -xf "$tmp/a.tar"
  assert_eq main "$(cat "$tmp/x/proj/src/main.c")" "file from the archive"
  assert_eq src/main.c "$(readlink "$tmp/x/proj/m")" "link from the archive"
  # Back in under another directory (created), and compared inside.
  api_call PUT "/v1/sandboxes/$SB/files/archive?path=/copy/here" \
    --data-binary @"$tmp/a.tar"
  assert_eq 200 "$API_STATUS" "archive PUT ($API_BODY)"
  assert_eq "3 3 1" "$(json_get "$API_BODY" '"\(.files) \(.dirs) \(.links)"')" \
    "archive PUT counts"
  out=$("$WARREN" exec fl-tar -- sh -c '
    cd /proj && find . | sort | while read -r f; do
      if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"
      elif [ -f "$f" ]; then echo "$f $(stat -c %a "$f") $(sha256sum <"$f")"
      else echo "$f $(stat -c %a "$f")"; fi
    done' | sum)
  assert_eq "$out" "$("$WARREN" exec fl-tar -- sh -c '
    cd /copy/here/proj && find . | sort | while read -r f; do
      if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"
      elif [ -f "$f" ]; then echo "$f $(stat -c %a "$f") $(sha256sum <"$f")"
      else echo "$f $(stat -c %a "$f")"; fi
    done' | sum)" "the round trip is identical"
  # Ownership inside the sandbox survives the trip both ways.
  "$WARREN" exec -u 1000:1001 fl-tar -- sh -c 'mkdir /tmp/own; echo o >/tmp/own/f'
  fstat /tmp/own/f
  assert_eq "1000 1001" "$(json_get "$API_BODY" '"\(.uid) \(.gid)"')" "stat owner"
  curl -sS --fail --unix-socket "$WR_SOCK" -o "$tmp/own.tar" \
    "http://warren/v1/sandboxes/$SB/files/archive?path=/tmp/own"
  assert_contains "$(tar tvf "$tmp/own.tar")" "1000/1001" "owner in the archive"
  api_call PUT "/v1/sandboxes/$SB/files/archive?path=/own-copy" \
    --data-binary @"$tmp/own.tar"
  assert_eq "1000:1001 1000:1001" \
    "$("$WARREN" exec fl-tar -- stat -c %u:%g /own-copy/own /own-copy/own/f | tr '\n' ' ' | sed 's/ $//')" \
    "owner after extracting"
  # A single file's archive holds just it.
  curl -sS --unix-socket "$WR_SOCK" \
    "http://warren/v1/sandboxes/$SB/files/archive?path=/proj/src/main.c" |
    tar t >"$tmp/list"
  assert_eq main.c "$(cat "$tmp/list")" "archive of a file"
  # Garbage is refused cleanly.
  api_call PUT "/v1/sandboxes/$SB/files/archive?path=/junk" \
    --data-binary "this is not a tar archive, not at all, no"
  [ "${API_STATUS#4}" != "$API_STATUS" ] || fail "garbage tar: $API_STATUS $API_BODY"
  api_call GET "/v1/sandboxes/$SB/files/archive?path=/missing"
  assert_eq 404 "$API_STATUS" "archive of a missing path"
  rm -rf "$tmp"
}

# Every operation of the files API against the current state of $SB.
files_ops_work() { # WHAT
  local what=$1 tmp
  tmp=$(mktemp -d)
  fput /w/file -T /etc/services
  assert_eq 201 "$API_STATUS" "$what: PUT ($API_BODY)"
  assert_eq "$(sum </etc/services)" "$(fget /w/file | sum)" "$what: GET"
  fstat /w/file
  assert_eq 200 "$API_STATUS" "$what: stat"
  flist /w
  assert_eq /w/file "$(json_get "$API_BODY" '.entries[0].path')" "$what: list"
  fpost mkdir '{"path":"/w/d/e"}'
  assert_eq 201 "$API_STATUS" "$what: mkdir"
  fpost move '{"from":"/w/file","to":"/w/d/e/moved"}'
  assert_eq 200 "$API_STATUS" "$what: move"
  fpost chmod '{"path":"/w/d/e/moved","mode":"0600"}'
  assert_eq 200 "$API_STATUS" "$what: chmod"
  curl -sS --fail --unix-socket "$WR_SOCK" -o "$tmp/a.tar" \
    "http://warren/v1/sandboxes/$SB/files/archive?path=/w/d"
  assert_contains "$(tar tf "$tmp/a.tar")" "d/e/moved" "$what: archive GET"
  api_call PUT "/v1/sandboxes/$SB/files/archive?path=/w2" --data-binary @"$tmp/a.tar"
  assert_eq 200 "$API_STATUS" "$what: archive PUT ($API_BODY)"
  fdelete /w recursive
  assert_eq 204 "$API_STATUS" "$what: rm -r"
  "$WARREN" cp /etc/hostname "$SB:/cp-file"
  "$WARREN" cp "$SB:/cp-file" "$tmp/back"
  assert_eq "$(cat /etc/hostname)" "$(cat "$tmp/back")" "$what: cp"
  rm -rf "$tmp"
}

test_api_works_paused_and_stopped() {
  new_sandbox fl-states
  SB=fl-states
  "$WARREN" pause fl-states >/dev/null
  files_ops_work paused
  # The first of them woke it (15-wake.sh has more).
  assert_eq running "$(sb_state fl-states)" "state after file operations"
  assert_eq files "$(sb_get fl-states .last_wake.by)" "what woke it"
  assert_eq 0600 "$("$WARREN" exec fl-states -- stat -c %04a /w2/d/e/moved)" \
    "a file written while paused, seen after resume"
  "$WARREN" exec fl-states -- rm -rf /w2 /cp-file
  "$WARREN" stop fl-states >/dev/null
  files_ops_work stopped
  "$WARREN" start fl-states >/dev/null
  assert_eq 0600 "$("$WARREN" exec fl-states -- stat -c %04a /w2/d/e/moved)" \
    "a file written while stopped, seen after start"
}

# The host's file is exactly as it was.
host_fingerprint() { # FILE
  stat -c '%s %Y %a %u %i %h' "$1"
  sha256sum <"$1"
}

test_hostile_symlinks_stay_inside() {
  local fp_passwd fp_shadow inside tmp
  new_sandbox fl-evil
  SB=fl-evil
  tmp=$(mktemp -d /tmp/fl-evil.XXXXXX)
  echo "host secret" >"$tmp/secret"
  fp_passwd=$(host_fingerprint /etc/passwd)
  fp_shadow=$(host_fingerprint /etc/shadow)
  "$WARREN" exec fl-evil -- sh -c "
    ln -s / /escape; ln -s /etc/passwd /pw; ln -s $tmp /hosttmp
    ln -s ../../../../../../etc /up; mkdir -p $tmp; echo sandbox >$tmp/secret"
  inside=$("$WARREN" exec fl-evil -- cat /etc/passwd | sum)

  # Reads through the links get the sandbox's files.
  assert_eq "$inside" "$(fget /pw | sum)" "GET /pw"
  assert_eq "$inside" "$(fget /escape/etc/passwd | sum)" "GET /escape/etc/passwd"
  assert_eq "$inside" "$(fget /up/passwd | sum)" "GET /up/passwd"
  assert_eq sandbox "$(fget /hosttmp/secret)" "GET through a link to a host dir"
  assert_eq fl-evil "$(fget /escape/etc/hostname)" "GET /escape/etc/hostname"
  flist /escape/etc
  assert_contains "$(json_get "$API_BODY" '[.entries[].name] | join(" ")')" \
    passwd "list through /escape"

  # Writes, moves, chmods, mkdirs and deletes through them never reach the host.
  fput /pw --data-binary 'pwned::0:0::/:/bin/sh'
  fput /escape/etc/passwd --data-binary 'pwned::0:0::/:/bin/sh'
  fput "/hosttmp/secret" --data-binary 'pwned'
  fput "/escape$tmp/secret" --data-binary 'pwned'
  fput "/escape$tmp/new-file" --data-binary 'pwned'
  fpost chmod '{"path":"/escape/etc/passwd","mode":"0777"}'
  fpost chmod "{\"path\":\"/hosttmp/secret\",\"mode\":\"0777\"}"
  fpost mkdir "{\"path\":\"/escape$tmp/new-dir\"}"
  fpost move "{\"from\":\"/hosttmp/secret\",\"to\":\"/moved\",\"overwrite\":true}"
  fdelete "/escape$tmp" recursive
  api_call PUT "/v1/sandboxes/$SB/files/archive?path=/escape$tmp" \
    --data-binary @<(tar -C /etc -c hostname)
  assert_eq "$fp_passwd" "$(host_fingerprint /etc/passwd)" "host /etc/passwd"
  assert_eq "$fp_shadow" "$(host_fingerprint /etc/shadow)" "host /etc/shadow"
  assert_eq "host secret" "$(cat "$tmp/secret")" "host file behind /hosttmp"
  assert_eq 644 "$(stat -c %a "$tmp/secret")" "host file's mode"
  assert_eq "secret" "$(ls "$tmp")" "host dir's entries"
  # And the sandbox saw them, inside.
  "$WARREN" exec fl-evil -- grep -q pwned /etc/passwd ||
    fail "the write through /escape did not land in the sandbox's /etc/passwd"
  rm -rf "$tmp"
}

test_hostile_dotdot_and_long_paths() {
  local p tmp
  new_sandbox fl-dots
  SB=fl-dots
  tmp=/tmp/fl-dots-$$
  rm -f "$tmp"
  fput "/../../../../..$tmp" --data-binary 'dotdot'
  [ ! -e "$tmp" ] || { rm -f "$tmp"; fail "a PUT with .. wrote the host's $tmp"; }
  if [ "$API_STATUS" = 201 ]; then
    assert_eq "$tmp" "$(json_get "$API_BODY" .path)" "the path it landed at"
    assert_eq dotdot "$("$WARREN" exec fl-dots -- cat "$tmp")" "inside"
  fi
  assert_eq fl-dots "$(fget /../../../etc/hostname)" "GET with .."
  assert_eq fl-dots "$(fget /tmp/../etc/./hostname)" "GET with . and .."
  # Encoded dots are just dots.
  assert_eq fl-dots "$(curl -sS --fail --unix-socket "$WR_SOCK" \
    "http://warren/v1/sandboxes/$SB/files?path=%2F..%2F..%2Fetc%2Fhostname")" \
    "percent-encoded .."

  # A 64 KiB path, a 5000-byte one, a NUL: clear 4xx errors.
  p="/$(head -c 65536 /dev/zero | tr '\0' a)"
  api_call GET "/v1/sandboxes/$SB/files/stat?path=$p"
  case "$API_STATUS" in 4*) ;; *) fail "64 KiB path: status $API_STATUS" ;; esac
  [ -n "$(json_get "$API_BODY" .error.message)" ] || fail "64 KiB path: $API_BODY"
  p="/$(head -c 5000 /dev/zero | tr '\0' b)"
  api_call PUT "/v1/sandboxes/$SB/files?path=$p" --data-binary x
  assert_eq 400 "$API_STATUS" "5000-byte path"
  assert_contains "$(json_get "$API_BODY" .error.message)" "longer" "long path message"
  p="/$(head -c 300 /dev/zero | tr '\0' c)"
  api_call PUT "/v1/sandboxes/$SB/files?path=$p" --data-binary x
  [ "${API_STATUS#4}" != "$API_STATUS" ] || fail "300-byte name: $API_STATUS"
  api_call GET "/v1/sandboxes/$SB/files?path=/etc%00/passwd"
  assert_eq 400 "$API_STATUS" "a NUL in the path"
  assert_daemon_alive
}

test_hostile_tar_entries_stay_inside() {
  local tmp fp_shadow
  new_sandbox fl-tarevil
  SB=fl-tarevil
  tmp=$(mktemp -d /tmp/fl-tarevil.XXXXXX)
  fp_shadow=$(host_fingerprint /etc/shadow)
  # A link to the host's dir, then a file through it; an absolute name;
  # a name that climbs.
  mkdir "$tmp/src"
  ln -s "$tmp" "$tmp/src/link"
  python3 - "$tmp" <<'EOF'
import io, sys, tarfile
d = sys.argv[1]
with tarfile.open(d + "/evil.tar", "w") as t:
    for name, data in (("link/through-link", b"x"), (d + "/absolute", b"x"),
                       ("../../../../.." + d + "/climb", b"x")):
        if name.startswith("link/"):
            li = tarfile.TarInfo("link"); li.type = tarfile.SYMTYPE
            li.linkname = d; t.addfile(li)
        ti = tarfile.TarInfo(name); ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    hl = tarfile.TarInfo("hard"); hl.type = tarfile.LNKTYPE
    hl.linkname = "/etc/shadow"; t.addfile(hl)
EOF
  api_call PUT "/v1/sandboxes/$SB/files/archive?path=/x" \
    --data-binary @"$tmp/evil.tar"
  assert_eq "evil.tar src" "$(ls "$tmp" | tr '\n' ' ' | sed 's/ $//')" \
    "the host dir after extracting hostile entries"
  assert_eq "$fp_shadow" "$(host_fingerprint /etc/shadow)" "host /etc/shadow"
  case "$API_STATUS" in 200 | 4*) ;; *) fail "status $API_STATUS: $API_BODY" ;; esac
  assert_daemon_alive
  rm -rf "$tmp"
}
