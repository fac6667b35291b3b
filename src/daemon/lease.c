/*
 * Project leases: one unit of work at a time per project. An app builder
 * takes the lease before an agent turn (edit, build, commit) and lets it
 * go after; a second asker waits in one FIFO line, its place streamed, or
 * is told at once (409, "wait": false) who holds it. A lease has a TTL,
 * renewed by its holder, and ends when released or when the TTL passes
 * (a holder that died does not hold a project forever).
 *
 * The lease is advisory: readers (files, logs, the project's log and
 * diff) never wait for it, and nothing else in warrend takes it, except
 * the planner, which leaves a leased project where it is. Leases live in
 * memory: a warrend that restarts has none (their holders renew and get a
 * 404, which says so). Loop thread only.
 */
#include "daemon/lease.h"

#include "daemon/events.h"
#include "daemon/request.h"
#include "daemon/projects_api.h"

/* A waiter: an HTTP client (streamed NDJSON) or a caller in the daemon. */
struct lease_waiter {
  struct lease_waiter *next;
  struct lease *l;
  char *holder;
  unsigned ttl_s;
  wr_http_req_t *req; /* or NULL */
  wr_lease_fn done;   /* or NULL */
  void *arg;
  bool begun; /* the NDJSON stream has started */
  unsigned position;
  uv_timer_t timer; /* its wait's end */
};

struct lease {
  struct lease *next;
  struct wr_leases *ls;
  char *project;
  /* The holder, when held. */
  char *token, *holder;
  unsigned ttl_s;
  int64_t expires_ms;
  uv_timer_t timer; /* the TTL */
  bool timer_init, held;
  struct lease_waiter *line; /* FIFO */
};

struct wr_leases {
  struct wr_daemon *d;
  struct lease *list;
};

/* ---- the table ----------------------------------------------------------- */

static struct lease *find(struct wr_leases *ls, const char *project,
                          bool make) {
  struct lease *l;

  for (l = ls->list; l != NULL; l = l->next)
    if (strcmp(l->project, project) == 0)
      return l;
  if (!make)
    return NULL;
  l = xcalloc(1, sizeof(*l));
  l->ls = ls;
  l->project = xstrdup(project);
  uv_timer_init(ls->d->loop, &l->timer);
  l->timer.data = l;
  l->timer_init = true;
  l->next = ls->list;
  ls->list = l;
  return l;
}

static void lease_closed(uv_handle_t *h) {
  struct lease *l = h->data;

  free(l->project);
  free(l);
}

/* Nobody holds it and nobody waits: it goes. */
static void drop_if_idle(struct lease *l) {
  if (l->held || l->line != NULL)
    return;
  for (struct lease **pp = &l->ls->list; *pp != NULL; pp = &(*pp)->next)
    if (*pp == l) {
      *pp = l->next;
      break;
    }
  uv_close((uv_handle_t *)&l->timer, lease_closed);
}

static json_t *lease_json(const struct lease *l, bool with_token) {
  json_t *j = json_pack("{s:s, s:s, s:I, s:I}", "project", l->project, "holder",
                        l->holder ? l->holder : "", "ttl", (json_int_t)l->ttl_s,
                        "expires_ms", (json_int_t)l->expires_ms);

  if (with_token)
    json_object_set_new(j, "token", json_string(l->token));
  return j;
}

static unsigned waiting(const struct lease *l) {
  unsigned n = 0;

  for (const struct lease_waiter *w = l->line; w != NULL; w = w->next)
    n++;
  return n;
}

/* ---- holding ------------------------------------------------------------- */

static void on_expiry(uv_timer_t *t);
static void hand_over(struct lease *l);

static void arm(struct lease *l) {
  l->expires_ms = wr_now_ms() + (int64_t)l->ttl_s * 1000;
  uv_timer_start(&l->timer, on_expiry, (uint64_t)l->ttl_s * 1000, 0);
}

static void grant(struct lease *l, const char *holder, unsigned ttl_s) {
  free(l->token);
  free(l->holder);
  l->token = wr_random_id("lease-", 24);
  l->holder = xstrdup(holder);
  l->ttl_s = ttl_s;
  l->held = true;
  arm(l);
  wr_events_emit(
      l->ls->d, "leased", NULL,
      json_pack("{s:s, s:s}", "project", l->project, "holder", holder));
}

