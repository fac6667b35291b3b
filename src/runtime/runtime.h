/*
 * runtime: the "ns" driver. It turns a sandbox spec into an isolated
 * process tree under warren-init, and takes it down again.
 *
 * Layout of one sandbox under the state root:
 *   sandboxes/ID/upper    the sandbox's own overlay layer
 *   sandboxes/ID/work     overlayfs work dir
 *   sandboxes/ID/rootfs   the merged root, mounted on the host (files API)
 *   sandboxes/ID/ctl.sock warren-init's control socket (root only)
 *   sandboxes/ID/init.log warren-init's stderr
 * With a disk limit, upper and work are in the sandbox's own filesystem:
 *   sandboxes/ID/disk.img a sparse ext4 image of the limit's size
 *   sandboxes/ID/disk     where it is mounted (a loop device, AUTOCLEAR)
 *   sandboxes/ID/disk/{upper,work}
 *
 * Isolation: the network, mount, pid, uts, ipc and cgroup namespaces are
 * created by host root and owned by the host's user namespace; processes
 * run in a user namespace of their own that maps root inside to an
 * unprivileged host range, so root inside holds no capability over any of
 * those namespaces. The image is mounted id-mapped into that range, so its
 * files appear owned by root inside. See docs/isolation.md.
 *
 * Threads: wr_rt_* functions block (mounts, clone, cgroup writes) and are
 * meant to run on worker threads; they touch only the sandbox they are
 * given and the read-only struct wr_runtime.
 */
#ifndef WR_RUNTIME_H
#define WR_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"
#include "runtime/files.h"

/* Host uids/gids: sandbox slot N maps 0..65535 inside to
 * WR_ID_BASE + N * WR_ID_COUNT ... on the host. */
#define WR_ID_BASE 0x10000000u
#define WR_ID_COUNT 65536u
#define WR_MAX_SLOT ((0xfffffffeu - WR_ID_BASE) / WR_ID_COUNT - 1)

/* The smallest disk limit: below this ext4's own metadata and journal
 * leave too little room to be useful. */
#define WR_DISK_MIN (16ull << 20)

enum wr_cgroup_mode {
  WR_CGROUP_AUTO = 0,
  WR_CGROUP_V1,
  WR_CGROUP_V2,
};

struct wr_runtime_config {
  const char *root;          /* state root, e.g. /var/lib/warren */
  const char *init_path;     /* the warren-init binary */
  const char *cgroup_parent; /* cgroup below which sandboxes live: "warren" */
  enum wr_cgroup_mode cgroup_mode;
  const char *cgroup_v2_mount; /* where cgroup2 is mounted (auto if NULL) */
  unsigned netns_pool;         /* network namespaces kept ready (0: none) */
  bool cgroup_favor_dynmods;   /* v1: moves without an RCU wait, host-wide
                                  (see cgroup.c) */
};

struct wr_runtime;

int wr_rt_new(const struct wr_runtime_config *cfg, struct wr_runtime **out,
              wr_error_t *err);
void wr_rt_free(struct wr_runtime *rt);
/* "v1" or "v2". */
const char *wr_rt_cgroup_version(const struct wr_runtime *rt);
/* Which limits this host can enforce: "memory", "cpus", "pids", "disk". */
bool wr_rt_can_limit(const struct wr_runtime *rt, const char *what);
/* Whether a disk limit of `bytes` can be given to a new sandbox: the host
 * can limit disk, the size is at least WR_DISK_MIN and at most the free
 * space of the state root's filesystem. Fails with EINVAL and a message
 * for the client. */
int wr_rt_check_disk(const struct wr_runtime *rt, uint64_t bytes,
                     wr_error_t *err);

/* What a workspace's directory was when the sandbox was created, so that
 * a later mount (after a reboot, or whenever the mount is missing) can
 * tell it is still that directory (wr_workspace_open). */
struct wr_ws_identity {
  bool known;        /* false: a record made before identities were kept */
  uint64_t dev, ino; /* of the directory */
  uint64_t fsid;     /* its filesystem's statfs f_fsid; 0 when it has none */
};

/* What a sandbox is made of. Strings are borrowed. */
struct wr_rt_spec {
  const char *id;
  const char *hostname;
  const char *image_dir; /* read-only lower layer */
  /* Snapshot layers stacked over the image, newest first (see layers.h);
   * none when nlayers is 0. A sandbox made from a snapshot also gets a
   * new /etc/machine-id when it is prepared. */
  const char *const *layers;
  size_t nlayers;
  uint32_t slot;         /* uid/gid range */
  uint64_t memory_bytes; /* 0: no limit */
  double cpus;           /* 0: no limit */
  uint64_t pids;         /* 0: no limit */
  uint64_t nofile;       /* RLIMIT_NOFILE; 0: default 65536 */
  uint64_t disk_bytes;   /* own ext4 image of this size; 0: no limit */
  const char *ca_pem;    /* warren's CA, trusted inside; NULL: none */
  const char *extra_cas; /* more CAs trusted inside (PEM, the host's and
                            --sandbox-ca's); NULL or "": none */
  /* A workspace: the host directory ws_path, owned by ws_uid:ws_gid, is
   * mounted id-mapped so that those ids are root inside (and what root
   * makes there is theirs on the host): read-write at WR_WORKSPACE, or
   * with ws_clone read-only at WR_ORIGIN (WR_WORKSPACE is then the
   * sandbox's own directory, for a clone). NULL: none. */
  const char *ws_path;
  bool ws_clone;
  uint32_t ws_uid, ws_gid;
  struct wr_ws_identity ws_id;
};

