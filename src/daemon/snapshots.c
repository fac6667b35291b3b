/*
 * Disk snapshots: /v1/snapshots and POST /v1/sandboxes/{id}/snapshots.
 *
 * A snapshot is ROOT/snapshots/ID/layer, a read-only copy of a sandbox's
 * own layer (runtime/layers.h), and a row in the store. A sandbox made
 * from it stacks its layers (this one's and its parents', newest first,
 * layers_json) under its own upper with no copy; its spec names the
 * snapshot, so removing a snapshot that a sandbox or a later snapshot's
 * stack uses is refused, and the two can never disagree after a crash.
 *
 * A capture runs on the threadpool while the sandbox is marked busy (no
 * stop, pause or rm meanwhile). Its row is written first in state
 * "creating" and turned "ready" once the layer is complete;
 * a daemon that dies in between leaves a "creating" row, which the next
 * one removes with its directory, thawing the source if the capture had
 * it frozen. Directories without a row go too.
 *
 * A snapshot is ready (and usable: a fork's create follows at once) when
 * its layer is complete; it is synced to disk after that, by one syncfs
 * (see sync_run) for every snapshot that became ready since the last one
 * ("synced" in the API, a "snapshot" event with phase "synced"). The
 * sync of a 200 MB layer takes as long as its copy, and nothing in the
 * fork needs it: only what deletes the source afterwards (a demote) must
 * wait for it. Ready snapshots found at a start count as synced: the
 * kernel's writeback has had them since the last daemon.
 *
 * Retention: a snapshot with an expiry is removed once it has passed and
 * nothing uses it, checked at start and every EXPIRY_CHECK_MS.
 */
#include "daemon/daemon_internal.h"
#include "daemon/events.h"
#include "daemon/jobs.h"
#include "daemon/request.h"
#include "runtime/layer_stream.h"
#include "runtime/layers.h"

#include <dirent.h>
#include <inttypes.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#define EXPIRY_CHECK_MS (60 * 1000)
#define MAX_RETENTION_DAYS 36500.0

/*
 * The sync is `sync -f ROOT/snapshots` (syncfs(2)) in a process of its
 * own session rather than on a worker thread: a thread in syncfs cannot
 * die until the disk has its data, so a SIGKILLed warrend would hold its
 * state-root lock (and keep its successor out) for as long as the
 * writeback takes. The process outlives a daemon that dies and finishes
 * the job; the next daemon counts every ready snapshot as synced.
 */
struct sync_run {
  uv_process_t proc;
  struct wr_daemon *d; /* NULL once the daemon shut down */
  char **ids;          /* what this sync puts on disk */
};

static void sync_closed(uv_handle_t *h);

struct wr_snapshots {
  uv_timer_t timer;
  bool timer_init;
  char *dir; /* ROOT/snapshots */
  /* Ready snapshots not yet on disk and not in the sync that runs (if
   * one does: its list is its own). NULL-ended. */
  char **unsynced;
  struct sync_run *sync;
};

static char *snap_dir(struct wr_daemon *d, const char *id) {
  return xasprintf("%s/%s", d->snapshots->dir, id);
}

static char *layer_dir(struct wr_daemon *d, const char *id) {
  return xasprintf("%s/%s/layer", d->snapshots->dir, id);
}

static bool valid_id(const char *id) {
  if (!wr_str_has_prefix(id, "snap-") || strlen(id) > 32)
    return false;
  for (const char *p = id + 5; *p != '\0'; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
      return false;
  return id[5] != '\0';
}

/* The ids in a stored layers_json, newest first (NULL-ended; caller
 * frees). Written by us, still checked: a bad id is never a path. */
static char **layer_ids(const char *layers_json, wr_error_t *err) {
  _cleanup_json_ json_t *j = NULL;
  json_error_t je;
  char **ids = xcalloc(1, sizeof(char *));
  size_t i;
  json_t *v;

  j = json_loads(layers_json ? layers_json : "", 0, &je);
  if (!json_is_array(j) || json_array_size(j) == 0 ||
      json_array_size(j) > WR_LAYERS_MAX_DEPTH) {
    wr_strv_free(ids);
    wr_error_setx(err, EINVAL, "a snapshot's stored layers are unreadable");
    return NULL;
  }
  json_array_foreach (j, i, v) {
    if (!json_is_string(v) || !valid_id(json_string_value(v))) {
      wr_strv_free(ids);
      wr_error_setx(err, EINVAL, "a snapshot's stored layers are unreadable");
      return NULL;
    }
    ids = wr_strv_push(ids, json_string_value(v));
  }
  return ids;
}

static bool strv_has(char *const *v, const char *s) {
  for (size_t i = 0; v != NULL && v[i] != NULL; i++)
    if (strcmp(v[i], s) == 0)
      return true;
  return false;
}

/* Drop every s from the NULL-ended v, in place. */
static void strv_remove(char **v, const char *s) {
  size_t k = 0;

  for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
    if (strcmp(v[i], s) == 0)
      free(v[i]);
    else
      v[k++] = v[i];
  }
  if (v != NULL)
    v[k] = NULL;
}

/* ---- users ----------------------------------------------------------------
 */

/* What uses snapshot `id`: sandboxes made from it and snapshots whose
 * stack holds its layer. [{"sandbox": NAME} | {"snapshot": NAME}]. */
