# shellcheck shell=bash
# Security: the files API against a hostile sandbox.
#
# The sandbox plants symlinks to / and /etc, symlink chains and loops,
# FIFOs, sockets, huge and deep trees, and swaps a directory with a symlink
# to a host path while the daemon writes into it; hostile archives climb
# with "..", use absolute names, write through their own symlinks and
# hardlink to outside. Every byte lands inside the sandbox or the request
# is refused with a 4xx; the host's files (checksum, mtime, inode) and a
# sentinel directory on the host never change; the daemon never hangs or
# crashes and keeps answering other clients quickly. Sourced by
# tests/run-e2e, which provides lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

sum() { sha256sum | cut -c1-64; }

# api_call on the files API of $SB: fcall METHOD [ROUTE] PATH [curl args]
fcall() {
  local method=$1 route=
  shift
  case "$1" in stat | list | archive | mkdir | move | chmod) route=$1 && shift ;; esac
  local p=$1
  shift
  api_call "$method" "/v1/sandboxes/$SB/files${route:+/$route}?path=$(sec_uri "$p")" "$@"
}

# POST a JSON body to a files operation of $SB.
fpost() { # OP JSON
  api_call POST "/v1/sandboxes/$SB/files/$1" -H 'Content-Type: application/json' \
    --data-binary "$2"
}

# The status must be a client error with a JSON error body.
assert_4xx() { # WHAT
  case "$API_STATUS" in
    4??) ;;
    *) fail "$1: expected a 4xx, got $API_STATUS ($API_BODY)" ;;
  esac
  [ -n "$(json_get "$API_BODY" '.error.message // empty' 2>/dev/null)" ] ||
    fail "$1: no JSON error message: $API_BODY"
}

# 2xx, or a clean refusal; never a 5xx or a hang.
assert_done_or_refused() { # WHAT
  case "$API_STATUS" in
    2?? | 4??) ;;
    *) fail "$1: status $API_STATUS ($API_BODY)" ;;
  esac
}

# A scratch directory for the test's own files, emptied first: a failed
# test leaves its files for a look, and the next one clears them.
scratch_dir() {
  rm -rf "$WR_RUN/sf-scratch"
  mkdir -p "$WR_RUN/sf-scratch"
  echo "$WR_RUN/sf-scratch"
}

# A sentinel directory on the host, named like a path the sandbox aims at;
# it does not exist inside the sandbox. Removed at the end of the test;
# those a failed test of this state root left are removed here.
make_sentinel() {
  rm -rf /tmp/warren-sentinel-"${WR_ROOT##*/}"-*
  SENTINEL=$(mktemp -d "/tmp/warren-sentinel-${WR_ROOT##*/}-XXXXXX")
  echo "host file" >"$SENTINEL/host-file"
  SENTINEL_PRINT=$(host_fingerprint_of "$SENTINEL" "$SENTINEL/host-file")
}

assert_sentinel_untouched() {
  assert_eq "$SENTINEL_PRINT" \
    "$(host_fingerprint_of "$SENTINEL" "$SENTINEL/host-file")" \
    "the host sentinel $SENTINEL"
  assert_eq "host-file" "$(ls -A "$SENTINEL")" "entries of the host sentinel"
}

# Write a tar archive with Python's tarfile: mk_tar FILE SPEC..., each
# SPEC "f:NAME[:DATA]" (file), "d:NAME", "l:NAME:TARGET" (symlink) or
# "h:NAME:TARGET" (hardlink).
mk_tar() {
  python3 - "$@" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for spec in sys.argv[2:]:
        kind, name, rest = (spec.split(":", 2) + [""])[:3]
        ti = tarfile.TarInfo(name)
        ti.mode = 0o644
        if kind == "f":
            data = (rest or "x").encode()
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
            continue
        if kind == "d":
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
        elif kind == "l":
            ti.type, ti.linkname = tarfile.SYMTYPE, rest
        elif kind == "h":
            ti.type, ti.linkname = tarfile.LNKTYPE, rest
        t.addfile(ti)
EOF
}

# ---- symlinks to / and /etc ------------------------------------------------

