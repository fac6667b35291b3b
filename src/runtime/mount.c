/*
 * The host side of a sandbox's root: an overlay whose lower layer is the
 * image, id-mapped into the sandbox's range (so image files owned by root
 * appear owned by root inside), and whose upper layer is the sandbox's own.
 * It is mounted at sandboxes/ID/rootfs in the host's mount namespace, so
 * the files API can reach it whether or not the sandbox runs. With a disk
 * limit the upper layer lives on the sandbox's own filesystem (disk.c).
 */
#include "runtime/runtime_internal.h"
#include "runtime/layers.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* An id-mapped, read-only, detached copy of the image tree. */
static int idmapped_image(const char *image_dir, int userns_fd,
                          wr_error_t *err) {
  struct mount_attr attr = {
      .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV,
      .userns_fd = (uint64_t)userns_fd,
  };
  int fd;

  fd = (int)syscall(SYS_open_tree, AT_FDCWD, image_dir,
                    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open_tree `%s`", image_dir);
  if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) <
      0) {
    int e = errno;
    close(fd);
    return wr_error_set(err, e, "id-map `%s`", image_dir);
  }
  return fd;
}

/* Whether something is mounted on DIR/NAME: it is on another device than
 * DIR. A mount that was detached no longer counts. */
bool wr_is_mount_point(const char *dir, const char *name) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
  struct stat a, b;

  if (stat(path, &a) < 0 || stat(dir, &b) < 0)
    return false;
  return a.st_dev != b.st_dev;
}

bool wr_rootfs_is_mounted(const char *dir) {
  return wr_is_mount_point(dir, "rootfs");
}

/* An O_PATH fd of one of the sandbox's own layer directories. */
static int open_layer(const char *dir, const char *name, wr_error_t *err) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
  int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  return fd;
}

/*
 * Every layer is named by a magic link in our own /proc rather than by its
 * path. The detached image tree has no path at all; and the overlay's
 * options are printed in the sandbox's /proc/self/mountinfo, where host
 * paths (the state root, the sandbox's id) have no business showing.
 * The upper and work directories are in `layers_dir`: the sandbox's
 * directory, or its disk image's filesystem when it has a disk limit.
 */
int wr_rootfs_mount(const char *dir, const char *layers_dir,
                    const struct wr_rt_spec *spec, int userns_fd,
                    wr_error_t *err) {
  _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", dir);
  _cleanup_free_ char *opts = NULL;
  int lowers[WR_LAYERS_MAX_MOUNT + 1];
  size_t nlowers = 0;
  _cleanup_close_ int upper = -1, work = -1;
  wr_buf_t lowerdir;
  int r = -1;

  if (wr_rootfs_is_mounted(dir))
    return 0;
  if (spec->nlayers > WR_LAYERS_MAX_MOUNT)
    return wr_error_setx(err, EINVAL, "%zu layers: at most %d", spec->nlayers,
                         WR_LAYERS_MAX_MOUNT);
  wr_buf_init(&lowerdir);
  /* Newest first, the image last: overlayfs's order for lowerdir. */
  for (size_t i = 0; i <= spec->nlayers; i++) {
    const char *path = i < spec->nlayers ? spec->layers[i] : spec->image_dir;
    int fd = idmapped_image(path, userns_fd, err);
    if (fd < 0)
      goto out;
    lowers[nlowers++] = fd;
    wr_buf_printf(&lowerdir, "%s/proc/self/fd/%d", i ? ":" : "", fd);
  }
  if ((upper = open_layer(layers_dir, "upper", err)) < 0 ||
      (work = open_layer(layers_dir, "work", err)) < 0)
    goto out;
  opts = xasprintf("lowerdir=%.*s,upperdir=/proc/self/fd/%d,"
                   "workdir=/proc/self/fd/%d",
                   (int)lowerdir.len, lowerdir.data, upper, work);
  if (mount("overlay", rootfs, "overlay", MS_NODEV, opts) < 0) {
    wr_error_set(err, errno, "mount overlay on `%s`", rootfs);
    goto out;
  }
  r = 0;
out:
  for (size_t i = 0; i < nlowers; i++)
    close(lowers[i]);
  wr_buf_free(&lowerdir);
  return r;
}

/* A plain unmount first, so that the overlay is gone when this returns
 * and a disk image below it can be unmounted (and its loop device freed)
 * at once; a root still in use (a files API call racing an rm) is
 * detached instead. */
int wr_rootfs_umount(const char *dir, wr_error_t *err) {
  _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", dir);

  if (!wr_rootfs_is_mounted(dir))
    return 0;
  if (umount2(rootfs, 0) == 0)
    return 0;
  if (errno == EBUSY && umount2(rootfs, MNT_DETACH) == 0)
    return 0;
  if (errno != EINVAL && errno != ENOENT)
    return wr_error_set(err, errno, "unmount `%s`", rootfs);
  return 0;
}
