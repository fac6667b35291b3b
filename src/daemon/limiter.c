/*
 * The limiter: at most --max-running sandboxes running and at most
 * --max-resident running or paused, decided in one place.
 *
 * A request that needs a slot (a create or a start needs a running and a
 * resident one, a resume or a wake a running one) asks wr_limiter_acquire.
 * It is granted at once when there is room and no one is in line; the
 * ticket then reserves the slot until the caller releases it, once its
 * operation has ended (the sandbox is counted by its state from then on)
 * or failed. Otherwise the request joins the one FIFO queue, and the pump
 * (a zero timer, run after any change that may free a slot) walks the
 * queue in order: the head is granted when there is room; every request
 * in line that has no eviction in flight makes room for itself by pausing
 * the best idle running sandbox (for max-running) or stopping the best
 * paused one (for max-resident), best being the lowest
 * wr_limiter_victim_rank and then the least recent activity. A sandbox
 * that is busy by the idle pause's rules (wr_idle_busy) is never chosen,
 * nor one that a request in line is for; when no one may go, the request
 * waits until a sandbox leaves on its own or its timeout ends.
 *
 * Counting by state plus reservations means two requests never take the
 * same slot; a sandbox that is pausing is still running until it is
 * frozen, so the slot it frees is handed out only once it is.
 *
 * Loop thread only.
 */
#include "daemon/limiter.h"

#include "daemon/events.h"
#include "daemon/idle.h"
#include "daemon/pool.h"
#include "daemon/request.h"

#include <assert.h>
#include <stdarg.h>

/* Seconds a client is told to wait before it asks again. */
#define RETRY_AFTER_S 5

/* A request for a slot, queued or holding one. */
struct wr_limit_ticket {
  struct wr_limit_ticket *next, *prev; /* in the queue */
  struct wr_limiter *l;
  struct wr_limit_want want; /* want.sb is referenced */
  wr_limit_fn fn;
  void *arg;
  bool queued, granted;
  unsigned position;
  uint64_t queued_at, deadline; /* uv_now */
  struct evict *evict;          /* the eviction in flight for it */
};

/* An eviction in flight, for a ticket in line (NULL once it has left). */
struct evict {
  struct wr_limiter *l;
  struct wr_limit_ticket *t;
  struct wr_sandbox *victim;
};

/* Wakes of one paused sandbox share one ticket. */
struct wake_wait {
  struct wake_wait *next;
  struct wr_sandbox *sb;
  enum wr_wake_by by;
  struct wr_sandbox_waiter *waiters;
  struct wr_limit_ticket *t;
};

/* An HTTP request in line (see wr_limiter_acquire_http). */
struct qhttp {
  struct qhttp *next;
  struct wr_limiter *l;
  wr_http_req_t *req;
  bool stream, begun;
  wr_limit_fn fn;
  void *arg;
  struct wr_limit_ticket *t; /* while in line */
};

struct wr_limiter {
  struct wr_daemon *d;
  uv_timer_t kick, expire;
  struct wr_limit_ticket *head, *tail;
  unsigned queued;
  unsigned reserved_running, reserved_resident;
  uint64_t evicted, timed_out;
  struct wake_wait *wakes;
  struct qhttp *http;
  int refs; /* two timers and the evictions in flight */
  bool closing;
};

/* ---- the decision -------------------------------------------------------- */

static bool goes_before(const struct wr_limit_cand *a,
                        const struct wr_limit_cand *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->active_ms < b->active_ms;
}

static bool best(const struct wr_limit_cand *cands, size_t n, bool running,
                 size_t *out) {
  bool found = false;

  for (size_t i = 0; i < n; i++) {
    if (cands[i].busy || cands[i].running != running)
      continue;
    if (!found || goes_before(&cands[i], &cands[*out]))
      *out = i;
    found = true;
  }
  return found;
}

enum wr_limit_verdict wr_limit_decide(const struct wr_limit_counts *c,
                                      bool resident,
                                      const struct wr_limit_cand *cands,
                                      size_t n, size_t *victim) {
  bool running_full = c->max_running > 0 && c->running >= c->max_running;
  bool resident_full =
      resident && c->max_resident > 0 && c->resident >= c->max_resident;

  if (!running_full && !resident_full)
    return WR_LIMIT_GRANT;
  if (resident_full)
    return best(cands, n, false, victim) || best(cands, n, true, victim)
               ? WR_LIMIT_STOP
               : WR_LIMIT_WAIT;
  return best(cands, n, true, victim) ? WR_LIMIT_PAUSE : WR_LIMIT_WAIT;
}

