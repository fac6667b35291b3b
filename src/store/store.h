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
  char *node_json; /* which Node.js: {"version","source",...}, or NULL */
  bool minimal;    /* built with --minimal */
};

int wr_store_open(const char *path, wr_store_t **out, wr_error_t *err);
void wr_store_close(wr_store_t *st);
/* The schema version after migrations. */
int wr_store_version(wr_store_t *st);
/* A transaction that holds the write lock from its start (several calls
 * that must see and change the database as one). A failed commit rolls
 * back. */
int wr_store_begin(wr_store_t *st, wr_error_t *err);
int wr_store_commit(wr_store_t *st, wr_error_t *err);
void wr_store_rollback(wr_store_t *st);

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
/* (A new sandbox's slot comes from the host's registry, below:
 * wr_roots_claim_free.) */
void wr_sandbox_rec_free(struct wr_sandbox_rec *rec);
void wr_sandbox_recs_free(struct wr_sandbox_rec *recs, size_t n);

/* ---- snapshots (snapshot.c) -------------------------------------------- */

/* A disk snapshot as stored. Strings are owned by the record. */
struct wr_snapshot_rec {
  char *id;          /* "snap-3f9k2a" */
  char *name;        /* unique among snapshots */
  char *state;       /* "creating" (being captured or imported), "ready" */
  char *image;       /* the image its layers sit on */
  char *source_id;   /* the sandbox it was taken of; NULL when imported */
  char *source_name; /* ... and its name then */
  char *parent_id;   /* the snapshot that sandbox was made from, or NULL */
  char *layers_json; /* JSON array of snapshot ids, newest (this) first */
  char *info_json;   /* the capture's figures (JSON object), or NULL */
  uint64_t size_bytes;
  int64_t expires_ms; /* removed after this time when nothing uses it;
                         0: kept until removed */
  int64_t created_ms;
};

/* Insert; an id or name clash is EEXIST with a message naming it. */
int wr_store_snapshot_insert(wr_store_t *st, const struct wr_snapshot_rec *rec,
                             wr_error_t *err);
/* By id, else by name; ENOENT when there is none. */
int wr_store_snapshot_get(wr_store_t *st, const char *id_or_name,
                          struct wr_snapshot_rec *rec, wr_error_t *err);
/* All snapshots, oldest first. */
int wr_store_snapshot_list(wr_store_t *st, struct wr_snapshot_rec **recs,
                           size_t *n, wr_error_t *err);
/* The capture or import is complete. */
int wr_store_snapshot_set_ready(wr_store_t *st, const char *id, uint64_t size,
                                const char *info_json, wr_error_t *err);
/* An import learns its image from the stream. */
int wr_store_snapshot_set_image(wr_store_t *st, const char *id,
                                const char *image, wr_error_t *err);
int wr_store_snapshot_delete(wr_store_t *st, const char *id, wr_error_t *err);
void wr_snapshot_rec_free(struct wr_snapshot_rec *rec);
void wr_snapshot_recs_free(struct wr_snapshot_rec *recs, size_t n);

/* ---- warm pools (pool.c) ------------------------------------------------ */

/* A pool as stored: keep `size` (>= 1) sandboxes of `image` ready. */
struct wr_pool_rec {
  char *image;
  uint64_t size;
  uint64_t claimed; /* creates that took one of its sandboxes, ever */
  int64_t created_ms, updated_ms;
};
/* What a sandbox is to its pool (sandboxes.pool). */
struct wr_pool_member_rec {
  char *sandbox_id;
  char *state; /* "filling", "ready" or "claiming" */
};

/* Make or resize the pool of image (size >= 1). */
int wr_store_pool_set(wr_store_t *st, const char *image, uint64_t size,
                      wr_error_t *err);
/* ENOENT when there is no such pool. */
int wr_store_pool_delete(wr_store_t *st, const char *image, wr_error_t *err);
/* Ordered by image. */
int wr_store_pool_list(wr_store_t *st, struct wr_pool_rec **recs, size_t *n,
                       wr_error_t *err);
void wr_pool_recs_free(struct wr_pool_rec *recs, size_t n);
/* Mark a sandbox as its pool's, in `state` (NULL: no longer pooled). */
int wr_store_sandbox_set_pool(wr_store_t *st, const char *id, const char *state,
                              wr_error_t *err);
/* Every pooled sandbox. */
int wr_store_pool_members(wr_store_t *st, struct wr_pool_member_rec **recs,
                          size_t *n, wr_error_t *err);
void wr_pool_member_recs_free(struct wr_pool_member_rec *recs, size_t n);
/* The end of a claim, in one transaction: the sandbox (which must be
 * 'claiming') gets its name, spec and creation time and leaves its pool,
 * and the pool of `image` (if it still exists) counts one more claim. */
