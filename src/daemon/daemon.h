/*
 * daemon: warrend's sandbox manager, its API handlers and its lifecycle.
 *
 * One libuv loop runs everything in struct wr_daemon; blocking work
 * (mounts, clone, image builds, tar streams) runs on worker threads or in
 * child processes and reports back to the loop. Only the loop thread
 * touches struct wr_daemon and the sandboxes in it; worker jobs get copies
 * of what they need.
 */
#ifndef WR_DAEMON_H
#define WR_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "api/api.h"
#include "common/common.h"
#include "runtime/runtime.h"
#include "store/store.h"

struct wr_daemon_config {
  const char *root;          /* state root; default /var/lib/warren */
  const char *socket_path;   /* default /run/warren/warrend.sock */
  gid_t socket_gid;          /* also this group's (0660), unless (gid_t)-1 */
  const char *listen_addr;   /* optional TCP "HOST:PORT" */
  const char *init_path;     /* warren-init; default next to warrend */
  const char *cgroup_parent; /* NULL: the root's own (roots.c) */
  enum wr_cgroup_mode cgroup_mode;
  const char *default_image; /* "base" */
  unsigned idle_pause_s;     /* default idle pause of sandboxes; 0 never */
  uint64_t default_disk;     /* disk limit of sandboxes created without
                                one, in bytes; 0: none */
  const char *data_dir;      /* warren's data files (policy presets, ...);
                                default found next to warrend */
  const char *upstream_ca;   /* extra CA bundle the proxy trusts for
                                upstreams, or NULL */
  const char *hosts_file;    /* static name entries for the proxy's
                                resolver, or NULL */
  const char *host_ca_dir;   /* the CAs the host's administrator added,
                                trusted inside sandboxes; NULL: none */
  char *const *sandbox_cas;  /* more CA files trusted inside, NULL-ended;
                                may be NULL */
  const char *npm_registry;  /* the npm registry's URL, or NULL to ask
                                the host's npm (`npm config get registry`) */
  char **resolvers;          /* DNS servers "ADDR[:PORT]" (NULL-ended), or
                                NULL for /etc/resolv.conf's */
  unsigned netns_pool;       /* network namespaces kept ready */
  bool cgroup_favor_dynmods; /* v1: cgroup moves without an RCU wait */
  struct wr_netlog_limits policy_log; /* the connection log's retention */
  const char *roots_db;               /* the host's registry of state roots */
  size_t events_journal; /* lifecycle events kept (events.c); 0: default */
  /* The limiter (limiter.c): most sandboxes running, running or paused
   * (0: no limit), and the longest a request waits for a slot. */
  unsigned max_running, max_resident, queue_timeout_s;
  /* The tier planner (projects_api.c): how often it runs (0: never on
   * its own), the live places it keeps free of how many (0: the
   * limiter's max_resident), the days a cool project keeps its snapshot,
   * and the memory it keeps free (bytes; 0: no memory rule). */
  unsigned plan_interval_s, plan_free, plan_slots, snapshot_days;
  uint64_t plan_memory_reserve;
};

struct wr_sandbox;
struct wr_image_build;
struct wr_network;
struct wr_events;
struct wr_snapshots;
struct wr_pools;
struct wr_limiter;
struct wr_projects;
struct wr_leases;

struct wr_daemon {
  uv_loop_t *loop;
  struct wr_daemon_config cfg;
  wr_store_t *store;
  struct wr_runtime *rt;
  wr_http_server_t *http;
  char *images_dir;               /* ROOT/images */
  char *api_key;                  /* for the TCP listener, or NULL */
  struct wr_sandbox *sandboxes;   /* list of sandboxes known to this daemon */
  struct wr_image_build *builds;  /* image builds in progress */
  struct wr_network *network;     /* egress, secrets, ports (network.c) */
  struct wr_events *events;       /* lifecycle events (events.c) */
  struct wr_snapshots *snapshots; /* disk snapshots (snapshots.c) */
  struct wr_idle *idle;           /* the idle pause's tick (idle.c) */
  struct wr_pools *pools;         /* warm pools (pool.c) */
  struct wr_limiter *limiter;     /* slots and their queue (limiter.c) */
  struct wr_projects *projects;   /* projects and the planner */
  struct wr_leases *leases;       /* project leases (lease.c) */
  /* Template builds in flight (templates.c). */
  struct wr_tpl_build *tpl_builds;
  char *init_buf; /* receive buffer for init messages (loop thread) */
  /* This root among the host's (roots.c). */
  int lock_fd;         /* holds the flock on ROOT/warrend.lock */
  char *root_id;       /* ROOT/root-id */
  char *cgroup_parent; /* the one chosen */
  wr_store_t *roots;   /* the host's registry */
  uv_signal_t sigterm, sigint;
  bool stopping;
  /* Sandboxes out of the table whose table reference goes on the next
   * turn of the loop (sandbox.c), and the timer that drops them. */
  struct wr_sandbox *graveyard;
  uv_timer_t reaper;
  bool reaper_init;
};

int wr_daemon_init(struct wr_daemon *d, uv_loop_t *loop,
                   const struct wr_daemon_config *cfg, wr_error_t *err);
/* Reconcile the database with what runs (after a restart). */
int wr_daemon_recover(struct wr_daemon *d, wr_error_t *err);
int wr_daemon_listen(struct wr_daemon *d, wr_error_t *err);
/* Stop serving; sandboxes keep running. */
void wr_daemon_shutdown(struct wr_daemon *d);
void wr_daemon_fini(struct wr_daemon *d);

/* The route table (routes.c; also used by the test that compares it
 * with docs/api.yaml). */
const struct wr_http_route *wr_daemon_routes(size_t *n);

/* ---- shared by the handler files ---------------------------------------- */

/* Images (images.c). */
void wr_api_image_list(wr_http_req_t *req, void *ctx);
void wr_api_image_get(wr_http_req_t *req, void *ctx);
void wr_api_image_build(wr_http_req_t *req, void *ctx);
void wr_api_image_delete(wr_http_req_t *req, void *ctx);
/* ROOT/images/NAME/rootfs when the image is ready, else NULL + err. */
char *wr_image_rootfs(struct wr_daemon *d, const char *name, wr_error_t *err);
/* Forget builds that died with an earlier daemon. */
void wr_images_recover(struct wr_daemon *d);
/* Cancel running builds (daemon shutdown). */
void wr_images_shutdown(struct wr_daemon *d);

#endif
