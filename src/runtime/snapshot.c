/*
 * Snapshots on the driver's side: capturing a sandbox's own layer while it
 * runs, and what a sandbox made from a snapshot must have of its own.
 *
 * The capture reads the overlay's upper directory on the host while the
 * overlay is mounted and the sandbox writes through it. Reading an upper
 * layer under a live overlay is allowed (changing it is not), and what is
 * written through the overlay is in the upper files' page cache, so a
 * read sees it. The first pass races the sandbox; the second runs with
 * every process frozen (the cgroup freezer, as pause), so nothing changes
 * under it, and copies only what changed since the first began (see
 * layers.c). Ctime comes from the kernel's coarse clock, which lags the
 * real time by up to a tick (10 ms at HZ=100), so "since" is taken 100 ms
 * before the first pass: a file changed in those 100 ms is copied twice,
 * never missed. (It was a second; an install that had just finished made
 * the frozen pass copy its last second of files again.)
 */
#include "runtime/layers.h"
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#define SINCE_SLACK_NS 100000000ll

static int64_t realtime_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double ms_since(uint64_t t0) {
  return (double)(wr_mono_ns() - t0) / 1e6;
}

/* The upper directory (its disk image mounted first if it has one). */
static int open_upper(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                      wr_error_t *err) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, spec->id);
  _cleanup_free_ char *upper = NULL;
  int fd;

  if (spec->disk_bytes > 0 && !wr_disk_is_mounted(dir) &&
      wr_disk_mount(dir, err) < 0)
    return -1;
  upper = spec->disk_bytes > 0 ? xasprintf("%s/disk/upper", dir)
                               : xasprintf("%s/upper", dir);
  fd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", upper);
  return fd;
}

/* The frozen pass, always followed by a thaw. */
static int frozen_pass(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                       int src, int dst, struct wr_layer_opts *o,
                       struct wr_layer_stats *st, struct wr_snap_capture *c,
                       wr_error_t *err) {
  uint64_t t0 = wr_mono_ns();
  wr_error_t thaw_err;
  int r;

  if (wr_rt_freeze(rt, spec->id, true, err) < 0) {
    wr_rt_freeze(rt, spec->id, false, NULL);
    return wr_error_wrap(err, "freeze sandbox `%s`", spec->id);
  }
  r = wr_layer_sync(src, dst, o, st, err);
  if (wr_rt_freeze(rt, spec->id, false, &thaw_err) < 0 && r == 0) {
    *err = thaw_err;
    r = wr_error_wrap(err, "thaw sandbox `%s`", spec->id);
  }
  c->frozen_ms = ms_since(t0);
  c->copied_frozen = st->copied;
  return r;
}

int wr_rt_snapshot_capture(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                           const char *layer_dir, struct wr_snap_capture *c,
                           wr_error_t *err) {
  uint64_t t0 = wr_mono_ns();
  _cleanup_close_ int src = -1, dst = -1;
  struct wr_layer_opts o = {.id_base = wr_rt_id_base(spec->slot)};
  struct wr_layer_stats st;
  int r;

  c->frozen_ms = 0;
  c->copied_frozen = 0;
  if ((src = open_upper(rt, spec, err)) < 0)
    return wr_error_wrap(err, "snapshot sandbox `%s`", spec->id);
  if (mkdir(layer_dir, 0755) < 0)
    return wr_error_set(err, errno, "mkdir `%s`", layer_dir);
  dst = open(layer_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dst < 0)
    return wr_error_set(err, errno, "open `%s`", layer_dir);
  o.since_ns = realtime_ns() - SINCE_SLACK_NS;
  r = wr_layer_sync(src, dst, &(struct wr_layer_opts){.id_base = o.id_base},
                    &st, err);
  if (r == 0 && c->live)
    r = frozen_pass(rt, spec, src, dst, &o, &st, c, err);
  c->total_ms = ms_since(t0);
  if (r < 0)
    return wr_error_wrap(err, "snapshot sandbox `%s`", spec->id);
  c->files = st.files;
  c->dirs = st.dirs;
  c->whiteouts = st.whiteouts;
  c->bytes = st.bytes;
  return 0;
}

/* Files a sandbox's image or its source may hold that identify one
 * machine and that a new one regenerates when they are missing. */
static const char *const per_machine[] = {
    "/var/lib/dbus/machine-id",      "/var/lib/systemd/random-seed",
    "/etc/ssh/ssh_host_rsa_key",     "/etc/ssh/ssh_host_rsa_key.pub",
    "/etc/ssh/ssh_host_ecdsa_key",   "/etc/ssh/ssh_host_ecdsa_key.pub",
    "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ed25519_key.pub",
};

/* Remove one of them through the merged root (a whiteout in the upper
 * when a lower layer has it); a missing file or directory is fine. */
static int forget(int rootfd, const char *path, wr_error_t *err) {
  _cleanup_free_ char *dir = xstrdup(path);
  char *slash = strrchr(dir, '/');
  _cleanup_close_ int parent = -1;

  *slash = '\0';
  parent = wr_open_in_root(rootfd, dir, O_PATH | O_DIRECTORY, 0, NULL);
  if (parent < 0)
    return 0;
  if (unlinkat(parent, slash + 1, 0) < 0 && errno != ENOENT &&
      errno != ENOTDIR && errno != EISDIR)
    return wr_error_set(err, errno, "remove `%s`", path);
  return 0;
}

int wr_snapshot_seed_unique(int rootfd, const struct wr_rt_spec *spec,
                            wr_error_t *err) {
  if (spec->nlayers == 0)
    return 0;
  return wr_rt_seed_machine(rootfd, spec->slot, err);
}

int wr_rt_seed_machine(int rootfd, uint32_t slot, wr_error_t *err) {
  unsigned char raw[16];
  char id[sizeof(raw) * 2 + 2];

  wr_random_bytes(raw, sizeof(raw));
  for (size_t i = 0; i < sizeof(raw); i++)
    snprintf(id + 2 * i, 3, "%02x", raw[i]);
  strcat(id, "\n");
  if (wr_write_in_root(rootfd, "in the sandbox", "/etc/machine-id", id,
                       strlen(id), 0444, wr_rt_id_base(slot), err) < 0)
    return wr_error_wrap(err, "give the sandbox its own machine id");
  for (size_t i = 0; i < WR_ARRAY_SIZE(per_machine); i++)
    if (forget(rootfd, per_machine[i], err) < 0)
      return -1;
  return 0;
}
