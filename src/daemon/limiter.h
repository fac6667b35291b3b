/*
 * The limiter (limiter.c): --max-running and --max-resident, the one
 * place that decides whether a create, start, resume or wake may have a
 * slot now, makes room by evicting an idle sandbox, or puts the request
 * in the one FIFO queue until a slot frees or its timeout ends.
 *
 * A slot is held by a ticket: granted, it reserves the slot until the
 * caller releases it (when its operation has ended, by then the sandbox
 * is counted by its state, or the operation failed), so two requests
 * never take the same slot. Loop thread only.
 */
#ifndef WR_DAEMON_LIMITER_H
#define WR_DAEMON_LIMITER_H

#include <jansson.h>

#include "daemon/daemon.h"
#include "daemon/sandbox.h"

/* How long an evicted paused sandbox's processes get after SIGTERM. */
#define WR_LIMIT_STOP_GRACE_MS 1000
/* The longest wait a daemon or a request may ask for: one hour. */
#define WR_LIMIT_QUEUE_TIMEOUT_MAX 3600

struct wr_limit_ticket;

/* What a request needs. */
struct wr_limit_want {
  const char *what;      /* "create", "start", "resume", "wake" ("for") */
  struct wr_sandbox *sb; /* the sandbox it is for (never a victim); NULL
                            for a create */
  bool resident;         /* a resident slot too: it is not paused yet */
  uint64_t timeout_ms;   /* 0 or more than --queue-timeout: that */
  bool stream;           /* HTTP: stream the position (as Accept asks) */
  /* Its place in line (1 = next) each time it changes; may be NULL. */
  void (*position)(unsigned position, void *arg);
};

/*
 * Called once for a queued request: granted (err NULL; the ticket holds
 * the slot until wr_limiter_release), or not (err: ETIMEDOUT when the
 * wait ended, ECANCELED when the daemon stops; the ticket is gone).
 */
typedef void (*wr_limit_fn)(struct wr_limit_ticket *t, void *arg,
                            const wr_error_t *err);

/* --max-running and the rest come from d->cfg. */
int wr_limiter_init(struct wr_daemon *d, wr_error_t *err);
/* End every wait with ECANCELED and close the timers (daemon shutdown). */
void wr_limiter_shutdown(struct wr_daemon *d);
/* GET /v1/info's "limiter". */
json_t *wr_limiter_json(struct wr_daemon *d);

/*
 * Ask for a slot: 1 when granted now (*out holds it; fn is never
 * called), 0 when queued (*out is the ticket, fn is called later; the
 * wait may be left with wr_limiter_release, and fn is then not called).
 */
int wr_limiter_acquire(struct wr_daemon *d, const struct wr_limit_want *w,
                       wr_limit_fn fn, void *arg, struct wr_limit_ticket **out);
/* A slot now without evicting or queueing, for background work (a pool's
 * refill): 1 with *out, or 0. */
int wr_limiter_try(struct wr_daemon *d, const struct wr_limit_want *w,
                   struct wr_limit_ticket **out);
/* Whether a request for a running slot (running, and so also a resident
 * one) or a resident one only would be granted now, with no eviction and
 * no one in line. */
bool wr_limiter_has_room(struct wr_daemon *d, bool running);
/* Give the slot back, or leave the queue; NULL is nothing. */
void wr_limiter_release(struct wr_limit_ticket *t);
/* A done callback (for the lifecycle) that releases t first and then
 * calls done(sb, arg, err): pass wr_limiter_release_then and the result
 * of wr_limiter_hold. */
void *wr_limiter_hold(struct wr_limit_ticket *t, wr_sandbox_done_fn done,
                      void *arg);
void wr_limiter_release_then(struct wr_sandbox *sb, void *held,
                             const wr_error_t *err);

/* Victims go in this order, lowest first, then least recently active:
 * 1 for every sandbox (a pool may put its spares at 0). */
int wr_limiter_victim_rank(const struct wr_sandbox *sb);
/* Every change of state or operation (wr_sandbox_transition): a slot may
 * have come free. */
void wr_limiter_on_transition(struct wr_sandbox *sb);

/* ---- the lifecycle through the limiter --------------------------------- */