#define WR_WORKSPACE "/workspace"
#define WR_ORIGIN "/origin"
/* Where a direct-mode workspace's state at create time is recorded (see
 * wr_manifest_save), in the sandbox's directory. */
#define WR_WS_MANIFEST "workspace.manifest"

/* A running sandbox as the driver knows it. */
struct wr_rt_instance {
  pid_t pid;           /* host pid of warren-init */
  int pidfd;           /* pidfd of warren-init (owned) */
  int ctl;             /* connected control socket (owned) */
  uint64_t start_time; /* /proc/PID/stat start time, for pid reuse checks */
  /* The merged root as wr_rt_open_root opens it (owned; -1 from
   * wr_rt_reattach): create and start open it anyway, and a daemon that
   * keeps it spares the first request a trip to a worker thread. */
  int rootfd;
};

static inline uint32_t wr_rt_id_base(uint32_t slot) {
  return WR_ID_BASE + slot * WR_ID_COUNT;
}

/* Create the sandbox's directories (and its disk image, formatted, with a
 * disk limit) and mount its root (idempotent: a root that is already
 * mounted is kept). Writes /etc/hostname and /etc/hosts in the upper
 * layer, and warren's CA and the extra CAs into the trust store (again
 * at each start). */
int wr_rt_prepare(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                  wr_error_t *err);
/* Start warren-init in fresh namespaces and cgroups and wait until it
 * answers on its control socket. */
int wr_rt_start(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                struct wr_rt_instance *inst, wr_error_t *err);
/* After warren-init has exited: kill what is left in the cgroups and
 * remove them, remove the control socket. Idempotent. */
int wr_rt_cleanup(struct wr_runtime *rt, const char *id, wr_error_t *err);
/* wr_rt_prepare then wr_rt_start, sharing their setup. */
int wr_rt_create(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                 struct wr_rt_instance *inst, wr_error_t *err);
/* Kill everything in the sandbox now (works when frozen). */
int wr_rt_kill(struct wr_runtime *rt, const char *id, int pidfd,
               wr_error_t *err);
/* Freeze or thaw every process (cgroup freezer). */
int wr_rt_freeze(struct wr_runtime *rt, const char *id, bool frozen,
                 wr_error_t *err);
/* Unmount the root (and the disk image, which frees its loop device) and
 * delete the sandbox's directory. The sandbox must not be running.
 * Idempotent. */
int wr_rt_remove(struct wr_runtime *rt, const char *id, wr_error_t *err);
/* Find a sandbox that was started by an earlier daemon: connect to its
 * control socket and identify warren-init. Returns -1 with ECONNREFUSED or
 * ENOENT when it is not running. */
int wr_rt_reattach(struct wr_runtime *rt, const char *id,
                   struct wr_rt_instance *inst, wr_error_t *err);
/* An O_PATH directory fd of the sandbox's merged root (files API); mounts
 * the root (and the disk image before it) first if needed, e.g. after a
 * host reboot. */
int wr_rt_open_root(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                    wr_error_t *err);
/* warrend's listeners inside a sandbox: made before its first process and
 * held by warren-init at fds WR_NET_FD_BASE + index (see netns.c). */
#define WR_NET_PROXY_PORT 3128
#define WR_NET_DNS_PORT 53
#define WR_NET_FD_BASE 6
enum {
  WR_NET_PROXY4 = 0, /* TCP 127.0.0.1:3128 */
  WR_NET_PROXY6,     /* TCP [::1]:3128; -1 when the host has no IPv6 */
  WR_NET_DNS4,       /* UDP 127.0.0.1:53 */
  WR_NET_DNS4_TCP,   /* TCP 127.0.0.1:53; -1 in a sandbox an older warrend
                        started */
  WR_NET_NFDS
};
/* Copies of those listeners (pidfd_getfd on init), caller owns them. */
int wr_rt_net_fds(const struct wr_rt_instance *inst, int fds[WR_NET_NFDS],
                  wr_error_t *err);
/* An fd of the running sandbox's network namespace (for warrend's proxy
 * and port forwards), checked against pid reuse with the pidfd. */
int wr_rt_open_netns(const struct wr_rt_instance *inst, wr_error_t *err);
/* The same for any of init's namespaces ("net", "uts", ...). */
int wr_rt_open_ns(const struct wr_rt_instance *inst, const char *ns,
                  wr_error_t *err);