test_symlink_to_root_and_etc_read_write_stay_inside() {
  local before inside tag tmp
  new_sandbox sf-link
  SB=sf-link
  tag="warren-probe-$RANDOM$RANDOM"
  tmp=$(scratch_dir)
  before=$(host_etc_fingerprint)
  "$WARREN" exec sf-link -- sh -c '
    ln -s / /escape; ln -s /etc /etcl; ln -s /etc/passwd /pw
    ln -s ../../../../../../../etc /up; echo sandbox-marker >/etc/warren-marker'
  inside=$("$WARREN" exec sf-link -- cat /etc/passwd | sum)

  # Reads through the links are the sandbox's files.
  for p in /escape/etc/passwd /etcl/passwd /pw /up/passwd /escape/escape/etcl/passwd; do
    assert_eq "$inside" "$(curl -sS --fail --unix-socket "$WR_SOCK" \
      "http://warren$(files_url "$SB" "$p")" | sum)" "GET $p"
  done
  assert_eq sandbox-marker "$(curl -sS --fail --unix-socket "$WR_SOCK" \
    "http://warren$(files_url "$SB" /escape/etc/warren-marker)")" "GET a sandbox-only file"
  fcall GET list /escape
  assert_eq 200 "$API_STATUS" "list /escape"
  assert_contains "$(json_get "$API_BODY" '[.entries[].name] | join(" ")')" "etcl" \
    "list /escape is the sandbox's /"
  assert_not_contains "$(json_get "$API_BODY" '[.entries[].name] | join(" ")')" "work" \
    "list /escape (the host's /work)"
  fcall GET list /etcl
  assert_contains "$(json_get "$API_BODY" '[.entries[].name] | join(" ")')" \
    "warren-marker" "list /etcl is the sandbox's /etc"
  curl -sS --fail --unix-socket "$WR_SOCK" -o "$tmp/etc.tar" \
    "http://warren$(files_url "$SB" archive /escape/etc)"
  assert_contains "$(tar tf "$tmp/etc.tar")" "etc/warren-marker" "archive of /escape/etc"

  # Writes through them land inside.
  fcall PUT "/escape/etc/$tag" --data-binary pwned
  assert_eq 201 "$API_STATUS" "PUT through /escape ($API_BODY)"
  fcall PUT "/etcl/$tag-2" --data-binary pwned
  assert_eq 201 "$API_STATUS" "PUT through /etcl ($API_BODY)"
  fcall PUT /etcl/passwd --data-binary 'pwned::0:0::/:/bin/sh'
  assert_eq 201 "$API_STATUS" "PUT /etcl/passwd"
  fcall PUT /pw --data-binary 'replaced'
  assert_eq 201 "$API_STATUS" "PUT onto a symlink"
  fpost mkdir "{\"path\":\"/escape/etc/$tag-dir\"}"
  assert_eq 201 "$API_STATUS" "mkdir through /escape ($API_BODY)"
  fpost move "{\"from\":\"/escape/etc/$tag-2\",\"to\":\"/etcl/$tag-moved\"}"
  assert_eq 200 "$API_STATUS" "move through the links ($API_BODY)"
  fpost chmod '{"path":"/escape/etc/shadow","mode":"0666"}'
  assert_eq 200 "$API_STATUS" "chmod through /escape ($API_BODY)"
  fcall DELETE /etcl/hostname
  assert_eq 204 "$API_STATUS" "DELETE through /etcl"
  mk_tar "$tmp/one.tar" "f:$tag-tar:from-tar"
  api_call PUT "$(files_url "$SB" archive /escape/etc)" --data-binary @"$tmp/one.tar"
  assert_eq 200 "$API_STATUS" "archive PUT through /escape ($API_BODY)"

  # The host is as it was; the sandbox saw every change.
  assert_eq "$before" "$(host_etc_fingerprint)" "the host's /etc"
  for f in "$tag" "$tag-2" "$tag-dir" "$tag-moved" "$tag-tar"; do
    [ ! -e "/etc/$f" ] || fail "/etc/$f was made on the host"
  done
  assert_eq "pwned|pwned::0:0::/:/bin/sh|from-tar|666|replaced|absent" \
    "$("$WARREN" exec sf-link -- sh -c "for f in /etc/$tag /etc/passwd \
      /etc/$tag-tar; do printf '%s|' \"\$(cat \$f)\"; done
      printf '%s|%s|' \$(stat -c %a /etc/shadow) \"\$(cat /pw)\"
      test -e /etc/hostname && echo present || echo absent")" \
    "the changes, seen inside"
  "$WARREN" exec sf-link -- test -d "/etc/$tag-dir" -a -f "/etc/$tag-moved" ||
    fail "mkdir or move did not land inside"
  "$WARREN" exec sf-link -- test -L /escape -a -L /etcl || fail "links replaced"
  rm -rf "$tmp"
  assert_daemon_alive
}

# ---- rename-exchange races -------------------------------------------------

# Start racer TAG in $SB: /race/dir (a directory) and /race/link (a
# symlink to TARGET) trade places until /tmp/race.stop exists.
start_racer() { # TAG TARGET
  "$WARREN" exec "$SB" -- sh -c "rm -rf /race /tmp/race.stop; mkdir -p /race/dir
    ln -s '$2' /race/link"
  "$WARREN" exec -d --tag "$1" "$SB" -- \
    hostile_fs exchange /race/dir /race/link 120 /tmp/race.stop >/dev/null
}

