/*
 * Warm pools: sandboxes created, started and paused ahead of the creates
 * that take them (see pool.h and docs/templates.md, "The warm pool").
 *
 * A pool's sandbox moves through filling -> ready -> claiming, stored in
 * sandboxes.pool at each step, and leaves the pool in the one UPDATE that
 * names it for its create (wr_store_pool_claimed). So after a SIGKILL, a
 * pooled sandbox is ready (paused, stored 'ready') or it is removed: a
 * fill or a claim that was cut short never leaves a half-made sandbox for
 * anyone, and the pool fills again.
 *
 * One pass (on a zero timer, so never inside another operation's
 * callback) compares each pool with its members: it removes what is over
 * the size, and starts fills up to WR_POOL_FILL_AT_ONCE, unless the pool
 * waits out its backoff after a failure (1 s, doubling to a minute).
 */
#include "daemon/events.h"
#include "daemon/jobs.h"
#include "daemon/limiter.h"
#include "daemon/pool.h"
#include "daemon/templates.h"

#include <fcntl.h>

#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 60000

static const char *const member_names[] = {
    [WR_POOL_NONE] = NULL,     [WR_POOL_FILLING] = "filling",
    [WR_POOL_READY] = "ready", [WR_POOL_CLAIMING] = "claiming",
    [WR_POOL_DRAINING] = NULL, /* stored as it was: it is going away */
};

static void kick(struct wr_daemon *d);

/* ---- the pools ------------------------------------------------------------
 */

struct wr_pool *wr_pool_find(struct wr_daemon *d, const char *image) {
  for (struct wr_pool *p = d->pools ? d->pools->list : NULL; p != NULL;
       p = p->next)
    if (strcmp(p->image, image) == 0)
      return p;
  return NULL;
}

static void pool_free(struct wr_pool *p) {
  free(p->image);
  free(p->last_error);
  free(p);
}

static struct wr_pool *pool_add(struct wr_daemon *d, const char *image) {
  struct wr_pool *p = xcalloc(1, sizeof(*p)), **pp = &d->pools->list;

  p->image = xstrdup(image);
  while (*pp != NULL)
    pp = &(*pp)->next;
  *pp = p;
  return p;
}

static void pool_remove(struct wr_daemon *d, struct wr_pool *p) {
  struct wr_pool **pp = &d->pools->list;

  while (*pp != p)
    pp = &(*pp)->next;
  *pp = p->next;
  pool_free(p);
}

/* How many sandboxes a pool has in each member state. */
struct pool_count {
  unsigned n[WR_POOL_DRAINING + 1];
};

static struct pool_count count(struct wr_daemon *d, const char *image) {
  struct pool_count c = {{0}};

  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (sb->pooled && strcmp(sb->image, image) == 0)
      c.n[sb->pool_state]++;
  return c;
}

static void event(struct wr_daemon *d, const struct wr_sandbox *sb,
                  const char *image, const char *action, const char *message) {
  json_t *detail = json_pack("{s:s,s:s}", "image", image, "action", action);

  if (message != NULL)
    json_object_set_new(detail, "message", json_string(message));
  wr_events_emit(d, "pool", sb, detail);
}

/* A fill or claim went wrong: say so in `pool ls`, and wait longer before
 * the next fill the more often it happens. */
int64_t wr_pool_backoff_ms(unsigned failures) {
  int64_t wait = BACKOFF_FIRST_MS;

  for (unsigned i = 1; i < failures && wait < BACKOFF_MAX_MS; i++)
    wait *= 2;
  return failures == 0 ? 0 : wait < BACKOFF_MAX_MS ? wait : BACKOFF_MAX_MS;
}

static void failed(struct wr_daemon *d, const char *image,
                   const struct wr_sandbox *sb, const char *msg) {
  struct wr_pool *p = wr_pool_find(d, image);

  wr_warn("pool %s: %s", image, msg);
  event(d, sb, image, "failed", msg);
  if (p == NULL)
    return;
  free(p->last_error);
  p->last_error = xstrdup(msg);
  p->last_error_ms = wr_now_ms();
  p->failures++;
  p->retry_at_ms = wr_now_ms() + wr_pool_backoff_ms(p->failures);
}

static void set_member(struct wr_sandbox *sb, enum wr_pool_member m) {
  wr_error_t err;

  sb->pool_state = m;
  if (member_names[m] != NULL &&
      wr_store_sandbox_set_pool(sb->d->store, sb->id, member_names[m], &err) <
          0)
    wr_warn("pool %s: sandbox %s: %s", sb->image, sb->name, err.msg);
}

