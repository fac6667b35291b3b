/*
 * The daemon's side of the network: it owns the egress engine (src/net),
 * feeds it the policy, the secrets and the port publications kept in the
 * store, attaches it to each running sandbox, and records every decision
 * it reports in the policy log.
 *
 * The policy in force is rebuilt from the store after every change (the
 * preset, a rule, a removed sandbox) and handed to the engine whole; the
 * engine shares it with its threads by reference. The balanced preset
 * reads its domains from DATA/policy/balanced.txt, where "@npm-registry"
 * stands for the registry npm is configured with on this host. That is
 * asked of npm once at start, off the loop; the policy is rebuilt when
 * the answer comes.
 */
#include "daemon/network_internal.h"
#include "daemon/images_internal.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define PRESET_KEY "policy.preset"
#define PRESET_FILE "policy/balanced.txt"
#define NO_PROXY "localhost,127.0.0.1,::1"
#define SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define WARREN_CA_FILE "/usr/local/share/ca-certificates/warren-ca.crt"

#define NPM_TIMEOUT_MS 10000
#define NPM_POLL_MS 100
#define NPM_OUTPUT_MAX 4096

extern char **environ;

json_t *wr_network_time_json(int64_t ms) {
  char buf[40];

  wr_format_time(ms, buf, sizeof(buf));
  return json_string(buf);
}

struct wr_sandbox *wr_network_sandbox_arg(struct wr_network *nw,
                                          wr_http_req_t *req, const char *key) {
  struct wr_sandbox *sb = wr_sandbox_find(nw->d, key);

  if (sb == NULL)
    wr_http_reply_error(req, 404, "not_found", "no sandbox `%s`", key);
  return sb;
}

/* ---- the data directory -------------------------------------------------- */

static bool is_dir(const char *path) {
  struct stat st;

  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Where warren's data files are: as configured, else $WARREN_DATA_DIR,
 * else next to the binary: ../share/warren when installed (and in the
 * build tree, which copies data/ there), ../../data from a build
 * directory of the source tree. NULL when none exists.
 */
static char *find_data_dir(const struct wr_daemon *d) {
  const char *env = getenv("WARREN_DATA_DIR");
  char self[PATH_MAX], resolved[PATH_MAX];
  ssize_t n;
  char *dir;

  if (d->cfg.data_dir != NULL)
    return xstrdup(d->cfg.data_dir);
  if (env != NULL && *env != '\0')
    return xstrdup(env);
  n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0)
    return NULL;
  self[n] = '\0';
  dir = dirname(self);
  for (int i = 0; i < 2; i++) {
    _cleanup_free_ char *p =
        xasprintf(i == 0 ? "%s/../share/warren" : "%s/../../data", dir);
    if (is_dir(p) && realpath(p, resolved) != NULL)
      return xstrdup(resolved);
  }
  return NULL;
}

/* ---- the policy ---------------------------------------------------------- */

/* A preset someone wrote into the database by hand is not trusted to
 * mean open: anything unknown is the default. */
enum wr_policy_preset wr_network_preset(struct wr_network *nw) {
  _cleanup_free_ char *value = NULL;
  enum wr_policy_preset preset = WR_PRESET_BALANCED;
  wr_error_t err;

  if (wr_store_setting_get(nw->d->store, PRESET_KEY, &value, &err) < 0) {
    if (err.code != ENOENT)
      wr_warn("policy: %s; using the balanced preset", err.msg);
    return preset;
  }
  if (wr_policy_preset_parse(value, &preset, &err) < 0) {
    wr_warn("policy: stored %s; using the balanced preset", err.msg);
    return WR_PRESET_BALANCED;
  }
  return preset;
}

/* A missing or broken preset file leaves the balanced preset without its
 * domains: stricter than meant, never looser. */
static void add_preset_domains(struct wr_network *nw, struct wr_policy *p) {
  _cleanup_free_ char *path = NULL;
  struct wr_preset_refs refs;
  wr_error_t err;

  if (nw->data_dir == NULL) {
    wr_warn("policy: no data directory (set --data-dir or "
            "WARREN_DATA_DIR); the balanced preset allows no domains");
    return;
  }
  path = xasprintf("%s/" PRESET_FILE, nw->data_dir);
  refs.npm_registry = nw->npm_registry;
  refs.apt_hosts = nw->apt_hosts;
  if (wr_policy_load_preset(p, path, &refs, &err) < 0)
    wr_warn("policy: %s; the balanced preset allows no domains", err.msg);
}

/* Stored patterns came out of wr_rule_parse, so they parse back to the
 * same rule; the port is kept apart from the pattern. */