int wr_store_pool_claimed(wr_store_t *st, const char *id, const char *image,
                          const char *name, const char *spec_json,
                          int64_t created_ms, wr_error_t *err);

/* ---- projects (project.c) ---------------------------------------------- */

/* A project as stored (migration 9). */
struct wr_project_rec {
  char *name;
  char *template_name;
  char *tier;     /* "hot", "warm", "cool" or "cold" */
  char *sandbox;  /* its sandbox's name while it has one, else NULL */
  char *snapshot; /* its cool tier's snapshot, else NULL */
  int64_t generation;
  char *remote;        /* upstream URL, or NULL */
  char *remote_secret; /* the secret's name for pushing there, or NULL */
  char *labels_json;   /* an object of strings */
  char *settings_json; /* author, install command, ... (projects code) */
  char *revision;      /* the mirror's last commit, or NULL */
  int64_t last_edit_ms, created_ms;
};

/* Insert; a name clash is EEXIST. */
int wr_store_project_insert(wr_store_t *st, const struct wr_project_rec *rec,
                            wr_error_t *err);
/* ENOENT when there is none. */
int wr_store_project_get(wr_store_t *st, const char *name,
                         struct wr_project_rec *rec, wr_error_t *err);
/* All projects, by name. */
int wr_store_project_list(wr_store_t *st, struct wr_project_rec **recs,
                          size_t *n, wr_error_t *err);
/* Write back tier, sandbox, snapshot, generation, revision and last edit
 * (the columns that move); ENOENT when it is gone. */
int wr_store_project_update(wr_store_t *st, const struct wr_project_rec *rec,
                            wr_error_t *err);
int wr_store_project_delete(wr_store_t *st, const char *name, wr_error_t *err);
void wr_project_rec_free(struct wr_project_rec *rec);
void wr_project_recs_free(struct wr_project_rec *recs, size_t n);

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

/* ---- templates (template.c) --------------------------------------------- */

struct wr_template_rec {
  char *name;
  char *base;          /* the image under all its layers */
  char *parent;        /* what FROM named: the image, or a template */
  char *manifest_json; /* steps, layers, cmd, port, env, workdir, user */
  uint64_t size_bytes;
  int64_t created_ms;
};

/* Insert or replace by name (a rebuild). */
int wr_store_template_put(wr_store_t *st, const struct wr_template_rec *rec,
                          wr_error_t *err);
/* ENOENT when there is none. */
int wr_store_template_get(wr_store_t *st, const char *name,
                          struct wr_template_rec *rec, wr_error_t *err);
int wr_store_template_list(wr_store_t *st, struct wr_template_rec **recs,
                           size_t *n, wr_error_t *err);
int wr_store_template_delete(wr_store_t *st, const char *name, wr_error_t *err);
void wr_template_rec_free(struct wr_template_rec *rec);
void wr_template_recs_free(struct wr_template_rec *recs, size_t n);

/* ---- network: settings, policy, log, secrets, ports (net.c) ------------- */

/* A setting's value ("policy.preset"); ENOENT when it was never set. */
int wr_store_setting_get(wr_store_t *st, const char *key, char **value,
                         wr_error_t *err);
/* Insert or replace. */
int wr_store_setting_set(wr_store_t *st, const char *key, const char *value,
                         wr_error_t *err);

/* A policy rule as stored: the pattern is already normalised. */
struct wr_rule_rec {
  int64_t id;
  char *sandbox_id; /* NULL: a global rule */
  bool allow;
  char *pattern; /* "example.com", "*.example.com", "10.0.0.0/8" */
  uint16_t port; /* 0: every port */
  int64_t created_ms;
};

/* Add a rule unless the same one (sandbox, action, pattern, port) exists;
 * either way rec gets the stored row. *added says which happened (may be
 * NULL). A sandbox that does not exist is EINVAL. */
int wr_store_rule_add(wr_store_t *st, const struct wr_rule_rec *in,
                      struct wr_rule_rec *rec, bool *added, wr_error_t *err);
int wr_store_rule_get(wr_store_t *st, int64_t id, struct wr_rule_rec *rec,
                      wr_error_t *err);
/* In id order: every rule when sandbox_id is NULL, else the global rules
 * and that sandbox's. */
int wr_store_rule_list(wr_store_t *st, const char *sandbox_id,
                       struct wr_rule_rec **recs, size_t *n, wr_error_t *err);
int wr_store_rule_delete(wr_store_t *st, int64_t id, wr_error_t *err);
void wr_rule_rec_free(struct wr_rule_rec *rec);
void wr_rule_recs_free(struct wr_rule_rec *recs, size_t n);