int wr_limiter_victim_rank(const struct wr_sandbox *sb) {
  return sb->pooled && sb->pool_state == WR_POOL_READY ? 0 : 1;
}

/* ---- counting ------------------------------------------------------------ */

static void count(const struct wr_limiter *l, struct wr_limit_counts *c) {
  *c = (struct wr_limit_counts){
      .running = l->reserved_running,
      .resident = l->reserved_resident,
      .max_running = l->d->cfg.max_running,
      .max_resident = l->d->cfg.max_resident,
  };
  for (const struct wr_sandbox *sb = l->d->sandboxes; sb; sb = sb->next) {
    c->running += sb->state == WR_SB_RUNNING;
    c->resident += sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED;
  }
}

static bool in_line(const struct wr_limiter *l, const struct wr_sandbox *sb) {
  for (const struct wr_limit_ticket *t = l->head; t != NULL; t = t->next)
    if (t->want.sb == sb)
      return true;
  return false;
}

/* The sandboxes that could make room, as the decision sees them. */
static size_t candidates(const struct wr_limiter *l, struct wr_sandbox **sbs,
                         struct wr_limit_cand *cands, size_t cap) {
  size_t n = 0;

  for (struct wr_sandbox *sb = l->d->sandboxes; sb && n < cap; sb = sb->next) {
    if (sb->state != WR_SB_RUNNING && sb->state != WR_SB_PAUSED)
      continue;
    sbs[n] = sb;
    cands[n] = (struct wr_limit_cand){
        .running = sb->state == WR_SB_RUNNING,
        .busy = wr_idle_busy(sb) || in_line(l, sb),
        .rank = wr_limiter_victim_rank(sb),
        .active_ms = sb->idle.active_ms,
    };
    n++;
  }
  return n;
}

static size_t table_size(const struct wr_limiter *l) {
  size_t n = 0;

  for (const struct wr_sandbox *sb = l->d->sandboxes; sb; sb = sb->next)
    n++;
  return n;
}

/* What the decision sees: the counts and the candidates, made once for
 * a pass over the line (each is O(sandboxes + line)). */
struct view {
  struct wr_limit_counts c;
  struct wr_sandbox **sbs;
  struct wr_limit_cand *cands;
  size_t n;
};

static void view_make(const struct wr_limiter *l, struct view *v) {
  size_t cap = table_size(l) + 1;

  count(l, &v->c);
  v->sbs = xcalloc(cap, sizeof(*v->sbs));
  v->cands = xcalloc(cap, sizeof(*v->cands));
  v->n = candidates(l, v->sbs, v->cands, cap);
}

static void view_free(struct view *v) {
  free(v->sbs);
  free(v->cands);
}

/* The decision for t; *victim is the sandbox to evict, if any. A
 * sandbox that t is for is in line, so never a candidate. */
static enum wr_limit_verdict decide_in(const struct view *v,
                                       const struct wr_limit_ticket *t,
                                       size_t *victim) {
  return wr_limit_decide(&v->c, t->want.resident, v->cands, v->n, victim);
}

/* The same for one request not in line yet (the cheap case first). */
static enum wr_limit_verdict decide(const struct wr_limiter *l,
                                    const struct wr_limit_ticket *t) {
  struct wr_limit_counts c;
  size_t i;

  count(l, &c);
  return wr_limit_decide(&c, t->want.resident, NULL, 0, &i);
}

/* ---- tickets --------------------------------------------------------------
 */

static void limiter_unref(struct wr_limiter *l) {
  if (--l->refs == 0)
    free(l);
}

static void on_kick(uv_timer_t *h);

static void kick(struct wr_limiter *l) {
  if (!l->closing && l->head != NULL)
    uv_timer_start(&l->kick, on_kick, 0, 0);
}

static void reserve(struct wr_limit_ticket *t) {
  t->granted = true;
  t->l->reserved_running++;
  t->l->reserved_resident += t->want.resident;
}

