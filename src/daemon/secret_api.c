/*
 * The secrets API. A secret is a credential the proxy sets on requests to
 * a service's hosts; sandboxes only ever see a placeholder. Its value can
 * be set and removed here but never read back: it goes to a file of its
 * own (the store) and to the engine, and nowhere else.
 *
 * The built-in services (anthropic, openai, github) know their hosts,
 * header and variables; any other service must name its hosts and header.
 */
#include "daemon/network_internal.h"
#include "daemon/procs.h"

#include <ctype.h>
#include <strings.h>

#define VALUE_MAX (16u << 10)
#define HOSTS_MAX 16
#define ENV_MAX 16
#define HEADER_MAX 64
#define PREFIX_MAX 64

/* Headers that frame or route the request: a credential must never be
 * able to rewrite them on the way out. */
static const char *const reserved_headers[] = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
};

/* Variables warren sets in every process itself: the network's
 * (wr_network_sets_env) and these. */
static const char *const reserved_env[] = {"PATH", "HOME"};

/* ---- validation ---------------------------------------------------------- */

/* An HTTP token (RFC 9110 tchar). */
static bool header_name_valid(const char *s) {
  size_t len = strlen(s);

  if (len == 0 || len > HEADER_MAX)
    return false;
  for (const char *p = s; *p != '\0'; p++)
    if (!isalnum((unsigned char)*p) && strchr("!#$%&'*+-.^_`|~", *p) == NULL)
      return false;
  return true;
}

static int check_header(const char *header, wr_error_t *err) {
  if (!header_name_valid(header))
    return wr_error_setx(err, EINVAL,
                         "invalid header name `%s` (letters, digits and "
                         "!#$%%&'*+-.^_`|~; at most %d)",
                         header, HEADER_MAX);
  for (size_t i = 0; i < WR_ARRAY_SIZE(reserved_headers); i++)
    if (strcasecmp(header, reserved_headers[i]) == 0)
      return wr_error_setx(err, EINVAL, "header `%s` cannot carry a secret",
                           header);
  return 0;
}

/* Printable ASCII: it is written into a header line as it is. */
static int check_prefix(const char *prefix, wr_error_t *err) {
  if (strlen(prefix) > PREFIX_MAX)
    return wr_error_setx(err, EINVAL, "prefix is longer than %d bytes",
                         PREFIX_MAX);
  for (const char *p = prefix; *p != '\0'; p++)
    if (*p < 0x20 || *p > 0x7e)
      return wr_error_setx(err, EINVAL, "prefix may hold printable ASCII only");
  return 0;
}

static int check_value(const json_t *value, wr_error_t *err) {
  const char *s = json_string_value(value);
  size_t len = json_string_length(value);

  if (len == 0)
    return wr_error_setx(err, EINVAL, "value is empty");
  if (len > VALUE_MAX)
    return wr_error_setx(err, EINVAL, "value is longer than %u bytes",
                         VALUE_MAX);
  if (strlen(s) != len || strpbrk(s, "\r\n") != NULL)
    return wr_error_setx(err, EINVAL,
                         "value may not hold line breaks or NUL bytes");
  return 0;
}

/* Each host normalised, once. */
static int check_hosts(const json_t *arr, json_t **out, wr_error_t *err) {
  _cleanup_json_ json_t *hosts = json_array();
  size_t i;
  json_t *h;

  if (json_array_size(arr) == 0 || json_array_size(arr) > HOSTS_MAX)
    return wr_error_setx(err, EINVAL, "hosts must name 1 to %d hosts",
                         HOSTS_MAX);
  json_array_foreach ((json_t *)arr, i, h) {
    char host[WR_HOST_MAX];
    bool seen = false;
    size_t k;
    json_t *o;
    if (!json_is_string(h))
      return wr_error_setx(err, EINVAL, "hosts[%zu] is not a string", i);
    if (wr_net_normalize_host(json_string_value(h), host, NULL, NULL, err) < 0)
      return wr_error_wrap(err, "hosts[%zu]", i);
    json_array_foreach (hosts, k, o)
      seen |= strcmp(json_string_value(o), host) == 0;
    if (!seen)
      json_array_append_new(hosts, json_string(host));
  }
  *out = steal_ptr(&hosts);
  return 0;
}

