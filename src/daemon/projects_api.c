/*
 * Projects in the daemon: the routes, a queue of operations per project,
 * the threads that run them, and the planner. See projects_api.h.
 *
 * An operation (src/projects/) blocks: it drives sandboxes through
 * warrend's own API, and an open from cold runs an install. So each runs
 * on a thread of its own, and the loop only queues, starts and answers.
 * Operations on one project run one after another, so that an open and
 * a demote never race (readers, log and diff, are never queued); an open
 * that arrives while another is queued or running joins it, and both
 * callers get the one sandbox. A thread that ends posts its job to the
 * loop through an async handle; after shutdown it drops it instead.
 *
 * The planner (src/projects/planner.c) decides on the loop, from the
 * rows and the sandboxes' states, every --plan-interval; its steps are
 * demotes queued like any other operation, marked so that a project
 * opened in the meantime is left alone.
 */
#include "daemon/projects_api.h"

#include <pthread.h>

#include "daemon/events.h"
#include "daemon/lease.h"
#include "daemon/request.h"
#include "daemon/sandbox.h"

struct waiter {
  struct waiter *next;
  wr_http_req_t *req; /* NULL once the client has gone */
  wr_project_done_fn done;
  void *arg;
};

struct pjob {
  struct pjob *next;      /* in its project's queue */
  struct pjob *done_next; /* on the done list (set by its thread) */
  struct wr_projects *p;
  enum wr_project_verb verb;
  char *name;
  json_t *args;
  struct waiter *waiters;
  bool queued;            /* in a project's queue (readers are not) */
  struct pjob *wait_next; /* waiting for a thread (MAX_THREADS) */
  /* Set by the thread. */
  json_t *result;
  int status, rc;
  wr_error_t err;
};

/* One project's operations, the first running. */
struct pqueue {
  struct pqueue *next;
  char *name;
  struct pjob *jobs;
};

struct wr_projects {
  struct wr_daemon *d;
  struct wr_projects_env env;
  char *host, *db_path, *bin_dir;
  struct pqueue *queues;
  struct pjob *waiting, **waiting_tail; /* for a thread */
  uv_async_t async;
  uv_timer_t timer;
  bool timer_init;
  unsigned planning; /* the timer's demotes still in flight */
  pthread_mutex_t lock;
  /* Under lock. */
  struct pjob *done;
  unsigned threads;
  bool stopping;
};

/* ---- jobs ---------------------------------------------------------------- */

static void job_free(struct pjob *j) {
  while (j->waiters != NULL) {
    struct waiter *w = j->waiters;
    j->waiters = w->next;
    free(w);
  }
  json_decref(j->args);
  json_decref(j->result);
  free(j->name);
  free(j);
}

static void *job_thread(void *arg) {
  struct pjob *j = arg;
  struct wr_projects *p = j->p;
  bool dropped;

  j->rc = wr_project_run(&p->env, j->verb, j->name, j->args, &j->result,
                         &j->status, &j->err);
  pthread_mutex_lock(&p->lock);
  dropped = p->stopping;
  if (!dropped) {
    j->done_next = p->done;
    p->done = j;
    uv_async_send(&p->async);
  }
  p->threads--;
  pthread_mutex_unlock(&p->lock);
  if (dropped)
    job_free(j);
  return NULL;
}

static void job_finished(struct pjob *j);

/* At most this many operations run at once; the others wait in
 * `waiting`, first come first served (a client that asks for many
 * projects at once gets threads, not the host's memory). */
#define MAX_THREADS 16

static void job_spawn(struct pjob *j);

static void job_start(struct pjob *j) {
  struct wr_projects *p = j->p;
  unsigned running;

  pthread_mutex_lock(&p->lock);
  running = p->threads;
  pthread_mutex_unlock(&p->lock);
  if (running < MAX_THREADS) {
    job_spawn(j);
    return;
  }
  j->wait_next = NULL;
  *p->waiting_tail = j;
  p->waiting_tail = &j->wait_next;
}

/* A thread ended: the next that waits for one. */
static void start_waiting(struct wr_projects *p) {
  struct pjob *j = p->waiting;

  if (j == NULL)
    return;
  p->waiting = j->wait_next;
  if (p->waiting == NULL)
    p->waiting_tail = &p->waiting;
  job_spawn(j);
}

