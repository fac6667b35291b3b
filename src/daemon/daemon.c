/*
 * warrend's setup, GET /v1/info, recovery after a restart, and shutdown.
 */
#include "daemon/events.h"
#include "daemon/initconn.h"
#include "daemon/limiter.h"
#include "daemon/network.h"
#include "daemon/pool.h"
#include "daemon/lease.h"
#include "daemon/projects_api.h"
#include "daemon/procs.h"
#include "daemon/roots.h"
#include "daemon/sandbox.h"
#include "daemon/snapshots.h"
#include "daemon/templates.h"

#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/utsname.h>

/* ---- info ---------------------------------------------------------------- */

void wr_api_info(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct utsname u;
  json_int_t total = 0, running = 0;

  uname(&u);
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next) {
    total++;
    running += sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED;
  }
  wr_http_reply_json(
      req, 200,
      json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:I,s:I,s:{s:b,s:b,s:b,s:b},s:o,s:o,"
                "s:o}",
                "version", WR_VERSION, "api_version", 1, "driver", "ns",
                "cgroup", wr_rt_cgroup_version(d->rt), "root", d->cfg.root,
                "kernel", u.release, "sandboxes", total, "running", running,
                "limits", "memory", wr_rt_can_limit(d->rt, "memory"), "cpus",
                wr_rt_can_limit(d->rt, "cpus"), "pids",
                wr_rt_can_limit(d->rt, "pids"), "disk",
                wr_rt_can_limit(d->rt, "disk"), "sandbox_cas",
                wr_network_trust_json(d), "resolver",
                wr_network_resolver_json(d), "limiter", wr_limiter_json(d)));
}

/* ---- lifecycle ----------------------------------------------------------- */

/* The root's lock and the socket come first: a daemon that may not run
 * here changes nothing. */
int wr_daemon_init(struct wr_daemon *d, uv_loop_t *loop,
                   const struct wr_daemon_config *cfg, wr_error_t *err) {
  struct wr_runtime_config rc = {
      .root = cfg->root,
      .init_path = cfg->init_path,
      .cgroup_mode = cfg->cgroup_mode,
      .netns_pool = cfg->netns_pool,
      .cgroup_favor_dynmods = cfg->cgroup_favor_dynmods,
  };
  _cleanup_free_ char *db = xasprintf("%s/warren.db", cfg->root);
  const struct wr_http_route *routes;
  size_t nroutes;

  memset(d, 0, sizeof(*d));
  d->loop = loop;
  d->cfg = *cfg;
  d->lock_fd = -1;
  d->init_buf = xmalloc(WR_INIT_MAX_MSG);
  d->images_dir = xasprintf("%s/images", cfg->root);
  if (wr_mkdir_p(cfg->root, 0700, err) < 0 || wr_daemon_lock_root(d, err) < 0 ||
      wr_daemon_check_socket(d, err) < 0 ||
      wr_mkdir_p(d->images_dir, 0755, err) < 0)
    return -1;
  if (chmod(cfg->root, 0711) < 0)
    return wr_error_set(err, errno, "chmod `%s`", cfg->root);
  if (wr_store_open(db, &d->store, err) < 0 ||
      wr_store_netlog_set_limits(d->store, &cfg->policy_log, err) < 0 ||
      wr_daemon_register_root(d, err) < 0 ||
      wr_events_init(d, cfg->events_journal, err) < 0) /* events.c */
    return -1;
  rc.cgroup_parent = d->cgroup_parent;
  if (wr_rt_new(&rc, &d->rt, err) < 0 || wr_network_init(d, err) < 0 ||
      wr_snapshots_init(d, err) < 0 /* snapshots */ ||
      wr_idle_start(d, err) < 0 || wr_limiter_init(d, err) < 0 ||
      wr_pool_init(d, err) < 0 || wr_projects_init(d, err) < 0 ||
      wr_leases_init(d, err) < 0)
    return -1;
  routes = wr_daemon_routes(&nroutes);
  return wr_http_server_new(loop, routes, nroutes, d, NULL, &d->http, err);
}