# Stop racer TAG and check that it really raced.
stop_racer() { # TAG
  local out
  "$WARREN" exec "$SB" -- touch /tmp/race.stop
  out=$("$WARREN" logs -f "$SB" "$1")
  [[ "$out" =~ swaps\ ([0-9]+) ]] || fail "racer: $out"
  [ "${BASH_REMATCH[1]}" -gt 100 ] || fail "the racer hardly ran: $out"
}

# Where a file named NAME is inside $SB (one line per copy). Only once the
# racer stopped: find itself would miss a directory that moves.
find_inside() { # NAME
  "$WARREN" exec "$SB" -- find / -xdev -name "$1" -type f 2>/dev/null || true
}

test_race_exchange_dir_symlink_during_put() {
  local tmp big_sum root_before target n name where i big_status found
  local landed
  new_sandbox sf-race-put
  SB=sf-race-put
  install_helper "$SB" hostile_fs
  make_sentinel
  tmp=$(scratch_dir)
  head -c 100000000 /dev/urandom >"$tmp/big"
  big_sum=$(sum <"$tmp/big")
  root_before=$(ls -A /)
  n=0
  for target in "$SENTINEL" / "$SENTINEL/host-file"; do
    n=$((n + 1))
    start_racer "racer-$n" "$target"
    # A 100 MB upload (not for the last target), then many small ones,
    # each resolved anew while the racer runs.
    name="race-big-$n-$RANDOM"
    big_status=-
    if [ "$n" -lt 3 ]; then
      fcall PUT "/race/dir/$name" -T "$tmp/big"
      assert_done_or_refused "100 MB PUT racing a link to $target"
      big_status=$API_STATUS
    fi
    landed=
    for i in $(seq 25); do
      fcall PUT "/race/dir/sub$i/race-small-$n-$i" --data-binary "small $i"
      assert_done_or_refused "small PUT $i racing a link to $target"
      [ "$API_STATUS" != 201 ] || landed="$landed $i"
    done
    stop_racer "racer-$n"
    echo "racing a link to $target: 100 MB upload $big_status," \
      "small uploads landed:$landed"
    if [ "$big_status" = 201 ]; then
      where=$(find_inside "$name")
      if [ -z "$where" ] || [ "$(wc -l <<<"$where")" != 1 ]; then
        fail "the 100 MB upload is not in the sandbox once: '$where'"
      fi
      assert_eq "$big_sum" \
        "$("$WARREN" exec "$SB" -- sha256sum "$where" | cut -c1-64)" \
        "the 100 MB upload, inside at $where"
    fi
    found=$("$WARREN" exec "$SB" -- sh -c "find / -xdev -name 'race-small-$n-*' \
      -type f -exec sh -c 'for f; do echo \"\${f##*/} \$(cat \"\$f\")\"; done' _ {} +")
    for i in $landed; do
      assert_contains "$found" "race-small-$n-$i small $i" \
        "small upload $i (201), inside"
    done
    assert_sentinel_untouched
    assert_eq "$root_before" "$(ls -A /)" "the host's / (racing a link to $target)"
    [ -z "$(find / -xdev -maxdepth 3 -name "race-*-$n-*" 2>/dev/null)" ] ||
      fail "an upload reached the host"
  done
  rm -rf "$tmp" "$SENTINEL"
  assert_daemon_alive
}

test_race_exchange_dir_symlink_during_tar_upload() {
  local tmp root_before target n files inside specs=()
  new_sandbox sf-race-tar
  SB=sf-race-tar
  install_helper "$SB" hostile_fs
  make_sentinel
  tmp=$(scratch_dir)
  root_before=$(ls -A /)
  for i in $(seq 1500); do specs+=("f:tf-$i:data $i"); done
  for i in $(seq 300); do specs+=("f:sub/tg-$i:deeper $i"); done
  mk_tar "$tmp/race.tar" "${specs[@]}"
  head -c 30000000 /dev/urandom >"$tmp/blob"
  tar -C "$tmp" -cf "$tmp/blob.tar" blob
  n=0
  for target in "$SENTINEL" /; do
    n=$((n + 1))
    start_racer "racer-$n" "$target"
    api_call PUT "$(files_url "$SB" archive /race/dir)" --data-binary @"$tmp/race.tar"
    assert_done_or_refused "tar upload racing a link to $target"
    files=-
    [ "$API_STATUS" != 200 ] || files=$(json_get "$API_BODY" .files)
    api_call PUT "$(files_url "$SB" archive /race/dir)" --data-binary @"$tmp/blob.tar"
    assert_done_or_refused "30 MB tar upload racing a link to $target"
    stop_racer "racer-$n"
    if [ "$files" != - ]; then
      inside=$("$WARREN" exec "$SB" -- sh -c \
        'find / -xdev \( -name "tf-*" -o -name "tg-*" \) -type f | wc -l')
      [ "$inside" -ge "$files" ] ||
        fail "archive said $files files, $inside are inside"
    fi
    assert_sentinel_untouched
    assert_eq "$root_before" "$(ls -A /)" "the host's / (racing a link to $target)"
    if [ -e /tf-1 ] || [ -e /sub ] || [ -e /blob ]; then
      fail "an archive entry reached the host's /"
    fi
    "$WARREN" exec "$SB" -- sh -c 'rm -rf /tf-* /tg-* /sub /blob /tmp/warren-sentinel-*'
  done
  rm -rf "$tmp" "$SENTINEL"
  assert_daemon_alive
}