static int check_env_name(const char *name, wr_error_t *err) {
  if (!wr_env_key_valid(name))
    return wr_error_setx(err, EINVAL,
                         "`%s` is not a variable name (letters, digits and _, "
                         "not starting with a digit)",
                         name);
  for (size_t i = 0; i < WR_ARRAY_SIZE(reserved_env); i++)
    if (strcmp(name, reserved_env[i]) == 0)
      return wr_error_setx(err, EINVAL, "`%s` is set by warren itself", name);
  if (wr_network_sets_env(name))
    return wr_error_setx(err, EINVAL, "`%s` is set by warren itself", name);
  return 0;
}

static int check_env(const json_t *arr, json_t **out, wr_error_t *err) {
  size_t i;
  json_t *v;

  if (json_array_size(arr) > ENV_MAX)
    return wr_error_setx(err, EINVAL, "env may name at most %d variables",
                         ENV_MAX);
  json_array_foreach ((json_t *)arr, i, v) {
    if (!json_is_string(v))
      return wr_error_setx(err, EINVAL, "env[%zu] is not a string", i);
    if (check_env_name(json_string_value(v), err) < 0)
      return -1;
  }
  *out = json_incref((json_t *)arr);
  return 0;
}

/* ---- a secret from a request --------------------------------------------- */

struct secret_req {
  const char *service;
  json_t *value, *hosts, *env; /* borrowed from the body */
  const char *header, *prefix;
};