/* ---- removing a pool's sandbox ------------------------------------------- */

static void drain(struct wr_sandbox *sb, bool shrink);

static void drained(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  bool shrink = arg != NULL;

  if (err != NULL)
    wr_warn("pool %s: remove %s: %s", sb->image, sb->name, err->msg);
  else if (shrink)
    event(sb->d, sb, sb->image, "shrunk", NULL);
  kick(sb->d);
}

static void drain_again(struct wr_sandbox *sb, void *arg,
                        const wr_error_t *err) {
  (void)err;
  if (!sb->removed)
    drain(sb, arg != NULL);
}

/* Remove it (stopping it first); an operation in flight is waited for. */
static void drain(struct wr_sandbox *sb, bool shrink) {
  void *tag = shrink ? (void *)sb : NULL;
  wr_error_t err;

  sb->pool_state = WR_POOL_DRAINING;
  if (sb->op != WR_OP_NONE) {
    wr_sandbox_wait(sb, drain_again, tag);
    return;
  }
  if (wr_sandbox_remove(sb, true, drained, tag, &err) < 0)
    wr_warn("pool %s: remove %s: %s", sb->image, sb->name, err.msg);
}

/* ---- filling ------------------------------------------------------------- */

/* pool-IMAGE-xxxxxx, a valid sandbox name no sandbox has. */
static char *member_name(struct wr_daemon *d, const char *image) {
  char *name = NULL;

  do {
    _cleanup_free_ char *suffix = wr_random_id("", 6);
    free(name);
    name = xasprintf("pool-%.48s-%s", image, suffix);
  } while (wr_sandbox_find(d, name) != NULL);
  return name;
}

static void filled_paused(struct wr_sandbox *sb, void *arg,
                          const wr_error_t *err) {
  struct wr_pool *p;

  (void)arg;
  if (sb->removed || sb->pool_state != WR_POOL_FILLING)
    return;
  if (err != NULL || sb->state != WR_SB_PAUSED) {
    failed(sb->d, sb->image, sb,
           err ? err->msg : "it stopped before it paused");
    drain(sb, false);
    return;
  }
  set_member(sb, WR_POOL_READY);
  if ((p = wr_pool_find(sb->d, sb->image)) != NULL) { /* it works again */
    p->failures = 0;
    p->retry_at_ms = 0;
    free(p->last_error);
    p->last_error = NULL;
    p->last_error_ms = 0;
  }
  wr_info("pool %s: %s ready", sb->image, sb->name);
  event(sb->d, sb, sb->image, "filled", NULL);
  kick(sb->d);
}

/* Warmed up (pool_warm.c): pause it, and it is ready. */
static void warmed(struct wr_sandbox *sb) {
  wr_error_t e;

  if (sb->pool_state != WR_POOL_FILLING)
    return;
  if (wr_sandbox_pause(sb, filled_paused, NULL, &e) < 0) {
    failed(sb->d, sb->image, sb, e.msg);
    drain(sb, false);
  }
}

/* Created and started (with a template, its start command answers):
 * warm it up, then pause it. */
static void filled(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  (void)arg;
  if (err != NULL) { /* it has left the table and the store */
    failed(sb->d, sb->image, NULL, err->msg);
    kick(sb->d);
    return;
  }
  wr_pool_warm(sb, warmed);
}

/* One more spare: 0, or 1 when the limiter has no slot free for it (a
 * spare never evicts anyone, nor waits in line: it takes a slot that no
 * one wants, and is the first to go when someone does), or -1. */
static int fill_one(struct wr_daemon *d, struct wr_pool *p) {
  const struct wr_limit_want want = {.what = "pool", .resident = true};
  _cleanup_free_ char *name = NULL;
  struct wr_limit_ticket *t = NULL;
  struct wr_sandbox *sb;
  wr_error_t err;

  if (wr_limiter_try(d, &want, &t) == 0)
    return 1;
  name = member_name(d, p->image);
  sb = wr_sandbox_add(d, name, p->image, member_names[WR_POOL_FILLING], &err);
  if (sb == NULL) {
    wr_limiter_release(t);
    failed(d, p->image, NULL, err.msg);
    return -1;
  }
  sb->pooled = true;
  sb->pool_state = WR_POOL_FILLING;
  wr_sandbox_create(sb, true, wr_limiter_release_then,
                    wr_limiter_hold(t, filled, NULL));
  return 0;
}