# ---- hostile archives --------------------------------------------------------

test_tar_dotdot_entries_refused() {
  local tmp spec before
  new_sandbox sf-tar-dots
  SB=sf-tar-dots
  make_sentinel
  tmp=$(scratch_dir)
  before=$(host_etc_fingerprint)
  for spec in "f:../../../../../..$SENTINEL/climb" "f:a/../../climb" \
    "f:./../climb" "d:../../climb-dir" "l:../climb-link:/" \
    "f:a/b/../../../../../../..$SENTINEL/climb"; do
    mk_tar "$tmp/t.tar" "f:ok-first" "$spec"
    api_call PUT "$(files_url "$SB" archive /x/y)" --data-binary @"$tmp/t.tar"
    assert_4xx "an entry '$spec'"
    assert_contains "$API_BODY" ".." "the refusal names the problem"
  done
  assert_sentinel_untouched
  assert_eq "$before" "$(host_etc_fingerprint)" "the host's /etc and /"
  assert_eq "" "$("$WARREN" exec "$SB" -- find / -xdev -name 'climb*')" \
    "entries that climbed, inside"
  rm -rf "$tmp" "$SENTINEL"
  assert_daemon_alive
}

test_tar_absolute_entries_land_inside() {
  local tmp before tag
  new_sandbox sf-tar-abs
  SB=sf-tar-abs
  make_sentinel
  tmp=$(scratch_dir)
  tag="warren-abs-$RANDOM"
  before=$(host_etc_fingerprint)
  mk_tar "$tmp/t.tar" "f:$SENTINEL/abs:absolute" "f:/etc/$tag:absolute" \
    "f://etc/$tag-2:double" "f:/./etc/$tag-3:x" "d:/"
  api_call PUT "$(files_url "$SB" archive /x)" --data-binary @"$tmp/t.tar"
  if [ "$API_STATUS" = 200 ]; then
    # Leading "/" is dropped: the entries are below the extraction dir.
    assert_eq absolute "$("$WARREN" exec "$SB" -- cat "/x$SENTINEL/abs")" "inside"
    assert_eq absolute "$("$WARREN" exec "$SB" -- cat "/x/etc/$tag")" "inside"
  else
    assert_4xx "absolute entries"
  fi
  assert_sentinel_untouched
  assert_eq "$before" "$(host_etc_fingerprint)" "the host's /etc and /"
  if [ -e "/etc/$tag" ] || [ -e "/etc/$tag-2" ] || [ -e "/etc/$tag-3" ]; then
    fail "an absolute entry landed on the host"
  fi
  rm -rf "$tmp" "$SENTINEL"
  assert_daemon_alive
}

test_tar_symlink_then_file_through_it() {
  local tmp before tag spec n=0
  new_sandbox sf-tar-sym
  SB=sf-tar-sym
  make_sentinel
  tmp=$(scratch_dir)
  tag="warren-sym-$RANDOM"
  before=$(host_etc_fingerprint)
  # Each archive plants a link and then writes through it.
  for spec in "l:l:/|f:l/etc/$tag:through-root" \
    "l:l:/etc|f:l/$tag:through-etc" \
    "l:l:../../../../../../../../etc|f:l/$tag:through-dots" \
    "l:l:$SENTINEL|f:l/through:through-host-path" \
    "l:l:$SENTINEL/host-file|f:l:replaced" \
    "l:l:/proc/self/root/etc|f:l/$tag:through-proc" \
    "d:d|l:d/l:/|f:d/l/etc/$tag-deep:through-root-2"; do
    n=$((n + 1))
    IFS='|' read -r -a parts <<<"$spec"
    mk_tar "$tmp/t$n.tar" "${parts[@]}"
    api_call PUT "$(files_url "$SB" archive /x$n)" --data-binary @"$tmp/t$n.tar"
    assert_done_or_refused "archive '$spec'"
  done
  assert_sentinel_untouched
  assert_eq "$before" "$(host_etc_fingerprint)" "the host's /etc and /"
  if [ -e "/etc/$tag" ] || [ -e "/etc/$tag-deep" ]; then
    fail "a file written through an archive's link is on the host"
  fi
  # What was written through a link to / or /etc is in the sandbox's /etc.
  assert_contains "$("$WARREN" exec "$SB" -- cat "/etc/$tag")" "through" \
    "the file written through the archive's link, inside"
  rm -rf "$tmp" "$SENTINEL"
  assert_daemon_alive
}

