/*
 * Internal to the daemon module: warm pools (pool.c, pool_api.c).
 *
 * A pool keeps `size` sandboxes of one image created, started (with a
 * template, its start command answering), and paused. A create of that
 * image takes one when it can (wr_pool_claim): the sandbox gets the
 * create's name, environment, labels, limits and idle pause, a hostname
 * and machine id of its own, and is resumed; the pool fills up again in
 * the background, at most WR_POOL_FILL_AT_ONCE sandboxes at a time, with
 * a growing pause between failures. See docs/templates.md, "The warm
 * pool". Loop thread only.
 */
#ifndef WR_DAEMON_POOL_H
#define WR_DAEMON_POOL_H

#include "daemon/sandbox.h"

#define WR_POOL_MAX_SIZE 64
#define WR_POOL_FILL_AT_ONCE 2
/* Under --max-running/--max-resident with no slot free, a pool looks
 * again this often. */
#define WR_POOL_NO_ROOM_RETRY_MS 1000

/* What a create gives the sandbox it claims. Owned by the claim once
 * wr_pool_claim has taken it. */
struct wr_pool_claim {
  const char *image; /* borrowed */
  char *name;        /* NULL: the sandbox's id */
  char **env;        /* "K=V", NULL-ended */
  json_t *labels;    /* object of strings */
  char *workdir;
  uint64_t memory_bytes, pids, disk_bytes; /* 0: none */
  double cpus;                             /* 0: none */
  int64_t idle_pause_s;                    /* -1: the daemon's */
  bool restart_start;
};
void wr_pool_claim_clear(struct wr_pool_claim *c);

/* After the store is open: the timer that fills pools. */
int wr_pool_init(struct wr_daemon *d, wr_error_t *err);
/* After the sandboxes are loaded: which are pools', which of those are
 * ready; the others (creating, in error, half claimed) are removed, and
 * the pools fill up again. */
void wr_pool_recover(struct wr_daemon *d);
void wr_pool_shutdown(struct wr_daemon *d);
void wr_pool_free(struct wr_daemon *d);

/*
 * Take a ready sandbox of c->image (with c->disk_bytes as its disk
 * limit) for a create: 1 when there is none (nothing was taken, c is
 * the caller's still), else 0, c's contents are taken, and done is called
 * once: with the claimed sandbox, running, named and stored, or with err
 * when the claim failed (the sandbox is then the pool's, being removed,
 * and the caller may create one the usual way).
 */
int wr_pool_claim(struct wr_daemon *d, struct wr_pool_claim *c,
                  wr_sandbox_done_fn done, void *arg);
/* For the limiter: remove a pool's spare to make room (as
 * wr_sandbox_remove with force); the pool fills again when it can. */
int wr_pool_remove(struct wr_sandbox *sb, wr_sandbox_done_fn done, void *arg,
                   wr_error_t *err);
/* Whether wr_pool_claim would find a ready sandbox of image now. */
bool wr_pool_has_ready(struct wr_daemon *d, const char *image,
                       uint64_t disk_bytes);
/* For an API handler: replies 409 pooled and returns true for a pool's
 * sandbox. */
bool wr_pool_refuse(const struct wr_sandbox *sb, wr_http_req_t *req);

void wr_api_pool_list(wr_http_req_t *req, void *ctx);
void wr_api_pool_put(wr_http_req_t *req, void *ctx);
void wr_api_pool_delete(wr_http_req_t *req, void *ctx);

/* ---- shared by pool.c, pool_api.c and pool_warm.c ---------------------- */

/* Before a fill's sandbox is paused: its template's page asked for once
 * and its CPU gone quiet (at most 10 s); then(sb) unless it was removed
 * meanwhile (pool_warm.c). */
void wr_pool_warm(struct wr_sandbox *sb, void (*then)(struct wr_sandbox *sb));

struct wr_pool {
  struct wr_pool *next;
  char *image;
  unsigned size;
  uint64_t claimed;
  int64_t created_ms, updated_ms;
  char *last_error; /* the last fill that failed, or NULL */
  int64_t last_error_ms;
  unsigned failures;   /* in a row; the backoff grows with them */
  int64_t retry_at_ms; /* no fill before this (0: none) */
};

/* d->pools: the pools, in the order they were made, and the timer of
 * the pass that fills and shrinks them. */
struct wr_pools {
  struct wr_pool *list;
  uv_timer_t timer;
  bool timer_init;
};

/* How long a pool waits before its next fill after `failures` in a row
 * (0 after none): 1 s, doubling, at most a minute. */
int64_t wr_pool_backoff_ms(unsigned failures);
struct wr_pool *wr_pool_find(struct wr_daemon *d, const char *image);
/* Make, resize (size >= 1) or, with size 0, remove the pool of image:
 * stored, then the pool fills or shrinks in the background. */
int wr_pool_set(struct wr_daemon *d, const char *image, unsigned size,
                wr_error_t *err);
json_t *wr_pool_json(struct wr_daemon *d, const struct wr_pool *p);

#endif
