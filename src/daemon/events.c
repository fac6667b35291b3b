/*
 * Lifecycle events: the journal, its store writer, and GET /v1/events.
 *
 * Every client that follows the stream has a cursor into the journal (the
 * last id it was given or passed over) and no queue of its own: the ring
 * is the queue. A client is written to until the bytes it has not taken
 * yet reach WR_EVENTS_CLIENT_QUEUE, then waits for its connection to
 * drain, and catches up from its cursor. So a slow or stalled client costs
 * the daemon at most that much memory; once it is so far behind that the
 * events it has not had leave the ring, it is cut off with a last
 * "cutoff" event, and reconnects with Last-Event-ID (from where it was,
 * which then answers a "gap" for what was lost).
 *
 * The store is written as the policy log is (netlog.c): events wait at
 * most WR_EVENTS_FLUSH_MS, or until WR_EVENTS_BATCH_MAX of them wait, and
 * go in one transaction, after which the table is trimmed to the ring's
 * size. What waits is simply the ring's events above the last id stored,
 * so nothing is copied for it.
 *
 * Loop thread only.
 */
#include "daemon/events.h"

#include <assert.h>

#define WR_EVENTS_BATCH_MAX 256
#define WR_EVENTS_CLIENT_QUEUE (64u << 10)
#define WR_EVENTS_HEARTBEAT_MS 15000
/* Ids are reserved in the store this many at a time. */
#define WR_EVENTS_ID_BLOCK 1024
#define RESERVED_KEY "events.reserved_id"

struct sub {
  struct sub *next, *prev;
  struct wr_events *ev;
  wr_http_req_t *req;
  struct wr_event_filter filter;
  uint64_t cursor; /* the last id sent or passed over */
  bool waiting;    /* its queue is full: until the connection drains */
  bool gone;       /* ended while being written to: freed by pump */
  int pumping;
};

struct wr_events {
  struct wr_daemon *d;
  struct wr_event_ring ring;
  uint64_t next_id;     /* the id the next event gets */
  uint64_t reserved_id; /* ids up to this one are reserved in the store */
  uint64_t stored_id;   /* the newest id written to the store */
  uint64_t dropped_id;  /* the newest id that has left the ring */
  struct sub *subs;
  uv_timer_t flush_timer, heartbeat;
  bool timers_open, stopping, failing;
};

/* ---- the ring ------------------------------------------------------------ */

static void event_clear(struct wr_event *e) {
  free(e->type);
  free(e->sandbox_id);
  free(e->sandbox_name);
  free(e->json);
  memset(e, 0, sizeof(*e));
}

void wr_event_ring_init(struct wr_event_ring *r, size_t cap) {
  assert(cap > 0);
  r->slots = xcalloc(cap, sizeof(*r->slots));
  r->cap = cap;
  r->start = r->len = 0;
}

void wr_event_ring_free(struct wr_event_ring *r) {
  for (size_t i = 0; i < r->len; i++)
    event_clear(&r->slots[(r->start + i) % r->cap]);
  free(r->slots);
  memset(r, 0, sizeof(*r));
}

void wr_event_ring_push(struct wr_event_ring *r, struct wr_event *ev,
                        uint64_t *evicted) {
  struct wr_event *slot;

  assert(r->len == 0 || ev->id > wr_event_ring_at(r, r->len - 1)->id);
  if (evicted != NULL)
    *evicted = 0;
  if (r->len == r->cap) {
    slot = &r->slots[r->start];
    if (evicted != NULL)
      *evicted = slot->id;
    event_clear(slot);
    r->start = (r->start + 1) % r->cap;
    r->len--;
  }
  r->slots[(r->start + r->len) % r->cap] = *ev;
  r->len++;
  memset(ev, 0, sizeof(*ev));
}

const struct wr_event *wr_event_ring_at(const struct wr_event_ring *r,
                                        size_t i) {
  assert(i < r->len);
  return &r->slots[(r->start + i) % r->cap];
}

/* Ids increase along the ring: a binary search. */
size_t wr_event_ring_after(const struct wr_event_ring *r, uint64_t id) {
  size_t lo = 0, hi = r->len;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (wr_event_ring_at(r, mid)->id <= id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* ---- filters and encoding ------------------------------------------------ */

static bool type_name_valid(const char *s, size_t n) {
  if (n == 0 || n > 32)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
          s[i] == '-'))
      return false;
  return true;
}