/* A C array of strings as JSON. */
static json_t *list_json(const char *const *v, size_t max) {
  json_t *a = json_array();

  for (size_t i = 0; i < max && v[i] != NULL; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

/*
 * Fill what the client left out from the built-in service, if it is one;
 * a custom service must say where the credential goes. *hosts and *env
 * get new references, also when a later check fails.
 */
static int resolve_secret(const struct secret_req *s, json_t **hosts,
                          json_t **env, const char **header,
                          const char **prefix, wr_error_t *err) {
  const struct wr_secret_builtin *b = wr_secret_builtin(s->service);
  _cleanup_json_ json_t *dflt_hosts = NULL;
  _cleanup_json_ json_t *dflt_env = NULL;

  if (b == NULL && (s->hosts == NULL || s->header == NULL))
    return wr_error_setx(err, EINVAL,
                         "`%s` is not a built-in service (anthropic, openai, "
                         "github): give its hosts and header",
                         s->service);
  if (b != NULL) {
    dflt_hosts = list_json(b->hosts, WR_ARRAY_SIZE(b->hosts));
    dflt_env = list_json(b->env, WR_ARRAY_SIZE(b->env));
  }
  *header = s->header ? s->header : b->header;
  *prefix = s->prefix ? s->prefix : b ? b->prefix : "";
  if (check_value(s->value, err) < 0 || check_header(*header, err) < 0 ||
      check_prefix(*prefix, err) < 0 ||
      check_hosts(s->hosts ? s->hosts : dflt_hosts, hosts, err) < 0)
    return -1;
  if (s->env == NULL && dflt_env == NULL)
    dflt_env = json_array();
  return check_env(s->env ? s->env : dflt_env, env, err);
}

/* A stored JSON list (hosts, env), or [] when it is unreadable. */
static json_t *stored_list(const char *text) {
  json_t *j = text ? json_loads(text, 0, NULL) : NULL;

  if (json_is_array(j))
    return j;
  json_decref(j);
  return json_array();
}

/* Add the variable names of a stored JSON list to names, once each. */
static void add_names(json_t *names, const char *list_text) {
  _cleanup_json_ json_t *list = stored_list(list_text);
  size_t i, k;
  json_t *v, *o;

  json_array_foreach (list, i, v) {
    bool seen = false;
    json_array_foreach (names, k, o)
      seen |= json_equal(o, v);
    if (!seen && json_is_string(v))
      json_array_append(names, v);
  }
}

/* Every process of every sandbox gets a placeholder for each secret's
 * variables, and they travel with each exec (WR_SECRET_ENV_MAX): the set
 * that service's new env would make must fit. */
static int check_env_total(struct wr_network *nw, const char *service,
                           const json_t *env, wr_error_t *err) {
  _cleanup_json_ json_t *names = json_array();
  _cleanup_free_ char *mine = wr_json_dumps(env);
  struct wr_secret_rec *recs = NULL;
  size_t n = 0, bytes = 0, i;
  json_t *v;

  if (wr_store_secret_list(nw->d->store, &recs, &n, err) < 0)
    return -1;
  for (size_t r = 0; r < n; r++)
    if (strcmp(recs[r].service, service) != 0)
      add_names(names, recs[r].env_json);
  wr_secret_recs_free(recs, n);
  add_names(names, mine);
  json_array_foreach (names, i, v)
    bytes += json_string_length(v) + sizeof("=" WR_SECRET_PLACEHOLDER);
  if (bytes > WR_SECRET_ENV_MAX)
    return wr_error_setx(err, E2BIG,
                         "the secrets' variables would take %zu bytes (%zu "
                         "variables) in every process; they may take at most "
                         "%u: use fewer or shorter names",
                         bytes, json_array_size(names), WR_SECRET_ENV_MAX);
  return 0;
}

/* Store it, then hand every secret to the engine at once. */
static int save_secret(struct wr_network *nw, const struct secret_req *s,
                       wr_error_t *err) {
  _cleanup_json_ json_t *hosts = NULL;
  _cleanup_json_ json_t *env = NULL;
  _cleanup_free_ char *hosts_text = NULL;
  _cleanup_free_ char *env_text = NULL;
  const char *header = NULL, *prefix = NULL;
  struct wr_secret_rec rec;

  if (resolve_secret(s, &hosts, &env, &header, &prefix, err) < 0 ||
      check_env_total(nw, s->service, env, err) < 0)
    return -1;
  hosts_text = wr_json_dumps(hosts);
  env_text = wr_json_dumps(env);
  rec = (struct wr_secret_rec){.service = (char *)s->service,
                               .hosts_json = hosts_text,
                               .header = (char *)header,
                               .prefix = (char *)prefix,
                               .env_json = env_text};
  if (wr_store_secret_put(nw->d->store, &rec, json_string_value(s->value),
                          json_string_length(s->value), err) < 0)
    return -1;
  return wr_network_reload_secrets(nw, err);
}

/* ---- JSON ---------------------------------------------------------------- */

/* Everything but the value, which is never returned. */
static json_t *secret_json(const struct wr_secret_rec *rec) {
  return json_pack("{s:s,s:o,s:s,s:s,s:o,s:b,s:o}", "service", rec->service,
                   "hosts", stored_list(rec->hosts_json), "header", rec->header,
                   "prefix", rec->prefix ? rec->prefix : "", "env",
                   stored_list(rec->env_json), "builtin",
                   wr_secret_builtin(rec->service) != NULL, "created_at",
                   wr_network_time_json(rec->created_ms));
}

/* ---- handlers ------------------------------------------------------------ */

void wr_api_secret_list(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_secret_rec *recs = NULL;
  size_t n = 0;
  json_t *arr;
  wr_error_t err;

  if (wr_store_secret_list(d->store, &recs, &n, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  arr = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(arr, secret_json(&recs[i]));
  wr_secret_recs_free(recs, n);
  wr_http_reply_json(req, 200, json_pack("{s:o}", "secrets", arr));
}

static bool service_arg(wr_http_req_t *req, const char **service) {
  *service = wr_http_param(req, "service");
  if (wr_store_secret_name_valid(*service))
    return true;
  wr_http_reply_error(req, 400, "bad_request",
                      "invalid service name `%s` (1 to 64 of a-z, 0-9, _ "
                      "and -)",
                      *service ? *service : "");
  return false;
}

void wr_api_secret_put(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct secret_req s = {0};
  struct wr_json_field f[] = {
      {"value", WR_JSON_ANY, &s.value, true, NULL},
      {"hosts", WR_JSON_ARRAY, &s.hosts, false, NULL},
      {"header", WR_JSON_STRING, &s.header, false, NULL},
      {"prefix", WR_JSON_STRING, &s.prefix, false, NULL},
      {"env", WR_JSON_ARRAY, &s.env, false, NULL},
  };
  _cleanup_json_ json_t *body = NULL;
  struct wr_secret_rec rec = {0};
  wr_error_t err;

  if (!service_arg(req, &s.service) ||
      (body = wr_req_json(req, f, WR_ARRAY_SIZE(f))) == NULL)
    return;
  if (!json_is_string(s.value)) {
    wr_http_reply_error(req, 400, "bad_request", "`value` must be a string");
    return;
  }
  if (save_secret(d->network, &s, &err) < 0 ||
      wr_store_secret_get(d->store, s.service, &rec, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_info("secret `%s` set", s.service);
  wr_http_reply_json(req, 200, secret_json(&rec));
  wr_secret_rec_free(&rec);
}

void wr_api_secret_delete(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *service = wr_http_param(req, "service");
  wr_error_t err;

  if (wr_store_secret_delete(d->store, service ? service : "", &err) < 0 ||
      wr_network_reload_secrets(d->network, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_info("secret `%s` removed", service);
  wr_http_reply_empty(req, 204);
}
