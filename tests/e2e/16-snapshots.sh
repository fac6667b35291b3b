# shellcheck shell=bash
# End-to-end: disk snapshots and forks.
#
# A snapshot carries a sandbox's own files exactly (contents, deletions of
# image files, directories it replaced, owners, modes, symlinks, hard
# links, xattrs), a sandbox made from it starts with them and a new
# identity, forks change independently, stacks are flattened past their
# depth, snapshots in use cannot be removed, retention removes the rest,
# and a warrend killed during or after a snapshot leaves things coherent.

snap_json() { # NAME
  api GET "/v1/snapshots/$1"
}

snap_rm_all() {
  local s
  for s in $(api GET /v1/snapshots | jq -r '.snapshots[].id' | tac); do
    api DELETE "/v1/snapshots/$s" >/dev/null 2>&1 || true
  done
}

# The sandbox's own changes, made through exec.
make_changes() { # NAME
  "$WARREN" exec "$1" -- sh -c '
    set -e
    echo hello > /root/a.txt
    mkdir -p /srv/app/sub && echo deep > /srv/app/sub/f
    rm /etc/motd
    rm -rf /usr/share/doc/bash && mkdir /usr/share/doc/bash
    echo only > /usr/share/doc/bash/only
    ln -s /root/a.txt /root/link
    echo linked > /root/h1 && ln /root/h1 /root/h2
    cp /bin/true /root/suid && chmod 4755 /root/suid
    echo owned > /srv/owned && chown 1000:1001 /srv/owned
    chmod 0640 /srv/owned
    python3 -c "import os; os.setxattr(\"/srv/owned\", \"user.color\", b\"blue\")"
    mkfifo /root/fifo
  ' || fail "changes in $1"
}

check_changes() { # NAME
  local n=$1 out
  assert_eq hello "$("$WARREN" exec "$n" -- cat /root/a.txt)" "file"
  assert_eq deep "$("$WARREN" exec "$n" -- cat /srv/app/sub/f)" "new dirs"
  "$WARREN" exec "$n" -- test ! -e /etc/motd || fail "$n: deletion lost"
  assert_eq only "$("$WARREN" exec "$n" -- ls /usr/share/doc/bash)" \
    "replaced directory shows only its own entries"
  assert_eq /root/a.txt "$("$WARREN" exec "$n" -- readlink /root/link)" \
    "symlink"
  out=$("$WARREN" exec "$n" -- stat -c '%i %h' /root/h1 /root/h2)
  assert_eq 2 "$(printf '%s\n' "$out" | awk '{print $2}' | sort -u)" \
    "hard link count"
  assert_eq 1 "$(printf '%s\n' "$out" | awk '{print $1}' | sort -u | wc -l)" \
    "hard links share an inode"
  assert_eq "4755 0:0" "$("$WARREN" exec "$n" -- stat -c '%a %u:%g' \
    /root/suid)" "setuid mode and owner"
  assert_eq "640 1000:1001" "$("$WARREN" exec "$n" -- stat -c '%a %u:%g' \
    /srv/owned)" "mode and owner"
  assert_eq blue "$("$WARREN" exec "$n" -- python3 -c \
    'import os; print(os.getxattr("/srv/owned", "user.color").decode())')" \
    "user xattr"
  assert_eq fifo "$("$WARREN" exec "$n" -- stat -c %F /root/fifo | \
    sed 's/.*fifo.*/fifo/')" "FIFO"
}