int wr_event_filter_types(const char *list, char ***out, wr_error_t *err) {
  char **types = NULL;
  const char *p = list;

  *out = NULL;
  for (size_t count = 0;; count++) {
    size_t n = strcspn(p, ",");
    _cleanup_free_ char *name = strndup(p, n);

    if (name == NULL)
      abort();
    if (count == 32 || !type_name_valid(p, n)) {
      wr_strv_free(types);
      return wr_error_setx(err, EINVAL,
                           count == 32 ? "at most 32 event types"
                                       : "`%s` is not an event type (a-z, "
                                         "0-9 and -, up to 32 characters)",
                           name);
    }
    types = wr_strv_push(types, name);
    if (p[n] == '\0')
      break;
    p += n + 1;
  }
  *out = types;
  return 0;
}

bool wr_event_filter_match(const struct wr_event_filter *f,
                           const struct wr_event *ev) {
  bool typed = f->types == NULL;

  if (f->sandbox != NULL &&
      !(ev->sandbox_id != NULL && strcmp(ev->sandbox_id, f->sandbox) == 0) &&
      !(ev->sandbox_name != NULL && strcmp(ev->sandbox_name, f->sandbox) == 0))
    return false;
  for (size_t i = 0; !typed && f->types[i] != NULL; i++)
    typed = strcmp(f->types[i], ev->type) == 0;
  return typed;
}

void wr_event_filter_clear(struct wr_event_filter *f) {
  free(f->sandbox);
  wr_strv_free(f->types);
  memset(f, 0, sizeof(*f));
}

void wr_event_sse(wr_buf_t *out, const struct wr_event *ev) {
  wr_sse_encode(out, ev->id, ev->type, ev->json);
}

/* ---- the store ------------------------------------------------------------
 */

/* The ring's events above the last one stored, in one transaction; the
 * table then keeps as many as the ring. A failure is logged once until
 * the store works again: the events stay in memory. */
static void flush(struct wr_events *ev) {
  wr_store_t *st = ev->d->store;
  size_t i = wr_event_ring_after(&ev->ring, ev->stored_id);
  bool tx;
  wr_error_t err;

  if (ev->timers_open)
    uv_timer_stop(&ev->flush_timer);
  if (i == ev->ring.len)
    return;
  tx = wr_store_begin(st, &err) == 0;
  for (; i < ev->ring.len; i++) {
    const struct wr_event *e = wr_event_ring_at(&ev->ring, i);
    struct wr_event_rec rec = {.id = (int64_t)e->id,
                               .time_ms = e->time_ms,
                               .type = e->type,
                               .sandbox_id = e->sandbox_id,
                               .json = e->json};
    if (wr_store_event_add(st, &rec, &err) < 0)
      break;
    ev->stored_id = e->id;
  }
  if (i == ev->ring.len)
    wr_store_event_trim(st, ev->ring.cap, &err);
  if (tx && wr_store_commit(st, &err) < 0)
    i = 0;
  if (i < ev->ring.len && !ev->failing)
    wr_warn("events: journal not written: %s", err.msg);
  ev->failing = i < ev->ring.len;
}

static void on_flush_timer(uv_timer_t *t) {
  flush(t->data);
}

static void schedule_flush(struct wr_events *ev) {
  size_t waiting = ev->ring.len - wr_event_ring_after(&ev->ring, ev->stored_id);

  if (ev->stopping || !ev->timers_open || waiting >= WR_EVENTS_BATCH_MAX)
    flush(ev);
  else if (waiting == 1)
    uv_timer_start(&ev->flush_timer, on_flush_timer, WR_EVENTS_FLUSH_MS, 0);
}

/* The next id, reserving a block in the store when the last is used up:
 * one synchronous write per WR_EVENTS_ID_BLOCK events, so that a daemon
 * killed before its batch was written starts above every id it gave out. */
static uint64_t take_id(struct wr_events *ev) {
  if (ev->next_id > ev->reserved_id) {
    char value[24];
    wr_error_t err;

    ev->reserved_id = ev->next_id + WR_EVENTS_ID_BLOCK - 1;
    snprintf(value, sizeof(value), "%llu", (unsigned long long)ev->reserved_id);
    if (wr_store_setting_set(ev->d->store, RESERVED_KEY, value, &err) < 0)
      wr_warn("events: reserve ids: %s", err.msg);
  }
  return ev->next_id++;
}