static json_t *users_of(struct wr_daemon *d, const char *id) {
  json_t *users = json_array();
  struct wr_snapshot_rec *recs = NULL;
  size_t n = 0;

  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (sb->spec.snapshot != NULL && strcmp(sb->spec.snapshot, id) == 0)
      json_array_append_new(users, json_pack("{s:s}", "sandbox", sb->name));
  if (wr_store_snapshot_list(d->store, &recs, &n, NULL) == 0) {
    for (size_t i = 0; i < n; i++) {
      char **ids;
      if (strcmp(recs[i].id, id) == 0)
        continue;
      ids = layer_ids(recs[i].layers_json, NULL);
      if (strv_has(ids, id))
        json_array_append_new(users,
                              json_pack("{s:s}", "snapshot", recs[i].name));
      wr_strv_free(ids);
    }
  }
  wr_snapshot_recs_free(recs, n);
  return users;
}

static char *users_text(json_t *users) {
  wr_buf_t b;
  size_t i;
  json_t *u;
  char *s;

  wr_buf_init(&b);
  json_array_foreach (users, i, u) {
    const char *k = json_object_get(u, "sandbox") ? "sandbox" : "snapshot";
    wr_buf_printf(&b, "%s%s `%s`", i ? ", " : "", k,
                  json_string_value(json_object_get(u, k)));
  }
  wr_buf_append(&b, "", 1);
  s = xstrdup(b.data);
  wr_buf_free(&b);
  return s;
}

/* ---- JSON -----------------------------------------------------------------
 */

static bool is_synced(struct wr_daemon *d, const char *id) {
  /* After shutdown (a capture's answer can come later) nothing is known. */
  if (d->snapshots == NULL)
    return false;
  return !strv_has(d->snapshots->unsynced, id) &&
         (d->snapshots->sync == NULL || !strv_has(d->snapshots->sync->ids, id));
}

static json_t *time_or_null(int64_t ms) {
  char buf[40];

  if (ms <= 0)
    return json_null();
  wr_format_time(ms, buf, sizeof(buf));
  return json_string(buf);
}

static json_t *snapshot_json(struct wr_daemon *d,
                             const struct wr_snapshot_rec *r) {
  _cleanup_json_ json_t *layers = json_loads(r->layers_json, 0, NULL);
  json_t *info = r->info_json ? json_loads(r->info_json, 0, NULL) : NULL;
  int64_t now = wr_now_ms();
  json_t *j;

  j = json_pack(
      "{s:s,s:s,s:s,s:s,s:o,s:o,s:O,s:I,s:I,s:o,s:I,s:o,s:o,s:o}", "id", r->id,
      "name", r->name, "state", r->state, "image", r->image, "source",
      r->source_id
          ? json_pack("{s:s,s:s?}", "id", r->source_id, "name", r->source_name)
          : json_null(),
      "parent", r->parent_id ? json_string(r->parent_id) : json_null(),
      "layers", layers ? layers : json_array(), "depth",
      (json_int_t)json_array_size(layers), "size_bytes",
      (json_int_t)r->size_bytes, "created_at", time_or_null(r->created_ms),
      "age_s", (json_int_t)((now - r->created_ms) / 1000), "expires_at",
      time_or_null(r->expires_ms), "used_by", users_of(d, r->id), "capture",
      info ? info : json_null());
  json_object_set_new(
      j, "synced",
      json_boolean(strcmp(r->state, "ready") == 0 && is_synced(d, r->id)));
  return j;
}

/* ---- removing ---------------------------------------------------------------
 */

struct rm_job {
  struct wr_job job;
  char *dir;
  wr_http_req_t *req;
};

static void rm_work(struct wr_job *job) {
  struct rm_job *j = job->arg;

  job->result = wr_rm_rf(j->dir, &job->err);
}

static void rm_done(struct wr_job *job) {
  struct rm_job *j = job->arg;

  if (job->result < 0)
    wr_warn("remove %s: %s", j->dir, job->err.msg);
  if (j->req != NULL)
    wr_http_reply_empty(j->req, 204);
  free(j->dir);
  free(j);
}

/* The row goes first: a daemon that dies before the directory is gone
 * removes it at its next start, as it does any directory without a row. */
static int remove_snapshot(struct wr_daemon *d, const char *id,
                           wr_http_req_t *req, wr_error_t *err) {
  struct rm_job *j;

  if (wr_store_snapshot_delete(d->store, id, err) < 0)
    return -1;
  /* Not waiting for a sync any more (one in flight skips it). */
  strv_remove(d->snapshots->unsynced, id);
  j = xcalloc(1, sizeof(*j));
  j->dir = snap_dir(d, id);
  j->req = req;
  j->job.fn = rm_work;
  j->job.done = rm_done;
  j->job.arg = j;
  wr_job_queue(d, &j->job);
  return 0;
}

static void expire(struct wr_daemon *d) {
  struct wr_snapshot_rec *recs = NULL;
  size_t n = 0;
  int64_t now = wr_now_ms();

  if (wr_store_snapshot_list(d->store, &recs, &n, NULL) < 0)
    return;
  for (size_t i = 0; i < n; i++) {
    _cleanup_json_ json_t *users = NULL;
    if (strcmp(recs[i].state, "ready") != 0 || recs[i].expires_ms <= 0 ||
        now < recs[i].expires_ms)
      continue;
    users = users_of(d, recs[i].id);
    if (json_array_size(users) > 0)
      continue;
    wr_info("snapshot %s (%s): retention over, removing", recs[i].name,
            recs[i].id);
    remove_snapshot(d, recs[i].id, NULL, NULL);
  }
  wr_snapshot_recs_free(recs, n);
}

static void on_expiry_timer(uv_timer_t *t) {
  expire(t->data);
}

/* ---- start and stop
 * ----------------------------------------------------------- */

int wr_snapshots_init(struct wr_daemon *d, wr_error_t *err) {
  struct wr_snapshots *s = xcalloc(1, sizeof(*s));

  d->snapshots = s;
  s->dir = xasprintf("%s/snapshots", d->cfg.root);
  if (wr_mkdir_p(s->dir, 0700, err) < 0)
    return -1;
  if (chmod(s->dir, 0700) < 0)
    return wr_error_set(err, errno, "chmod `%s`", s->dir);
  return 0;
}

