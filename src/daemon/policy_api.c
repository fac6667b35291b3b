/*
 * The policy API: the preset, the rules layered on it, a dry run of the
 * decision the proxy would make (`policy check`), and the log of the
 * decisions it made, as a listing or a live NDJSON stream.
 *
 * Rules live in the store; every change rebuilds the policy in force
 * (network.c). A check holds a reference to the policy it started with,
 * so a rebuild while it resolves the name cannot pull it away.
 */
#include "daemon/network_internal.h"

#define LOG_LIMIT_DEFAULT 100
#define LOG_LIMIT_MAX 10000
#define CHECK_PORT_DEFAULT 443
#define CHECK_ADDRS_MAX 32
/* A follower further behind than this is cut off; it can come back with
 * ?after=<the last id it saw>. */
#define FOLLOW_QUEUE_MAX (4u << 20)

/* ---- JSON ---------------------------------------------------------------- */

/* Hosts and reasons can quote what a sandbox sent; JSON wants UTF-8. */
static json_t *text_or_null(const char *s) {
  return s != NULL ? wr_json_string_lossy(s) : json_null();
}

static json_t *port_or_null(uint16_t port) {
  return port != 0 ? json_integer(port) : json_null();
}

static json_t *rule_rec_json(const struct wr_rule_rec *r) {
  return json_pack("{s:I,s:s,s:s,s:o,s:o,s:s,s:o}", "id", (json_int_t)r->id,
                   "action", r->allow ? "allow" : "deny", "host", r->pattern,
                   "port", port_or_null(r->port), "sandbox",
                   text_or_null(r->sandbox_id), "source", "user", "created_at",
                   wr_network_time_json(r->created_ms));
}

/* A rule of the policy in force: a preset's rules have no id. */
static json_t *rule_json(const struct wr_rule *r) {
  return json_pack("{s:o,s:s,s:o,s:o,s:o,s:o,s:b}", "id",
                   r->id != 0 ? json_integer(r->id) : json_null(), "action",
                   r->allow ? "allow" : "deny", "host",
                   text_or_null(r->pattern), "port", port_or_null(r->port),
                   "sandbox", text_or_null(r->sandbox), "source",
                   text_or_null(r->source ? r->source : "preset"),
                   "host_chosen", r->host_chosen);
}

/* The preset, the stored rules (all, or the global ones and one
 * sandbox's), and the preset's own rules from the policy in force. */
static json_t *policy_json(struct wr_network *nw, const char *sandbox_id,
                           wr_error_t *err) {
  struct wr_rule_rec *recs = NULL;
  json_t *rules, *preset_rules;
  size_t n = 0;

  if (wr_store_rule_list(nw->d->store, sandbox_id, &recs, &n, err) < 0)
    return NULL;
  rules = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(rules, rule_rec_json(&recs[i]));
  wr_rule_recs_free(recs, n);
  preset_rules = json_array();
  for (size_t i = 0; i < wr_policy_nrules(nw->policy); i++) {
    const struct wr_rule *r = wr_policy_rule(nw->policy, i);
    if (r->id == 0)
      json_array_append_new(preset_rules, rule_json(r));
  }
  return json_pack("{s:s,s:o,s:o}", "preset",
                   wr_policy_preset_name(wr_policy_get_preset(nw->policy)),
                   "rules", rules, "preset_rules", preset_rules);
}

static void reply_policy(wr_http_req_t *req, struct wr_network *nw,
                         const char *sandbox_id) {
  wr_error_t err;
  json_t *j = policy_json(nw, sandbox_id, &err);

  if (j == NULL)
    wr_reply_err(req, &err);
  else
    wr_http_reply_json(req, 200, j);
}

/* ---- the preset and the rules -------------------------------------------- */

void wr_api_policy_get(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *key = wr_http_query(req, "sandbox");
  struct wr_sandbox *sb = NULL;

  if (key != NULL &&
      (sb = wr_network_sandbox_arg(d->network, req, key)) == NULL)
    return;
  reply_policy(req, d->network, sb ? sb->id : NULL);
}