/* The holder is done (released, expired, the project removed). */
static void end_hold(struct lease *l, const char *why) {
  if (!l->held)
    return;
  uv_timer_stop(&l->timer);
  wr_events_emit(l->ls->d, "released", NULL,
                 json_pack("{s:s, s:s, s:s}", "project", l->project, "holder",
                           l->holder, "why", why));
  l->held = false;
  free(l->token);
  free(l->holder);
  l->token = l->holder = NULL;
}

static void on_expiry(uv_timer_t *t) {
  struct lease *l = t->data;

  end_hold(l, "expired");
  hand_over(l);
}

/* ---- the line ------------------------------------------------------------ */

static void write_line(wr_http_req_t *req, json_t *j) {
  _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT);

  json_decref(j);
  wr_http_stream_write(req, text, strlen(text));
  wr_http_stream_write(req, "\n", 1);
}

static void waiter_closed(uv_handle_t *h) {
  struct lease_waiter *w = h->data;

  free(w->holder);
  free(w);
}

static void unlink_waiter(struct lease_waiter *w) {
  for (struct lease_waiter **pp = &w->l->line; *pp != NULL; pp = &(*pp)->next)
    if (*pp == w) {
      *pp = w->next;
      return;
    }
}

static void tell_positions(struct lease *l);

/* w leaves the line for good: granted (err NULL) or not. */
static void waiter_end(struct lease_waiter *w, const wr_error_t *err,
                       int status, const char *code) {
  struct lease *l = w->l;

  unlink_waiter(w);
  uv_timer_stop(&w->timer);
  if (w->req != NULL) {
    wr_http_on_abort(w->req, NULL, NULL);
    if (err == NULL && w->begun) {
      write_line(w->req, lease_json(l, true));
      wr_http_stream_end(w->req);
    } else if (err == NULL) {
      wr_http_reply_json(w->req, 200, lease_json(l, true));
    } else if (w->begun) {
      write_line(w->req, json_pack("{s:{s:s, s:s}}", "error", "code", code,
                                   "message", err->msg));
      wr_http_stream_end(w->req);
    } else {
      wr_http_reply_error(w->req, status, code, "%s", err->msg);
    }
  }
  if (w->done != NULL)
    w->done(w->arg, err == NULL ? l->token : NULL, err);
  uv_close((uv_handle_t *)&w->timer, waiter_closed);
  tell_positions(l);
}

static void tell_positions(struct lease *l) {
  unsigned pos = 0;

  for (struct lease_waiter *w = l->line; w != NULL; w = w->next) {
    if (++pos == w->position || w->req == NULL) {
      w->position = pos;
      continue;
    }
    w->position = pos;
    if (!w->begun) {
      wr_http_stream_begin(w->req, 200, "application/x-ndjson", NULL);
      w->begun = true;
    }
    write_line(w->req,
               json_pack("{s:{s:I}}", "queued", "position", (json_int_t)pos));
  }
}

/* Free: the first in line gets it. */
static void hand_over(struct lease *l) {
  struct lease_waiter *w = l->line;

  if (l->held || w == NULL) {
    drop_if_idle(l);
    return;
  }
  grant(l, w->holder, w->ttl_s);
  waiter_end(w, NULL, 200, NULL);
}

static void on_wait_timeout(uv_timer_t *t) {
  struct lease_waiter *w = t->data;
  struct lease *l = w->l;
  wr_error_t err;

  wr_error_setx(&err, ETIMEDOUT,
                "project `%s` was still leased to %s when the wait ended; "
                "try again",
                l->project, l->holder ? l->holder : "another");
  waiter_end(w, &err, 503, "queue_timeout");
  drop_if_idle(l);
}

/* Its place goes; the others move up. */
static void on_waiter_gone(wr_http_req_t *req, void *arg) {
  struct lease_waiter *w = arg;
  struct lease *l = w->l;
  wr_error_t err;

  (void)req;
  wr_error_setx(&err, ECONNRESET, "the client went away while in line");
  waiter_end(w, &err, 499, "gone");
  drop_if_idle(l);
}

