# shellcheck shell=bash
# Security: copies out of (and into) a sandbox must not make the host pay.
#
# A sandbox makes a 1 TiB sparse file (no disk used inside) for
# `warren cp` to write out as a terabyte of zeros; holds more data than
# --max-size or the destination's free space; and an API client uploads
# archives with hostile sparse maps (overlapping, out of order, claiming
# more data than they carry, sizes of 2^63, a million segments, endless
# extension headers, GNU's unsupported 0.x formats). Copies keep holes
# both ways, a copy over a limit is refused with the sizes named and
# nothing left behind, and a hostile map is refused before a byte is
# written while the daemon keeps answering. Destinations are small
# filesystems of the test's own (ext4 on a loop device, tmpfs): their
# free space is exact, and a copy gone wrong fills them, not the host.
# Sourced by tests/run-e2e, which provides lib.sh.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

MIB=$((1 << 20))
TIB=$((1 << 40))

# Mounts made by the test, unmounted when its shell exits (after its
# sandboxes are removed).
CP_MOUNTS=

cp_cleanup() {
  local s m
  for s in ${WR_CLEANUP:-}; do "$WARREN" rm -f "$s" >/dev/null 2>&1 || true; done
  for m in $CP_MOUNTS; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    rm -rf "$m" "$m.img"
  done
}

# A sandbox for one test whose cleanup also unmounts the test's
# filesystems. Its own layer is on a --disk image, so a copy into it that
# wrote holes as zeros would stop at 256 MiB.
cp_sandbox() { # NAME
  new_sandbox "$1" --disk 256m
  trap cp_cleanup EXIT
}

# A small filesystem of the test's own for a copy's destination, mounted
# at $FS (not a command substitution: the cleanup list must reach the
# test's own shell). ext4 (4 KiB blocks, so a 1 TiB sparse file fits) on a
# loop device, or tmpfs.
small_fs() { # ext4|tmpfs SIZE
  FS=$(mktemp -d "$WR_RUN/cp-fs-XXXXXX")
  CP_MOUNTS="$CP_MOUNTS $FS"
  case $1 in
    tmpfs) mount -t tmpfs -o "size=$2" tmpfs "$FS" ;;
    ext4)
      truncate -s "$2" "$FS.img"
      mkfs.ext4 -q -F -T default -m 0 "$FS.img"
      mount -o loop "$FS.img" "$FS"
      ;;
  esac
}

fs_free() { df -B1 --output=avail "$1" | tail -1 | tr -d ' '; }

# Bytes of disk a path takes (st_blocks).
allocated() { echo $(($(stat -c %b "$1") * 512)); }

# The checksum of LEN bytes at OFF of a file, on the host or in a sandbox.
region_sum() { # FILE OFF LEN
  dd if="$1" iflag=skip_bytes,count_bytes skip="$2" count="$3" bs=1M \
    status=none | sha256sum | cut -c1-16
}
region_sum_in() { # SANDBOX FILE OFF LEN
  "$WARREN" exec "$1" -- sh -c "dd if='$2' iflag=skip_bytes,count_bytes \
    skip=$3 count=$4 bs=1M status=none | sha256sum | cut -c1-16"
}

# Regions of the test's sparse file: data at the start, in the middle and
# at the end, and a stretch of hole.
REGIONS="0:$MIB $((TIB / 2)):$MIB $((TIB - MIB)):$MIB $((TIB / 4)):$MIB"

# A 1 TiB file that holds three short writes; the command makes it at $1.
sparse_script() {
  echo "truncate -s $TIB '$1' &&
    printf head | dd of='$1' conv=notrunc status=none &&
    printf middle | dd of='$1' bs=1 seek=$((TIB / 2)) conv=notrunc status=none &&
    printf tail | dd of='$1' bs=1 seek=$((TIB - 4)) conv=notrunc status=none"
}

