/*
 * Internal to the runtime: one interface over cgroups v1 and v2.
 *
 * cgroup.c detects the host's layout and dispatches to cgroup_v1.c or
 * cgroup_v2.c. Each sandbox gets PARENT/ID in every hierarchy it uses.
 */
#ifndef WR_RUNTIME_CGROUP_H
#define WR_RUNTIME_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"

#define WR_CGROUP_MAX_HIER 6

struct wr_cgroup_limits {
  uint64_t memory_bytes; /* 0: none */
  double cpus;           /* 0: none */
  uint64_t pids;         /* 0: none */
};

struct wr_cgroup;

struct wr_cgroup_ops {
  /* Create the parent group(s) and note which controllers work. */
  int (*setup)(struct wr_cgroup *cg, wr_error_t *err);
  int (*create)(const struct wr_cgroup *cg, const char *id,
                const struct wr_cgroup_limits *lim, wr_error_t *err);
  /* Open the cgroup.procs files a new process writes "0" into to join. */
  int (*open_procs)(const struct wr_cgroup *cg, const char *id, int *fds,
                    size_t *n, wr_error_t *err);
  /* v2: an O_DIRECTORY fd of the sandbox's group for CLONE_INTO_CGROUP;
   * v1: -1 (processes must be moved in). */
  int (*open_dir)(const struct wr_cgroup *cg, const char *id);
  int (*freeze)(const struct wr_cgroup *cg, const char *id, bool frozen,
                wr_error_t *err);
  /* Change the limits of an existing group (0 leaves one as it is). */
  int (*set_limits)(const struct wr_cgroup *cg, const char *id,
                    const struct wr_cgroup_limits *lim, wr_error_t *err);
  int (*kill)(const struct wr_cgroup *cg, const char *id, wr_error_t *err);
  int (*remove)(const struct wr_cgroup *cg, const char *id, wr_error_t *err);
  bool (*populated)(const struct wr_cgroup *cg, const char *id);
  uint64_t (*memory)(const struct wr_cgroup *cg, const char *id);
  /* CPU time its processes used, in ns; WR_CGROUP_CPU_UNKNOWN when the
   * host does not say. */
  uint64_t (*cpu_ns)(const struct wr_cgroup *cg, const char *id);
};

#define WR_CGROUP_CPU_UNKNOWN UINT64_MAX

/* Controllers warren uses. On v1, a sandbox is also in the cpuset and
 * cpuacct hierarchies, with no limits there: LXCFS (view.c) looks for the
 * reader's CPU quota and usage at the path of its cpuset group, as LXC
 * containers have them, so all of them must be PARENT/ID. */
enum wr_cgroup_ctrl {
  WR_CG_MEMORY = 0,
  WR_CG_PIDS,
  WR_CG_CPU,
  WR_CG_FREEZER,
  WR_CG_CPUSET,
  WR_CG_CPUACCT,
  WR_CG_NCTRL,
};

struct wr_cgroup {
  int version; /* 1 or 2 */
  const struct wr_cgroup_ops *ops;
  char *parent; /* "warren" */
  /* v2: the mount point. v1: one mount point per controller (NULL when the
   * controller is not mounted). */
  char *v2_mount;
  char *v1_mount[WR_CG_NCTRL];
  bool available[WR_CG_NCTRL];
  /* v1: what all sandboxes together may hold in socket buffers (the
   * parent's memory.kmem.tcp.limit_in_bytes; see wr_cgroup_tcp_limit), 0
   * when this kernel cannot limit them. */
  uint64_t tcp_budget;
};

extern const struct wr_cgroup_ops wr_cgroup_v1_ops;
extern const struct wr_cgroup_ops wr_cgroup_v2_ops;

/* Detect (or force) the layout and make sure the parent cgroups exist. */
int wr_cgroup_init(struct wr_cgroup *cg, int force_version, const char *parent,
                   const char *v2_mount, wr_error_t *err);
void wr_cgroup_fini(struct wr_cgroup *cg);
/* v1: make moves into cgroups skip their RCU wait, host-wide, by mounting
 * a named hierarchy with favordynmods at DIR (see cgroup.c); v2: nothing
 * to do. */
int wr_cgroup_favor_dynmods(const struct wr_cgroup *cg, const char *dir,
                            wr_error_t *err);

/* v1: a thread that starts the RCU grace period a sandbox's first move
 * into its cgroups waits for, when a start begins (cgprime.c). *out is
 * NULL on v2, where no move is needed, and when no hierarchy fits. */
struct wr_cgroup_primer;
int wr_cgroup_primer_new(const struct wr_cgroup *cg,
                         struct wr_cgroup_primer **out, wr_error_t *err);
/* A start begins: make a move soon, unless one is pending. NULL: nothing. */
void wr_cgroup_prime(struct wr_cgroup_primer *p);
/* How many moves it has made. */
unsigned wr_cgroup_primer_moves(struct wr_cgroup_primer *p);
void wr_cgroup_primer_free(struct wr_cgroup_primer *p);

/*
 * Socket buffers on cgroup v1. The v1 memory controller charges a
 * sandbox's TCP buffers only to a group whose
 * memory.kmem.tcp.limit_in_bytes was written, and then to that counter,
 * not to memory.limit_in_bytes; without it they are charged to nobody,
 * up to the host-wide tcp_mem, where every TCP socket on the host starts
 * failing. (v2 charges them to memory.max with everything else.)
 *
 * The budget of all sandboxes together is half the host's pressure
 * threshold (tcp_mem[1], in pages, as /proc/sys/net/ipv4/tcp_mem says),
 * so that warren alone never pushes the host's TCP into pressure: 0 when
 * the text cannot be read.
 */
uint64_t wr_cgroup_tcp_budget(const char *tcp_mem, uint64_t page_size);
/* A sandbox's own limit: its memory limit (no more in buffers than it was
 * given memory), or WR_CGROUP_TCP_UNLIMITED without one; never more than
 * the budget. */
#define WR_CGROUP_TCP_UNLIMITED (256ull << 20)
uint64_t wr_cgroup_tcp_limit(uint64_t memory_bytes, uint64_t budget);

/* Helpers shared by the two implementations. */
int wr_cgroup_write(const char *dir, const char *file, const char *value,
                    wr_error_t *err);
int wr_cgroup_read(const char *dir, const char *file, char *buf, size_t size);
/* rmdir, retrying briefly while the kernel still counts dying tasks. */
int wr_cgroup_rmdir(const char *dir, wr_error_t *err);

#endif