test_tar_hardlinks_to_outside_refused() {
  local tmp before passwd_links spec
  new_sandbox sf-tar-hard
  SB=sf-tar-hard
  make_sentinel
  tmp=$(scratch_dir)
  before=$(host_etc_fingerprint)
  passwd_links=$(stat -c %h /etc/passwd)
  for spec in "h:h:/etc/passwd" "h:h:/etc/shadow" "h:h:../x" \
    "h:h:../../../../../etc/shadow" "h:h:$SENTINEL/host-file" \
    "h:h:/proc/self/root/etc/shadow" "h:h:" "d:dir|h:h:dir"; do
    IFS='|' read -r -a parts <<<"$spec"
    mk_tar "$tmp/t.tar" "${parts[@]}"
    api_call PUT "$(files_url "$SB" archive /hx)" --data-binary @"$tmp/t.tar"
    assert_4xx "a hardlink '$spec'"
  done
  # Through the archive's own symlink, a hardlink reaches only the
  # sandbox's own file.
  mk_tar "$tmp/t.tar" "l:s:/etc" "h:h2:s/passwd"
  api_call PUT "$(files_url "$SB" archive /hy)" --data-binary @"$tmp/t.tar"
  assert_done_or_refused "a hardlink through the archive's symlink"
  if [ "$API_STATUS" = 200 ]; then
    assert_eq "$("$WARREN" exec "$SB" -- cat /etc/passwd | sum)" \
      "$("$WARREN" exec "$SB" -- cat /hy/h2 | sum)" "the hardlink's content"
  fi
  assert_eq "$passwd_links" "$(stat -c %h /etc/passwd)" "links of the host's passwd"
  assert_eq 1 "$(stat -c %h "$SENTINEL/host-file")" "links of the host file"
  assert_sentinel_untouched
  assert_eq "$before" "$(host_etc_fingerprint)" "the host's /etc and /"
  rm -rf "$tmp" "$SENTINEL"
  assert_daemon_alive
}

# ---- hostile paths -----------------------------------------------------------

# Every files route with a query path, as "METHOD" or "METHOD/ROUTE".
FILES_QUERY_ROUTES="GET PUT DELETE GET/stat GET/list GET/archive PUT/archive"