static void add_stored_rule(struct wr_policy *p,
                            const struct wr_rule_rec *rec) {
  struct wr_rule r;
  wr_error_t err;

  if (wr_rule_parse(rec->pattern, rec->allow, &r, &err) < 0) {
    wr_warn("policy: rule %lld: %s; left out", (long long)rec->id, err.msg);
    return;
  }
  r.id = rec->id;
  r.port = rec->port;
  r.sandbox = rec->sandbox_id ? xstrdup(rec->sandbox_id) : NULL;
  r.source = xstrdup("user");
  wr_policy_add(p, &r);
  wr_rule_clear(&r);
}

static struct wr_policy *build_policy(struct wr_network *nw, wr_error_t *err) {
  enum wr_policy_preset preset = wr_network_preset(nw);
  struct wr_rule_rec *recs = NULL;
  struct wr_policy *p;
  size_t n = 0;

  if (wr_store_rule_list(nw->d->store, NULL, &recs, &n, err) < 0)
    return NULL;
  p = wr_policy_new(preset);
  if (preset == WR_PRESET_BALANCED)
    add_preset_domains(nw, p);
  for (size_t i = 0; i < n; i++)
    add_stored_rule(p, &recs[i]);
  wr_rule_recs_free(recs, n);
  return p;
}

int wr_network_rebuild_policy(struct wr_network *nw, wr_error_t *err) {
  struct wr_policy *p = build_policy(nw, err);

  if (p == NULL)
    return wr_error_wrap(err, "build the policy");
  wr_net_set_policy(nw->net, p);
  wr_policy_unref(nw->policy);
  nw->policy = p;
  return 0;
}

/* ---- npm's registry ------------------------------------------------------ */

/* `npm config get registry`, run on the threadpool. The loop may ask it
 * to give up early (daemon shutdown) through `cancel`. */
struct npm_query {
  struct wr_job job;
  struct wr_network *nw;
  atomic_bool cancel;
  char output[NPM_OUTPUT_MAX];
  size_t len;
};

/* The child gets default signal handling (warrend ignores SIGPIPE) and a
 * process group of its own, so a timeout kills whatever it started. */