test_snapshot_carries_files_deletions_and_replaced_dirs() {
  local j out
  snap_rm_all
  new_sandbox sn-src
  make_changes sn-src
  out=$("$WARREN" snapshot sn-src --name sn-one 2>&1) ||
    fail "snapshot: $out"
  assert_contains "$out" "ms frozen" "the frozen time is printed"
  j=$(snap_json sn-one)
  assert_eq ready "$(json_get "$j" .state)" state
  assert_eq sn-src "$(json_get "$j" .source.name)" source
  assert_eq true "$(json_get "$j" .capture.live)" "taken while running"
  assert_eq 1 "$(json_get "$j" .depth)" depth
  [ "$(json_get "$j" .size_bytes)" -gt 0 ] || fail "size: $j"
  awk -v f="$(json_get "$j" .capture.frozen_ms)" \
    -v t="$(json_get "$j" .capture.total_ms)" \
    'BEGIN { exit !(f >= 0 && f <= t && f < 1000) }' ||
    fail "frozen time not within the capture: $j"
  assert_eq running "$(sb_state sn-src)" "the source keeps running"
  # Usable at once; on disk shortly after, and the events say each step.
  wait_until 30 sh -c "'$WARREN' snapshot inspect sn-one --json |
    jq -e .synced >/dev/null" || fail "never synced: $(snap_json sn-one)"
  out=$(api GET "/v1/events?sandbox=sn-src" | jq -r --arg id \
    "$(json_get "$j" .id)" '[.events[] | select(.type == "snapshot" and
      .snapshot_id == $id) | .phase] | join(" ")')
  assert_eq "started ready" "$out" "the source's snapshot events"
  out=$(api GET "/v1/events?type=snapshot" | jq -r --arg id \
    "$(json_get "$j" .id)" '[.events[] | select(.snapshot_id == $id) | .phase] |
      join(" ")')
  assert_eq "started ready synced" "$out" "every snapshot event, in order"
  new_sandbox sn-child --snapshot sn-one
  assert_eq "$(json_get "$j" .id)" "$(sb_get sn-child .snapshot)" \
    "the child names its snapshot"
  check_changes sn-child
  "$WARREN" rm -f sn-child >/dev/null
  # Its layer is a plain directory: nothing was mounted for it.
  [ -d "$WR_ROOT/snapshots/$(json_get "$j" .id)/layer" ] ||
    fail "no layer directory"
  assert_eq 700 "$(stat -c %a "$WR_ROOT/snapshots")" "snapshots dir mode"
}

test_snapshot_with_a_disk_limit_and_of_stopped_and_paused() {
  local j
  snap_rm_all
  new_sandbox sn-disk --disk 64m
  make_changes sn-disk
  "$WARREN" stop sn-disk >/dev/null
  j=$(api POST /v1/sandboxes/sn-disk/snapshots -d '{"name":"sn-stopped"}')
  assert_eq false "$(json_get "$j" .capture.live)" "stopped: not frozen"
  assert_eq 0 "$(json_get "$j" .capture.frozen_ms)" "stopped: frozen 0"
  new_sandbox sn-disk-child --snapshot sn-stopped
  check_changes sn-disk-child
  "$WARREN" start sn-disk >/dev/null
  "$WARREN" pause sn-disk >/dev/null
  j=$(api POST /v1/sandboxes/sn-disk/snapshots -d '{"name":"sn-paused"}')
  assert_eq ready "$(json_get "$j" .state)" "snapshot of a paused sandbox"
  assert_eq paused "$(sb_state sn-disk)" "a paused sandbox stays paused"
  "$WARREN" resume sn-disk >/dev/null
  "$WARREN" rm -f sn-disk-child sn-disk >/dev/null
}

test_fork_changes_independently() {
  local out
  snap_rm_all
  new_sandbox fk-src --memory 256m --env FOO=bar --workdir /srv
  "$WARREN" exec fk-src -- sh -c 'echo before > /srv/shared' || fail exec
  out=$("$WARREN" fork fk-src --name fk-child 2>/dev/null) || fail "fork"
  assert_eq fk-child "$out" "fork prints the new name"
  WR_CLEANUP="$WR_CLEANUP fk-child"
  assert_eq before "$("$WARREN" exec fk-child -- cat /srv/shared)" "carried"
  assert_eq 268435456 "$(sb_get fk-child .limits.memory_bytes)" "limits kept"
  assert_eq bar "$("$WARREN" exec fk-child -- printenv FOO)" "env kept"
  assert_eq /srv "$("$WARREN" exec fk-child -- pwd)" "workdir kept"
  "$WARREN" exec fk-child -- sh -c 'echo child > /srv/shared; touch /srv/c'
  "$WARREN" exec fk-src -- sh -c 'echo source > /srv/shared; touch /srv/s'
  assert_eq source "$("$WARREN" exec fk-src -- cat /srv/shared)" "source"
  assert_eq child "$("$WARREN" exec fk-child -- cat /srv/shared)" "child"
  "$WARREN" exec fk-src -- test ! -e /srv/c || fail "child's file in source"
  "$WARREN" exec fk-child -- test ! -e /srv/s || fail "source's file in child"
  "$WARREN" rm -f fk-child fk-src >/dev/null
}