/* A capture that a dead daemon left: its source may still be frozen. */
static void forget_interrupted(struct wr_daemon *d,
                               const struct wr_snapshot_rec *r) {
  struct wr_sandbox *sb =
      r->source_id ? wr_sandbox_find(d, r->source_id) : NULL;
  _cleanup_free_ char *dir = snap_dir(d, r->id);
  wr_error_t err;

  if (sb != NULL && sb->state == WR_SB_RUNNING &&
      wr_rt_freeze(d->rt, sb->id, false, &err) < 0)
    wr_warn("sandbox %s: thaw after an interrupted snapshot: %s", sb->name,
            err.msg);
  wr_info("snapshot %s: interrupted by a daemon restart, removed", r->name);
  wr_store_snapshot_delete(d->store, r->id, NULL);
  wr_rm_rf(dir, NULL);
}

/* Directories that no row names (removed, or never recorded). */
static void remove_strays(struct wr_daemon *d) {
  DIR *dir = opendir(d->snapshots->dir);
  struct dirent *e;

  if (dir == NULL)
    return;
  while ((e = readdir(dir)) != NULL) {
    struct wr_snapshot_rec r;
    if (e->d_name[0] == '.')
      continue;
    if (valid_id(e->d_name) &&
        wr_store_snapshot_get(d->store, e->d_name, &r, NULL) == 0) {
      wr_snapshot_rec_free(&r);
      continue;
    }
    wr_info("snapshots: removing `%s`, which no snapshot owns", e->d_name);
    wr_rm_rf_at(dirfd(dir), e->d_name, NULL);
  }
  closedir(dir);
}

void wr_snapshots_recover(struct wr_daemon *d) {
  struct wr_snapshot_rec *recs = NULL;
  size_t n = 0;
  struct wr_snapshots *s = d->snapshots;

  if (wr_store_snapshot_list(d->store, &recs, &n, NULL) == 0)
    for (size_t i = 0; i < n; i++)
      if (strcmp(recs[i].state, "ready") != 0)
        forget_interrupted(d, &recs[i]);
  wr_snapshot_recs_free(recs, n);
  remove_strays(d);
  expire(d);
  uv_timer_init(d->loop, &s->timer);
  s->timer.data = d;
  s->timer_init = true;
  uv_timer_start(&s->timer, on_expiry_timer, EXPIRY_CHECK_MS, EXPIRY_CHECK_MS);
  uv_unref((uv_handle_t *)&s->timer);
}

static void snapshots_free(struct wr_daemon *d) {
  /* A sync in flight goes on by itself; its handle closes with the loop. */
  if (d->snapshots->sync != NULL) {
    d->snapshots->sync->d = NULL;
    uv_close((uv_handle_t *)&d->snapshots->sync->proc, sync_closed);
  }
  wr_strv_free(d->snapshots->unsynced);
  free(d->snapshots->dir);
  free(d->snapshots);
  d->snapshots = NULL;
}

static void timer_closed(uv_handle_t *h) {
  snapshots_free(h->data);
}

void wr_snapshots_shutdown(struct wr_daemon *d) {
  struct wr_snapshots *s = d->snapshots;

  if (s == NULL)
    return;
  if (s->timer_init) {
    s->timer_init = false;
    uv_close((uv_handle_t *)&s->timer, timer_closed);
    return;
  }
  snapshots_free(d);
}

/* ---- a sandbox made from a snapshot
 * ------------------------------------------- */

int wr_snapshot_use(struct wr_daemon *d, const char *key,
                    struct wr_snapshot_use *u, wr_error_t *err) {
  struct wr_snapshot_rec r;
  char **ids;

  memset(u, 0, sizeof(*u));
  if (wr_store_snapshot_get(d->store, key, &r, err) < 0)
    return -1;
  if (strcmp(r.state, "ready") != 0) {
    wr_snapshot_rec_free(&r);
    return wr_error_setx(err, EBUSY, "snapshot `%s` is not ready yet", key);
  }
  if ((ids = layer_ids(r.layers_json, err)) == NULL) {
    wr_snapshot_rec_free(&r);
    return -1;
  }
  u->id = steal_ptr(&r.id);
  u->image = steal_ptr(&r.image);
  u->n = wr_strv_len(ids);
  u->dirs = xcalloc(u->n + 1, sizeof(char *));
  for (size_t i = 0; i < u->n; i++)
    u->dirs[i] = layer_dir(d, ids[i]);
  u->ids = ids;
  wr_snapshot_rec_free(&r);
  return 0;
}

void wr_snapshot_use_clear(struct wr_snapshot_use *u) {
  free(u->id);
  free(u->image);
  wr_strv_free(u->dirs);
  wr_strv_free(u->ids);
  memset(u, 0, sizeof(*u));
}

/* ---- syncing
 * ---------------------------------------------------------------------- */

static void sync_kick(struct wr_daemon *d);

static void sync_closed(uv_handle_t *h) {
  struct sync_run *run = h->data;
  struct wr_daemon *d = run->d;

  wr_strv_free(run->ids);
  free(run);
  if (d != NULL && d->snapshots != NULL) {
    d->snapshots->sync = NULL;
    if (!d->stopping)
      sync_kick(d);
  }
}