static void unlink_ticket(struct wr_limit_ticket *t) {
  struct wr_limiter *l = t->l;

  *(t->prev ? &t->prev->next : &l->head) = t->next;
  *(t->next ? &t->next->prev : &l->tail) = t->prev;
  t->next = t->prev = NULL;
  t->queued = false;
  l->queued--;
  if (t->evict != NULL)
    t->evict->t = NULL;
  t->evict = NULL;
}

static void ticket_free(struct wr_limit_ticket *t) {
  if (t->want.sb != NULL)
    wr_sandbox_unref(t->want.sb);
  free(t);
}

static json_t *dequeued_json(const struct wr_limit_ticket *t,
                             const char *outcome) {
  return json_pack("{s:s,s:I,s:s}", "for", t->want.what, "waited_ms",
                   (json_int_t)(uv_now(t->l->d->loop) - t->queued_at),
                   "outcome", outcome);
}

static void grant(struct wr_limit_ticket *t) {
  unlink_ticket(t);
  reserve(t);
  wr_events_emit(t->l->d, "dequeued", t->want.sb, dequeued_json(t, "granted"));
  t->fn(t, t->arg, NULL);
}

void wr_limiter_release(struct wr_limit_ticket *t) {
  struct wr_limiter *l;

  if (t == NULL)
    return;
  l = t->l;
  if (t->queued) {
    wr_events_emit(l->d, "dequeued", t->want.sb, dequeued_json(t, "left"));
    unlink_ticket(t);
  }
  if (t->granted) {
    l->reserved_running--;
    l->reserved_resident -= t->want.resident;
  }
  ticket_free(t);
  kick(l);
}

struct held {
  struct wr_limit_ticket *t;
  wr_sandbox_done_fn done;
  void *arg;
};

void *wr_limiter_hold(struct wr_limit_ticket *t, wr_sandbox_done_fn done,
                      void *arg) {
  struct held *h = xcalloc(1, sizeof(*h));

  *h = (struct held){.t = t, .done = done, .arg = arg};
  return h;
}

void wr_limiter_release_then(struct wr_sandbox *sb, void *held,
                             const wr_error_t *err) {
  struct held *h = held;

  wr_limiter_release(h->t);
  h->done(sb, h->arg, err);
  free(h);
}

/* ---- evictions ------------------------------------------------------------
 */

static void evicted(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  struct evict *e = arg;

  if (err != NULL)
    wr_warn("sandbox %s: eviction failed: %s", sb->name, err->msg);
  if (e->t != NULL)
    e->t->evict = NULL;
  wr_sandbox_unref(e->victim);
  kick(e->l);
  limiter_unref(e->l);
  free(e);
}

static void evict_for(struct wr_limit_ticket *t, struct wr_sandbox *v,
                      bool stop) {
  struct wr_limiter *l = t->l;
  struct evict *e = xcalloc(1, sizeof(*e));
  const char *action;
  wr_error_t err;
  bool pooled;
  int rc;

  *e = (struct evict){.l = l, .t = t, .victim = v};
  wr_sandbox_ref(v);
  l->refs++;
  t->evict = e;
  /* A warm pool's spare is no one's: it goes rather than stops, and the
   * pool makes another when there is room again. */
  pooled = stop && v->pooled;
  action = pooled ? "removed" : stop ? "stopped" : "paused";
  wr_info("sandbox %s: %s for a %s (limit reached)", v->name, action,
          t->want.what);
  wr_events_emit(l->d, "evicted", v,
                 json_pack("{s:s,s:s}", "action", action, "for", t->want.what));
  l->evicted++;
  if (pooled)
    rc = wr_pool_remove(v, evicted, e, &err);
  else if (stop)
    rc = wr_sandbox_stop(v, WR_LIMIT_STOP_GRACE_MS, evicted, e, &err);
  else
    rc = wr_sandbox_pause(v, evicted, e, &err);
  if (rc < 0) {
    wr_warn("sandbox %s: cannot evict: %s", v->name, err.msg);
    t->evict = NULL;
    wr_sandbox_unref(v);
    l->refs--;
    free(e);
  }
}

/* ---- the queue ------------------------------------------------------------
 */

static void on_expire(uv_timer_t *h);