static void job_spawn(struct pjob *j) {
  struct wr_projects *p = j->p;
  pthread_attr_t attr;
  pthread_t t;
  int r;

  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&p->lock);
  p->threads++;
  pthread_mutex_unlock(&p->lock);
  r = pthread_create(&t, &attr, job_thread, j);
  pthread_attr_destroy(&attr);
  if (r == 0)
    return;
  pthread_mutex_lock(&p->lock);
  p->threads--;
  pthread_mutex_unlock(&p->lock);
  j->rc = wr_error_set(&j->err, r, "start a thread for project `%s`", j->name);
  job_finished(j);
}

static struct pqueue *queue_of(struct wr_projects *p, const char *name,
                               bool make) {
  struct pqueue *q;

  for (q = p->queues; q != NULL; q = q->next)
    if (strcmp(q->name, name) == 0)
      return q;
  if (!make)
    return NULL;
  q = xcalloc(1, sizeof(*q));
  q->name = xstrdup(name);
  q->next = p->queues;
  p->queues = q;
  return q;
}

static void queue_drop(struct wr_projects *p, struct pqueue *q) {
  for (struct pqueue **pp = &p->queues; *pp != NULL; pp = &(*pp)->next)
    if (*pp == q) {
      *pp = q->next;
      free(q->name);
      free(q);
      return;
    }
}

static void on_gone(wr_http_req_t *req, void *arg) {
  struct waiter *w = arg;

  (void)req;
  w->req = NULL; /* the operation goes on: nothing is lost */
}

static void add_waiter(struct pjob *j, wr_http_req_t *req,
                       wr_project_done_fn done, void *arg) {
  struct waiter *w = xcalloc(1, sizeof(*w));

  w->req = req;
  w->done = done;
  w->arg = arg;
  w->next = j->waiters;
  j->waiters = w;
  if (req != NULL)
    wr_http_on_abort(req, on_gone, w);
}

/* Queue j behind its project's operations, or join a pending open. */
static void job_submit(struct pjob *j) {
  struct pqueue *q;

  if (!j->queued) {
    job_start(j);
    return;
  }
  q = queue_of(j->p, j->name, true);
  if (j->verb == WR_PROJECT_OPEN)
    for (struct pjob *x = q->jobs; x != NULL; x = x->next)
      if (x->verb == WR_PROJECT_OPEN) {
        while (j->waiters != NULL) {
          struct waiter *w = j->waiters;
          j->waiters = w->next;
          w->next = x->waiters;
          x->waiters = w;
        }
        job_free(j);
        return;
      }
  struct pjob **tail = &q->jobs;
  while (*tail != NULL)
    tail = &(*tail)->next;
  *tail = j;
  j->next = NULL;
  if (q->jobs == j)
    job_start(j);
}

static struct pjob *job_new(struct wr_projects *p, enum wr_project_verb verb,
                            const char *name, json_t *args) {
  struct pjob *j = xcalloc(1, sizeof(*j));

  j->p = p;
  j->verb = verb;
  j->name = xstrdup(name);
  j->args = args;
  j->queued = verb != WR_PROJECT_LOG && verb != WR_PROJECT_DIFF;
  return j;
}

/* ---- what an ended operation tells ---------------------------------------
 */

static void emit(struct wr_daemon *d, const char *type, const char *project,
                 json_t *detail) {
  json_object_set_new(detail, "project", json_string(project));
  wr_events_emit(d, type, NULL, detail);
}

static void emit_events(struct pjob *j) {
  struct wr_daemon *d = j->p->d;
  const json_t *r = j->result;

  if (j->rc < 0)
    return;
  if (j->verb == WR_PROJECT_OPEN || j->verb == WR_PROJECT_RESTORE) {
    json_t *from = json_object_get(r, "from");
    if (from != NULL)
      emit(d, "opened", j->name,
           json_pack("{s:O, s:O, s:O}", "from", from, "sandbox",
                     json_object_get(r, "sandbox"), "ms",
                     json_object_get(r, "ms")));
  }
  if ((j->verb == WR_PROJECT_COMMIT || j->verb == WR_PROJECT_RESTORE) &&
      json_is_true(json_object_get(r, "committed")))
    emit(d, "committed", j->name,
         json_pack("{s:O, s:O}", "revision", json_object_get(r, "revision"),
                   "version", json_object_get(r, "version")));
  if (json_is_true(json_object_get(r, "pushed")))
    emit(d, "pushed", j->name,
         json_pack("{s:O}", "remote", json_object_get(r, "remote")));
  if (j->verb == WR_PROJECT_DEMOTE)
    emit(d, "demoted", j->name,
         json_pack("{s:O, s:O}", "from", json_object_get(r, "from"), "to",
                   json_object_get(r, "to")));
}