/*
 * Start a stopped sandbox or resume a paused one (resume_only: refuse a
 * stopped one, ESRCH), once it has a slot; nothing for a running one.
 * Refused at once as wr_sandbox_start is; a wait that ends without a slot
 * calls done with ETIMEDOUT (see wr_limiter_wait_error). With req (may be
 * NULL), the wait is the request's (wr_limiter_acquire_http).
 */
int wr_limiter_start(struct wr_sandbox *sb, const struct wr_limit_want *w,
                     bool resume_only, wr_http_req_t *req,
                     wr_sandbox_done_fn done, void *arg, wr_error_t *err);
/* wr_sandbox_wake's part for a paused sandbox with nothing in flight:
 * resume it once it has a running slot (requests for the same sandbox
 * share one); done as wr_sandbox_wake's, ETIMEDOUT when none came. */
void wr_limiter_wake(struct wr_sandbox *sb, enum wr_wake_by by,
                     wr_sandbox_done_fn done, void *arg);
/* Take (done, arg) out of a wake of sb waiting in line: true when it was
 * there (done is then not called); the last to leave leaves the line. */
bool wr_limiter_wake_leave(struct wr_sandbox *sb, wr_sandbox_done_fn done,
                           void *arg);

/* ---- HTTP ---------------------------------------------------------------- */

/* The request's own queue_timeout (query, seconds) into w: 0, or -1 when
 * it has been answered (400). */
int wr_limiter_http_want(wr_http_req_t *req, struct wr_limit_want *w);
/* Whether err is a wait that ended without a slot (ETIMEDOUT), the daemon
 * stopping (ECANCELED) or the client gone (ECONNRESET): answer it with
 * wr_limiter_reply_wait_err. */
bool wr_limiter_wait_error(const wr_error_t *err);
/*
 * wr_limiter_acquire for an API handler: when the request asks for it
 * (Accept: application/x-ndjson, or w->stream), its position in line as
 * NDJSON lines, {"queued": {"position": N}}. A client that goes away
 * leaves the queue: fn gets ECONNRESET (and must still answer).
 */
int wr_limiter_acquire_http(struct wr_daemon *d, wr_http_req_t *req,
                            struct wr_limit_want *w, wr_limit_fn fn, void *arg,
                            struct wr_limit_ticket **out);
/* The final answer of a request that went through the limiter: a whole
 * reply, or the last NDJSON line of its stream (its status inside). */
void wr_limiter_reply_json(struct wr_daemon *d, wr_http_req_t *req, int status,
                           json_t *body);
void wr_limiter_reply_error(struct wr_daemon *d, wr_http_req_t *req, int status,
                            const char *code, const char *fmt, ...)
    WR_PRINTF(5, 6);
/* Whether req's answer goes at the end of a stream. */
bool wr_limiter_streaming(struct wr_daemon *d, wr_http_req_t *req);
/* A wait that ended without a slot: 503 queue_timeout with Retry-After,
 * or what err says (the daemon stopping, the client gone). */
void wr_limiter_reply_wait_err(struct wr_daemon *d, wr_http_req_t *req,
                               const wr_error_t *err);

/* ---- the decision, pure (tests) ---------------------------------------- */

struct wr_limit_counts {
  unsigned running, resident;         /* counted by state, and reserved */
  unsigned max_running, max_resident; /* 0: no limit */
};

struct wr_limit_cand {
  bool running; /* running; else paused */
  bool busy;    /* may not be evicted now */
  int rank;     /* wr_limiter_victim_rank */
  int64_t active_ms;
};

enum wr_limit_verdict {
  WR_LIMIT_GRANT,
  WR_LIMIT_PAUSE, /* pause cands[victim] */
  WR_LIMIT_STOP,  /* stop cands[victim] */
  WR_LIMIT_WAIT,  /* no one may be evicted */
};

/*
 * For a request that needs a running slot and, when resident, a
 * resident one: grant it, or make room for it (a full max-resident
 * stops the best paused candidate, else the best idle running one; a
 * full max-running pauses the best idle running one), or wait. Best:
 * lowest rank, then least recent activity.
 */
enum wr_limit_verdict wr_limit_decide(const struct wr_limit_counts *c,
                                      bool resident,
                                      const struct wr_limit_cand *cands,
                                      size_t n, size_t *victim);

#endif
