/*
 * A sandbox's disk limit. This kernel has no filesystem quotas that work
 * here (ext4 without QFMT_V2, XFS without quota), so a sandbox with a
 * limit gets a filesystem of its own: a sparse ext4 image,
 * sandboxes/ID/disk.img, on a loop device, mounted at sandboxes/ID/disk.
 * The overlay's upper and work directories live inside it, so what the
 * sandbox writes is bounded by the image's size: a full disk says ENOSPC
 * inside and the host's free space is untouched.
 *
 * The image is formatted once, when the sandbox is created, by mkfs.ext4
 * run as a child process that inherits no daemon fd. The loop device is
 * configured with LO_FLAGS_AUTOCLEAR: it goes away by itself when the
 * filesystem is unmounted, so nothing has to remember which device a
 * sandbox had, and a host reboot leaves nothing stale. Mounting is
 * idempotent: an image already on a loop device is mounted from that
 * device (the same superblock) rather than attached twice, which would
 * put two filesystems on one image.
 *
 * The sandbox never sees the image or the block device, only files
 * through the overlay, so the kernel's ext4 code never parses bytes the
 * sandbox chose.
 */
#include "runtime/runtime_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define DISK_IMAGE "disk.img"
#define DISK_IMAGE_NEW "disk.img.new"
#define DISK_DIR "disk"
#define LOOP_TRIES 64
#define MKFS_ERR_MAX 1024

/* Discard punches freed blocks out of the sparse image, so the host gets
 * back what the sandbox deletes; after an I/O error the filesystem stops
 * writing instead of compounding the damage. */
#define DISK_MOUNT_OPTS "discard,errors=remount-ro"

char *wr_disk_find_mkfs(void) {
  static const char *const paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4",
                                      "/usr/sbin/mke2fs", "/sbin/mke2fs"};

  for (size_t i = 0; i < WR_ARRAY_SIZE(paths); i++)
    if (access(paths[i], X_OK) == 0)
      return xstrdup(paths[i]);
  return NULL;
}

bool wr_disk_supported(void) {
  return access("/dev/loop-control", R_OK | W_OK) == 0;
}

bool wr_disk_is_mounted(const char *dir) {
  return wr_is_mount_point(dir, DISK_DIR);
}

char *wr_disk_layers_dir(const char *dir) {
  return xasprintf("%s/%s", dir, DISK_DIR);
}

/* Read what the child wrote on its stderr (at most MKFS_ERR_MAX bytes
 * kept), then reap it. */
