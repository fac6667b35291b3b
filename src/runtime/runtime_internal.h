/*
 * Internal to the runtime module: the driver's state and the steps its
 * files share. Nothing outside src/runtime includes this.
 */
#ifndef WR_RUNTIME_INTERNAL_H
#define WR_RUNTIME_INTERNAL_H

#include "runtime/cgroup.h"
#include "runtime/runtime.h"

/* Read-only after wr_rt_new, so worker threads share it freely. */
struct wr_runtime {
  char *root;
  char *sandboxes_dir;
  int init_memfd;      /* warren-init, sealed */
  void *seccomp_progs; /* seccomp programs, see seccomp.c */
  size_t seccomp_len;
  struct wr_cgroup cg;
  char *mkfs_path; /* mkfs.ext4 for disk images, or NULL */
  bool loop_ok;    /* /dev/loop-control is usable */
};

/* userns.c: a user namespace mapping 0..WR_ID_COUNT-1 to the slot's range. */
int wr_userns_create(uint32_t slot, int *userns_fd, wr_error_t *err);

/* mount.c: the host-side root (overlay over an id-mapped image). */
bool wr_is_mount_point(const char *dir, const char *name);
int wr_rootfs_mount(const char *dir, const char *layers_dir,
                    const char *image_dir, int userns_fd, wr_error_t *err);
int wr_rootfs_umount(const char *dir, wr_error_t *err);
bool wr_rootfs_is_mounted(const char *dir);

/* disk.c: a disk limit as an ext4 image on a loop device, mounted at
 * DIR/disk, which then holds the overlay's upper and work directories. */
char *wr_disk_find_mkfs(void);
bool wr_disk_supported(void);
/* Make DIR/disk.img, BYTES long, formatted (once; an image is kept). */
int wr_disk_create(const char *dir, uint64_t bytes, uid_t owner,
                   const char *mkfs, wr_error_t *err);
int wr_disk_mount(const char *dir, wr_error_t *err);
int wr_disk_umount(const char *dir, wr_error_t *err);
bool wr_disk_is_mounted(const char *dir);
/* DIR/disk, where the layers live (caller frees). */
char *wr_disk_layers_dir(const char *dir);

/* seccomp.c: build the sandbox's filters once; write them to a memfd. */
int wr_seccomp_build(void **progs, size_t *len, wr_error_t *err);
int wr_seccomp_memfd(const void *progs, size_t len, wr_error_t *err);

/* spawn.c: clone warren-init into new namespaces. */
struct wr_spawn_args {
  const char *rootfs;   /* host path of the merged root */
  const char *ctl_path; /* where init's control socket is bound */
  const char *hostname;
  uint32_t id_base;
  int userns_fd;
  int log_fd; /* init's stderr */
  int seccomp_fd;
  int init_memfd;
  /* cgroups: with cgroup_dir (v2) the child is cloned straight into it;
   * otherwise the parent moves it by writing its pid into each
   * cgroup.procs while the child builds its root, and the child waits for
   * that before entering its cgroup namespace. */
  int cgroup_dir;
  int cgroup_fds[WR_CGROUP_MAX_HIER];
  size_t ncgroup_fds;
  uint64_t nofile;
  uint64_t nproc;
};
int wr_spawn_init(const struct wr_spawn_args *a, pid_t *pid, int *pidfd,
                  wr_error_t *err);

#endif
