/*
 * Internal to the daemon's network code: network.c (the engine, its
 * policy, secrets and published ports), policy_api.c (the policy and its
 * log) and secret_api.c (secrets). Loop thread only.
 */
#ifndef WR_NETWORK_INTERNAL_H
#define WR_NETWORK_INTERNAL_H

#include "daemon/jobs.h"
#include "daemon/network.h"
#include "daemon/request.h"
#include "daemon/sandbox.h"
#include "net/net.h"

/* The proxy every sandbox process is pointed at (inside its namespace). */
#define WR_PROXY_URL "http://127.0.0.1:3128"

struct wr_log_follower;
struct npm_query;

struct wr_network {
  struct wr_daemon *d;
  struct wr_net *net;
  char *data_dir;           /* warren's data files, or NULL when not found */
  char *npm_registry;       /* host of npm's registry, or NULL */
  char *npm_registry_url;   /* the URL npm printed, or NULL */
  char **apt_hosts;         /* hosts of this host's apt sources */
  struct wr_policy *policy; /* the one in force (a reference) */
  struct wr_trust *trust;   /* the extra CAs sandboxes trust */
  char **secret_env;        /* every secret's placeholder variables */
  struct wr_log_follower *followers; /* `policy log --follow` clients */
  struct npm_query *npm;             /* asking npm, or NULL */
  bool log_failing;                  /* the last log insert failed */
  bool stopping;
  /* netlog.c: entries waiting for the next batch */
  struct wr_netlog_rec *logq;
  size_t logq_len, logq_cap;
  uv_timer_t logq_timer;
  bool logq_timer_open;
};

/* ---- network.c ----------------------------------------------------------- */

/* The preset in the store ("policy.preset"); balanced when never set. */
enum wr_policy_preset wr_network_preset(struct wr_network *nw);
/* Build the policy from the preset and every stored rule and put it in
 * force. On failure the old policy stays. */
int wr_network_rebuild_policy(struct wr_network *nw, wr_error_t *err);
/* Load every secret (records and values) into the engine. */
int wr_network_reload_secrets(struct wr_network *nw, wr_error_t *err);
/* A sandbox named by id or name; replies 404 and returns NULL when there
 * is none. */
struct wr_sandbox *wr_network_sandbox_arg(struct wr_network *nw,
                                          wr_http_req_t *req, const char *key);
/* RFC 3339, as every time in the API. */
json_t *wr_network_time_json(int64_t ms);

/* ---- netlog.c ------------------------------------------------------------ */

/* Queue a decision for the policy log (rec is copied); written within
 * WR_NETLOG_FLUSH_MS, or at once while stopping. */
void wr_netlog_add(struct wr_network *nw, const struct wr_netlog_rec *rec);
/* Write what is queued now (before the log is read, at shutdown). */
void wr_netlog_flush(struct wr_network *nw);
void wr_netlog_init(struct wr_network *nw);
/* Flush, close the timer; later entries are written as they come. */
void wr_netlog_shutdown(struct wr_network *nw);

/* ---- policy_api.c -------------------------------------------------------- */

/* A stored decision: give it to every follower that wants it. */
void wr_network_log_notify(struct wr_network *nw,
                           const struct wr_netlog_rec *rec);
/* End every follower's stream (daemon shutdown). */
void wr_network_followers_end(struct wr_network *nw);

#endif
