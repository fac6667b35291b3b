/*
 * The policy log's writer: decisions queue here and go to the store in
 * batches, one transaction each.
 *
 * Every connection through the proxy is logged when it ends, and one
 * INSERT committed on its own cost more than the rest of the connection's
 * work in the daemon (a WAL append and its locking per row). So entries
 * wait in memory for at most WR_NETLOG_FLUSH_MS, or until
 * WR_NETLOG_BATCH_MAX of them are waiting, and are written together.
 * Nothing is lost to the delay that a reader could see: the log API
 * flushes before it reads, followers get each entry once it is stored
 * (with its id), and shutdown flushes what is left, after the engine has
 * closed its connections (and logged them). Once stopping, entries are
 * written as they come.
 *
 * Loop thread only.
 */
#include "daemon/network_internal.h"

#define WR_NETLOG_FLUSH_MS 20
#define WR_NETLOG_BATCH_MAX 256

static void store_one(struct wr_network *nw, struct wr_netlog_rec *rec) {
  wr_error_t err;

  if (wr_store_netlog_add(nw->d->store, rec, &rec->id, &err) < 0) {
    if (!nw->log_failing)
      wr_warn("policy log: %s", err.msg);
    nw->log_failing = true;
    return;
  }
  nw->log_failing = false;
  wr_network_log_notify(nw, rec);
}

/* One transaction for the batch; without it (the store is busy), each
 * entry on its own, as before. */
void wr_netlog_flush(struct wr_network *nw) {
  struct wr_netlog_rec *q = nw->logq;
  size_t n = nw->logq_len;
  bool tx;
  wr_error_t err;

  if (n == 0)
    return;
  nw->logq = NULL;
  nw->logq_len = nw->logq_cap = 0;
  if (nw->logq_timer_open)
    uv_timer_stop(&nw->logq_timer);
  tx = wr_store_begin(nw->d->store, &err) == 0;
  for (size_t i = 0; i < n; i++)
    store_one(nw, &q[i]);
  if (tx && wr_store_commit(nw->d->store, &err) < 0)
    wr_warn("policy log: %zu entries lost: %s", n, err.msg);
  wr_netlog_recs_free(q, n);
}

static void on_flush_timer(uv_timer_t *t) {
  wr_netlog_flush(t->data);
}

static char *dup_or_null(const char *s) {
  return s != NULL ? xstrdup(s) : NULL;
}

void wr_netlog_add(struct wr_network *nw, const struct wr_netlog_rec *rec) {
  struct wr_netlog_rec *copy;

  if (nw->stopping || !nw->logq_timer_open) {
    struct wr_netlog_rec now = *rec;
    store_one(nw, &now);
    return;
  }
  if (nw->logq_len == nw->logq_cap) {
    nw->logq_cap = nw->logq_cap ? 2 * nw->logq_cap : 16;
    nw->logq = xrealloc(nw->logq, nw->logq_cap * sizeof(*nw->logq));
  }
  copy = &nw->logq[nw->logq_len++];
  *copy = *rec;
  copy->sandbox_id = dup_or_null(rec->sandbox_id);
  copy->kind = dup_or_null(rec->kind);
  copy->host = dup_or_null(rec->host);
  copy->addr = dup_or_null(rec->addr);
  copy->rule = dup_or_null(rec->rule);
  copy->reason = dup_or_null(rec->reason);
  if (nw->logq_len >= WR_NETLOG_BATCH_MAX)
    wr_netlog_flush(nw);
  else if (nw->logq_len == 1)
    uv_timer_start(&nw->logq_timer, on_flush_timer, WR_NETLOG_FLUSH_MS, 0);
}

void wr_netlog_init(struct wr_network *nw) {
  uv_timer_init(nw->d->loop, &nw->logq_timer);
  nw->logq_timer.data = nw;
  nw->logq_timer_open = true;
}

/* What is queued is written, and from now on entries go straight in. */
void wr_netlog_shutdown(struct wr_network *nw) {
  wr_netlog_flush(nw);
  if (!nw->logq_timer_open)
    return;
  nw->logq_timer_open = false;
  uv_close((uv_handle_t *)&nw->logq_timer, NULL);
}
