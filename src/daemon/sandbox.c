/*
 * The sandbox manager: the table of sandboxes, their state machine and the
 * API handlers that drive it.
 *
 *   creating -> running <-> paused -> stopped -> (deleted)     error
 *
 * Each transition that blocks (mounting, cloning, freezing, cleaning up)
 * runs as a job on the threadpool while the sandbox is marked busy; a
 * second lifecycle request meanwhile gets 409 busy. Stopping is
 * asynchronous: SIGTERM now, SIGKILL when the grace period ends, and the
 * sandbox is stopped when warren-init's pidfd says it has exited.
 */
#include "daemon/daemon_internal.h"
#include "daemon/events.h" /* events.c */
#include "daemon/network_internal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define DEFAULT_STOP_TIMEOUT_MS 10000
#define MAX_LABELS 64

static const char *const state_names[] = {"creating", "running", "paused",
                                          "stopped", "error"};

const char *wr_sandbox_state_name(enum wr_sandbox_state s) {
  return state_names[s];
}

static int state_from_name(const char *s) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(state_names); i++)
    if (strcmp(s, state_names[i]) == 0)
      return (int)i;
  return -1;
}

struct wr_sandbox *wr_sandbox_find(struct wr_daemon *d, const char *key) {
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (strcmp(sb->id, key) == 0)
      return sb;
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (strcmp(sb->name, key) == 0)
      return sb;
  return NULL;
}

struct wr_sandbox *wr_sandbox_from_req(struct wr_daemon *d,
                                       wr_http_req_t *req) {
  const char *key = wr_http_param(req, "id");
  struct wr_sandbox *sb = key ? wr_sandbox_find(d, key) : NULL;

  if (sb == NULL)
    wr_http_reply_error(req, 404, "not_found", "no sandbox `%s`",
                        key ? key : "");
  return sb;
}

static void spec_free(struct wr_sandbox_spec *s) {
  wr_strv_free(s->env);
  json_decref(s->labels);
  free(s->workdir);
  free(s->agent);
  free(s->ws_mode);
  free(s->ws_path);
  free(s->snapshot);           /* snapshots */
  wr_strv_free(s->layer_dirs); /* snapshots */
}

static void sandbox_free(struct wr_sandbox *sb) {
  wr_procs_free_all(sb);
  if (sb->rootfd >= 0)
    close(sb->rootfd);
  if (sb->retired_rootfd >= 0)
    close(sb->retired_rootfd);
  spec_free(&sb->spec);
  free(sb->id);
  free(sb->name);
  free(sb->image);
  free(sb->image_dir);
  free(sb->error);
  free(sb);
}

void wr_sandbox_ref(struct wr_sandbox *sb) {
  sb->refs++;
}

void wr_sandbox_unref(struct wr_sandbox *sb) {
  if (--sb->refs == 0 && sb->removed)
    sandbox_free(sb);
}

static void table_remove(struct wr_sandbox *sb) {
  struct wr_sandbox **pp = &sb->d->sandboxes;

  while (*pp != NULL && *pp != sb)
    pp = &(*pp)->next;
  if (*pp == sb)
    *pp = sb->next;
  sb->removed = true;
  sb->refs++; /* balanced by the unref below, which may free it */
  wr_sandbox_unref(sb);
}

void wr_sandbox_set_state(struct wr_sandbox *sb, enum wr_sandbox_state s,
                          const char *error) {
  /* `error` may be sb->error itself (a stop keeps the reason it had). */
  char *copy = error ? xstrdup(error) : NULL;
  enum wr_sandbox_state from = sb->state; /* events.c */
  wr_error_t err;

  sb->state = s;
  free(sb->error);
  sb->error = copy;
  sb->updated_ms = wr_now_ms();
  if (wr_store_sandbox_set_state(sb->d->store, sb->id, state_names[s],
                                 sb->error, &err) < 0)
    wr_err("sandbox %s: %s", sb->id, err.msg);
  wr_events_state_change(sb, from); /* events.c */
}

void wr_sandbox_rt_spec(const struct wr_sandbox *sb, struct wr_rt_spec *out) {
  *out = (struct wr_rt_spec){
      .id = sb->id,
      .hostname = sb->name,
      .image_dir = sb->image_dir,
      .slot = sb->slot,
      .memory_bytes = sb->spec.memory_bytes,
      .cpus = sb->spec.cpus,
      .pids = sb->spec.pids,
      .disk_bytes = sb->spec.disk_bytes,
      .ca_pem = wr_network_ca_pem(sb->d),
      .ws_path = sb->spec.ws_path,
      .ws_clone = sb->spec.ws_mode && strcmp(sb->spec.ws_mode, "clone") == 0,
      .ws_uid = sb->spec.ws_uid,
      .ws_gid = sb->spec.ws_gid,
      .ws_id = sb->spec.ws_id,
      /* snapshots: the stack below the sandbox's own layer */
      .layers = (const char *const *)sb->spec.layer_dirs,
      .nlayers = wr_strv_len(sb->spec.layer_dirs),
  };
}

/* Whether the root may be opened now: mounting it while a job makes or
 * removes it would wait for that job, or bring back what rm is taking
 * away. */
static int root_allowed(const struct wr_sandbox *sb, wr_error_t *err) {
  if (sb->state == WR_SB_CREATING)
    return wr_error_setx(err, EBUSY, "sandbox `%s` is being created", sb->name);
  if (sb->removed || sb->removing ||
      (sb->busy != NULL && strcmp(sb->busy, "removing") == 0))
    return wr_error_setx(err, ENOENT, "sandbox `%s` is being removed",
                         sb->name);
  return 0;
}

/* Opening the root for a request: on the threadpool, since it may mount
 * the root, its disk image and its workspace (after a reboot), and checks
 * the workspace, all of which block. */
struct root_job {
  struct wr_job job;
  struct wr_sandbox *sb;
  struct wr_rt_spec spec;
  wr_http_req_t *req;
  wr_http_handler_fn again;
  int fd;
};

static void root_work(struct wr_job *job) {
  struct root_job *j = job->arg;

  j->fd = wr_rt_open_root(job->d->rt, &j->spec, &job->err);
  job->result = j->fd < 0 ? -1 : 0;
}

/* Keep the fd as the sandbox's (unless another job was quicker, or the
 * sandbox is going away), then run the handler again: it finds the root
 * open. */
static void root_done(struct wr_job *job) {
  struct root_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;

  if (job->result == 0 && root_allowed(sb, &job->err) < 0)
    job->result = -1;
  if (job->result < 0) {
    wr_reply_err(j->req, &job->err);
  } else {
    if (sb->rootfd < 0)
      sb->rootfd = steal_fd(&j->fd);
    j->again(j->req, sb->d);
  }
  if (j->fd >= 0)
    close(j->fd);
  wr_sandbox_unref(sb);
  free(j);
}