static void arm_expire(struct wr_limiter *l) {
  uint64_t first = UINT64_MAX, now = uv_now(l->d->loop);

  for (const struct wr_limit_ticket *t = l->head; t != NULL; t = t->next)
    if (t->deadline < first)
      first = t->deadline;
  if (first == UINT64_MAX)
    uv_timer_stop(&l->expire);
  else
    uv_timer_start(&l->expire, on_expire, first > now ? first - now : 0, 0);
}

static void tell_position(struct wr_limit_ticket *t, unsigned pos) {
  if (t->position == pos)
    return;
  t->position = pos;
  if (t->want.position != NULL)
    t->want.position(pos, t->arg);
}

/* In order: grant the head while there is room; everyone behind makes
 * room for itself, one eviction each at a time. */
static void pump(struct wr_limiter *l) {
  struct wr_limit_ticket *t, *next;
  bool blocked = false;
  unsigned pos = 0;
  struct view v;

  view_make(l, &v);
  for (t = l->head; t != NULL; t = next) {
    size_t i = 0;
    enum wr_limit_verdict verdict = decide_in(&v, t, &i);

    next = t->next;
    if (!blocked && verdict == WR_LIMIT_GRANT) {
      grant(t);
      /* What a grant did may have changed the line and the table. */
      view_free(&v);
      view_make(l, &v);
      next = l->head;
      continue;
    }
    blocked = true;
    if ((verdict == WR_LIMIT_PAUSE || verdict == WR_LIMIT_STOP) &&
        t->evict == NULL) {
      evict_for(t, v.sbs[i], verdict == WR_LIMIT_STOP);
      v.cands[i].busy = true;
    }
    tell_position(t, ++pos); /* may end t (its client went away) */
  }
  view_free(&v);
  arm_expire(l);
}

static void on_kick(uv_timer_t *h) {
  pump(h->data);
}

static void time_out(struct wr_limit_ticket *t) {
  struct wr_limiter *l = t->l;
  struct wr_limit_counts c;
  wr_error_t err;

  count(l, &c);
  wr_error_setx(&err, ETIMEDOUT,
                "no free sandbox slot within %llus (%u running of at most "
                "%u, %u resident of at most %u, none idle): try again later",
                (unsigned long long)((t->deadline - t->queued_at) / 1000),
                c.running, c.max_running, c.resident, c.max_resident);
  wr_events_emit(l->d, "dequeued", t->want.sb, dequeued_json(t, "timeout"));
  unlink_ticket(t);
  l->timed_out++;
  t->fn(NULL, t->arg, &err);
  ticket_free(t);
}

static void on_expire(uv_timer_t *h) {
  struct wr_limiter *l = h->data;
  uint64_t now = uv_now(l->d->loop);

  for (struct wr_limit_ticket *t = l->head, *next; t != NULL; t = next) {
    next = t->next;
    if (t->deadline <= now)
      time_out(t);
  }
  pump(l);
}

static struct wr_limit_ticket *ticket_new(struct wr_limiter *l,
                                          const struct wr_limit_want *w,
                                          wr_limit_fn fn, void *arg) {
  struct wr_limit_ticket *t = xcalloc(1, sizeof(*t));
  uint64_t max = (uint64_t)l->d->cfg.queue_timeout_s * 1000;

  t->l = l;
  t->want = *w;
  if (t->want.timeout_ms == 0 || t->want.timeout_ms > max)
    t->want.timeout_ms = max;
  if (w->sb != NULL)
    wr_sandbox_ref(w->sb);
  t->fn = fn;
  t->arg = arg;
  t->queued_at = uv_now(l->d->loop);
  t->deadline = t->queued_at + t->want.timeout_ms;
  return t;
}

static void enqueue(struct wr_limit_ticket *t) {
  struct wr_limiter *l = t->l;

  t->prev = l->tail;
  *(l->tail ? &l->tail->next : &l->head) = t;
  l->tail = t;
  t->queued = true;
  l->queued++;
  wr_events_emit(l->d, "queued", t->want.sb,
                 json_pack("{s:s,s:I}", "for", t->want.what, "position",
                           (json_int_t)l->queued));
  kick(l);
}