/* The newest ready sandbox of the image goes first when it shrinks (the
 * table is newest first). */
static struct wr_sandbox *first_ready(struct wr_daemon *d, const char *image) {
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (sb->pooled && sb->pool_state == WR_POOL_READY &&
        strcmp(sb->image, image) == 0 && sb->op == WR_OP_NONE)
      return sb;
  return NULL;
}

/* Shrink or fill one pool; returns when it wants to be looked at again
 * (0: when something changes). */
static int64_t pass_one(struct wr_daemon *d, struct wr_pool *p, int64_t now) {
  struct pool_count c = count(d, p->image);
  unsigned have = c.n[WR_POOL_READY] + c.n[WR_POOL_FILLING];
  struct wr_sandbox *sb;

  for (; have > p->size && (sb = first_ready(d, p->image)) != NULL; have--)
    drain(sb, true);
  if (have >= p->size || d->stopping)
    return 0;
  if (p->retry_at_ms > now)
    return p->retry_at_ms;
  for (unsigned filling = c.n[WR_POOL_FILLING];
       have < p->size && filling < WR_POOL_FILL_AT_ONCE; have++, filling++) {
    int rc = fill_one(d, p);

    if (rc < 0)
      return p->retry_at_ms;
    if (rc > 0) /* the limits are reached: look again later */
      return now + WR_POOL_NO_ROOM_RETRY_MS;
  }
  return 0;
}

/* Ready sandboxes of an image that has no pool any more go, and so do
 * those no create can take: made with another default disk limit (by a
 * warrend started with another --default-disk). */
static void drain_orphans(struct wr_daemon *d) {
  struct wr_sandbox *next;

  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = next) {
    next = sb->next;
    if (sb->pooled && sb->pool_state == WR_POOL_READY && sb->op == WR_OP_NONE &&
        (wr_pool_find(d, sb->image) == NULL ||
         sb->spec.disk_bytes != d->cfg.default_disk))
      drain(sb, true);
  }
}

static void on_timer(uv_timer_t *t) {
  struct wr_daemon *d = t->data;
  int64_t now = wr_now_ms(), next = 0;

  drain_orphans(d);
  for (struct wr_pool *p = d->pools->list; p != NULL; p = p->next) {
    int64_t at = pass_one(d, p, now);
    if (at > 0 && (next == 0 || at < next))
      next = at;
  }
  if (next > 0 && !d->stopping)
    uv_timer_start(t, on_timer, (uint64_t)(next > now ? next - now : 0), 0);
}

/* Look at the pools again, soon, from the loop. */
static void kick(struct wr_daemon *d) {
  if (d->pools != NULL && d->pools->timer_init && !d->stopping)
    uv_timer_start(&d->pools->timer, on_timer, 0, 0);
}

/* ---- claims ---------------------------------------------------------------
 */

void wr_pool_claim_clear(struct wr_pool_claim *c) {
  free(c->name);
  wr_strv_free(c->env);
  json_decref(c->labels);
  free(c->workdir);
  memset(c, 0, sizeof(*c));
}

struct claim {
  struct wr_job job;
  struct wr_sandbox *sb;
  struct wr_pool_claim c;
  char *pool_name; /* its name in the pool, back if the claim fails */
  wr_sandbox_done_fn done;
  void *arg;
  /* For the job (a worker thread): copies, and what it opened. */
  struct wr_rt_spec spec;
  struct wr_rt_instance inst; /* pid and a dup of its pidfd */
  int rootfd;                 /* the sandbox's (borrowed), or -1 */
  int own_rootfd;             /* one the job opened, or -1 */
  bool set_limits;
  uint64_t t0_ns;
};

static void claim_free(struct claim *cl) {
  wr_pool_claim_clear(&cl->c);
  free(cl->pool_name);
  if (cl->inst.pidfd >= 0)
    close(cl->inst.pidfd);
  if (cl->own_rootfd >= 0)
    close(cl->own_rootfd);
  wr_sandbox_unref(cl->sb);
  free(cl);
}

/*
 * The template's start command after a claim that asked for it
 * (--restart-start): started again with the claimed sandbox's
 * environment, and done once its port answers (templates.c). An image
 * with no start command has nothing to restart.
 */