/* Not called once the handle is closed: run->d is set. */
static void sync_exited(uv_process_t *p, int64_t status, int sig) {
  struct sync_run *run = p->data;
  struct wr_daemon *d = run->d;

  if (status != 0 || sig != 0) {
    /* Not on disk yet: the next sync takes them again. */
    wr_warn("snapshots: `sync -f %s` failed (status %" PRId64 ", signal %d)",
            d->snapshots->dir, status, sig);
    for (size_t i = 0; run->ids[i] != NULL; i++)
      d->snapshots->unsynced =
          wr_strv_push(d->snapshots->unsynced, run->ids[i]);
  } else {
    for (size_t i = 0; run->ids[i] != NULL; i++) {
      struct wr_snapshot_rec r;
      if (wr_store_snapshot_get(d->store, run->ids[i], &r, NULL) < 0)
        continue; /* removed meanwhile */
      wr_events_emit(d, "snapshot", NULL,
                     json_pack("{s:s,s:s,s:s}", "snapshot", r.name,
                               "snapshot_id", r.id, "phase", "synced"));
      wr_snapshot_rec_free(&r);
    }
  }
  uv_close((uv_handle_t *)p, sync_closed);
}

/* Sync what is waiting, unless a sync runs (its end starts the next). */
static void sync_kick(struct wr_daemon *d) {
  struct wr_snapshots *s = d->snapshots;
  char *argv[] = {"sync", "-f", s->dir, NULL};
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_IGNORE}, {.flags = UV_IGNORE}, {.flags = UV_IGNORE}};
  uv_process_options_t opt = {.file = "sync",
                              .args = argv,
                              .stdio = stdio,
                              .stdio_count = 3,
                              .flags = UV_PROCESS_DETACHED,
                              .exit_cb = sync_exited};
  struct sync_run *run;
  int r;

  if (s->sync != NULL || wr_strv_len(s->unsynced) == 0)
    return;
  run = xcalloc(1, sizeof(*run));
  run->d = d;
  run->ids = steal_ptr(&s->unsynced);
  run->proc.data = run;
  r = uv_spawn(d->loop, &run->proc, &opt);
  if (r < 0) {
    /* They stay unsynced until the next snapshot tries again. */
    wr_warn("snapshots: run sync: %s", uv_strerror(r));
    s->unsynced = steal_ptr(&run->ids);
    run->d = NULL;
    uv_close((uv_handle_t *)&run->proc, sync_closed);
    return;
  }
  uv_unref((uv_handle_t *)&run->proc);
  s->sync = run;
}

/* A snapshot that just became ready goes to disk with the next sync
 * (none after shutdown: the next daemon counts it as synced). */
static void sync_later(struct wr_daemon *d, const char *id) {
  if (d->snapshots == NULL)
    return;
  d->snapshots->unsynced = wr_strv_push(d->snapshots->unsynced, id);
  sync_kick(d);
}

/* ---- taking one
 * ------------------------------------------------------------------ */

struct snap_job {
  struct wr_job job;
  struct wr_sandbox *sb;
  wr_http_req_t *req;
  struct wr_rt_spec spec;
  char *id, *dir;
  char **flatten; /* the stack below, oldest first, when flattening */
  struct wr_snap_capture cap;
  struct wr_layer_stats stats;
  double flatten_ms;
};

static void snap_job_free(struct snap_job *j) {
  free(j->id);
  free(j->dir);
  wr_strv_free(j->flatten);
  free(j);
}

/* Deep stacks: capture into DIR/upper, then stack every layer below
 * and it into DIR/layer (after the thaw: the sandbox does not wait). */
static int capture_flat(struct wr_runtime *rt, struct snap_job *j,
                        const char *layer, wr_error_t *err) {
  _cleanup_free_ char *upper = xasprintf("%s/upper", j->dir);
  size_t n = wr_strv_len(j->flatten);
  uint64_t t0;
  int r;

  if (wr_rt_snapshot_capture(rt, &j->spec, upper, &j->cap, err) < 0)
    return -1;
  j->flatten = wr_strv_push(j->flatten, upper);
  t0 = wr_mono_ns();
  r = wr_layer_flatten((const char *const *)j->flatten, n + 1, layer, &j->stats,
                       err);
  j->flatten_ms = (double)(wr_mono_ns() - t0) / 1e6;
  if (r < 0)
    return -1;
  return wr_rm_rf(upper, err);
}

static void snap_work(struct wr_job *job) {
  struct snap_job *j = job->arg;
  _cleanup_free_ char *layer = xasprintf("%s/layer", j->dir);
  int r;

  if (mkdir(j->dir, 0700) < 0) {
    job->result = wr_error_set(&job->err, errno, "mkdir `%s`", j->dir);
    return;
  }
  r = j->flatten ? capture_flat(job->d->rt, j, layer, &job->err)
                 : wr_rt_snapshot_capture(job->d->rt, &j->spec, layer, &j->cap,
                                          &job->err);
  /* A flattened layer is counted again; a capture counted as it went. */
  if (r == 0 && j->flatten != NULL)
    r = wr_layer_measure(layer, &j->stats, &job->err);
  else if (r == 0)
    j->stats = (struct wr_layer_stats){.files = j->cap.files,
                                       .dirs = j->cap.dirs,
                                       .whiteouts = j->cap.whiteouts,
                                       .bytes = j->cap.bytes};
  if (r < 0)
    wr_rm_rf(j->dir, NULL);
  job->result = r;
}

/* templates: a child of a template sandbox starts what it started (the
 * template's layers and start command as they were, kept in "template"). */
static char *capture_info(const struct snap_job *j) {
  _cleanup_json_ json_t *info = json_pack(
      "{s:b,s:f,s:f,s:I,s:I,s:I,s:I,s:b,s:f}", "live", j->cap.live, "frozen_ms",
      j->cap.frozen_ms, "total_ms", j->cap.total_ms, "files",
      (json_int_t)j->stats.files, "dirs", (json_int_t)j->stats.dirs,
      "whiteouts", (json_int_t)j->stats.whiteouts, "copied_frozen",
      (json_int_t)j->cap.copied_frozen, "flattened", j->flatten != NULL,
      "flatten_ms", j->flatten_ms);

  if (j->sb->spec.template != NULL)
    json_object_set(info, "template", j->sb->spec.template);
  return wr_json_dumps(info);
}

