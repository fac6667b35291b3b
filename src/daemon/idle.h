/*
 * The idle pause (idle.c): what counts as activity, and the tick that
 * pauses a sandbox once it has had none for its idle_pause seconds.
 */
#ifndef WR_DAEMON_IDLE_H
#define WR_DAEMON_IDLE_H

#include <jansson.h>

#include "daemon/daemon.h"

struct wr_sandbox;

/* The longest idle pause a sandbox or the daemon may ask for: 30 days. */
#define WR_IDLE_PAUSE_MAX (30 * 86400)

/* What last kept a sandbox awake (inspect's idle.last_activity.kind). */
enum wr_idle_kind {
  WR_IDLE_STARTED = 0, /* it became running: created, started, resumed */
  WR_IDLE_REQUEST,     /* exec, files, attach/logs, a published port */
  WR_IDLE_STREAM,      /* a client attached to one of its processes */
  WR_IDLE_NETWORK,     /* a connection open, or bytes moved on one */
  WR_IDLE_CPU,         /* CPU use above the threshold */
};

/* A sandbox's part (struct wr_sandbox's `idle`). */
struct wr_sandbox_idle {
  int64_t active_ms; /* the last activity, wall-clock ms */
  enum wr_idle_kind kind;
  uint64_t cpu_ns;   /* the last CPU sample and when it was taken */
  int64_t cpu_at_ms; /* 0: none yet */
  bool by_idle;      /* paused by the idle pause, not by a client */
};

const char *wr_idle_kind_name(enum wr_idle_kind k);
/* Activity now / at at_ms (ignored when older than the last one). */
void wr_idle_touch(struct wr_sandbox *sb, enum wr_idle_kind kind);
void wr_idle_touch_at(struct wr_sandbox *sb, enum wr_idle_kind kind,
                      int64_t at_ms);
/* Whether sb is doing something by these rules now (an operation in
 * flight, an attached client, an open connection, CPU use at the last
 * tick): the limiter evicts only sandboxes that are not. */
bool wr_idle_busy(const struct wr_sandbox *sb);
/* Seconds of nothing after which sb pauses; 0: never. */
int64_t wr_idle_pause_after(const struct wr_sandbox *sb);
/* Its state changed (wr_sandbox_transition calls this). */
void wr_idle_on_state(struct wr_sandbox *sb);
/* inspect's "idle": the setting, the last activity, how long ago. */
json_t *wr_idle_json(const struct wr_sandbox *sb);
/* Sandboxes the idle pause has paused since the daemon started. */
uint64_t wr_idle_paused_count(const struct wr_daemon *d);

int wr_idle_start(struct wr_daemon *d, wr_error_t *err);
void wr_idle_stop(struct wr_daemon *d);

#endif