static void load_one(struct wr_events *ev, const struct wr_event_rec *rec) {
  _cleanup_json_ json_t *j = NULL;
  json_t *sb;
  struct wr_event e = {0};
  wr_error_t err;

  if (rec->id <= 0 ||
      (ev->ring.len > 0 &&
       (uint64_t)rec->id <=
           wr_event_ring_at(&ev->ring, ev->ring.len - 1)->id) ||
      wr_json_parse_object(rec->json, strlen(rec->json), false, &j, &err) < 0)
    return;
  sb = json_object_get(j, "sandbox");
  e.id = (uint64_t)rec->id;
  e.time_ms = rec->time_ms;
  e.type = xstrdup(rec->type);
  e.json = xstrdup(rec->json);
  if (json_is_string(json_object_get(sb, "id")))
    e.sandbox_id = xstrdup(json_string_value(json_object_get(sb, "id")));
  if (json_is_string(json_object_get(sb, "name")))
    e.sandbox_name = xstrdup(json_string_value(json_object_get(sb, "name")));
  wr_event_ring_push(&ev->ring, &e, NULL);
}

/* The ring as the store has it, and ids above both the newest event and
 * the block the last daemon reserved. */
static int load(struct wr_events *ev, wr_error_t *err) {
  struct wr_event_rec *recs = NULL;
  _cleanup_free_ char *reserved = NULL;
  int64_t max_id = 0;
  size_t n = 0;
  uint64_t r = 0;
  wr_error_t e;

  if (wr_store_event_list_last(ev->d->store, ev->ring.cap, &recs, &n, err) <
          0 ||
      wr_store_event_max_id(ev->d->store, &max_id, err) < 0) {
    wr_event_recs_free(recs, n);
    return wr_error_wrap(err, "load the event journal");
  }
  for (size_t i = 0; i < n; i++)
    load_one(ev, &recs[i]);
  wr_event_recs_free(recs, n);
  if (wr_store_setting_get(ev->d->store, RESERVED_KEY, &reserved, &e) == 0)
    wr_parse_u64(reserved, 0, UINT64_MAX / 2, &r, &e);
  ev->stored_id = (uint64_t)max_id;
  ev->reserved_id = r > (uint64_t)max_id ? r : (uint64_t)max_id;
  ev->next_id = ev->reserved_id + 1;
  if (n == ev->ring.cap && ev->ring.len > 0)
    ev->dropped_id = wr_event_ring_at(&ev->ring, 0)->id - 1;
  return 0;
}

/* ---- followers ----------------------------------------------------------- */

static void sub_free(struct sub *s) {
  wr_event_filter_clear(&s->filter);
  free(s);
}

/* Unlink and make the request's final call (cut says which). */
static void sub_end(struct sub *s, bool cut) {
  wr_http_req_t *req = s->req;

  if (s->gone)
    return;
  s->gone = true;
  if (s->prev != NULL)
    s->prev->next = s->next;
  else
    s->ev->subs = s->next;
  if (s->next != NULL)
    s->next->prev = s->prev;
  wr_http_on_abort(req, NULL, NULL);
  wr_http_on_drain(req, NULL, NULL);
  if (cut)
    wr_http_stream_abort(req);
  else
    wr_http_stream_end(req);
  if (s->pumping == 0)
    sub_free(s);
}

/* The client has fallen so far behind that the events it has not had
 * are gone: one last event says so, without an id, so that its
 * Last-Event-ID stays where it was. */
static void cut_off(struct sub *s) {
  _cleanup_(wr_buf_free) wr_buf_t b = {0};
  _cleanup_free_ char *data = xasprintf(
      "{\"reason\":\"too slow: the journal has dropped events this client "
      "had not taken\",\"last_id\":%llu}",
      (unsigned long long)s->cursor);

  wr_warn("events: a client fell behind by more than %zu events; cut off",
          s->ev->ring.cap);
  wr_sse_encode(&b, 0, "cutoff", data);
  wr_http_stream_write(s->req, b.data, b.len);
  sub_end(s, true);
}

