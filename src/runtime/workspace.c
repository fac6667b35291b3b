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
 */
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* The mount point (below the root, one level deep) as an O_PATH fd,
 * made if missing. */
static int open_mount_point(int rootfd, const struct wr_rt_spec *spec,
                            const char *path, wr_error_t *err) {
  struct open_how how = {
      .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  struct wr_files_ctx fc = {.rootfd = rootfd,
                            .id_base = wr_rt_id_base(spec->slot),
                            .id_count = WR_ID_COUNT};
  int fd;

  fd = (int)syscall(SYS_openat2, rootfd, path + 1, &how, sizeof(how));
  if (fd < 0 && errno == ENOENT) {
    if (wr_files_mkdir(&fc, path, 0755, false, err) < 0 && err->code != EEXIST)
      return -1;
    fd = (int)syscall(SYS_openat2, rootfd, path + 1, &how, sizeof(how));
  }
  if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
    return wr_error_setx(err, ENOTDIR,
                         "%s in the sandbox is not a directory: the "
                         "workspace cannot be mounted there",
                         path);
  if (fd < 0)
    return wr_error_set(err, errno, "open %s in the sandbox", path);
  return fd;
}

static int mount_id(int fd, uint64_t *id, wr_error_t *err) {
  struct statx stx;

  if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
    return wr_error_set(err, errno, "statx");
  *id = stx.stx_mnt_id;
  return 0;
}

/* A detached copy of the host directory, id-mapped as described above. */
static int workspace_tree(const struct wr_rt_spec *spec, wr_error_t *err) {
  char umap[64], gmap[64];
  _cleanup_close_ int userns = -1;
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
  fd = (int)syscall(SYS_open_tree, AT_FDCWD, spec->ws_path,
                    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
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
