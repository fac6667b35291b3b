/*
 * Project leases (lease.c): one unit of work at a time per project, with
 * a TTL, renewed by its holder; the next asker waits in FIFO (its place
 * streamed) or hears at once who holds it. Advisory: readers never wait.
 * See docs/projects.md. Loop thread only.
 */
#ifndef WR_DAEMON_LEASE_H
#define WR_DAEMON_LEASE_H

#include "daemon/daemon.h"

#define WR_LEASE_TTL_S 60       /* unless the asker says */
#define WR_LEASE_TTL_MAX_S 3600 /* the longest a lease runs unrenewed */
#define WR_LEASE_WAIT_S 300     /* how long an asker waits in line */
#define WR_LEASE_WAIT_MAX_S 3600

int wr_leases_init(struct wr_daemon *d, wr_error_t *err);
/* Every waiter is told no; the leases go with the daemon. */
void wr_leases_shutdown(struct wr_daemon *d);
void wr_leases_free(struct wr_daemon *d);

/* Whether someone holds the project's lease (the planner leaves it). */
bool wr_lease_held(struct wr_daemon *d, const char *project);
/* From inside the daemon (the app builder): done gets the token, or err
 * (EBUSY when held and !wait; ETIMEDOUT after WR_LEASE_WAIT_MAX_S). The
 * project is not checked: the caller knows it. */
typedef void (*wr_lease_fn)(void *arg, const char *token,
                            const wr_error_t *err);
void wr_lease_acquire(struct wr_daemon *d, const char *project, unsigned ttl_s,
                      const char *holder, bool wait, wr_lease_fn done,
                      void *arg);
/* ENOENT when not leased, EPERM for another token; the next in line gets
 * it at once. */
int wr_lease_release(struct wr_daemon *d, const char *project,
                     const char *token, wr_error_t *err);
/* The project was removed: its waiters are told so, its lease ends. */
void wr_lease_forget(struct wr_daemon *d, const char *project);

void wr_api_lease_take(wr_http_req_t *req, void *ctx);
void wr_api_lease_renew(wr_http_req_t *req, void *ctx);
void wr_api_lease_release(wr_http_req_t *req, void *ctx);
void wr_api_lease_get(wr_http_req_t *req, void *ctx);

#endif