static int wait_child(pid_t pid, int errfd, char *msg, size_t size) {
  size_t len = 0;
  char buf[512];
  ssize_t n;
  int status;

  msg[0] = '\0';
  while ((n = read(errfd, buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    for (ssize_t i = 0; i < n && len + 1 < size; i++)
      msg[len++] = buf[i] == '\n' ? ' ' : buf[i];
    msg[len] = '\0';
  }
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return status;
}

/* The child starts with default signal handling and an empty mask (the
 * daemon ignores SIGPIPE and its worker threads block signals), stdin and
 * stdout on /dev/null, stderr on a pipe, and no other fd. */
static int spawn_setup(posix_spawn_file_actions_t *fa, posix_spawnattr_t *at,
                       int errfd) {
  sigset_t none, all;

  sigemptyset(&none);
  sigfillset(&all);
  if (posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0) ||
      posix_spawn_file_actions_addopen(fa, 1, "/dev/null", O_WRONLY, 0) ||
      posix_spawn_file_actions_adddup2(fa, errfd, 2) ||
      posix_spawn_file_actions_addclosefrom_np(fa, 3) ||
      posix_spawnattr_setsigmask(at, &none) ||
      posix_spawnattr_setsigdefault(at, &all) ||
      posix_spawnattr_setflags(at,
                               POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    return -1;
  return 0;
}

/*
 * mkfs.ext4 with options chosen for a sparse image that one sandbox uses:
 * 4 KiB blocks whatever the size (-T default; small filesystems would get
 * 1 KiB blocks), no blocks reserved for root (-m 0: root inside is the
 * user), the root directory owned by the sandbox's root, and lazy inode
 * table and journal initialisation. mkfs's default discard punches the
 * whole file first, so it knows that the tables read as zeros and marks
 * them initialised: nothing is written later by ext4lazyinit, and the
 * image stays sparse (about 1 MiB per 2 GiB).
 */
static int run_mkfs(const char *mkfs, const char *image, uid_t owner,
                    wr_error_t *err) {
  _cleanup_free_ char *ext = xasprintf(
      "root_owner=%u:%u,lazy_itable_init=1,lazy_journal_init=1", owner, owner);
  char *const argv[] = {"mkfs.ext4", "-q",          "-F", "-t", "ext4",
                        "-T",        "default",     "-m", "0",  "-E",
                        ext,         (char *)image, NULL};
  char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  char msg[MKFS_ERR_MAX];
  int pipefd[2], r, status;
  pid_t pid;

  if (pipe2(pipefd, O_CLOEXEC) < 0)
    return wr_error_set(err, errno, "pipe");
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  r = spawn_setup(&fa, &at, pipefd[1]);
  if (r == 0)
    r = posix_spawn(&pid, mkfs, &fa, &at, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(pipefd[1]);
  if (r != 0) {
    close(pipefd[0]);
    return wr_error_set(err, r > 0 ? r : ENOMEM, "run `%s`", mkfs);
  }
  status = wait_child(pid, pipefd[0], msg, sizeof(msg));
  close(pipefd[0]);
  if (status < 0)
    return wr_error_set(err, errno, "wait for `%s`", mkfs);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return wr_error_setx(
        err, EIO, "`%s` failed (status %d): %s", mkfs,
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), msg);
  return 0;
}

/* The image is made under a temporary name and renamed when formatted, so
 * an image that exists is a whole one (a create that died half way leaves
 * only disk.img.new, which the next attempt overwrites). */
int wr_disk_create(const char *dir, uint64_t bytes, uid_t owner,
                   const char *mkfs, wr_error_t *err) {
  _cleanup_free_ char *image = xasprintf("%s/" DISK_IMAGE, dir);
  _cleanup_free_ char *fresh = xasprintf("%s/" DISK_IMAGE_NEW, dir);
  _cleanup_close_ int fd = -1;

  if (access(image, F_OK) == 0)
    return 0;
  if (mkfs == NULL)
    return wr_error_setx(err, ENOTSUP, "no mkfs.ext4 on this host");
  fd = open(fresh, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return wr_error_set(err, errno, "create `%s`", fresh);
  if (ftruncate(fd, (off_t)bytes) < 0)
    return wr_error_set(err, errno, "size `%s`", fresh);
  close(steal_fd(&fd));
  if (run_mkfs(mkfs, fresh, owner, err) < 0) {
    unlink(fresh);
    return wr_error_wrap(err, "format the disk image");
  }
  if (rename(fresh, image) < 0)
    return wr_error_set(err, errno, "rename `%s`", fresh);
  return 0;
}

/* The loop device that already has `image` as its backing file, or -1.
 * An image that is still attached (its filesystem kept alive by a mount
 * elsewhere) must be mounted from that device, never attached again. */
static int find_backing_loop(const char *image) {
  _cleanup_free_ char *real = realpath(image, NULL);
  DIR *d;
  struct dirent *e;
  int found = -1;

  if (real == NULL || (d = opendir("/sys/block")) == NULL)
    return -1;
  while (found < 0 && (e = readdir(d)) != NULL) {
    _cleanup_free_ char *path = NULL, *data = NULL;
    size_t len = 0;
    int n;

    if (sscanf(e->d_name, "loop%d", &n) != 1)
      continue;
    path = xasprintf("/sys/block/%s/loop/backing_file", e->d_name);
    if (wr_read_file(path, PATH_MAX + 16, &data, &len, NULL) < 0)
      continue;
    while (len > 0 && data[len - 1] == '\n')
      data[--len] = '\0';
    if (strcmp(data, real) == 0)
      found = n;
  }
  closedir(d);
  return found;
}

static int open_loop(int n, wr_error_t *err) {
  char path[32];
  int fd;

  snprintf(path, sizeof(path), "/dev/loop%d", n);
  fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  return fd;
}

/* LOOP_CONFIGURE a free loop device with the image. Another thread or
 * process may take the device LOOP_CTL_GET_FREE named before we configure
 * it; then we get EBUSY and ask again. Returns the device's open fd. */
static int attach_loop(const char *image, int *nr, wr_error_t *err) {
  _cleanup_close_ int ctl = -1, file = -1;
  struct loop_config cfg = {0};

  ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0)
    return wr_error_set(err, errno, "open `/dev/loop-control`");
  file = open(image, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (file < 0)
    return wr_error_set(err, errno, "open `%s`", image);
  cfg.fd = (uint32_t)file;
  /* Direct I/O: the image's pages are cached once (in the filesystem on
   * the loop device, charged to the sandbox), not twice. */
  cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
  wr_strlcpy((char *)cfg.info.lo_file_name, image, LO_NAME_SIZE);
  for (int i = 0; i < LOOP_TRIES; i++) {
    int n = ioctl(ctl, LOOP_CTL_GET_FREE), fd;

    if (n < 0)
      return wr_error_set(err, errno, "find a free loop device");
    if ((fd = open_loop(n, err)) < 0)
      return -1;
    if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
      *nr = n;
      return fd;
    }
    int e = errno;
    close(fd);
    if (e == EINVAL && (cfg.info.lo_flags & LO_FLAGS_DIRECT_IO)) {
      cfg.info.lo_flags &= ~(uint32_t)LO_FLAGS_DIRECT_IO;
      continue;
    }
    if (e != EBUSY)
      return wr_error_set(err, e, "set up `/dev/loop%d` for `%s`", n, image);
    usleep(1000);
  }
  return wr_error_set(err, EBUSY, "no loop device for `%s`", image);
}

static int mount_loop(int n, const char *target, wr_error_t *err) {
  char dev[32];

  snprintf(dev, sizeof(dev), "/dev/loop%d", n);
  if (mount(dev, target, "ext4", MS_NODEV | MS_NOSUID, DISK_MOUNT_OPTS) < 0)
    return wr_error_set(err, errno, "mount `%s` on `%s`", dev, target);
  return 0;
}

/*
 * Mount the image at DIR/disk unless it is mounted. Our fd of the loop
 * device is closed only once the filesystem holds the device, since with
 * AUTOCLEAR the last close detaches it.
 */
int wr_disk_mount(const char *dir, wr_error_t *err) {
  _cleanup_free_ char *image = xasprintf("%s/" DISK_IMAGE, dir);
  _cleanup_free_ char *target = wr_disk_layers_dir(dir);
  _cleanup_close_ int loop = -1;
  int n;

  if (wr_disk_is_mounted(dir))
    return 0;
  if (access(image, F_OK) < 0)
    return wr_error_set(err, errno, "disk image `%s`", image);
  if (mkdir(target, 0700) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "mkdir `%s`", target);
  n = find_backing_loop(image);
  if (n >= 0)
    loop = open_loop(n, err);
  else
    loop = attach_loop(image, &n, err);
  if (loop < 0 || mount_loop(n, target, err) < 0)
    return wr_error_wrap(err, "mount the disk image");
  return 0;
}

/* A plain unmount frees the loop device at once. Something still using
 * the filesystem (a files API call racing an rm) makes it busy; then it is
 * detached and the device goes when the last user lets go. */
int wr_disk_umount(const char *dir, wr_error_t *err) {
  _cleanup_free_ char *target = wr_disk_layers_dir(dir);

  if (!wr_disk_is_mounted(dir))
    return 0;
  if (umount2(target, 0) == 0)
    return 0;
  if (errno == EBUSY && umount2(target, MNT_DETACH) == 0)
    return 0;
  if (errno == EINVAL || errno == ENOENT)
    return 0;
  return wr_error_set(err, errno, "unmount `%s`", target);
}
