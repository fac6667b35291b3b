/*
 * Templates: images built from a Dockerfile (docs/templates.md).
 *
 * A template is a row in the store (its steps, its layer keys, CMD,
 * EXPOSE, ENV, WORKDIR, USER) over an image, and a stack of read-only
 * layers in ROOT/templates/layers/KEY that sandboxes mount below their
 * own, as they do a snapshot's (runtime/layers.h). A step's key is the
 * SHA-256 of its parent's key and what the step is: its instruction,
 * and for COPY the archive of the files it copies; ENV, WORKDIR, USER,
 * EXPOSE and CMD make no layer but are in the key of every step after
 * them. A layer directory is renamed into place once complete, so one
 * that exists is a cached step: a rebuild runs only the steps after the
 * first whose key changed, and a failed step leaves the layers before it.
 *
 * COPY is done by the daemon on the threadpool: the context the client
 * sent is unpacked (owned by root, as Docker's COPY makes them), each
 * source archived with the tar code and unpacked into a new layer. RUN
 * runs in a build sandbox made from the stack so far (a sandbox like any
 * other, named build-..., under the daemon's egress policy), whose own
 * layer is captured as the step's once the command exits 0.
 *
 * A sandbox made from a template keeps what the template gave it in its
 * spec ("template"): a rebuild of the template does not change the
 * layers under a sandbox that exists. Its create and its starts run CMD
 * (background, tag `start`) and end once 127.0.0.1:EXPOSE answers inside
 * its network namespace.
 *
 * Threads: everything here is on the loop, but the jobs (unpacking,
 * COPY, captures), which touch only their own directories and fields.
 */
#include "daemon/templates.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/dockerfile.h"
#include "daemon/daemon_internal.h"
#include "daemon/events.h"
#include "daemon/jobs.h"
#include "daemon/network_internal.h"
#include "daemon/procs.h"
#include "daemon/request.h"
#include "net/net.h"
#include "runtime/layers.h"

#define KEY_LEN 64
#define START_TAG "start"
#define RUN_TAG "run"
#define DOCKERFILE_ENTRY ".warren-Dockerfile"
#define TAIL_BYTES 2048
#define TAIL_LINES 12
#define READY_RETRY_MS 25
/* How long a restart waits for the old command's port to be let go. */
#define RESTART_PORT_WAIT_NS (5ull * 1000000000)
#define CLIENT_QUEUE_MAX (4u << 20)

/* ---- small helpers ------------------------------------------------------ */

static char *templates_dir(const struct wr_daemon *d) {
  return xasprintf("%s/templates", d->cfg.root);
}

static char *layer_path(const struct wr_daemon *d, const char *key) {
  return xasprintf("%s/templates/layers/%s", d->cfg.root, key);
}

static bool key_valid(const char *key) {
  if (key == NULL || strlen(key) != KEY_LEN)
    return false;
  for (const char *c = key; *c != '\0'; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
      return false;
  return true;
}

/* SHA-256 over parts separated by NULs, as lowercase hex into out. */
static void hash_parts(char out[KEY_LEN + 1], const char *const *parts,
                       size_t n) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char md[32];
  unsigned len = 0;

  if (ctx == NULL)
    abort();
  EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  for (size_t i = 0; i < n; i++)
    EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]) + 1);
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  for (unsigned i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The key of a step: its parent's, its instruction, and extra (NULL
 * ended: COPY's archive hashes, RUN's environment). */
static void step_key(char key[KEY_LEN + 1], const struct wr_df_step *st,
                     char *const *extra) {
  const char **parts = NULL;
  size_t n = 0;
  char parent[KEY_LEN + 1];

  memcpy(parent, key, sizeof(parent));
  parts =
      xcalloc(3 + wr_strv_len(st->args) + wr_strv_len(extra), sizeof(char *));
  parts[n++] = parent;
  parts[n++] = wr_df_kind_name(st->kind);
  for (size_t i = 0; st->args[i] != NULL; i++)
    parts[n++] = st->args[i];
  for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
    parts[n++] = extra[i];
  hash_parts(key, parts, n);
  free(parts);
}

/* Output and messages go into JSON: bytes that are not UTF-8 become '?'. */
static char *utf8_copy(const char *s, size_t len) {
  char *out = xmalloc(len + 1);

  for (size_t i = 0; i < len;) {
    size_t n = s[i] == '\0' ? 0 : wr_utf8_seq(s + i, len - i);
    if (n == 0) {
      out[i++] = '?';
      continue;
    }
    memcpy(out + i, s + i, n);
    i += n;
  }
  out[len] = '\0';
  return out;
}

/* The last lines of a buffer (at most TAIL_LINES), UTF-8. */
static char *tail_lines(const char *s, size_t len) {
  size_t start = len, lines = 0;

  while (len > 0 && s[len - 1] == '\n')
    len--;
  start = len;
  while (start > 0 && lines < TAIL_LINES) {
    start--;
    if (s[start] == '\n' && ++lines == TAIL_LINES) {
      start++;
      break;
    }
  }
  return utf8_copy(s + start, len - start);
}

/* The last output a background process kept. */
static char *proc_tail(const struct wr_proc *p) {
  wr_buf_t b;
  char *t;

  wr_buf_init(&b);
  wr_buf_puts(&b, "");
  for (const struct wr_chunk *c = p->chunks; c != NULL; c = c->next)
    wr_buf_append(&b, c->data, c->len);
  t = tail_lines(b.data + (b.len > TAIL_BYTES ? b.len - TAIL_BYTES : 0),
                 WR_MIN(b.len, TAIL_BYTES));
  wr_buf_free(&b);
  return t;
}

static char **json_strv(const json_t *a) {
  char **v = xcalloc(1, sizeof(char *));
  size_t i;
  json_t *e;

  json_array_foreach ((json_t *)a, i, e)
    if (json_is_string(e))
      v = wr_strv_push(v, json_string_value(e));
  return v;
}