static void answer(struct pjob *j) {
  while (j->waiters != NULL) {
    struct waiter *w = j->waiters;
    j->waiters = w->next;
    if (w->req != NULL) {
      if (j->rc == 0)
        wr_http_reply_json(w->req, j->status, json_incref(j->result));
      else
        wr_reply_err(w->req, &j->err);
    }
    if (w->done != NULL)
      w->done(w->arg, j->rc == 0 ? j->result : NULL,
              j->rc == 0 ? NULL : &j->err);
    free(w);
  }
}

static void job_finished(struct pjob *j) {
  struct wr_projects *p = j->p;
  struct pqueue *q = j->queued ? queue_of(p, j->name, false) : NULL;

  if (j->rc < 0)
    wr_info("project `%s`: %s failed: %s", j->name,
            wr_project_verb_name(j->verb), j->err.msg);
  emit_events(j);
  if (j->rc == 0 && j->verb == WR_PROJECT_REMOVE)
    wr_lease_forget(p->d, j->name);
  answer(j);
  if (q != NULL && q->jobs == j) {
    q->jobs = j->next;
    if (q->jobs != NULL)
      job_start(q->jobs);
    else
      queue_drop(p, q);
  }
  job_free(j);
}

static void on_async(uv_async_t *h) {
  struct wr_projects *p = h->data;
  struct pjob *list;

  pthread_mutex_lock(&p->lock);
  list = p->done;
  p->done = NULL;
  pthread_mutex_unlock(&p->lock);
  while (list != NULL) {
    struct pjob *j = list;
    list = j->done_next;
    job_finished(j);
    start_waiting(p);
  }
}

void wr_project_submit(struct wr_daemon *d, enum wr_project_verb verb,
                       const char *name, json_t *args, wr_project_done_fn done,
                       void *arg) {
  struct pjob *j = job_new(d->projects, verb, name, args);

  add_waiter(j, NULL, done, arg);
  job_submit(j);
}

bool wr_project_busy(struct wr_daemon *d, const char *name) {
  return queue_of(d->projects, name, false) != NULL;
}

/* ---- tiers, as the loop sees them ----------------------------------------
 */

enum wr_tier wr_project_tier(struct wr_daemon *d,
                             const struct wr_project_rec *rec) {
  int t = wr_tier_from_name(rec->tier);
  struct wr_sandbox *sb = NULL;
  _cleanup_free_ char *name = NULL;

  if (t == WR_TIER_HOT || t == WR_TIER_WARM || rec->sandbox != NULL) {
    name = wr_project_sandbox_name(rec->name);
    sb = wr_sandbox_find(d, name);
  }
  if (sb != NULL && sb->state == WR_SB_RUNNING)
    return WR_TIER_HOT;
  if (sb != NULL && (sb->state == WR_SB_PAUSED || sb->state == WR_SB_STOPPED))
    return WR_TIER_WARM;
  if (t == WR_TIER_COOL || t == WR_TIER_COLD)
    return (enum wr_tier)t;
  /* Live, but its sandbox was removed: git is what is left (the next
   * open or demote records it so). */
  return WR_TIER_COLD;
}

static uint64_t project_memory(struct wr_daemon *d,
                               const struct wr_project_rec *rec) {
  _cleanup_free_ char *name = wr_project_sandbox_name(rec->name);
  struct wr_sandbox *sb = wr_sandbox_find(d, name);

  return sb != NULL ? wr_rt_memory_usage(d->rt, sb->id) : 0;
}

