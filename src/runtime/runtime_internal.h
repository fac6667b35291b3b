/*
 * Internal to the runtime module: the driver's state and the steps its
 * files share. Nothing outside src/runtime includes this.
 */
#ifndef WR_RUNTIME_INTERNAL_H
#define WR_RUNTIME_INTERNAL_H

#include <sched.h>

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
  char *mkfs_path;                  /* mkfs.ext4 for disk images, or NULL */
  struct wr_netns_pool *netns_pool; /* locked inside; see netns.c */
  struct wr_cgroup_primer *primer;  /* v1 only; locked inside (cgprime.c) */
  bool loop_ok;                     /* /dev/loop-control is usable */
  struct wr_view *view;             /* lxcfs; locked inside, see view.c */
  cpu_set_t cpus;                   /* the CPUs warrend may use */
};

/* userns.c: a user namespace mapping 0..WR_ID_COUNT-1 to the slot's range. */
int wr_userns_create(uint32_t slot, int *userns_fd, wr_error_t *err);
/* One with the given uid_map and gid_map contents. */
int wr_userns_create_map(const char *uid_map, const char *gid_map,
                         int *userns_fd, wr_error_t *err);
/* workspace.c: a host directory mounted into the sandbox's root (on the
 * host side, under DIR/rootfs, before init starts; see runtime.h). */
int wr_workspace_mount(int rootfd, const struct wr_rt_spec *spec,
                       wr_error_t *err);
int wr_workspace_umount(const char *dir, wr_error_t *err);

/* mount.c: the host-side root (overlay over an id-mapped image). */
bool wr_is_mount_point(const char *dir, const char *name);
/* The lower layers are spec's snapshot layers, then its image. */
int wr_rootfs_mount(const char *dir, const char *layers_dir,
                    const struct wr_rt_spec *spec, int userns_fd,
                    wr_error_t *err);
int wr_rootfs_umount(const char *dir, wr_error_t *err);
bool wr_rootfs_is_mounted(const char *dir);

/* snapshot.c: what must differ in a sandbox made from a snapshot
 * (machine id, host keys), in its fresh upper layer. */
int wr_snapshot_seed_unique(int rootfd, const struct wr_rt_spec *spec,
                            wr_error_t *err);
/* ... the part any new machine needs: a new /etc/machine-id, and the
 * host keys and seeds that identify one removed (snapshot.c). */
int wr_rt_seed_machine(int rootfd, uint32_t slot, wr_error_t *err);
/* The files that name the sandbox: /etc/hostname, /etc/hosts (driver.c). */
int wr_rt_seed_names(int rootfd, const char *hostname, uint32_t slot,
                     wr_error_t *err);

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

/* netns.c: loopback-only network namespaces with every way out
 * redirected to warrend's proxy (see the top of netns.c). */
/* A prepared namespace: routes, filter rules and warrend's listeners. */
struct wr_netns {
  int fd;                  /* the namespace */
  int listen[WR_NET_NFDS]; /* the listeners; PROXY6 may be -1 */
};
#define WR_NETNS_POOL_MAX 64
struct wr_netns_pool;
void wr_netns_close(struct wr_netns *ns);
/* A thread that keeps `size` namespaces ready (0: none, every start
 * prepares its own). */
int wr_netns_pool_new(unsigned size, struct wr_netns_pool **out,
                      wr_error_t *err);
void wr_netns_pool_free(struct wr_netns_pool *p);
/* A ready namespace (owned by the caller), or a new one if none is. */
int wr_netns_take(struct wr_netns_pool *p, struct wr_netns *ns,
                  wr_error_t *err);

/* view.c: what a sandbox sees of the host's size. */
struct wr_view;
/* Find or start the state root's lxcfs (ROOT/lxcfs); never fails: without
 * lxcfs, sandboxes see the host's figures. */
struct wr_view *wr_view_new(const char *root);
void wr_view_free(struct wr_view *v);
/* The directory of a live lxcfs mount to bind /proc files from (restarted
 * first if it died), or NULL when there is none. Caller frees. *ro says
 * whether the mount is read-only (one started by an older warrend may
 * not be). */
char *wr_view_lxcfs(struct wr_view *v, bool *ro);
/* The CPUs a sandbox with `cpus` (> 0) runs on: ceil(cpus) of `allowed`,
 * starting at a place that depends on the slot so that sandboxes spread
 * over the host. False when it would be all of them (or cpus is 0). */
bool wr_view_affinity(double cpus, uint32_t slot, const cpu_set_t *allowed,
                      cpu_set_t *out);
/* The /proc files lxcfs serves that spawn.c binds. */
#define WR_VIEW_FILES "meminfo", "cpuinfo", "stat", "uptime", "loadavg", "swaps"
#define WR_VIEW_NFILES 6

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
  const struct wr_netns *netns; /* joined by the child */
  const char *lxcfs;            /* a live lxcfs mount, or NULL */
  bool lxcfs_ro;                /* ... mounted read-only */
  bool pin_cpus;                /* run on `cpus` only */
  cpu_set_t cpus;
};
int wr_spawn_init(const struct wr_spawn_args *a, pid_t *pid, int *pidfd,
                  wr_error_t *err);

#endif