# api_call on a files route of $SB with a raw (already encoded) query path.
froute() { # METHOD[/ROUTE] RAW-PATH [curl args]
  local method=${1%%/*} sub=${1#"${1%%/*}"}
  local p=$2
  shift 2
  api_call "$method" "/v1/sandboxes/$SB/files$sub?path=$p" "$@"
}

test_nul_bytes_refused_in_every_route() {
  local q r b out tmp_before
  new_sandbox sf-nul
  SB=sf-nul
  tmp_before=$("$WARREN" exec "$SB" -- ls -A / /tmp)
  for q in "/etc%00/passwd" "/tmp/x%00.txt" "%00" "/tmp/%00/x" "/etc/hostname%00"; do
    for r in $FILES_QUERY_ROUTES; do
      froute "$r" "$q" --data-binary x
      assert_eq 400 "$API_STATUS" "$r $q"
      assert_api_error "$API_BODY" bad_request "$r $q"
    done
  done
  for b in '{"path":"/tmp/a\u0000b"}' '{"path":"\u0000"}' '{"path":"/etc\u0000"}'; do
    fpost mkdir "$b"
    assert_eq 400 "$API_STATUS" "mkdir $b"
    fpost chmod "${b%\}},\"mode\":\"0644\"}"
    assert_eq 400 "$API_STATUS" "chmod $b"
  done
  fpost move '{"from":"/etc/hostname","to":"/tmp/a\u0000b"}'
  assert_eq 400 "$API_STATUS" "move to a NUL"
  fpost move '{"from":"/etc/host\u0000name","to":"/tmp/a"}'
  assert_eq 400 "$API_STATUS" "move from a NUL"
  # A raw NUL in the request line, and in the sandbox id.
  out=$(raw_http "b'GET /v1/sandboxes/$SB/files?path=/etc/hostname\\x00x HTTP/1.1\\r\\n\\r\\n'")
  assert_eq 400 "$(raw_http_status "$out")" "a raw NUL in the target"
  api_call GET "/v1/sandboxes/$SB%00x/files?path=/etc/hostname"
  assert_eq 400 "$API_STATUS" "a NUL in the sandbox id"
  # Nothing was made or changed under a truncated name.
  assert_eq "$tmp_before" "$("$WARREN" exec "$SB" -- ls -A / /tmp)" \
    "the sandbox's / and /tmp"
  assert_eq sf-nul "$("$WARREN" exec "$SB" -- cat /etc/hostname)" "/etc/hostname"
  assert_daemon_alive
}

test_64k_paths_refused_in_every_route() {
  local big mid comp r p b
  new_sandbox sf-long
  SB=sf-long
  big="/$(head -c 65536 /dev/zero | tr '\0' a)"
  mid="/$(head -c 5000 /dev/zero | tr '\0' b)"
  comp="/tmp/$(head -c 300 /dev/zero | tr '\0' c)"
  for r in $FILES_QUERY_ROUTES; do
    for p in "$big" "$mid" "$comp"; do
      froute "$r" "$p" --data-binary x
      assert_4xx "$r with a ${#p}-byte path"
    done
  done
  for p in "$big" "$mid" "$comp"; do
    fpost mkdir "{\"path\":\"$p\"}"
    assert_4xx "mkdir with a ${#p}-byte path"
    fpost chmod "{\"path\":\"$p\",\"mode\":\"0644\"}"
    assert_4xx "chmod with a ${#p}-byte path"
    fpost move "{\"from\":\"/etc/hostname\",\"to\":\"$p\"}"
    assert_4xx "move to a ${#p}-byte path"
    fpost move "{\"from\":\"$p\",\"to\":\"/tmp/x\"}"
    assert_4xx "move from a ${#p}-byte path"
  done
  # A 64 KiB head is refused as a whole (431) and the connection closed.
  b=$(raw_http "b'GET /v1/sandboxes/$SB/files/stat?path=/' + b'a' * 65536 + b' HTTP/1.1\\r\\n\\r\\n'")
  assert_eq 431 "$(raw_http_status "$b")" "a 64 KiB request line"
  assert_contains "$b" "<<EOF>>" "the connection after a 64 KiB request line"
  assert_eq sf-long "$("$WARREN" exec "$SB" -- cat /etc/hostname)" "unchanged"
  assert_daemon_alive
}

test_proc_root_paths_stay_inside() {
  local p shadow_sum daemon out
  new_sandbox sf-proc
  SB=sf-proc
  shadow_sum=$(sum </etc/shadow)
  daemon=$(daemon_pid)
  "$WARREN" exec "$SB" -- sh -c 'ln -s /proc/1/root /p1; ln -s /proc/self/root /ps
    ln -s /proc/self/fd /pfd'
  for p in /proc/self/root/etc/shadow /proc/1/root/etc/shadow \
    "/proc/$daemon/root/etc/shadow" /proc/thread-self/root/etc/shadow \
    /proc/self/cwd/etc/shadow /proc/self/fd/3/etc/shadow /dev/fd/3/etc/shadow \
    /p1/etc/shadow /ps/etc/shadow /pfd/3/etc/shadow /proc/self/root \
    "/proc/$daemon/cwd/etc/shadow"; do
    out=$(curl -s --unix-socket "$WR_SOCK" "http://warren$(files_url "$SB" "$p")")
    [ "$(printf '%s' "$out" | sum)" != "$shadow_sum" ] ||
      fail "GET $p returned the host's /etc/shadow"
    fcall GET "$p"
    assert_4xx "GET $p"
    fcall GET stat "$p"
    [ "$API_STATUS" = 404 ] || [ "$API_STATUS" = 400 ] ||
      [ "$(json_get "$API_BODY" .path)" = "$p" ] || fail "stat $p: $API_BODY"
    fcall GET list "$p"
    assert_4xx "list $p"
    fcall GET archive "$p"
    assert_4xx "archive of $p"
  done
  # Writes aimed at /proc/*/root land in the sandbox's own layer, or fail.
  for p in /proc/self/root/tmp/warren-proc-w /proc/1/root/tmp/warren-proc-w \
    /p1/tmp/warren-proc-w "/proc/$daemon/root/tmp/warren-proc-w"; do
    fcall PUT "$p" --data-binary pwned
    assert_done_or_refused "PUT $p"
    fpost mkdir "{\"path\":\"$p-dir\"}"
    assert_done_or_refused "mkdir $p-dir"
  done
  if [ -e /tmp/warren-proc-w ] || [ -e /tmp/warren-proc-w-dir ]; then
    fail "a write through /proc reached the host's /tmp"
  fi
  assert_daemon_alive
}

test_symlink_chains_and_loops_get_clean_errors() {
  local p start
  new_sandbox sf-loop
  SB=sf-loop
  install_helper "$SB" hostile_fs
  "$WARREN" exec "$SB" -- sh -c '
    hostile_fs chain /c45 45 /etc >/dev/null; hostile_fs chain /c20 20 /etc >/dev/null
    mkdir /lp; ln -s b /lp/a; ln -s a /lp/b; ln -s self /lp/self
    ln -s /lp/a/x /lp/deep'
  # 20 links are fine; more than 40 (the kernel's limit) is a clean error.
  assert_eq sf-loop "$(curl -sS --fail --unix-socket "$WR_SOCK" \
    "http://warren$(files_url "$SB" /c20/l0/hostname)")" "a chain of 20 links"
  start=$(now_ms)
  for p in /c45/l0/hostname /lp/a/x /lp/self/x /lp/deep /lp/deep/y; do
    fcall GET "$p"
    assert_4xx "GET $p"
    assert_contains "$API_BODY" "symbolic links" "the error for $p"
    fcall GET list "$p"
    assert_4xx "list $p"
    fcall GET archive "$p/z"
    assert_4xx "archive of $p/z"
    fcall PUT "$p/new" --data-binary x
    assert_4xx "PUT $p/new"
    fpost mkdir "{\"path\":\"$p/new-dir\"}"
    assert_4xx "mkdir $p/new-dir"
    fpost chmod "{\"path\":\"$p/z\",\"mode\":\"0600\"}"
    assert_4xx "chmod $p/z"
    api_call PUT "$(files_url "$SB" archive "$p/t")" --data-binary @/dev/null
    assert_4xx "archive PUT into $p/t"
  done
  # The links themselves can be described, moved and removed.
  fcall GET stat /lp/a
  assert_eq "symlink b" "$(json_get "$API_BODY" '"\(.type) \(.link_target)"')" "stat of a loop"
  fcall DELETE /lp/self
  assert_eq 204 "$API_STATUS" "rm of a self-loop"
  [ $(($(now_ms) - start)) -lt 10000 ] || fail "the loops took $(($(now_ms) - start)) ms"
  assert_daemon_alive
}

# ---- special files -----------------------------------------------------------

test_fifo_socket_and_device_downloads_refused() {
  local p start
  new_sandbox sf-special
  SB=sf-special
  install_helper "$SB" hostile_fs
  "$WARREN" exec "$SB" -- sh -c 'mkdir /sp; mkfifo /sp/fifo
    hostile_fs sock /sp/sock >/dev/null; ln -s fifo /sp/to-fifo
    ln -s /dev/null /sp/to-null'
  # Root inside cannot make device nodes; the image's /dev holds real ones,
  # and the API sees them.
  must_fail "$WARREN" exec "$SB" -- mknod /sp/null c 1 3 >/dev/null
  for p in /sp/fifo /sp/to-fifo /sp/sock /sp/to-null /dev/null /dev/console \
    /dev/full; do
    start=$(now_ms)
    api_call GET "$(files_url "$SB" "$p")" -m 5
    assert_eq 400 "$API_STATUS" "GET $p ($API_BODY)"
    assert_contains "$API_BODY" "not a regular file" "GET $p"
    [ $(($(now_ms) - start)) -lt 2000 ] || fail "GET $p took $(($(now_ms) - start)) ms"
  done
  # Nobody opened the FIFO: a reader would still be waiting for a writer.
  assert_eq "p" "$("$WARREN" exec "$SB" -- stat -c %A /sp/fifo | cut -c1)" "the FIFO"
  # Writing to a FIFO's name replaces it; it never blocks on the FIFO.
  api_call PUT "$(files_url "$SB" /sp/fifo)" -m 5 --data-binary replaced
  assert_eq 201 "$API_STATUS" "PUT onto a FIFO ($API_BODY)"
  assert_eq "replaced -" "$("$WARREN" exec "$SB" -- sh -c 'echo $(cat /sp/fifo) $(stat -c %A /sp/fifo | cut -c1)')" \
    "the FIFO's name after the PUT"
  # chmod and stat do not open them either.
  fpost chmod '{"path":"/sp/sock","mode":"0600"}'
  assert_eq 200 "$API_STATUS" "chmod of a socket"
  fcall GET stat /dev/null
  assert_eq char "$(json_get "$API_BODY" .type)" "stat of a device node"
  assert_daemon_alive
}

test_archive_skips_fifos_sockets_and_devices() {
  local tmp start listing
  new_sandbox sf-special-tar
  SB=sf-special-tar
  install_helper "$SB" hostile_fs
  tmp=$(scratch_dir)
  "$WARREN" exec "$SB" -- sh -c 'mkdir -p /t/sub; echo data >/t/file
    mkfifo /t/fifo /t/sub/fifo2; hostile_fs sock /t/sock >/dev/null
    ln -s /dev/null /t/null-link'
  start=$(now_ms)
  api_call GET "$(files_url "$SB" archive /t)" -m 10 -o "$tmp/t.tar"
  assert_eq 200 "$API_STATUS" "archive of a tree with a FIFO and a socket"
  [ $(($(now_ms) - start)) -lt 5000 ] || fail "the archive took $(($(now_ms) - start)) ms"
  listing=$(tar tvf "$tmp/t.tar")
  assert_contains "$listing" "t/file" "the archive"
  assert_eq p "$(grep ' t/fifo$' <<<"$listing" | cut -c1)" "the FIFO, as a FIFO entry"
  assert_not_contains "$listing" "t/sock" "a socket in the archive"
  assert_contains "$listing" "t/null-link -> /dev/null" "the link to /dev/null, as a link"
  # The image's /dev: device nodes are left out, the rest is there.
  start=$(now_ms)
  api_call GET "$(files_url "$SB" archive /dev)" -m 10 -o "$tmp/dev.tar"
  assert_eq 200 "$API_STATUS" "archive of /dev"
  [ $(($(now_ms) - start)) -lt 5000 ] || fail "the archive of /dev took too long"
  listing=$(tar tvf "$tmp/dev.tar")
  assert_contains "$listing" "dev/pts/" "the archive of /dev"
  if grep -qE '^[cb]' <<<"$listing"; then fail "device nodes archived: $listing"; fi
  # A device node or a socket on its own is refused.
  for p in /dev/null /t/sock; do
    api_call GET "$(files_url "$SB" archive "$p")" -m 5
    assert_eq 400 "$API_STATUS" "archive of $p ($API_BODY)"
  done
  rm -rf "$tmp"
  assert_daemon_alive
}

# ---- huge and deep trees -----------------------------------------------------

test_huge_directory_listing_does_not_stall_the_daemon() {
  local stop worst start i pids=()
  new_sandbox sf-huge
  SB=sf-huge
  install_helper "$SB" hostile_fs
  "$WARREN" exec "$SB" -- hostile_fs many /huge 100000 >/dev/null
  start=$(now_ms)
  fcall GET list /huge -G -d limit=50
  assert_eq 200 "$API_STATUS" "list with a limit"
  assert_eq "50 true" "$(json_get "$API_BODY" '"\(.entries | length) \(.truncated)"')" \
    "entries and truncated"
  [ $(($(now_ms) - start)) -lt 2000 ] || fail "a 50-entry listing took $(($(now_ms) - start)) ms"
  # The largest listings and an archive of it, several at once, while
  # another client's requests stay fast.
  stop="$WR_RUN/sf-huge.stop"
  rm -f "$stop"
  max_info_latency_until "$stop" >"$WR_RUN/sf-huge.latency" &
  for i in 1 2; do
    curl -s -o "$WR_RUN/sf-huge.list$i" --unix-socket "$WR_SOCK" \
      "http://warren$(files_url "$SB" list /huge)&limit=100000" &
    pids+=($!)
  done
  curl -s -o /dev/null --unix-socket "$WR_SOCK" \
    "http://warren$(files_url "$SB" archive /huge)" &
  pids+=($!)
  wait "${pids[@]}"
  touch "$stop"
  wait
  worst=$(cat "$WR_RUN/sf-huge.latency")
  echo "slowest GET /v1/info meanwhile: $worst ms"
  [ "$worst" -lt 250 ] || fail "GET /v1/info took $worst ms while listing 100k entries"
  assert_eq "100000 false" \
    "$(jq -r '"\(.entries | length) \(.truncated)"' "$WR_RUN/sf-huge.list1")" \
    "the whole listing"
  rm -f "$WR_RUN"/sf-huge.*
  assert_daemon_alive
}

test_deep_tree_archived_and_removed() {
  local tmp n stop worst deep
  new_sandbox sf-deep
  SB=sf-deep
  install_helper "$SB" hostile_fs
  tmp=$(scratch_dir)
  "$WARREN" exec "$SB" -- hostile_fs deep /deep 10000 >/dev/null
  stop="$WR_RUN/sf-deep.stop"
  rm -f "$stop"
  max_info_latency_until "$stop" >"$WR_RUN/sf-deep.latency" &
  api_call GET "$(files_url "$SB" archive /deep)" -o "$tmp/deep.tar"
  assert_eq 200 "$API_STATUS" "archive of a 10000-level tree"
  tar tf "$tmp/deep.tar" >"$tmp/list"
  n=$(wc -l <"$tmp/list")
  assert_eq 10002 "$n" "entries in the archive (10001 dirs and the leaf)"
  assert_contains "$(tail -1 "$tmp/list" | tail -c 20)" "d/d/leaf" "the deepest entry"
  rm -f "$tmp/deep.tar" "$tmp/list"
  fcall GET list /deep -G -d depth=64
  assert_eq 64 "$(json_get "$API_BODY" '.entries | length')" "a listing 64 deep"
  deep="/deep$(printf '/d%.0s' $(seq 3000))"
  fcall GET stat "$deep"
  assert_4xx "stat of a path longer than PATH_MAX"
  fcall DELETE /deep -G -d recursive=true
  assert_eq 204 "$API_STATUS" "rm -r of a 10000-level tree ($API_BODY)"
  touch "$stop"
  wait
  worst=$(cat "$WR_RUN/sf-deep.latency")
  rm -f "$WR_RUN"/sf-deep.*
  echo "slowest GET /v1/info meanwhile: $worst ms"
  [ "$worst" -lt 250 ] || fail "GET /v1/info took $worst ms during the deep tree"
  "$WARREN" exec "$SB" -- test ! -e /deep || fail "/deep is still there"
  rm -rf "$tmp"
  assert_daemon_alive
}