/* Write what the client has not had, until its queue is full. */
static void pump(struct sub *s) {
  struct wr_events *ev = s->ev;
  _cleanup_(wr_buf_free) wr_buf_t b = {0};
  size_t i;

  if (s->gone)
    return;
  if (s->cursor < ev->dropped_id) {
    cut_off(s);
    return;
  }
  if (s->waiting)
    return;
  s->pumping++;
  for (i = wr_event_ring_after(&ev->ring, s->cursor);
       i < ev->ring.len && !s->gone && !s->waiting; i++) {
    const struct wr_event *e = wr_event_ring_at(&ev->ring, i);

    s->cursor = e->id;
    if (!wr_event_filter_match(&s->filter, e))
      continue;
    wr_buf_reset(&b);
    wr_event_sse(&b, e);
    if (wr_http_stream_write(s->req, b.data, b.len) >= WR_EVENTS_CLIENT_QUEUE)
      s->waiting = true;
  }
  if (--s->pumping == 0 && s->gone)
    sub_free(s);
}

static void on_sub_drain(wr_http_req_t *req, void *arg) {
  struct sub *s = arg;

  (void)req;
  s->waiting = false;
  pump(s);
}

static void on_sub_abort(wr_http_req_t *req, void *arg) {
  (void)req;
  sub_end(arg, false);
}

/* A comment line keeps idle connections (and proxies) from timing out and
 * shows a dead peer by failing; skipped for a client whose queue is full. */
static void on_heartbeat(uv_timer_t *t) {
  struct wr_events *ev = t->data;
  static const char beat[] = ": keep-alive\n\n";

  for (struct sub *s = ev->subs, *next; s != NULL; s = next) {
    next = s->next;
    if (!s->waiting)
      wr_http_stream_write(s->req, beat, sizeof(beat) - 1);
  }
}

/* ---- emitting -------------------------------------------------------------
 */

static struct wr_event make_event(struct wr_events *ev, const char *type,
                                  const struct wr_sandbox *sb, json_t *detail) {
  struct wr_event e = {0};
  _cleanup_json_ json_t *j = NULL;
  const char *key;
  json_t *value;

  e.id = take_id(ev);
  e.time_ms = wr_now_ms();
  e.type = xstrdup(type);
  j = json_pack("{s:I,s:I,s:s}", "id", (json_int_t)e.id, "time",
                (json_int_t)e.time_ms, "type", type);
  if (sb != NULL) {
    e.sandbox_id = xstrdup(sb->id);
    e.sandbox_name = xstrdup(sb->name);
    json_object_set_new(j, "sandbox",
                        json_pack("{s:s,s:s}", "id", sb->id, "name", sb->name));
  }
  /* The details never replace what every event has. */
  json_object_foreach (detail, key, value) {
    if (json_object_get(j, key) == NULL)
      json_object_set(j, key, value);
  }
  e.json = wr_json_dumps(j);
  return e;
}

void wr_events_emit(struct wr_daemon *d, const char *type,
                    const struct wr_sandbox *sb, json_t *detail) {
  struct wr_events *ev = d->events;
  struct wr_event e;
  uint64_t evicted = 0;

  assert(type != NULL && type_name_valid(type, strlen(type)));
  assert(detail == NULL || json_is_object(detail));
  if (ev == NULL || ev->stopping) {
    json_decref(detail);
    return;
  }
  e = make_event(ev, type, sb, detail);
  json_decref(detail);
  wr_debug("event %llu: %s", (unsigned long long)e.id, e.json);
  wr_event_ring_push(&ev->ring, &e, &evicted);
  if (evicted != 0)
    ev->dropped_id = evicted;
  schedule_flush(ev);
  for (struct sub *s = ev->subs, *next; s != NULL; s = next) {
    next = s->next;
    pump(s);
  }
}

