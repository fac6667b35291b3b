/*
 * warrend's setup, route table, recovery after a restart, and the small
 * helpers every handler shares.
 */
#include "daemon/daemon_internal.h"
#include "daemon/events.h"

#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/utsname.h>

static const struct wr_http_route routes[] = {
    {"GET", "/v1/info", wr_api_info, 0},
    {"GET", "/v1/images", wr_api_image_list, 0},
    {"POST", "/v1/images", wr_api_image_build, 0},
    {"GET", "/v1/images/{name}", wr_api_image_get, 0},
    {"DELETE", "/v1/images/{name}", wr_api_image_delete, 0},
    {"POST", "/v1/sandboxes", wr_api_sandbox_create, 0},
    {"GET", "/v1/sandboxes", wr_api_sandbox_list, 0},
    {"GET", "/v1/sandboxes/{id}", wr_api_sandbox_get, 0},
    {"DELETE", "/v1/sandboxes/{id}", wr_api_sandbox_delete, 0},
    {"POST", "/v1/sandboxes/{id}/start", wr_api_sandbox_start, 0},
    {"POST", "/v1/sandboxes/{id}/stop", wr_api_sandbox_stop, 0},
    {"POST", "/v1/sandboxes/{id}/pause", wr_api_sandbox_pause, 0},
    {"POST", "/v1/sandboxes/{id}/resume", wr_api_sandbox_resume, 0},
    {"POST", "/v1/sandboxes/{id}/exec", wr_api_exec, 0},
    {"GET", "/v1/sandboxes/{id}/processes", wr_api_proc_list, 0},
    {"GET", "/v1/sandboxes/{id}/processes/{tag}", wr_api_proc_get, 0},
    {"DELETE", "/v1/sandboxes/{id}/processes/{tag}", wr_api_proc_delete, 0},
    {"GET", "/v1/sandboxes/{id}/processes/{tag}/output", wr_api_proc_output, 0},
    {"POST", "/v1/sandboxes/{id}/processes/{tag}/signal", wr_api_proc_signal,
     0},
    {"GET", "/v1/sandboxes/{id}/files", wr_api_files_read, 0},
    {"PUT", "/v1/sandboxes/{id}/files", wr_api_files_write,
     WR_ROUTE_STREAM_BODY},
    {"DELETE", "/v1/sandboxes/{id}/files", wr_api_files_delete, 0},
    {"GET", "/v1/sandboxes/{id}/files/stat", wr_api_files_stat, 0},
    {"GET", "/v1/sandboxes/{id}/files/list", wr_api_files_list, 0},
    {"POST", "/v1/sandboxes/{id}/files/mkdir", wr_api_files_mkdir, 0},
    {"POST", "/v1/sandboxes/{id}/files/move", wr_api_files_move, 0},
    {"POST", "/v1/sandboxes/{id}/files/chmod", wr_api_files_chmod, 0},
    {"GET", "/v1/sandboxes/{id}/files/archive", wr_api_files_archive_get, 0},
    {"PUT", "/v1/sandboxes/{id}/files/archive", wr_api_files_archive_put,
     WR_ROUTE_STREAM_BODY},
    {"GET", "/v1/sandboxes/{id}/diff", wr_api_sandbox_diff, 0},
    {"GET", "/v1/sandboxes/{id}/ports", wr_api_ports_list, 0},
    {"POST", "/v1/sandboxes/{id}/ports", wr_api_ports_publish, 0},
    {"DELETE", "/v1/sandboxes/{id}/ports/{host_port}", wr_api_ports_unpublish,
     0},
    {"GET", "/v1/policy", wr_api_policy_get, 0},
    {"POST", "/v1/policy/init", wr_api_policy_init, 0},
    {"POST", "/v1/policy/rules", wr_api_policy_rule_add, 0},
    {"DELETE", "/v1/policy/rules/{rule}", wr_api_policy_rule_delete, 0},
    {"POST", "/v1/policy/check", wr_api_policy_check, 0},
    {"GET", "/v1/policy/log", wr_api_policy_log, 0},
    {"GET", "/v1/secrets", wr_api_secret_list, 0},
    {"PUT", "/v1/secrets/{service}", wr_api_secret_put, 0},
    {"DELETE", "/v1/secrets/{service}", wr_api_secret_delete, 0},
    {"GET", "/v1/kits", wr_api_kit_list, 0},
    {"GET", "/v1/kits/{name}", wr_api_kit_get, 0},
    {"GET", "/v1/events", wr_api_events, 0}, /* events.c */
    /* Snapshots (snapshots.c). */
    {"POST", "/v1/sandboxes/{id}/snapshots", wr_api_snapshot_create, 0},
    {"GET", "/v1/snapshots", wr_api_snapshot_list, 0},
    {"GET", "/v1/snapshots/{id}", wr_api_snapshot_get, 0},
    {"DELETE", "/v1/snapshots/{id}", wr_api_snapshot_delete, 0},
    {"GET", "/v1/snapshots/{id}/export", wr_api_snapshot_export, 0},
    {"POST", "/v1/snapshots/import", wr_api_snapshot_import,
     WR_ROUTE_STREAM_BODY},
};

const struct wr_http_route *wr_daemon_routes(size_t *n) {
  *n = WR_ARRAY_SIZE(routes);
  return routes;
}

/* ---- helpers ------------------------------------------------------------ */