int wr_limiter_acquire(struct wr_daemon *d, const struct wr_limit_want *w,
                       wr_limit_fn fn, void *arg,
                       struct wr_limit_ticket **out) {
  struct wr_limiter *l = d->limiter;
  struct wr_limit_ticket *t;

  *out = NULL;
  if (l == NULL) /* the daemon is stopping: nothing to share */
    return 1;
  *out = t = ticket_new(l, w, fn, arg);
  if (l->head == NULL && decide(l, t) == WR_LIMIT_GRANT) {
    reserve(t);
    return 1;
  }
  enqueue(t);
  return 0;
}

int wr_limiter_try(struct wr_daemon *d, const struct wr_limit_want *w,
                   struct wr_limit_ticket **out) {
  struct wr_limiter *l = d->limiter;
  struct wr_limit_ticket *t;

  *out = NULL;
  if (l == NULL)
    return 0;
  t = ticket_new(l, w, NULL, NULL);
  if (l->head != NULL || decide(l, t) != WR_LIMIT_GRANT) {
    ticket_free(t);
    return 0;
  }
  reserve(t);
  *out = t;
  return 1;
}

bool wr_limiter_has_room(struct wr_daemon *d, bool running) {
  struct wr_limiter *l = d->limiter;
  struct wr_limit_counts c;
  size_t i;

  if (l == NULL || l->head != NULL)
    return false;
  count(l, &c);
  if (!running)
    return c.max_resident == 0 || c.resident < c.max_resident;
  return wr_limit_decide(&c, true, NULL, 0, &i) == WR_LIMIT_GRANT;
}

void wr_limiter_on_transition(struct wr_sandbox *sb) {
  if (sb->d != NULL && sb->d->limiter != NULL)
    kick(sb->d->limiter);
}

/* ---- the lifecycle through the limiter ---------------------------------- */

struct start_wait {
  struct wr_sandbox *sb;
  bool resume_only;
  wr_sandbox_done_fn done;
  void *arg;
};

static void start_go(struct start_wait *s, struct wr_limit_ticket *t) {
  struct wr_sandbox *sb = s->sb;
  void *held = wr_limiter_hold(t, s->done, s->arg);
  wr_error_t err;
  int rc;

  if (sb->op == WR_OP_NONE && sb->state == WR_SB_PAUSED)
    rc =
        wr_sandbox_resume(sb, WR_WAKE_API, wr_limiter_release_then, held, &err);
  else if (s->resume_only && sb->state != WR_SB_RUNNING)
    rc = wr_error_setx(&err, ESRCH, "sandbox `%s` is %s", sb->name,
                       wr_sandbox_state_name(sb->state));
  else
    rc = wr_sandbox_start(sb, wr_limiter_release_then, held, &err);
  if (rc < 0)
    wr_limiter_release_then(sb, held, &err);
}

static void start_granted(struct wr_limit_ticket *t, void *arg,
                          const wr_error_t *err) {
  struct start_wait *s = arg;

  if (err != NULL)
    s->done(s->sb, s->arg, err);
  else
    start_go(s, t);
  wr_sandbox_unref(s->sb);
  free(s);
}

int wr_limiter_start(struct wr_sandbox *sb, const struct wr_limit_want *w,
                     bool resume_only, wr_http_req_t *req,
                     wr_sandbox_done_fn done, void *arg, wr_error_t *err) {
  bool paused = sb->state == WR_SB_PAUSED;
  struct wr_limit_want want = *w;
  struct wr_limit_ticket *t;
  struct start_wait *s;

  if (sb->op == WR_OP_NONE && sb->state == WR_SB_RUNNING) {
    done(sb, arg, NULL);
    return 0;
  }
  if (wr_sandbox_can(sb, paused ? WR_OP_RESUMING : WR_OP_STARTING, err) < 0)
    return -1;
  if (resume_only && !paused)
    return wr_error_setx(err, ESRCH, "sandbox `%s` is %s", sb->name,
                         wr_sandbox_state_name(sb->state));
  s = xcalloc(1, sizeof(*s));
  *s = (struct start_wait){sb, resume_only, done, arg};
  wr_sandbox_ref(sb);
  want.sb = sb;
  want.resident = !paused;
  if ((req != NULL
           ? wr_limiter_acquire_http(sb->d, req, &want, start_granted, s, &t)
           : wr_limiter_acquire(sb->d, &want, start_granted, s, &t)) == 1)
    start_granted(t, s, NULL);
  return 0;
}

