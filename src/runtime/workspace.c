/*
 * Workspaces: a directory of the host, mounted into a sandbox's root.
 *
 * Direct mode mounts it read-write at /workspace; clone mode mounts it
 * read-only at /origin (the sandbox clones it into its own /workspace).
 * The mount is made on the host side, below sandboxes/ID/rootfs, so the
 * files API sees it too and warren-init's root (a recursive bind of the
 * rootfs) carries it into the sandbox.
 *
 * It is id-mapped with a user namespace that maps the directory's owner
 * (ws_uid, ws_gid) to the sandbox's root: that owner's files appear owned
 * by root inside, and what root inside makes there is the owner's on the
 * host. Files of other host users appear as the overflow id (nobody) and
 * cannot be changed from inside.
 *
 * The mount point is inside the sandbox's own layer, which code in the
 * sandbox controls: it is opened with openat2 in the root, never through
 * a symlink, and the mount is moved onto that fd (move_mount), so a
 * /workspace that was turned into a symlink can never aim the mount at a
 * host path.
 *
 * The host directory itself may be inside another sandbox's workspace
 * (nested projects), and that sandbox can replace it, by a symlink to any
 * directory of the same user (~/.ssh) or by another directory, while this
 * sandbox's mount is away (a reboot). So the directory is opened with no
 * symlink in any component of its canonical path, and what is found is
 * compared with what was recorded at create (device, inode, owner) before
 * open_tree is called on that very fd; `warren diff` walks from the same
 * open.
 */
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

/* The mount point (below the root, one level deep) as an O_PATH fd,
 * made if missing. */
static int open_mount_point(int rootfd, const struct wr_rt_spec *spec,
                            const char *path, wr_error_t *err) {
  const unsigned flags =
      WR_CONFINED_DIR | WR_CONFINED_NO_SYMLINKS | WR_CONFINED_PATH;
  struct wr_files_ctx fc = {.rootfd = rootfd,
                            .id_base = wr_rt_id_base(spec->slot),
                            .id_count = WR_ID_COUNT};
  wr_error_t oerr;
  int fd;

  fd = wr_open_confined(rootfd, "in the sandbox", path, flags, NULL, &oerr);
  if (fd < 0 && oerr.code == ENOENT) {
    if (wr_files_mkdir(&fc, path, 0755, false, err) < 0 && err->code != EEXIST)
      return -1;
    fd = wr_open_confined(rootfd, "in the sandbox", path, flags, NULL, &oerr);
  }
  if (fd < 0) {
    *err = oerr;
    return wr_error_wrap(err, "the workspace cannot be mounted there");
  }
  return fd;
}

static int mount_id(int fd, uint64_t *id, wr_error_t *err) {
  struct statx stx;

  if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
    return wr_error_set(err, errno, "statx");
  *id = stx.stx_mnt_id;
  return 0;
}

/* ---- the host directory, as recorded -------------------------------- */

int wr_workspace_identify(int fd, struct wr_ws_identity *out, wr_error_t *err) {
  struct statfs sf;
  struct stat st;

  if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0)
    return wr_error_set(err, errno, "stat the workspace");
  out->known = true;
  out->dev = (uint64_t)st.st_dev;
  out->ino = (uint64_t)st.st_ino;
  out->fsid = (uint64_t)(uint32_t)sf.f_fsid.__val[0] |
              (uint64_t)(uint32_t)sf.f_fsid.__val[1] << 32;
  return 0;
}

bool wr_workspace_same(const struct wr_rt_spec *spec, const struct stat *st,
                       uint64_t fsid) {
  const struct wr_ws_identity *id = &spec->ws_id;

  if (st->st_uid != spec->ws_uid || st->st_gid != spec->ws_gid)
    return false;
  /* An older record has only its owner and a path without symlinks to
   * check (docs/security.md). */
  if (!id->known)
    return true;
  if ((uint64_t)st->st_ino != id->ino)
    return false;
  return (uint64_t)st->st_dev == id->dev || (id->fsid != 0 && fsid == id->fsid);
}

/* The message for a workspace that is not what was recorded. */
static int changed(const struct wr_rt_spec *spec, const char *how,
                   wr_error_t *err) {
  return wr_error_setx(err, ESTALE,
                       "the workspace `%s` is not the directory it was when "
                       "the sandbox was created (%s); refusing to mount it: "
                       "put that directory back, or remove the sandbox",
                       spec->ws_path, how);
}