static void snap_done(struct wr_job *job) {
  struct snap_job *j = job->arg;
  struct wr_daemon *d = job->d;
  struct wr_snapshot_rec r;
  _cleanup_free_ char *info = NULL;

  wr_sandbox_end_snapshot(j->sb);
  if (job->result == 0) {
    info = capture_info(j);
    job->result = wr_store_snapshot_set_ready(d->store, j->id, j->stats.bytes,
                                              info, &job->err);
  }
  if (job->result < 0) {
    wr_warn("snapshot of %s: %s", j->sb->name, job->err.msg);
    wr_store_snapshot_delete(d->store, j->id, NULL);
    wr_events_emit(d, "snapshot", j->sb,
                   json_pack("{s:s,s:s,s:s}", "snapshot_id", j->id, "phase",
                             "failed", "message", job->err.msg));
    wr_http_reply_error(j->req, 500, "snapshot_failed", "%s", job->err.msg);
  } else if (wr_store_snapshot_get(d->store, j->id, &r, &job->err) == 0) {
    wr_info("snapshot %s of %s: %.1f ms frozen, %.1f ms in all", r.name,
            j->sb->name, j->cap.frozen_ms, j->cap.total_ms);
    sync_later(d, r.id);
    wr_events_emit(d, "snapshot", j->sb,
                   json_pack("{s:s,s:s,s:s,s:f,s:f,s:I}", "snapshot", r.name,
                             "snapshot_id", r.id, "phase", "ready", "frozen_ms",
                             j->cap.frozen_ms, "total_ms", j->cap.total_ms,
                             "size_bytes", (json_int_t)r.size_bytes));
    wr_http_reply_json(j->req, 201, snapshot_json(d, &r));
    wr_snapshot_rec_free(&r);
  } else {
    wr_reply_err(j->req, &job->err);
  }
  wr_sandbox_unref(j->sb);
  snap_job_free(j);
}

struct snap_req {
  const char *name;
  double retention_days;
};

static int check_snap_req(struct wr_daemon *d, struct wr_sandbox *sb,
                          const struct snap_req *c, wr_error_t *err) {
  struct wr_snapshot_rec r;

  if (c->name != NULL && !wr_name_valid(c->name))
    return wr_error_setx(err, EINVAL,
                         "invalid snapshot name `%s` (use 1-63 of a-z 0-9 . _ "
                         "-, starting with a letter or digit)",
                         c->name);
  if (c->name != NULL &&
      wr_store_snapshot_get(d->store, c->name, &r, NULL) == 0) {
    wr_snapshot_rec_free(&r);
    return wr_error_setx(err, EEXIST, "a snapshot named `%s` already exists",
                         c->name);
  }
  if (!isfinite(c->retention_days) || c->retention_days < 0 ||
      c->retention_days > MAX_RETENTION_DAYS)
    return wr_error_setx(err, EINVAL,
                         "retention_days must be between 0 (kept) and %.0f",
                         MAX_RETENTION_DAYS);
  if (sb->op != WR_OP_NONE)
    return wr_error_setx(err, EBUSY, "sandbox `%s` is busy (%s)", sb->name,
                         wr_sandbox_op_name(sb->op));
  if (sb->state != WR_SB_RUNNING && sb->state != WR_SB_PAUSED &&
      sb->state != WR_SB_STOPPED)
    return wr_error_setx(err, EBUSY, "sandbox `%s` is %s", sb->name,
                         wr_sandbox_state_name(sb->state));
  return 0;
}

/* The new snapshot's stack: itself over its source's (the snapshot the
 * sandbox was made from), unless that would pass WR_LAYERS_MAX_DEPTH: then
 * it is one flattened layer, and *flatten lists the layers to stack
 * (oldest first). */
static json_t *new_stack(struct wr_daemon *d, struct wr_sandbox *sb,
                         const char *id, char ***flatten, wr_error_t *err) {
  json_t *layers = json_pack("[s]", id);
  struct wr_snapshot_use u;

  *flatten = NULL;
  if (sb->spec.snapshot == NULL)
    return layers;
  if (wr_snapshot_use(d, sb->spec.snapshot, &u, err) < 0) {
    json_decref(layers);
    return NULL;
  }
  if (u.n + 1 <= WR_LAYERS_MAX_DEPTH) {
    for (size_t i = 0; i < u.n; i++)
      json_array_append_new(layers, json_string(u.ids[i]));
  } else {
    *flatten = xcalloc(1, sizeof(char *));
    for (size_t i = u.n; i-- > 0;)
      *flatten = wr_strv_push(*flatten, u.dirs[i]);
  }
  wr_snapshot_use_clear(&u);
  return layers;
}