static void wake_tell(struct wake_wait *ww, const wr_error_t *err) {
  struct wr_sandbox_waiter *w = ww->waiters;

  while (w != NULL) {
    struct wr_sandbox_waiter *next = w->next;
    w->fn(ww->sb, w->arg, err);
    free(w);
    w = next;
  }
  wr_sandbox_unref(ww->sb);
  free(ww);
}

static void wake_resumed(struct wr_sandbox *sb, void *arg,
                         const wr_error_t *err) {
  (void)sb;
  wake_tell(arg, err);
}

static void unlink_wake(struct wr_limiter *l, struct wake_wait *ww) {
  for (struct wake_wait **pp = &l->wakes; *pp != NULL; pp = &(*pp)->next)
    if (*pp == ww) {
      *pp = ww->next;
      return;
    }
}

/* The slot is there: resume, or, when something else woke or stopped it
 * meanwhile, wake each again (which finds what to do now). */
static void wake_go(struct wake_wait *ww, struct wr_limit_ticket *t) {
  struct wr_sandbox *sb = ww->sb;
  struct wr_sandbox_waiter *w;
  wr_error_t err;

  if (sb->op == WR_OP_NONE && sb->state == WR_SB_PAUSED && !sb->removed) {
    if (wr_sandbox_resume(sb, ww->by, wr_limiter_release_then,
                          wr_limiter_hold(t, wake_resumed, ww), &err) < 0)
      assert(!"a paused sandbox with nothing in flight may resume");
    return;
  }
  wr_limiter_release(t);
  w = steal_ptr(&ww->waiters);
  while (w != NULL) {
    struct wr_sandbox_waiter *next = w->next;
    if (wr_sandbox_wake(sb, ww->by, w->fn, w->arg) == 1)
      w->fn(sb, w->arg, NULL);
    free(w);
    w = next;
  }
  wake_tell(ww, NULL);
}

static void wake_granted(struct wr_limit_ticket *t, void *arg,
                         const wr_error_t *err) {
  struct wake_wait *ww = arg;

  unlink_wake(ww->sb->d->limiter, ww);
  if (err != NULL)
    wake_tell(ww, err);
  else
    wake_go(ww, t);
}

void wr_limiter_wake(struct wr_sandbox *sb, enum wr_wake_by by,
                     wr_sandbox_done_fn done, void *arg) {
  struct wr_limiter *l = sb->d->limiter;
  struct wr_sandbox_waiter *w = xcalloc(1, sizeof(*w)), **pp;
  struct wr_limit_want want = {.what = "wake", .sb = sb};
  struct wake_wait *ww;

  w->fn = done;
  w->arg = arg;
  if (l == NULL) {
    wr_error_t err;
    free(w);
    if (wr_sandbox_resume(sb, by, done, arg, &err) < 0)
      assert(!"a paused sandbox with nothing in flight may resume");
    return;
  }
  for (ww = l->wakes; ww != NULL; ww = ww->next)
    if (ww->sb == sb) {
      for (pp = &ww->waiters; *pp != NULL; pp = &(*pp)->next)
        ;
      *pp = w;
      return;
    }
  ww = xcalloc(1, sizeof(*ww));
  ww->sb = sb;
  ww->by = by;
  ww->waiters = w;
  wr_sandbox_ref(sb);
  if (wr_limiter_acquire(sb->d, &want, wake_granted, ww, &ww->t) == 1) {
    wake_go(ww, ww->t);
    return;
  }
  ww->next = l->wakes;
  l->wakes = ww;
}

bool wr_limiter_wake_leave(struct wr_sandbox *sb, wr_sandbox_done_fn done,
                           void *arg) {
  struct wr_limiter *l = sb->d->limiter;
  struct wake_wait *ww = NULL;

  for (ww = l ? l->wakes : NULL; ww != NULL && ww->sb != sb; ww = ww->next)
    ;
  if (ww == NULL)
    return false;
  for (struct wr_sandbox_waiter **pp = &ww->waiters; *pp; pp = &(*pp)->next) {
    struct wr_sandbox_waiter *w = *pp;
    if (w->fn != done || w->arg != arg)
      continue;
    *pp = w->next;
    free(w);
    if (ww->waiters == NULL) {
      unlink_wake(l, ww);
      wr_limiter_release(ww->t);
      wake_tell(ww, NULL);
    }
    return true;
  }
  return false;
}