static json_t *project_row_json(struct wr_daemon *d,
                                const struct wr_project_rec *r) {
  json_t *labels = json_loads(r->labels_json, 0, NULL);

  return json_pack(
      "{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:b}", "name",
      r->name, "template", r->template_name, "tier",
      wr_tier_name(wr_project_tier(d, r)), "sandbox",
      r->sandbox ? json_string(r->sandbox) : json_null(), "snapshot",
      r->snapshot ? json_string(r->snapshot) : json_null(), "remote",
      r->remote ? json_string(r->remote) : json_null(), "revision",
      r->revision ? json_string(r->revision) : json_null(), "labels",
      labels ? labels : json_object(), "last_edit_ms",
      (json_int_t)r->last_edit_ms, "created_ms", (json_int_t)r->created_ms,
      "busy", wr_project_busy(d, r->name));
}

/* ---- the planner --------------------------------------------------------- */

static uint64_t memory_available(void) {
  _cleanup_fclose_ FILE *f = fopen("/proc/meminfo", "re");
  char line[256];
  unsigned long long kb;

  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
      return kb * 1024;
  return 0;
}

/* Resident sandboxes that are no project's (and no pool's spares, which
 * the limiter takes first). */
static unsigned other_live(struct wr_daemon *d) {
  unsigned n = 0;

  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if ((sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED) &&
        !sb->pooled &&
        !json_is_string(json_object_get(sb->spec.labels, "warren.project")))
      n++;
  return n;
}

struct plan {
  struct wr_project_rec *recs;
  struct wr_plan_project *in;
  struct wr_plan_step *steps;
  size_t n, nsteps;
  struct wr_plan_settings s;
  int64_t now_ms;
};

static void plan_clear(struct plan *pl) {
  wr_project_recs_free(pl->recs, pl->n);
  free(pl->in);
  free(pl->steps);
}

static int plan_make(struct wr_daemon *d, int64_t now_ms, struct plan *pl,
                     wr_error_t *err) {
  const struct wr_daemon_config *c = &d->cfg;

  memset(pl, 0, sizeof(*pl));
  if (wr_store_project_list(d->store, &pl->recs, &pl->n, err) < 0)
    return -1;
  pl->in = xcalloc(pl->n + 1, sizeof(*pl->in));
  pl->steps = xcalloc(pl->n + 1, sizeof(*pl->steps));
  for (size_t i = 0; i < pl->n; i++) {
    const struct wr_project_rec *r = &pl->recs[i];
    pl->in[i] = (struct wr_plan_project){
        .name = r->name,
        .tier = wr_project_tier(d, r),
        .last_edit_ms = r->last_edit_ms,
        .memory_bytes = project_memory(d, r),
        .busy = wr_project_busy(d, r->name) || wr_lease_held(d, r->name),
    };
  }
  pl->s = (struct wr_plan_settings){
      .slots = c->plan_slots ? c->plan_slots : c->max_resident,
      .free = c->plan_free,
      .other_live = other_live(d),
      .snapshot_days = c->snapshot_days,
      .memory_reserve = c->plan_memory_reserve,
      .memory_free = c->plan_memory_reserve ? memory_available() : 0,
  };
  pl->now_ms = now_ms;
  pl->nsteps = wr_plan(pl->in, pl->n, &pl->s, now_ms, pl->steps);
  return 0;
}

static json_t *step_json(const struct plan *pl, size_t i) {
  const struct wr_plan_step *st = &pl->steps[i];
  _cleanup_free_ char *text = wr_plan_step_text(pl->in, st);

  return json_pack("{s:s, s:s, s:s, s:s, s:s}", "project",
                   pl->in[st->project].name, "from", wr_tier_name(st->from),
                   "to", wr_tier_name(st->to), "why", st->why, "text", text);
}

static json_t *plan_json(const struct plan *pl) {
  json_t *steps = json_array();
  unsigned live = 0;

  for (size_t i = 0; i < pl->nsteps; i++)
    json_array_append_new(steps, step_json(pl, i));
  for (size_t i = 0; i < pl->n; i++)
    live += pl->in[i].tier == WR_TIER_HOT || pl->in[i].tier == WR_TIER_WARM;
  return json_pack("{s:o, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I}}",
                   "steps", steps, "projects", (json_int_t)pl->n, "live",
                   (json_int_t)live, "now_ms", (json_int_t)pl->now_ms,
                   "settings", "slots", (json_int_t)pl->s.slots, "free",
                   (json_int_t)pl->s.free, "other_live",
                   (json_int_t)pl->s.other_live, "snapshot_days",
                   (json_int_t)pl->s.snapshot_days, "memory_reserve",
                   (json_int_t)pl->s.memory_reserve, "memory_free",
                   (json_int_t)pl->s.memory_free);
}