test_what_must_be_unique_is() {
  local a b c
  snap_rm_all
  new_sandbox un-src
  a=$("$WARREN" exec un-src -- sh -c 'cat /etc/machine-id 2>/dev/null' || true)
  "$WARREN" snapshot un-src --name un-snap >/dev/null 2>&1 || fail snapshot
  new_sandbox un-one --snapshot un-snap
  new_sandbox un-two --snapshot un-snap
  b=$("$WARREN" exec un-one -- cat /etc/machine-id)
  c=$("$WARREN" exec un-two -- cat /etc/machine-id)
  [[ "$b" =~ ^[0-9a-f]{32}$ ]] || fail "machine-id: $b"
  [ "$b" != "$c" ] || fail "two children share a machine-id"
  [ "$b" != "$a" ] || fail "the child has its source's machine-id"
  assert_eq un-one "$("$WARREN" exec un-one -- hostname)" "hostname"
  assert_eq un-one "$("$WARREN" exec un-one -- cat /etc/hostname)" \
    "/etc/hostname"
  assert_contains "$("$WARREN" exec un-one -- cat /etc/hosts)" un-one \
    "/etc/hosts"
  "$WARREN" rm -f un-one un-two un-src >/dev/null
}

test_refusals() {
  local body id
  snap_rm_all
  new_sandbox rf-src
  "$WARREN" snapshot rf-src --name rf-snap >/dev/null 2>&1 || fail snapshot
  id=$(snap_json rf-snap | jq -r .id)
  body=$(api POST /v1/sandboxes/rf-src/snapshots -d '{"name":"Bad Name"}')
  assert_api_error "$body" bad_request "bad name"
  body=$(api POST /v1/sandboxes/rf-src/snapshots -d '{"name":"rf-snap"}')
  assert_api_error "$body" conflict "name taken"
  body=$(api POST /v1/sandboxes/rf-src/snapshots -d '{"retention_days":-1}')
  assert_api_error "$body" bad_request "negative retention"
  body=$(api POST /v1/sandboxes/nosuch/snapshots -d '{}')
  assert_api_error "$body" not_found "no such sandbox"
  body=$(api POST /v1/sandboxes -d '{"snapshot":"nosuch"}')
  assert_api_error "$body" bad_request "no such snapshot"
  body=$(api POST /v1/sandboxes -d '{"snapshot":"rf-snap","image":"nosuch"}')
  assert_api_error "$body" bad_request "another image"
  must_fail "$WARREN" snapshot rf-src --retention-days soon >/dev/null
  # In use by a sandbox: refused, with who uses it.
  new_sandbox rf-child --snapshot rf-snap
  assert_eq 409 "$(api_status DELETE /v1/snapshots/rf-snap)" "rm in use"
  body=$(api DELETE /v1/snapshots/rf-snap)
  assert_api_error "$body" in_use "rm in use"
  assert_contains "$body" rf-child "the message names the user"
  # ... and by a snapshot whose stack holds it.
  "$WARREN" snapshot rf-child --name rf-grand >/dev/null 2>&1 || fail snap2
  assert_eq "$id" "$(snap_json rf-grand | jq -r .parent)" "parent"
  assert_eq 2 "$(snap_json rf-grand | jq -r .depth)" "depth"
  "$WARREN" rm -f rf-child >/dev/null
  body=$(api DELETE /v1/snapshots/rf-snap)
  assert_contains "$body" rf-grand "in use by a stack"
  assert_eq 204 "$(api_status DELETE /v1/snapshots/rf-grand)" "rm unused"
  assert_eq 204 "$(api_status DELETE /v1/snapshots/rf-snap)" "rm now unused"
  [ ! -e "$WR_ROOT/snapshots/$id" ] || fail "its directory is left"
  assert_eq 404 "$(api_status GET /v1/snapshots/rf-snap)" "gone"
  "$WARREN" rm -f rf-src >/dev/null
}

