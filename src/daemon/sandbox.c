/*
 * The sandbox manager: the table of sandboxes, what a sandbox looks like
 * to clients and in the store, the checks of a create request, and the
 * API handlers, which are adapters over the lifecycle's operations
 * (lifecycle.c): they check a request, call the operation, and answer
 * when it is done.
 */
#include "daemon/jobs.h"
#include "daemon/kits.h"
#include "daemon/limiter.h"
#include "daemon/pool.h"
#include "daemon/procs.h"
#include "daemon/request.h"
#include "daemon/roots.h"
#include "daemon/sandbox.h"
#include "daemon/snapshots.h"
#include "daemon/templates.h"
#include "daemon/workspaces.h"
#include "daemon/network_internal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define DEFAULT_STOP_TIMEOUT_MS 10000
#define MAX_LABELS 64

struct wr_sandbox *wr_sandbox_find(struct wr_daemon *d, const char *key) {
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (strcmp(sb->id, key) == 0)
      return sb;
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (strcmp(sb->name, key) == 0)
      return sb;
  return NULL;
}

static struct wr_sandbox *find_from_req(struct wr_daemon *d,
                                        wr_http_req_t *req) {
  const char *key = wr_http_param(req, "id");
  struct wr_sandbox *sb = key ? wr_sandbox_find(d, key) : NULL;

  if (sb == NULL)
    wr_http_reply_error(req, 404, "not_found", "no sandbox `%s`",
                        key ? key : "");
  return sb;
}

/* A warm pool's sandbox is no one's until a create claims it (pool.c). */
struct wr_sandbox *wr_sandbox_from_req(struct wr_daemon *d,
                                       wr_http_req_t *req) {
  struct wr_sandbox *sb = find_from_req(d, req);

  return sb != NULL && wr_pool_refuse(sb, req) ? NULL : sb;
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
  json_decref(s->template);    /* templates */
}

void wr_sandbox_free(struct wr_sandbox *sb) {
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
    wr_sandbox_free(sb);
}

static void on_reap(uv_timer_t *t) {
  wr_sandbox_reap(t->data);
}

void wr_sandbox_table_remove(struct wr_sandbox *sb) {
  struct wr_sandbox **pp = &sb->d->sandboxes;

  while (*pp != NULL && *pp != sb)
    pp = &(*pp)->next;
  if (*pp == sb)
    *pp = sb->next;
  if (sb->removed)
    return;
  sb->removed = true;
  sb->grave_next = sb->d->graveyard;
  sb->d->graveyard = sb;
  if (!sb->d->reaper_init && !sb->d->stopping) {
    uv_timer_init(sb->d->loop, &sb->d->reaper);
    sb->d->reaper.data = sb->d;
    sb->d->reaper_init = true;
  }
  if (sb->d->reaper_init && !sb->d->stopping)
    uv_timer_start(&sb->d->reaper, on_reap, 0, 0);
}