/* What is there now, against the record, in words. */
static int compare(const struct wr_rt_spec *spec, int fd, wr_error_t *err) {
  struct wr_ws_identity now;
  struct stat st;
  char how[256];

  if (fstat(fd, &st) < 0)
    return wr_error_set(err, errno, "stat the workspace `%s`", spec->ws_path);
  if (wr_workspace_identify(fd, &now, err) < 0)
    return -1;
  if (wr_workspace_same(spec, &st, now.fsid))
    return 0;
  snprintf(how, sizeof(how),
           "now inode %" PRIu64 " on device %" PRIu64 ", owned by %u:%u; "
           "recorded inode %" PRIu64 " on device %" PRIu64 ", owned by %u:%u",
           now.ino, now.dev, (unsigned)st.st_uid, (unsigned)st.st_gid,
           spec->ws_id.ino, spec->ws_id.dev, spec->ws_uid, spec->ws_gid);
  return changed(spec, how, err);
}

int wr_workspace_open(const struct wr_rt_spec *spec, bool path_only,
                      wr_error_t *err) {
  unsigned flags = WR_CONFINED_DIR | WR_CONFINED_NO_SYMLINKS |
                   (path_only ? WR_CONFINED_PATH : 0);
  _cleanup_close_ int fd = -1;
  wr_error_t oerr;

  fd = wr_open_host_confined(spec->ws_path, flags, NULL, &oerr);
  if (fd < 0 && (oerr.code == ELOOP || oerr.code == ENOTDIR))
    return changed(spec, oerr.msg, err);
  if (fd < 0) {
    *err = oerr;
    return wr_error_wrap(err, "open the workspace");
  }
  if (compare(spec, fd, err) < 0)
    return -1;
  return steal_fd(&fd);
}

/* ---- the mount --------------------------------------------------------- */

/* A detached copy of the host directory, id-mapped as described above. */
static int workspace_tree(const struct wr_rt_spec *spec, wr_error_t *err) {
  char umap[64], gmap[64];
  _cleanup_close_ int userns = -1, dir = -1;
  struct mount_attr attr = {
      .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                  (spec->ws_clone ? MOUNT_ATTR_RDONLY : 0),
  };
  int fd;

  snprintf(umap, sizeof(umap), "%u %u 1\n", spec->ws_uid,
           wr_rt_id_base(spec->slot));
  snprintf(gmap, sizeof(gmap), "%u %u 1\n", spec->ws_gid,
           wr_rt_id_base(spec->slot));
  if (wr_userns_create_map(umap, gmap, &userns, err) < 0)
    return wr_error_wrap(err, "map the workspace's owner");
  dir = wr_workspace_open(spec, true, err);
  if (dir < 0)
    return -1;
  fd = (int)syscall(SYS_open_tree, dir, "",
                    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (fd < 0)
    return wr_error_set(err, errno, "open the workspace `%s`", spec->ws_path);
  attr.userns_fd = (uint64_t)userns;
  if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) <
      0) {
    int e = errno;
    close(fd);
    if (e == EINVAL || e == EOPNOTSUPP)
      return wr_error_setx(err, e,
                           "`%s` is on a filesystem without id-mapped mounts, "
                           "which a workspace needs",
                           spec->ws_path);
    return wr_error_set(err, e, "id-map the workspace `%s`", spec->ws_path);
  }
  return fd;
}

/* Idempotent: a mount point that is already a mount is kept. */
int wr_workspace_mount(int rootfd, const struct wr_rt_spec *spec,
                       wr_error_t *err) {
  const char *at = spec->ws_clone ? WR_ORIGIN : WR_WORKSPACE;
  _cleanup_close_ int target = -1, tree = -1, own = -1;
  uint64_t root_mnt, target_mnt;

  if (spec->ws_path == NULL)
    return 0;
  /* Clone mode: /workspace is a plain directory of the sandbox's own. */
  if (spec->ws_clone &&
      (own = open_mount_point(rootfd, spec, WR_WORKSPACE, err)) < 0)
    return -1;
  if ((target = open_mount_point(rootfd, spec, at, err)) < 0 ||
      mount_id(rootfd, &root_mnt, err) < 0 ||
      mount_id(target, &target_mnt, err) < 0)
    return -1;
  if (target_mnt != root_mnt)
    return 0;
  if ((tree = workspace_tree(spec, err)) < 0)
    return -1;
  if (syscall(SYS_move_mount, tree, "", target, "",
              MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return wr_error_set(err, errno, "mount the workspace at %s", at);
  return 0;
}

/* Detach whatever is mounted at the two mount points (never following a
 * symlink the sandbox may have put there); nothing there is fine. */
int wr_workspace_umount(const char *dir, wr_error_t *err) {
  static const char *const points[] = {WR_WORKSPACE, WR_ORIGIN};

  if (!wr_rootfs_is_mounted(dir))
    return 0;
  for (size_t i = 0; i < WR_ARRAY_SIZE(points); i++) {
    _cleanup_free_ char *path = xasprintf("%s/rootfs%s", dir, points[i]);
    if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL &&
        errno != ENOENT)
      return wr_error_set(err, errno, "unmount `%s`", path);
  }
  return 0;
}