static void snap_go(struct wr_daemon *d, struct wr_sandbox *sb,
                    wr_http_req_t *req, const struct snap_req *c) {
  struct snap_job *j = xcalloc(1, sizeof(*j));
  _cleanup_json_ json_t *layers = NULL;
  _cleanup_free_ char *layers_text = NULL;
  struct wr_snapshot_rec rec;
  wr_error_t err;

  j->id = wr_random_id("snap-", 6);
  layers = new_stack(d, sb, j->id, &j->flatten, &err);
  if (layers == NULL) {
    wr_reply_err(req, &err);
    snap_job_free(j);
    return;
  }
  layers_text = wr_json_dumps(layers);
  rec = (struct wr_snapshot_rec){
      .id = j->id,
      .name = (char *)(c->name ? c->name : j->id),
      .state = "creating",
      .image = sb->image,
      .source_id = sb->id,
      .source_name = sb->name,
      .parent_id = sb->spec.snapshot,
      .layers_json = layers_text,
      .expires_ms = c->retention_days > 0
                        ? wr_now_ms() + (int64_t)(c->retention_days * 86400e3)
                        : 0,
      .created_ms = wr_now_ms(),
  };
  if (wr_store_snapshot_insert(d->store, &rec, &err) < 0) {
    wr_reply_err(req, &err);
    snap_job_free(j);
    return;
  }
  j->sb = sb;
  j->req = req;
  j->dir = snap_dir(d, j->id);
  wr_sandbox_rt_spec(sb, &j->spec);
  j->cap.live = sb->state == WR_SB_RUNNING;
  j->job.fn = snap_work;
  j->job.done = snap_done;
  j->job.arg = j;
  if (wr_sandbox_begin_snapshot(sb, &err) < 0) { /* checked just above */
    wr_store_snapshot_delete(d->store, j->id, NULL);
    wr_reply_err(req, &err);
    snap_job_free(j);
    return;
  }
  wr_events_emit(d, "snapshot", sb,
                 json_pack("{s:s,s:s,s:s,s:b}", "snapshot", rec.name,
                           "snapshot_id", j->id, "phase", "started", "live",
                           j->cap.live));
  wr_sandbox_ref(sb);
  wr_job_queue(d, &j->job);
}