/*
 * Retention of the log. Each sandbox keeps its newest `sandbox_max`
 * entries, so that one sandbox's flood of cheap denied lookups cannot push
 * its neighbours' records out; all sandboxes together keep at most `max`,
 * and when they hold more the largest holder loses its oldest entries
 * first. Every entry dropped is counted for the sandbox that made it
 * (wr_store_netlog_dropped). Limits are enforced in steps of
 * WR_NETLOG_SLACK(limit) entries, so the insert path deletes in batches,
 * not at every insert: at most limit + slack entries exist.
 */
#define WR_NETLOG_MAX 100000
#define WR_NETLOG_SANDBOX_MAX 10000
#define WR_NETLOG_SLACK(limit)                                                 \
  ((limit) / 10 < 1 ? 1 : (limit) / 10 > 1000 ? 1000 : (limit) / 10)

struct wr_netlog_limits {
  uint64_t max;         /* all sandboxes together, >= 1 */
  uint64_t sandbox_max; /* each sandbox, 1 to max */
};

/* Set the limits (the defaults above until then); EINVAL when they are
 * out of range. Applied from the next insert on. */
int wr_store_netlog_set_limits(wr_store_t *st,
                               const struct wr_netlog_limits *limits,
                               wr_error_t *err);

/* One decision of the egress proxy or DNS server. */
struct wr_netlog_rec {
  int64_t id;
  int64_t time_ms;
  char *sandbox_id;
  char *kind; /* "dns", "connect", "http", "tcp" */
  char *host; /* or NULL */
  char *addr; /* or NULL */
  uint16_t port;
  bool allow;
  char *rule;   /* the deciding rule's text, or NULL */
  char *reason; /* or NULL */
  bool intercepted;
  uint64_t bytes_up, bytes_down;
};

/* Append an entry (rec->id is ignored); *id gets its id (may be NULL).
 * Then, when a limit is passed by its slack, drop the oldest entries of
 * the sandbox over its quota, or of the largest holders over the cap. A
 * failure there is an error too, but the entry is in the log. */
int wr_store_netlog_add(wr_store_t *st, const struct wr_netlog_rec *rec,
                        int64_t *id, wr_error_t *err);
/* Entries of one sandbox (or all when sandbox_id is NULL), oldest first:
 * with after > 0, the first `limit` entries whose id is greater; else the
 * newest `limit`. */
int wr_store_netlog_list(wr_store_t *st, const char *sandbox_id, int64_t after,
                         size_t limit, struct wr_netlog_rec **recs, size_t *n,
                         wr_error_t *err);
/* How many entries of one sandbox (or of all, when sandbox_id is NULL)
 * were dropped to keep within the limits; 0 for a sandbox never logged. */
int wr_store_netlog_dropped(wr_store_t *st, const char *sandbox_id,
                            uint64_t *dropped, wr_error_t *err);
void wr_netlog_rec_free(struct wr_netlog_rec *rec);
void wr_netlog_recs_free(struct wr_netlog_rec *recs, size_t n);

/* A secret's description. Its value is not in the database: it is the
 * file secrets/SERVICE beside it (mode 0600, in a 0700 directory). */
struct wr_secret_rec {
  char *service;    /* [a-z0-9_-]{1,64} */
  char *hosts_json; /* JSON array of host names */
  char *header;
  char *prefix;   /* "" when none */
  char *env_json; /* JSON array of variable names */
  int64_t created_ms;
};

/* Whether a service name is one the store accepts (it names a file). */
bool wr_store_secret_name_valid(const char *service);
/* Write the value (atomically: a temporary file renamed over the old
 * one), then insert or replace the record; created_ms is kept from the
 * first put. */
int wr_store_secret_put(wr_store_t *st, const struct wr_secret_rec *rec,
                        const char *value, size_t len, wr_error_t *err);
int wr_store_secret_get(wr_store_t *st, const char *service,
                        struct wr_secret_rec *rec, wr_error_t *err);
/* Ordered by service. */
int wr_store_secret_list(wr_store_t *st, struct wr_secret_rec **recs, size_t *n,
                         wr_error_t *err);
/* The value (NUL-terminated; caller frees, ideally after wiping it). */
int wr_store_secret_value(wr_store_t *st, const char *service, char **value,
                          size_t *len, wr_error_t *err);
/* Delete the record and the value's file. */
int wr_store_secret_delete(wr_store_t *st, const char *service,
                           wr_error_t *err);
void wr_secret_rec_free(struct wr_secret_rec *rec);
void wr_secret_recs_free(struct wr_secret_rec *recs, size_t n);

/* A published port: addr:host_port on the host reaches 127.0.0.1:port
 * inside the sandbox. */
struct wr_port_rec {
  char *sandbox_id;
  char *addr; /* canonical IP text: "127.0.0.1" */
  uint16_t host_port;
  uint16_t port;
  int64_t created_ms;
};

/* EEXIST when addr:host_port is taken, or the sandbox already publishes
 * host_port. */