/* A step of the plan, as the demote it is. */
static json_t *step_args(const struct plan *pl, size_t i) {
  return json_pack("{s:s, s:b}", "to", wr_tier_name(pl->steps[i].to), "planner",
                   true);
}

/* POST /v1/plan: the steps run, and the reply waits for them all. */
struct apply {
  wr_http_req_t *req;
  json_t *reply;
  unsigned pending;
};

struct apply_step {
  struct apply *a;
  size_t index;
};

static void apply_end(struct apply *a) {
  if (a->req != NULL)
    wr_http_reply_json(a->req, 200, a->reply);
  else
    json_decref(a->reply);
  free(a);
}

static void apply_gone(wr_http_req_t *req, void *arg) {
  struct apply *a = arg;

  (void)req;
  a->req = NULL;
}

static void step_done(void *arg, const json_t *result, const wr_error_t *err) {
  struct apply_step *s = arg;
  struct apply *a = s->a;
  json_t *st = json_array_get(json_object_get(a->reply, "steps"), s->index);

  if (err != NULL)
    json_object_set_new(st, "error", json_string(err->msg));
  else
    json_object_set_new(st, "ms",
                        json_deep_copy(json_object_get(result, "ms")));
  free(s);
  if (--a->pending == 0)
    apply_end(a);
}

static void timer_step_done(void *arg, const json_t *result,
                            const wr_error_t *err) {
  struct wr_projects *p = arg;

  (void)result;
  (void)err; /* logged by job_finished; the next round tries again */
  p->planning--;
}

static void on_plan_timer(uv_timer_t *t) {
  struct wr_projects *p = t->data;
  struct wr_daemon *d = p->d;
  struct plan pl;
  wr_error_t err;

  if (p->planning > 0)
    return; /* the last round's demotes are still running */
  if (plan_make(d, wr_now_ms(), &pl, &err) < 0) {
    wr_warn("planner: %s", err.msg);
    return;
  }
  if (pl.nsteps > 0)
    wr_events_emit(d, "planned", NULL, plan_json(&pl));
  for (size_t i = 0; i < pl.nsteps; i++) {
    p->planning++;
    wr_project_submit(d, WR_PROJECT_DEMOTE, pl.in[pl.steps[i].project].name,
                      step_args(&pl, i), timer_step_done, p);
  }
  plan_clear(&pl);
}

/* ?now=MS or {"now_ms": MS}: the clock, injected (tests, what-ifs). */
static int plan_now(wr_http_req_t *req, int64_t *now) {
  uint64_t v = 0;

  if (wr_req_u64(req, "now", 0, 0, INT64_MAX, &v) < 0)
    return -1;
  *now = v ? (int64_t)v : wr_now_ms();
  return 0;
}