bool wr_sandbox_root_ready(struct wr_sandbox *sb, wr_http_req_t *req,
                           wr_http_handler_fn again, int *fd) {
  struct root_job *j;
  wr_error_t err;

  if (sb->rootfd >= 0) {
    *fd = sb->rootfd;
    return true;
  }
  if (root_allowed(sb, &err) < 0) {
    wr_reply_err(req, &err);
    return false;
  }
  j = xcalloc(1, sizeof(*j));
  j->sb = sb;
  j->req = req;
  j->again = again;
  j->fd = -1;
  j->job.fn = root_work;
  j->job.done = root_done;
  j->job.arg = j;
  wr_sandbox_rt_spec(sb, &j->spec);
  wr_sandbox_ref(sb);
  wr_job_queue(sb->d, &j->job);
  return false;
}

/* ---- JSON --------------------------------------------------------------- */

static json_t *env_json(char **env) {
  json_t *o = json_object();

  for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
    const char *eq = strchr(env[i], '=');
    _cleanup_free_ char *k = xstrndup(env[i], (size_t)(eq - env[i]));
    json_object_set_new(o, k, json_string(eq + 1));
  }
  return o;
}

static json_t *time_json(int64_t ms) {
  char buf[40];

  wr_format_time(ms, buf, sizeof(buf));
  return json_string(buf);
}

static json_t *size_or_null(uint64_t bytes) {
  return bytes ? json_integer((json_int_t)bytes) : json_null();
}

static json_t *limits_json(const struct wr_sandbox_spec *s) {
  return json_pack("{s:o,s:o,s:o,s:o}", "memory_bytes",
                   size_or_null(s->memory_bytes), "cpus",
                   s->cpus > 0 ? json_real(s->cpus) : json_null(), "pids",
                   s->pids ? json_integer((json_int_t)s->pids) : json_null(),
                   "disk_bytes", size_or_null(s->disk_bytes));
}

/* The workspace as stored (see workspace_from_json). */
static json_t *workspace_stored(const struct wr_sandbox_spec *s) {
  return json_pack("{s:s,s:s,s:I,s:I}", "mode", s->ws_mode, "path", s->ws_path,
                   "uid", (json_int_t)s->ws_uid, "gid", (json_int_t)s->ws_gid);
}

/* ... and for clients, with where it is inside. */
static json_t *workspace_json(const struct wr_sandbox_spec *s) {
  json_t *j;

  if (s->ws_path == NULL)
    return json_null();
  j = workspace_stored(s);
  json_object_set_new(j, "mount", json_string(WR_WORKSPACE));
  json_object_set_new(j, "origin",
                      strcmp(s->ws_mode, "clone") == 0 ? json_string(WR_ORIGIN)
                                                       : json_null());
  return j;
}

json_t *wr_sandbox_json(const struct wr_sandbox *sb) {
  bool live = sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED;
  json_t *j = json_pack(
      "{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:s,s:o,s:o,s:O,s:s,s:o,s:I,s:o}", "id",
      sb->id, "name", sb->name, "image", sb->image, "state",
      state_names[sb->state], "error",
      sb->error ? json_string(sb->error) : json_null(), "created_at",
      time_json(sb->created_ms), "updated_at", time_json(sb->updated_ms),
      "hostname", sb->name, "limits", limits_json(&sb->spec), "env",
      env_json(sb->spec.env), "labels", sb->spec.labels, "workdir",
      sb->spec.workdir, "pid",
      live && sb->inst.pid > 0 ? json_integer(sb->inst.pid) : json_null(),
      "uid_base", (json_int_t)wr_rt_id_base(sb->slot), "memory_bytes",
      live ? json_integer((json_int_t)wr_rt_memory_usage(sb->d->rt, sb->id))
           : json_null());

  json_object_set_new(
      j, "agent", sb->spec.agent ? json_string(sb->spec.agent) : json_null());
  json_object_set_new(j, "workspace", workspace_json(&sb->spec));
  json_object_set_new(j, "snapshot", /* snapshots */
                      sb->spec.snapshot ? json_string(sb->spec.snapshot)
                                        : json_null());
  wr_network_sandbox_json_extras(sb, j);
  return j;
}

static json_t *identity_json(const struct wr_ws_identity *id) {
  char dev[24], ino[24], fsid[24];

  snprintf(dev, sizeof(dev), "%llu", (unsigned long long)id->dev);
  snprintf(ino, sizeof(ino), "%llu", (unsigned long long)id->ino);
  snprintf(fsid, sizeof(fsid), "%llu", (unsigned long long)id->fsid);
  return json_pack("{s:s,s:s,s:s}", "dev", dev, "ino", ino, "fsid", fsid);
}

/* The spec as stored: enough to rebuild the sandbox after a restart. */
static char *spec_to_json(const struct wr_sandbox_spec *s) {
  _cleanup_json_ json_t *j = json_pack(
      "{s:I,s:f,s:I,s:I,s:o,s:O,s:s}", "memory_bytes",
      (json_int_t)s->memory_bytes, "cpus", s->cpus, "pids", (json_int_t)s->pids,
      "disk_bytes", (json_int_t)s->disk_bytes, "env", env_json(s->env),
      "labels", s->labels, "workdir", s->workdir);

  if (s->agent != NULL)
    json_object_set_new(j, "agent", json_string(s->agent));
  if (s->snapshot != NULL) /* snapshots */
    json_object_set_new(j, "snapshot", json_string(s->snapshot));
  if (s->ws_path != NULL) {
    json_t *ws = workspace_stored(s);
    if (s->ws_id.known)
      json_object_set_new(ws, "identity", identity_json(&s->ws_id));
    json_object_set_new(j, "workspace", ws);
  }
  return wr_json_dumps(j);
}

/* The recorded identity: decimal strings, since an inode number may not
 * fit in JSON's integers. */
static int identity_from_json(json_t *o, struct wr_ws_identity *id,
                              wr_error_t *err) {
  const char *dev = NULL, *ino = NULL, *fsid = NULL;
  struct wr_json_field f[] = {
      {"dev", WR_JSON_STRING, &dev, true, NULL},
      {"ino", WR_JSON_STRING, &ino, true, NULL},
      {"fsid", WR_JSON_STRING, &fsid, true, NULL},
  };

  if (wr_json_unpack(o, f, WR_ARRAY_SIZE(f), err) < 0 ||
      wr_parse_u64(dev, 0, UINT64_MAX, &id->dev, err) < 0 ||
      wr_parse_u64(ino, 0, UINT64_MAX, &id->ino, err) < 0 ||
      wr_parse_u64(fsid, 0, UINT64_MAX, &id->fsid, err) < 0)
    return wr_error_wrap(err, "the workspace's identity in the stored spec");
  id->known = true;
  return 0;
}

/* The stored workspace: written by us, still checked like input. A
 * record without an identity was made before identities were kept: its
 * mounts check the owner and a path without symlinks only. */