/* Rules are kept: a preset is the base they are layered on. */
void wr_api_policy_init(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = NULL;
  struct wr_json_field f[] = {
      {"preset", WR_JSON_STRING, &name, true, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  enum wr_policy_preset preset;
  wr_error_t err;

  if (body == NULL)
    return;
  if (wr_policy_preset_parse(name, &preset, &err) < 0 ||
      wr_store_setting_set(d->store, "policy.preset",
                           wr_policy_preset_name(preset), &err) < 0 ||
      wr_network_rebuild_policy(d->network, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_info("policy: preset %s", wr_policy_preset_name(preset));
  reply_policy(req, d->network, NULL);
}

static int parse_action(const char *action, bool *allow, wr_error_t *err) {
  if (strcmp(action, "allow") == 0 || strcmp(action, "deny") == 0) {
    *allow = action[0] == 'a';
    return 0;
  }
  return wr_error_setx(err, EINVAL, "action must be allow or deny, not `%s`",
                       action);
}

/* The same rule twice is one rule: the second request gets it with 200. */
static void add_rule(wr_http_req_t *req, struct wr_network *nw,
                     const struct wr_rule *r, const struct wr_sandbox *sb) {
  struct wr_rule_rec in = {.sandbox_id = sb ? sb->id : NULL,
                           .allow = r->allow,
                           .pattern = r->pattern,
                           .port = r->port};
  struct wr_rule_rec rec = {0};
  bool added = false;
  wr_error_t err;

  if (wr_store_rule_add(nw->d->store, &in, &rec, &added, &err) < 0 ||
      (added && wr_network_rebuild_policy(nw, &err) < 0)) {
    wr_rule_rec_free(&rec);
    wr_reply_err(req, &err);
    return;
  }
  if (added)
    wr_info("policy: rule %lld: %s %s%s%s", (long long)rec.id,
            rec.allow ? "allow" : "deny", rec.pattern, sb ? " for " : "",
            sb ? sb->name : "");
  wr_http_reply_json(req, added ? 201 : 200, rule_rec_json(&rec));
  wr_rule_rec_free(&rec);
}

void wr_api_policy_rule_add(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *action = NULL, *host = NULL, *key = NULL;
  struct wr_json_field f[] = {
      {"action", WR_JSON_STRING, &action, true, NULL},
      {"host", WR_JSON_STRING, &host, true, NULL},
      {"sandbox", WR_JSON_STRING, &key, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  struct wr_sandbox *sb = NULL;
  struct wr_rule r = {0};
  bool allow = false;
  wr_error_t err;

  if (body == NULL)
    return;
  if (parse_action(action, &allow, &err) < 0 ||
      wr_rule_parse(host, allow, &r, &err) < 0) {
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return;
  }
  if (key != NULL)
    sb = wr_network_sandbox_arg(d->network, req, key);
  if (key == NULL || sb != NULL)
    add_rule(req, d->network, &r, sb);
  wr_rule_clear(&r);
}

void wr_api_policy_rule_delete(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *arg = wr_http_param(req, "rule");
  uint64_t id = 0;
  wr_error_t err;

  if (wr_parse_u64(arg ? arg : "", 1, INT64_MAX, &id, NULL) < 0) {
    wr_http_reply_error(req, 404, "not_found", "no rule `%s`", arg ? arg : "");
    return;
  }
  if (wr_store_rule_delete(d->store, (int64_t)id, &err) < 0 ||
      wr_network_rebuild_policy(d->network, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_info("policy: rule %llu removed", (unsigned long long)id);
  wr_http_reply_empty(req, 204);
}

/* ---- check --------------------------------------------------------------- */

/* A check in progress: the name's verdict is made at once, the addresses'
 * once the name resolves. */
struct check {
  struct wr_network *nw;
  wr_http_req_t *req;
  struct wr_policy *policy; /* the verdicts' rules point into it */
  char *sandbox;            /* id, or NULL for the global rules only */
  char host[WR_HOST_MAX];
  uint16_t port;
  bool is_ip;
  struct wr_net_addr addr; /* an IP literal host */
  struct wr_verdict name;  /* the name stage */
};

static void check_free(struct check *c) {
  wr_policy_unref(c->policy);
  free(c->sandbox);
  free(c);
}

static json_t *address_json(const struct wr_net_addr *a,
                            const struct wr_verdict *v) {
  char text[WR_HOST_MAX];

  wr_net_addr_format(a, text, sizeof(text));
  return json_pack("{s:s,s:b,s:o}", "addr", text, "allow", v->allow, "reason",
                   wr_json_string_lossy(v->reason));
}

/* The overall verdict is the first stage that denies, else the name's.
 * host_chosen says whether the name's own rule is one the host's
 * configuration chose, even when an address then denies. */
static json_t *check_json(const struct check *c, const struct wr_verdict *v,
                          json_t *addresses) {
  return json_pack(
      "{s:s,s:i,s:b,s:o,s:o,s:o,s:b}", "host", c->host, "port", (int)c->port,
      "allow", v->allow, "reason", wr_json_string_lossy(v->reason), "rule",
      v->rule ? rule_json(v->rule) : json_null(), "addresses", addresses,
      "host_chosen",
      !c->is_ip && c->name.allow && c->name.rule && c->name.rule->host_chosen);
}

static void check_ip(struct check *c) {
  struct wr_verdict v;

  wr_policy_check(c->policy, c->sandbox, NULL, &c->addr, c->port, &v);
  wr_http_reply_json(
      c->req, 200,
      check_json(c, &v, json_pack("[o]", address_json(&c->addr, &v))));
  check_free(c);
}

static void on_resolved(void *arg, const struct wr_net_addr *addrs,
                        size_t naddrs, const wr_error_t *err) {
  struct check *c = arg;
  const struct wr_verdict *decided = &c->name;
  struct wr_verdict v[CHECK_ADDRS_MAX];
  json_t *addresses = json_array(), *j;

  naddrs = WR_MIN(naddrs, (size_t)CHECK_ADDRS_MAX);
  for (size_t i = 0; i < naddrs; i++) {
    wr_policy_check(c->policy, c->sandbox, c->host, &addrs[i], c->port, &v[i]);
    json_array_append_new(addresses, address_json(&addrs[i], &v[i]));
    if (decided->allow && !v[i].allow)
      decided = &v[i];
  }
  j = check_json(c, decided, addresses);
  if (naddrs == 0 && err != NULL)
    json_object_set_new(j, "resolve_error", wr_json_string_lossy(err->msg));
  json_object_set_new(j, "cache", wr_network_cached_json(c->nw->d, c->host));
  wr_http_reply_json(c->req, 200, j);
  check_free(c);
}

/* The name is resolved even when its own stage denies, so that the
 * answer shows what it would have reached. */
static void check_name(struct check *c) {
  wr_error_t err;

  wr_policy_check(c->policy, c->sandbox, c->host, NULL, c->port, &c->name);
  if (wr_net_resolve(c->nw->net, c->host, on_resolved, c, &err) < 0)
    on_resolved(c, NULL, 0, &err);
}

void wr_api_policy_check(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *host = NULL, *key = NULL;
  struct wr_json_field f[] = {
      {"host", WR_JSON_STRING, &host, true, NULL},
      {"sandbox", WR_JSON_STRING, &key, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  struct wr_sandbox *sb = NULL;
  struct check *c;
  wr_error_t err;

  if (body == NULL)
    return;
  if (key != NULL && !(sb = wr_network_sandbox_arg(d->network, req, key)))
    return;
  c = xcalloc(1, sizeof(*c));
  if (wr_net_split_hostport(host, false, c->host, &c->port, &err) < 0) {
    free(c);
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return;
  }
  c->nw = d->network;
  c->req = req;
  c->policy = wr_policy_ref(d->network->policy);
  c->sandbox = sb ? xstrdup(sb->id) : NULL;
  c->port = c->port != 0 ? c->port : CHECK_PORT_DEFAULT;
  c->is_ip = wr_net_parse_ip(c->host, &c->addr);
  if (c->is_ip)
    check_ip(c);
  else
    check_name(c);
}

/* ---- the log ------------------------------------------------------------- */

struct wr_log_follower {
  struct wr_log_follower *next;
  struct wr_network *nw;
  wr_http_req_t *req;
  char *sandbox; /* only this sandbox's entries, or NULL */
};

static json_t *log_json(const struct wr_netlog_rec *r) {
  return json_pack(
      "{s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:o,s:o,s:b,s:I,s:I}", "id",
      (json_int_t)r->id, "time", wr_network_time_json(r->time_ms), "sandbox",
      text_or_null(r->sandbox_id), "kind", text_or_null(r->kind), "host",
      text_or_null(r->host), "addr", text_or_null(r->addr), "port",
      port_or_null(r->port), "allow", r->allow, "rule", text_or_null(r->rule),
      "reason", text_or_null(r->reason), "intercepted", r->intercepted,
      "bytes_up", (json_int_t)r->bytes_up, "bytes_down",
      (json_int_t)r->bytes_down);
}

/* One NDJSON line; returns the bytes the client has not read yet. */
static size_t send_line(wr_http_req_t *req, const struct wr_netlog_rec *r) {
  _cleanup_json_ json_t *j = log_json(r);
  _cleanup_free_ char *text = wr_json_dumps(j);
  _cleanup_free_ char *line = xasprintf("%s\n", text);

  return wr_http_stream_write(req, line, strlen(line));
}

static void unlink_follower(struct wr_log_follower *f) {
  struct wr_log_follower **pp = &f->nw->followers;

  while (*pp != NULL && *pp != f)
    pp = &(*pp)->next;
  if (*pp == f)
    *pp = f->next;
}

/* The final call for a follower: a clean end, or a cut (abort) that the
 * client sees as an error. */
static void follower_end(struct wr_log_follower *f, bool cut) {
  unlink_follower(f);
  if (cut)
    wr_http_stream_abort(f->req);
  else
    wr_http_stream_end(f->req);
  free(f->sandbox);
  free(f);
}

static void on_follower_abort(wr_http_req_t *req, void *arg) {
  (void)req;
  follower_end(arg, false);
}

void wr_network_log_notify(struct wr_network *nw,
                           const struct wr_netlog_rec *rec) {
  struct wr_log_follower *next;

  for (struct wr_log_follower *f = nw->followers; f != NULL; f = next) {
    next = f->next;
    if (f->sandbox != NULL &&
        (rec->sandbox_id == NULL || strcmp(f->sandbox, rec->sandbox_id) != 0))
      continue;
    if (send_line(f->req, rec) > FOLLOW_QUEUE_MAX) {
      wr_info("policy log: a follower fell behind; cut off");
      follower_end(f, true);
    }
  }
}

void wr_network_followers_end(struct wr_network *nw) {
  while (nw->followers != NULL)
    follower_end(nw->followers, false);
}

struct log_query {
  const char *sandbox; /* id, or NULL */
  int64_t after;
  size_t limit;
  bool follow;
};

/* A sandbox that is gone is still named by its id in the log, so an
 * unknown key is taken as such an id rather than refused. */
static int parse_log_query(wr_http_req_t *req, struct wr_daemon *d,
                           struct log_query *q) {
  const char *key = wr_http_query(req, "sandbox");
  struct wr_sandbox *sb = key ? wr_sandbox_find(d, key) : NULL;
  uint64_t after, limit;

  q->sandbox = sb ? sb->id : key;
  if (wr_req_u64(req, "after", 0, 0, INT64_MAX, &after) < 0 ||
      wr_req_u64(req, "limit", LOG_LIMIT_DEFAULT, 1, LOG_LIMIT_MAX, &limit) < 0)
    return -1;
  q->after = (int64_t)after;
  q->limit = (size_t)limit;
  return wr_req_bool(req, "follow", false, &q->follow);
}

/* The backlog as NDJSON, then every new entry as it is logged, until
 * the client goes away. */
static void follow_log(wr_http_req_t *req, struct wr_network *nw,
                       const struct log_query *q,
                       const struct wr_netlog_rec *recs, size_t n) {
  struct wr_log_follower *f = xcalloc(1, sizeof(*f));

  f->nw = nw;
  f->req = req;
  f->sandbox = q->sandbox ? xstrdup(q->sandbox) : NULL;
  wr_http_stream_begin(req, 200, "application/x-ndjson", NULL);
  for (size_t i = 0; i < n; i++)
    send_line(req, &recs[i]);
  f->next = nw->followers;
  nw->followers = f;
  wr_http_on_abort(req, on_follower_abort, f);
}

/* The entries, with what retention dropped before them and the limits
 * that made it drop them. */
static void reply_log(wr_http_req_t *req, struct wr_daemon *d,
                      const struct log_query *q,
                      const struct wr_netlog_rec *recs, size_t n) {
  const struct wr_netlog_limits *l = &d->cfg.policy_log;
  json_t *entries = json_array();
  uint64_t dropped = 0;
  wr_error_t err;

  if (wr_store_netlog_dropped(d->store, q->sandbox, &dropped, &err) < 0) {
    json_decref(entries);
    wr_reply_err(req, &err);
    return;
  }
  for (size_t i = 0; i < n; i++)
    json_array_append_new(entries, log_json(&recs[i]));
  wr_http_reply_json(req, 200,
                     json_pack("{s:o,s:I,s:{s:I,s:I}}", "entries", entries,
                               "dropped", (json_int_t)dropped, "retention",
                               "per_sandbox", (json_int_t)l->sandbox_max,
                               "total", (json_int_t)l->max));
}

void wr_api_policy_log(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_netlog_rec *recs = NULL;
  struct log_query q;
  size_t n = 0;
  wr_error_t err;

  if (parse_log_query(req, d, &q) < 0)
    return;
  wr_netlog_flush(d->network);
  if (wr_store_netlog_list(d->store, q.sandbox, q.after, q.limit, &recs, &n,
                           &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  if (q.follow && !d->network->stopping)
    follow_log(req, d->network, &q, recs, n);
  else
    reply_log(req, d, &q, recs, n);
  wr_netlog_recs_free(recs, n);
}