void wr_api_plan_get(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct plan pl;
  wr_error_t err;
  int64_t now;

  if (plan_now(req, &now) < 0)
    return;
  if (plan_make(d, now, &pl, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_http_reply_json(req, 200, plan_json(&pl));
  plan_clear(&pl);
}

void wr_api_plan_apply(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct apply *a;
  struct plan pl;
  wr_error_t err;
  int64_t now;

  if (plan_now(req, &now) < 0)
    return;
  if (plan_make(d, now, &pl, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  a = xcalloc(1, sizeof(*a));
  a->req = req;
  a->reply = plan_json(&pl);
  a->pending = 1; /* until every step is submitted */
  wr_http_on_abort(req, apply_gone, a);
  if (pl.nsteps > 0)
    wr_events_emit(d, "planned", NULL, plan_json(&pl));
  for (size_t i = 0; i < pl.nsteps; i++) {
    struct apply_step *s = xcalloc(1, sizeof(*s));
    s->a = a;
    s->index = i;
    a->pending++;
    wr_project_submit(d, WR_PROJECT_DEMOTE, pl.in[pl.steps[i].project].name,
                      step_args(&pl, i), step_done, s);
  }
  plan_clear(&pl);
  if (--a->pending == 0)
    apply_end(a);
}

/* ---- the routes ---------------------------------------------------------- */

/* The project's name from the path, checked; 404 for one that is not. */
static const char *project_param(wr_http_req_t *req) {
  const char *name = wr_http_param(req, "id");

  if (name == NULL || !wr_project_name_valid(name)) {
    wr_http_reply_error(req, 404, "not_found", "no project `%s`",
                        name ? name : "");
    return NULL;
  }
  return name;
}

/* The body as the operation's arguments: an object, or nothing. */
static json_t *body_args(wr_http_req_t *req) {
  size_t len = 0;
  const char *body = wr_http_body(req, &len);
  json_error_t jerr;
  json_t *j;

  if (body == NULL || len == 0)
    return json_object();
  j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(j)) {
    json_decref(j);
    wr_http_reply_error(req, 400, "bad_request",
                        "the body must be a JSON object");
    return NULL;
  }
  return j;
}

static void run_for(wr_http_req_t *req, struct wr_daemon *d,
                    enum wr_project_verb verb, const char *name, json_t *args) {
  struct pjob *j = job_new(d->projects, verb, name, args);

  add_waiter(j, req, NULL, NULL);
  job_submit(j);
}

static void route(wr_http_req_t *req, void *ctx, enum wr_project_verb verb) {
  const char *name = project_param(req);
  json_t *args;

  if (name == NULL || (args = body_args(req)) == NULL)
    return;
  run_for(req, ctx, verb, name, args);
}

void wr_api_project_create(wr_http_req_t *req, void *ctx) {
  json_t *args = body_args(req);
  const char *name;

  if (args == NULL)
    return;
  name = json_string_value(json_object_get(args, "name"));
  if (name == NULL) {
    json_decref(args);
    wr_http_reply_error(req, 400, "bad_request", "a project needs a name");
    return;
  }
  run_for(req, ctx, WR_PROJECT_CREATE, name, args);
}

void wr_api_project_list(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_project_rec *recs = NULL;
  json_t *list = json_array();
  size_t n = 0;
  wr_error_t err;

  if (wr_store_project_list(d->store, &recs, &n, &err) < 0) {
    json_decref(list);
    wr_reply_err(req, &err);
    return;
  }
  for (size_t i = 0; i < n; i++)
    json_array_append_new(list, project_row_json(d, &recs[i]));
  wr_project_recs_free(recs, n);
  wr_http_reply_json(req, 200, json_pack("{s:o}", "projects", list));
}

void wr_api_project_get(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = project_param(req);
  struct wr_project_rec rec = {0};
  wr_error_t err;
  json_t *j;

  if (name == NULL)
    return;
  if (wr_store_project_get(d->store, name, &rec, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  j = project_row_json(d, &rec);
  json_object_set_new(j, "settings", json_loads(rec.settings_json, 0, NULL));
  json_object_set_new(j, "leased", json_boolean(wr_lease_held(d, name)));
  json_object_set_new(j, "memory_bytes",
                      json_integer((json_int_t)project_memory(d, &rec)));
  wr_project_rec_free(&rec);
  wr_http_reply_json(req, 200, j);
}

void wr_api_project_delete(wr_http_req_t *req, void *ctx) {
  route(req, ctx, WR_PROJECT_REMOVE);
}

void wr_api_project_open(wr_http_req_t *req, void *ctx) {
  route(req, ctx, WR_PROJECT_OPEN);
}

void wr_api_project_commit(wr_http_req_t *req, void *ctx) {
  route(req, ctx, WR_PROJECT_COMMIT);
}

void wr_api_project_demote(wr_http_req_t *req, void *ctx) {
  route(req, ctx, WR_PROJECT_DEMOTE);
}

void wr_api_project_restore(wr_http_req_t *req, void *ctx) {
  route(req, ctx, WR_PROJECT_RESTORE);
}

void wr_api_project_remix(wr_http_req_t *req, void *ctx) {
  route(req, ctx, WR_PROJECT_REMIX);
}

/* The readers take their arguments from the query. */
static void reader(wr_http_req_t *req, void *ctx, enum wr_project_verb verb,
                   const char *const *keys, size_t n) {
  const char *name = project_param(req);
  json_t *args = json_object();

  if (name == NULL) {
    json_decref(args);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    const char *v = wr_http_query(req, keys[i]);
    if (v != NULL)
      json_object_set_new(args, keys[i], json_string(v));
  }
  run_for(req, ctx, verb, name, args);
}

void wr_api_project_log(wr_http_req_t *req, void *ctx) {
  const char *name = project_param(req);
  uint64_t limit = 0;

  if (name == NULL || wr_req_u64(req, "limit", 0, 0, 1000000, &limit) < 0)
    return;
  run_for(req, ctx, WR_PROJECT_LOG, name,
          json_pack("{s:I}", "limit", (json_int_t)limit));
}

void wr_api_project_diff(wr_http_req_t *req, void *ctx) {
  static const char *const keys[] = {"from", "to"};

  reader(req, ctx, WR_PROJECT_DIFF, keys, WR_ARRAY_SIZE(keys));
}

/* ---- setup --------------------------------------------------------------- */

static char *own_dir(void) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  char *slash;

  if (n <= 0)
    return xstrdup("/usr/local/bin");
  self[n] = '\0';
  slash = strrchr(self, '/');
  if (slash != NULL)
    *slash = '\0';
  return xstrdup(self);
}

int wr_projects_init(struct wr_daemon *d, wr_error_t *err) {
  struct wr_projects *p = xcalloc(1, sizeof(*p));
  int r;

  p->d = d;
  p->host = xasprintf("unix:%s", d->cfg.socket_path);
  p->db_path = xasprintf("%s/warren.db", d->cfg.root);
  p->bin_dir = own_dir();
  p->env = (struct wr_projects_env){
      .api = {.host = p->host, .api_key = NULL},
      .root = d->cfg.root,
      .db_path = p->db_path,
      .bin_dir = p->bin_dir,
      .idle_pause_s = 0,
      .snapshot_days = d->cfg.snapshot_days,
  };
  pthread_mutex_init(&p->lock, NULL);
  p->waiting_tail = &p->waiting;
  d->projects = p;
  r = uv_async_init(d->loop, &p->async, on_async);
  if (r < 0)
    return wr_error_set(err, -r, "projects: async handle");
  p->async.data = p;
  if (d->cfg.plan_interval_s > 0) {
    uv_timer_init(d->loop, &p->timer);
    p->timer.data = p;
    p->timer_init = true;
    uv_timer_start(&p->timer, on_plan_timer,
                   (uint64_t)d->cfg.plan_interval_s * 1000,
                   (uint64_t)d->cfg.plan_interval_s * 1000);
    uv_unref((uv_handle_t *)&p->timer);
  }
  return 0;
}

void wr_projects_shutdown(struct wr_daemon *d) {
  struct wr_projects *p = d->projects;

  if (p == NULL)
    return;
  pthread_mutex_lock(&p->lock);
  p->stopping = true;
  pthread_mutex_unlock(&p->lock);
  if (p->timer_init)
    uv_close((uv_handle_t *)&p->timer, NULL);
  uv_close((uv_handle_t *)&p->async, NULL);
}

void wr_projects_free(struct wr_daemon *d) {
  struct wr_projects *p = d->projects;
  bool running;

  if (p == NULL)
    return;
  pthread_mutex_lock(&p->lock);
  running = p->threads > 0;
  pthread_mutex_unlock(&p->lock);
  /* A thread still running reads p: it is left to the process's exit. */
  if (running)
    return;
  for (struct pjob *j = p->waiting, *next; j != NULL; j = next) {
    next = j->wait_next;
    if (!j->queued)
      job_free(j); /* a reader; queued ones go with their queue */
  }
  while (p->queues != NULL) {
    struct pqueue *q = p->queues;
    p->queues = q->next;
    while (q->jobs != NULL) {
      struct pjob *j = q->jobs;
      q->jobs = j->next;
      job_free(j); /* its requests went with the server */
    }
    free(q->name);
    free(q);
  }
  pthread_mutex_destroy(&p->lock);
  free(p->host);
  free(p->db_path);
  free(p->bin_dir);
  free(p);
  d->projects = NULL;
}