test_deep_stacks_are_flattened() {
  local prev=fl-0 i j
  snap_rm_all
  new_sandbox fl-0
  "$WARREN" exec fl-0 -- sh -c 'echo 0 > /root/level0; echo x > /root/gone'
  for i in $(seq 1 9); do
    "$WARREN" snapshot "$prev" --name "fl-s$i" >/dev/null 2>&1 ||
      fail "snapshot $i"
    new_sandbox "fl-$i" --snapshot "fl-s$i" --no-start
    "$WARREN" start "fl-$i" >/dev/null
    "$WARREN" exec "fl-$i" -- sh -c "echo $i > /root/level$i" || fail "w $i"
    [ "$i" != 3 ] || "$WARREN" exec fl-3 -- rm /root/gone
    prev=fl-$i
  done
  "$WARREN" snapshot fl-9 --name fl-flat >/dev/null 2>&1 || fail "flat"
  j=$(snap_json fl-flat)
  [ "$(json_get "$j" .depth)" -le 8 ] || fail "depth over 8: $j"
  assert_eq 8 "$(snap_json fl-s8 | jq -r .depth)" "the deepest stack"
  assert_eq true "$(snap_json fl-s9 | jq -r .capture.flattened)" \
    "the ninth is flattened"
  assert_eq 1 "$(snap_json fl-s9 | jq -r .depth)" "... into one layer"
  new_sandbox fl-top --snapshot fl-flat
  for i in $(seq 0 9); do
    assert_eq "$i" "$("$WARREN" exec fl-top -- cat /root/level$i)" \
      "level $i"
  done
  "$WARREN" exec fl-top -- test ! -e /root/gone || fail "deletion lost"
  "$WARREN" rm -f fl-top >/dev/null
  for i in $(seq 9 -1 0); do "$WARREN" rm -f "fl-$i" >/dev/null; done
  snap_rm_all
}

test_retention_expiry_and_restart() {
  local keep old
  snap_rm_all
  new_sandbox rt-src
  "$WARREN" snapshot rt-src --name rt-used --retention-days 0.00001 \
    >/dev/null 2>&1 || fail snapshot
  "$WARREN" snapshot rt-src --name rt-old --retention-days 0.00001 \
    >/dev/null 2>&1 || fail snapshot
  "$WARREN" snapshot rt-src --name rt-keep >/dev/null 2>&1 || fail snapshot
  old=$(snap_json rt-old | jq -r .id)
  keep=$(snap_json rt-keep | jq -r .id)
  new_sandbox rt-child --snapshot rt-used
  sleep 1.2
  # Checked at start: a SIGKILLed daemon's successor expires what is due.
  kill_daemon
  start_daemon
  assert_eq 404 "$(api_status GET /v1/snapshots/rt-old)" "expired"
  wait_until 10 test ! -e "$WR_ROOT/snapshots/$old" ||
    fail "expired snapshot's directory left"
  assert_eq 200 "$(api_status GET /v1/snapshots/rt-used)" "used: kept"
  assert_eq 200 "$(api_status GET /v1/snapshots/rt-keep)" "no retention"
  [ -d "$WR_ROOT/snapshots/$keep/layer" ] || fail "kept layer missing"
  # The child still runs on its snapshot after the restart.
  assert_eq running "$(sb_state rt-child)" "child after restart"
  "$WARREN" exec rt-child -- true || fail "child exec after restart"
  "$WARREN" rm -f rt-child >/dev/null
  kill_daemon
  start_daemon
  assert_eq 404 "$(api_status GET /v1/snapshots/rt-used)" \
    "expired once unused"
  "$WARREN" rm -f rt-src >/dev/null
  snap_rm_all
}