static int workspace_from_json(json_t *ws, struct wr_sandbox_spec *s,
                               wr_error_t *err) {
  const char *mode = NULL, *path = NULL;
  int64_t uid = -1, gid = -1;
  json_t *identity = NULL;
  struct wr_json_field f[] = {
      {"mode", WR_JSON_STRING, &mode, true, NULL},
      {"path", WR_JSON_STRING, &path, true, NULL},
      {"uid", WR_JSON_INT, &uid, true, NULL},
      {"gid", WR_JSON_INT, &gid, true, NULL},
      {"identity", WR_JSON_OBJECT, &identity, false, NULL},
  };

  if (wr_json_unpack(ws, f, WR_ARRAY_SIZE(f), err) < 0)
    return -1;
  if (identity != NULL && identity_from_json(identity, &s->ws_id, err) < 0)
    return -1;
  if ((strcmp(mode, "direct") != 0 && strcmp(mode, "clone") != 0) ||
      path[0] != '/' || uid < 0 || uid > UINT32_MAX - 1 || gid < 0 ||
      gid > UINT32_MAX - 1)
    return wr_error_setx(err, EINVAL, "bad workspace in the stored spec");
  s->ws_mode = xstrdup(mode);
  s->ws_path = xstrdup(path);
  s->ws_uid = (uint32_t)uid;
  s->ws_gid = (uint32_t)gid;
  return 0;
}

static int spec_from_json(const char *text, struct wr_sandbox_spec *s,
                          wr_error_t *err) {
  _cleanup_json_ json_t *j = NULL;
  int64_t mem = 0, pids = 0, disk = 0;
  json_t *env = NULL, *labels = NULL, *ws = NULL;
  const char *workdir = "/", *agent = NULL, *snapshot = NULL;
  struct wr_json_field f[] = {
      {"snapshot", WR_JSON_STRING, &snapshot, false, NULL}, /* snapshots */
      {"memory_bytes", WR_JSON_INT, &mem, false, NULL},
      {"cpus", WR_JSON_NUMBER, &s->cpus, false, NULL},
      {"pids", WR_JSON_INT, &pids, false, NULL},
      {"disk_bytes", WR_JSON_INT, &disk, false, NULL},
      {"env", WR_JSON_OBJECT, &env, false, NULL},
      {"labels", WR_JSON_OBJECT, &labels, false, NULL},
      {"workdir", WR_JSON_STRING, &workdir, false, NULL},
      {"agent", WR_JSON_STRING, &agent, false, NULL},
      {"workspace", WR_JSON_OBJECT, &ws, false, NULL},
  };

  if (wr_json_parse_object(text, strlen(text), true, &j, err) < 0 ||
      wr_json_unpack(j, f, WR_ARRAY_SIZE(f), err) < 0)
    return -1;
  if (mem < 0 || pids < 0 || disk < 0)
    return wr_error_setx(err, EINVAL, "negative limit in the stored spec");
  s->memory_bytes = (uint64_t)mem;
  s->pids = (uint64_t)pids;
  s->disk_bytes = (uint64_t)disk;
  if (env != NULL && wr_json_env(env, "env", &s->env, err) < 0)
    return -1;
  if (s->env == NULL)
    s->env = xcalloc(1, sizeof(char *));
  s->labels = labels ? json_incref(labels) : json_object();
  s->workdir = xstrdup(workdir);
  s->agent = agent ? xstrdup(agent) : NULL;
  s->snapshot = snapshot ? xstrdup(snapshot) : NULL; /* snapshots */
  if (ws != NULL && workspace_from_json(ws, s, err) < 0)
    return -1;
  return 0;
}

/* ---- watching a running sandbox ----------------------------------------- */

static void pidfd_closed(uv_handle_t *h) {
  struct wr_sandbox *sb = h->data;

  wr_sandbox_unref(sb);
}

static void stop_watching(struct wr_sandbox *sb) {
  if (sb->pidfd_polling) {
    sb->pidfd_polling = false;
    uv_poll_stop(&sb->pidfd_poll);
    uv_close((uv_handle_t *)&sb->pidfd_poll, pidfd_closed);
  }
  if (sb->conn != NULL) {
    wr_initconn_close(sb->conn);
    sb->conn = NULL;
  }
}

static void on_pidfd(uv_poll_t *h, int status, int events) {
  struct wr_sandbox *sb = h->data;
  siginfo_t info;

  (void)status;
  (void)events;
  /* Reap warren-init if this daemon started it (otherwise ECHILD). */
  memset(&info, 0, sizeof(info));
  waitid((idtype_t)3 /* P_PIDFD */, (id_t)sb->inst.pidfd, &info,
         WEXITED | WNOHANG);
  wr_sandbox_on_exit(sb);
}

int wr_sandbox_attach(struct wr_sandbox *sb, struct wr_rt_instance *inst,
                      wr_error_t *err) {
  sb->inst = *inst;
  sb->conn = wr_initconn_new(sb, inst->ctl, err);
  if (sb->conn == NULL)
    return -1;
  if (uv_poll_init(sb->d->loop, &sb->pidfd_poll, inst->pidfd) < 0) {
    wr_initconn_close(sb->conn);
    sb->conn = NULL;
    return wr_error_set(err, EIO, "watch warren-init");
  }
  sb->pidfd_poll.data = sb;
  sb->pidfd_polling = true;
  wr_sandbox_ref(sb);
  uv_poll_start(&sb->pidfd_poll, UV_READABLE, on_pidfd);
  wr_store_sandbox_set_init(sb->d->store, sb->id, inst->pid, inst->start_time,
                            NULL);
  return 0;
}

/* ---- jobs --------------------------------------------------------------- */

struct sb_job {
  struct wr_job job;
  struct wr_sandbox *sb;
  struct wr_rt_spec spec;
  struct wr_trust *trust;         /* the scanner of the extra CAs */
  struct wr_trust_set *trust_set; /* what a create or start installed */
  struct wr_rt_instance inst;
  wr_http_req_t *req;
  bool start;  /* create: start after preparing */
  bool frozen; /* pause/resume */
};

static struct sb_job *sb_job_new(struct wr_sandbox *sb, wr_http_req_t *req,
                                 const char *what, wr_job_fn fn,
                                 wr_job_fn done) {
  struct sb_job *j = xcalloc(1, sizeof(*j));

  j->sb = sb;
  j->req = req;
  j->job.fn = fn;
  j->job.done = done;
  j->job.arg = j;
  j->inst.pidfd = j->inst.ctl = j->inst.rootfd = -1;
  wr_sandbox_rt_spec(sb, &j->spec);
  j->trust = wr_network_trust(sb->d);
  sb->busy = what;
  wr_sandbox_ref(sb);
  return j;
}

static void sb_job_end(struct sb_job *j) {
  wr_trust_set_unref(j->trust_set);
  j->sb->busy = NULL;
  wr_sandbox_unref(j->sb);
  free(j);
}

static bool check_busy(struct wr_sandbox *sb, wr_http_req_t *req) {
  if (sb->busy == NULL)
    return false;
  wr_http_reply_error(req, 409, "busy", "sandbox `%s` is busy (%s)", sb->name,
                      sb->busy);
  return true;
}