static void pool_restart_start(struct wr_sandbox *sb, wr_sandbox_done_fn done,
                               void *arg) {
  wr_error_t err;

  if (sb->spec.template == NULL) {
    done(sb, arg, NULL);
    return;
  }
  if (wr_template_restart(sb, done, arg, &err) < 0)
    done(sb, arg, &err);
}

/* It is the pool's again, and goes; the create is told, and may make a
 * sandbox the usual way. */
static void claim_fail(struct claim *cl, const char *msg) {
  struct wr_sandbox *sb = cl->sb;
  wr_error_t err;

  wr_error_setx(&err, EAGAIN, "claim a pooled sandbox: %s", msg);
  free(sb->name);
  sb->name = steal_ptr(&cl->pool_name);
  failed(sb->d, sb->image, sb, err.msg);
  if (!sb->removed)
    drain(sb, false);
  cl->done(sb, cl->arg, &err);
  claim_free(cl);
}

static void claim_finish(struct wr_sandbox *sb, void *arg,
                         const wr_error_t *err) {
  struct claim *cl = arg;

  if (err != NULL)
    wr_warn("sandbox %s: restart its start command: %s", sb->name, err->msg);
  wr_info("pool %s: %s claimed as %s in %.2f ms", sb->image, sb->id, sb->name,
          (double)(wr_mono_ns() - cl->t0_ns) / 1e6);
  cl->done(sb, cl->arg, NULL);
  kick(sb->d);
  claim_free(cl);
}

/* Running with everything the create gave it: store it as the create's
 * (one UPDATE), and it leaves the pool. */
static void claim_resumed(struct wr_sandbox *sb, void *arg,
                          const wr_error_t *err) {
  struct claim *cl = arg;
  _cleanup_free_ char *spec = NULL;
  struct wr_pool *p;
  wr_error_t e;

  if (err != NULL || sb->state != WR_SB_RUNNING) {
    claim_fail(cl, err ? err->msg : "it stopped as it resumed");
    return;
  }
  spec = wr_sandbox_spec_json(sb);
  if (wr_store_pool_claimed(sb->d->store, sb->id, sb->image, sb->name, spec,
                            sb->created_ms, &e) < 0) {
    claim_fail(cl, e.msg);
    return;
  }
  sb->pooled = false;
  sb->pool_state = WR_POOL_NONE;
  if ((p = wr_pool_find(sb->d, sb->image)) != NULL)
    p->claimed++;
  event(sb->d, sb, sb->image, "claimed", NULL);
  if (sb->spec.restart_start)
    pool_restart_start(sb, claim_finish, cl);
  else
    claim_finish(sb, cl, NULL);
}

/* The create's settings replace the pool's (which were the defaults). */
static void apply_spec(struct wr_sandbox *sb, struct wr_pool_claim *c) {
  struct wr_sandbox_spec *s = &sb->spec;

  wr_strv_free(s->env);
  s->env = steal_ptr(&c->env);
  json_decref(s->labels);
  s->labels = steal_ptr(&c->labels);
  free(s->workdir);
  s->workdir = steal_ptr(&c->workdir);
  s->memory_bytes = c->memory_bytes;
  s->cpus = c->cpus;
  s->pids = c->pids;
  s->idle_pause_s = c->idle_pause_s;
  s->restart_start = c->restart_start;
  sb->created_ms = wr_now_ms();
}

static void claim_work(struct wr_job *job) {
  struct claim *cl = job->arg;
  int rootfd = cl->rootfd;

  if (rootfd < 0) {
    cl->own_rootfd = wr_rt_open_root(job->d->rt, &cl->spec, &job->err);
    if ((rootfd = cl->own_rootfd) < 0) {
      job->result = -1;
      return;
    }
  }
  job->result = 0;
  if (cl->set_limits && wr_rt_set_limits(job->d->rt, &cl->spec, &job->err) < 0)
    job->result = -1;
  else if (wr_rt_renew_identity(&cl->spec, &cl->inst, rootfd, &job->err) < 0)
    job->result = -1;
}

static void claim_done(struct wr_job *job) {
  struct claim *cl = job->arg;
  struct wr_sandbox *sb = cl->sb;
  wr_error_t err;

  if (job->result < 0) {
    claim_fail(cl, job->err.msg);
    return;
  }
  if (sb->removed || sb->op != WR_OP_NONE || sb->state != WR_SB_PAUSED) {
    claim_fail(cl, "it changed while it was being claimed");
    return;
  }
  if (sb->rootfd < 0 && cl->own_rootfd >= 0)
    sb->rootfd = steal_fd(&cl->own_rootfd);
  apply_spec(sb, &cl->c);
  if (wr_sandbox_resume(sb, WR_WAKE_API, claim_resumed, cl, &err) < 0)
    claim_fail(cl, err.msg);
}