/* Memory use of the sandbox in bytes (cgroup), 0 when unknown. */
uint64_t wr_rt_memory_usage(struct wr_runtime *rt, const char *id);
/* CPU time the sandbox's processes used in ns (cgroup), UINT64_MAX when
 * unknown. */
uint64_t wr_rt_cpu_usage(struct wr_runtime *rt, const char *id);
/* Whether any process is left in the sandbox's cgroup. */
bool wr_rt_populated(struct wr_runtime *rt, const char *id);
/* The last bytes of warren-init's log, for error messages. */
char *wr_rt_init_log_tail(struct wr_runtime *rt, const char *id, size_t max);
/* The sandbox's directory on the host (caller frees). */
char *wr_rt_sandbox_dir(const struct wr_runtime *rt, const char *id);
/* Whether the sandbox's directory is in its place: not when a removal
 * took it away (wr_rt_remove moves it out before deleting it). */
bool wr_rt_sandbox_present(const struct wr_runtime *rt, const char *id);

/* ---- a running sandbox made another (renew.c; pool claims) ------------ */

/* Set the cgroup limits of a running (or paused) sandbox: memory_bytes,
 * cpus and pids of spec (0 leaves a limit as it is). */
int wr_rt_set_limits(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                     wr_error_t *err);
/* Give a running (or paused) sandbox the identity of a new machine:
 * spec->hostname in its UTS namespace (init's, checked with its pidfd)
 * and in /etc/hostname and /etc/hosts, and a new /etc/machine-id, through
 * rootfd (its merged root). */
int wr_rt_renew_identity(const struct wr_rt_spec *spec,
                         const struct wr_rt_instance *inst, int rootfd,
                         wr_error_t *err);

/* Read a process's start time from /proc/PID/stat (0 if gone). */
uint64_t wr_rt_proc_start_time(pid_t pid);

/* ---- snapshots (snapshot.c) ----------------------------------------- */

/* A capture of a sandbox's own layer into a snapshot's layer directory
 * (see layers.h and docs/lifecycle.md). */
struct wr_snap_capture {
  bool live;        /* in: the sandbox runs: freeze it for the last pass */
  double frozen_ms; /* how long it was frozen (0 when not live) */
  double total_ms;  /* the whole capture */
  uint64_t files, dirs, whiteouts, bytes; /* what the layer holds */
  uint64_t copied_frozen;                 /* entries the frozen pass wrote */
};
/* Copy the sandbox's upper layer to layer_dir (made; it must not exist),
 * mounting its disk image first if it is not. Live: a first pass while
 * it runs, then freeze, a pass for what changed, thaw (also on failure). */
int wr_rt_snapshot_capture(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                           const char *layer_dir, struct wr_snap_capture *c,
                           wr_error_t *err);

/* ---- workspaces (workspace.c) ----------------------------------------- */

/*
 * A workspace's host path is canonical (resolved when the sandbox was
 * created), but the directories on it may belong to another sandbox's
 * workspace (nested projects), which can replace one by a symlink or by
 * another directory. So the workspace is only ever reached through
 * wr_workspace_open: the path opened with no symlink in any component,
 * and the directory found there compared with the one recorded. Blocks.
 */
/* Describe the directory fd (any kind of fd of it) as it is now. */
int wr_workspace_identify(int fd, struct wr_ws_identity *out, wr_error_t *err);
/* Whether a directory whose stat is st, on a filesystem with fsid, is the
 * workspace of spec: the same owner, and (when the record has one) the
 * same inode on the same device, or on a filesystem with the same id
 * (some filesystems get another device number after a reboot). */
bool wr_workspace_same(const struct wr_rt_spec *spec, const struct stat *st,
                       uint64_t fsid);
/* Open spec's workspace as recorded: an O_PATH fd with path_only, else
 * O_RDONLY | O_DIRECTORY. A symlink on the way, or another directory than
 * the recorded one, is ESTALE with a message that says what changed. */
int wr_workspace_open(const struct wr_rt_spec *spec, bool path_only,
                      wr_error_t *err);

/* ---- workspace manifest (manifest.c) ---------------------------------- */

/* A direct-mode workspace's baseline: the state of every entry under it,
 * recorded before the sandbox's first process, so that `warren diff` can
 * show every change since, including those git does not show. The walk
 * never follows symlinks nor crosses into other filesystems and is
 * bounded; the tree may be changed by the sandbox while it runs. */
/* Record every entry under the directory dirfd (an open directory, from
 * wr_workspace_open; not following symlinks, not crossing into other
 * filesystems) in FILE (written atomically, 0600). */
int wr_manifest_save(int dirfd, const char *file, wr_error_t *err);
/* Compare dirfd's tree now with the manifest FILE. Returns {"changes":[{"path":
 * "rel/path","change":"added"|"deleted"|"modified"|"metadata","type":
 * "file"|"dir"|"symlink"|"other"}, ...], "truncated": bool} sorted by
 * path, at most MAX changes; NULL with err on failure (ENOENT when there
 * is no manifest). */
json_t *wr_manifest_diff(int dirfd, const char *file, size_t max,
                         wr_error_t *err);

#endif
