/*
 * Internal to the daemon module: this state root among the host's
 * (roots.c).
 */
#ifndef WR_DAEMON_ROOTS_H
#define WR_DAEMON_ROOTS_H

#include "daemon/daemon.h"

/* Take the root's lock, or refuse naming the warrend that holds it. */
int wr_daemon_lock_root(struct wr_daemon *d, wr_error_t *err);
/* Refuse a socket another process listens on, naming it. */
int wr_daemon_check_socket(struct wr_daemon *d, wr_error_t *err);
/* The root's id and cgroup parent, and its record and slots in the host's
 * registry (which it keeps open). */
int wr_daemon_register_root(struct wr_daemon *d, wr_error_t *err);
/* A uid slot no sandbox on the host has, for a new sandbox. */
int wr_daemon_claim_slot(struct wr_daemon *d, const char *sandbox_id,
                         uint32_t *slot, wr_error_t *err);
/* The sandbox is gone from the store: its slot is free again. */
void wr_daemon_release_slot(struct wr_daemon *d, const char *sandbox_id);

#endif