static json_t *strv_to_json(char *const *v) {
  json_t *a = json_array();

  for (size_t i = 0; v != NULL && v[i] != NULL; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

static char *argv_text(char *const *argv) {
  wr_buf_t b;

  wr_buf_init(&b);
  for (size_t i = 0; argv != NULL && argv[i] != NULL; i++)
    wr_buf_printf(&b, "%s%s", i ? " " : "", argv[i]);
  return wr_buf_steal(&b, NULL);
}

/* ---- what a template gives a sandbox ------------------------------------ */

/* The part of a manifest a sandbox keeps (all but the steps). */
static json_t *conf_of(const char *manifest_json) {
  json_t *m = json_loads(manifest_json, 0, NULL);

  if (!json_is_object(m)) {
    json_decref(m);
    return NULL;
  }
  json_object_del(m, "steps");
  return m;
}

static json_t *conf_from_store(struct wr_daemon *d, const char *name) {
  struct wr_template_rec rec;
  json_t *conf;

  if (wr_store_template_get(d->store, name, &rec, NULL) < 0)
    return NULL;
  conf = conf_of(rec.manifest_json);
  wr_template_rec_free(&rec);
  return conf;
}

/* A snapshot of a template sandbox keeps what it started (capture_info
 * in snapshots.c). */
static json_t *conf_from_snapshot(struct wr_daemon *d, const char *snapshot) {
  struct wr_snapshot_rec rec;
  _cleanup_json_ json_t *info = NULL;
  json_t *conf;

  if (wr_store_snapshot_get(d->store, snapshot, &rec, NULL) < 0)
    return NULL;
  info = rec.info_json ? json_loads(rec.info_json, 0, NULL) : NULL;
  wr_snapshot_rec_free(&rec);
  conf = json_object_get(info, "template");
  return json_is_object(conf) ? json_incref(conf) : NULL;
}

/* Its layers (oldest first in the conf) below what sb has, newest first.
 * Keys are checked: the conf is read back from the store. */
static int add_layers(struct wr_daemon *d, struct wr_sandbox *sb,
                      const json_t *conf, wr_error_t *err) {
  json_t *layers = json_object_get(conf, "layers");
  size_t n = json_array_size(layers);
  char **dirs = sb->spec.layer_dirs;

  if (dirs == NULL)
    dirs = xcalloc(1, sizeof(char *));
  if (n > WR_TEMPLATE_MAX_LAYERS)
    return wr_error_setx(err, EINVAL, "a template with %zu layers", n);
  for (size_t i = n; i-- > 0;) {
    const char *key = json_string_value(json_array_get(layers, i));
    _cleanup_free_ char *dir = NULL;
    if (!key_valid(key)) {
      sb->spec.layer_dirs = dirs;
      return wr_error_setx(err, EINVAL, "a template layer with a bad key");
    }
    dir = layer_path(d, key);
    dirs = wr_strv_push(dirs, dir);
  }
  sb->spec.layer_dirs = dirs;
  return 0;
}

/* The template's ENV first, the sandbox's own over it. */
static void merge_env(struct wr_sandbox *sb, const json_t *conf) {
  char **env = json_strv(json_object_get(conf, "env"));

  for (size_t i = 0; sb->spec.env != NULL && sb->spec.env[i] != NULL; i++)
    env = wr_strv_setenv(env, sb->spec.env[i]);
  wr_strv_free(sb->spec.env);
  sb->spec.env = env;
}

char *wr_template_prepare(struct wr_daemon *d, struct wr_sandbox *sb,
                          const char *image, bool workdir_given,
                          wr_error_t *err) {
  json_t *conf = NULL;
  const char *base, *workdir;

  if (sb->spec.snapshot != NULL)
    conf = conf_from_snapshot(d, sb->spec.snapshot);
  if (conf == NULL && image != NULL)
    conf = conf_from_store(d, image);
  if (conf == NULL)
    return wr_image_rootfs(d, image, err);
  base = json_string_value(json_object_get(conf, "base"));
  workdir = json_string_value(json_object_get(conf, "workdir"));
  if (add_layers(d, sb, conf, err) < 0) {
    json_decref(conf);
    return NULL;
  }
  merge_env(sb, conf);
  if (!workdir_given && workdir != NULL && strcmp(sb->spec.workdir, "/") == 0) {
    free(sb->spec.workdir);
    sb->spec.workdir = xstrdup(workdir);
  }
  sb->spec.template = conf;
  return wr_image_rootfs(d, base, err);
}

void wr_template_load(struct wr_daemon *d, struct wr_sandbox *sb) {
  const char *base =
      json_string_value(json_object_get(sb->spec.template, "base"));
  wr_error_t err;

  if (base == NULL || !wr_name_valid(base) ||
      add_layers(d, sb, sb->spec.template, &err) < 0) {
    sb->state = WR_SB_ERROR;
    free(sb->error);
    sb->error = xstrdup("its template record is damaged");
    return;
  }
  free(sb->image_dir);
  sb->image_dir = xasprintf("%s/%s/rootfs", d->images_dir, base);
}

/* ---- the start command and its port -------------------------------------- */

/* A create, start or restart waiting for the start command's port. */
struct tpl_ready {
  struct wr_sandbox *sb;
  wr_sandbox_done_fn done;
  void *arg;
  char *cmd_text;
  uint16_t port;
  double timeout_s;
  uint64_t deadline_ns;
  struct wr_proc *p; /* the start process (a reference) */
  int netns;
  uv_timer_t timer;
  uv_tcp_t tcp;
  uv_connect_t connect;
  int connect_status;
  int handles; /* open among timer and tcp */
  bool ended;
  bool awaited; /* the port is being waited for */
  uint64_t started_ns;
};

static void ready_free(struct tpl_ready *r) {
  if (r->p != NULL)
    wr_proc_unref(r->p);
  if (r->netns >= 0)
    close(r->netns);
  free(r->cmd_text);
  wr_sandbox_unref(r->sb);
  free(r);
}

static void ready_handle_closed(uv_handle_t *h) {
  struct tpl_ready *r = h->data;

  if (--r->handles == 0 && r->ended)
    ready_free(r);
}

/* The "template" event: the start command started (no port awaited),
 * answers on its port, or did not. */
static void ready_event(const struct tpl_ready *r, const wr_error_t *err) {
  double ms = (double)(wr_mono_ns() - r->started_ns) / 1e6;
  const char *phase = err != NULL  ? "not_ready"
                      : r->awaited ? "ready"
                                   : "started";
  json_t *detail = json_pack("{s:s,s:s,s:i,s:f}", "phase", phase, "cmd",
                             r->cmd_text, "port", (int)r->port, "ms", ms);

  if (err != NULL)
    json_object_set_new(detail, "message", json_string(err->msg));
  wr_events_emit(r->sb->d, "template", r->sb, detail);
}

/* The one end of a wait: done is called once, then r goes when its
 * handles have closed. */
static void ready_end(struct tpl_ready *r, const wr_error_t *err) {
  struct wr_sandbox *sb = r->sb;

  if (r->ended)
    return;
  r->ended = true;
  if (r->p != NULL && r->p->observer_arg == r)
    r->p->observer = NULL;
  if (sb->tpl.ready == r)
    sb->tpl.ready = NULL;
  sb->tpl.no_wait = false;
  sb->tpl.ready_timeout_s = 0;
  if (!uv_is_closing((uv_handle_t *)&r->timer))
    uv_close((uv_handle_t *)&r->timer, ready_handle_closed);
  ready_event(r, err);
  if (r->done != NULL)
    r->done(sb, r->arg, err);
}

static void ready_fail(struct tpl_ready *r, int code, const char *what) {
  _cleanup_free_ char *tail = r->p ? proc_tail(r->p) : xstrdup("");
  wr_error_t err;

  wr_error_setx(&err, code,
                "sandbox `%s`: its start command `%s` %s; the sandbox is "
                "left running (see `warren logs %s %s`)%s%s",
                r->sb->name, r->cmd_text, what, r->sb->name, START_TAG,
                *tail ? "; its last output:\n" : "", tail);
  wr_warn("%s", err.msg);
  ready_end(r, &err);
}

static void ready_try(struct tpl_ready *r);

static void ready_timer_fired(uv_timer_t *t) {
  ready_try(t->data);
}

static void ready_again(struct tpl_ready *r) {
  if (r->ended)
    return;
  if (wr_mono_ns() >= r->deadline_ns) {
    char what[96];
    snprintf(what, sizeof(what), "did not answer on port %u within %g s",
             r->port, r->timeout_s);
    ready_fail(r, ETIMEDOUT, what);
    return;
  }
  uv_timer_start(&r->timer, ready_timer_fired, READY_RETRY_MS, 0);
}

static void ready_tcp_closed(uv_handle_t *h) {
  struct tpl_ready *r = h->data;

  r->handles--;
  if (r->ended) {
    if (r->handles == 0)
      ready_free(r);
    return;
  }
  if (r->connect_status == 0) {
    wr_info("sandbox %s: its start command answers on port %u", r->sb->name,
            r->port);
    ready_end(r, NULL);
    return;
  }
  ready_again(r);
}

static void ready_connected(uv_connect_t *c, int status) {
  struct tpl_ready *r = c->data;

  r->connect_status = status;
  uv_close((uv_handle_t *)&r->tcp, ready_tcp_closed);
}

/* One connect to 127.0.0.1:PORT, from a socket made inside the sandbox's
 * network namespace (as published ports do). */
static void ready_try(struct tpl_ready *r) {
  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_port = htons(r->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  wr_error_t err;
  int fd;

  if (r->ended)
    return;
  fd = wr_net_socket_in(r->netns, AF_INET, SOCK_STREAM, &err);
  if (fd < 0) {
    ready_fail(r, EIO, "could not be reached (no socket in its network)");
    return;
  }
  uv_tcp_init(r->sb->d->loop, &r->tcp);
  r->tcp.data = r;
  r->handles++;
  if (uv_tcp_open(&r->tcp, fd) < 0) {
    close(fd);
    r->connect_status = -1;
    uv_close((uv_handle_t *)&r->tcp, ready_tcp_closed);
    return;
  }
  r->connect.data = r;
  if (uv_tcp_connect(&r->connect, &r->tcp, (struct sockaddr *)&addr,
                     ready_connected) < 0) {
    r->connect_status = -1;
    uv_close((uv_handle_t *)&r->tcp, ready_tcp_closed);
  }
}

/* The start process ended while its port was awaited. */
static void start_observer(struct wr_proc *p, int stream, const char *data,
                           size_t len, void *arg) {
  struct tpl_ready *r = arg;
  char what[96];

  (void)stream;
  (void)len;
  if (data != NULL || r->ended)
    return;
  if (p->have_status && WIFEXITED(p->status))
    snprintf(what, sizeof(what),
             "exited with status %d before port %u "
             "answered",
             WEXITSTATUS(p->status), r->port);
  else
    snprintf(what, sizeof(what), "ended before port %u answered", r->port);
  ready_fail(r, ECHILD, what);
}

static void start_spawned(struct wr_proc *p, void *arg, const wr_error_t *err) {
  struct tpl_ready *r = arg;
  wr_error_t e;

  if (p == NULL) {
    wr_error_setx(&e, err->code, "sandbox `%s`: start its command `%s`: %s",
                  r->sb->name, r->cmd_text, err->msg);
    ready_end(r, &e);
    return;
  }
  r->p = p;
  p->refs++;
  if (r->port == 0 || r->sb->tpl.no_wait) {
    ready_end(r, NULL);
    return;
  }
  p->observer = start_observer;
  p->observer_arg = r;
  r->awaited = true;
  r->netns = wr_rt_open_netns(&r->sb->inst, &e);
  if (r->netns < 0) {
    ready_end(r, &e);
    return;
  }
  ready_try(r);
}

/* Start the template's command in sb, which runs, and wait as sb->tpl
 * says; done once. */
static void start_command(struct wr_sandbox *sb, wr_sandbox_done_fn done,
                          void *arg) {
  json_t *conf = sb->spec.template;
  _cleanup_strv_ char **cmd = json_strv(json_object_get(conf, "cmd"));
  struct tpl_ready *r;
  struct wr_exec_opts o = {
      .argv = cmd,
      .cwd = json_string_value(json_object_get(conf, "workdir")),
      .user = json_string_value(json_object_get(conf, "user")),
      .tag = START_TAG,
  };
  wr_error_t err;

  if (cmd[0] == NULL) {
    if (done != NULL)
      done(sb, arg, NULL);
    return;
  }
  r = xcalloc(1, sizeof(*r));
  r->sb = sb;
  wr_sandbox_ref(sb);
  r->done = done;
  r->arg = arg;
  r->netns = -1;
  r->cmd_text = argv_text(cmd);
  r->port = (uint16_t)json_integer_value(json_object_get(conf, "port"));
  r->timeout_s = sb->tpl.ready_timeout_s > 0 ? sb->tpl.ready_timeout_s
                                             : WR_TEMPLATE_READY_TIMEOUT_S;
  r->started_ns = wr_mono_ns();
  r->deadline_ns = r->started_ns + (uint64_t)(r->timeout_s * 1e9);
  uv_timer_init(sb->d->loop, &r->timer);
  r->timer.data = r;
  r->handles = 1;
  sb->tpl.ready = r;
  if (wr_exec_start(sb, &o, start_spawned, r, &err) < 0) {
    wr_error_wrap(&err, "sandbox `%s`: start its command", sb->name);
    ready_end(r, &err);
  }
}

/* The wrapper of a create's or start's done. */
struct tpl_wrap {
  wr_sandbox_done_fn done;
  void *arg;
};

static void after_start(struct wr_sandbox *sb, void *arg,
                        const wr_error_t *err) {
  struct tpl_wrap w = *(struct tpl_wrap *)arg;

  free(arg);
  if (err != NULL || sb->state != WR_SB_RUNNING) {
    sb->tpl.no_wait = false;
    sb->tpl.ready_timeout_s = 0;
    if (w.done != NULL)
      w.done(sb, w.arg, err);
    return;
  }
  start_command(sb, w.done, w.arg);
}

void wr_template_wrap_done(struct wr_sandbox *sb, wr_sandbox_done_fn *done,
                           void **arg) {
  struct tpl_wrap *w;

  if (sb->spec.template == NULL ||
      json_array_size(json_object_get(sb->spec.template, "cmd")) == 0)
    return;
  w = xcalloc(1, sizeof(*w));
  w->done = *done;
  w->arg = *arg;
  *done = after_start;
  *arg = w;
}

bool wr_template_not_ready(const wr_error_t *err) {
  return err->code == ETIMEDOUT || err->code == ECHILD;
}

/* How long the loop waits for loopback to answer a port probe. */
#define PORT_PROBE_MS 20

/* A restart: the old start process has gone. */
struct tpl_restart {
  struct wr_sandbox *sb;
  wr_sandbox_done_fn done;
  void *arg;
  uv_timer_t timer;
  uint64_t deadline_ns;
};

/*
 * Whether something still listens on the template's port inside sb: the
 * start process's group was killed, but its children (a dev server under
 * npx) may not have exited yet, and a new command started meanwhile
 * would find the port taken (Vite then moves to the next one) while the
 * readiness probe reached the old one. A non-blocking connect, so that a
 * listener that never accepts cannot hold the loop: anything but a
 * refusal counts as listening.
 */
/* Whether the connect in flight on fd was refused within timeout_ms. */
static bool connect_refused(int fd, int timeout_ms) {
  struct pollfd pfd = {.fd = fd, .events = POLLOUT};
  int soerr = 0;
  socklen_t len = sizeof(soerr);

  if (poll(&pfd, 1, timeout_ms) != 1 ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
    return false;
  return soerr == ECONNREFUSED;
}

static bool port_still_taken(struct wr_sandbox *sb, uint16_t port) {
  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  _cleanup_close_ int netns = -1, fd = -1;
  wr_error_t err;

  if (port == 0 || (netns = wr_rt_open_netns(&sb->inst, &err)) < 0 ||
      (fd = wr_net_socket_in(netns, AF_INET, SOCK_STREAM, &err)) < 0)
    return false;
  if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
    return false;
  if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
    return true;
  if (errno != EINPROGRESS)
    return errno != ECONNREFUSED;
  /* Loopback answers at once, but a non-blocking connect reports the
   * answer later: wait for it a little (a listener whose backlog is full
   * never answers, and counts as listening). */
  return !connect_refused(fd, PORT_PROBE_MS);
}

static void restart_again(uv_timer_t *t);

static void restart_closed(uv_handle_t *h) {
  struct tpl_restart *rs = h->data;

  wr_sandbox_unref(rs->sb);
  free(rs);
}

static void restart_now(struct tpl_restart *rs) {
  struct wr_proc *old = wr_proc_find_tag(rs->sb, START_TAG);
  uint16_t port = (uint16_t)json_integer_value(
      json_object_get(rs->sb->spec.template, "port"));
  wr_error_t err;

  if (old != NULL)
    wr_proc_remove(old);
  if (rs->sb->state == WR_SB_RUNNING && wr_mono_ns() < rs->deadline_ns &&
      port_still_taken(rs->sb, port)) {
    uv_timer_start(&rs->timer, restart_again, READY_RETRY_MS, 0);
    return;
  }
  if (rs->sb->state != WR_SB_RUNNING) {
    wr_error_setx(&err, ESRCH, "sandbox `%s` stopped", rs->sb->name);
    rs->done(rs->sb, rs->arg, &err);
  } else {
    start_command(rs->sb, rs->done, rs->arg);
  }
  uv_close((uv_handle_t *)&rs->timer, restart_closed);
}

static void restart_again(uv_timer_t *t) {
  restart_now(t->data);
}

static void restart_observer(struct wr_proc *p, int stream, const char *data,
                             size_t len, void *arg) {
  (void)stream;
  (void)len;
  if (data != NULL)
    return;
  p->observer = NULL;
  restart_now(arg);
}

int wr_template_restart(struct wr_sandbox *sb, wr_sandbox_done_fn done,
                        void *arg, wr_error_t *err) {
  struct wr_proc *p = wr_proc_find_tag(sb, START_TAG);
  struct tpl_restart *rs;

  if (sb->spec.template == NULL ||
      json_array_size(json_object_get(sb->spec.template, "cmd")) == 0)
    return wr_error_setx(err, EINVAL, "sandbox `%s` has no start command",
                         sb->name);
  if (sb->state != WR_SB_RUNNING || sb->op != WR_OP_NONE)
    return wr_error_setx(err, ESRCH, "sandbox `%s` is not running (or busy)",
                         sb->name);
  if (sb->tpl.ready != NULL)
    return wr_error_setx(
        err, EBUSY, "sandbox `%s` is waiting for its start command", sb->name);
  rs = xcalloc(1, sizeof(*rs));
  rs->sb = sb;
  wr_sandbox_ref(sb);
  rs->done = done;
  rs->arg = arg;
  rs->deadline_ns = wr_mono_ns() + RESTART_PORT_WAIT_NS;
  uv_timer_init(sb->d->loop, &rs->timer);
  rs->timer.data = rs;
  if (p == NULL || !p->running) {
    restart_now(rs);
    return 0;
  }
  p->observer = restart_observer;
  p->observer_arg = rs;
  wr_proc_signal(p, SIGKILL);
  return 0;
}

/* ---- builds ---------------------------------------------------------------
 */

struct wr_tpl_build {
  struct wr_tpl_build *next;
  struct wr_daemon *d;
  wr_http_req_t *req; /* NULL once answered or gone */
  bool streaming;
  size_t queued; /* bytes the client has not read yet */
  char *name;
  char *work; /* ROOT/templates/tmp/NAME-XXXXXX */
  char *layers_dir;
  int tar_fd;
  uint64_t received;
  bool too_big;
  uv_fs_t fs; /* the write of `chunk` in flight */
  wr_buf_t chunk;
  bool writing, write_failed, body_done;
  int body_status;
  char *dockerfile;
  struct wr_dockerfile df;
  /* What the steps so far made. */
  char *parent, *base, *base_dir;
  char **layers; /* keys, oldest first */
  char **env, **cmd;
  char *workdir, *user;
  uint16_t port;
  char key[KEY_LEN + 1];
  size_t step;
  json_t *steps;
  unsigned cached, ran;
  uint64_t started_ns;
  /* The step in flight. */
  struct wr_job job;
  struct wr_sandbox *sb;          /* RUN's build sandbox */
  struct wr_rt_spec capture_spec; /* its layer's capture (borrows from sb) */
  int run_status;
  bool run_ok;
  wr_buf_t out; /* RUN's output, for a failure's message */
  char *fail_msg;
  char *layer_tmp;
  uint64_t layer_bytes;
  bool was_cached;
};

static void build_run_steps(struct wr_tpl_build *b);

static void build_unlist(struct wr_tpl_build *b);

static void build_free(struct wr_tpl_build *b) {
  build_unlist(b);
  if (b->tar_fd >= 0)
    close(b->tar_fd);
  free(b->name);
  free(b->work);
  free(b->layers_dir);
  free(b->dockerfile);
  wr_dockerfile_free(&b->df);
  free(b->parent);
  free(b->base);
  free(b->base_dir);
  wr_strv_free(b->layers);
  wr_strv_free(b->env);
  wr_strv_free(b->cmd);
  free(b->workdir);
  free(b->user);
  json_decref(b->steps);
  wr_buf_free(&b->out);
  wr_buf_free(&b->chunk);
  free(b->fail_msg);
  free(b->layer_tmp);
  free(b);
}

static void emit(struct wr_tpl_build *b, json_t *event) {
  _cleanup_free_ char *line = NULL;

  if (b->req == NULL || !b->streaming || wr_http_aborted(b->req)) {
    json_decref(event);
    return;
  }
  line = json_dumps(event, JSON_COMPACT);
  json_decref(event);
  if (line == NULL)
    return;
  wr_http_stream_write(b->req, line, strlen(line));
  b->queued = wr_http_stream_write(b->req, "\n", 1);
}

static void build_drained(wr_http_req_t *req, void *arg) {
  struct wr_tpl_build *b = arg;

  (void)req;
  b->queued = 0;
}

static void build_abort(wr_http_req_t *req, void *arg) {
  struct wr_tpl_build *b = arg;

  if (b->streaming)
    wr_http_stream_end(req);
  else
    wr_http_reply_error(req, 499, "aborted", "the client went away");
  b->req = NULL;
}

/* Remove the work directory on the threadpool, then free the build. */
static void cleanup_work(struct wr_job *job) {
  struct wr_tpl_build *b = job->arg;

  job->result = wr_rm_rf(b->work, &job->err);
}

static void cleanup_done(struct wr_job *job) {
  struct wr_tpl_build *b = job->arg;

  if (job->result < 0)
    wr_warn("template `%s`: %s", b->name, job->err.msg);
  build_free(b);
}

/* Out of the list at once (a new build of the name may start), freed
 * once its work directory is gone. */
static void build_unlist(struct wr_tpl_build *b) {
  struct wr_tpl_build **pp = &b->d->tpl_builds;

  while (*pp != NULL && *pp != b)
    pp = &(*pp)->next;
  if (*pp == b)
    *pp = b->next;
  b->next = NULL;
}

static void build_end(struct wr_tpl_build *b) {
  build_unlist(b);
  if (b->req != NULL) {
    wr_http_on_abort(b->req, NULL, NULL);
    if (b->streaming)
      wr_http_stream_end(b->req);
    b->req = NULL;
  }
  b->job = (struct wr_job){.fn = cleanup_work, .done = cleanup_done, .arg = b};
  wr_job_queue(b->d, &b->job);
}

/* A failure before the stream began is a plain error reply. */
static void build_fail(struct wr_tpl_build *b, int status, const char *code,
                       const char *msg) {
  wr_warn("template `%s`: %s", b->name, msg);
  if (b->req != NULL && !b->streaming) {
    wr_http_on_abort(b->req, NULL, NULL);
    wr_http_reply_error(b->req, status, code, "%s", msg);
    b->req = NULL;
  }
  emit(b, json_pack("{s:s,s:{s:s,s:s},s:I}", "type", "error", "error", "code",
                    code, "message", msg, "step", (json_int_t)b->step));
  build_end(b);
}

/* A failed step names itself; the layers before it stay. */
static void step_fail(struct wr_tpl_build *b, const char *why) {
  const struct wr_df_step *st = &b->df.steps[b->step];
  _cleanup_free_ char *msg =
      xasprintf("step %zu/%zu (line %u) `%s` failed: %s", b->step + 1, b->df.n,
                st->line, st->text, why);

  build_fail(b, 422, "step_failed", msg);
}

static void emit_step(struct wr_tpl_build *b, bool cached) {
  const struct wr_df_step *st = &b->df.steps[b->step];

  emit(b, json_pack("{s:s,s:I,s:I,s:s,s:b}", "type", "step", "step",
                    (json_int_t)b->step + 1, "of", (json_int_t)b->df.n, "text",
                    st->text, "cached", cached));
}

static void record_step(struct wr_tpl_build *b, bool layer, bool cached) {
  const struct wr_df_step *st = &b->df.steps[b->step];

  json_array_append_new(
      b->steps, json_pack("{s:I,s:s,s:s,s:b,s:b}", "step",
                          (json_int_t)b->step + 1, "instruction", st->text,
                          "key", b->key, "layer", layer, "cached", cached));
  if (layer)
    b->layers = wr_strv_push(b->layers, b->key);
  if (layer && cached)
    b->cached++;
  else if (layer)
    b->ran++;
  b->step++;
}

/* ---- the finished template ---- */

static uint64_t layer_size(struct wr_tpl_build *b, const char *key) {
  _cleanup_free_ char *path = xasprintf("%s/%s.size", b->layers_dir, key);
  _cleanup_free_ char *text = NULL;
  uint64_t n = 0;
  size_t len;

  if (wr_read_file(path, 64, &text, &len, NULL) == 0)
    wr_parse_u64(text, 0, UINT64_MAX, &n, NULL);
  return n;
}

static json_t *manifest_of(struct wr_tpl_build *b) {
  return json_pack("{s:s,s:s,s:s,s:s,s:O,s:o,s:o,s:i,s:o,s:s,s:s}", "name",
                   b->name, "base", b->base, "from", b->parent, "key", b->key,
                   "steps", b->steps, "layers", strv_to_json(b->layers), "cmd",
                   strv_to_json(b->cmd), "port", (int)b->port, "env",
                   strv_to_json(b->env), "workdir", b->workdir, "user",
                   b->user ? b->user : "root");
}

static json_t *template_json(const struct wr_template_rec *rec) {
  json_t *m = json_loads(rec->manifest_json, 0, NULL);
  char created[40];

  if (!json_is_object(m)) {
    json_decref(m);
    m = json_object();
  }
  wr_format_time(rec->created_ms, created, sizeof(created));
  json_object_set_new(m, "name", json_string(rec->name));
  json_object_set_new(m, "kind", json_string("template"));
  json_object_set_new(m, "state", json_string("ready"));
  json_object_set_new(m, "parent", json_string(rec->parent));
  json_object_set_new(m, "size_bytes",
                      json_integer((json_int_t)rec->size_bytes));
  json_object_set_new(m, "created_at", json_string(created));
  json_object_set(m, "expose", json_object_get(m, "port"));
  return m;
}

static void build_finish(struct wr_tpl_build *b) {
  _cleanup_json_ json_t *m = manifest_of(b);
  _cleanup_free_ char *text = wr_json_dumps(m);
  struct wr_template_rec rec = {.name = b->name,
                                .base = b->base,
                                .parent = b->parent,
                                .manifest_json = text,
                                .created_ms = wr_now_ms()};
  wr_error_t err;
  double ms = (double)(wr_mono_ns() - b->started_ns) / 1e6;

  for (size_t i = 0; b->layers[i] != NULL; i++)
    rec.size_bytes += layer_size(b, b->layers[i]);
  if (wr_store_template_put(b->d->store, &rec, &err) < 0) {
    build_fail(b, 500, "internal", err.msg);
    return;
  }
  wr_info("template `%s` built in %.0f ms (%u steps run, %u cached)", b->name,
          ms, b->ran, b->cached);
  emit(b, json_pack("{s:s,s:o,s:I,s:I,s:f}", "type", "done", "template",
                    template_json(&rec), "ran", (json_int_t)b->ran, "cached",
                    (json_int_t)b->cached, "duration_ms", ms));
  build_end(b);
}

/* ---- a new layer ---- */

/* A finished layer directory goes into place under its key, with its size
 * beside it. */
static int install_layer(struct wr_tpl_build *b, uint64_t bytes,
                         wr_error_t *err) {
  _cleanup_free_ char *dst = xasprintf("%s/%s", b->layers_dir, b->key);
  _cleanup_free_ char *size = xasprintf("%s/%s.size", b->layers_dir, b->key);
  _cleanup_free_ char *text = xasprintf("%llu", (unsigned long long)bytes);

  if (wr_write_file(size, text, strlen(text), 0600, err) < 0)
    return -1;
  if (rename(b->layer_tmp, dst) == 0)
    return 0;
  /* Another build made the same layer first: it is the same layer. */
  if (errno == ENOTEMPTY || errno == EEXIST)
    return wr_rm_rf(b->layer_tmp, err);
  return wr_error_set(err, errno, "rename `%s`", b->layer_tmp);
}

/* Where a layer is made: a name of its own (two builds may make the same
 * layer at once), which a daemon start removes if it is left. */
static char *tmp_layer_name(const struct wr_tpl_build *b) {
  _cleanup_free_ char *suffix = wr_random_id("", 8);

  return xasprintf("%s/.%s.tmp-%s", b->layers_dir, b->key, suffix);
}

static bool layer_exists(struct wr_tpl_build *b) {
  _cleanup_free_ char *dst = xasprintf("%s/%s", b->layers_dir, b->key);
  struct stat st;

  return stat(dst, &st) == 0 && S_ISDIR(st.st_mode);
}

static int too_many_layers(struct wr_tpl_build *b) {
  return wr_strv_len(b->layers) >= WR_TEMPLATE_MAX_LAYERS;
}

/* ---- COPY, on the threadpool ---- */

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');

  return s ? s + 1 : path;
}

/* Archive one source into fd: a directory's contents, or a file (named
 * as the destination says). *into is where it unpacks. */
static int copy_archive(int ctxfd, const char *src, const char *dst, int fd,
                        char **into, wr_error_t *err) {
  struct wr_tar_ctx tc = {.rootfd = ctxfd, .id_count = WR_ID_COUNT};
  _cleanup_free_ char *path = NULL, *rel = xasprintf("/%s", src);
  bool dir_dst = wr_str_has_suffix(dst, "/");
  struct stat st;
  int fd_src;

  path = wr_path_normalize(rel);
  fd_src = wr_open_in_root(ctxfd, path, O_PATH | O_NOFOLLOW, 0, err);
  if (fd_src < 0)
    return wr_error_setx(err, ENOENT, "`%s` is not in the build context", src);
  if (fstat(fd_src, &st) < 0) {
    close(fd_src);
    return wr_error_set(err, errno, "stat `%s`", src);
  }
  close(fd_src);
  if (S_ISDIR(st.st_mode)) {
    *into = wr_path_normalize(dst);
    return wr_tar_create(&tc, path, true, fd, err);
  }
  if (dir_dst) {
    *into = wr_path_normalize(dst);
    return wr_tar_create(&tc, path, false, fd, err);
  }
  {
    _cleanup_free_ char *d = xstrdup(dst);
    char *slash = strrchr(d, '/');
    *slash = '\0';
    *into = wr_path_normalize(*d ? d : "/");
  }
  return wr_tar_create_as(&tc, path, base_name(dst), fd, err);
}

/* SHA-256 of what fd holds, from its start. */
static int hash_fd(int fd, char out[KEY_LEN + 1], wr_error_t *err) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char md[32], buf[65536];
  unsigned len = 0;
  ssize_t n;

  if (ctx == NULL)
    abort();
  EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  if (lseek(fd, 0, SEEK_SET) < 0) {
    EVP_MD_CTX_free(ctx);
    return wr_error_set(err, errno, "seek");
  }
  while ((n = read(fd, buf, sizeof(buf))) > 0)
    EVP_DigestUpdate(ctx, buf, (size_t)n);
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  if (n < 0)
    return wr_error_set(err, errno, "read an archive");
  for (unsigned i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", md[i]);
  return 0;
}

struct copy_src {
  int fd;
  char *into;
};

/* The mode and owner of directory `path` in the stack below the new
 * layer (its layers newest first, then the image), or 0755 root's. */
static void stack_dir_mode(const struct wr_tpl_build *b, const char *path,
                           struct stat *out) {
  size_t n = wr_strv_len(b->layers);

  *out = (struct stat){.st_mode = S_IFDIR | 0755};
  for (size_t i = n + 1; i-- > 0;) {
    _cleanup_free_ char *dir =
        i > 0 ? layer_path(b->d, b->layers[i - 1]) : xstrdup(b->base_dir);
    _cleanup_close_ int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int fd = -1;
    struct stat st;
    if (root < 0)
      continue;
    fd = wr_open_in_root(root, path, O_PATH | O_DIRECTORY, 0, NULL);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      *out = st;
      return;
    }
  }
}

/* Each directory on the way to `into` is made in the layer as the stack
 * below has it, so that a COPY into /tmp or /root keeps their modes (the
 * layer's copy of a directory is what a sandbox sees). */
static int make_parents(const struct wr_tpl_build *b, int layerfd,
                        const char *into, wr_error_t *err) {
  _cleanup_free_ char *path = wr_path_normalize(into);

  for (char *c = path + 1; *path != '\0' && c != NULL;) {
    struct stat st;
    int fd;
    c = strchr(c, '/');
    if (c != NULL)
      *c = '\0';
    if (path[1] != '\0') {
      stack_dir_mode(b, path, &st);
      fd = wr_mkdir_p_in_root(layerfd, path, st.st_mode & 07777, st.st_uid,
                              st.st_gid, err);
      if (fd < 0)
        return -1;
      close(fd);
    }
    if (c != NULL)
      *c++ = '/';
  }
  return 0;
}

/* Unpack each archive into a new layer; its files are root's (ids 0..
 * of the layer, as an image's). */
static int copy_unpack(struct wr_tpl_build *b, struct copy_src *srcs, size_t n,
                       wr_error_t *err) {
  _cleanup_close_ int layerfd = -1;
  struct wr_tar_ctx tc = {
      .id_base = 0, .id_count = WR_ID_COUNT, .map_ids = true};
  struct wr_tar_stats stats = {0};

  free(b->layer_tmp);
  b->layer_tmp = tmp_layer_name(b);
  if (mkdir(b->layer_tmp, 0755) < 0)
    return wr_error_set(err, errno, "mkdir `%s`", b->layer_tmp);
  layerfd = open(b->layer_tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (layerfd < 0)
    return wr_error_set(err, errno, "open `%s`", b->layer_tmp);
  tc.rootfd = layerfd;
  for (size_t i = 0; i < n; i++) {
    struct wr_tar_stats s = {0};
    if (make_parents(b, layerfd, srcs[i].into, err) < 0)
      return -1;
    if (lseek(srcs[i].fd, 0, SEEK_SET) < 0)
      return wr_error_set(err, errno, "seek");
    if (wr_tar_extract(&tc, srcs[i].into, true, srcs[i].fd, &s, err) < 0)
      return -1;
    stats.bytes += s.bytes;
  }
  b->layer_bytes = stats.bytes;
  return install_layer(b, stats.bytes, err);
}

static void copy_work(struct wr_job *job) {
  struct wr_tpl_build *b = job->arg;
  const struct wr_df_step *st = &b->df.steps[b->step];
  size_t n = wr_strv_len(st->args) - 1;
  _cleanup_free_ char *ctx = xasprintf("%s/ctx", b->work);
  _cleanup_close_ int ctxfd = open(ctx, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct copy_src *srcs = xcalloc(n, sizeof(*srcs));
  char **extra = xcalloc(2 * n + 1, sizeof(char *));
  int r = 0;

  for (size_t i = 0; i < n; i++)
    srcs[i].fd = -1;
  if (ctxfd < 0)
    r = wr_error_set(&job->err, errno, "open the build context");
  for (size_t i = 0; r == 0 && i < n; i++) {
    char hash[KEY_LEN + 1];
    _cleanup_free_ char *tmp = xasprintf("%s/copy-%zu.tar", b->work, i);
    srcs[i].fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (srcs[i].fd < 0)
      r = wr_error_set(&job->err, errno, "open `%s`", tmp);
    else if ((r = copy_archive(ctxfd, st->args[i], st->args[n], srcs[i].fd,
                               &srcs[i].into, &job->err)) == 0 &&
             (r = hash_fd(srcs[i].fd, hash, &job->err)) == 0) {
      extra[2 * i] = xstrdup(hash);
      extra[2 * i + 1] = xstrdup(srcs[i].into);
    }
  }
  if (r == 0) {
    step_key(b->key, st, extra);
    b->was_cached = layer_exists(b);
    if (!b->was_cached)
      r = copy_unpack(b, srcs, n, &job->err);
  }
  for (size_t i = 0; i < n; i++) {
    wr_closep(&srcs[i].fd);
    free(srcs[i].into);
  }
  free(srcs);
  wr_strv_free(extra);
  if (r < 0 && b->layer_tmp != NULL)
    wr_rm_rf(b->layer_tmp, NULL);
  job->result = r;
}

static void copy_done(struct wr_job *job) {
  struct wr_tpl_build *b = job->arg;

  if (job->result < 0) {
    step_fail(b, job->err.msg);
    return;
  }
  emit_step(b, b->was_cached);
  record_step(b, true, b->was_cached);
  build_run_steps(b);
}

/* ---- RUN, in a build sandbox ---- */

static void run_removed(struct wr_sandbox *sb, void *arg,
                        const wr_error_t *err) {
  struct wr_tpl_build *b = arg;

  (void)err;
  wr_sandbox_unref(sb);
  b->sb = NULL;
  if (b->fail_msg != NULL) {
    _cleanup_free_ char *msg = steal_ptr(&b->fail_msg);
    step_fail(b, msg);
    return;
  }
  record_step(b, true, false);
  build_run_steps(b);
}

/* The build sandbox goes, the step's outcome then decides. */
static void run_remove(struct wr_tpl_build *b) {
  wr_error_t err;

  if (wr_sandbox_remove(b->sb, true, run_removed, b, &err) < 0) {
    wr_warn("template `%s`: remove build sandbox %s: %s", b->name, b->sb->name,
            err.msg);
    run_removed(b->sb, b, NULL);
  }
}

static void run_fail(struct wr_tpl_build *b, const char *why) {
  free(b->fail_msg);
  b->fail_msg = xstrdup(why);
  run_remove(b);
}

static void capture_work(struct wr_job *job) {
  struct wr_tpl_build *b = job->arg;
  struct wr_snap_capture cap = {.live = false};

  free(b->layer_tmp);
  b->layer_tmp = tmp_layer_name(b);
  job->result = wr_rt_snapshot_capture(job->d->rt, &b->capture_spec,
                                       b->layer_tmp, &cap, &job->err);
  if (job->result == 0)
    job->result = install_layer(b, cap.bytes, &job->err);
  if (job->result < 0)
    wr_rm_rf(b->layer_tmp, NULL);
}

static void capture_done(struct wr_job *job) {
  struct wr_tpl_build *b = job->arg;

  if (job->result < 0) {
    run_fail(b, job->err.msg);
    return;
  }
  run_remove(b);
}

static void run_stopped(struct wr_sandbox *sb, void *arg,
                        const wr_error_t *err) {
  struct wr_tpl_build *b = arg;
  _cleanup_free_ char *tail = NULL, *why = NULL;

  (void)sb;
  if (b->run_ok && err == NULL) {
    /* Made here: the worker reads only what it is given (the spec
     * borrows the stopped sandbox's strings, which do not change). */
    wr_sandbox_rt_spec(b->sb, &b->capture_spec);
    b->job =
        (struct wr_job){.fn = capture_work, .done = capture_done, .arg = b};
    wr_job_queue(b->d, &b->job);
    return;
  }
  tail = tail_lines(b->out.data ? b->out.data : "", b->out.len);
  why = xasprintf("exit code %d%s%s", b->run_status,
                  *tail ? "; its last output:\n" : "", tail);
  run_fail(b, why);
}

static void run_stop(struct wr_tpl_build *b) {
  wr_error_t err;

  if (wr_sandbox_stop(b->sb, 0, run_stopped, b, &err) < 0)
    run_fail(b, err.msg);
}

/* RUN's output goes to the client as it comes; the last of it is kept
 * for a failure's message. */
static void run_observer(struct wr_proc *p, int stream, const char *data,
                         size_t len, void *arg) {
  struct wr_tpl_build *b = arg;

  if (data != NULL && b->queued > CLIENT_QUEUE_MAX) {
    /* The client does not keep up: its output is skipped (the end of it
     * is still in a failure's message). */
    wr_buf_append(&b->out, data, len);
    if (b->out.len > 2 * TAIL_BYTES)
      wr_buf_consume(&b->out, b->out.len - TAIL_BYTES);
    return;
  }
  if (data != NULL) {
    _cleanup_free_ char *text = utf8_copy(data, len);
    emit(b, json_pack("{s:s,s:I,s:i,s:s}", "type", "output", "step",
                      (json_int_t)b->step + 1, "stream", stream, "data", text));
    wr_buf_append(&b->out, data, len);
    if (b->out.len > 2 * TAIL_BYTES)
      wr_buf_consume(&b->out, b->out.len - TAIL_BYTES);
    return;
  }
  p->observer = NULL;
  if (p->have_status && WIFEXITED(p->status))
    b->run_status = WEXITSTATUS(p->status);
  else if (p->have_status && WIFSIGNALED(p->status))
    b->run_status = 128 + WTERMSIG(p->status);
  else
    b->run_status = -1;
  b->run_ok = p->have_status && b->run_status == 0;
  run_stop(b);
}

static void run_spawned(struct wr_proc *p, void *arg, const wr_error_t *err) {
  struct wr_tpl_build *b = arg;

  if (p == NULL) {
    run_fail(b, err->msg);
    return;
  }
  p->observer = run_observer;
  p->observer_arg = b;
}

/* WORKDIR exists for the command (as Docker makes it): root's, in the
 * build sandbox, so the step's layer has it. A few syscalls in a root that
 * only the daemon has used yet. */
static int make_workdir(struct wr_tpl_build *b, struct wr_sandbox *sb,
                        wr_error_t *err) {
  uint32_t root = wr_rt_id_base(sb->slot);
  int fd;

  if (strcmp(b->workdir, "/") == 0)
    return 0;
  fd = wr_mkdir_p_in_root(sb->rootfd, b->workdir, 0755, root, root, err);
  if (fd < 0)
    return wr_error_wrap(err, "WORKDIR %s", b->workdir);
  close(fd);
  return 0;
}

static void run_created(struct wr_sandbox *sb, void *arg,
                        const wr_error_t *err) {
  struct wr_tpl_build *b = arg;
  const struct wr_df_step *st = &b->df.steps[b->step];
  struct wr_exec_opts o = {
      .argv = st->args, .cwd = b->workdir, .user = b->user, .tag = RUN_TAG};
  wr_error_t e;

  if (err != NULL) {
    _cleanup_free_ char *msg = xasprintf("its build sandbox: %s", err->msg);
    wr_sandbox_unref(sb);
    b->sb = NULL;
    step_fail(b, msg);
    return;
  }
  if (make_workdir(b, sb, &e) < 0 ||
      wr_exec_start(sb, &o, run_spawned, b, &e) < 0)
    run_fail(b, e.msg);
}

static void run_step(struct wr_tpl_build *b) {
  _cleanup_strv_ char **dirs = xcalloc(1, sizeof(char *));
  wr_error_t err;

  for (size_t i = wr_strv_len(b->layers); i-- > 0;) {
    _cleanup_free_ char *dir = layer_path(b->d, b->layers[i]);
    dirs = wr_strv_push(dirs, dir);
  }
  b->sb = wr_sandbox_new_for_build(b->d, b->base, dirs, b->env, b->name, &err);
  if (b->sb == NULL) {
    step_fail(b, err.msg);
    return;
  }
  wr_sandbox_ref(b->sb);
  wr_buf_reset(&b->out);
  b->run_ok = false;
  wr_sandbox_create(b->sb, true, run_created, b);
}

/* ---- the steps ---- */

/* ENV, WORKDIR, USER, EXPOSE, CMD: no layer, but in every later key. */
static void apply_meta(struct wr_tpl_build *b, const struct wr_df_step *st) {
  switch (st->kind) {
  case WR_DF_ENV:
    for (size_t i = 0; st->args[i] != NULL; i++)
      b->env = wr_strv_setenv(b->env, st->args[i]);
    break;
  case WR_DF_WORKDIR:
    free(b->workdir);
    b->workdir = xstrdup(st->args[0]);
    break;
  case WR_DF_USER:
    free(b->user);
    b->user = xstrdup(st->args[0]);
    break;
  case WR_DF_EXPOSE:
    b->port = st->port;
    break;
  case WR_DF_CMD:
    wr_strv_free(b->cmd);
    b->cmd = wr_strv_dup(st->args);
    break;
  default:
    break;
  }
  step_key(b->key, st, NULL);
}

/* RUN's key has what it runs with: the environment, WORKDIR and USER
 * (already in the chain) and the image's own identity (in the first key). */
static void run_or_reuse(struct wr_tpl_build *b, const struct wr_df_step *st) {
  step_key(b->key, st, b->env);
  if (layer_exists(b)) {
    emit_step(b, true);
    record_step(b, true, true);
    build_run_steps(b);
    return;
  }
  emit_step(b, false);
  run_step(b);
}

static void build_run_steps(struct wr_tpl_build *b) {
  while (b->step < b->df.n) {
    const struct wr_df_step *st = &b->df.steps[b->step];
    if (st->kind == WR_DF_FROM) {
      emit_step(b, false);
      record_step(b, false, false);
      continue;
    }
    if ((st->kind == WR_DF_RUN || st->kind == WR_DF_COPY) &&
        too_many_layers(b)) {
      char why[96];
      snprintf(why, sizeof(why),
               "a template has at most %d RUN and COPY "
               "steps",
               WR_TEMPLATE_MAX_LAYERS);
      step_fail(b, why);
      return;
    }
    if (st->kind == WR_DF_COPY) {
      b->job = (struct wr_job){.fn = copy_work, .done = copy_done, .arg = b};
      wr_job_queue(b->d, &b->job);
      return;
    }
    if (st->kind == WR_DF_RUN) {
      run_or_reuse(b, st);
      return;
    }
    apply_meta(b, st);
    if (wr_strv_bytes(b->env) > WR_SANDBOX_ENV_MAX / 2) {
      char why[96];
      snprintf(why, sizeof(why),
               "the template's ENV would take more than "
               "%u bytes",
               WR_SANDBOX_ENV_MAX / 2);
      step_fail(b, why);
      return;
    }
    emit_step(b, false);
    record_step(b, false, false);
  }
  build_finish(b);
}

/* FROM: an image (its tree's identity starts the keys, so a rebuilt
 * image invalidates every layer) or a template (its layers and
 * settings carry over, its last key starts the chain). */
static int resolve_from(struct wr_tpl_build *b, wr_error_t *err) {
  const char *from = b->df.steps[0].args[0];
  json_t *conf = conf_from_store(b->d, from);
  struct stat st;

  b->parent = xstrdup(from);
  if (conf != NULL) {
    const char *parts[] = {
        "template", json_string_value(json_object_get(conf, "key")) ?: ""};
    b->base = xstrdup(json_string_value(json_object_get(conf, "base")) ?: "");
    b->layers = json_strv(json_object_get(conf, "layers"));
    b->env = json_strv(json_object_get(conf, "env"));
    b->cmd = json_strv(json_object_get(conf, "cmd"));
    b->workdir =
        xstrdup(json_string_value(json_object_get(conf, "workdir")) ?: "/");
    b->user =
        xstrdup(json_string_value(json_object_get(conf, "user")) ?: "root");
    b->port = (uint16_t)json_integer_value(json_object_get(conf, "port"));
    hash_parts(b->key, parts, 2);
    json_decref(conf);
  } else {
    b->base = xstrdup(from);
    b->layers = xcalloc(1, sizeof(char *));
    b->env = xcalloc(1, sizeof(char *));
    b->cmd = xcalloc(1, sizeof(char *));
    b->workdir = xstrdup("/");
    b->user = xstrdup("root");
  }
  b->base_dir = wr_image_rootfs(b->d, b->base, err);
  if (b->base_dir == NULL)
    return wr_error_setx(err, ENOENT,
                         "FROM %s: no image or template `%s` (build one with "
                         "`warren image build`)",
                         from, from);
  if (conf == NULL) {
    char ino[64];
    const char *parts[] = {"image", from, ino};
    if (stat(b->base_dir, &st) < 0)
      return wr_error_set(err, errno, "stat `%s`", b->base_dir);
    snprintf(ino, sizeof(ino), "%llu.%lld", (unsigned long long)st.st_ino,
             (long long)st.st_ctim.tv_sec);
    hash_parts(b->key, parts, 3);
  }
  return 0;
}

/* ---- the request: its body, the context, the Dockerfile ---- */

/* ---- .dockerignore ----
 *
 * The context is sent whole; a .dockerignore in it removes what its
 * patterns match from the unpacked context before any COPY (so COPY . .
 * skips node_modules, say). Patterns are fnmatch(3) patterns of paths
 * relative to the context (a leading "/" or "./" and a trailing "/" are
 * dropped; "**" at the start matches any directories); a match removes
 * the entry and all below it. Exceptions ("!pattern") are refused.
 */
#define IGNORE_MAX (64u << 10)

struct ignore_walk {
  char **patterns;
  char *rel; /* the directory walked, relative ("" at the top) */
  int depth;
};

static bool ignored(char *const *patterns, const char *rel) {
  for (size_t i = 0; patterns[i] != NULL; i++) {
    const char *p = patterns[i];
    if (fnmatch(p, rel, FNM_PATHNAME) == 0)
      return true;
    if (wr_str_has_prefix(p, "**/") && fnmatch(p + 3, rel, 0) == 0)
      return true;
    if (wr_str_has_prefix(p, "**/") && fnmatch(p, rel, 0) == 0)
      return true;
  }
  return false;
}

static int ignore_entry(int dirfd, const char *name, void *arg,
                        wr_error_t *err) {
  struct ignore_walk *w = arg;
  _cleanup_free_ char *rel =
      *w->rel ? xasprintf("%s/%s", w->rel, name) : xstrdup(name);
  struct ignore_walk sub = {w->patterns, rel, w->depth + 1};
  _cleanup_close_ int fd = -1;
  struct stat st;

  if (ignored(w->patterns, rel))
    return wr_rm_rf_at(dirfd, name, err) < 0 ? -1 : 0;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
      !S_ISDIR(st.st_mode))
    return 0;
  if (sub.depth > WR_LAYERS_MAX_NEST)
    return wr_error_setx(err, ELOOP, "the build context nests too deep");
  fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s` in the build context", rel);
  return wr_dir_each(fd, ignore_entry, &sub, err) < 0 ? -1 : 0;
}

static char **ignore_patterns(const char *text, wr_error_t *err) {
  _cleanup_free_ char *copy = xstrdup(text);
  char **v = xcalloc(1, sizeof(char *));
  char *save = NULL;

  for (char *l = strtok_r(copy, "\n", &save); l != NULL;
       l = strtok_r(NULL, "\n", &save)) {
    size_t n;
    while (*l == ' ' || *l == '\t')
      l++;
    n = strlen(l);
    while (n > 0 && strchr(" \t\r/", l[n - 1]) != NULL)
      l[--n] = '\0';
    if (*l == '#' || *l == '\0')
      continue;
    if (*l == '!') {
      wr_strv_free(v);
      wr_error_setx(err, EINVAL,
                    ".dockerignore: exceptions (`%.64s`) are not supported", l);
      return NULL;
    }
    while (*l == '/' || wr_str_has_prefix(l, "./"))
      l += *l == '/' ? 1 : 2;
    if (*l != '\0')
      v = wr_strv_push(v, l);
  }
  return v;
}

static int apply_dockerignore(int ctxfd, wr_error_t *err) {
  _cleanup_free_ char *text = NULL;
  struct ignore_walk w = {.rel = ""};
  size_t len = 0;
  int r;

  if (wr_read_in_root(ctxfd, "in the build context", ".dockerignore",
                      IGNORE_MAX, &text, &len, err) < 0)
    return err->code == ENOENT ? 0 : -1;
  if ((w.patterns = ignore_patterns(text, err)) == NULL)
    return -1;
  r = wr_dir_each(ctxfd, ignore_entry, &w, err);
  wr_strv_free(w.patterns);
  return r < 0 ? -1 : 0;
}

static void unpack_work(struct wr_job *job) {
  struct wr_tpl_build *b = job->arg;
  _cleanup_free_ char *ctx = xasprintf("%s/ctx", b->work);
  _cleanup_close_ int ctxfd = -1;
  struct wr_tar_ctx tc = {.id_count = WR_ID_COUNT,
                          .max_bytes = WR_TEMPLATE_CONTEXT_MAX};
  size_t len = 0;

  job->result = -1;
  if (mkdir(ctx, 0755) < 0) {
    wr_error_set(&job->err, errno, "mkdir `%s`", ctx);
    return;
  }
  ctxfd = open(ctx, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (ctxfd < 0 || lseek(b->tar_fd, 0, SEEK_SET) < 0) {
    wr_error_set(&job->err, errno, "open `%s`", ctx);
    return;
  }
  tc.rootfd = ctxfd;
  if (wr_tar_extract(&tc, "/", false, b->tar_fd, NULL, &job->err) < 0) {
    wr_error_wrap(&job->err, "the build context");
    return;
  }
  /* The client made this tree: the Dockerfile is read only if it is a
   * regular file of its own (never through a symlink it planted). */
  if (wr_read_in_root(ctxfd, "in the build context", DOCKERFILE_ENTRY,
                      WR_DF_TEXT_MAX, &b->dockerfile, &len, &job->err) < 0) {
    if (job->err.code == ENOENT)
      wr_error_setx(&job->err, EINVAL,
                    "the build context has no Dockerfile (%s)",
                    DOCKERFILE_ENTRY);
    return;
  }
  unlinkat(ctxfd, DOCKERFILE_ENTRY, 0);
  if (apply_dockerignore(ctxfd, &job->err) < 0)
    return;
  job->result = 0;
}

static void unpack_done(struct wr_job *job) {
  struct wr_tpl_build *b = job->arg;
  wr_error_t err;

  wr_closep(&b->tar_fd);
  if (job->result < 0) {
    build_fail(b, 400, "bad_request", job->err.msg);
    return;
  }
  if (wr_dockerfile_parse(b->dockerfile, strlen(b->dockerfile), &b->df, &err) <
      0) {
    build_fail(b, 400, "bad_dockerfile", err.msg);
    return;
  }
  if (resolve_from(b, &err) < 0) {
    build_fail(b, err.code == ENOENT ? 404 : 400,
               err.code == ENOENT ? "image_not_found" : "bad_request", err.msg);
    return;
  }
  if (b->req == NULL) {
    build_end(b);
    return;
  }
  wr_http_stream_begin(b->req, 200, "application/x-ndjson", NULL);
  wr_http_on_drain(b->req, build_drained, b);
  b->streaming = true;
  if (wr_network_preset(b->d->network) == WR_PRESET_LOCKED)
    emit(b, json_pack("{s:s,s:s}", "type", "note", "message",
                      "the daemon's egress policy is `locked`: RUN steps "
                      "reach only what its allow rules name (`warren policy "
                      "init balanced` lets package managers through)"));
  build_run_steps(b);
}

static void body_end(struct wr_tpl_build *b);

/* A chunk of the context is on disk (or not): take the next. */
static void body_written(uv_fs_t *fs) {
  struct wr_tpl_build *b = fs->data;

  if (fs->result < 0 || (size_t)fs->result != b->chunk.len) {
    wr_warn("template `%s`: write the build context: %s", b->name,
            fs->result < 0 ? uv_strerror((int)fs->result) : "short write");
    b->write_failed = true;
  }
  uv_fs_req_cleanup(fs);
  wr_buf_reset(&b->chunk);
  b->writing = false;
  if (b->body_done)
    body_end(b);
  else if (b->req != NULL)
    wr_http_body_pause(b->req, false);
}

/* Each chunk goes to the context file on the threadpool (uv_fs_write),
 * the body paused meanwhile, so the loop never waits for the disk. */
static void on_body(wr_http_req_t *req, const char *data, size_t len,
                    void *arg) {
  struct wr_tpl_build *b = arg;
  uv_buf_t buf;

  if (b->too_big || b->write_failed)
    return;
  b->received += len;
  if (b->received > WR_TEMPLATE_CONTEXT_MAX) {
    b->too_big = true;
    return;
  }
  wr_buf_append(&b->chunk, data, len);
  buf = uv_buf_init(b->chunk.data, (unsigned)b->chunk.len);
  b->fs.data = b;
  b->writing = true;
  wr_http_body_pause(req, true);
  if (uv_fs_write(b->d->loop, &b->fs, b->tar_fd, &buf, 1, -1, body_written) <
      0) {
    b->writing = false;
    b->write_failed = true;
    wr_buf_reset(&b->chunk);
    wr_http_body_pause(req, false);
  }
}

static void on_body_end(wr_http_req_t *req, int status, void *arg) {
  struct wr_tpl_build *b = arg;

  (void)req;
  b->body_done = true;
  b->body_status = status;
  if (!b->writing)
    body_end(b);
}

static void body_end(struct wr_tpl_build *b) {
  int status = b->body_status;
  char msg[128];

  if (status < 0) {
    build_fail(b, 400, "bad_request", "the build context did not arrive");
    return;
  }
  if (b->too_big || b->write_failed) {
    snprintf(msg, sizeof(msg),
             "the build context is larger than %llu MiB (or could not be "
             "stored)",
             (unsigned long long)(WR_TEMPLATE_CONTEXT_MAX >> 20));
    build_fail(b, 413, "too_large", msg);
    return;
  }
  b->job = (struct wr_job){.fn = unpack_work, .done = unpack_done, .arg = b};
  wr_job_queue(b->d, &b->job);
}

static struct wr_tpl_build *build_find(struct wr_daemon *d, const char *name) {
  for (struct wr_tpl_build *b = d->tpl_builds; b != NULL; b = b->next)
    if (strcmp(b->name, name) == 0)
      return b;
  return NULL;
}

static int build_check(struct wr_daemon *d, const char *name, wr_error_t *err) {
  struct wr_image_rec rec;

  if (name == NULL || !wr_name_valid(name))
    return wr_error_setx(err, EINVAL,
                         "invalid template name `%.64s` (use 1-63 of a-z 0-9 "
                         ". _ -, starting with a letter or digit)",
                         name ? name : "");
  if (build_find(d, name) != NULL)
    return wr_error_setx(err, EBUSY, "template `%s` is being built", name);
  if (wr_store_image_get(d->store, name, &rec, NULL) == 0) {
    wr_image_rec_free(&rec);
    return wr_error_setx(err, EEXIST,
                         "`%s` is an image; a template needs a name of its "
                         "own",
                         name);
  }
  return 0;
}

static int build_open(struct wr_tpl_build *b, wr_error_t *err) {
  _cleanup_free_ char *dir = templates_dir(b->d);
  _cleanup_free_ char *tmp = xasprintf("%s/tmp", dir);
  _cleanup_free_ char *tar = NULL;

  b->layers_dir = xasprintf("%s/layers", dir);
  if (wr_mkdir_p(tmp, 0700, err) < 0 ||
      wr_mkdir_p(b->layers_dir, 0700, err) < 0)
    return -1;
  if (chmod(dir, 0700) < 0)
    return wr_error_set(err, errno, "chmod `%s`", dir);
  b->work = xasprintf("%s/%s-XXXXXX", tmp, b->name);
  if (mkdtemp(b->work) == NULL)
    return wr_error_set(err, errno, "mkdtemp in `%s`", tmp);
  tar = xasprintf("%s/context.tar", b->work);
  b->tar_fd = open(tar, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (b->tar_fd < 0)
    return wr_error_set(err, errno, "open `%s`", tar);
  return 0;
}

/* POST /v1/templates/{name}/build: the body is a tar of the context with
 * the Dockerfile as its DOCKERFILE_ENTRY; the reply an NDJSON stream of
 * step, output, then done or error events. */
void wr_api_template_build(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = wr_http_param(req, "name");
  struct wr_tpl_build *b;
  wr_error_t err;

  if (build_check(d, name, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  b = xcalloc(1, sizeof(*b));
  b->d = d;
  b->req = req;
  b->tar_fd = -1;
  b->name = xstrdup(name);
  b->steps = json_array();
  b->started_ns = wr_mono_ns();
  wr_buf_init(&b->out);
  wr_buf_init(&b->chunk);
  b->next = d->tpl_builds;
  d->tpl_builds = b;
  if (build_open(b, &err) < 0) {
    wr_reply_err(req, &err);
    b->req = NULL;
    if (b->work != NULL)
      build_end(b);
    else
      build_free(b);
    return;
  }
  wr_http_on_abort(req, build_abort, b);
  wr_http_body_read(req, on_body, on_body_end, b);
}

/* ---- reading and removing ------------------------------------------------ */

bool wr_template_exists(struct wr_daemon *d, const char *name) {
  struct wr_template_rec rec;

  if (name == NULL || wr_store_template_get(d->store, name, &rec, NULL) < 0)
    return false;
  wr_template_rec_free(&rec);
  return true;
}

json_t *wr_templates_list_json(struct wr_daemon *d) {
  struct wr_template_rec *recs = NULL;
  json_t *a = json_array();
  size_t n = 0;

  if (wr_store_template_list(d->store, &recs, &n, NULL) < 0)
    return a;
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, template_json(&recs[i]));
  wr_template_recs_free(recs, n);
  return a;
}

void wr_api_template_list(wr_http_req_t *req, void *ctx) {
  wr_http_reply_json(
      req, 200, json_pack("{s:o}", "templates", wr_templates_list_json(ctx)));
}

void wr_api_template_get(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = wr_http_param(req, "name");
  struct wr_template_rec rec;
  wr_error_t err;

  if (name == NULL || wr_store_template_get(d->store, name, &rec, &err) < 0) {
    wr_http_reply_error(req, 404, "not_found", "no template `%.64s`",
                        name ? name : "");
    return;
  }
  wr_http_reply_json(req, 200, template_json(&rec));
  wr_template_rec_free(&rec);
}

/* Whether a layer key is used by a template other than `name` or by a
 * sandbox (whose spec keeps the layers it was made with). */
static bool key_in(const json_t *conf, const char *key) {
  size_t i;
  json_t *e;

  json_array_foreach (json_object_get(conf, "layers"), i, e)
    if (json_is_string(e) && strcmp(json_string_value(e), key) == 0)
      return true;
  return false;
}

static bool key_used(struct wr_daemon *d, const char *name, const char *key,
                     const struct wr_template_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    _cleanup_json_ json_t *conf = NULL;
    if (strcmp(recs[i].name, name) == 0)
      continue;
    conf = conf_of(recs[i].manifest_json);
    if (key_in(conf, key))
      return true;
  }
  for (struct wr_sandbox *sb = d->sandboxes; sb != NULL; sb = sb->next)
    if (sb->spec.template != NULL && key_in(sb->spec.template, key))
      return true;
  return false;
}

struct rm_layers {
  struct wr_job job;
  char **dirs;
  wr_http_req_t *req;
};

static void rm_layers_work(struct wr_job *job) {
  struct rm_layers *rl = job->arg;

  job->result = 0;
  for (size_t i = 0; rl->dirs[i] != NULL; i++) {
    _cleanup_free_ char *size = xasprintf("%s.size", rl->dirs[i]);
    if (wr_rm_rf(rl->dirs[i], &job->err) < 0)
      job->result = -1;
    unlink(size);
  }
}

static void rm_layers_done(struct wr_job *job) {
  struct rm_layers *rl = job->arg;

  if (job->result < 0)
    wr_warn("templates: remove a layer: %s", job->err.msg);
  wr_http_reply_empty(rl->req, 204);
  wr_strv_free(rl->dirs);
  free(rl);
}

/* Refused while a sandbox or a snapshot sits on it or a build runs; its
 * layers that nothing else uses go with it. */
static int template_deletable(struct wr_daemon *d, const char *name,
                              wr_error_t *err) {
  struct wr_snapshot_rec *snaps = NULL;
  unsigned users = 0;
  size_t n = 0, on = 0;

  if (build_find(d, name) != NULL)
    return wr_error_setx(err, EBUSY, "template `%s` is being built", name);
  if (wr_store_image_users(d->store, name, &users, err) < 0 ||
      wr_store_snapshot_list(d->store, &snaps, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    on += snaps[i].image != NULL && strcmp(snaps[i].image, name) == 0;
  wr_snapshot_recs_free(snaps, n);
  if (users > 0 || on > 0)
    return wr_error_setx(err, EBUSY,
                         "template `%s` is used by %u sandbox%s and %zu "
                         "snapshot%s; remove them first",
                         name, users, users == 1 ? "" : "es", on,
                         on == 1 ? "" : "s");
  return 0;
}

void wr_api_template_delete(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = wr_http_param(req, "name");
  struct wr_template_rec *recs = NULL, rec;
  _cleanup_json_ json_t *conf = NULL;
  struct rm_layers *rl;
  size_t n = 0, i;
  json_t *e;
  wr_error_t err;

  if (name == NULL || wr_store_template_get(d->store, name, &rec, &err) < 0) {
    wr_http_reply_error(req, 404, "not_found", "no template `%.64s`",
                        name ? name : "");
    return;
  }
  conf = conf_of(rec.manifest_json);
  wr_template_rec_free(&rec);
  if (template_deletable(d, name, &err) < 0) {
    wr_http_reply_error(req, 409, err.code == EBUSY ? "in_use" : "internal",
                        "%s", err.msg);
    return;
  }
  if (wr_store_template_list(d->store, &recs, &n, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  rl = xcalloc(1, sizeof(*rl));
  rl->dirs = xcalloc(1, sizeof(char *));
  rl->req = req;
  json_array_foreach (json_object_get(conf, "layers"), i, e) {
    const char *key = json_string_value(e);
    _cleanup_free_ char *dir = NULL;
    if (!key_valid(key) || key_used(d, name, key, recs, n))
      continue;
    dir = layer_path(d, key);
    rl->dirs = wr_strv_push(rl->dirs, dir);
  }
  wr_template_recs_free(recs, n);
  if (wr_store_template_delete(d->store, name, &err) < 0) {
    wr_strv_free(rl->dirs);
    free(rl);
    wr_reply_err(req, &err);
    return;
  }
  wr_info("template `%s`: deleted (%zu layers removed)", name,
          wr_strv_len(rl->dirs));
  rl->job =
      (struct wr_job){.fn = rm_layers_work, .done = rm_layers_done, .arg = rl};
  wr_job_queue(d, &rl->job);
}

/* ---- after a restart -------------------------------------------------------
 *
 * A build does not survive its daemon: its work directories, half-made
 * layers and build sandboxes are removed (a build run again finds the
 * layers that were complete).
 */

static void recovered_rm_done(struct wr_sandbox *sb, void *arg,
                              const wr_error_t *err) {
  (void)arg;
  if (err != NULL)
    wr_warn("templates: remove build sandbox %s: %s", sb->name, err->msg);
}

static int leftover_layer(int dirfd, const char *name, void *arg,
                          wr_error_t *err) {
  (void)arg;
  if (name[0] == '.' && strstr(name, ".tmp-") != NULL &&
      wr_rm_rf_at(dirfd, name, err) < 0)
    wr_warn("templates: remove %s: %s", name, err->msg);
  return 0;
}

void wr_templates_recover(struct wr_daemon *d) {
  _cleanup_free_ char *dir = templates_dir(d);
  _cleanup_free_ char *tmp = xasprintf("%s/tmp", dir);
  _cleanup_free_ char *layers = xasprintf("%s/layers", dir);
  _cleanup_close_ int fd = open(layers, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct wr_sandbox *sb, *next;
  wr_error_t err;

  if (wr_rm_rf(tmp, &err) < 0)
    wr_warn("templates: %s", err.msg);
  if (fd >= 0 && wr_dir_each(fd, leftover_layer, NULL, &err) < 0)
    wr_warn("templates: %s", err.msg);
  for (sb = d->sandboxes; sb != NULL; sb = next) {
    next = sb->next;
    if (json_object_get(sb->spec.labels, "warren.template-build") == NULL)
      continue;
    wr_info("templates: removing %s, the build sandbox of an interrupted "
            "build",
            sb->name);
    if (wr_sandbox_remove(sb, true, recovered_rm_done, NULL, &err) < 0)
      wr_warn("templates: remove %s: %s", sb->name, err.msg);
  }
}

unsigned wr_templates_on_image(struct wr_daemon *d, const char *image) {
  struct wr_template_rec *recs = NULL;
  unsigned on = 0;
  size_t n = 0;

  if (wr_store_template_list(d->store, &recs, &n, NULL) < 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    on += strcmp(recs[i].base, image) == 0;
  wr_template_recs_free(recs, n);
  return on;
}