/* ---- HTTP ---------------------------------------------------------------- */

static struct qhttp *find_http(struct wr_daemon *d, wr_http_req_t *req,
                               bool take) {
  struct wr_limiter *l = d->limiter;

  for (struct qhttp **pp = l ? &l->http : NULL; pp && *pp; pp = &(*pp)->next)
    if ((*pp)->req == req) {
      struct qhttp *q = *pp;
      if (take)
        *pp = q->next;
      return q;
    }
  return NULL;
}

static void write_line(wr_http_req_t *req, json_t *j) {
  _cleanup_free_ char *text = wr_json_dumps(j);
  _cleanup_free_ char *line = xasprintf("%s\n", text);

  json_decref(j);
  wr_http_stream_write(req, line, strlen(line));
}

static void http_position(unsigned pos, void *arg) {
  struct qhttp *q = arg;

  if (!q->stream)
    return;
  if (!q->begun)
    wr_http_stream_begin(q->req, 200, "application/x-ndjson", NULL);
  q->begun = true;
  write_line(q->req,
             json_pack("{s:{s:I}}", "queued", "position", (json_int_t)pos));
}

static void http_granted(struct wr_limit_ticket *t, void *arg,
                         const wr_error_t *err) {
  struct qhttp *q = arg;
  wr_limit_fn fn = q->fn;
  void *fn_arg = q->arg;

  q->t = NULL;
  wr_http_on_abort(q->req, NULL, NULL);
  if (!q->begun)
    free(find_http(q->l->d, q->req, true));
  fn(t, fn_arg, err);
}

static void http_abort(wr_http_req_t *req, void *arg) {
  struct qhttp *q = arg;
  wr_error_t err;

  (void)req;
  wr_limiter_release(steal_ptr(&q->t));
  wr_error_setx(&err, ECONNRESET, "the client went away while in line");
  http_granted(NULL, q, &err);
}

static bool wants_stream(wr_http_req_t *req) {
  const char *accept = wr_http_header(req, "Accept");

  return accept != NULL && strstr(accept, "application/x-ndjson") != NULL;
}

int wr_limiter_http_want(wr_http_req_t *req, struct wr_limit_want *w) {
  uint64_t s;

  if (wr_req_u64(req, "queue_timeout", 0, 0, WR_LIMIT_QUEUE_TIMEOUT_MAX, &s) <
      0)
    return -1;
  if (s > 0)
    w->timeout_ms = s * 1000;
  if (!w->stream && wr_req_bool(req, "stream", false, &w->stream) < 0)
    return -1;
  return 0;
}

bool wr_limiter_wait_error(const wr_error_t *err) {
  return err != NULL && (err->code == ETIMEDOUT || err->code == ECANCELED ||
                         err->code == ECONNRESET);
}

int wr_limiter_acquire_http(struct wr_daemon *d, wr_http_req_t *req,
                            struct wr_limit_want *w, wr_limit_fn fn, void *arg,
                            struct wr_limit_ticket **out) {
  struct qhttp *q;

  if (d->limiter == NULL)
    return wr_limiter_acquire(d, w, fn, arg, out);
  /* A request in line again (a create that found its name taken by a
   * sandbox to reuse) goes on in the stream it began. */
  q = find_http(d, req, true);
  if (q == NULL)
    q = xcalloc(1, sizeof(*q));
  q->l = d->limiter;
  q->req = req;
  q->stream = w->stream || wants_stream(req);
  q->fn = fn;
  q->arg = arg;
  w->position = http_position;
  if (wr_limiter_acquire(d, w, http_granted, q, out) == 1 && !q->begun) {
    free(q);
    return 1;
  }
  /* In line, or granted at once after a first wait that streamed: its
   * answer goes at the end of that stream. */
  q->next = d->limiter->http;
  d->limiter->http = q;
  if (!(*out)->granted) {
    q->t = *out;
    wr_http_on_abort(req, http_abort, q);
    return 0;
  }
  return 1;
}