static void reply_sandbox(wr_http_req_t *req, int status,
                          struct wr_sandbox *sb) {
  if (req != NULL)
    wr_http_reply_json(req, status, wr_sandbox_json(sb));
}

int wr_sandbox_net_up(struct wr_sandbox *sb, const struct wr_rt_instance *inst,
                      wr_error_t *err) {
  _cleanup_close_ int netns = wr_rt_open_netns(inst, err);
  int fds[WR_NET_NFDS];

  if (netns < 0 || wr_rt_net_fds(inst, fds, err) < 0 ||
      wr_network_sandbox_up(sb, netns, fds, err) < 0)
    return wr_error_wrap(err, "start the network of sandbox `%s`", sb->name);
  return 0;
}

/* Adopt a freshly started instance: its proxy and DNS server listen before
 * its first process runs. On failure kill it. The root the start opened
 * becomes the sandbox's (see wr_sandbox_root_ready), unless it has one. */
static int adopt_instance(struct wr_sandbox *sb, struct wr_rt_instance *inst,
                          wr_error_t *err) {
  if (sb->rootfd < 0)
    sb->rootfd = steal_fd(&inst->rootfd);
  wr_closep(&inst->rootfd);
  if (wr_sandbox_net_up(sb, inst, err) < 0 ||
      wr_sandbox_attach(sb, inst, err) < 0) {
    wr_network_sandbox_down(sb);
    wr_rt_kill(sb->d->rt, sb->id, inst->pidfd, NULL);
    close(inst->pidfd);
    close(inst->ctl);
    return -1;
  }
  wr_sandbox_set_state(sb, WR_SB_RUNNING, NULL);
  return 0;
}

/* The extra CAs as the host has them now, so that a CA added on the host
 * reaches a sandbox at its next start. On the job's worker thread: it
 * reads the host's CA directory (when something in it changed). */
static void scan_cas(struct sb_job *j) {
  j->trust_set = wr_trust_scan(j->trust);
  j->spec.extra_cas = wr_trust_set_pem(j->trust_set);
}

/* ---- create ------------------------------------------------------------- */

static void create_work(struct wr_job *job) {
  struct sb_job *j = job->arg;
  uint64_t t0 = wr_mono_ns(), t1;

  scan_cas(j);
  if (j->start)
    job->result = wr_rt_create(job->d->rt, &j->spec, &j->inst, &job->err);
  else
    job->result = wr_rt_prepare(job->d->rt, &j->spec, &job->err);
  t1 = wr_mono_ns();
  wr_debug("sandbox %s: created in %.2f ms", j->spec.id,
           (double)(t1 - t0) / 1e6);
  if (job->result < 0)
    wr_rt_remove(job->d->rt, j->spec.id, NULL);
}

static void create_done(struct wr_job *job) {
  struct sb_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;

  if (job->result == 0 && j->start &&
      adopt_instance(sb, &j->inst, &job->err) < 0)
    job->result = -1;
  if (job->result < 0) {
    wr_warn("create sandbox %s: %s", sb->name, job->err.msg);
    wr_http_reply_error(j->req, 500, "create_failed", "%s", job->err.msg);
    wr_events_emit(
        sb->d, "error", sb, /* events.c */
        json_pack("{s:s,s:s}", "during", "create", "message", job->err.msg));
    wr_store_sandbox_delete(sb->d->store, sb->id, NULL);
    wr_daemon_release_slot(sb->d, sb->id);
    table_remove(sb);
  } else {
    if (!j->start)
      wr_sandbox_set_state(sb, WR_SB_STOPPED, NULL);
    wr_info("sandbox %s (%s) created", sb->name, sb->id);
    reply_sandbox(j->req, 201, sb);
  }
  sb_job_end(j);
}

struct create_req {
  const char *name, *image, *workdir, *agent;
  uint64_t memory, disk;
  double cpus;
  int64_t pids;
  json_t *env, *labels, *workspace;
  bool start;
  const char *snapshot;       /* snapshots: made from this one */
  struct wr_snapshot_use use; /* ... which stacks these layers */
  /* The workspace, checked (workspaces.c); ws.real is NULL without one. */
  struct wr_ws_check ws;
  struct wr_kit kit;
  bool has_kit;
};

static void create_req_clear(struct create_req *c) {
  wr_snapshot_use_clear(&c->use); /* snapshots */
  wr_ws_check_clear(&c->ws);
  if (c->has_kit)
    wr_kit_free(&c->kit);
}

/* The agent's kit must exist; with a workspace and no agent it is the
 * shell's. */
static int check_agent(struct wr_daemon *d, struct create_req *c,
                       wr_error_t *err) {
  if (c->agent == NULL && c->workspace != NULL)
    c->agent = "shell";
  if (c->agent == NULL)
    return 0;
  if (wr_kit_load(d, c->agent, &c->kit, err) < 0) {
    err->code = EINVAL; /* a bad request, not a missing image */
    return -1;
  }
  c->has_kit = true;
  return 0;
}

static int check_labels(const json_t *labels, wr_error_t *err) {
  const char *k;
  json_t *v;

  if (json_object_size(labels) > MAX_LABELS)
    return wr_error_setx(err, EINVAL, "at most %d labels", MAX_LABELS);
  json_object_foreach ((json_t *)labels, k, v) {
    if (*k == '\0' || strlen(k) > 128 || strchr(k, '=') != NULL)
      return wr_error_setx(err, EINVAL, "invalid label name `%s`", k);
    if (!json_is_string(v) || json_string_length(v) > 1024)
      return wr_error_setx(
          err, EINVAL, "label `%s` must be a string (at most 1024 bytes)", k);
  }
  return 0;
}

/* No disk limit (0) is a choice only when the daemon has no default: a
 * default set by the operator is also a rule for clients. */
static int check_disk(struct wr_daemon *d, const struct create_req *c,
                      wr_error_t *err) {
  if (c->disk == 0 && d->cfg.default_disk > 0)
    return wr_error_setx(err, EINVAL,
                         "disk must be at least 16 MiB: every sandbox of this "
                         "daemon has a disk limit");
  if (c->disk == 0)
    return 0;
  return wr_rt_check_disk(d->rt, c->disk, err);
}

static int check_limits(struct wr_daemon *d, const struct create_req *c,
                        wr_error_t *err) {
  if (c->memory != 0 && c->memory < (4u << 20))
    return wr_error_setx(err, EINVAL, "memory must be at least 4 MiB");
  if (c->cpus < 0 || c->cpus > 1024)
    return wr_error_setx(err, EINVAL, "cpus must be between 0.01 and 1024");
  if (c->cpus > 0 && c->cpus < 0.01)
    return wr_error_setx(err, EINVAL, "cpus must be at least 0.01");
  if (c->pids < 0 || c->pids > 4194304)
    return wr_error_setx(err, EINVAL, "pids must be between 1 and 4194304");
  if (c->memory && !wr_rt_can_limit(d->rt, "memory"))
    return wr_error_setx(err, EINVAL,
                         "this host cannot limit memory "
                         "(no memory cgroup controller)");
  if (c->cpus > 0 && !wr_rt_can_limit(d->rt, "cpus"))
    return wr_error_setx(err, EINVAL,
                         "this host cannot limit cpus (no cpu controller)");
  if (c->pids && !wr_rt_can_limit(d->rt, "pids"))
    return wr_error_setx(err, EINVAL,
                         "this host cannot limit pids (no pids controller)");
  return check_disk(d, c, err);
}

