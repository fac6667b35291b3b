/*
 * Internal to the daemon module: the connection to each sandbox's
 * warren-init (initconn.c). Loop thread.
 */
#ifndef WR_DAEMON_INITCONN_H
#define WR_DAEMON_INITCONN_H

#include "daemon/daemon.h"
#include "init/init.h"

struct wr_initconn;
struct wr_sandbox;

/* Reply callback: msg is NULL when the connection failed or closed before
 * the reply came (err says why). fds received with the reply are owned by
 * the callback. */
typedef void (*wr_initconn_reply_fn)(void *arg, const struct wr_init_hdr *hdr,
                                     const void *payload, int *fds, size_t nfds,
                                     const wr_error_t *err);

struct wr_initconn *wr_initconn_new(struct wr_sandbox *sb, int fd,
                                    wr_error_t *err);
/* Close and fail every pending request. */
void wr_initconn_close(struct wr_initconn *c);
/* Send a request (already encoded in msg with a placeholder id, which is
 * rewritten) with fds; cb is called with the reply. The fds are borrowed
 * (sent, not closed). */
int wr_initconn_request(struct wr_initconn *c, wr_buf_t *msg, const int *fds,
                        size_t nfds, wr_initconn_reply_fn cb, void *arg,
                        wr_error_t *err);
/* Detach a callback's arg (its owner is going away): the reply, when it
 * comes, is dropped and its fds closed. */
void wr_initconn_cancel(struct wr_initconn *c, void *arg);

#endif