/* The API key for TCP clients: ROOT/api.key, made on first use. */
static int load_api_key(struct wr_daemon *d, wr_error_t *err) {
  _cleanup_free_ char *path = xasprintf("%s/api.key", d->cfg.root);
  unsigned char raw[24];
  char hex[sizeof(raw) * 2 + 2];
  size_t len = 0;

  if (wr_read_file(path, 4096, &d->api_key, &len, NULL) == 0) {
    while (len > 0 &&
           (d->api_key[len - 1] == '\n' || d->api_key[len - 1] == '\r'))
      d->api_key[--len] = '\0';
    if (len >= 16)
      return 0;
    free(d->api_key);
    d->api_key = NULL;
    return wr_error_setx(err, EINVAL, "`%s` holds no usable key", path);
  }
  wr_random_bytes(raw, sizeof(raw));
  for (size_t i = 0; i < sizeof(raw); i++)
    snprintf(hex + 2 * i, 3, "%02x", raw[i]);
  strcat(hex, "\n");
  if (wr_write_file(path, hex, strlen(hex), 0600, err) < 0)
    return -1;
  hex[strlen(hex) - 1] = '\0';
  d->api_key = xstrdup(hex);
  wr_info("created an API key for TCP clients in %s", path);
  return 0;
}

int wr_daemon_listen(struct wr_daemon *d, wr_error_t *err) {
  _cleanup_free_ char *copy = xstrdup(d->cfg.socket_path);

  bool group = d->cfg.socket_gid != (gid_t)-1;

  if (wr_mkdir_p(dirname(copy), 0755, err) < 0 ||
      wr_http_listen_unix(d->http, d->cfg.socket_path, group ? 0660 : 0600,
                          err) < 0)
    return -1;
  if (group && chown(d->cfg.socket_path, 0, d->cfg.socket_gid) < 0)
    return wr_error_set(err, errno, "give `%s` to group %u", d->cfg.socket_path,
                        (unsigned)d->cfg.socket_gid);
  wr_info("listening on unix:%s%s", d->cfg.socket_path,
          group ? " (root and its group)" : "");
  if (d->cfg.listen_addr == NULL)
    return 0;
  if (load_api_key(d, err) < 0 ||
      wr_http_listen_tcp(d->http, d->cfg.listen_addr, d->api_key, err) < 0)
    return -1;
  wr_info("listening on tcp://%s (API key required)", d->cfg.listen_addr);
  return 0;
}

/* Reattach to a sandbox's init. A paused sandbox's init accepts no
 * connection while frozen, and every daemon start leaves one queued: once
 * its backlog is full, it is thawed just long enough to take them. */
static int reattach(struct wr_daemon *d, struct wr_sandbox *sb,
                    struct wr_rt_instance *inst, wr_error_t *err) {
  wr_error_t e;
  int r = wr_rt_reattach(d->rt, sb->id, inst, err);

  if (r == 0 || err->code != EAGAIN || sb->state != WR_SB_PAUSED)
    return r;
  wr_info("sandbox %s: thawed for a moment to reattach (its init's "
          "backlog is full)",
          sb->name);
  if (wr_rt_freeze(d->rt, sb->id, false, err) < 0)
    return -1;
  for (int i = 0; i < 100 && r < 0 && err->code == EAGAIN; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    r = wr_rt_reattach(d->rt, sb->id, inst, err);
  }
  if (wr_rt_freeze(d->rt, sb->id, true, &e) < 0)
    wr_warn("sandbox %s: pause it again: %s", sb->name, e.msg);
  return r;
}

/* Bring one sandbox from the database back under management. */
/* A sandbox whose removal a dead daemon began: its directory is gone
 * from its place (wr_rt_remove), so it is finished here, leftovers and
 * record. */
static bool finish_removal(struct wr_daemon *d,
                           const struct wr_sandbox_rec *rec) {
  if (strcmp(rec->state, "creating") == 0 ||
      wr_rt_sandbox_present(d->rt, rec->id))
    return false;
  wr_info("sandbox %s: its removal was interrupted by a daemon restart; "
          "finished",
          rec->name);
  wr_rt_remove(d->rt, rec->id, NULL);
  wr_store_sandbox_delete(d->store, rec->id, NULL);
  return true;
}