/* A ready sandbox of the image with the disk limit asked for. */
static struct wr_sandbox *pick(struct wr_daemon *d, const char *image,
                               uint64_t disk_bytes) {
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (sb->pooled && sb->pool_state == WR_POOL_READY && sb->op == WR_OP_NONE &&
        sb->state == WR_SB_PAUSED && sb->inst.pidfd >= 0 &&
        sb->spec.disk_bytes == disk_bytes && strcmp(sb->image, image) == 0)
      return sb;
  return NULL;
}

/* The job's copy of what it needs: the spec with the new name and
 * limits, and its own pidfd (the loop closes the sandbox's when init
 * exits). */
static int claim_prepare(struct claim *cl, wr_error_t *err) {
  struct wr_sandbox *sb = cl->sb;

  wr_sandbox_rt_spec(sb, &cl->spec);
  cl->spec.hostname = sb->name;
  cl->spec.memory_bytes = cl->c.memory_bytes;
  cl->spec.cpus = cl->c.cpus;
  cl->spec.pids = cl->c.pids;
  cl->set_limits = cl->c.memory_bytes || cl->c.cpus > 0 || cl->c.pids;
  cl->inst.pid = sb->inst.pid;
  cl->inst.pidfd = fcntl(sb->inst.pidfd, F_DUPFD_CLOEXEC, 3);
  cl->inst.ctl = cl->inst.rootfd = -1;
  cl->rootfd = sb->rootfd;
  cl->own_rootfd = -1;
  if (cl->inst.pidfd < 0)
    return wr_error_set(err, errno, "dup the pidfd of sandbox `%s`", sb->id);
  return 0;
}

int wr_pool_claim(struct wr_daemon *d, struct wr_pool_claim *c,
                  wr_sandbox_done_fn done, void *arg) {
  struct wr_sandbox *sb = pick(d, c->image, c->disk_bytes);
  struct claim *cl;
  wr_error_t err;

  if (sb == NULL)
    return 1;
  cl = xcalloc(1, sizeof(*cl));
  cl->t0_ns = wr_mono_ns();
  cl->sb = sb;
  wr_sandbox_ref(sb);
  cl->c = *c;
  memset(c, 0, sizeof(*c));
  cl->done = done;
  cl->arg = arg;
  /* The new name is taken from now on: a create of the same name sees it. */
  cl->pool_name = sb->name;
  sb->name = xstrdup(cl->c.name ? cl->c.name : sb->id);
  set_member(sb, WR_POOL_CLAIMING);
  if (claim_prepare(cl, &err) < 0) {
    claim_fail(cl, err.msg);
    return 0;
  }
  cl->job.fn = claim_work;
  cl->job.done = claim_done;
  cl->job.arg = cl;
  wr_job_queue(d, &cl->job);
  return 0;
}

struct removal {
  wr_sandbox_done_fn done;
  void *arg;
};

static void removed(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  struct removal *r = arg;

  kick(sb->d); /* one fewer: fill again when there is room */
  r->done(sb, r->arg, err);
  free(r);
}

int wr_pool_remove(struct wr_sandbox *sb, wr_sandbox_done_fn done, void *arg,
                   wr_error_t *err) {
  struct removal *r = xmalloc(sizeof(*r));

  *r = (struct removal){done, arg};
  if (wr_sandbox_remove(sb, true, removed, r, err) < 0) {
    free(r);
    return -1;
  }
  return 0;
}

bool wr_pool_has_ready(struct wr_daemon *d, const char *image,
                       uint64_t disk_bytes) {
  return pick(d, image, disk_bytes) != NULL;
}

bool wr_pool_refuse(const struct wr_sandbox *sb, wr_http_req_t *req) {
  if (!sb->pooled)
    return false;
  wr_http_reply_error(req, 409, "pooled",
                      "sandbox `%s` belongs to the warm pool of image `%s`: "
                      "`warren create --image %s` takes one",
                      sb->name, sb->image, sb->image);
  return true;
}

/* ---- setting a pool ----------------------------------------------------- */