/* snapshots: a sandbox made from a snapshot sits on the snapshot's image
 * (the default unless the request names another, which is refused). */
static int check_snapshot(struct wr_daemon *d, struct create_req *c,
                          wr_error_t *err) {
  if (wr_snapshot_use(d, c->snapshot, &c->use, err) < 0) {
    if (err->code == ENOENT)
      err->code = EINVAL; /* a bad request, not a missing image */
    return -1;
  }
  if (c->image != d->cfg.default_image && strcmp(c->image, c->use.image) != 0)
    return wr_error_setx(err, EINVAL,
                         "snapshot `%s` sits on image `%s`, not `%s`",
                         c->snapshot, c->use.image, c->image);
  c->image = c->use.image;
  return 0;
}

static int check_create(struct wr_daemon *d, struct create_req *c,
                        wr_error_t *err) {
  if (c->name != NULL && !wr_name_valid(c->name))
    return wr_error_setx(err, EINVAL,
                         "invalid name `%s` (use 1-63 of a-z 0-9 . _ -, "
                         "starting with a letter or digit)",
                         c->name);
  if (c->name != NULL && wr_sandbox_find(d, c->name) != NULL)
    return wr_error_setx(err, EEXIST, "a sandbox named `%s` already exists",
                         c->name);
  if (c->workdir != NULL &&
      (c->workdir[0] != '/' || wr_path_check(c->workdir, err) < 0))
    return wr_error_setx(err, EINVAL, "workdir must be an absolute path");
  if (c->labels != NULL && check_labels(c->labels, err) < 0)
    return -1;
  if (c->snapshot != NULL && check_snapshot(d, c, err) < 0) /* snapshots */
    return -1;
  if (check_limits(d, c, err) < 0 ||
      (c->workspace != NULL &&
       wr_ws_check_request(c->workspace, &c->ws, err) < 0))
    return -1;
  return check_agent(d, c, err);
}

/* A sandbox's environment goes with every exec: it may take only part of
 * what an exec carries (WR_SANDBOX_ENV_MAX), or every exec would fail. */
static int check_env_size(char *const *env, wr_error_t *err) {
  size_t bytes = wr_strv_bytes(env), vars = wr_strv_len(env);

  if (vars > WR_SANDBOX_ENV_VARS || bytes > WR_SANDBOX_ENV_MAX)
    return wr_error_setx(err, E2BIG,
                         "env takes %zu bytes in %zu variable%s (the kit's "
                         "included); a sandbox's environment may take at "
                         "most %u bytes in %d variables, so that every exec "
                         "keeps room for its command",
                         bytes, vars, vars == 1 ? "" : "s", WR_SANDBOX_ENV_MAX,
                         WR_SANDBOX_ENV_VARS);
  return 0;
}

/* The kit's environment comes first; the request's overrides it. */
static int merge_env(const struct create_req *c, char ***env, wr_error_t *err) {
  char **mine = NULL;

  *env = xcalloc(1, sizeof(char *));
  if (c->has_kit)
    for (size_t i = 0; c->kit.env[i] != NULL; i++)
      *env = wr_strv_push(*env, c->kit.env[i]);
  if (c->env == NULL)
    return check_env_size(*env, err);
  if (wr_json_env(c->env, "env", &mine, err) < 0)
    return -1;
  for (size_t i = 0; mine[i] != NULL; i++)
    *env = wr_strv_setenv(*env, mine[i]);
  wr_strv_free(mine);
  return check_env_size(*env, err);
}

static struct wr_sandbox *sandbox_new(struct wr_daemon *d, struct create_req *c,
                                      wr_error_t *err) {
  struct wr_sandbox *sb = xcalloc(1, sizeof(*sb));

  sb->d = d;
  sb->rootfd = sb->retired_rootfd = -1;
  sb->inst.pidfd = sb->inst.ctl = -1;
  do {
    free(sb->id);
    sb->id = wr_random_id("sb-", 6);
  } while (wr_sandbox_find(d, sb->id) != NULL);
  sb->name = xstrdup(c->name ? c->name : sb->id);
  sb->image = xstrdup(c->image);
  sb->spec.memory_bytes = c->memory;
  sb->spec.cpus = c->cpus;
  sb->spec.pids = (uint64_t)c->pids;
  sb->spec.disk_bytes = c->disk;
  sb->spec.workdir = xstrdup(c->workdir   ? c->workdir
                             : c->ws.real ? WR_WORKSPACE
                                          : "/");
  sb->spec.labels = c->labels ? json_deep_copy(c->labels) : json_object();
  sb->spec.agent = c->agent ? xstrdup(c->agent) : NULL;
  sb->spec.ws_mode = c->ws.real ? xstrdup(c->ws.mode) : NULL;
  sb->spec.ws_path = steal_ptr(&c->ws.real);
  sb->spec.ws_uid = c->ws.uid;
  sb->spec.ws_gid = c->ws.gid;
  sb->spec.ws_id = c->ws.id;
  sb->spec.snapshot = steal_ptr(&c->use.id);     /* snapshots */
  sb->spec.layer_dirs = steal_ptr(&c->use.dirs); /* snapshots */
  sb->state = WR_SB_CREATING;
  sb->created_ms = sb->updated_ms = wr_now_ms();
  if (merge_env(c, &sb->spec.env, err) < 0) {
    sandbox_free(sb);
    return NULL;
  }
  sb->image_dir = wr_image_rootfs(d, c->image, err);
  if (sb->image_dir == NULL) {
    sandbox_free(sb);
    return NULL;
  }
  return sb;
}

/* Record the new sandbox (reserving its uid slot) and add it to the table. */
static int sandbox_insert(struct wr_daemon *d, struct wr_sandbox *sb,
                          wr_error_t *err) {
  _cleanup_free_ char *spec = spec_to_json(&sb->spec);
  struct wr_sandbox_rec rec = {
      .id = sb->id,
      .name = sb->name,
      .image = sb->image,
      .state = "creating",
      .spec_json = spec,
      .created_ms = sb->created_ms,
      .updated_ms = sb->updated_ms,
  };

  if (wr_daemon_claim_slot(d, sb->id, &sb->slot, err) < 0)
    return -1;
  rec.slot = sb->slot;
  if (wr_store_sandbox_insert(d->store, &rec, err) < 0) {
    wr_daemon_release_slot(d, sb->id);
    return -1;
  }
  sb->next = d->sandboxes;
  d->sandboxes = sb;
  sb->refs = 1; /* the table's reference */
  return 0;
}