test_sigkill_during_a_snapshot_leaves_things_coherent() {
  local n
  snap_rm_all
  new_sandbox kl-src
  "$WARREN" exec kl-src -- python3 -c '
import os
for d in range(200):
    os.makedirs(f"/srv/t/{d}", exist_ok=True)
    for f in range(150):
        with open(f"/srv/t/{d}/{f}.js", "w") as fh:
            fh.write("x" * 2000)
' || fail "tree"
  api POST /v1/sandboxes/kl-src/snapshots -d '{"name":"kl-snap"}' \
    >/dev/null 2>&1 &
  wait_until 10 sh -c "[ -n \"\$(ls '$WR_ROOT/snapshots')\" ]" ||
    fail "the snapshot did not begin"
  kill_daemon
  wait 2>/dev/null || true
  start_daemon
  assert_eq 404 "$(api_status GET /v1/snapshots/kl-snap)" \
    "an interrupted snapshot is gone"
  n=$(find "$WR_ROOT/snapshots" -mindepth 1 -maxdepth 1 | wc -l)
  assert_eq 0 "$n" "no directory left behind"
  assert_eq running "$(sb_state kl-src)" "the source runs"
  timeout 10 "$WARREN" exec kl-src -- true ||
    fail "the source is still frozen"
  # And a snapshot now works; after another SIGKILL it is still there.
  "$WARREN" snapshot kl-src --name kl-snap >/dev/null 2>&1 || fail snapshot
  new_sandbox kl-child --snapshot kl-snap
  kill_daemon
  start_daemon
  assert_eq ready "$(snap_json kl-snap | jq -r .state)" "kept"
  assert_eq 409 "$(api_status DELETE /v1/snapshots/kl-snap)" \
    "still in use after a restart"
  assert_eq xx "$("$WARREN" exec kl-child -- head -c 2 /srv/t/7/9.js)" \
    "the child's files"
  "$WARREN" rm -f kl-child kl-src >/dev/null
  snap_rm_all
}

