/*
 * Lifecycle events: what happens to sandboxes (created, started, paused,
 * resumed, stopped, removed, error, and what later parts add), as one
 * journal with increasing ids that clients read as JSON or follow as
 * Server-Sent Events (GET /v1/events).
 *
 * An event is {"id": N, "time": MS, "type": T, "sandbox": {"id", "name"},
 * ...the details}: the type is any short string and the details any
 * object, so a new kind of event needs no change here, only a call to
 * wr_events_emit where it happens.
 *
 * The journal is a ring of the newest events in memory, written to the
 * store in batches (at most WR_EVENTS_FLUSH_MS late) and trimmed there to
 * the same size, so that a restarted daemon starts with the same ring and
 * ids keep increasing (they are reserved in blocks, so that even a daemon
 * killed before its last batch was written never hands an id out twice).
 *
 * Loop thread only.
 */
#ifndef WR_DAEMON_EVENTS_H
#define WR_DAEMON_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api.h"
#include "daemon/daemon_internal.h"

#define WR_EVENTS_JOURNAL_DEFAULT 4096
#define WR_EVENTS_JOURNAL_MIN 16
#define WR_EVENTS_JOURNAL_MAX (1u << 20)
#define WR_EVENTS_FLUSH_MS 20

/* Load the journal from the store and reserve ids; before anything can
 * emit (recovery emits). `journal` is how many events are kept (0: the
 * default). */
int wr_events_init(struct wr_daemon *d, size_t journal, wr_error_t *err);
/*
 * Record one event and send it to every client that follows and wants it.
 * sb may be NULL (an event about the daemon); detail (may be NULL) is an
 * object whose fields are added to the event, and is stolen. Cheap: the
 * store write happens later, in a batch. A no-op before wr_events_init
 * and after wr_events_shutdown.
 */
void wr_events_emit(struct wr_daemon *d, const char *type,
                    const struct wr_sandbox *sb, json_t *detail);
/* The event for a sandbox's change of state, from `from` to sb->state
 * (sb->error says why, when set): "created" and "started" leaving
 * creating, "started", "paused", "resumed", "stopped" (with "reason"),
 * "error" (with "message"); nothing for a change that is none. From
 * wr_sandbox_set_state. */
void wr_events_state_change(struct wr_sandbox *sb, enum wr_sandbox_state from);
/* End every stream (each client reconnects with Last-Event-ID), write
 * what is queued and close the timers. From wr_daemon_shutdown. */
void wr_events_shutdown(struct wr_daemon *d);
/* Free the journal, after the loop has closed the timers. */
void wr_events_free(struct wr_daemon *d);

/* GET /v1/events. */
void wr_api_events(wr_http_req_t *req, void *ctx);

/* ---- the parts, pure, for tests --------------------------------------- */

struct wr_event {
  uint64_t id;
  int64_t time_ms;
  char *type;
  char *sandbox_id, *sandbox_name; /* NULL for an event about no sandbox */
  char *json;                      /* the whole event, serialised */
};

/* The newest `cap` events, oldest first. */
struct wr_event_ring {
  struct wr_event *slots;
  size_t cap, start, len;
};

void wr_event_ring_init(struct wr_event_ring *r, size_t cap);
void wr_event_ring_free(struct wr_event_ring *r);
/* Append ev (its strings are taken); the oldest event goes when the ring
 * is full, and *evicted (may be NULL) gets its id, else 0. ev's id must be
 * above every id in the ring. */
void wr_event_ring_push(struct wr_event_ring *r, struct wr_event *ev,
                        uint64_t *evicted);
/* The i-th oldest event (i < len). */
const struct wr_event *wr_event_ring_at(const struct wr_event_ring *r,
                                        size_t i);
/* The index of the first event with an id above `id` (len when none). */
size_t wr_event_ring_after(const struct wr_event_ring *r, uint64_t id);

/* Which events a client wants: a sandbox (id or name; NULL: all) and
 * types (NULL-ended; NULL: all). */
struct wr_event_filter {
  char *sandbox;
  char **types;
};

/* Parse ?type=a,b: each a name of [a-z0-9-], 1 to 32 characters, at most
 * 32 of them. EINVAL with a message otherwise. */
int wr_event_filter_types(const char *list, char ***out, wr_error_t *err);
bool wr_event_filter_match(const struct wr_event_filter *f,
                           const struct wr_event *ev);
void wr_event_filter_clear(struct wr_event_filter *f);

/* Append ev as one SSE event: its id, its type as the event name, its
 * JSON as the data. */
void wr_event_sse(wr_buf_t *out, const struct wr_event *ev);

#endif