static struct lease_waiter *enqueue(struct lease *l, const char *holder,
                                    unsigned ttl_s, unsigned timeout_s) {
  struct lease_waiter *w = xcalloc(1, sizeof(*w)), **tail = &l->line;

  w->l = l;
  w->holder = xstrdup(holder);
  w->ttl_s = ttl_s;
  uv_timer_init(l->ls->d->loop, &w->timer);
  w->timer.data = w;
  uv_timer_start(&w->timer, on_wait_timeout, (uint64_t)timeout_s * 1000, 0);
  while (*tail != NULL)
    tail = &(*tail)->next;
  *tail = w;
  return w;
}

/* ---- for the daemon ------------------------------------------------------ */

int wr_leases_init(struct wr_daemon *d, wr_error_t *err) {
  struct wr_leases *ls = xcalloc(1, sizeof(*ls));

  (void)err;
  ls->d = d;
  d->leases = ls;
  return 0;
}

void wr_leases_shutdown(struct wr_daemon *d) {
  struct wr_leases *ls = d->leases;

  if (ls == NULL)
    return;
  while (ls->list != NULL) {
    struct lease *l = ls->list;
    wr_error_t err;
    wr_error_setx(&err, ESHUTDOWN, "warrend is shutting down");
    while (l->line != NULL)
      waiter_end(l->line, &err, 503, "shutting_down");
    ls->list = l->next;
    free(l->token);
    free(l->holder);
    uv_close((uv_handle_t *)&l->timer, lease_closed);
  }
}

void wr_leases_free(struct wr_daemon *d) {
  free(d->leases);
  d->leases = NULL;
}

bool wr_lease_held(struct wr_daemon *d, const char *project) {
  struct lease *l = d->leases ? find(d->leases, project, false) : NULL;

  return l != NULL && l->held;
}

void wr_lease_acquire(struct wr_daemon *d, const char *project, unsigned ttl_s,
                      const char *holder, bool wait, wr_lease_fn done,
                      void *arg) {
  struct lease *l = find(d->leases, project, true);
  struct lease_waiter *w;
  wr_error_t err;

  if (!l->held && l->line == NULL) {
    grant(l, holder, ttl_s);
    done(arg, l->token, NULL);
    return;
  }
  if (!wait) {
    wr_error_setx(&err, EBUSY, "project `%s` is leased to %s", project,
                  l->holder ? l->holder : "another");
    done(arg, NULL, &err);
    return;
  }
  w = enqueue(l, holder, ttl_s, WR_LEASE_WAIT_MAX_S);
  w->done = done;
  w->arg = arg;
}

int wr_lease_release(struct wr_daemon *d, const char *project,
                     const char *token, wr_error_t *err) {
  struct lease *l = find(d->leases, project, false);

  if (l == NULL || !l->held)
    return wr_error_setx(err, ENOENT, "project `%s` is not leased", project);
  if (token == NULL || strcmp(token, l->token) != 0)
    return wr_error_setx(
        err, EPERM, "that is not the token of project `%s`'s lease", project);
  end_hold(l, "released");
  hand_over(l);
  return 0;
}

void wr_lease_forget(struct wr_daemon *d, const char *project) {
  struct lease *l = d->leases ? find(d->leases, project, false) : NULL;
  wr_error_t err;

  if (l == NULL)
    return;
  wr_error_setx(&err, ENOENT, "project `%s` was removed", project);
  while (l->line != NULL)
    waiter_end(l->line, &err, 404, "not_found");
  end_hold(l, "removed");
  drop_if_idle(l);
}

/* ---- the API ------------------------------------------------------------- */

/* The project from the path, which must exist. */
static const char *lease_project(wr_http_req_t *req, struct wr_daemon *d) {
  const char *name = wr_http_param(req, "id");
  struct wr_project_rec rec = {0};
  wr_error_t err;

  if (name == NULL || !wr_project_name_valid(name) ||
      wr_store_project_get(d->store, name, &rec, &err) < 0) {
    wr_http_reply_error(req, 404, "not_found", "no project `%s`",
                        name ? name : "");
    return NULL;
  }
  wr_project_rec_free(&rec);
  return name;
}

static bool ttl_ok(wr_http_req_t *req, double ttl) {
  if (ttl >= 1 && ttl <= WR_LEASE_TTL_MAX_S)
    return true;
  wr_http_reply_error(req, 400, "bad_request", "ttl must be 1 to %d seconds",
                      WR_LEASE_TTL_MAX_S);
  return false;
}