static int spawn_npm(int out_fd, pid_t *pid, wr_error_t *err) {
  static char *const argv[] = {"npm", "config", "get", "registry", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t none, dfl;
  int r;

  sigemptyset(&none);
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setpgroup(&attr, 0);
  r = posix_spawnp(pid, argv[0], &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (r == ENOENT)
    return wr_error_setx(err, ENOENT, "npm is not installed");
  if (r != 0)
    return wr_error_set(err, r, "run npm");
  return 0;
}

/* Read npm's answer until EOF, the deadline, or a cancel. Returns 1 at
 * EOF, 0 when it gave up. */
static int read_npm(struct npm_query *q, int fd) {
  uint64_t deadline = wr_mono_ns() + (uint64_t)NPM_TIMEOUT_MS * 1000000;
  struct pollfd pfd = {.fd = fd, .events = POLLIN};

  while (wr_mono_ns() < deadline && !atomic_load(&q->cancel)) {
    ssize_t n;
    if (poll(&pfd, 1, NPM_POLL_MS) <= 0)
      continue;
    n = read(fd, q->output + q->len, sizeof(q->output) - 1 - q->len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n == 0;
    q->len += (size_t)n;
    if (q->len == sizeof(q->output) - 1)
      return 0;
  }
  return 0;
}

static void npm_work(struct wr_job *job) {
  struct npm_query *q = job->arg;
  _cleanup_close_ int rd = -1;
  int fds[2], status = 0, done;
  pid_t pid;

  job->result = -1;
  if (pipe2(fds, O_CLOEXEC) < 0) {
    wr_error_set(&job->err, errno, "pipe");
    return;
  }
  rd = fds[0];
  if (spawn_npm(fds[1], &pid, &job->err) < 0) {
    close(fds[1]);
    return;
  }
  close(fds[1]);
  done = read_npm(q, rd);
  if (!done)
    kill(-pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  q->output[q->len] = '\0';
  if (!done)
    wr_error_setx(&job->err, ETIMEDOUT, "npm did not answer in %d s",
                  NPM_TIMEOUT_MS / 1000);
  else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    wr_error_setx(&job->err, EIO, "`npm config get registry` failed");
  else
    job->result = 0;
}

/* The port a URL names after its host (p points past the host), else
 * its scheme's. */
static int url_port(const char *url, const char *p, const char *end,
                    uint16_t *port, wr_error_t *err) {
  uint64_t n;
  _cleanup_free_ char *digits = NULL;

  if (p < end && *p == ':') {
    digits = xstrndup(p + 1, (size_t)(end - p - 1));
    if (wr_parse_u64(digits, 1, 65535, &n, NULL) < 0)
      return wr_error_setx(err, EINVAL, "`%s` names a bad port", url);
    *port = (uint16_t)n;
  } else if (wr_str_has_prefix(url, "https://")) {
    *port = 443;
  } else if (wr_str_has_prefix(url, "http://")) {
    *port = 80;
  } else {
    return wr_error_setx(err, EINVAL, "`%s` is not an http(s) URL", url);
  }
  return 0;
}

/* "HOST:PORT" of "http[s]://[USER@]HOST[:PORT]/path", the host
 * normalised, the port the URL's (or its scheme's): the preset allows
 * that host on that port only. */
static int registry_host(const char *url, char **out, wr_error_t *err) {
  const char *p = strstr(url, "://");
  const char *end, *at, *close, *after;
  _cleanup_free_ char *name = NULL;
  char host[WR_HOST_MAX];
  uint16_t port = 0;

  if (p == NULL)
    return wr_error_setx(err, EINVAL, "`%s` is not a URL", url);
  p += 3;
  end = p + strcspn(p, "/?#");
  at = memrchr(p, '@', (size_t)(end - p));
  if (at != NULL)
    p = at + 1;
  if (*p == '[') {
    close = memchr(p, ']', (size_t)(end - p));
    if (close == NULL)
      return wr_error_setx(err, EINVAL, "`%s` is not a URL", url);
    name = xstrndup(p + 1, (size_t)(close - p - 1));
    after = close + 1;
  } else {
    name = xstrndup(p, WR_MIN(strcspn(p, ":"), (size_t)(end - p)));
    after = p + strlen(name);
  }
  if (wr_net_normalize_host(name, host, NULL, NULL, err) < 0 ||
      url_port(url, after, end, &port, err) < 0)
    return -1;
  *out =
      xasprintf(strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
  return 0;
}

/* url becomes the registry: `@npm-registry`'s host and port, and where
 * images take Node.js from. */
static int set_registry(struct wr_network *nw, const char *url,
                        wr_error_t *err) {
  char *host = NULL;

  if (registry_host(url, &host, err) < 0)
    return -1;
  wr_info("policy: npm's registry is %s", host);
  free(nw->npm_registry);
  nw->npm_registry = host;
  free(nw->npm_registry_url);
  nw->npm_registry_url = xstrdup(url);
  return 0;
}

static void npm_done(struct wr_job *job) {
  struct npm_query *q = job->arg;
  struct wr_network *nw = q->nw;
  wr_error_t err;

  nw->npm = NULL;
  if (!nw->stopping && job->result == 0) {
    q->output[strcspn(q->output, "\r\n")] = '\0';
    if (set_registry(nw, q->output, &err) < 0)
      wr_warn("policy: npm's registry: %s; the balanced preset leaves it "
              "out",
              err.msg);
    else if (wr_network_rebuild_policy(nw, &err) < 0)
      wr_warn("policy: %s", err.msg);
  } else if (!nw->stopping) {
    wr_warn("policy: cannot ask npm for its registry (%s); the balanced "
            "preset leaves it out",
            job->err.msg);
  }
  free(q);
}

static void ask_npm(struct wr_network *nw) {
  struct npm_query *q = xcalloc(1, sizeof(*q));

  q->nw = nw;
  atomic_init(&q->cancel, false);
  q->job.fn = npm_work;
  q->job.done = npm_done;
  q->job.arg = q;
  nw->npm = q;
  wr_job_queue(nw->d, &q->job);
}

/* ---- secrets ------------------------------------------------------------- */

/* A JSON array of strings from the store, as a NULL-ended vector. */
static char **strv_from_json(const char *text) {
  _cleanup_json_ json_t *j = text ? json_loads(text, 0, NULL) : NULL;
  char **v = NULL;

  if (!json_is_array(j) || wr_json_strv(j, "stored list", 1024, &v, NULL) < 0 ||
      v == NULL)
    return xcalloc(1, sizeof(char *));
  return v;
}

/* One secret as the engine takes it: the record plus its value. */
static int load_secret(struct wr_network *nw, const struct wr_secret_rec *rec,
                       struct wr_secret *out, wr_error_t *err) {
  size_t len = 0;

  memset(out, 0, sizeof(*out));
  if (wr_store_secret_value(nw->d->store, rec->service, &out->value, &len,
                            err) < 0)
    return -1;
  out->service = xstrdup(rec->service);
  out->hosts = strv_from_json(rec->hosts_json);
  out->header = xstrdup(rec->header);
  out->prefix = xstrdup(rec->prefix ? rec->prefix : "");
  out->env = strv_from_json(rec->env_json);
  return 0;
}

/* Each variable once, in service order. */
static char **collect_env(const struct wr_secret *s, size_t n) {
  char **env = xcalloc(1, sizeof(char *));

  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; s[i].env[k] != NULL; k++) {
      bool seen = false;
      for (size_t m = 0; env[m] != NULL && !seen; m++)
        seen = strcmp(env[m], s[i].env[k]) == 0;
      if (!seen)
        env = wr_strv_push(env, s[i].env[k]);
    }
  }
  return env;
}

/* A secret whose value cannot be read is left out (and said so): the
 * others still work. Values are wiped once the engine has its copy. */
int wr_network_reload_secrets(struct wr_network *nw, wr_error_t *err) {
  struct wr_secret_rec *recs = NULL;
  struct wr_secret *s;
  size_t n = 0, k = 0;

  if (wr_store_secret_list(nw->d->store, &recs, &n, err) < 0)
    return wr_error_wrap(err, "load secrets");
  s = xcalloc(n + 1, sizeof(*s));
  for (size_t i = 0; i < n; i++) {
    wr_error_t e;
    if (load_secret(nw, &recs[i], &s[k], &e) < 0)
      wr_warn("secrets: %s; left out", e.msg);
    else
      k++;
  }
  wr_net_set_secrets(nw->net, s, k);
  wr_strv_free(nw->secret_env);
  nw->secret_env = collect_env(s, k);
  for (size_t i = 0; i < k; i++)
    wr_secret_clear(&s[i]);
  free(s);
  wr_secret_recs_free(recs, n);
  return 0;
}

/* ---- published ports ----------------------------------------------------- */

/* Publications outlive daemon restarts; one that cannot be made again
 * (its host port taken meanwhile) is reported and kept, so that it can
 * be removed or comes back with the next start. */
static void republish(struct wr_network *nw) {
  struct wr_port_rec *recs = NULL;
  size_t n = 0;
  wr_error_t err;

  if (wr_store_port_list(nw->d->store, NULL, &recs, &n, &err) < 0) {
    wr_warn("ports: %s", err.msg);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (wr_net_publish(nw->net, recs[i].sandbox_id, recs[i].addr,
                       recs[i].host_port, recs[i].port, &err) < 0)
      wr_warn("ports: sandbox %s: publish %s:%u: %s", recs[i].sandbox_id,
              recs[i].addr, (unsigned)recs[i].host_port, err.msg);
  }
  wr_port_recs_free(recs, n);
}

static json_t *port_json(const struct wr_port_rec *rec) {
  return json_pack("{s:s,s:i,s:i,s:o}", "addr", rec->addr, "host_port",
                   (int)rec->host_port, "port", (int)rec->port, "created_at",
                   wr_network_time_json(rec->created_ms));
}

/* The sandbox's publications as JSON, or NULL on a store error. */
static json_t *ports_of(struct wr_daemon *d, const struct wr_sandbox *sb,
                        wr_error_t *err) {
  struct wr_port_rec *recs = NULL;
  json_t *arr;
  size_t n = 0;

  if (wr_store_port_list(d->store, sb->id, &recs, &n, err) < 0)
    return NULL;
  arr = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(arr, port_json(&recs[i]));
  wr_port_recs_free(recs, n);
  return arr;
}

void wr_network_sandbox_json_extras(const struct wr_sandbox *sb, json_t *json) {
  json_t *ports = ports_of(sb->d, sb, NULL);

  json_object_set_new(json, "ports", ports ? ports : json_array());
}

void wr_api_ports_list(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  json_t *ports;
  wr_error_t err;

  if (sb == NULL)
    return;
  ports = ports_of(sb->d, sb, &err);
  if (ports == NULL) {
    wr_reply_err(req, &err);
    return;
  }
  wr_http_reply_json(req, 200, json_pack("{s:o}", "ports", ports));
}

/* A port is 1-65535; JSON numbers outside that are refused by name. */
static int check_port(int64_t v, const char *what, wr_error_t *err) {
  if (v < 1 || v > 65535)
    return wr_error_setx(err, EINVAL, "%s must be between 1 and 65535", what);
  return 0;
}

/* The host address as canonical text: an IP literal, 127.0.0.1 when
 * absent (only this host's own clients reach it). */
static int publish_addr(const char *in, char out[WR_HOST_MAX],
                        wr_error_t *err) {
  struct wr_net_addr a;

  if (in == NULL)
    in = "127.0.0.1";
  if (!wr_net_parse_ip(in, &a))
    return wr_error_setx(err, EINVAL, "addr `%s` is not an IP address", in);
  wr_net_addr_format(&a, out, WR_HOST_MAX);
  return 0;
}

/* Refused before any socket is made: the store would refuse it too, but
 * only after the engine had taken the port. */
static int check_free(struct wr_daemon *d, const struct wr_port_rec *want,
                      wr_error_t *err) {
  struct wr_port_rec *recs = NULL;
  size_t n = 0;
  int r = 0;

  if (wr_store_port_list(d->store, NULL, &recs, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n && r == 0; i++) {
    struct wr_sandbox *holder;
    if (recs[i].host_port != want->host_port ||
        (strcmp(recs[i].addr, want->addr) != 0 &&
         strcmp(recs[i].sandbox_id, want->sandbox_id) != 0))
      continue;
    holder = wr_sandbox_find(d, recs[i].sandbox_id);
    r = wr_error_setx(
        err, EEXIST, "host port %u is already published by sandbox `%s`",
        (unsigned)want->host_port, holder ? holder->name : recs[i].sandbox_id);
  }
  wr_port_recs_free(recs, n);
  return r;
}

/* Publish on the engine first, record only what worked, and take it
 * back if it cannot be recorded. */
static int publish(struct wr_network *nw, const struct wr_port_rec *rec,
                   wr_error_t *err) {
  if (check_free(nw->d, rec, err) < 0)
    return -1;
  if (wr_net_publish(nw->net, rec->sandbox_id, rec->addr, rec->host_port,
                     rec->port, err) < 0) {
    if (err->code == EADDRINUSE)
      err->code = EEXIST;
    return -1;
  }
  if (wr_store_port_add(nw->d->store, rec, err) < 0) {
    wr_net_unpublish(nw->net, rec->sandbox_id, rec->host_port, NULL);
    return -1;
  }
  return 0;
}

void wr_api_ports_publish(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *addr = NULL;
  int64_t host_port = 0, port = 0;
  struct wr_json_field f[] = {
      {"addr", WR_JSON_STRING, &addr, false, NULL},
      {"host_port", WR_JSON_INT, &host_port, true, NULL},
      {"port", WR_JSON_INT, &port, true, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  char canon[WR_HOST_MAX];
  struct wr_port_rec rec;
  struct wr_sandbox *sb;
  wr_error_t err;

  if (body == NULL || (sb = wr_sandbox_from_req(d, req)) == NULL)
    return;
  if (check_port(host_port, "host_port", &err) < 0 ||
      check_port(port, "port", &err) < 0 ||
      publish_addr(addr, canon, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  rec = (struct wr_port_rec){.sandbox_id = sb->id,
                             .addr = canon,
                             .host_port = (uint16_t)host_port,
                             .port = (uint16_t)port,
                             .created_ms = wr_now_ms()};
  if (publish(d->network, &rec, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_info("sandbox %s: published %s:%u -> %u", sb->name, canon,
          (unsigned)rec.host_port, (unsigned)rec.port);
  wr_http_reply_json(req, 201, port_json(&rec));
}

void wr_api_ports_unpublish(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *arg = wr_http_param(req, "host_port");
  struct wr_sandbox *sb = wr_sandbox_from_req(d, req);
  uint64_t host_port = 0;
  wr_error_t err;

  if (sb == NULL)
    return;
  if (wr_parse_u64(arg ? arg : "", 1, 65535, &host_port, &err) < 0) {
    wr_http_reply_error(req, 400, "bad_request",
                        "host port `%s` must be between 1 and 65535",
                        arg ? arg : "");
    return;
  }
  if (wr_store_port_delete(d->store, sb->id, (uint16_t)host_port, &err) < 0) {
    if (err.code == ENOENT)
      wr_http_reply_error(req, 404, "not_found",
                          "sandbox `%s` does not publish port %u", sb->name,
                          (unsigned)host_port);
    else
      wr_reply_err(req, &err);
    return;
  }
  if (wr_net_unpublish(d->network->net, sb->id, (uint16_t)host_port, &err) < 0)
    wr_warn("sandbox %s: unpublish %u: %s", sb->name, (unsigned)host_port,
            err.msg);
  wr_http_reply_empty(req, 204);
}

/* ---- the log ------------------------------------------------------------- */

/* The engine's report of one decision: stored, then sent to followers.
 * A failing store is said once, not once per connection. */
static void on_net_event(void *arg, const struct wr_net_event *ev) {
  struct wr_network *nw = arg;
  struct wr_netlog_rec rec = {
      .time_ms = ev->time_ms,
      .sandbox_id = (char *)ev->sandbox,
      .kind = (char *)ev->kind,
      .host = (char *)ev->host,
      .addr = (char *)ev->addr,
      .port = ev->port,
      .allow = ev->allow,
      .rule = (char *)ev->rule,
      .reason = (char *)ev->reason,
      .intercepted = ev->intercepted,
      .bytes_up = ev->bytes_up,
      .bytes_down = ev->bytes_down,
  };

  wr_netlog_add(nw, &rec);
}

/* ---- the CAs sandboxes trust ----------------------------------------------
 */

/* The first scan, at daemon start (a few small local files, as for the
 * apt sources): a --sandbox-ca file that cannot be used is a mistake in
 * the daemon's options, so it stops the start; a bad file in the host's
 * directory is only skipped (someone else may have put it there). */
static int scan_trust(struct wr_network *nw, wr_error_t *err) {
  const struct wr_daemon_config *cfg = &nw->d->cfg;
  struct wr_trust_config tc = {.host_dir = cfg->host_ca_dir,
                               .files = cfg->sandbox_cas};
  struct wr_trust_set *s;
  int r = 0;

  nw->trust = wr_trust_new(&tc);
  s = wr_trust_scan(nw->trust);
  for (size_t i = 0; i < wr_trust_set_nskipped(s) && r == 0; i++) {
    const struct wr_trust_skip *k = wr_trust_set_skipped(s, i);
    for (size_t j = 0; cfg->sandbox_cas && cfg->sandbox_cas[j] && r == 0; j++)
      if (strcmp(cfg->sandbox_cas[j], k->file) == 0)
        r = wr_error_setx(err, EINVAL, "--sandbox-ca %s: %s", k->file,
                          k->reason);
  }
  if (r == 0)
    wr_info("sandboxes trust %zu CA(s) besides their image's and warren's "
            "(host CAs: %s)",
            wr_trust_set_count(s), cfg->host_ca_dir ? cfg->host_ca_dir : "off");
  wr_trust_set_unref(s);
  return r;
}

struct wr_trust *wr_network_trust(struct wr_daemon *d) {
  return d->network->trust;
}

json_t *wr_network_trust_json(struct wr_daemon *d) {
  struct wr_trust_set *s = wr_trust_last(d->network->trust);
  json_t *cas = json_array(), *skipped = json_array();
  size_t n = wr_trust_set_count(s);

  for (size_t i = 0; i < n; i++) {
    const struct wr_trust_ca *ca = wr_trust_set_ca(s, i);
    json_array_append_new(cas,
                          json_pack("{s:s,s:o,s:s,s:s}", "subject", ca->subject,
                                    "file", wr_json_string_lossy(ca->file),
                                    "not_after", ca->not_after, "source",
                                    ca->host ? "host" : "sandbox-ca"));
  }
  for (size_t i = 0; i < wr_trust_set_nskipped(s); i++) {
    const struct wr_trust_skip *k = wr_trust_set_skipped(s, i);
    json_array_append_new(
        skipped, json_pack("{s:o,s:o}", "file", wr_json_string_lossy(k->file),
                           "reason", wr_json_string_lossy(k->reason)));
  }
  wr_trust_set_unref(s);
  return json_pack("{s:I,s:o,s:o,s:o}", "count", (json_int_t)n, "host_dir",
                   d->cfg.host_ca_dir ? json_string(d->cfg.host_ca_dir)
                                      : json_null(),
                   "cas", cas, "skipped", skipped);
}

/* ---- lifecycle ----------------------------------------------------------- */

/* What moves on a sandbox's connections, kept in the sandbox for what
 * tells idle from busy (the idle pause). */
static void on_net_activity(void *arg, const char *id,
                            enum wr_net_activity what, bool from_host) {
  struct wr_network *nw = arg;
  struct wr_sandbox *sb = wr_sandbox_find(nw->d, id);

  (void)from_host;
  if (sb == NULL)
    return;
  if (what == WR_NET_CONN_OPENED)
    sb->net_conns++;
  else if (what == WR_NET_CONN_CLOSED && sb->net_conns > 0)
    sb->net_conns--;
  sb->net_active_ms = wr_now_ms();
}

static void port_woken(struct wr_sandbox *sb, void *arg,
                       const wr_error_t *err) {
  struct wr_network *nw = arg;

  if (err != NULL)
    wr_warn("sandbox %s: wake for a published port: %s", sb->name, err->msg);
  wr_net_woken(nw->net, sb->id, err == NULL);
}

/* A published port's connection for a paused sandbox waits for its wake. */
static bool on_net_wake(void *arg, const char *id) {
  struct wr_network *nw = arg;
  struct wr_sandbox *sb = wr_sandbox_find(nw->d, id);

  return sb == NULL || wr_sandbox_wake(sb, WR_WAKE_PORT, port_woken, nw) == 1;
}

static int make_engine(struct wr_network *nw, wr_error_t *err) {
  _cleanup_free_ char *ca_dir = xasprintf("%s/ca", nw->d->cfg.root);
  struct wr_net_config cfg = {
      .loop = nw->d->loop,
      .ca_dir = ca_dir,
      .upstream_ca = nw->d->cfg.upstream_ca,
      .hosts_file = nw->d->cfg.hosts_file,
      .resolvers = nw->d->cfg.resolvers,
      .log = on_net_event,
      .log_arg = nw,
      .activity = on_net_activity,
      .wake = on_net_wake,
      .hook_arg = nw,
  };

  if (wr_mkdir_p(ca_dir, 0700, err) < 0)
    return -1;
  return wr_net_new(&cfg, &nw->net, err);
}

/* The balanced preset's "@apt-sources": this host's mirrors, read from
 * apt's own files (a few small local files, as for image builds). */
static void find_apt_hosts(struct wr_network *nw) {
  _cleanup_free_ char *codename = NULL;
  wr_error_t err;

  if (wr_host_codename(&codename, &err) < 0 ||
      wr_apt_source_hosts("/etc/apt", codename, &nw->apt_hosts, &err) < 0) {
    wr_warn("policy: this host's apt sources: %s; the balanced preset "
            "leaves them out",
            err.msg);
    nw->apt_hosts = NULL;
    return;
  }
  for (size_t i = 0; nw->apt_hosts[i] != NULL; i++)
    wr_info("policy: apt source %s", nw->apt_hosts[i]);
}

int wr_network_init(struct wr_daemon *d, wr_error_t *err) {
  struct wr_network *nw = xcalloc(1, sizeof(*nw));

  nw->d = d;
  d->network = nw;
  nw->secret_env = xcalloc(1, sizeof(char *));
  wr_netlog_init(nw);
  nw->data_dir = find_data_dir(d);
  if (nw->data_dir != NULL)
    wr_info("data files in %s", nw->data_dir);
  find_apt_hosts(nw);
  if (d->cfg.npm_registry != NULL &&
      set_registry(nw, d->cfg.npm_registry, err) < 0)
    return wr_error_wrap(err, "--npm-registry");
  if (scan_trust(nw, err) < 0 || make_engine(nw, err) < 0 ||
      wr_network_rebuild_policy(nw, err) < 0 ||
      wr_network_reload_secrets(nw, err) < 0)
    return wr_error_wrap(err, "network");
  republish(nw);
  if (d->cfg.npm_registry == NULL)
    ask_npm(nw); /* also when another preset is in force: it may change */
  return 0;
}

void wr_network_shutdown(struct wr_daemon *d) {
  struct wr_network *nw = d->network;

  if (nw == NULL || nw->stopping)
    return;
  nw->stopping = true;
  if (nw->npm != NULL)
    atomic_store(&nw->npm->cancel, true);
  wr_netlog_shutdown(nw);
  wr_network_followers_end(nw);
  if (nw->net != NULL)
    wr_net_shutdown(nw->net);
}

void wr_network_free(struct wr_daemon *d) {
  struct wr_network *nw = d->network;

  if (nw == NULL)
    return;
  if (nw->net != NULL)
    wr_net_free(nw->net);
  wr_netlog_flush(nw);
  wr_policy_unref(nw->policy);
  wr_trust_free(nw->trust);
  wr_strv_free(nw->secret_env);
  free(nw->data_dir);
  free(nw->npm_registry);
  free(nw->npm_registry_url);
  wr_strv_free(nw->apt_hosts);
  free(nw);
  d->network = NULL;
}

_Static_assert((int)WR_NET_NFDS == (int)WR_NET_LISTENERS &&
                   (int)WR_NET_DNS4_TCP == (int)WR_NET_LISTEN_DNS_TCP,
               "the runtime's listeners are the engine's, in its order");

int wr_network_sandbox_up(struct wr_sandbox *sb, int netns_fd,
                          const int listen_fds[WR_NET_NFDS], wr_error_t *err) {
  if (wr_net_attach(sb->d->network->net, sb->id, netns_fd, listen_fds, err) < 0)
    return wr_error_wrap(err, "sandbox `%s`: network", sb->name);
  return 0;
}

void wr_network_sandbox_down(struct wr_sandbox *sb) {
  wr_net_detach(sb->d->network->net, sb->id);
}

/* Its publications close at once; its rules go from the store and so
 * from the policy. */
/* Whether the policy in force has rules of this sandbox: only then does
 * its removal change the policy (rebuilding reads the preset file and
 * every rule, which removing many sandboxes would otherwise repeat). */
static bool policy_names(const struct wr_policy *p, const char *id) {
  for (size_t i = 0; p != NULL && i < wr_policy_nrules(p); i++) {
    const struct wr_rule *r = wr_policy_rule(p, i);
    if (r->sandbox != NULL && strcmp(r->sandbox, id) == 0)
      return true;
  }
  return false;
}

void wr_network_sandbox_removed(struct wr_sandbox *sb) {
  struct wr_network *nw = sb->d->network;
  struct wr_port_rec *recs = NULL;
  size_t n = 0;
  wr_error_t err;

  if (wr_store_port_list(sb->d->store, sb->id, &recs, &n, &err) < 0)
    wr_warn("sandbox %s: %s", sb->name, err.msg);
  for (size_t i = 0; i < n; i++)
    wr_net_unpublish(nw->net, sb->id, recs[i].host_port, NULL);
  wr_port_recs_free(recs, n);
  if (wr_store_net_forget_sandbox(sb->d->store, sb->id, &err) < 0 ||
      (policy_names(nw->policy, sb->id) &&
       wr_network_rebuild_policy(nw, &err) < 0))
    wr_warn("sandbox %s: %s", sb->name, err.msg);
}

/* What every process of every sandbox gets: the proxy, and the bundle
 * that holds warren's CA and the extra ones for every TLS stack that does
 * not read the system bundle on its own (Python requests and pip carry
 * certifi's; Node carries its own and reads one extra file). */
static const char *const fixed_env[] = {
    "HTTP_PROXY=" WR_PROXY_URL,
    "HTTPS_PROXY=" WR_PROXY_URL,
    "http_proxy=" WR_PROXY_URL,
    "https_proxy=" WR_PROXY_URL,
    "NO_PROXY=" NO_PROXY,
    "no_proxy=" NO_PROXY,
    "SSL_CERT_FILE=" SYSTEM_CA_BUNDLE,
    "REQUESTS_CA_BUNDLE=" SYSTEM_CA_BUNDLE,
    "PIP_CERT=" SYSTEM_CA_BUNDLE,
    "NODE_EXTRA_CA_CERTS=" WARREN_CA_FILE,
};

bool wr_network_sets_env(const char *name) {
  size_t n = strlen(name);

  for (size_t i = 0; i < WR_ARRAY_SIZE(fixed_env); i++)
    if (strncmp(fixed_env[i], name, n) == 0 && fixed_env[i][n] == '=')
      return true;
  return false;
}

char **wr_network_env(struct wr_sandbox *sb) {
  struct wr_network *nw = sb->d->network;
  char **env = xcalloc(1, sizeof(char *));

  for (size_t i = 0; i < WR_ARRAY_SIZE(fixed_env); i++)
    env = wr_strv_push(env, fixed_env[i]);
  for (size_t i = 0; nw != NULL && nw->secret_env[i] != NULL; i++) {
    _cleanup_free_ char *kv =
        xasprintf("%s=" WR_SECRET_PLACEHOLDER, nw->secret_env[i]);
    env = wr_strv_push(env, kv);
  }
  return env;
}

const char *wr_network_ca_pem(struct wr_daemon *d) {
  return wr_net_ca_pem(d->network->net);
}

/* ---- the resolver -------------------------------------------------------- */

static json_t *by_family(const uint64_t v[2]) {
  return json_pack("{s:I,s:I}", "A", (json_int_t)v[0], "AAAA",
                   (json_int_t)v[1]);
}

json_t *wr_network_resolver_json(struct wr_daemon *d) {
  struct wr_net_resolver_stats st;

  if (d->network == NULL || d->network->net == NULL)
    return json_null();
  wr_net_resolver_stats(d->network->net, &st);
  return json_pack("{s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:I}", "queries",
                   by_family(st.queries), "hits", by_family(st.hits),
                   "coalesced", by_family(st.coalesced), "failures",
                   by_family(st.failures), "hosts", (json_int_t)st.hosts,
                   "limited", (json_int_t)st.limited, "entries",
                   (json_int_t)st.entries, "inflight", (json_int_t)st.inflight);
}

static json_t *cached_entry_json(const struct wr_net_cached *c) {
  json_t *addrs = json_array();

  for (size_t i = 0; i < c->naddrs; i++) {
    char text[WR_HOST_MAX];
    wr_net_addr_format(&c->addrs[i], text, sizeof(text));
    json_array_append_new(addrs, json_string(text));
  }
  return json_pack(
      "{s:o,s:I,s:I,s:I,s:b,s:b,s:I,s:o}", "addresses", addrs, "age_s",
      (json_int_t)(c->age_ms / 1000), "ttl_s", (json_int_t)c->ttl_s,
      "ttl_left_s", (json_int_t)((c->ttl_left_ms + 999) / 1000), "fresh",
      c->fresh, "inflight", c->inflight, "queries", (json_int_t)c->queries,
      "error", c->failed ? wr_json_string_lossy(c->error) : json_null());
}

json_t *wr_network_cached_json(struct wr_daemon *d, const char *host) {
  static const struct {
    const char *key;
    int family;
  } fams[] = {{"A", AF_INET}, {"AAAA", AF_INET6}};
  json_t *j = json_object();
  uint64_t queries = 0;

  for (size_t i = 0; i < WR_ARRAY_SIZE(fams); i++) {
    struct wr_net_cached c;
    if (!wr_net_resolver_peek(d->network->net, host, fams[i].family, &c)) {
      json_object_set_new(j, fams[i].key, json_null());
      continue;
    }
    queries += c.queries;
    json_object_set_new(j, fams[i].key, cached_entry_json(&c));
  }
  json_object_set_new(j, "queries", json_integer((json_int_t)queries));
  return j;
}

const char *wr_network_npm_registry_url(struct wr_daemon *d, bool *pending) {
  struct wr_network *nw = d->network;

  *pending = nw != NULL && nw->npm != NULL;
  return nw != NULL ? nw->npm_registry_url : NULL;
}