/* What each change of state means to a reader, in one place. */
void wr_events_state_change(struct wr_sandbox *sb, enum wr_sandbox_state from) {
  enum wr_sandbox_state to = sb->state;
  const char *why = sb->error;
  bool was_up = from == WR_SB_RUNNING || from == WR_SB_PAUSED;
  struct wr_daemon *d = sb->d;

  if (to == WR_SB_ERROR || (to == WR_SB_STOPPED && !was_up &&
                            from != WR_SB_CREATING && why != NULL)) {
    wr_events_emit(d, "error", sb,
                   json_pack("{s:s,s:s}", "state", wr_sandbox_state_name(to),
                             "message", why != NULL ? why : "unknown"));
    return;
  }
  if (from == WR_SB_CREATING)
    wr_events_emit(d, "created", sb, NULL);
  if (to == WR_SB_RUNNING && from == WR_SB_PAUSED)
    wr_events_emit(d, "resumed", sb,
                   json_pack("{s:s}", "by", wr_wake_by_name(sb->last_wake_by)));
  else if (to == WR_SB_RUNNING && from != WR_SB_RUNNING)
    wr_events_emit(d, "started", sb, NULL);
  else if (to == WR_SB_PAUSED && from == WR_SB_RUNNING)
    wr_events_emit(
        d, sb->idle.by_idle ? "idle-paused" : "paused", sb,
        sb->idle.by_idle
            ? json_pack("{s:I}", "idle_s", (json_int_t)wr_idle_pause_after(sb))
            : NULL);
  else if (to == WR_SB_STOPPED && was_up)
    wr_events_emit(d, "stopped", sb,
                   json_pack("{s:s}", "reason", why ? why : "requested"));
}

/* ---- GET /v1/events --------------------------------------------------------
 */

struct query {
  uint64_t since, limit;
  bool follow;
  struct wr_event_filter filter;
};

/* Last-Event-ID (what a reconnecting EventSource sends) wins over ?since. */
static int parse_query(wr_http_req_t *req, struct query *q) {
  const char *last = wr_http_header(req, "Last-Event-ID");
  const char *accept = wr_http_header(req, "Accept");
  const char *types = wr_http_query(req, "type");
  const char *sandbox = wr_http_query(req, "sandbox");
  wr_error_t err;

  if (wr_req_u64(req, "since", 0, 0, INT64_MAX, &q->since) < 0 ||
      wr_req_u64(req, "limit", 0, 0, WR_EVENTS_JOURNAL_MAX, &q->limit) < 0 ||
      wr_req_bool(req, "follow",
                  accept != NULL && strstr(accept, "text/event-stream"),
                  &q->follow) < 0)
    return -1;
  if (last != NULL && *last != '\0' &&
      wr_parse_u64(last, 0, INT64_MAX, &q->since, &err) < 0) {
    wr_http_reply_error(req, 400, "bad_request", "Last-Event-ID: %s", err.msg);
    return -1;
  }
  if (types != NULL &&
      wr_event_filter_types(types, &q->filter.types, &err) < 0) {
    wr_http_reply_error(req, 400, "bad_request", "query `type`: %s", err.msg);
    return -1;
  }
  if (sandbox != NULL && (*sandbox == '\0' || strlen(sandbox) > 128)) {
    wr_http_reply_error(req, 400, "bad_request",
                        "query `sandbox` must name a sandbox");
    return -1;
  }
  q->filter.sandbox = sandbox != NULL ? xstrdup(sandbox) : NULL;
  return 0;
}

/* The journal as JSON, built from the events' own text: {"events": [...],
 * "last_id", "oldest_id", "truncated" (events after `since` were dropped
 * from the journal)}. With a limit, the newest that many. */
static void reply_journal(struct wr_events *ev, wr_http_req_t *req,
                          const struct query *q) {
  _cleanup_(wr_buf_free) wr_buf_t b = {0};
  const struct wr_event_ring *r = &ev->ring;
  size_t first = wr_event_ring_after(r, q->since), n = 0, skip = 0;
  uint64_t last = ev->next_id - 1;
  bool sep = false;

  for (size_t i = first; i < r->len; i++)
    n += wr_event_filter_match(&q->filter, wr_event_ring_at(r, i));
  if (q->limit > 0 && n > q->limit)
    skip = n - q->limit;
  wr_buf_puts(&b, "{\"events\":[");
  for (size_t i = first; i < r->len; i++) {
    const struct wr_event *e = wr_event_ring_at(r, i);
    if (!wr_event_filter_match(&q->filter, e) || (skip > 0 && skip--))
      continue;
    if (sep)
      wr_buf_puts(&b, ",");
    wr_buf_puts(&b, e->json);
    sep = true;
  }
  wr_buf_printf(
      &b, "],\"last_id\":%llu,\"oldest_id\":%llu,\"truncated\":%s}",
      (unsigned long long)(r->len ? wr_event_ring_at(r, r->len - 1)->id : last),
      (unsigned long long)(r->len ? wr_event_ring_at(r, 0)->id : 0),
      q->since < ev->dropped_id ? "true" : "false");
  wr_http_reply_json_text(req, 200, b.data, b.len);
}