# A layer on the host: path, type, mode, owner, size and sha256 of each.
layer_manifest() { # DIR
  (cd "$1" && find . -mindepth 1 -printf '%P %y %m %U:%G %s\n' | sort &&
    find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}

# A zstd frame of raw blocks around PAYLOAD (python bytes expression), so
# that hostile records need no zstd tool.
zstd_raw() {
  python3 -c '
import struct, sys
data = eval(sys.argv[1])
out = struct.pack("<I", 0xFD2FB528) + bytes([0x20 | 0x80]) + \
    struct.pack("<I", len(data))
h = 1 | (len(data) << 3)
out += bytes([h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff]) + data
sys.stdout.buffer.write(out)' "$1"
}

rec() { # TYPE PATH [DATA]: a record as a python bytes expression
  set -- "$1" "$2" "${3:-}"
  printf 'bytes([ord("%s"),0]) + struct.pack("<HHHIIIIqQ", %d, 0, 0, 0o644, 0, 0, 0, 0, %d) + b"%s" + b"%s"' \
    "$1" "${#2}" "${#3}" "$2" "$3"
}

test_export_then_import_gives_the_same_files() {
  local a b id imp before
  snap_rm_all
  new_sandbox ex-src
  make_changes ex-src
  "$WARREN" snapshot ex-src --name ex-snap >/dev/null 2>&1 || fail snapshot
  "$WARREN" snapshot export ex-snap >"$WR_RUN/ex.zst" || fail export
  [ "$(head -c 4 "$WR_RUN/ex.zst" | od -An -tx1 | tr -d ' ')" = 28b52ffd ] ||
    fail "not a zstd stream"
  imp=$("$WARREN" snapshot import --name ex-imp <"$WR_RUN/ex.zst") ||
    fail "import: $imp"
  assert_eq ex-imp "$imp" "import prints the name"
  id=$(snap_json ex-snap | jq -r .id)
  a=$(layer_manifest "$WR_ROOT/snapshots/$id/layer")
  b=$(layer_manifest "$WR_ROOT/snapshots/$(snap_json ex-imp | jq -r .id)/layer")
  assert_eq "$a" "$b" "the same files, modes, owners, sizes and contents"
  assert_eq base "$(snap_json ex-imp | jq -r .image)" "image"
  new_sandbox ex-child --snapshot ex-imp
  check_changes ex-child
  "$WARREN" rm -f ex-child ex-src >/dev/null
  # Junk is refused with a clear error and leaves nothing behind.
  before=$(ls "$WR_ROOT/snapshots" | sort)
  head -c 5000 /dev/urandom >"$WR_RUN/junk"
  out=$(must_fail "$WARREN" snapshot import <"$WR_RUN/junk")
  assert_contains "$out" "zstd" "random bytes"
  head -c 3000 "$WR_RUN/ex.zst" >"$WR_RUN/cut"
  out=$(must_fail "$WARREN" snapshot import <"$WR_RUN/cut")
  assert_contains "$out" "short" "a cut stream"
  zstd_raw 'b"hello, not a layer"' >"$WR_RUN/h"
  out=$(must_fail "$WARREN" snapshot import <"$WR_RUN/h")
  assert_contains "$out" "not a warren snapshot stream" "wrong magic"
  local head='b"WRLAYER1" + struct.pack("<I", 16) + b"{\"image\":\"base\"}"'
  zstd_raw "$head + $(rec L '') + $(rec f '../escape' x) + $(rec E '')" \
    >"$WR_RUN/h"
  out=$(must_fail "$WARREN" snapshot import <"$WR_RUN/h")
  assert_contains "$out" "not clean" "path traversal"
  zstd_raw "$head + $(rec L '') + $(rec d etc) + $(rec l etc/x) + $(rec E '')" \
    >"$WR_RUN/h"
  must_fail "$WARREN" snapshot import <"$WR_RUN/h" >/dev/null
  zstd_raw "$head + $(rec L '') + bytes([ord(\"c\"),0]) + bytes(38) + $(rec E '')" \
    >"$WR_RUN/h"
  out=$(must_fail "$WARREN" snapshot import <"$WR_RUN/h")
  assert_contains "$out" "unknown record type" "a device"
  zstd_raw "$head + $(rec L '') + bytes([ord(\"f\"),0]) + struct.pack(\"<HHHIIIIqQ\", 1, 0, 0, 0o644, 0, 0, 0, 0, 1 << 50) + b\"a\" + $(rec E '')" \
    >"$WR_RUN/h"
  out=$(must_fail "$WARREN" snapshot import <"$WR_RUN/h")
  assert_contains "$out" "larger" "a huge size"
  zstd_raw "$head + $(rec L '') + $(rec f a x) + $(rec E '') + b\"more\"" \
    >"$WR_RUN/h"
  out=$(must_fail "$WARREN" snapshot import <"$WR_RUN/h")
  assert_contains "$out" "after the end" "trailing bytes"
  # A well-formed hostile-free stream of the same shape is accepted.
  zstd_raw "$head + $(rec L '') + $(rec d etc) + $(rec f etc/a xy) + $(rec E '')" \
    >"$WR_RUN/h"
  "$WARREN" snapshot import --name ex-tiny <"$WR_RUN/h" >/dev/null ||
    fail "a well-formed stream"
  assert_eq xy "$(cat "$WR_ROOT/snapshots/$(snap_json ex-tiny | jq -r .id)/layer/etc/a")" "its file"
  api DELETE /v1/snapshots/ex-tiny >/dev/null
  assert_eq "$before" "$(ls "$WR_ROOT/snapshots" | sort)" "nothing left behind"
  [ ! -e "$WR_ROOT/escape" ] && [ ! -e "$WR_ROOT/snapshots/escape" ] ||
    fail "an entry outside"
  assert_eq 2 "$(api GET /v1/snapshots | jq '.snapshots | length')" \
    "no row left behind"
  assert_daemon_alive
  snap_rm_all
}
