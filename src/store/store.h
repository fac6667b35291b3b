/*
 * store: warren's state in SQLite. The one place that speaks SQL.
 *
 * The database lives at ROOT/warren.db in WAL mode. Its schema is created
 * and upgraded by numbered migrations, applied in order inside one
 * transaction each and recorded in the schema_migrations table; a database
 * newer than this binary is refused.
 *
 * All calls are synchronous and run on the daemon's loop thread (each is a
 * few prepared statements on a local file).
 */
#ifndef WR_STORE_H
#define WR_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"

typedef struct wr_store wr_store_t;

/* A sandbox as stored. Strings are owned by the record. */
struct wr_sandbox_rec {
  char *id;   /* "sb-3f9k2a" */
  char *name; /* unique */
  char *image;
  char *state;     /* "creating", "running", "paused", "stopped", "error" */
  char *spec_json; /* the creation spec as JSON (limits, env, labels...) */
  char *error;     /* last error message, or NULL */
  uint32_t slot;   /* uid/gid range slot, unique among sandboxes */
  int64_t created_ms;
  int64_t updated_ms;
  int32_t init_pid;    /* host pid of warren-init, 0 when none */
  uint64_t init_start; /* its start time (clock ticks, /proc/PID/stat) */
};

struct wr_image_rec {
  char *name;
  char *state;         /* "building", "ready", "error" */
  char *packages_json; /* JSON array of the packages asked for */
  char *suite;
  uint64_t size_bytes;
  int64_t created_ms;
};

int wr_store_open(const char *path, wr_store_t **out, wr_error_t *err);
void wr_store_close(wr_store_t *st);
/* The schema version after migrations. */
int wr_store_version(wr_store_t *st);

/* ---- sandboxes ---------------------------------------------------------- */

/* Insert; a name or id clash fails with err->code == EEXIST and a message
 * naming the clash. */
int wr_store_sandbox_insert(wr_store_t *st, const struct wr_sandbox_rec *rec,
                            wr_error_t *err);
/* Lookup by id or by name; returns 0 and fills rec, or -1 with
 * err->code == ENOENT when there is no such sandbox. */
int wr_store_sandbox_get(wr_store_t *st, const char *id_or_name,
                         struct wr_sandbox_rec *rec, wr_error_t *err);
/* All sandboxes, ordered by creation time. */
int wr_store_sandbox_list(wr_store_t *st, struct wr_sandbox_rec **recs,
                          size_t *n, wr_error_t *err);
/* Update state (and error message, may be NULL) and bump updated_ms. */
int wr_store_sandbox_set_state(wr_store_t *st, const char *id,
                               const char *state, const char *error,
                               wr_error_t *err);
/* Record the running init (pid 0 clears it). */
int wr_store_sandbox_set_init(wr_store_t *st, const char *id, int32_t pid,
                              uint64_t start, wr_error_t *err);
int wr_store_sandbox_delete(wr_store_t *st, const char *id, wr_error_t *err);
/* The smallest slot >= 1 not used by any sandbox. */
int wr_store_sandbox_free_slot(wr_store_t *st, uint32_t *slot, wr_error_t *err);
void wr_sandbox_rec_free(struct wr_sandbox_rec *rec);
void wr_sandbox_recs_free(struct wr_sandbox_rec *recs, size_t n);

/* ---- images ------------------------------------------------------------ */

/* Insert or replace by name. */
int wr_store_image_put(wr_store_t *st, const struct wr_image_rec *rec,
                       wr_error_t *err);
int wr_store_image_get(wr_store_t *st, const char *name,
                       struct wr_image_rec *rec, wr_error_t *err);
int wr_store_image_list(wr_store_t *st, struct wr_image_rec **recs, size_t *n,
                        wr_error_t *err);
int wr_store_image_delete(wr_store_t *st, const char *name, wr_error_t *err);
/* How many sandboxes use the image. */
int wr_store_image_users(wr_store_t *st, const char *name, unsigned *count,
                         wr_error_t *err);
void wr_image_rec_free(struct wr_image_rec *rec);
void wr_image_recs_free(struct wr_image_rec *recs, size_t n);

#endif