static void follow(struct wr_events *ev, wr_http_req_t *req, struct query *q) {
  struct sub *s = xcalloc(1, sizeof(*s));

  s->ev = ev;
  s->req = req;
  s->filter = q->filter;
  memset(&q->filter, 0, sizeof(q->filter));
  s->cursor = q->since;
  wr_http_stream_begin(req, 200, "text/event-stream",
                       "Cache-Control: no-cache\r\n");
  if (q->since < ev->dropped_id) {
    _cleanup_(wr_buf_free) wr_buf_t b = {0};
    _cleanup_free_ char *data = xasprintf(
        "{\"since\":%llu,\"oldest_id\":%llu,\"message\":\"the journal no "
        "longer holds every event after %llu\"}",
        (unsigned long long)q->since, (unsigned long long)(ev->dropped_id + 1),
        (unsigned long long)q->since);
    wr_sse_encode(&b, 0, "gap", data);
    wr_http_stream_write(req, b.data, b.len);
    s->cursor = ev->dropped_id;
  }
  s->next = ev->subs;
  if (ev->subs != NULL)
    ev->subs->prev = s;
  ev->subs = s;
  wr_http_on_abort(req, on_sub_abort, s);
  wr_http_on_drain(req, on_sub_drain, s);
  pump(s);
}

void wr_api_events(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_events *ev = d->events;
  struct query q = {0};

  if (ev == NULL || ev->stopping) {
    wr_http_reply_error(req, 503, "unavailable", "the daemon is stopping");
    return;
  }
  if (parse_query(req, &q) < 0) {
    wr_event_filter_clear(&q.filter);
    return;
  }
  if (q.follow)
    follow(ev, req, &q);
  else
    reply_journal(ev, req, &q);
  wr_event_filter_clear(&q.filter);
}

/* ---- setup and teardown -------------------------------------------------- */

int wr_events_init(struct wr_daemon *d, size_t journal, wr_error_t *err) {
  struct wr_events *ev = xcalloc(1, sizeof(*ev));

  if (journal == 0)
    journal = WR_EVENTS_JOURNAL_DEFAULT;
  ev->d = d;
  wr_event_ring_init(&ev->ring, journal);
  if (load(ev, err) < 0) {
    wr_event_ring_free(&ev->ring);
    free(ev);
    return -1;
  }
  uv_timer_init(d->loop, &ev->flush_timer);
  uv_timer_init(d->loop, &ev->heartbeat);
  ev->flush_timer.data = ev->heartbeat.data = ev;
  ev->timers_open = true;
  uv_timer_start(&ev->heartbeat, on_heartbeat, WR_EVENTS_HEARTBEAT_MS,
                 WR_EVENTS_HEARTBEAT_MS);
  uv_unref((uv_handle_t *)&ev->heartbeat);
  d->events = ev;
  return 0;
}

/* A clean stop leaves no reserved ids unused: the next daemon goes on
 * from the last id given out. */
void wr_events_shutdown(struct wr_daemon *d) {
  struct wr_events *ev = d->events;
  char value[24];

  if (ev == NULL || ev->stopping)
    return;
  while (ev->subs != NULL)
    sub_end(ev->subs, false);
  flush(ev);
  ev->stopping = true;
  snprintf(value, sizeof(value), "%llu", (unsigned long long)(ev->next_id - 1));
  if (!ev->failing)
    wr_store_setting_set(d->store, RESERVED_KEY, value, NULL);
  if (ev->timers_open) {
    ev->timers_open = false;
    uv_close((uv_handle_t *)&ev->flush_timer, NULL);
    uv_close((uv_handle_t *)&ev->heartbeat, NULL);
  }
}

void wr_events_free(struct wr_daemon *d) {
  struct wr_events *ev = d->events;

  if (ev == NULL)
    return;
  wr_event_ring_free(&ev->ring);
  free(ev);
  d->events = NULL;
}