/* The hosts an agent's kit must reach, as the sandbox's own allow rules
 * (visible and removable with `warren policy`). */
static int kit_rules(struct wr_daemon *d, struct wr_sandbox *sb,
                     const struct wr_kit *kit, wr_error_t *err) {
  for (size_t i = 0; kit->allow[i] != NULL; i++) {
    struct wr_rule r = {0};
    struct wr_rule_rec in, rec = {0};
    int rc;

    if (wr_rule_parse(kit->allow[i], true, &r, err) < 0)
      return wr_error_wrap(err, "kit `%s`", kit->name);
    in = (struct wr_rule_rec){.sandbox_id = sb->id,
                              .allow = true,
                              .pattern = r.pattern,
                              .port = r.port};
    rc = wr_store_rule_add(d->store, &in, &rec, NULL, err);
    wr_rule_rec_free(&rec);
    wr_rule_clear(&r);
    if (rc < 0)
      return -1;
  }
  return kit->allow[0] != NULL ? wr_network_rebuild_policy(d->network, err) : 0;
}

/* Create's errors have codes of their own: a name that is taken, an image
 * that does not exist. */
static void reply_create_err(wr_http_req_t *req, const wr_error_t *err) {
  if (err->code == EEXIST)
    wr_http_reply_error(req, 409, "name_conflict", "%s", err->msg);
  else if (err->code == ENOENT)
    wr_http_reply_error(req, 404, "image_not_found", "%s", err->msg);
  else
    wr_reply_err(req, err);
}

/* A create request: its body (which c borrows from) and, while the
 * workspace is checked on the threadpool, the job that does it. */
struct create_job {
  struct wr_job job;
  wr_http_req_t *req;
  json_t *body;
  struct create_req c;
};

static void create_job_free(struct create_job *cj) {
  create_req_clear(&cj->c);
  json_decref(cj->body);
  free(cj);
}

/* Everything is checked: make the sandbox. */
static void create_go(struct wr_daemon *d, struct create_job *cj) {
  struct create_req *c = &cj->c;
  wr_http_req_t *req = cj->req;
  struct wr_sandbox *sb;
  struct sb_job *j;
  wr_error_t err;

  /* The workspace check took a while: the name may be taken by now. */
  if (c->name != NULL && wr_sandbox_find(d, c->name) != NULL) {
    wr_error_setx(&err, EEXIST, "a sandbox named `%s` already exists", c->name);
    reply_create_err(req, &err);
    return;
  }
  if ((sb = sandbox_new(d, c, &err)) == NULL) {
    reply_create_err(req, &err);
    return;
  }
  if (sandbox_insert(d, sb, &err) < 0) {
    sandbox_free(sb);
    reply_create_err(req, &err);
    return;
  }
  if (c->has_kit && kit_rules(d, sb, &c->kit, &err) < 0) {
    reply_create_err(req, &err);
    wr_store_sandbox_delete(d->store, sb->id, NULL);
    table_remove(sb);
    return;
  }
  j = sb_job_new(sb, req, "creating", create_work, create_done);
  j->start = c->start;
  wr_job_queue(d, &j->job);
}

static void workspace_work(struct wr_job *job) {
  struct create_job *cj = job->arg;

  job->result = wr_ws_check_host(&cj->c.ws, &job->err);
}

static void workspace_done(struct wr_job *job) {
  struct create_job *cj = job->arg;

  if (job->result < 0)
    reply_create_err(cj->req, &job->err);
  else
    create_go(job->d, cj);
  create_job_free(cj);
}

void wr_api_sandbox_create(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct create_job *cj = xcalloc(1, sizeof(*cj));
  struct create_req *c = &cj->c;
  struct wr_json_field f[] = {
      {"name", WR_JSON_STRING, &c->name, false, NULL},
      {"image", WR_JSON_STRING, &c->image, false, NULL},
      {"memory", WR_JSON_SIZE, &c->memory, false, NULL},
      {"cpus", WR_JSON_NUMBER, &c->cpus, false, NULL},
      {"pids", WR_JSON_INT, &c->pids, false, NULL},
      {"disk", WR_JSON_SIZE, &c->disk, false, NULL},
      {"env", WR_JSON_OBJECT, &c->env, false, NULL},
      {"labels", WR_JSON_OBJECT, &c->labels, false, NULL},
      {"workdir", WR_JSON_STRING, &c->workdir, false, NULL},
      {"start", WR_JSON_BOOL, &c->start, false, NULL},
      {"agent", WR_JSON_STRING, &c->agent, false, NULL},
      {"workspace", WR_JSON_OBJECT, &c->workspace, false, NULL},
      {"snapshot", WR_JSON_STRING, &c->snapshot, false, NULL}, /* snapshots */
  };
  wr_error_t err;

  cj->req = req;
  c->image = d->cfg.default_image;
  c->disk = d->cfg.default_disk;
  c->start = true;
  c->ws.state_root = d->cfg.root;
  cj->body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  if (cj->body == NULL || check_create(d, c, &err) < 0) {
    if (cj->body != NULL)
      reply_create_err(req, &err);
    create_job_free(cj);
    return;
  }
  if (c->workspace == NULL) {
    create_go(d, cj);
    create_job_free(cj);
    return;
  }
  cj->job.fn = workspace_work;
  cj->job.done = workspace_done;
  cj->job.arg = cj;
  wr_job_queue(d, &cj->job);
}

static void pause_or_resume(wr_http_req_t *req, void *ctx, bool frozen);

/* ---- start -------------------------------------------------------------- */

static void start_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  scan_cas(j);
  job->result = wr_rt_start(job->d->rt, &j->spec, &j->inst, &job->err);
}

static void start_done(struct wr_job *job) {
  struct sb_job *j = job->arg;

  if (job->result == 0)
    job->result = adopt_instance(j->sb, &j->inst, &job->err);
  if (job->result < 0) {
    wr_sandbox_set_state(j->sb, WR_SB_STOPPED, job->err.msg);
    wr_http_reply_error(j->req, 500, "start_failed", "%s", job->err.msg);
  } else {
    wr_info("sandbox %s started", j->sb->name);
    reply_sandbox(j->req, 200, j->sb);
  }
  sb_job_end(j);
}

void wr_api_sandbox_start(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);

  if (sb == NULL || check_busy(sb, req))
    return;
  if (sb->state == WR_SB_PAUSED) {
    pause_or_resume(req, ctx, false); /* start means "make it run" */
    return;
  }
  if (sb->state == WR_SB_RUNNING) {
    reply_sandbox(req, 200, sb);
    return;
  }
  wr_procs_forget_all(sb); /* the processes of the last run are history */
  wr_job_queue(sb->d,
               &sb_job_new(sb, req, "starting", start_work, start_done)->job);
}

/* ---- stop and exit ------------------------------------------------------ */

static void cleanup_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  job->result = wr_rt_cleanup(job->d->rt, j->spec.id, &job->err);
}