void wr_sandbox_reap(struct wr_daemon *d) {
  while (d->graveyard != NULL) {
    struct wr_sandbox *sb = d->graveyard;

    d->graveyard = sb->grave_next;
    /* Its processes hold references to it, and its list holds theirs:
     * the list goes first (they are gone with it), then the table's. */
    wr_procs_free_all(sb);
    wr_sandbox_unref(sb); /* the table's */
  }
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
  if (sb->removed || sb->op == WR_OP_STOPPING_TO_REMOVE ||
      sb->op == WR_OP_REMOVING)
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

/* What last woke it from paused, or null. */
static json_t *last_wake_json(const struct wr_sandbox *sb) {
  if (sb->last_wake_ms == 0)
    return json_null();
  return json_pack("{s:s,s:o}", "by", wr_wake_by_name(sb->last_wake_by), "at",
                   time_json(sb->last_wake_ms));
}

json_t *wr_sandbox_json(const struct wr_sandbox *sb) {
  bool live = sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED;
  json_t *j = json_pack(
      "{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:s,s:o,s:o,s:O,s:s,s:o,s:I,s:o}", "id",
      sb->id, "name", sb->name, "image", sb->image, "state",
      wr_sandbox_state_name(sb->state), "error",
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
  json_object_set_new(j, "last_wake", last_wake_json(sb));
  json_object_set_new(j, "idle", wr_idle_json(sb));
  json_object_set_new(j, "pooled", json_boolean(sb->pooled)); /* pool.c */
  /* templates: its start command and port, which a project restarts */
  json_object_set(j, "template",
                  sb->spec.template ? sb->spec.template : json_null());
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
  if (s->idle_pause_s >= 0)
    json_object_set_new(j, "idle_pause", json_integer(s->idle_pause_s));
  if (s->restart_start) /* pool.c */
    json_object_set_new(j, "restart_start", json_true());
  if (s->template != NULL) /* templates */
    json_object_set(j, "template", s->template);
  if (s->ws_path != NULL) {
    json_t *ws = workspace_stored(s);
    if (s->ws_id.known)
      json_object_set_new(ws, "identity", identity_json(&s->ws_id));
    json_object_set_new(j, "workspace", ws);
  }
  return wr_json_dumps(j);
}

char *wr_sandbox_spec_json(const struct wr_sandbox *sb) {
  return spec_to_json(&sb->spec);
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
  int64_t mem = 0, pids = 0, disk = 0, idle = -1;
  json_t *env = NULL, *labels = NULL, *ws = NULL, *tpl = NULL;
  const char *workdir = "/", *agent = NULL, *snapshot = NULL;
  struct wr_json_field f[] = {
      {"snapshot", WR_JSON_STRING, &snapshot, false, NULL}, /* snapshots */
      {"template", WR_JSON_OBJECT, &tpl, false, NULL},      /* templates */
      {"memory_bytes", WR_JSON_INT, &mem, false, NULL},
      {"cpus", WR_JSON_NUMBER, &s->cpus, false, NULL},
      {"pids", WR_JSON_INT, &pids, false, NULL},
      {"disk_bytes", WR_JSON_INT, &disk, false, NULL},
      {"env", WR_JSON_OBJECT, &env, false, NULL},
      {"labels", WR_JSON_OBJECT, &labels, false, NULL},
      {"workdir", WR_JSON_STRING, &workdir, false, NULL},
      {"agent", WR_JSON_STRING, &agent, false, NULL},
      {"workspace", WR_JSON_OBJECT, &ws, false, NULL},
      {"idle_pause", WR_JSON_INT, &idle, false, NULL},
      {"restart_start", WR_JSON_BOOL, &s->restart_start, false, NULL},
  };

  if (wr_json_parse_object(text, strlen(text), true, &j, err) < 0 ||
      wr_json_unpack(j, f, WR_ARRAY_SIZE(f), err) < 0)
    return -1;
  if (mem < 0 || pids < 0 || disk < 0)
    return wr_error_setx(err, EINVAL, "negative limit in the stored spec");
  s->memory_bytes = (uint64_t)mem;
  s->pids = (uint64_t)pids;
  s->idle_pause_s = idle < 0 ? -1 : idle;
  s->disk_bytes = (uint64_t)disk;
  if (env != NULL && wr_json_env(env, "env", &s->env, err) < 0)
    return -1;
  if (s->env == NULL)
    s->env = xcalloc(1, sizeof(char *));
  s->labels = labels ? json_incref(labels) : json_object();
  s->workdir = xstrdup(workdir);
  s->agent = agent ? xstrdup(agent) : NULL;
  s->snapshot = snapshot ? xstrdup(snapshot) : NULL; /* snapshots */
  s->template = tpl ? json_incref(tpl) : NULL;       /* templates */
  if (ws != NULL && workspace_from_json(ws, s, err) < 0)
    return -1;
  return 0;
}

struct create_req {
  const char *name, *image, *workdir, *agent;
  uint64_t memory, disk;
  double cpus;
  int64_t pids;
  int64_t idle_pause; /* -1: the daemon's */
  json_t *env, *labels, *workspace;
  bool start;
  bool wait;                  /* templates: for the start command to answer */
  double ready_timeout;       /* ... at most this long (0: the default) */
  bool reuse;                 /* the sandbox of that name, if there is one */
  bool pool;                  /* pool.c: take a pooled one if it can */
  bool restart_start;         /* ... and restart its start command */
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
  if (!(c->ready_timeout >= 0 && c->ready_timeout <= 86400)) /* templates */
    return wr_error_setx(err, EINVAL,
                         "ready_timeout is seconds, 0 (the default) to 86400");
  if (c->idle_pause < -1 || c->idle_pause > WR_IDLE_PAUSE_MAX)
    return wr_error_setx(err, EINVAL,
                         "idle_pause is seconds, 0 (never) to %d, not %lld",
                         WR_IDLE_PAUSE_MAX, (long long)c->idle_pause);
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
  sb->spec.idle_pause_s = c->idle_pause;
  sb->spec.restart_start = c->restart_start;
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
    wr_sandbox_free(sb);
    return NULL;
  }
  sb->image_dir = wr_template_prepare(d, sb, c->image, c->workdir != NULL,
                                      err); /* templates: or the image's */
  if (sb->image_dir == NULL) {
    wr_sandbox_free(sb);
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

struct wr_sandbox *
wr_sandbox_new_for_build(struct wr_daemon *d, const char *image,
                         char *const *layers, char *const *env,
                         const char *template_name, wr_error_t *err) {
  _cleanup_free_ char *name = wr_random_id("build-", 8);
  struct create_req c = {.name = name, .image = image, .idle_pause = 0};
  struct wr_sandbox *sb;

  c.labels = json_pack("{s:s}", "warren.template-build", template_name);
  sb = sandbox_new(d, &c, err);
  json_decref(c.labels);
  if (sb == NULL)
    return NULL;
  wr_strv_free(sb->spec.env);
  sb->spec.env = wr_strv_dup(env);
  sb->spec.layer_dirs = wr_strv_dup(layers);
  if (sandbox_insert(d, sb, err) < 0) {
    wr_sandbox_free(sb);
    return NULL;
  }
  return sb;
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
static void reply_create_err(struct wr_daemon *d, wr_http_req_t *req,
                             const wr_error_t *err) {
  if (err->code == EEXIST)
    wr_limiter_reply_error(d, req, 409, "name_conflict", "%s", err->msg);
  else if (err->code == ENOENT)
    wr_limiter_reply_error(d, req, 404, "image_not_found", "%s", err->msg);
  else if (wr_limiter_streaming(d, req))
    wr_limiter_reply_error(d, req, 500, "create_failed", "%s", err->msg);
  else
    wr_reply_err(req, err);
}

/* An operation's answer: it may come after a wait in line (limiter.c). */
static void reply_sandbox(wr_http_req_t *req, int status,
                          struct wr_sandbox *sb) {
  wr_limiter_reply_json(sb->d, req, status, wr_sandbox_json(sb));
}

static void reply_failed(struct wr_sandbox *sb, wr_http_req_t *req,
                         const char *code, const wr_error_t *err) {
  if (wr_limiter_wait_error(err))
    wr_limiter_reply_wait_err(sb->d, req, err);
  else if (wr_template_not_ready(err)) /* templates */
    wr_limiter_reply_error(sb->d, req, 504, "not_ready", "%s", err->msg);
  else
    wr_limiter_reply_error(sb->d, req, 500, code, "%s", err->msg);
}

/* An operation refused at once: 409, busy or the code the handler names
 * for a sandbox in the wrong state. */
static void reply_refused(wr_http_req_t *req, const wr_error_t *err,
                          const char *code) {
  wr_http_reply_error(req, 409, err->code == EBUSY ? "busy" : code, "%s",
                      err->msg);
}

/* A create's answer says whether it made the sandbox (201) or found it
 * (200, a create with reuse). */
static void reply_created(wr_http_req_t *req, struct wr_sandbox *sb,
                          bool reused) {
  json_t *j = wr_sandbox_json(sb);

  json_object_set_new(j, "reused", json_boolean(reused));
  json_object_set_new(j, "from_pool", json_false()); /* pool.c */
  wr_limiter_reply_json(sb->d, req, reused ? 200 : 201, j);
}

static void created(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  wr_http_req_t *req = arg;

  if (err != NULL)
    reply_failed(sb, req, "create_failed", err);
  else
    reply_created(req, sb, false);
}

/* A create request: its body (which c borrows from) and, while the
 * workspace is checked on the threadpool, the job that does it. */
struct create_job {
  struct wr_job job;
  struct wr_daemon *d;
  wr_http_req_t *req;
  json_t *body;
  struct create_req c;
  struct wr_limit_want want; /* its wait for a slot (limiter.c) */
  /* A claim of a pool's spare (pool.c): its running slot, and the
   * environment it gives the spare. */
  struct wr_limit_ticket *ticket;
  char **claim_env;
};

static void create_job_free(struct create_job *cj) {
  wr_limiter_release(cj->ticket);
  wr_strv_free(cj->claim_env);
  create_req_clear(&cj->c);
  json_decref(cj->body);
  free(cj);
}

/* ---- get-or-create ------------------------------------------------------- */

static struct wr_sandbox *find_by_name(struct wr_daemon *d, const char *name) {
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (strcmp(sb->name, name) == 0)
      return sb;
  return NULL;
}

/* What a create that reuses asks for must be what the sandbox is: the
 * options it names that cannot change (its limits, env and labels are
 * the existing sandbox's). */
static int check_reuse(const struct create_job *cj, const struct wr_sandbox *sb,
                       wr_error_t *err) {
  const struct create_req *c = &cj->c;
  json_t *ws_path = json_object_get(c->workspace, "path");
  json_t *ws_mode = json_object_get(c->workspace, "mode");
  const char *mode = ws_mode ? json_string_value(ws_mode) : "direct";

  if (json_object_get(cj->body, "image") != NULL &&
      strcmp(c->image, sb->image) != 0)
    return wr_error_setx(err, EEXIST,
                         "sandbox `%s` exists with image `%s`, not `%s`: "
                         "remove it or create it under another name",
                         sb->name, sb->image, c->image);
  if (c->agent != NULL &&
      (sb->spec.agent == NULL || strcmp(c->agent, sb->spec.agent) != 0))
    return wr_error_setx(
        err, EEXIST, "sandbox `%s` exists with agent `%s`, not `%s`", sb->name,
        sb->spec.agent ? sb->spec.agent : "none", c->agent);
  if (c->workspace != NULL &&
      (sb->spec.ws_path == NULL || !json_is_string(ws_path) ||
       strcmp(json_string_value(ws_path), sb->spec.ws_path) != 0 ||
       mode == NULL || strcmp(mode, sb->spec.ws_mode) != 0))
    return wr_error_setx(
        err, EEXIST, "sandbox `%s` exists with another workspace (%s)",
        sb->name, sb->spec.ws_path ? sb->spec.ws_path : "none");
  return 0;
}

static void reused(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  if (err != NULL)
    reply_failed(sb, arg, "start_failed", err);
  else
    reply_created(arg, sb, true);
}

/* The operation in flight (its create, say) ended: look again. */
static void reuse_again(struct wr_sandbox *sb, void *arg,
                        const wr_error_t *err) {
  (void)err;
  wr_api_sandbox_create(arg, sb->d);
}

/* The sandbox of that name exists: answer with it, running (started or
 * woken) unless the request said start: false. A create or any other
 * operation in flight is waited for, so that two of these at once make
 * one sandbox. */
static void reuse(struct create_job *cj, struct wr_sandbox *sb) {
  wr_http_req_t *req = cj->req;
  wr_error_t err;
  int rc = 0;

  if (wr_pool_refuse(sb, req)) /* a pool's, or being claimed */
    return;
  if (check_reuse(cj, sb, &err) < 0) {
    wr_limiter_reply_error(sb->d, req, 409, "conflict", "%s", err.msg);
    return;
  }
  if (sb->op != WR_OP_NONE) {
    wr_sandbox_wait(sb, reuse_again, req);
    return;
  }
  if (!cj->c.start || sb->state == WR_SB_RUNNING)
    reply_created(req, sb, true);
  else
    rc = wr_limiter_start(sb, &cj->want, false, req, reused, req, &err);
  /* This create may have waited in line (and streamed) already. */
  if (rc < 0)
    wr_limiter_reply_error(sb->d, req, 409,
                           err.code == EBUSY ? "busy" : "not_running", "%s",
                           err.msg);
}

/* ---- warm pools (pool.c) ---------------------------------------------- */

static bool create_go(struct wr_daemon *d, struct create_job *cj);

struct wr_sandbox *wr_sandbox_add(struct wr_daemon *d, const char *name,
                                  const char *image, const char *pool_state,
                                  wr_error_t *err) {
  struct create_req c = {.name = name,
                         .image = image,
                         .disk = d->cfg.default_disk,
                         .idle_pause = -1,
                         .start = true};
  struct wr_sandbox *sb = sandbox_new(d, &c, err);

  if (sb == NULL)
    return NULL;
  if (wr_store_begin(d->store, err) < 0) {
    wr_sandbox_free(sb);
    return NULL;
  }
  if (sandbox_insert(d, sb, err) < 0) {
    wr_store_rollback(d->store);
    wr_sandbox_free(sb);
    return NULL;
  }
  if ((pool_state != NULL &&
       wr_store_sandbox_set_pool(d->store, sb->id, pool_state, err) < 0) ||
      wr_store_commit(d->store, err) < 0) {
    wr_store_rollback(d->store);
    wr_daemon_release_slot(d, sb->id);
    wr_sandbox_table_remove(sb);
    return NULL;
  }
  return sb;
}

static void claimed(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  struct create_job *cj = arg;
  json_t *j;

  wr_limiter_release(cj->ticket); /* it is running, or made the usual way */
  cj->ticket = NULL;
  if (err != NULL) { /* make one the usual way */
    wr_info("create: %s; creating a sandbox of `%s` without the pool", err->msg,
            cj->c.image);
    if (create_go(sb->d, cj))
      return;
  } else {
    j = wr_sandbox_json(sb);
    json_object_set_new(j, "reused", json_false());
    json_object_set_new(j, "from_pool", json_true());
    wr_limiter_reply_json(sb->d, cj->req, 201, j);
  }
  create_job_free(cj);
}

/* With a running slot (cj->ticket; the spare is resident already): take
 * a spare, or, when none is left, make the sandbox the usual way. */
static void claim_now(struct wr_daemon *d, struct create_job *cj) {
  struct create_req *c = &cj->c;
  struct wr_pool_claim cl = {.image = c->image};
  int rc;

  cl.env = steal_ptr(&cj->claim_env);
  cl.name = c->name ? xstrdup(c->name) : NULL;
  cl.labels = c->labels ? json_deep_copy(c->labels) : json_object();
  cl.workdir = xstrdup(c->workdir ? c->workdir : "/");
  cl.memory_bytes = c->memory;
  cl.cpus = c->cpus;
  cl.pids = (uint64_t)c->pids;
  cl.disk_bytes = c->disk;
  cl.idle_pause_s = c->idle_pause;
  cl.restart_start = c->restart_start;
  rc = wr_pool_claim(d, &cl, claimed, cj);
  wr_pool_claim_clear(&cl);
  if (rc == 0)
    return;
  wr_limiter_release(cj->ticket);
  cj->ticket = NULL;
  if (!create_go(d, cj))
    create_job_free(cj);
}

static void claim_granted(struct wr_limit_ticket *t, void *arg,
                          const wr_error_t *err) {
  struct create_job *cj = arg;

  if (err != NULL) {
    wr_limiter_reply_wait_err(cj->d, cj->req, err);
    create_job_free(cj);
    return;
  }
  cj->ticket = t;
  claim_now(cj->d, cj);
}

/*
 * A create that a pooled sandbox can be takes one: 0 when it does (cj is
 * kept, and the request answered when the claim ends), 1 when it must
 * make its own. What a pooled sandbox cannot become (docs/templates.md
 * lists it): one that stays stopped, has a workspace, a snapshot or an
 * agent, or another disk limit than the pool's sandboxes. The claim needs
 * a running slot (the limiter's; it may wait in line for one).
 */
static int from_pool(struct wr_daemon *d, struct create_job *cj) {
  struct create_req *c = &cj->c;
  struct wr_limit_want want = cj->want;
  wr_error_t err;

  if (!c->pool || !c->start || c->workspace != NULL || c->snapshot != NULL ||
      c->agent != NULL || !wr_pool_has_ready(d, c->image, c->disk))
    return 1;
  if (merge_env(c, &cj->claim_env, &err) < 0) {
    wr_strv_free(steal_ptr(&cj->claim_env));
    return 1; /* the usual way says what is wrong with it */
  }
  cj->d = d;
  want.resident = false;
  if (wr_limiter_acquire_http(d, cj->req, &want, claim_granted, cj,
                              &cj->ticket) == 1)
    claim_now(d, cj);
  return 0;
}

/* Make the sandbox, holding its slot t (NULL: it needs none). */
static void create_now(struct wr_daemon *d, struct create_job *cj,
                       struct wr_limit_ticket *t) {
  struct create_req *c = &cj->c;
  wr_http_req_t *req = cj->req;
  struct wr_sandbox *sb = NULL;
  wr_error_t err;

  /* The workspace check or the wait took a while: the name may be taken
   * by now, and a create with reuse then takes that sandbox. */
  if (c->reuse && find_by_name(d, c->name) != NULL) {
    wr_limiter_release(t);
    wr_api_sandbox_create(req, d);
    return;
  }
  if (c->name != NULL && wr_sandbox_find(d, c->name) != NULL)
    wr_error_setx(&err, EEXIST, "a sandbox named `%s` already exists", c->name);
  else if ((sb = sandbox_new(d, c, &err)) != NULL &&
           sandbox_insert(d, sb, &err) < 0)
    wr_sandbox_free(sb);
  else if (sb != NULL && c->has_kit && kit_rules(d, sb, &c->kit, &err) < 0) {
    wr_store_sandbox_delete(d->store, sb->id, NULL);
    wr_sandbox_table_remove(sb);
  } else if (sb != NULL) {
    sb->tpl.no_wait = !c->wait; /* templates */
    sb->tpl.ready_timeout_s = c->ready_timeout;
    wr_sandbox_create(sb, c->start, wr_limiter_release_then,
                      wr_limiter_hold(t, created, req));
    return;
  }
  wr_limiter_release(t);
  reply_create_err(d, req, &err);
}

static void create_granted(struct wr_limit_ticket *t, void *arg,
                           const wr_error_t *err) {
  struct create_job *cj = arg;

  if (err != NULL)
    wr_limiter_reply_wait_err(cj->d, cj->req, err);
  else
    create_now(cj->d, cj, t);
  create_job_free(cj);
}

/* Everything is checked: a create that starts waits for a slot (the row
 * is made only then, so that `ls` shows no sandbox that is not there).
 * True when cj was kept for that wait. */
static bool create_go(struct wr_daemon *d, struct create_job *cj) {
  struct wr_limit_ticket *t = NULL;

  cj->d = d;
  if (cj->c.start && wr_limiter_acquire_http(d, cj->req, &cj->want,
                                             create_granted, cj, &t) == 0)
    return true;
  create_now(d, cj, t);
  return false;
}

static void workspace_work(struct wr_job *job) {
  struct create_job *cj = job->arg;

  job->result = wr_ws_check_host(&cj->c.ws, &job->err);
}

static void workspace_done(struct wr_job *job) {
  struct create_job *cj = job->arg;

  if (job->result < 0)
    reply_create_err(job->d, cj->req, &job->err);
  else if (create_go(job->d, cj))
    return;
  create_job_free(cj);
}

/* The wait's own timeout: the body's queue_timeout, else the query's. */
static int check_queue(wr_http_req_t *req, struct wr_limit_want *w,
                       int64_t seconds) {
  if (seconds < 0 || seconds > WR_LIMIT_QUEUE_TIMEOUT_MAX) {
    wr_http_reply_error(req, 400, "bad_request",
                        "queue_timeout must be between 0 and %d seconds",
                        WR_LIMIT_QUEUE_TIMEOUT_MAX);
    return -1;
  }
  if (wr_limiter_http_want(req, w) < 0)
    return -1;
  if (seconds > 0)
    w->timeout_ms = (uint64_t)seconds * 1000;
  return 0;
}

void wr_api_sandbox_create(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct create_job *cj = xcalloc(1, sizeof(*cj));
  struct create_req *c = &cj->c;
  int64_t queue_timeout = 0;
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
      {"reuse", WR_JSON_BOOL, &c->reuse, false, NULL},
      {"snapshot", WR_JSON_STRING, &c->snapshot, false, NULL}, /* snapshots */
      {"idle_pause", WR_JSON_INT, &c->idle_pause, false, NULL},
      {"pool", WR_JSON_BOOL, &c->pool, false, NULL},
      {"restart_start", WR_JSON_BOOL, &c->restart_start, false, NULL},
      /* limiter.c: stream the place in line; wait at most this long */
      {"stream", WR_JSON_BOOL, &cj->want.stream, false, NULL},
      {"queue_timeout", WR_JSON_INT, &queue_timeout, false, NULL},
      {"wait", WR_JSON_BOOL, &c->wait, false, NULL}, /* templates */
      {"ready_timeout", WR_JSON_NUMBER, &c->ready_timeout, false, NULL},
  };
  struct wr_sandbox *sb;
  wr_error_t err;

  cj->req = req;
  cj->want.what = "create";
  cj->want.resident = true;
  c->wait = true;
  c->image = d->cfg.default_image;
  c->disk = d->cfg.default_disk;
  c->idle_pause = -1;
  c->start = true;
  c->pool = true;
  c->ws.state_root = d->cfg.root;
  cj->body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  if (cj->body != NULL && check_queue(req, &cj->want, queue_timeout) < 0) {
    create_job_free(cj);
    return;
  }
  if (cj->body != NULL && c->reuse && c->name == NULL) {
    wr_http_reply_error(req, 400, "bad_request",
                        "reuse needs a name: the sandbox to reuse");
    create_job_free(cj);
    return;
  }
  if (cj->body != NULL && c->reuse && (sb = find_by_name(d, c->name)) != NULL) {
    reuse(cj, sb);
    create_job_free(cj);
    return;
  }
  if (cj->body == NULL || check_create(d, c, &err) < 0) {
    if (cj->body != NULL)
      reply_create_err(d, req, &err);
    create_job_free(cj);
    return;
  }
  if (c->workspace == NULL && from_pool(d, cj) == 0)
    return;
  if (c->workspace == NULL) {
    if (!create_go(d, cj))
      create_job_free(cj);
    return;
  }
  cj->job.fn = workspace_work;
  cj->job.done = workspace_done;
  cj->job.arg = cj;
  wr_job_queue(d, &cj->job);
}

/* ---- lifecycle handlers ---------------------------------------------- */

static void started(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  wr_http_req_t *req = arg;

  if (err != NULL)
    reply_failed(sb, req, "start_failed", err);
  else
    reply_sandbox(req, 200, sb);
}

/* A pause or resume ended; a stop may have taken it over (409). */
static void frozen_or_thawed(struct wr_sandbox *sb, wr_http_req_t *req,
                             const wr_error_t *err,
                             enum wr_sandbox_state want) {
  if (err != NULL)
    reply_failed(sb, req, "internal", err);
  else
    reply_sandbox(req, sb->state == want ? 200 : 409, sb);
}

static void paused(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  frozen_or_thawed(sb, arg, err, WR_SB_PAUSED);
}

static void resumed(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  frozen_or_thawed(sb, arg, err, WR_SB_RUNNING);
}

/* Both wait for a slot when the limiter says so (limiter.c). */
void wr_api_sandbox_start(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  struct wr_limit_want w = {.what = "start"};
  bool paused;
  wr_error_t err;

  if (sb == NULL || wr_limiter_http_want(req, &w) < 0)
    return;
  /* Start means "make it run": a paused one is resumed. */
  paused = sb->op == WR_OP_NONE && sb->state == WR_SB_PAUSED;
  if (wr_limiter_start(sb, &w, false, req, paused ? resumed : started, req,
                       &err) < 0)
    reply_refused(req, &err, "not_running");
}

static void stopped(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  (void)err; /* a failed clean up is logged; the sandbox is stopped */
  reply_sandbox(arg, 200, sb);
}

void wr_api_sandbox_stop(wr_http_req_t *req, void *ctx) {
  double timeout = DEFAULT_STOP_TIMEOUT_MS / 1000.0;
  struct wr_json_field f[] = {
      {"timeout", WR_JSON_NUMBER, &timeout, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  struct wr_sandbox *sb;
  wr_error_t err;

  if (body == NULL)
    return;
  if (timeout < 0 || timeout > 3600) {
    wr_http_reply_error(req, 400, "bad_request",
                        "timeout must be between 0 and 3600 seconds");
    return;
  }
  sb = wr_sandbox_from_req(ctx, req);
  if (sb != NULL &&
      wr_sandbox_stop(sb, (uint64_t)(timeout * 1000), stopped, req, &err) < 0)
    reply_refused(req, &err, "not_running");
}

void wr_api_sandbox_pause(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  wr_error_t err;

  if (sb != NULL && wr_sandbox_pause(sb, paused, req, &err) < 0)
    reply_refused(req, &err, "not_running");
}

static void restarted(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  if (err != NULL)
    reply_failed(sb, arg, "start_failed", err);
  else
    reply_sandbox(arg, 200, sb);
}

/* A template's start command again, once the files under it changed (a
 * project's checkout and install, src/projects/open.c); the reply comes
 * once its port answers, or 504 not_ready. */
void wr_api_sandbox_restart_start(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  wr_error_t err;
  int rootfd;

  /* The start command is spawned in the sandbox's root, which a daemon
   * that restarted opens on first use. */
  if (sb == NULL ||
      !wr_sandbox_root_ready(sb, req, wr_api_sandbox_restart_start, &rootfd))
    return;
  if (wr_template_restart(sb, restarted, req, &err) < 0)
    reply_refused(req, &err, "not_running");
}

void wr_api_sandbox_resume(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  struct wr_limit_want w = {.what = "resume"};
  wr_error_t err;

  if (sb != NULL && wr_limiter_http_want(req, &w) == 0 &&
      wr_limiter_start(sb, &w, true, req, resumed, req, &err) < 0)
    reply_refused(req, &err, "not_running");
}

static void removed(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  (void)sb;
  if (err != NULL)
    wr_http_reply_error(arg, 500, "remove_failed", "%s", err->msg);
  else
    wr_http_reply_empty(arg, 204);
}

void wr_api_sandbox_delete(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb;
  wr_error_t err;
  bool force;

  if (wr_req_bool(req, "force", false, &force) < 0)
    return;
  sb = wr_sandbox_from_req(ctx, req);
  if (sb != NULL && wr_sandbox_remove(sb, force, removed, req, &err) < 0)
    reply_refused(req, &err, "not_stopped");
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
  json_t *arr;
  bool all;

  if (wr_req_bool(req, "all", false, &all) < 0)
    return;
  arr = json_array();

  if (state != NULL && wr_sandbox_state_from_name(state) < 0) {
    json_decref(arr);
    wr_http_reply_error(req, 400, "bad_request", "unknown state `%s`", state);
    return;
  }
  /* The table is newest first; list oldest first. */
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next) {
    if (label != NULL && !label_matches(sb, label))
      continue;
    if (state != NULL && strcmp(state, wr_sandbox_state_name(sb->state)) != 0)
      continue;
    if (sb->pooled && !all) /* pool.c: ?all=1 shows them */
      continue;
    json_array_insert_new(arr, 0, wr_sandbox_json(sb));
  }
  wr_http_reply_json(req, 200, json_pack("{s:o}", "sandboxes", arr));
}

void wr_api_sandbox_get(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = find_from_req(ctx, req); /* pooled ones too */

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
  int state = wr_sandbox_state_from_name(rec->state);

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
    wr_sandbox_free(sb);
    return NULL;
  }
  if (sb->spec.snapshot != NULL) /* snapshots: its stack, from the store */
    load_snapshot_layers(d, sb);
  if (sb->spec.template != NULL) /* templates: its layers, its image */
    wr_template_load(d, sb);
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