void wr_reply_err(wr_http_req_t *req, const wr_error_t *err) {
  switch (err->code) {
  case ENOENT:
    wr_http_reply_error(req, 404, "not_found", "%s", err->msg);
    break;
  case EEXIST:
    wr_http_reply_error(req, 409, "conflict", "%s", err->msg);
    break;
  case EBUSY:
    wr_http_reply_error(req, 409, "busy", "%s", err->msg);
    break;
  case ESTALE: /* a workspace that is not the directory recorded */
    wr_http_reply_error(req, 409, "conflict", "%s", err->msg);
    break;
  case E2BIG:
    wr_http_reply_error(req, 400, "too_large", "%s", err->msg);
    break;
  case 0:
  case EINVAL:
  case ENAMETOOLONG:
  case ELOOP:
  case ENOTDIR:
  case EISDIR:
  case ENOTEMPTY:
  case EXDEV:
    wr_http_reply_error(req, 400, "bad_request", "%s", err->msg);
    break;
  case EACCES:
  case EPERM:
  case EROFS:
    wr_http_reply_error(req, 403, "forbidden", "%s", err->msg);
    break;
  case ENOSPC:
  case EDQUOT:
  case EFBIG:
    wr_http_reply_error(req, 507, "no_space", "%s", err->msg);
    break;
  default:
    wr_http_reply_error(req, 500, "internal", "%s", err->msg);
  }
}

json_t *wr_req_json(wr_http_req_t *req, const struct wr_json_field *fields,
                    size_t n) {
  size_t len = 0;
  const char *body = wr_http_body(req, &len);
  json_t *j = NULL;
  wr_error_t err;

  if (wr_json_parse_object(body, len, true, &j, &err) < 0 ||
      wr_json_unpack(j, fields, n, &err) < 0) {
    json_decref(j);
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return NULL;
  }
  return j;
}

int wr_req_bool(wr_http_req_t *req, const char *name, bool def, bool *out) {
  const char *v = wr_http_query(req, name);

  if (v == NULL) {
    *out = def;
    return 0;
  }
  if (*v == '\0' || strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
    *out = true;
    return 0;
  }
  if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
    *out = false;
    return 0;
  }
  wr_http_reply_error(req, 400, "bad_request",
                      "query `%s` must be true or false", name);
  return -1;
}

int wr_req_u64(wr_http_req_t *req, const char *name, uint64_t def, uint64_t min,
               uint64_t max, uint64_t *out) {
  const char *v = wr_http_query(req, name);
  wr_error_t err;

  *out = def;
  if (v == NULL || wr_parse_u64(v, min, max, out, &err) == 0)
    return 0;
  wr_http_reply_error(req, 400, "bad_request", "query `%s`: %s", name, err.msg);
  return -1;
}

static void job_work(uv_work_t *w) {
  struct wr_job *job = w->data;

  wr_error_clear(&job->err);
  job->fn(job);
}

static void job_after(uv_work_t *w, int status) {
  struct wr_job *job = w->data;

  if (status == UV_ECANCELED) {
    job->result = -1;
    wr_error_set(&job->err, ECANCELED, "cancelled");
  }
  job->done(job);
}

void wr_job_queue(struct wr_daemon *d, struct wr_job *job) {
  job->d = d;
  job->work.data = job;
  uv_queue_work(d->loop, &job->work, job_work, job_after);
}

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
      json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:I,s:I,s:{s:b,s:b,s:b,s:b},s:o,s:o}",
                "version", WR_VERSION, "api_version", 1, "driver", "ns",
                "cgroup", wr_rt_cgroup_version(d->rt), "root", d->cfg.root,
                "kernel", u.release, "sandboxes", total, "running", running,
                "limits", "memory", wr_rt_can_limit(d->rt, "memory"), "cpus",
                wr_rt_can_limit(d->rt, "cpus"), "pids",
                wr_rt_can_limit(d->rt, "pids"), "disk",
                wr_rt_can_limit(d->rt, "disk"), "sandbox_cas",
                wr_network_trust_json(d), "resolver",
                wr_network_resolver_json(d)));
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
      wr_snapshots_init(d, err) < 0 /* snapshots */)
    return -1;
  return wr_http_server_new(loop, routes, WR_ARRAY_SIZE(routes), d, NULL,
                            &d->http, err);
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

/* Bring one sandbox from the database back under management. */
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
  if (wr_rt_reattach(d->rt, sb->id, &inst, &err) < 0) {
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
    struct wr_sandbox *sb = wr_sandbox_from_rec(d, &recs[i], &e);
    if (sb == NULL) {
      wr_warn("sandbox %s: unreadable record: %s", recs[i].id, e.msg);
      continue;
    }
    recover_one(d, sb);
  }
  wr_sandbox_recs_free(recs, n);
  wr_snapshots_recover(d); /* snapshots: after the sandboxes that use them */
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
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    detach_sandbox(sb);
  wr_events_shutdown(d); /* events.c: streams end before the server */
  if (d->http != NULL) {
    wr_http_server_close(d->http, NULL, NULL); /* removes its own socket */
    d->http = NULL;
  }
  uv_close((uv_handle_t *)&d->sigterm, NULL);
  uv_close((uv_handle_t *)&d->sigint, NULL);
}

void wr_daemon_fini(struct wr_daemon *d) {
  wr_events_free(d); /* events.c */
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