void wr_api_lease_take(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  double ttl = WR_LEASE_TTL_S, timeout = WR_LEASE_WAIT_S;
  bool wait = true;
  const char *holder = "someone";
  struct wr_json_field f[] = {
      {"ttl", WR_JSON_NUMBER, &ttl, false, NULL},
      {"wait", WR_JSON_BOOL, &wait, false, NULL},
      {"holder", WR_JSON_STRING, &holder, false, NULL},
      {"timeout", WR_JSON_NUMBER, &timeout, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  const char *name;
  struct lease *l;
  struct lease_waiter *w;

  if (body == NULL || (name = lease_project(req, d)) == NULL ||
      !ttl_ok(req, ttl))
    return;
  if (timeout < 1 || timeout > WR_LEASE_WAIT_MAX_S || strlen(holder) > 200 ||
      !wr_text_is_safe(holder)) {
    wr_http_reply_error(req, 400, "bad_request",
                        "timeout must be 1 to %d seconds and holder a "
                        "printable text of at most 200 bytes",
                        WR_LEASE_WAIT_MAX_S);
    return;
  }
  l = find(d->leases, name, true);
  if (!l->held && l->line == NULL) {
    grant(l, holder, (unsigned)ttl);
    wr_http_reply_json(req, 200, lease_json(l, true));
    return;
  }
  if (!wait) {
    char msg[512];
    snprintf(msg, sizeof(msg),
             "project `%s` is leased to %s for %lld s more (%u waiting)", name,
             l->holder ? l->holder : "another",
             (long long)((l->expires_ms - wr_now_ms()) / 1000), waiting(l));
    wr_http_reply_json(req, 409,
                       json_pack("{s:{s:s, s:s}, s:b, s:s, s:I, s:I}", "error",
                                 "code", "leased", "message", msg, "wait",
                                 false, "holder", l->holder ? l->holder : "",
                                 "expires_ms", (json_int_t)l->expires_ms,
                                 "waiting", (json_int_t)waiting(l)));
    return;
  }
  w = enqueue(l, holder, (unsigned)ttl, (unsigned)timeout);
  w->req = req;
  wr_http_on_abort(req, on_waiter_gone, w);
  tell_positions(l);
}

void wr_api_lease_renew(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *token = NULL;
  double ttl = 0;
  struct wr_json_field f[] = {
      {"token", WR_JSON_STRING, &token, true, NULL},
      {"ttl", WR_JSON_NUMBER, &ttl, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  const char *name;
  struct lease *l;

  if (body == NULL || (name = lease_project(req, d)) == NULL ||
      (ttl != 0 && !ttl_ok(req, ttl)))
    return;
  l = find(d->leases, name, false);
  if (l == NULL || !l->held) {
    wr_http_reply_error(req, 404, "not_leased",
                        "project `%s` is not leased (it expired, or warrend "
                        "restarted): take it again",
                        name);
    return;
  }
  if (strcmp(token, l->token) != 0) {
    wr_http_reply_error(req, 409, "not_yours",
                        "that is not the token of project `%s`'s lease, "
                        "which %s holds",
                        name, l->holder);
    return;
  }
  if (ttl != 0)
    l->ttl_s = (unsigned)ttl;
  arm(l);
  wr_http_reply_json(req, 200, lease_json(l, true));
}

void wr_api_lease_release(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *token = wr_http_query(req, "token");
  const char *name = lease_project(req, d);
  wr_error_t err;

  if (name == NULL)
    return;
  if (wr_lease_release(d, name, token, &err) < 0) {
    wr_http_reply_error(req, err.code == ENOENT ? 404 : 409,
                        err.code == ENOENT ? "not_leased" : "not_yours", "%s",
                        err.msg);
    return;
  }
  wr_http_reply_empty(req, 204);
}

void wr_api_lease_get(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = lease_project(req, d);
  struct lease *l;
  json_t *j;

  if (name == NULL)
    return;
  l = find(d->leases, name, false);
  if (l == NULL || !l->held) {
    wr_http_reply_json(req, 200,
                       json_pack("{s:s, s:b, s:I}", "project", name, "held",
                                 false, "waiting",
                                 (json_int_t)(l ? waiting(l) : 0)));
    return;
  }
  j = lease_json(l, false);
  json_object_set_new(j, "held", json_true());
  json_object_set_new(j, "waiting", json_integer((json_int_t)waiting(l)));
  wr_http_reply_json(req, 200, j);
}