int wr_pool_set(struct wr_daemon *d, const char *image, unsigned size,
                wr_error_t *err) {
  struct wr_pool *p = wr_pool_find(d, image);
  int64_t now = wr_now_ms();

  if (size == 0) {
    if (p != NULL && wr_store_pool_delete(d->store, image, err) < 0)
      return -1;
    if (p != NULL)
      pool_remove(d, p);
    kick(d);
    return 0;
  }
  if (wr_store_pool_set(d->store, image, size, err) < 0)
    return -1;
  if (p == NULL) {
    p = pool_add(d, image);
    p->created_ms = now;
  }
  p->size = size;
  p->updated_ms = now;
  p->retry_at_ms = 0; /* a change of size is a reason to try at once */
  kick(d);
  return 0;
}

static json_t *time_or_null(int64_t ms) {
  char buf[40];

  if (ms == 0)
    return json_null();
  wr_format_time(ms, buf, sizeof(buf));
  return json_string(buf);
}

json_t *wr_pool_json(struct wr_daemon *d, const struct wr_pool *p) {
  struct pool_count c = count(d, p->image);

  return json_pack(
      "{s:s,s:i,s:i,s:i,s:i,s:I,s:o,s:o,s:o,s:o}", "image", p->image, "size",
      (int)p->size, "ready", (int)c.n[WR_POOL_READY], "filling",
      (int)c.n[WR_POOL_FILLING], "claiming", (int)c.n[WR_POOL_CLAIMING],
      "claimed", (json_int_t)p->claimed, "last_error",
      p->last_error ? json_string(p->last_error) : json_null(), "last_error_at",
      time_or_null(p->last_error_ms), "created_at", time_or_null(p->created_ms),
      "updated_at", time_or_null(p->updated_ms));
}

/* ---- the daemon's start and end ---------------------------------------- */

int wr_pool_init(struct wr_daemon *d, wr_error_t *err) {
  struct wr_pool_rec *recs = NULL;
  size_t n = 0;

  d->pools = xcalloc(1, sizeof(*d->pools));
  if (wr_store_pool_list(d->store, &recs, &n, err) < 0)
    return wr_error_wrap(err, "load the warm pools");
  for (size_t i = 0; i < n; i++) {
    struct wr_pool *p = pool_add(d, recs[i].image);
    p->size = recs[i].size > WR_POOL_MAX_SIZE ? WR_POOL_MAX_SIZE
                                              : (unsigned)recs[i].size;
    p->claimed = recs[i].claimed;
    p->created_ms = recs[i].created_ms;
    p->updated_ms = recs[i].updated_ms;
  }
  wr_pool_recs_free(recs, n);
  uv_timer_init(d->loop, &d->pools->timer);
  d->pools->timer.data = d;
  d->pools->timer_init = true;
  return 0;
}

/* A pooled sandbox is kept only when it is ready as stored and paused,
 * with its init managed again. */
static void recover_member(struct wr_daemon *d,
                           const struct wr_pool_member_rec *m) {
  struct wr_sandbox *sb = wr_sandbox_find(d, m->sandbox_id);

  if (sb == NULL || strcmp(sb->id, m->sandbox_id) != 0)
    return;
  sb->pooled = true;
  sb->pool_state = WR_POOL_READY;
  if (strcmp(m->state, "ready") == 0 && sb->state == WR_SB_PAUSED &&
      sb->op == WR_OP_NONE && sb->inst.pidfd >= 0)
    return;
  wr_info("pool %s: %s was %s and %s when warrend stopped: removing it",
          sb->image, sb->name, m->state, wr_sandbox_state_name(sb->state));
  drain(sb, false);
}

void wr_pool_recover(struct wr_daemon *d) {
  struct wr_pool_member_rec *recs = NULL;
  size_t n = 0;
  wr_error_t err;

  if (wr_store_pool_members(d->store, &recs, &n, &err) < 0) {
    wr_warn("pools: %s", err.msg);
    return;
  }
  for (size_t i = 0; i < n; i++)
    recover_member(d, &recs[i]);
  wr_pool_member_recs_free(recs, n);
  kick(d);
}

void wr_pool_shutdown(struct wr_daemon *d) {
  if (d->pools == NULL || !d->pools->timer_init)
    return;
  d->pools->timer_init = false;
  uv_close((uv_handle_t *)&d->pools->timer, NULL);
}

void wr_pool_free(struct wr_daemon *d) {
  if (d->pools == NULL)
    return;
  while (d->pools->list != NULL)
    pool_remove(d, d->pools->list);
  free(d->pools);
  d->pools = NULL;
}