static void recover_one(struct wr_daemon *d, struct wr_sandbox *sb) {
  struct wr_rt_instance inst;
  wr_error_t err;

  if (sb->state == WR_SB_CREATING) {
    /* Interrupted mid-create: nothing the user was promised exists. */
    wr_rt_remove(d->rt, sb->id, NULL);
    wr_sandbox_set_state(sb, WR_SB_ERROR, "interrupted by a daemon restart");
    return;
  }
  if (sb->state != WR_SB_RUNNING && sb->state != WR_SB_PAUSED)
    return;
  if (reattach(d, sb, &inst, &err) < 0) {
    wr_info("sandbox %s: no longer running (%s)", sb->name, err.msg);
    wr_rt_cleanup(d->rt, sb->id, NULL);
    wr_sandbox_set_state(sb, WR_SB_STOPPED,
                         "its processes ended while warrend was down");
    wr_store_sandbox_set_init(d->store, sb->id, 0, 0, NULL);
    return;
  }
  if (wr_sandbox_attach(sb, &inst, &err) < 0) {
    wr_warn("sandbox %s: %s", sb->name, err.msg);
    return;
  }
  /* Without its proxy a sandbox reaches nothing: it keeps running, cut
   * off, and the log says why. */
  if (wr_sandbox_net_up(sb, &inst, &err) < 0)
    wr_warn("sandbox %s: %s", sb->name, err.msg);
  wr_procs_recover(sb);
  wr_info("sandbox %s: running, managed again (init pid %d)", sb->name,
          (int)inst.pid);
}

int wr_daemon_recover(struct wr_daemon *d, wr_error_t *err) {
  struct wr_sandbox_rec *recs = NULL;
  size_t n = 0;

  wr_images_recover(d);
  if (wr_store_sandbox_list(d->store, &recs, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    wr_error_t e;
    struct wr_sandbox *sb;

    if (finish_removal(d, &recs[i]))
      continue;
    sb = wr_sandbox_from_rec(d, &recs[i], &e);
    if (sb == NULL) {
      wr_warn("sandbox %s: unreadable record: %s", recs[i].id, e.msg);
      continue;
    }
    recover_one(d, sb);
  }
  wr_sandbox_recs_free(recs, n);
  wr_snapshots_recover(d); /* snapshots: after the sandboxes that use them */
  wr_pool_recover(d);      /* pool.c: after the sandboxes, which it sorts */
  wr_templates_recover(d); /* templates: interrupted builds */
  return 0;
}

/* What the processes printed is written out before they are let go; the
 * next daemon reads it back. */
static void detach_sandbox(struct wr_sandbox *sb) {
  wr_outlog_flush(sb);
  wr_procs_free_all(sb);
  if (sb->conn != NULL) {
    wr_initconn_close(sb->conn);
    sb->conn = NULL;
  }
  if (sb->pidfd_polling) {
    sb->pidfd_polling = false;
    uv_poll_stop(&sb->pidfd_poll);
    uv_close((uv_handle_t *)&sb->pidfd_poll, NULL);
  }
  if (sb->stop_timer_init) {
    sb->stop_timer_init = false;
    uv_close((uv_handle_t *)&sb->stop_timer, NULL);
  }
}

void wr_daemon_shutdown(struct wr_daemon *d) {
  if (d->stopping)
    return;
  d->stopping = true;
  wr_info("shutting down; sandboxes keep running");
  wr_images_shutdown(d);
  wr_network_shutdown(d);
  wr_snapshots_shutdown(d); /* snapshots */
  wr_idle_stop(d);
  wr_limiter_shutdown(d); /* requests in line end before the server */
  wr_pool_shutdown(d);    /* pool.c */
  wr_projects_shutdown(d);
  wr_leases_shutdown(d);
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    detach_sandbox(sb);
  wr_events_shutdown(d); /* events.c: streams end before the server */
  if (d->http != NULL) {
    wr_http_server_close(d->http, NULL, NULL); /* removes its own socket */
    d->http = NULL;
  }
  uv_close((uv_handle_t *)&d->sigterm, NULL);
  uv_close((uv_handle_t *)&d->sigint, NULL);
  wr_sandbox_reap(d);
  if (d->reaper_init)
    uv_close((uv_handle_t *)&d->reaper, NULL);
}

void wr_daemon_fini(struct wr_daemon *d) {
  wr_events_free(d); /* events.c */
  wr_pool_free(d);   /* pool.c */
  wr_projects_free(d);
  wr_leases_free(d);
  wr_network_free(d);
  wr_rt_free(d->rt);
  wr_store_close(d->store);
  wr_store_close(d->roots);
  free(d->root_id);
  free(d->cgroup_parent);
  if (d->lock_fd >= 0)
    close(d->lock_fd);
  free(d->images_dir);
  free(d->api_key);
  free(d->init_buf);
}