int wr_store_port_add(wr_store_t *st, const struct wr_port_rec *rec,
                      wr_error_t *err);
/* Ordered by host port: one sandbox's, or all when sandbox_id is NULL. */
int wr_store_port_list(wr_store_t *st, const char *sandbox_id,
                       struct wr_port_rec **recs, size_t *n, wr_error_t *err);
int wr_store_port_delete(wr_store_t *st, const char *sandbox_id,
                         uint16_t host_port, wr_error_t *err);
void wr_port_rec_free(struct wr_port_rec *rec);
void wr_port_recs_free(struct wr_port_rec *recs, size_t n);

/* Drop a sandbox's rules and port publications (also done by the
 * database when its row is deleted). */
int wr_store_net_forget_sandbox(wr_store_t *st, const char *sandbox_id,
                                wr_error_t *err);

/* ---- the host's registry of state roots (roots.c) ---------------------- */

/*
 * Every warrend on a host records its state root in one database that is
 * outside every root: the root's id (the random one in ROOT/root-id),
 * path and cgroup parent, and the uid slots its sandboxes hold. So no two
 * sandboxes of any two roots are the same host user, and no two daemons
 * put their cgroups below one parent. It is a wr_store_t of its own
 * schema, opened by each daemon for its life; every change is one short
 * transaction, so daemons wait on each other for milliseconds at most.
 */
#define WR_ROOTS_DB "/var/lib/warren-roots/roots.db"

struct wr_root_rec {
  char *id;            /* 16 hex digits */
  char *path;          /* the root, absolute */
  char *cgroup_parent; /* "warren", "warren-1a2b3c4d" */
  int64_t registered_ms;
  int64_t seen_ms; /* its daemon's last start */
};

int wr_roots_open(const char *path, wr_store_t **out, wr_error_t *err);
/* Every root, by path. */
int wr_roots_list(wr_store_t *st, struct wr_root_rec **recs, size_t *n,
                  wr_error_t *err);
/* Forget a root and the slots it holds (a root that no longer exists). */
int wr_roots_forget(wr_store_t *st, const char *id, wr_error_t *err);
/* Record this root (by id: its path and cgroup parent are updated, and
 * seen_ms). A cgroup parent another root has, or one inside another's or
 * containing it, is EEXIST with a message naming that root; so is a path
 * another id has. */
int wr_roots_register(wr_store_t *st, const struct wr_root_rec *rec,
                      wr_error_t *err);
/* Whether two cgroup parents overlap: the same, or one below the other. */
bool wr_roots_parents_overlap(const char *a, const char *b);
/* Record that a sandbox of root_id uses `slot` (one from before the
 * registry, or taken again): it stays claimed while the sandbox exists.
 * *other gets the path of another root that claims it too (their
 * sandboxes share host uids), or NULL; caller frees. */
int wr_roots_claim(wr_store_t *st, const char *root_id, const char *sandbox_id,
                   uint32_t slot, char **other, wr_error_t *err);
/* Claim the smallest slot in 1..max that no root claims, for a new
 * sandbox; ENOSPC when every one is taken. */
int wr_roots_claim_free(wr_store_t *st, const char *root_id,
                        const char *sandbox_id, uint32_t max, uint32_t *slot,
                        wr_error_t *err);
/* Let go of a sandbox's slot (it was removed); none is not an error. */
int wr_roots_release(wr_store_t *st, const char *root_id,
                     const char *sandbox_id, wr_error_t *err);
/* The ids of the sandboxes root_id holds slots for (NULL-ended). */
int wr_roots_claimed(wr_store_t *st, const char *root_id, char ***sandbox_ids,
                     wr_error_t *err);
void wr_root_rec_free(struct wr_root_rec *rec);
void wr_root_recs_free(struct wr_root_rec *recs, size_t n);

/* ---- lifecycle events (events.c) --------------------------------------- */

/* An event as journalled: json is the whole event object, serialised. */
struct wr_event_rec {
  int64_t id; /* > 0, handed out by the daemon */
  int64_t time_ms;
  char *type;
  char *sandbox_id; /* may be NULL */
  char *json;
};

int wr_store_event_add(wr_store_t *st, const struct wr_event_rec *rec,
                       wr_error_t *err);
/* Keep only the newest `keep` events. */
int wr_store_event_trim(wr_store_t *st, size_t keep, wr_error_t *err);
/* The newest `limit` events, oldest first. */
int wr_store_event_list_last(wr_store_t *st, size_t limit,
                             struct wr_event_rec **recs, size_t *n,
                             wr_error_t *err);
/* The highest id journalled, 0 when there is none. */
int wr_store_event_max_id(wr_store_t *st, int64_t *id, wr_error_t *err);
void wr_event_recs_free(struct wr_event_rec *recs, size_t n);

#endif