void wr_api_snapshot_create(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct snap_req c = {0};
  struct wr_json_field f[] = {
      {"name", WR_JSON_STRING, &c.name, false, NULL},
      {"retention_days", WR_JSON_NUMBER, &c.retention_days, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  struct wr_sandbox *sb;
  wr_error_t err;

  if (body == NULL || (sb = wr_sandbox_from_req(d, req)) == NULL)
    return;
  if (check_snap_req(d, sb, &c, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  snap_go(d, sb, req, &c);
}

/* ---- reading and removing
 * ------------------------------------------------------------ */

void wr_api_snapshot_list(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_snapshot_rec *recs = NULL;
  size_t n = 0;
  json_t *arr;
  wr_error_t err;

  if (wr_store_snapshot_list(d->store, &recs, &n, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  arr = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(arr, snapshot_json(d, &recs[i]));
  wr_snapshot_recs_free(recs, n);
  wr_http_reply_json(req, 200, json_pack("{s:o}", "snapshots", arr));
}

void wr_api_snapshot_get(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_snapshot_rec r;
  wr_error_t err;

  if (wr_store_snapshot_get(d->store, wr_http_param(req, "id"), &r, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_http_reply_json(req, 200, snapshot_json(d, &r));
  wr_snapshot_rec_free(&r);
}

void wr_api_snapshot_delete(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_snapshot_rec r;
  _cleanup_json_ json_t *users = NULL;
  _cleanup_free_ char *who = NULL;
  wr_error_t err;

  if (wr_store_snapshot_get(d->store, wr_http_param(req, "id"), &r, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  users = users_of(d, r.id);
  if (strcmp(r.state, "ready") != 0) {
    wr_http_reply_error(req, 409, "busy", "snapshot `%s` is being made",
                        r.name);
  } else if (json_array_size(users) > 0) {
    who = users_text(users);
    wr_http_reply_error(req, 409, "in_use",
                        "snapshot `%s` is used by %s: remove %s first", r.name,
                        who, json_array_size(users) == 1 ? "it" : "them");
  } else if (remove_snapshot(d, r.id, req, &err) < 0) {
    wr_reply_err(req, &err);
  } else {
    wr_info("snapshot %s (%s) removed", r.name, r.id);
  }
  wr_snapshot_rec_free(&r);
}

/* ---- export and import
 * ------------------------------------------------------------ */

/*
 * A stream between a job and the client goes through a pipe, as the files
 * API's tar streams do: for an export the job writes the stream into it
 * and the loop forwards what it reads; for an import the loop writes the
 * body into it and the job reads. The request ends once both are done.
 */
#define PUMP_CHUNK 65536
#define PUMP_HIGH_WATER (1u << 20)
/* An import keeps this much of the state root's filesystem free. */
#define IMPORT_RESERVE (256ull << 20)

struct pump {
  struct wr_job job;
  struct wr_daemon *d;
  wr_http_req_t *req;
  uv_poll_t poll;
  int fd, job_fd;
  bool poll_init, polling, closing, closed, freed;
  bool job_done, pipe_done, body_done, aborted, waiting_drain;
  int body_status;
  wr_buf_t pending;
  /* export */
  char **layers;
  char *meta;
  /* import */
  char *id, *name, *dir;
  uint64_t max_bytes;
};

static void pump_closed(uv_handle_t *h) {
  struct pump *p = h->data;

  p->closed = true;
  if (p->freed)
    free(p);
}

static void pump_stop(struct pump *p) {
  p->polling = false;
  if (p->poll_init && !p->closing) {
    p->closing = true;
    uv_close((uv_handle_t *)&p->poll, pump_closed);
  }
  wr_closep(&p->fd);
}

static void pump_free(struct pump *p) {
  pump_stop(p);
  wr_closep(&p->job_fd);
  wr_buf_free(&p->pending);
  wr_strv_free(p->layers);
  free(p->meta);
  free(p->id);
  free(p->name);
  free(p->dir);
  p->freed = true;
  if (!p->poll_init || p->closed)
    free(p);
}

static int pump_open(struct wr_daemon *d, struct pump *p, bool out,
                     wr_error_t *err) {
  int fds[2];

  if (pipe2(fds, O_CLOEXEC) < 0)
    return wr_error_set(err, errno, "pipe");
  p->fd = out ? fds[0] : fds[1];
  p->job_fd = out ? fds[1] : fds[0];
  wr_set_nonblock(p->fd, true);
  if (uv_poll_init(d->loop, &p->poll, p->fd) < 0)
    return wr_error_set(err, EIO, "poll a pipe");
  p->poll.data = p;
  p->poll_init = true;
  return 0;
}

static struct pump *pump_new(struct wr_daemon *d, wr_http_req_t *req) {
  struct pump *p = xcalloc(1, sizeof(*p));

  p->d = d;
  p->req = req;
  p->fd = p->job_fd = -1;
  wr_buf_init(&p->pending);
  p->job.arg = p;
  return p;
}

/* Export: the job's end is closed when it is done (EOF for the loop). */
static void export_maybe_end(struct pump *p) {
  if (!p->job_done || !p->pipe_done)
    return;
  if (p->job.result < 0) {
    wr_warn("export: %s", p->job.err.msg);
    if (!p->aborted)
      wr_http_stream_abort(p->req);
  } else if (!p->aborted) {
    wr_http_stream_end(p->req);
  }
  pump_free(p);
}

static void on_export_readable(uv_poll_t *h, int status, int events) {
  struct pump *p = h->data;
  char buf[PUMP_CHUNK];
  ssize_t n;

  (void)events;
  n = status < 0 ? -1 : read(p->fd, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    pump_stop(p);
    p->pipe_done = true;
    export_maybe_end(p);
    return;
  }
  if (wr_http_stream_write(p->req, buf, (size_t)n) > PUMP_HIGH_WATER) {
    p->waiting_drain = true;
    p->polling = false;
    uv_poll_stop(&p->poll);
  }
}

static void on_export_drain(wr_http_req_t *req, void *arg) {
  struct pump *p = arg;

  (void)req;
  if (p->waiting_drain && p->fd >= 0) {
    p->waiting_drain = false;
    p->polling = true;
    uv_poll_start(&p->poll, UV_READABLE, on_export_readable);
  }
}

static void on_export_abort(wr_http_req_t *req, void *arg) {
  struct pump *p = arg;

  (void)req;
  p->aborted = true;
  pump_stop(p); /* the job's writes fail: it ends soon */
  p->pipe_done = true;
  export_maybe_end(p);
}

static void export_work(struct wr_job *job) {
  struct pump *p = job->arg;

  job->result =
      wr_lstream_export((const char *const *)p->layers, wr_strv_len(p->layers),
                        p->meta, p->job_fd, &job->err);
  wr_closep(&p->job_fd);
}

static void export_done(struct wr_job *job) {
  struct pump *p = job->arg;

  p->job_done = true;
  export_maybe_end(p);
}

void wr_api_snapshot_export(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_snapshot_use u;
  struct wr_snapshot_rec r;
  struct pump *p;
  wr_error_t err;

  if (wr_snapshot_use(d, wr_http_param(req, "id"), &u, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  if (wr_store_snapshot_get(d->store, u.id, &r, &err) < 0) {
    wr_snapshot_use_clear(&u);
    wr_reply_err(req, &err);
    return;
  }
  p = pump_new(d, req);
  p->layers = xcalloc(1, sizeof(char *));
  for (size_t i = u.n; i-- > 0;) /* oldest first */
    p->layers = wr_strv_push(p->layers, u.dirs[i]);
  {
    _cleanup_json_ json_t *meta =
        json_pack("{s:s,s:s,s:I}", "image", r.image, "name", r.name, "layers",
                  (json_int_t)u.n);
    p->meta = wr_json_dumps(meta);
  }
  wr_snapshot_rec_free(&r);
  wr_snapshot_use_clear(&u);
  if (pump_open(d, p, true, &err) < 0) {
    wr_reply_err(req, &err);
    pump_free(p);
    return;
  }
  wr_http_stream_begin(req, 200, "application/zstd", NULL);
  wr_http_on_drain(req, on_export_drain, p);
  wr_http_on_abort(req, on_export_abort, p);
  p->polling = true;
  uv_poll_start(&p->poll, UV_READABLE, on_export_readable);
  p->job.fn = export_work;
  p->job.done = export_done;
  wr_job_queue(d, &p->job);
}

/* Import: the body goes into the pipe; the job reads it. */
static void import_maybe_end(struct pump *p) {
  struct wr_snapshot_rec r;
  wr_error_t err;

  if (!p->job_done || !p->body_done)
    return;
  if (p->job.result == 0 && p->body_status < 0)
    p->job.result = wr_error_setx(&p->job.err, EINVAL,
                                  "the upload was cut "
                                  "short");
  if (p->job.result < 0) {
    wr_store_snapshot_delete(p->d->store, p->id, NULL);
    wr_http_reply_error(p->req, 400, "bad_stream", "%s", p->job.err.msg);
  } else if (wr_store_snapshot_get(p->d->store, p->id, &r, &err) == 0) {
    wr_info("snapshot %s (%s) imported", r.name, r.id);
    wr_http_reply_json(p->req, 201, snapshot_json(p->d, &r));
    wr_snapshot_rec_free(&r);
  } else {
    wr_reply_err(p->req, &err);
  }
  pump_free(p);
}

static void import_flush(struct pump *p);

static void on_import_writable(uv_poll_t *h, int status, int events) {
  struct pump *p = h->data;

  (void)events;
  if (status < 0) {
    pump_stop(p);
    wr_buf_reset(&p->pending);
  }
  import_flush(p);
}

static void import_flush(struct pump *p) {
  while (p->fd >= 0 && p->pending.len > 0) {
    ssize_t n = write(p->fd, p->pending.data, p->pending.len);
    if (n > 0) {
      wr_buf_consume(&p->pending, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      if (!p->polling) {
        p->polling = true;
        uv_poll_start(&p->poll, UV_WRITABLE, on_import_writable);
      }
      wr_http_body_pause(p->req, true);
      return;
    }
    pump_stop(p); /* the job stopped reading (it failed) */
  }
  if (p->fd < 0)
    wr_buf_reset(&p->pending);
  if (p->polling) {
    p->polling = false;
    uv_poll_stop(&p->poll);
  }
  if (p->body_done) {
    pump_stop(p); /* EOF for the job */
    import_maybe_end(p);
  } else {
    wr_http_body_pause(p->req, false);
  }
}

static void on_import_body(wr_http_req_t *req, const char *data, size_t len,
                           void *arg) {
  struct pump *p = arg;

  (void)req;
  if (p->fd < 0)
    return;
  wr_buf_append(&p->pending, data, len);
  import_flush(p);
}

static void on_import_end(wr_http_req_t *req, int status, void *arg) {
  struct pump *p = arg;

  (void)req;
  p->body_done = true;
  p->body_status = status;
  import_flush(p);
}

/* The stream's image must be a name (it need not exist here yet). */
static int import_finish(struct wr_daemon *d, struct pump *p, const char *meta,
                         wr_error_t *err) {
  _cleanup_json_ json_t *j = json_loads(meta, 0, NULL);
  _cleanup_free_ char *info = NULL;
  const char *image = json_string_value(json_object_get(j, "image"));
  struct wr_layer_stats st;
  _cleanup_free_ char *layer = xasprintf("%s/layer", p->dir);

  (void)d;
  if (image == NULL || !wr_name_valid(image))
    return wr_error_setx(err, EINVAL, "the stream names no valid image");
  if (wr_layer_measure(layer, &st, err) < 0)
    return -1;
  info = xasprintf("{\"imported\":true,\"files\":%llu,\"dirs\":%llu,"
                   "\"whiteouts\":%llu}",
                   (unsigned long long)st.files, (unsigned long long)st.dirs,
                   (unsigned long long)st.whiteouts);
  /* The image is only known now: the row gets it with the rest. The
   * store is the loop's, so this is written in import_done. */
  p->meta = xstrdup(image);
  free(p->name);
  p->name = steal_ptr(&info); /* reused: the info text, for the loop */
  p->max_bytes = st.bytes;
  return 0;
}

static void import_work(struct wr_job *job) {
  struct pump *p = job->arg;
  _cleanup_free_ char *layer = xasprintf("%s/layer", p->dir);
  _cleanup_free_ char *meta = NULL;

  if (mkdir(p->dir, 0700) < 0) {
    job->result = wr_error_set(&job->err, errno, "mkdir `%s`", p->dir);
  } else {
    job->result =
        wr_lstream_import(p->job_fd, layer, p->max_bytes, &meta, &job->err);
    if (job->result == 0)
      job->result = import_finish(job->d, p, meta, &job->err);
    if (job->result < 0)
      wr_rm_rf(p->dir, NULL);
  }
  wr_closep(&p->job_fd);
}

static void import_done(struct wr_job *job) {
  struct pump *p = job->arg;
  if (job->result == 0) {
    /* p->meta: the image; p->name: the info; p->max_bytes: the size. */
    if (wr_store_snapshot_set_ready(p->d->store, p->id, p->max_bytes, p->name,
                                    &job->err) < 0 ||
        wr_store_snapshot_set_image(p->d->store, p->id, p->meta, &job->err) <
            0) {
      job->result = -1;
      wr_rm_rf(p->dir, NULL);
    } else {
      sync_later(p->d, p->id);
    }
  }
  p->job_done = true;
  import_maybe_end(p);
}

static uint64_t free_bytes(const char *dir) {
  struct statvfs st;
  uint64_t avail;

  if (statvfs(dir, &st) < 0)
    return 0;
  avail = (uint64_t)st.f_bavail * st.f_frsize;
  return avail > IMPORT_RESERVE ? avail - IMPORT_RESERVE : 0;
}

void wr_api_snapshot_import(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = wr_http_query(req, "name");
  _cleanup_free_ char *layers = NULL;
  struct wr_snapshot_rec rec, old;
  struct pump *p;
  wr_error_t err;

  if (name != NULL && !wr_name_valid(name)) {
    wr_http_reply_error(req, 400, "bad_request", "invalid snapshot name `%s`",
                        name);
    return;
  }
  if (name != NULL && wr_store_snapshot_get(d->store, name, &old, NULL) == 0) {
    wr_snapshot_rec_free(&old);
    wr_http_reply_error(req, 409, "conflict",
                        "a snapshot named `%s` already exists", name);
    return;
  }
  p = pump_new(d, req);
  p->id = wr_random_id("snap-", 6);
  p->dir = snap_dir(d, p->id);
  p->max_bytes = free_bytes(d->snapshots->dir);
  layers = xasprintf("[\"%s\"]", p->id);
  rec = (struct wr_snapshot_rec){.id = p->id,
                                 .name = (char *)(name ? name : p->id),
                                 .state = "creating",
                                 .image = "",
                                 .layers_json = layers,
                                 .created_ms = wr_now_ms()};
  if (wr_store_snapshot_insert(d->store, &rec, &err) < 0 ||
      pump_open(d, p, false, &err) < 0) {
    wr_store_snapshot_delete(d->store, p->id, NULL);
    wr_reply_err(req, &err);
    pump_free(p);
    return;
  }
  p->job.fn = import_work;
  p->job.done = import_done;
  wr_job_queue(d, &p->job);
  wr_http_body_read(req, on_import_body, on_import_end, p);
}