# The copy on the host is the sandbox's file: size, data and holes alike,
# in (nearly) no disk.
assert_sparse_copy_out() { # SANDBOX INSIDE HOST
  local r
  assert_eq "$TIB" "$(stat -c %s "$3")" "apparent size of $3"
  [ "$(allocated "$3")" -lt "$MIB" ] ||
    fail "$3 takes $(allocated "$3") bytes of disk"
  for r in $REGIONS; do
    assert_eq "$(region_sum_in "$1" "$2" "${r%:*}" "${r#*:}")" \
      "$(region_sum "$3" "${r%:*}" "${r#*:}")" "bytes at ${r%:*} of $3"
  done
}

no_leftovers() { # DIR
  assert_eq "" "$(find "$1" -name '.warren-*' 2>/dev/null)" "temporary files in $1"
}

# ---- sparse files --------------------------------------------------------

# The instance: a directory holding a 1 TiB sparse file, copied out. The
# destination's free space is unchanged, the copy has the same size and
# bytes, and it takes seconds. Then the file alone.
test_sparse_terabyte_copy_keeps_the_host_disk() {
  local fs before after t0 ms
  cp_sandbox cp-tera
  small_fs ext4 1G
  fs=$FS
  "$WARREN" exec cp-tera -- sh -c "mkdir -p /data/sub && echo plain >/data/plain &&
    $(sparse_script /data/sub/huge)"
  [ "$("$WARREN" exec cp-tera -- stat -c %b /data/sub/huge)" -lt 2048 ] ||
    fail "the sandbox's file is not sparse"
  assert_eq "$TIB" "$(api GET "$(files_url cp-tera stat /data/sub/huge)" |
    jq -r .size)" "FileInfo size"
  [ "$(api GET "$(files_url cp-tera stat /data/sub/huge)" | jq -r .allocated)" \
    -lt "$MIB" ] || fail "FileInfo allocated is not small"

  before=$(fs_free "$fs")
  t0=$(now_ms)
  "$WARREN" cp cp-tera:/data "$fs/out"
  ms=$(($(now_ms) - t0))
  after=$(fs_free "$fs")
  [ $((before - after)) -lt $((4 * MIB)) ] ||
    fail "the copy took $((before - after)) bytes of the destination's space"
  [ "$ms" -lt 60000 ] || fail "the copy took $ms ms"
  assert_eq plain "$(cat "$fs/out/plain")" "a plain file beside it"
  assert_sparse_copy_out cp-tera /data/sub/huge "$fs/out/sub/huge"

  "$WARREN" cp cp-tera:/data/sub/huge "$fs/single"
  assert_sparse_copy_out cp-tera /data/sub/huge "$fs/single"
  [ $((before - $(fs_free "$fs"))) -lt $((8 * MIB)) ] ||
    fail "two copies took $((before - $(fs_free "$fs"))) bytes"

  # As a tar on stdout, the same: a sparse entry GNU tar extracts as one.
  "$WARREN" cp cp-tera:/data/sub/huge - | tar -C "$fs" -xf - --transform s/huge/fromtar/
  assert_sparse_copy_out cp-tera /data/sub/huge "$fs/fromtar"
  no_leftovers "$fs"
}

# The other way: a sparse host file copied in, alone and through a user's
# own `tar --sparse` (GNU's old format), keeps its holes in the sandbox,
# whose disk is 256 MiB.
test_sparse_terabyte_copy_in_keeps_the_sandbox_disk() {
  local fs r
  cp_sandbox cp-in
  small_fs ext4 64M
  fs=$FS
  sh -c "$(sparse_script "$fs/in")"
  [ "$(allocated "$fs/in")" -lt "$MIB" ] || fail "the host file is not sparse"

  # Were the holes sent as zeros, this would take many minutes: bounded.
  timeout 120 "$WARREN" cp "$fs/in" cp-in:/copied
  tar -C "$fs" --sparse -cf - in | timeout 120 "$WARREN" cp - cp-in:/fromtar
  for f in /copied /fromtar/in; do
    assert_eq "$TIB" "$("$WARREN" exec cp-in -- stat -c %s "$f")" "size of $f"
    [ "$("$WARREN" exec cp-in -- stat -c %b "$f")" -lt 2048 ] ||
      fail "$f takes $("$WARREN" exec cp-in -- stat -c %b "$f") blocks inside"
    for r in $REGIONS; do
      assert_eq "$(region_sum "$fs/in" "${r%:*}" "${r#*:}")" \
        "$(region_sum_in cp-in "$f" "${r%:*}" "${r#*:}")" "bytes at ${r%:*} of $f"
    done
  done
  assert_eq 644 "$("$WARREN" exec cp-in -- stat -c %a /copied)" "mode of /copied"
}

# The plain files route cannot say where holes are, so it sends them as
# zeros, but never reads them: warrend's read bytes (/proc/PID/io rchar)
# grow by the file's data, not by its 256 MiB.
test_plain_download_does_not_read_holes() {
  local before after
  cp_sandbox cp-get
  "$WARREN" exec cp-get -- sh -c 'truncate -s 256M /f &&
    printf head | dd of=/f conv=notrunc status=none &&
    printf tail | dd of=/f bs=1 seek=268435452 conv=notrunc status=none'
  before=$(awk '/^rchar/ { print $2 }' "/proc/$(daemon_pid)/io")
  assert_eq "$("$WARREN" exec cp-get -- sh -c 'sha256sum </f' | cut -c1-64)" \
    "$(curl -sS --fail --unix-socket "$WR_SOCK" \
      "http://warren$(files_url cp-get /f)" | sha256sum | cut -c1-64)" \
    "the bytes of GET /files"
  after=$(awk '/^rchar/ { print $2 }' "/proc/$(daemon_pid)/io")
  [ $((after - before)) -lt $((64 * MIB)) ] ||
    fail "warrend read $((after - before)) bytes to send a 256 MiB sparse file"
}

# ---- limits ----------------------------------------------------------------

# More data than --max-size: refused with both sizes named, exit non-zero,
# nothing at the destination, whichever way and shape the copy takes.
# Holes do not count: a terabyte of them passes a 1 MiB limit.
test_max_size_refused() {
  local dir out
  cp_sandbox cp-max
  small_fs tmpfs 128m
  dir=$FS
  "$WARREN" exec cp-max -- sh -c "head -c 20M /dev/urandom >/big &&
    mkdir /tree && head -c 6M /dev/urandom >/tree/a &&
    head -c 6M /dev/urandom >/tree/b && $(sparse_script /holes)"

  out=$(must_fail "$WARREN" cp --max-size 10m cp-max:/big "$dir/big")
  assert_contains "$out" "holds 20.0 MiB (20971520 bytes) of data" "file refused"
  assert_contains "$out" "more than --max-size 10.0 MiB (10485760 bytes)" "file refused"
  assert_contains "$out" "nothing was written" "file refused"
  out=$(must_fail "$WARREN" cp --max-size 10m cp-max:/tree "$dir/tree")
  assert_contains "$out" "12.0 MiB" "tree refused"
  mkdir "$dir/existing"
  must_fail "$WARREN" cp --max-size 10m cp-max:/tree "$dir/existing" >/dev/null
  if "$WARREN" cp --max-size 10m cp-max:/big - >"$dir/stdout.tar" \
    2>"$WR_RUN/cp-max.err"; then
    fail "cp to - over --max-size succeeded"
  fi
  assert_contains "$(cat "$WR_RUN/cp-max.err")" "more than --max-size" "cp to -"
  assert_eq 0 "$(stat -c %s "$dir/stdout.tar")" "bytes on stdout"
  assert_eq "existing stdout.tar" "$(cd "$dir" && echo *)" \
    "entries at the destination"
  assert_eq "" "$(ls -A "$dir/existing")" "entries in the existing directory"

  "$WARREN" cp --max-size 1m cp-max:/holes "$dir/holes"
  assert_eq "$TIB" "$(stat -c %s "$dir/holes")" "the sparse file under 1 MiB"
  "$WARREN" cp --max-size 20m cp-max:/big "$dir/big"
  assert_eq "$("$WARREN" exec cp-max -- sha256sum /big | cut -c1-64)" \
    "$(sha256sum <"$dir/big" | cut -c1-64)" "a copy within the limit"

  # Uploads too, counted on the host before anything is sent.
  out=$(must_fail "$WARREN" cp --max-size 10m "$dir/big" cp-max:/up)
  assert_contains "$out" "more than --max-size 10.0 MiB" "upload refused"
  must_fail "$WARREN" exec cp-max -- test -e /up >/dev/null
  out=$(must_fail "$WARREN" cp --max-size 0 cp-max:/big "$dir/zero")
  assert_contains "$out" "more than 0" "--max-size 0"
  no_leftovers "$dir"
}

# More data than the destination's filesystem has free: refused before
# writing, with the sizes named; nothing left there. What fits, copies.
test_copy_larger_than_free_space_refused() {
  local fs out free
  cp_sandbox cp-free
  small_fs tmpfs 16m
  fs=$FS
  "$WARREN" exec cp-free -- sh -c 'head -c 40M /dev/urandom >/big &&
    mkdir /tree && head -c 20M /dev/urandom >/tree/a && echo small >/small'
  free=$(fs_free "$fs")

  out=$(must_fail "$WARREN" cp cp-free:/big "$fs/big")
  assert_contains "$out" "holds 40.0 MiB (41943040 bytes) of data" "file refused"
  assert_contains "$out" "free on its filesystem" "file refused"
  assert_contains "$out" "($free bytes)" "the free space named"
  out=$(must_fail "$WARREN" cp cp-free:/tree "$fs/")
  assert_contains "$out" "free on its filesystem" "tree refused"
  assert_eq "" "$(ls -A "$fs")" "entries at the destination"
  assert_eq "$free" "$(fs_free "$fs")" "free space after the refusals"

  "$WARREN" cp cp-free:/small "$fs/"
  assert_eq small "$(cat "$fs/small")" "a copy that fits"
}

# ---- hostile sparse maps -----------------------------------------------------

# A tar whose one entry has a hostile sparse map, on stdout: hostile_tar KIND.
hostile_tar() {
  python3 - "$1" <<'EOF'
import sys, subprocess

def hdr(name, size, typ=b"0", magic=b"ustar\x0000", fix=None):
    h = bytearray(512)
    h[0:len(name)] = name.encode()
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"%011o\0" % 1600000000
    h[156:157] = typ
    h[257:265] = magic
    if fix:
        fix(h)
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)

def pad(b):
    return b + b"\0" * ((512 - len(b) % 512) % 512)

def rec(k, v):
    body = " %s=%s\n" % (k, v)
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n += 1
    return (str(n) + body).encode()

def pax(records):
    data = b"".join(rec(k, v) for k, v in records)
    return hdr("pax", len(data), b"x") + pad(data)

def sparse10(name, realsize, maptext, data):
    body = pad(maptext.encode()) + data
    return (pax([("GNU.sparse.major", "1"), ("GNU.sparse.minor", "0"),
                 ("GNU.sparse.name", name), ("GNU.sparse.realsize", realsize)])
            + hdr("GNUSparseFile.0/" + name, len(body)) + pad(body))

def oldgnu_endless():
    def fix(h):
        h[482] = 1  # isextended
        h[483:495] = b"%011o\0" % 100
    ext = bytearray(512)
    ext[504] = 1
    return hdr("endless", 0, b"S", b"ustar  \0", fix) + bytes(ext) * 5000

kind = sys.argv[1]
if kind == "overlap":
    t = sparse10("overlap", "100", "2\n0\n10\n5\n10\n", b"x" * 20)
elif kind == "order":
    t = sparse10("order", "100", "2\n50\n10\n0\n10\n", b"x" * 20)
elif kind == "more":
    t = sparse10("more", "100", "1\n0\n90\n", b"x" * 10)
elif kind == "huge":
    t = sparse10("huge", str(1 << 63), "1\n0\n4\n", b"data")
elif kind == "million":
    m = "1000000\n" + "".join("%d\n1\n" % (2 * i) for i in range(1000000))
    t = sparse10("million", "10000000", m, b"x" * 1000000)
elif kind == "endless":
    t = oldgnu_endless()
elif kind == "v01":
    t = pax([("GNU.sparse.size", "100"), ("GNU.sparse.numblocks", "1"),
             ("GNU.sparse.map", "0,4")]) + hdr("v01", 4) + pad(b"data")
sys.stdout.buffer.write(t + b"\0" * 1024)
EOF
}

# The variant: an API client uploads archives with hostile sparse maps.
# Each is refused with a 400 naming the problem, before anything is
# written; nothing appears in the target or on the host, no temporary file
# is left, and the daemon answers within a second throughout.
test_hostile_sparse_maps_refused() {
  local kind want tmp before t0 ms
  cp_sandbox cp-maps
  small_fs tmpfs 64m
  tmp=$FS
  before=$(host_etc_fingerprint)
  "$WARREN" exec cp-maps -- mkdir /target
  for kind in overlap:overlap order:"out of order" more:"claims 90 bytes" \
    huge:"too large" million:"at most 65536" \
    endless:"too many sparse extension headers" v01:"format 0.x"; do
    want=${kind#*:}
    kind=${kind%%:*}
    hostile_tar "$kind" >"$tmp/$kind.tar"
    api_call PUT "$(files_url cp-maps archive /target)" \
      -H 'Content-Type: application/x-tar' --data-binary "@$tmp/$kind.tar"
    assert_eq 400 "$API_STATUS" "$kind: status ($API_BODY)"
    assert_contains "$(json_get "$API_BODY" .error.message)" "$want" "$kind: message"
    t0=$(now_ms)
    "$WARREN" ls >/dev/null
    ms=$(($(now_ms) - t0))
    [ "$ms" -lt 1000 ] || fail "$kind: warren ls took $ms ms"
  done
  assert_eq "" "$("$WARREN" exec cp-maps -- ls -A /target)" "entries in /target"
  assert_eq "$before" "$(host_etc_fingerprint)" "the host's /etc"
  assert_daemon_alive
}