static void remove_after_stop(struct wr_sandbox *sb, wr_http_req_t *req);

static void cleanup_done(struct wr_job *job) {
  struct sb_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;
  wr_http_req_t *req = sb->stop_req;

  if (job->result < 0)
    wr_warn("sandbox %s: clean up: %s", sb->name, job->err.msg);
  sb->stop_req = NULL;
  wr_sandbox_set_state(sb, WR_SB_STOPPED, sb->error);
  wr_info("sandbox %s stopped", sb->name);
  sb_job_end(j);
  if (sb->removing)
    remove_after_stop(sb, req);
  else
    reply_sandbox(req, 200, sb);
}

static void stop_timer_closed(uv_handle_t *h) {
  wr_sandbox_unref(h->data);
}

void wr_sandbox_on_exit(struct wr_sandbox *sb) {
  bool expected = sb->busy != NULL;
  struct sb_job *j;

  stop_watching(sb);
  wr_network_sandbox_down(sb);
  wr_procs_sandbox_gone(sb);
  if (sb->stop_timer_init) {
    sb->stop_timer_init = false;
    uv_close((uv_handle_t *)&sb->stop_timer, stop_timer_closed);
  }
  if (sb->inst.pidfd >= 0)
    close(sb->inst.pidfd);
  sb->inst.pidfd = -1;
  sb->inst.pid = 0;
  wr_store_sandbox_set_init(sb->d->store, sb->id, 0, 0, NULL);
  if (!expected) {
    free(sb->error);
    sb->error = xstrdup("warren-init exited unexpectedly");
    wr_warn("sandbox %s: %s", sb->name, sb->error);
  }
  j = sb_job_new(sb, NULL, "stopping", cleanup_work, cleanup_done);
  wr_job_queue(sb->d, &j->job);
}

static void kill_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  job->result = wr_rt_kill(job->d->rt, j->spec.id, -1, &job->err);
}

static void kill_done(struct wr_job *job) {
  struct sb_job *j = job->arg;

  if (job->result < 0)
    wr_warn("sandbox %s: kill: %s", j->sb->name, job->err.msg);
  wr_sandbox_unref(j->sb);
  free(j);
}

/* SIGKILL everything; the pidfd then reports init's exit. Runs on the
 * threadpool because v1 cgroups need freeze-kill-thaw rounds. */
static void kill_now(struct wr_sandbox *sb) {
  struct sb_job *j = xcalloc(1, sizeof(*j));

  if (sb->inst.pidfd >= 0)
    syscall(SYS_pidfd_send_signal, sb->inst.pidfd, SIGKILL, NULL, 0);
  j->sb = sb;
  j->job.fn = kill_work;
  j->job.done = kill_done;
  j->job.arg = j;
  wr_sandbox_rt_spec(sb, &j->spec);
  wr_sandbox_ref(sb);
  wr_job_queue(sb->d, &j->job);
}

static void on_stop_timeout(uv_timer_t *t) {
  struct wr_sandbox *sb = t->data;

  wr_info("sandbox %s: grace period over, killing", sb->name);
  kill_now(sb);
}

/* Begin stopping: thaw (a frozen process cannot handle SIGTERM), SIGTERM to
 * init, which forwards it to every process and exits when they are gone;
 * SIGKILL after the grace period (0: at once). */
static void begin_stop(struct wr_sandbox *sb, uint64_t grace_ms) {
  sb->busy = "stopping";
  if (sb->state == WR_SB_PAUSED)
    wr_rt_freeze(sb->d->rt, sb->id, false, NULL);
  if (grace_ms == 0) {
    kill_now(sb);
    return;
  }
  syscall(SYS_pidfd_send_signal, sb->inst.pidfd, SIGTERM, NULL, 0);
  uv_timer_init(sb->d->loop, &sb->stop_timer);
  sb->stop_timer.data = sb;
  sb->stop_timer_init = true;
  wr_sandbox_ref(sb);
  uv_timer_start(&sb->stop_timer, on_stop_timeout, grace_ms, 0);
}

void wr_api_sandbox_stop(wr_http_req_t *req, void *ctx) {
  double timeout = DEFAULT_STOP_TIMEOUT_MS / 1000.0;
  struct wr_json_field f[] = {
      {"timeout", WR_JSON_NUMBER, &timeout, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  struct wr_sandbox *sb;

  if (body == NULL)
    return;
  if (timeout < 0 || timeout > 3600) {
    wr_http_reply_error(req, 400, "bad_request",
                        "timeout must be between 0 and 3600 seconds");
    return;
  }
  sb = wr_sandbox_from_req(ctx, req);
  if (sb == NULL || check_busy(sb, req))
    return;
  if (sb->state != WR_SB_RUNNING && sb->state != WR_SB_PAUSED) {
    reply_sandbox(req, 200, sb);
    return;
  }
  sb->stop_req = req;
  begin_stop(sb, (uint64_t)(timeout * 1000));
}

/* ---- pause and resume ---------------------------------------------------- */

static void freeze_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  job->result = wr_rt_freeze(job->d->rt, j->spec.id, j->frozen, &job->err);
}

static void freeze_done(struct wr_job *job) {
  struct sb_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;

  if (job->result < 0) {
    wr_http_reply_error(j->req, 500, "internal", "%s", job->err.msg);
  } else if (sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED) {
    wr_sandbox_set_state(sb, j->frozen ? WR_SB_PAUSED : WR_SB_RUNNING, NULL);
    reply_sandbox(j->req, 200, sb);
  } else {
    reply_sandbox(j->req, 409, sb);
  }
  sb_job_end(j);
}

static void pause_or_resume(wr_http_req_t *req, void *ctx, bool frozen) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  enum wr_sandbox_state want = frozen ? WR_SB_PAUSED : WR_SB_RUNNING;
  struct sb_job *j;

  if (sb == NULL || check_busy(sb, req))
    return;
  if (sb->state == want) {
    reply_sandbox(req, 200, sb);
    return;
  }
  if (sb->state != WR_SB_RUNNING && sb->state != WR_SB_PAUSED) {
    wr_http_reply_error(req, 409, "not_running", "sandbox `%s` is %s", sb->name,
                        state_names[sb->state]);
    return;
  }
  j = sb_job_new(sb, req, frozen ? "pausing" : "resuming", freeze_work,
                 freeze_done);
  j->frozen = frozen;
  wr_job_queue(sb->d, &j->job);
}

void wr_api_sandbox_pause(wr_http_req_t *req, void *ctx) {
  pause_or_resume(req, ctx, true);
}

void wr_api_sandbox_resume(wr_http_req_t *req, void *ctx) {
  pause_or_resume(req, ctx, false);
}

/* ---- remove ------------------------------------------------------------- */

static void remove_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  job->result = wr_rt_remove(job->d->rt, j->spec.id, &job->err);
}