bool wr_limiter_streaming(struct wr_daemon *d, wr_http_req_t *req) {
  const struct qhttp *q = find_http(d, req, false);

  return q != NULL && q->begun;
}

void wr_limiter_reply_json(struct wr_daemon *d, wr_http_req_t *req, int status,
                           json_t *body) {
  _cleanup_free_ struct qhttp *q = find_http(d, req, true);

  if (q == NULL || !q->begun) {
    wr_http_reply_json(req, status, body);
    return;
  }
  write_line(req, body);
  wr_http_stream_end(req);
}

static void reply_error_v(struct wr_daemon *d, wr_http_req_t *req, int status,
                          const char *code, const char *extra, const char *fmt,
                          va_list ap) {
  _cleanup_free_ struct qhttp *q = find_http(d, req, true);
  char msg[1024];

  vsnprintf(msg, sizeof(msg), fmt, ap);
  if (q == NULL || !q->begun) {
    wr_http_reply_error_headers(req, status, code, extra, "%s", msg);
    return;
  }
  write_line(req,
             json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
  wr_http_stream_end(req);
}

void wr_limiter_reply_error(struct wr_daemon *d, wr_http_req_t *req, int status,
                            const char *code, const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  reply_error_v(d, req, status, code, NULL, fmt, ap);
  va_end(ap);
}

static void reply_wait_err(struct wr_daemon *d, wr_http_req_t *req,
                           const char *extra, int status, const char *code,
                           const char *fmt, ...) WR_PRINTF(6, 7);

static void reply_wait_err(struct wr_daemon *d, wr_http_req_t *req,
                           const char *extra, int status, const char *code,
                           const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  reply_error_v(d, req, status, code, extra, fmt, ap);
  va_end(ap);
}

void wr_limiter_reply_wait_err(struct wr_daemon *d, wr_http_req_t *req,
                               const wr_error_t *err) {
  char retry[64];

  snprintf(retry, sizeof(retry), "Retry-After: %d\r\n", RETRY_AFTER_S);
  reply_wait_err(d, req, retry, 503,
                 err->code == ETIMEDOUT ? "queue_timeout" : "unavailable", "%s",
                 err->msg);
}

/* ---- the daemon's part ----------------------------------------------------
 */

json_t *wr_limiter_json(struct wr_daemon *d) {
  struct wr_limit_counts c;

  count(d->limiter, &c);
  return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "max_running",
                   (json_int_t)c.max_running, "max_resident",
                   (json_int_t)c.max_resident, "running", (json_int_t)c.running,
                   "resident", (json_int_t)c.resident, "queued",
                   (json_int_t)d->limiter->queued, "queue_timeout",
                   (json_int_t)d->cfg.queue_timeout_s, "evicted",
                   (json_int_t)d->limiter->evicted, "timed_out",
                   (json_int_t)d->limiter->timed_out);
}

int wr_limiter_init(struct wr_daemon *d, wr_error_t *err) {
  struct wr_limiter *l = xcalloc(1, sizeof(*l));

  l->d = d;
  l->refs = 2;
  if (uv_timer_init(d->loop, &l->kick) < 0 ||
      uv_timer_init(d->loop, &l->expire) < 0) {
    free(l);
    return wr_error_set(err, EIO, "limiter timers");
  }
  l->kick.data = l->expire.data = l;
  uv_unref((uv_handle_t *)&l->kick);
  uv_unref((uv_handle_t *)&l->expire);
  d->limiter = l;
  return 0;
}

static void timer_closed(uv_handle_t *h) {
  limiter_unref(h->data);
}

void wr_limiter_shutdown(struct wr_daemon *d) {
  struct wr_limiter *l = d->limiter;
  wr_error_t err;

  if (l == NULL)
    return;
  l->closing = true;
  wr_error_setx(&err, ECANCELED, "warrend is stopping: try again");
  while (l->head != NULL) {
    struct wr_limit_ticket *t = l->head;
    unlink_ticket(t);
    t->fn(NULL, t->arg, &err);
    ticket_free(t);
  }
  d->limiter = NULL; /* l goes once its timers and evictions have */
  uv_close((uv_handle_t *)&l->kick, timer_closed);
  uv_close((uv_handle_t *)&l->expire, timer_closed);
}