static void remove_done(struct wr_job *job) {
  struct sb_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;

  if (job->result < 0) {
    wr_sandbox_set_state(sb, WR_SB_ERROR, job->err.msg);
    wr_http_reply_error(j->req, 500, "remove_failed", "%s", job->err.msg);
  } else {
    wr_network_sandbox_removed(sb);
    wr_store_sandbox_delete(sb->d->store, sb->id, NULL);
    wr_daemon_release_slot(sb->d, sb->id);
    wr_info("sandbox %s removed", sb->name);
    wr_events_emit(sb->d, "removed", sb, NULL); /* events.c */
    table_remove(sb);
    if (j->req != NULL)
      wr_http_reply_empty(j->req, 204);
  }
  sb_job_end(j);
}

/*
 * Let go of the root before it is unmounted. Files API jobs on worker
 * threads borrow sb->rootfd (they hold a reference to sb, not to the fd):
 * closing it under them would free its number for the next open, which
 * may be another sandbox's root, and a tar upload still running would
 * write its entries there. So the number stays taken until the sandbox is
 * freed, after the last job, pointed at /dev/null (no path resolves below
 * it: ENOTDIR) so that it does not keep the root mounted. Should that
 * fail, it keeps pointing at this sandbox's own root: the unmount is then
 * lazy, which is slower to free, not unsafe.
 */
static void retire_rootfd(struct wr_sandbox *sb) {
  _cleanup_close_ int null = -1;

  if (sb->rootfd < 0)
    return;
  if (sb->retired_rootfd >= 0)
    close(sb->retired_rootfd);
  sb->retired_rootfd = sb->rootfd;
  sb->rootfd = -1;
  null = open("/dev/null", O_PATH | O_CLOEXEC);
  if (null < 0 || dup3(null, sb->retired_rootfd, O_CLOEXEC) < 0)
    wr_warn("sandbox %s: retire its root fd: %s", sb->name, strerror(errno));
}

static void remove_now(struct wr_sandbox *sb, void *req) {
  wr_job_queue(sb->d,
               &sb_job_new(sb, req, "removing", remove_work, remove_done)->job);
}

/* The kept output's writer lets go of the directory first (outlog.c). */
static void remove_after_stop(struct wr_sandbox *sb, wr_http_req_t *req) {
  sb->removing = false;
  sb->busy = "removing";
  retire_rootfd(sb);
  wr_outlog_close(sb, remove_now, req);
}

void wr_api_sandbox_delete(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb;
  bool force;

  if (wr_req_bool(req, "force", false, &force) < 0)
    return;
  sb = wr_sandbox_from_req(ctx, req);
  if (sb == NULL || check_busy(sb, req))
    return;
  if ((sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED) && !force) {
    wr_http_reply_error(req, 409, "not_stopped",
                        "sandbox `%s` is %s: stop it first or force removal",
                        sb->name, state_names[sb->state]);
    return;
  }
  if (sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED) {
    sb->removing = true;
    sb->stop_req = req;
    begin_stop(sb, 0);
    return;
  }
  remove_after_stop(sb, req);
}

/* ---- reads -------------------------------------------------------------- */

static bool label_matches(const struct wr_sandbox *sb, const char *filter) {
  const char *eq = strchr(filter, '=');
  _cleanup_free_ char *key = NULL;
  json_t *v;

  if (eq == NULL)
    return json_object_get(sb->spec.labels, filter) != NULL;
  key = xstrndup(filter, (size_t)(eq - filter));
  v = json_object_get(sb->spec.labels, key);
  return v != NULL && strcmp(json_string_value(v), eq + 1) == 0;
}

void wr_api_sandbox_list(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *label = wr_http_query(req, "label");
  const char *state = wr_http_query(req, "state");
  json_t *arr = json_array();

  if (state != NULL && state_from_name(state) < 0) {
    json_decref(arr);
    wr_http_reply_error(req, 400, "bad_request", "unknown state `%s`", state);
    return;
  }
  /* The table is newest first; list oldest first. */
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next) {
    if (label != NULL && !label_matches(sb, label))
      continue;
    if (state != NULL && strcmp(state, state_names[sb->state]) != 0)
      continue;
    json_array_insert_new(arr, 0, wr_sandbox_json(sb));
  }
  wr_http_reply_json(req, 200, json_pack("{s:o}", "sandboxes", arr));
}

void wr_api_sandbox_get(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);

  if (sb != NULL)
    reply_sandbox(req, 200, sb);
}

/* ---- recovery ------------------------------------------------------------ */

/* snapshots: a sandbox whose snapshot is gone (which rm refuses) cannot
 * be mounted: it is an error, never the image alone. */
static void load_snapshot_layers(struct wr_daemon *d, struct wr_sandbox *sb) {
  struct wr_snapshot_use u;
  wr_error_t err;

  if (wr_snapshot_use(d, sb->spec.snapshot, &u, &err) < 0) {
    sb->state = WR_SB_ERROR;
    free(sb->error);
    sb->error = xasprintf("its snapshot: %s", err.msg);
    sb->spec.layer_dirs = wr_strv_push(
        NULL, xasprintf("%s/snapshots/%s/layer", d->cfg.root,
                        sb->spec.snapshot)); /* a start fails, saying so */
    return;
  }
  sb->spec.layer_dirs = steal_ptr(&u.dirs);
  wr_snapshot_use_clear(&u);
}

struct wr_sandbox *wr_sandbox_from_rec(struct wr_daemon *d,
                                       const struct wr_sandbox_rec *rec,
                                       wr_error_t *err) {
  struct wr_sandbox *sb = xcalloc(1, sizeof(*sb));
  int state = state_from_name(rec->state);

  sb->d = d;
  sb->rootfd = sb->retired_rootfd = -1;
  sb->inst.pidfd = sb->inst.ctl = -1;
  sb->id = xstrdup(rec->id);
  sb->name = xstrdup(rec->name);
  sb->image = xstrdup(rec->image);
  sb->image_dir = xasprintf("%s/%s/rootfs", d->images_dir, rec->image);
  sb->slot = rec->slot;
  sb->state = state < 0 ? WR_SB_ERROR : (enum wr_sandbox_state)state;
  sb->error = rec->error ? xstrdup(rec->error) : NULL;
  sb->created_ms = rec->created_ms;
  sb->updated_ms = rec->updated_ms;
  if (spec_from_json(rec->spec_json ? rec->spec_json : "{}", &sb->spec, err) <
      0) {
    sandbox_free(sb);
    return NULL;
  }
  if (sb->spec.snapshot != NULL) /* snapshots: its stack, from the store */
    load_snapshot_layers(d, sb);
  if (sb->spec.ws_path != NULL && !sb->spec.ws_id.known)
    wr_warn("sandbox %s: its workspace `%s` was recorded without its "
            "identity, so a mount checks only its owner and that no symlink "
            "leads to it; create the sandbox again to have it checked fully",
            sb->name, sb->spec.ws_path);
  sb->next = d->sandboxes;
  d->sandboxes = sb;
  sb->refs = 1;
  return sb;
}
