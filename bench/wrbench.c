/*
 * wrbench: measures warren against peers in the same run and prints the
 * figures DESIGN.md sets targets for.
 *
 *   wrbench [--socket PATH] [--image DIR] [--runs N] [--mass N]
 *           [--ws-files N] [--cli PATH]
 *   wrbench net --sink ADDR:PORT [--pid PID] [--proxy ADDR:PORT] [--mib N]
 *               [--conns N] [--runs N] [--no-redirect]
 *   wrbench wake [--socket PATH] [--cli PATH] [--runs N]
 *   wrbench snapshot [--socket PATH] [--runs N] [--mib N] [--files N]
 *   wrbench pool [--socket PATH] [--runs N] [--image NAME] [--page PORT]
 *   wrbench evict [--socket PATH] [--runs N]
 *   wrbench template [--socket PATH] [--cli PATH] [--fixture DIR] [--runs N]
 *                    [--paused K] [--reserve-gib G]
 *
 * - create + first exec of `true` (API round trips, as a client sees them)
 *   vs `bwrap --unshare-all ... true` on the same image;
 * - the same as a user types it, `warren create --name N` then
 *   `warren exec N -- true` (with --cli, the warren binary; WARREN_HOST
 *   names the daemon), vs the same bwrap;
 * - exec round trip in a running sandbox vs a host fork+exec of `true`;
 * - host memory per idle sandbox (MemAvailable before and after);
 * - creating N sandboxes one after another, then removing them;
 * - create + first exec with a direct-mode workspace of --ws-files files
 *   (the id-mapped mount and the record `warren diff` compares with) vs
 *   bwrap binding the same directory.
 *
 * `wrbench evict` (a warrend with --max-running 1): a create with the
 * slot free vs a create that must first pause the idle one in it, p50 and
 * p90 of both and the difference (the limiter's added latency).
 *
 * It talks to a running warrend over its unix socket with the project's
 * own HTTP client, and runs bwrap itself.
 *
 * `wrbench net` measures the egress proxy from inside a sandbox's network
 * namespace (that of --pid, the sandbox's warren-init) against a direct
 * loopback connection from the host to the same server, which it runs
 * itself on --sink (a host address the sandbox's policy allows):
 * - CONNECT throughput: CONNECT to the sink through the proxy, push (and
 *   pull) --mib MiB, MB/s;
 * - new connections per second: CONNECT, a 1-byte echo, close, --conns
 *   times;
 * - the same through the transparent redirect (a plain connect() to the
 *   sink's address, which the namespace's rules hand to the proxy), unless
 *   --no-redirect or the sink is on 127/8 (not redirected: the sandbox's
 *   own loopback).
 * The paths take turns (a transfer, or a quarter of the connections, of
 * each in a row), so that a load that comes and goes on a shared machine
 * weighs on the direct figure and its peers alike.
 *
 * `wrbench template` (bench/run, unless --no-template) builds the Vite +
 * React fixture's template (tests/fixtures/vite-app) with an ENV of its
 * own run, so every layer key is new and the build is cold (npm install
 * from the registry), then again with nothing changed; times --runs
 * creates from it until the page answers (create, which waits for the
 * EXPOSE port, then an exec of curl) against a plain create + first exec;
 * and creates --paused K sandboxes from it, fetches the page once in each,
 * pauses them and reads their cgroups' memory: the mean, and how many the
 * host would hold (MemTotal less --reserve-gib, over the mean; an
 * extrapolation from K).
 *
 * `wrbench wake` (bench/run runs it after the creates) measures pause and
 * wake in one sandbox running python3's http.server on a published port:
 * - pause and resume, through the API (one client on the socket: the
 *   daemon's time and one local round trip) and, with --cli, through
 *   `warren pause` / `warren resume` as a user types them;
 * - an HTTP GET to the published port of the paused sandbox, until the
 *   answer has been read, against the same GET once it runs: the
 *   difference is what waking on a connection costs; and the same for an
 *   exec of `true`.
 *
 * `wrbench pool` measures a create that takes a warm pool's sandbox
 * (docs/templates.md): it keeps a pool of --image (default base; a
 * template, once they exist, whose dev server is then already serving)
 * and times a create of that image until a first exec of `true` has
 * answered, against a create with "pool": false and its first exec, run
 * by run, each waiting for the pool to be full again. It removes the
 * pool it made (and puts back one that was there).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <jansson.h>

#include "api/api.h"

extern char **environ;

struct opts {
  const char *socket;
  const char *image;
  const char *cli; /* the warren CLI, for the figure a user sees */
  int runs;
  int mass;
  int ws_files;
};

static double ms_since(uint64_t t0) {
  return (wr_mono_ns() - t0) / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;

  return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
  int i = (int)ceil(p / 100.0 * n) - 1;

  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static wr_http_client_t *connect_daemon(const struct opts *o) {
  wr_http_client_t *c;
  wr_error_t err;

  if (wr_http_client_open(o->socket, NULL, &c, &err) < 0) {
    fprintf(stderr, "wrbench: %s\n", err.msg);
    exit(1);
  }
  return c;
}

/* One request with a JSON body; returns the status (or -1). Statuses of
 * 300 and above are reported unless they are `quiet_status`. */
static int call_q(wr_http_client_t *c, const char *method, const char *path,
                  const char *body, int quiet_status) {
  struct wr_http_response r = {0};
  wr_error_t err;
  int status;

  if (wr_http_request(c, method, path, body ? "application/json" : NULL, body,
                      body ? strlen(body) : 0, &r, &err) < 0) {
    fprintf(stderr, "wrbench: %s %s: %s\n", method, path, err.msg);
    return -1;
  }
  status = r.status;
  if (status >= 300 && status != quiet_status)
    fprintf(stderr, "wrbench: %s %s: %d %s\n", method, path, status,
            r.body.data ? r.body.data : "");
  wr_http_response_free(&r);
  return status;
}

/* Exec body's command and read the NDJSON stream to its end: 0 when it
 * exited 0. (An "exit_code":0 split across two reads is missed: the
 * commands here print nothing, so their stream is a few short lines.) */
static int exec_body(wr_http_client_t *c, const char *name, const char *body) {
  struct wr_http_response r = {0};
  char path[128], buf[4096];
  wr_error_t err;
  ssize_t n;
  bool exited = false;

  snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", name);
  if (wr_http_request_stream(c, "POST", path, "application/json", body,
                             strlen(body), &r, &err) < 0 ||
      r.status != 200) {
    fprintf(stderr, "wrbench: exec: %s (%d)\n", err.msg, r.status);
    wr_http_response_free(&r);
    return -1;
  }
  while ((n = wr_http_read_body(c, buf, sizeof(buf) - 1, &err)) > 0) {
    buf[n] = '\0';
    if (strstr(buf, "\"exit_code\":0") != NULL)
      exited = true;
  }
  wr_http_response_free(&r);
  return n == 0 && exited ? 0 : -1;
}

static int exec_true(wr_http_client_t *c, const char *name) {
  return exec_body(c, name, "{\"cmd\":[\"true\"]}");
}

static int call(wr_http_client_t *c, const char *method, const char *path,
                const char *body) {
  return call_q(c, method, path, body, 0);
}

static int create(wr_http_client_t *c, const char *name) {
  char body[256];

  snprintf(body, sizeof(body), "{\"name\":\"%s\"}", name);
  return call(c, "POST", "/v1/sandboxes", body) == 201 ? 0 : -1;
}

static int create_with_workspace(wr_http_client_t *c, const char *name,
                                 const char *dir) {
  char body[512];

  snprintf(body, sizeof(body),
           "{\"name\":\"%s\",\"workspace\":{\"path\":\"%s\"}}", name, dir);
  return call(c, "POST", "/v1/sandboxes", body) == 201 ? 0 : -1;
}

static int destroy(wr_http_client_t *c, const char *name) {
  char path[128];

  snprintf(path, sizeof(path), "/v1/sandboxes/%s?force=true", name);
  return call_q(c, "DELETE", path, NULL, 404) == 204 ? 0 : -1;
}

/* Run argv and wait; returns the exit status. */
static int run(char *const argv[]) {
  pid_t pid;
  int status;

  if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
    return -1;
  while (waitpid(pid, &status, 0) < 0)
    ;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Run argv with its stdout on /dev/null; returns the exit status. */
static int run_quiet(char *const argv[]) {
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int status, r;

  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (r != 0)
    return -1;
  while (waitpid(pid, &status, 0) < 0)
    ;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void report(const char *what, double *v, int n, const char *peer,
                   double *pv, int pn) {
  double p50 = pct(v, n, 50), p99 = pct(v, n, 99);

  printf("%-34s p50 %8.2f ms  p99 %8.2f ms", what, p50, p99);
  if (pv != NULL) {
    double q50 = pct(pv, pn, 50);
    printf("   %s p50 %.2f ms, ratio %.2fx", peer, q50, p50 / q50);
  }
  printf("\n");
}

/* Through the API: create, then exec `true`. */
static int api_create_exec(const struct opts *o, wr_http_client_t *c,
                           char *name) {
  (void)o;
  return create(c, name) == 0 && exec_true(c, name) == 0 ? 0 : -1;
}

/* The two commands a user types, each a new process that connects,
 * asks and prints, as in a shell: `warren create --name N && warren exec
 * N -- true`. */
static int cli_create_exec(const struct opts *o, wr_http_client_t *c,
                           char *name) {
  char *mk[] = {(char *)o->cli, "create", "--name", name, NULL};
  char *ex[] = {(char *)o->cli, "exec", name, "--", "true", NULL};

  (void)c;
  return run_quiet(mk) == 0 && run_quiet(ex) == 0 ? 0 : -1;
}

/* A new sandbox and its first exec of `true` made by make_one, runs times,
 * each followed by bwrap running `true` on the same image. */
static void bench_first_exec(const struct opts *o, wr_http_client_t *c,
                             const char *what, const char *prefix,
                             int (*make_one)(const struct opts *,
                                             wr_http_client_t *, char *)) {
  double *v = xcalloc((size_t)o->runs, sizeof(double));
  double *pv = xcalloc((size_t)o->runs, sizeof(double));
  char *bw[] = {"bwrap", "--unshare-all", "--ro-bind", (char *)o->image,
                "/",     "--proc",        "/proc",     "--dev",
                "/dev",  "true",          NULL};
  int n = 0, pn = 0;

  for (int i = 0; i < o->runs; i++) {
    char name[32];
    uint64_t t0;
    snprintf(name, sizeof(name), "%s-%d", prefix, i);
    destroy(c, name);
    t0 = wr_mono_ns();
    if (make_one(o, c, name) == 0)
      v[n++] = ms_since(t0);
    destroy(c, name);
    t0 = wr_mono_ns();
    if (run(bw) == 0)
      pv[pn++] = ms_since(t0);
  }
  if (n > 0)
    report(what, v, n, "bwrap", pn ? pv : NULL, pn);
  else
    fprintf(stderr, "wrbench: %s: every run failed\n", what);
  free(v);
  free(pv);
}

/* A project-like tree: `files` files of 1 KiB, 50 per directory. */
static int make_tree(const char *dir, int files) {
  char path[512], data[1024];

  memset(data, 'x', sizeof(data));
  if (mkdir(dir, 0755) < 0 && errno != EEXIST)
    return -1;
  for (int i = 0; i < files; i++) {
    int fd;
    snprintf(path, sizeof(path), "%s/d%03d", dir, i / 50);
    if (i % 50 == 0 && mkdir(path, 0755) < 0 && errno != EEXIST)
      return -1;
    snprintf(path, sizeof(path), "%s/d%03d/f%05d.txt", dir, i / 50, i);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, data, sizeof(data)) != (ssize_t)sizeof(data)) {
      if (fd >= 0)
        close(fd);
      return -1;
    }
    close(fd);
  }
  return 0;
}

static void bench_workspace(const struct opts *o, wr_http_client_t *c) {
  char dir[] = "/tmp/wrbench-ws-XXXXXX", what[64];
  double *v = xcalloc((size_t)o->runs, sizeof(double));
  double *pv = xcalloc((size_t)o->runs, sizeof(double));
  char *rm[] = {"rm", "-rf", dir, NULL};
  int n = 0, pn = 0;

  /* A user's project: warren refuses root-owned workspaces. */
  if (mkdtemp(dir) == NULL || make_tree(dir, o->ws_files) < 0 ||
      chown(dir, 4242, 4242) < 0) {
    fprintf(stderr, "wrbench: cannot make a workspace in /tmp\n");
    goto out;
  }
  {
    char *bw[] = {"bwrap",     "--unshare-all",
                  "--ro-bind", (char *)o->image,
                  "/",         "--bind",
                  dir,         "/mnt",
                  "--proc",    "/proc",
                  "--dev",     "/dev",
                  "true",      NULL};
    for (int i = 0; i < o->runs; i++) {
      char name[32];
      uint64_t t0;
      snprintf(name, sizeof(name), "bench-ws-%d", i);
      destroy(c, name);
      t0 = wr_mono_ns();
      if (create_with_workspace(c, name, dir) == 0 && exec_true(c, name) == 0)
        v[n++] = ms_since(t0);
      destroy(c, name);
      t0 = wr_mono_ns();
      if (run(bw) == 0)
        pv[pn++] = ms_since(t0);
    }
  }
  snprintf(what, sizeof(what), "  with a workspace (%d files)", o->ws_files);
  if (n > 0)
    report(what, v, n, "bwrap --bind", pn ? pv : NULL, pn);
out:
  run(rm);
  free(v);
  free(pv);
}

static void bench_exec(const struct opts *o, wr_http_client_t *c) {
  int runs = o->runs * 5, n = 0, pn = 0;
  double *v = xcalloc((size_t)runs, sizeof(double));
  double *pv = xcalloc((size_t)runs, sizeof(double));
  char *tr[] = {"/bin/true", NULL};

  destroy(c, "bench-exec");
  if (create(c, "bench-exec") < 0)
    return;
  exec_true(c, "bench-exec");
  for (int i = 0; i < runs; i++) {
    uint64_t t0 = wr_mono_ns();
    if (exec_true(c, "bench-exec") == 0)
      v[n++] = ms_since(t0);
    t0 = wr_mono_ns();
    if (run(tr) == 0)
      pv[pn++] = ms_since(t0);
  }
  destroy(c, "bench-exec");
  if (n > 0)
    report("exec round trip (running sandbox)", v, n, "host fork+exec",
           pn ? pv : NULL, pn);
  free(v);
  free(pv);
}

static long mem_available_kib(void) {
  FILE *f = fopen("/proc/meminfo", "re");
  char line[256];
  long v = -1;

  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "MemAvailable: %ld kB", &v) == 1)
      break;
  if (f != NULL)
    fclose(f);
  return v;
}

static void drop_caches(void) {
  FILE *f;

  sync();
  f = fopen("/proc/sys/vm/drop_caches", "we");
  if (f != NULL) {
    fputs("3\n", f);
    fclose(f);
  }
}

static void bench_memory(const struct opts *o, wr_http_client_t *c) {
  int n = o->mass < 50 ? o->mass : 50, made = 0;
  long before, after;

  drop_caches();
  sleep(1);
  before = mem_available_kib();
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof(name), "bench-mem-%d", i);
    destroy(c, name);
    made += create(c, name) == 0;
  }
  sleep(2);
  drop_caches();
  sleep(1);
  after = mem_available_kib();
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof(name), "bench-mem-%d", i);
    destroy(c, name);
  }
  if (made > 0)
    printf("%-34s %8.2f MiB per sandbox (%d idle sandboxes, MemAvailable "
           "drop)\n",
           "host memory per idle sandbox",
           (double)(before - after) / 1024.0 / made, made);
}

static void bench_mass(const struct opts *o, wr_http_client_t *c) {
  int errors = 0, rm_errors = 0;
  uint64_t t0 = wr_mono_ns();
  double create_ms, rm_ms;

  for (int i = 0; i < o->mass; i++) {
    char name[32];
    snprintf(name, sizeof(name), "bench-mass-%d", i);
    destroy(c, name);
  }
  t0 = wr_mono_ns();
  for (int i = 0; i < o->mass; i++) {
    char name[32];
    snprintf(name, sizeof(name), "bench-mass-%d", i);
    errors += create(c, name) < 0;
  }
  create_ms = ms_since(t0);
  t0 = wr_mono_ns();
  for (int i = 0; i < o->mass; i++) {
    char name[32];
    snprintf(name, sizeof(name), "bench-mass-%d", i);
    rm_errors += destroy(c, name) < 0;
  }
  rm_ms = ms_since(t0);
  printf("%-34s %8.0f ms total, %.2f ms each, %d errors, %d running at once\n",
         "create (running)", create_ms, create_ms / o->mass, errors,
         o->mass - errors);
  printf("%-34s %8.0f ms total, %.2f ms each, %d errors\n", "remove (-f)",
         rm_ms, rm_ms / o->mass, rm_errors);
}

/* ---- wrbench net ------------------------------------------------------ */

/* The sink's protocol: the first byte says what the connection is for
 * (neither a TLS record nor an HTTP method, so a proxy that sniffs the
 * first bytes decides by address at once). */
enum { SINK_UPLOAD = 1, SINK_DOWNLOAD = 2, SINK_ECHO = 3 };
enum net_path { PATH_DIRECT, PATH_RELAY, PATH_CONNECT, PATH_REDIRECT };

#define NET_BUF (256 * 1024)

struct net_opts {
  struct sockaddr_storage sink, proxy, relay;
  socklen_t sink_len, proxy_len, relay_len;
  char sink_text[80];
  int netns_fd; /* the sandbox's, or -1: stay in the host's namespace */
  uint64_t bytes;
  int conns, runs;
  bool redirect;
};

static int parse_sockaddr(const char *s, struct sockaddr_storage *out,
                          socklen_t *len) {
  char host[64];
  const char *colon = strrchr(s, ':');
  long port;

  if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
    return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  port = strtol(colon + 1, NULL, 10);
  if (port < 1 || port > 65535)
    return -1;
  memset(out, 0, sizeof(*out));
  if (host[0] == '[') {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;
    size_t n = strlen(host);
    if (n < 3 || host[n - 1] != ']')
      return -1;
    host[n - 1] = '\0';
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    *len = sizeof(*a);
    return inet_pton(AF_INET6, host + 1, &a->sin6_addr) == 1 ? 0 : -1;
  }
  struct sockaddr_in *a = (struct sockaddr_in *)out;
  a->sin_family = AF_INET;
  a->sin_port = htons((uint16_t)port);
  *len = sizeof(*a);
  return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static int read_full(int fd, void *buf, size_t n) {
  size_t got = 0;

  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

static int write_full(int fd, const void *buf, size_t n) {
  size_t done = 0;

  while (done < n) {
    ssize_t w = write(fd, (const char *)buf + done, n - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    done += (size_t)w;
  }
  return 0;
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8)
    p[i] = (uint8_t)v;
}

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;

  for (int i = 0; i < 8; i++)
    v = v << 8 | p[i];
  return v;
}

/* One sink connection: upload (read N bytes, answer 1), download (write
 * N bytes) or echo (answer the byte); then wait for the client to close. */
static void *sink_conn(void *arg) {
  int fd = (int)(intptr_t)arg;
  uint8_t head[9], *buf = xmalloc(NET_BUF);

  if (read_full(fd, head, 1) < 0)
    goto out;
  if (head[0] == SINK_ECHO) {
    if (write_full(fd, head, 1) < 0)
      goto out;
  } else if (head[0] == SINK_UPLOAD || head[0] == SINK_DOWNLOAD) {
    uint64_t n;
    if (read_full(fd, head + 1, 8) < 0)
      goto out;
    n = get_u64(head + 1);
    if (head[0] == SINK_UPLOAD) {
      while (n > 0) {
        ssize_t r = read(fd, buf, n < NET_BUF ? n : NET_BUF);
        if (r < 0 && errno == EINTR)
          continue;
        if (r <= 0)
          goto out;
        n -= (uint64_t)r;
      }
      if (write_full(fd, "K", 1) < 0)
        goto out;
    } else {
      memset(buf, 'x', NET_BUF);
      while (n > 0) {
        size_t k = n < NET_BUF ? n : NET_BUF;
        if (write_full(fd, buf, k) < 0)
          goto out;
        n -= k;
      }
    }
  }
  while (read(fd, buf, NET_BUF) > 0)
    ;
out:
  close(fd);
  free(buf);
  return NULL;
}

/* A listener of the sink's or the relay's: a thread per connection. */
struct net_listener {
  int fd;
  void *(*conn)(void *);
};

static void *net_accept(void *arg) {
  const struct net_listener *l = arg;

  for (;;) {
    pthread_t t;
    pthread_attr_t attr;
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
        continue;
      return NULL;
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    if (pthread_create(&t, &attr, l->conn, (void *)(intptr_t)fd) != 0)
      close(fd);
    pthread_attr_destroy(&attr);
  }
}

/* Listen on addr (a port 0 is chosen by the kernel and written back) and
 * serve each connection with conn on a thread of its own. */
static int net_listen(struct sockaddr_storage *addr, socklen_t *len,
                      void *(*conn)(void *), const char *what) {
  static struct net_listener ls[2];
  static int nls;
  int one = 1, fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  pthread_t t;

  if (fd < 0 || nls == 2)
    goto fail;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (addr->ss_family == AF_INET6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd, (const struct sockaddr *)addr, *len) < 0 ||
      listen(fd, 1024) < 0 || getsockname(fd, (struct sockaddr *)addr, len) < 0)
    goto fail;
  ls[nls] = (struct net_listener){fd, conn};
  if (pthread_create(&t, NULL, net_accept, &ls[nls]) != 0)
    goto fail;
  nls++;
  pthread_detach(t);
  return 0;
fail:
  fprintf(stderr, "wrbench net: %s: %s\n", what, strerror(errno));
  if (fd >= 0)
    close(fd);
  return -1;
}

/*
 * The peer of the proxy's tunnels: the least any relay in user space
 * does, a thread per connection that dials the sink and moves bytes each
 * way with splice(2) through a pipe (of the size warren's bulk pipes
 * grow to), with no policy, no protocol and no event loop. Its figures
 * against the direct connection show what the kernel's two extra socket
 * hops cost on this host, which no relay can save.
 */
#define RELAY_PIPE (256 * 1024)

struct relay_dir {
  int from, to, pipe[2];
  size_t piped;
  bool eof;
};

/* Move what is there from d->from to d->to; -1 when the connection is
 * over (an error), 0 otherwise. */
static int relay_move(struct relay_dir *d) {
  ssize_t n;

  if (d->piped == 0 && !d->eof) {
    n = splice(d->from, NULL, d->pipe[1], NULL, RELAY_PIPE,
               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n == 0) {
      d->eof = true;
      shutdown(d->to, SHUT_WR);
    } else if (n > 0) {
      d->piped = (size_t)n;
    } else if (errno != EAGAIN) {
      return -1;
    }
  }
  if (d->piped > 0) {
    n = splice(d->pipe[0], NULL, d->to, NULL, d->piped,
               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0)
      d->piped -= (size_t)n;
    else if (n < 0 && errno != EAGAIN)
      return -1;
  }
  return 0;
}

static const struct net_opts *relay_opts; /* whose sink it dials */

static void *relay_conn(void *arg) {
  int c = (int)(intptr_t)arg, one = 1;
  int u = socket(relay_opts->sink.ss_family,
                 SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct relay_dir d[2] = {{.from = c, .to = u, .pipe = {-1, -1}},
                           {.from = u, .to = c, .pipe = {-1, -1}}};
  struct pollfd pf[2] = {{.fd = c}, {.fd = u}};
  const struct net_opts *o = relay_opts;

  if (u < 0)
    goto out;
  setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(u, (const struct sockaddr *)&o->sink, o->sink_len) < 0 &&
      errno != EINPROGRESS)
    goto out;
  fcntl(c, F_SETFL, O_NONBLOCK);
  for (int i = 0; i < 2; i++) {
    if (pipe2(d[i].pipe, O_CLOEXEC) < 0)
      goto out;
    fcntl(d[i].pipe[1], F_SETPIPE_SZ, RELAY_PIPE);
  }
  while (!(d[0].eof && d[0].piped == 0 && d[1].eof && d[1].piped == 0)) {
    /* Each side: readable while its pipe is empty, writable while the
     * other's waits for it (connect's end is writable too). */
    for (int i = 0; i < 2; i++)
      pf[i].events = (short)((!d[i].eof && d[i].piped == 0 ? POLLIN : 0) |
                             (d[1 - i].piped > 0 ? POLLOUT : 0));
    if (poll(pf, 2, 30000) <= 0 || relay_move(&d[0]) < 0 ||
        relay_move(&d[1]) < 0)
      break;
  }
out:
  for (int i = 0; i < 2; i++)
    if (d[i].pipe[0] >= 0) {
      close(d[i].pipe[0]);
      close(d[i].pipe[1]);
    }
  if (u >= 0)
    close(u);
  close(c);
  return NULL;
}

static int sink_start(struct net_opts *o) {
  struct sockaddr_in *a = (struct sockaddr_in *)&o->relay;

  if (net_listen(&o->sink, &o->sink_len, sink_conn, o->sink_text) < 0)
    return -1;
  memset(&o->relay, 0, sizeof(o->relay));
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  o->relay_len = sizeof(*a);
  relay_opts = o;
  return net_listen(&o->relay, &o->relay_len, relay_conn, "relay");
}

/* A connection to the sink along path; -1 and a message in why on failure.
 * Sockets for the sandbox's paths are made in its namespace (the calling
 * thread has entered it). */
static int net_open(const struct net_opts *o, enum net_path path, char *why,
                    size_t whysize) {
  const struct sockaddr_storage *to = path == PATH_CONNECT ? &o->proxy
                                      : path == PATH_RELAY ? &o->relay
                                                           : &o->sink;
  socklen_t len = path == PATH_CONNECT ? o->proxy_len
                  : path == PATH_RELAY ? o->relay_len
                                       : o->sink_len;
  struct timeval tv = {30, 0};
  int one = 1, fd = socket(to->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0) {
    snprintf(why, whysize, "socket: %s", strerror(errno));
    return -1;
  }
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, (const struct sockaddr *)to, len) < 0) {
    /* A blocking connect past SO_SNDTIMEO fails with EINPROGRESS. */
    snprintf(why, whysize, "connect: %s",
             errno == EINPROGRESS ? "timed out" : strerror(errno));
    close(fd);
    return -1;
  }
  if (path == PATH_CONNECT) {
    char req[256], resp[1024];
    size_t got = 0;
    int n =
        snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
                 o->sink_text, o->sink_text);
    if (write_full(fd, req, (size_t)n) < 0) {
      snprintf(why, whysize, "sending CONNECT: %s", strerror(errno));
      close(fd);
      return -1;
    }
    /* Nothing follows the proxy's answer until we send: read to its end. */
    while (got < sizeof(resp) - 1) {
      ssize_t r = read(fd, resp + got, sizeof(resp) - 1 - got);
      if (r <= 0)
        break;
      got += (size_t)r;
      resp[got] = '\0';
      if (strstr(resp, "\r\n\r\n") != NULL)
        break;
    }
    resp[got] = '\0';
    if (strncmp(resp, "HTTP/1.1 200", 12) != 0 &&
        strncmp(resp, "HTTP/1.0 200", 12) != 0) {
      char *eol = strpbrk(resp, "\r\n");
      if (eol != NULL)
        *eol = '\0';
      snprintf(why, whysize, "proxy answered \"%.100s\"",
               got ? resp : "nothing");
      close(fd);
      return -1;
    }
  }
  return fd;
}

/* One transfer of o->bytes; MB/s, or -1. */
static double net_transfer(const struct net_opts *o, enum net_path path,
                           int dir, char *why, size_t whysize) {
  uint8_t head[9], *buf;
  uint64_t t0 = wr_mono_ns(), left = o->bytes;
  double secs;
  int fd = net_open(o, path, why, whysize);

  if (fd < 0)
    return -1;
  buf = xmalloc(NET_BUF);
  memset(buf, 'u', NET_BUF);
  head[0] = (uint8_t)dir;
  put_u64(head + 1, o->bytes);
  if (write_full(fd, head, sizeof(head)) < 0)
    goto fail;
  if (dir == SINK_UPLOAD) {
    while (left > 0) {
      size_t k = left < NET_BUF ? left : NET_BUF;
      if (write_full(fd, buf, k) < 0)
        goto fail;
      left -= k;
    }
    if (read_full(fd, buf, 1) < 0 || buf[0] != 'K')
      goto fail;
  } else {
    while (left > 0) {
      ssize_t r = read(fd, buf, left < NET_BUF ? left : NET_BUF);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        goto fail;
      left -= (uint64_t)r;
    }
  }
  secs = (wr_mono_ns() - t0) / 1e9;
  close(fd);
  free(buf);
  return (double)o->bytes / 1e6 / secs;
fail:
  snprintf(why, whysize, "transfer cut after %llu of %llu bytes: %s",
           (unsigned long long)(o->bytes - left), (unsigned long long)o->bytes,
           errno ? strerror(errno) : "closed");
  close(fd);
  free(buf);
  return -1;
}

/* n connections, each with a 1-byte echo; seconds taken, or -1. Per
 * connection latencies go to lat (ms). */
static double net_conns(const struct net_opts *o, enum net_path path, int n,
                        double *lat, char *why, size_t whysize) {
  uint64_t t0 = wr_mono_ns();

  for (int i = 0; i < n; i++) {
    uint64_t t1 = wr_mono_ns();
    uint8_t b = SINK_ECHO;
    int fd = net_open(o, path, why, whysize);
    if (fd < 0)
      return -1;
    if (write_full(fd, &b, 1) < 0 || read_full(fd, &b, 1) < 0 ||
        b != SINK_ECHO) {
      snprintf(why, whysize, "connection %d: no echo", i);
      close(fd);
      return -1;
    }
    close(fd);
    lat[i] = ms_since(t1);
  }
  return (wr_mono_ns() - t0) / 1e9;
}

#define NET_PATHS 4
#define NET_ROUNDS 4 /* of the connection test, interleaved */

struct net_result {
  double up, down, cps, p50, p99;
  char why[256]; /* the first failure, or "" */
};

/* What one path collects across the interleaved rounds. */
struct net_samples {
  double *up, *down, *lat;
  int nu, nd, nlat;
  double secs;
  bool conns_failed;
};

/* Sockets for a path are made in its namespace: the sandbox's for the
 * proxied paths, the host's for the direct one (setns changes the calling
 * thread only; the sink's thread stays in the host's). */
static int net_enter(const struct net_opts *o, enum net_path path, int host_ns,
                     char *why, size_t whysize) {
  int fd = path == PATH_DIRECT || path == PATH_RELAY ? host_ns : o->netns_fd;

  if (fd >= 0 && setns(fd, CLONE_NEWNET) < 0) {
    snprintf(why, whysize, "setns: %s", strerror(errno));
    return -1;
  }
  return 0;
}

static void net_sample_transfers(const struct net_opts *o, enum net_path path,
                                 struct net_samples *s, struct net_result *r) {
  double v = net_transfer(o, path, SINK_UPLOAD, r->why, sizeof(r->why));

  if (v > 0)
    s->up[s->nu++] = v;
  v = net_transfer(o, path, SINK_DOWNLOAD, r->why, sizeof(r->why));
  if (v > 0)
    s->down[s->nd++] = v;
}

static void net_sample_conns(const struct net_opts *o, enum net_path path,
                             int n, struct net_samples *s,
                             struct net_result *r) {
  double secs;

  if (s->conns_failed)
    return;
  secs = net_conns(o, path, n, s->lat + s->nlat, r->why, sizeof(r->why));
  if (secs < 0) {
    s->conns_failed = true;
    return;
  }
  s->secs += secs;
  s->nlat += n;
}

static void net_summarise(const struct net_opts *o, struct net_samples *s,
                          struct net_result *r) {
  r->up = s->nu > 0 ? pct(s->up, s->nu, 50) : -1;
  r->down = s->nd > 0 ? pct(s->down, s->nd, 50) : -1;
  r->cps = -1;
  if (!s->conns_failed && s->nlat > 0) {
    r->cps = s->nlat / s->secs;
    r->p50 = pct(s->lat, s->nlat, 50);
    r->p99 = pct(s->lat, s->nlat, 99);
  }
  if (s->nu == o->runs && s->nd == o->runs && r->cps > 0)
    r->why[0] = '\0';
  free(s->up);
  free(s->down);
  free(s->lat);
}

/*
 * Every path is measured in turns, one transfer (or one round of the
 * connection test) of each path after the other, so that a load that
 * comes and goes on a shared machine weighs on all of them alike and the
 * ratios compare like with like.
 */
static int net_measure_all(const struct net_opts *o, int npaths,
                           struct net_result *r) {
  struct net_samples s[NET_PATHS];
  int host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int per_round = (o->conns + NET_ROUNDS - 1) / NET_ROUNDS;

  if (host_ns < 0) {
    perror("wrbench net: /proc/self/ns/net");
    return -1;
  }
  for (int p = 0; p < npaths; p++) {
    memset(&r[p], 0, sizeof(r[p]));
    memset(&s[p], 0, sizeof(s[p]));
    s[p].up = xcalloc((size_t)o->runs, sizeof(double));
    s[p].down = xcalloc((size_t)o->runs, sizeof(double));
    s[p].lat = xcalloc((size_t)o->conns, sizeof(double));
  }
  for (int i = 0; i < o->runs; i++)
    for (int p = 0; p < npaths; p++)
      if (net_enter(o, p, host_ns, r[p].why, sizeof(r[p].why)) == 0)
        net_sample_transfers(o, p, &s[p], &r[p]);
  for (int done = 0; done < o->conns; done += per_round)
    for (int p = 0; p < npaths; p++) {
      int n = WR_MIN(per_round, o->conns - done);
      if (net_enter(o, p, host_ns, r[p].why, sizeof(r[p].why)) == 0)
        net_sample_conns(o, p, n, &s[p], &r[p]);
      else
        s[p].conns_failed = true;
    }
  for (int p = 0; p < npaths; p++)
    net_summarise(o, &s[p], &r[p]);
  net_enter(o, PATH_DIRECT, host_ns, r[0].why, sizeof(r[0].why));
  close(host_ns);
  return 0;
}

/* A figure, the direct one and their ratio, and where there is one the
 * bare relay's ratio beside it (what any relay gets on this host). */
static void net_line(const char *what, double v, const char *extra,
                     double direct, const char *direct_extra, double relay,
                     const char *unit) {
  if (v < 0) {
    printf("%-34s %10s", what, "failed");
  } else {
    printf("%-34s %10.1f %s%s", what, v, unit, extra);
  }
  if (direct > 0) {
    printf("   direct %.1f %s%s", direct, unit, direct_extra);
    if (v > 0)
      printf(", ratio %.2fx", v / direct);
    if (v > 0 && relay > 0)
      printf(" (bare relay %.2fx)", relay / direct);
  }
  printf("\n");
}

static void net_report(const char *name, const struct net_result *r,
                       const struct net_result *d,
                       const struct net_result *relay) {
  char what[64], extra[64], dextra[64];

  snprintf(what, sizeof(what), "%s upload", name);
  net_line(what, r->up, "", d->up, "", relay ? relay->up : -1, "MB/s");
  snprintf(what, sizeof(what), "%s download", name);
  net_line(what, r->down, "", d->down, "", relay ? relay->down : -1, "MB/s");
  snprintf(what, sizeof(what), "%s new connections", name);
  snprintf(extra, sizeof(extra), " (p50 %.3f, p99 %.3f ms)", r->p50, r->p99);
  snprintf(dextra, sizeof(dextra), " (p50 %.3f, p99 %.3f ms)", d->p50, d->p99);
  net_line(what, r->cps, r->cps > 0 ? extra : "", d->cps,
           d->cps > 0 ? dextra : "", relay ? relay->cps : -1, "conn/s");
  if (r->why[0] != '\0')
    printf("  %s: %s\n", name, r->why);
}

static bool is_loopback(const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) ==
           127;
  return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

static int net_main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"sink", required_argument, NULL, 's'},
      {"pid", required_argument, NULL, 'p'},
      {"proxy", required_argument, NULL, 'x'},
      {"mib", required_argument, NULL, 'm'},
      {"conns", required_argument, NULL, 'c'},
      {"runs", required_argument, NULL, 'r'},
      {"no-redirect", no_argument, NULL, 'n'},
      {NULL, 0, NULL, 0},
  };
  struct net_opts o = {.netns_fd = -1,
                       .bytes = 256ull << 20,
                       .conns = 2000,
                       .runs = 3,
                       .redirect = true};
  const char *pid = NULL, *proxy = "127.0.0.1:3128", *sink = NULL;
  struct net_result r[NET_PATHS];
  struct net_result *direct = &r[PATH_DIRECT], *relay = &r[PATH_RELAY],
                    *via_connect = &r[PATH_CONNECT],
                    *via_redirect = &r[PATH_REDIRECT];
  int ch;

  optind = 1;
  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    switch (ch) {
    case 's':
      sink = optarg;
      break;
    case 'p':
      pid = optarg;
      break;
    case 'x':
      proxy = optarg;
      break;
    case 'm':
      o.bytes = strtoull(optarg, NULL, 10) << 20;
      break;
    case 'c':
      o.conns = atoi(optarg);
      break;
    case 'r':
      o.runs = atoi(optarg);
      break;
    case 'n':
      o.redirect = false;
      break;
    default:
      return 2;
    }
  }
  if (sink == NULL || o.bytes == 0 || o.conns < 1 || o.runs < 1) {
    fprintf(stderr, "usage: wrbench net --sink ADDR:PORT [--pid PID] "
                    "[--proxy ADDR:PORT] [--mib N] [--conns N] [--runs N] "
                    "[--no-redirect]\n");
    return 2;
  }
  if (parse_sockaddr(sink, &o.sink, &o.sink_len) < 0 ||
      parse_sockaddr(proxy, &o.proxy, &o.proxy_len) < 0) {
    fprintf(stderr, "wrbench net: bad address %s or %s\n", sink, proxy);
    return 2;
  }
  snprintf(o.sink_text, sizeof(o.sink_text), "%s", sink);
  if (pid != NULL) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%s/ns/net", pid);
    o.netns_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (o.netns_fd < 0) {
      fprintf(stderr, "wrbench net: %s: %s\n", path, strerror(errno));
      return 1;
    }
  }
  if (is_loopback(&o.sink))
    o.redirect = false;
  if (sink_start(&o) < 0)
    return 1;

  printf("network: sink on %s, %llu MiB per transfer (median of %d), %d "
         "connections; proxy %s%s\n",
         sink, (unsigned long long)(o.bytes >> 20), o.runs, o.conns, proxy,
         pid ? " in the sandbox's namespace" : "");
  fflush(stdout);
  if (net_measure_all(&o, o.redirect ? 4 : 3, r) < 0)
    return 1;
  if (direct->why[0] != '\0')
    printf("  direct: %s\n", direct->why);
  net_report("bare relay (peer)", relay, direct, NULL);
  net_report("CONNECT", via_connect, direct, relay);
  if (o.redirect)
    net_report("redirected TCP", via_redirect, direct, relay);
  return via_connect->why[0] != '\0' || direct->why[0] != '\0' ||
         (o.redirect && via_redirect->why[0] != '\0');
}

/* ---- wrbench wake -------------------------------------------------------- */

/* A host port nothing listens on now. */
static int free_host_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* GET / from 127.0.0.1:port, read to the end: 0 when it answered 200. */
static int http_get(int port) {
  static const char req[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  char buf[4096];
  size_t got = 0;
  ssize_t n;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

  if (fd < 0)
    return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      write_full(fd, req, sizeof(req) - 1) < 0) {
    close(fd);
    return -1;
  }
  while ((n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
    if ((got += (size_t)n) == sizeof(buf) - 1)
      got = 12; /* keep the status line */
  buf[got] = '\0';
  ok = strncmp(buf, "HTTP/1.0 200", 12) == 0 ? 0 : -1;
  close(fd);
  return ok;
}

/* The sandbox, its server and its published port; the host port. */
static int wake_setup(wr_http_client_t *c, int *host_port) {
  static const char web[] =
      "{\"cmd\":[\"python3\",\"-m\",\"http.server\",\"8000\","
      "\"--bind\",\"127.0.0.1\",\"--directory\",\"/etc\"],"
      "\"background\":true,\"tag\":\"web\"}";
  char body[128];

  destroy(c, "bench-wake");
  *host_port = free_host_port();
  snprintf(body, sizeof(body), "{\"host_port\":%d,\"port\":8000}", *host_port);
  if (*host_port < 0 || create(c, "bench-wake") < 0 ||
      call(c, "POST", "/v1/sandboxes/bench-wake/exec", web) != 201 ||
      call(c, "POST", "/v1/sandboxes/bench-wake/ports", body) != 201)
    return -1;
  for (int i = 0; i < 200; i++) {
    if (http_get(*host_port) == 0)
      return 0;
    usleep(50000);
  }
  fprintf(stderr, "wrbench: the server in bench-wake never answered\n");
  return -1;
}

static int timed_call(wr_http_client_t *c, const char *path, double *ms) {
  uint64_t t0 = wr_mono_ns();

  if (call(c, "POST", path, NULL) != 200)
    return -1;
  *ms = ms_since(t0);
  return 0;
}

static int timed_run(char *const argv[], double *ms) {
  uint64_t t0 = wr_mono_ns();

  if (run_quiet(argv) != 0)
    return -1;
  *ms = ms_since(t0);
  return 0;
}

static void bench_pause_resume(const struct opts *o, wr_http_client_t *c) {
  double *pv = xcalloc((size_t)o->runs, sizeof(double));
  double *rv = xcalloc((size_t)o->runs, sizeof(double));
  char *cp[] = {(char *)o->cli, "pause", "bench-wake", NULL};
  char *cr[] = {(char *)o->cli, "resume", "bench-wake", NULL};
  int n = 0, m = 0;

  for (int i = 0; i < o->runs; i++)
    if (timed_call(c, "/v1/sandboxes/bench-wake/pause", &pv[n]) == 0 &&
        timed_call(c, "/v1/sandboxes/bench-wake/resume", &rv[n]) == 0)
      n++;
  if (n > 0) {
    report("pause (API)", pv, n, NULL, NULL, 0);
    report("resume (API)", rv, n, NULL, NULL, 0);
  }
  for (int i = 0; o->cli != NULL && i < o->runs; i++)
    if (timed_run(cp, &pv[m]) == 0 && timed_run(cr, &rv[m]) == 0)
      m++;
  if (m > 0) {
    report("warren pause (CLI)", pv, m, NULL, NULL, 0);
    report("warren resume (CLI)", rv, m, NULL, NULL, 0);
  }
  free(pv);
  free(rv);
}

/* One request to the paused sandbox (0 when it answered). */
struct wake_probe {
  const char *what; /* the figure's name */
  bool show_cost;   /* also print paused minus running */
  int (*fn)(wr_http_client_t *c, int port);
};

static int probe_get(wr_http_client_t *c, int port) {
  (void)c;
  return http_get(port) < 0 ? -1 : 0;
}

static int probe_exec(wr_http_client_t *c, int port) {
  (void)port;
  return exec_true(c, "bench-wake") < 0 ? -1 : 0;
}

/* The probe on the sandbox paused (it wakes it), then again running.
 * Paused and running take turns, so that load on a shared machine weighs
 * on both alike. */
static void bench_wake_probe(const struct opts *o, wr_http_client_t *c,
                             int port, const struct wake_probe *p) {
  double *wv = xcalloc((size_t)o->runs, sizeof(double));
  double *hv = xcalloc((size_t)o->runs, sizeof(double));
  int n = 0;

  for (int i = 0; i < o->runs; i++) {
    uint64_t t0;
    if (call(c, "POST", "/v1/sandboxes/bench-wake/pause", NULL) != 200)
      continue;
    t0 = wr_mono_ns();
    if (p->fn(c, port) < 0)
      continue;
    wv[n] = ms_since(t0);
    t0 = wr_mono_ns();
    if (p->fn(c, port) < 0)
      continue;
    hv[n++] = ms_since(t0);
  }
  if (n > 0)
    report(p->what, wv, n, "running", hv, n);
  if (n > 0 && p->show_cost)
    printf("%-34s p50 %8.2f ms\n", "  wake on a connection costs",
           pct(wv, n, 50) - pct(hv, n, 50));
  free(wv);
  free(hv);
}

static int wake_main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"socket", required_argument, NULL, 's'},
      {"cli", required_argument, NULL, 'c'},
      {"runs", required_argument, NULL, 'r'},
      {NULL, 0, NULL, 0},
  };
  struct opts o = {.socket = "/run/warren/warrend.sock", .runs = 20};
  wr_http_client_t *c;
  int ch, port;

  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (ch == 's')
      o.socket = optarg;
    else if (ch == 'c')
      o.cli = optarg;
    else if (ch == 'r')
      o.runs = atoi(optarg);
    else
      return 2;
  }
  if (o.runs < 1)
    return 2;
  c = connect_daemon(&o);
  printf("warren bench wake: %d runs\n", o.runs);
  if (wake_setup(c, &port) == 0) {
    bench_pause_resume(&o, c);
    bench_wake_probe(&o, c, port,
                     &(struct wake_probe){"GET to a paused sandbox's port",
                                          true, probe_get});
    bench_wake_probe(&o, c, port,
                     &(struct wake_probe){"exec true in a paused sandbox",
                                          false, probe_exec});
  }
  destroy(c, "bench-wake");
  wr_http_client_close(c);
  return 0;
}

/* ---- wrbench evict --------------------------------------------------------
 *
 * The added latency of a create that must make room: against a warrend
 * with --max-running 1 (bench/run starts one), next to another sandbox
 * that the client paused (the slot is free) or left running (the create
 * must first pause it: the limiter's eviction, a freeze), taking turns so
 * that load weighs on both alike.
 */

static json_t *call_json(wr_http_client_t *c, const char *method,
                         const char *path, const char *body, int want);

static int timed_create(wr_http_client_t *c, const char *name, double *ms) {
  uint64_t t0 = wr_mono_ns();

  if (create(c, name) < 0)
    return -1;
  *ms = ms_since(t0);
  return 0;
}

/* The figure counts only when the first one really made room. */
static bool was_evicted(wr_http_client_t *c) {
  _cleanup_json_ json_t *sb =
      call_json(c, "GET", "/v1/sandboxes/bench-ev-free", NULL, 200);
  const char *state = json_string_value(json_object_get(sb, "state"));

  if (state != NULL && strcmp(state, "paused") == 0)
    return true;
  fprintf(stderr, "wrbench evict: the first sandbox is %s, not paused\n",
          state ? state : "gone");
  return false;
}

static int evict_check(wr_http_client_t *c) {
  _cleanup_json_ json_t *info = call_json(c, "GET", "/v1/info", NULL, 200);
  json_int_t max = json_integer_value(
      json_object_get(json_object_get(info, "limiter"), "max_running"));

  if (max == 1)
    return 0;
  fprintf(stderr,
          "wrbench evict: needs a warrend with --max-running 1 (it has "
          "%lld)\n",
          (long long)max);
  return -1;
}

static int evict_main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"socket", required_argument, NULL, 's'},
      {"runs", required_argument, NULL, 'r'},
      {NULL, 0, NULL, 0},
  };
  struct opts o = {.socket = "/run/warren/warrend.sock", .runs = 20};
  double *fv, *ev;
  wr_http_client_t *c;
  int ch, n = 0;

  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (ch == 's')
      o.socket = optarg;
    else if (ch == 'r')
      o.runs = atoi(optarg);
    else
      return 2;
  }
  if (o.runs < 1)
    return 2;
  c = connect_daemon(&o);
  if (evict_check(c) < 0) {
    wr_http_client_close(c);
    return 1;
  }
  fv = xcalloc((size_t)o.runs, sizeof(double));
  ev = xcalloc((size_t)o.runs, sizeof(double));
  printf("warren bench evict: %d runs, --max-running 1\n", o.runs);
  destroy(c, "bench-ev-free");
  destroy(c, "bench-ev-new");
  for (int i = 0; i < o.runs && create(c, "bench-ev-free") == 0; i++) {
    /* The same steps before both: the other one running, then paused by
     * the client (the slot is free) or left running (it must make room). */
    if (call(c, "POST", "/v1/sandboxes/bench-ev-free/pause", NULL) != 200 ||
        timed_create(c, "bench-ev-new", &fv[n]) < 0 ||
        destroy(c, "bench-ev-new") < 0 ||
        call(c, "POST", "/v1/sandboxes/bench-ev-free/resume", NULL) != 200 ||
        timed_create(c, "bench-ev-new", &ev[n]) < 0 || !was_evicted(c))
      break;
    n++;
    destroy(c, "bench-ev-new");
    destroy(c, "bench-ev-free");
  }
  destroy(c, "bench-ev-free");
  destroy(c, "bench-ev-new");
  if (n > 0) {
    double f50 = pct(fv, n, 50), e50 = pct(ev, n, 50);
    printf("%-34s p50 %8.2f ms  p90 %8.2f ms\n", "create, a slot free", f50,
           pct(fv, n, 90));
    printf("%-34s p50 %8.2f ms  p90 %8.2f ms   free p50 %.2f ms, ratio "
           "%.2fx\n",
           "create that pauses an idle one", e50, pct(ev, n, 90), f50,
           e50 / f50);
    printf("%-34s p50 %8.2f ms  p90 %8.2f ms   (target: <= 10 ms p50)\n",
           "  the eviction adds", e50 - f50, pct(ev, n, 90) - pct(fv, n, 90));
  }
  free(fv);
  free(ev);
  wr_http_client_close(c);
  return n > 0 ? 0 : 1;
}

/* ---- wrbench snapshot ---------------------------------------------------- */

/* A request whose JSON answer is wanted: the parsed body when the status
 * is `want`, else NULL (reported). */
static json_t *call_json(wr_http_client_t *c, const char *method,
                         const char *path, const char *body, int want) {
  struct wr_http_response r = {0};
  json_t *j = NULL;
  wr_error_t err;

  if (wr_http_request(c, method, path, body ? "application/json" : NULL, body,
                      body ? strlen(body) : 0, &r, &err) < 0) {
    fprintf(stderr, "wrbench: %s %s: %s\n", method, path, err.msg);
    return NULL;
  }
  if (r.status == want && r.body.data != NULL)
    j = json_loadb(r.body.data, r.body.len, 0, NULL);
  else
    fprintf(stderr, "wrbench: %s %s: %d %s\n", method, path, r.status,
            r.body.data ? r.body.data : "");
  wr_http_response_free(&r);
  return j;
}

/* `sh -c cmd`, which must exit 0 and print nothing. */
static int exec_ok(wr_http_client_t *c, const char *name, const char *cmd) {
  _cleanup_json_ json_t *body =
      json_pack("{s:[s,s,s]}", "cmd", "sh", "-c", cmd);
  _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);

  return exec_body(c, name, text);
}

/* Snapshot `name` as `snap`: total ms (as the client sees it), and the
 * daemon's frozen and total ms; -1 on failure. */
static double snapshot_once(wr_http_client_t *c, const char *name,
                            const char *snap, double *frozen, double *total) {
  char path[128], body[128];
  uint64_t t0 = wr_mono_ns();
  _cleanup_json_ json_t *r = NULL;
  json_t *cap;

  snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", name);
  snprintf(body, sizeof(body), "{\"name\":\"%s\"}", snap);
  r = call_json(c, "POST", path, body, 201);
  if (r == NULL)
    return -1;
  cap = json_object_get(r, "capture");
  *frozen = json_number_value(json_object_get(cap, "frozen_ms"));
  *total = json_number_value(json_object_get(cap, "total_ms"));
  return ms_since(t0);
}

/* Until every snapshot is synced to disk, so that one's writeback is not
 * in the next one's figure (at most 60 s). */
static void wait_synced(wr_http_client_t *c) {
  for (int i = 0; i < 600; i++) {
    _cleanup_json_ json_t *r = call_json(c, "GET", "/v1/snapshots", NULL, 200);
    json_t *arr = json_object_get(r, "snapshots"), *v;
    size_t k;
    bool all = true;

    json_array_foreach (arr, k, v)
      all = all && json_is_true(json_object_get(v, "synced"));
    if (r == NULL || all)
      return;
    usleep(100 * 1000);
  }
}

static int create_from(wr_http_client_t *c, const char *name,
                       const char *snap) {
  char body[256];

  snprintf(body, sizeof(body), "{\"name\":\"%s\",\"snapshot\":\"%s\"}", name,
           snap);
  return call(c, "POST", "/v1/sandboxes", body) == 201 ? 0 : -1;
}

static void snap_cleanup(wr_http_client_t *c, int runs) {
  char name[64];

  destroy(c, "bench-snap");
  for (int i = 0; i < runs; i++) {
    snprintf(name, sizeof(name), "bench-snap-c%d", i);
    destroy(c, name);
    snprintf(name, sizeof(name), "bench-snap-p%d", i);
    destroy(c, name);
    snprintf(name, sizeof(name), "bench-snap-f%d", i);
    destroy(c, name);
  }
  for (int i = 0; i < runs; i++) {
    snprintf(name, sizeof(name), "/v1/snapshots/bench-snap-s%d", i);
    call_q(c, "DELETE", name, NULL, 404);
    snprintf(name, sizeof(name), "/v1/snapshots/bench-snap-f%d", i);
    call_q(c, "DELETE", name, NULL, 404);
  }
  call_q(c, "DELETE", "/v1/snapshots/bench-snap-base", NULL, 404);
}

/*
 * What DESIGN.md's snapshot targets are about: a sandbox with a
 * node_modules-like tree of --mib MiB in --files files (2000 directories)
 * and a process writing throughout; its snapshot while it runs (frozen
 * and total time); a create from the snapshot until its first exec,
 * against a plain create; and a fork (snapshot + create + first exec).
 */
static int snapshot_main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"socket", required_argument, NULL, 's'},
      {"runs", required_argument, NULL, 'r'},
      {"mib", required_argument, NULL, 'm'},
      {"files", required_argument, NULL, 'f'},
      {NULL, 0, NULL, 0},
  };
  struct opts o = {.socket = "/run/warren/warrend.sock", .runs = 3};
  long mib = 200, files = 20000;
  double *fz, *tot, *cli, *fromv, *plain, *forkv;
  int ch, n = 0, nc = 0, nf = 0;
  static const char writer[] =
      "{\"cmd\":[\"sh\",\"-c\",\"while :; do date >>/srv/log; sleep 0.01; "
      "done\"],\"background\":true,\"tag\":\"writer\"}";
  char cmd[512], name[64], snap[64];
  wr_http_client_t *c;

  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (ch == 's')
      o.socket = optarg;
    else if (ch == 'r')
      o.runs = atoi(optarg);
    else if (ch == 'm')
      mib = atol(optarg);
    else if (ch == 'f')
      files = atol(optarg);
    else
      return 2;
  }
  if (o.runs < 1 || mib < 1 || files < 2000)
    return 2;
  c = connect_daemon(&o);
  snap_cleanup(c, o.runs);
  printf("warren bench snapshot: a %ld MiB tree of %ld files in 2000 "
         "directories, a writer running; %d runs\n",
         mib, files, o.runs);
  fflush(stdout);
  snprintf(cmd, sizeof(cmd),
           "python3 -c 'import os\n"
           "n=%ld; size=%ld*1048576//n; b=os.urandom(size)\n"
           "for i in range(n):\n"
           "  d=\"/srv/nm/p%%d\" %% (i %% 2000)\n"
           "  os.makedirs(d, exist_ok=True)\n"
           "  open(\"%%s/f%%d.js\" %% (d, i), \"wb\").write(b)'",
           files, mib);
  if (create(c, "bench-snap") < 0 || exec_ok(c, "bench-snap", cmd) < 0 ||
      call(c, "POST", "/v1/sandboxes/bench-snap/exec", writer) != 201) {
    fprintf(stderr, "wrbench: could not make the tree\n");
    snap_cleanup(c, o.runs);
    wr_http_client_close(c);
    return 1;
  }
  fz = xcalloc((size_t)o.runs, sizeof(double));
  tot = xcalloc((size_t)o.runs, sizeof(double));
  cli = xcalloc((size_t)o.runs, sizeof(double));
  fromv = xcalloc((size_t)o.runs, sizeof(double));
  plain = xcalloc((size_t)o.runs, sizeof(double));
  forkv = xcalloc((size_t)o.runs, sizeof(double));
  for (int i = 0; i < o.runs; i++) {
    uint64_t t0;
    wait_synced(c);
    snprintf(snap, sizeof(snap), "bench-snap-s%d", i);
    if ((cli[n] = snapshot_once(c, "bench-snap", snap, &fz[n], &tot[n])) < 0)
      continue;
    n++;
    /* From the snapshot, then plain, each until its first exec. */
    snprintf(name, sizeof(name), "bench-snap-c%d", i);
    t0 = wr_mono_ns();
    if (create_from(c, name, snap) < 0 || exec_true(c, name) < 0)
      continue;
    fromv[nc] = ms_since(t0);
    snprintf(name, sizeof(name), "bench-snap-p%d", i);
    t0 = wr_mono_ns();
    if (create(c, name) < 0 || exec_true(c, name) < 0)
      continue;
    plain[nc++] = ms_since(t0);
    /* A fork: what `warren fork` does, the two calls and a first exec. */
    snprintf(snap, sizeof(snap), "bench-snap-f%d", i);
    snprintf(name, sizeof(name), "bench-snap-f%d", i);
    wait_synced(c);
    t0 = wr_mono_ns();
    {
      double a, b;
      if (snapshot_once(c, "bench-snap", snap, &a, &b) < 0 ||
          create_from(c, name, snap) < 0 || exec_true(c, name) < 0)
        continue;
    }
    forkv[nf++] = ms_since(t0);
  }
  if (n > 0) {
    printf("%-34s p50 %8.1f ms  (total %.1f ms in warrend, %.1f ms as the "
           "client sees it)\n",
           "snapshot of it running: frozen", pct(fz, n, 50), pct(tot, n, 50),
           pct(cli, n, 50));
  }
  if (nc > 0)
    report("create from it + first exec", fromv, nc, "plain create", plain, nc);
  if (nf > 0)
    printf("%-34s p50 %8.1f ms\n", "fork (snapshot + create + exec)",
           pct(forkv, nf, 50));
  snap_cleanup(c, o.runs);
  wr_http_client_close(c);
  free(fz);
  free(tot);
  free(cli);
  free(fromv);
  free(plain);
  free(forkv);
  return n > 0 && nc > 0 && nf > 0 ? 0 : 1;
}

/* ---- wrbench pool -------------------------------------------------------- */

/* The pool of image's field (-1: no pool). */
static long pool_field(wr_http_client_t *c, const char *image,
                       const char *field) {
  struct wr_http_response r = {0};
  json_t *j, *p;
  wr_error_t err;
  long v = -1;
  size_t i;

  if (wr_http_request(c, "GET", "/v1/pools", NULL, NULL, 0, &r, &err) < 0)
    return -1;
  j = r.body.data ? json_loads(r.body.data, 0, NULL) : NULL;
  json_array_foreach (json_object_get(j, "pools"), i, p)
    if (strcmp(json_string_value(json_object_get(p, "image")), image) == 0)
      v = (long)json_integer_value(json_object_get(p, field));
  json_decref(j);
  wr_http_response_free(&r);
  return v;
}

static int set_pool(wr_http_client_t *c, const char *image, long size) {
  char path[128], body[64];

  snprintf(path, sizeof(path), "/v1/pools/%s", image);
  snprintf(body, sizeof(body), "{\"size\":%ld}", size);
  return call(c, "PUT", path, body) == 200 ? 0 : -1;
}

/* Until the pool has `size` ready (and none filling), at most 60 s. */
static int pool_full(wr_http_client_t *c, const char *image, long size) {
  for (int i = 0; i < 6000; i++) {
    if (pool_field(c, image, "ready") == size &&
        pool_field(c, image, "filling") == 0)
      return 0;
    usleep(10000);
  }
  fprintf(stderr, "wrbench: the pool of %s never filled\n", image);
  return -1;
}

/* A create of image, from the pool or not, and its first exec; the
 * answer must say where the sandbox came from. */
static int pool_create_exec(wr_http_client_t *c, const char *name,
                            const char *image, bool pool, int page_port) {
  struct wr_http_response r = {0};
  char body[256];
  wr_error_t err;
  bool ok;

  snprintf(body, sizeof(body), "{\"name\":\"%s\",\"image\":\"%s\",\"pool\":%s}",
           name, image, pool ? "true" : "false");
  if (wr_http_request(c, "POST", "/v1/sandboxes", "application/json", body,
                      strlen(body), &r, &err) < 0)
    return -1;
  ok = r.status == 201 && r.body.data != NULL &&
       strstr(r.body.data,
              pool ? "\"from_pool\":true" : "\"from_pool\":false") != NULL;
  if (!ok)
    fprintf(stderr, "wrbench: create %s: %d %s\n", name, r.status,
            r.body.data ? r.body.data : "");
  wr_http_response_free(&r);
  if (ok && page_port > 0) { /* a template's page, from its dev server */
    snprintf(body, sizeof(body),
             "{\"cmd\":[\"curl\",\"-fsS\",\"--noproxy\",\"*\",\"-o\","
             "\"/dev/null\",\"http://127.0.0.1:%d/\"]}",
             page_port);
    return exec_body(c, name, body) == 0 ? 0 : -1;
  }
  return ok && exec_true(c, name) == 0 ? 0 : -1;
}

static int pool_main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"socket", required_argument, NULL, 's'},
      {"runs", required_argument, NULL, 'r'},
      {"image", required_argument, NULL, 'i'},
      {"page", required_argument, NULL, 'p'},
      {NULL, 0, NULL, 0},
  };
  struct opts o = {.socket = "/run/warren/warrend.sock", .runs = 20};
  const char *image = "base";
  int page_port = 0;
  double *pooled, *plain;
  long before, size = 2;
  int ch, n = 0, np = 0;
  char name[64];
  wr_http_client_t *c;

  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (ch == 's')
      o.socket = optarg;
    else if (ch == 'r')
      o.runs = atoi(optarg);
    else if (ch == 'i')
      image = optarg;
    else if (ch == 'p')
      page_port = atoi(optarg);
    else
      return 2;
  }
  if (o.runs < 1)
    return 2;
  c = connect_daemon(&o);
  before = pool_field(c, image, "size");
  if (set_pool(c, image, size) < 0 || pool_full(c, image, size) < 0) {
    wr_http_client_close(c);
    return 1;
  }
  printf("warren bench pool: image %s, a pool of %ld; %d runs\n", image, size,
         o.runs);
  fflush(stdout);
  pooled = xcalloc((size_t)o.runs, sizeof(double));
  plain = xcalloc((size_t)o.runs, sizeof(double));
  for (int i = 0; i < o.runs; i++) {
    uint64_t t0;
    if (pool_full(c, image, size) < 0)
      break;
    snprintf(name, sizeof(name), "bench-pool-%d", i);
    t0 = wr_mono_ns();
    if (pool_create_exec(c, name, image, true, page_port) == 0)
      pooled[n++] = ms_since(t0);
    destroy(c, name);
    snprintf(name, sizeof(name), "bench-plain-%d", i);
    t0 = wr_mono_ns();
    if (pool_create_exec(c, name, image, false, page_port) == 0)
      plain[np++] = ms_since(t0);
    destroy(c, name);
  }
  if (n > 0 && np > 0) {
    double p50 = pct(pooled, n, 50), p90 = pct(pooled, n, 90);
    double q50 = pct(plain, np, 50), q90 = pct(plain, np, 90);
    printf("%-34s p50 %8.2f ms  p90 %8.2f ms   %s p50 %.2f ms  p90 %.2f ms, "
           "ratio %.2fx\n",
           page_port > 0 ? "from the pool until the page answers"
                         : "create from the pool + first exec",
           p50, p90,
           page_port > 0 ? "without the pool" : "plain create + first exec",
           q50, q90, p50 / q50);
  }
  if (before > 0)
    set_pool(c, image, before);
  else
    set_pool(c, image, 0);
  wr_http_client_close(c);
  free(pooled);
  free(plain);
  return n > 0 && np > 0 ? 0 : 1;
}

/* ---- wrbench template ---------------------------------------------------- */

struct tpl_opts {
  const char *socket, *cli, *fixture;
  int runs, paused;
  double reserve_gib;
};

/* `warren image build NAME -f DIR/Dockerfile DIR`, its output quiet; ms or
 * -1. */
static double tpl_build(const struct tpl_opts *o, const char *name,
                        const char *dir) {
  char df[512];
  char *argv[] = {(char *)o->cli, "image", "build",     (char *)name,
                  "-f",           df,      (char *)dir, NULL};
  uint64_t t0 = wr_mono_ns();
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int status, r;

  snprintf(df, sizeof(df), "%s/Dockerfile", dir);
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (r != 0)
    return -1;
  while (waitpid(pid, &status, 0) < 0)
    ;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -1;
  return ms_since(t0);
}

/* The fixture in a directory of its own, with an ENV of this run's after
 * FROM: every layer key is new, so the first build is cold (npm install
 * from the registry with an empty cache), and nothing else shares them. */
static int tpl_context(const struct tpl_opts *o, char *dir) {
  char src[512], dst[512], line[1024];
  char *cp[] = {"cp", "-a", src, dir, NULL};
  FILE *in, *out;

  if (mkdtemp(dir) == NULL)
    return -1;
  snprintf(src, sizeof(src), "%s/.", o->fixture);
  if (run(cp) != 0)
    return -1;
  snprintf(src, sizeof(src), "%s/Dockerfile", o->fixture);
  snprintf(dst, sizeof(dst), "%s/Dockerfile", dir);
  if ((in = fopen(src, "r")) == NULL || (out = fopen(dst, "w")) == NULL)
    return -1;
  while (fgets(line, sizeof(line), in) != NULL) {
    fputs(line, out);
    if (strncmp(line, "FROM ", 5) == 0)
      fprintf(out, "ENV WRBENCH_RUN=%llu\n", (unsigned long long)wr_mono_ns());
  }
  fclose(in);
  return fclose(out) == 0 ? 0 : -1;
}

/* The page from inside the sandbox, through the dev server. */
static int tpl_page(wr_http_client_t *c, const char *name) {
  return exec_body(c, name,
                   "{\"cmd\":[\"curl\",\"-fsS\",\"--noproxy\",\"*\","
                   "\"-o\",\"/dev/null\",\"http://127.0.0.1:5173/\"]}");
}

static int tpl_create(wr_http_client_t *c, const char *name) {
  char body[256];

  snprintf(body, sizeof(body), "{\"name\":\"%s\",\"image\":\"bench-vite\"}",
           name);
  return call(c, "POST", "/v1/sandboxes", body) == 201 ? 0 : -1;
}

static void tpl_creates(const struct tpl_opts *o, wr_http_client_t *c) {
  double *v = xcalloc((size_t)o->runs, sizeof(double));
  double *pv = xcalloc((size_t)o->runs, sizeof(double));
  int n = 0, pn = 0;
  char name[64];

  for (int i = 0; i < o->runs; i++) {
    uint64_t t0 = wr_mono_ns();
    snprintf(name, sizeof(name), "bench-tpl-c%d", i);
    if (tpl_create(c, name) == 0 && tpl_page(c, name) == 0)
      v[n++] = ms_since(t0);
    destroy(c, name);
    snprintf(name, sizeof(name), "bench-tpl-p%d", i);
    t0 = wr_mono_ns();
    if (create(c, name) == 0 && exec_true(c, name) == 0)
      pv[pn++] = ms_since(t0);
    destroy(c, name);
  }
  if (n > 0 && pn > 0) {
    double p50 = pct(v, n, 50), p90 = pct(v, n, 90), q50 = pct(pv, pn, 50);
    printf("%-34s p50 %8.1f ms  p90 %8.1f ms   plain create + exec p50 "
           "%.1f ms, ratio %.2fx (%d runs, no pool)\n",
           "template create until page answers", p50, p90, q50, p50 / q50, n);
  }
  free(v);
  free(pv);
}

static long mem_total_kib(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  long kib = -1;

  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "MemTotal: %ld kB", &kib) == 1)
      break;
  if (f != NULL)
    fclose(f);
  return kib;
}

static double sandbox_memory(wr_http_client_t *c, const char *name) {
  char path[128];
  _cleanup_json_ json_t *j = NULL;

  snprintf(path, sizeof(path), "/v1/sandboxes/%s", name);
  j = call_json(c, "GET", path, NULL, 200);
  return json_is_integer(json_object_get(j, "memory_bytes"))
             ? (double)json_integer_value(json_object_get(j, "memory_bytes"))
             : -1;
}

/* K sandboxes with the dev server started and the page served once, then
 * paused: their cgroups' memory, and how many the host would hold. */
static void tpl_paused(const struct tpl_opts *o, wr_http_client_t *c) {
  double sum = 0, avail;
  int n = 0;
  char name[64], path[128];

  for (int i = 0; i < o->paused; i++) {
    snprintf(name, sizeof(name), "bench-tpl-z%d", i);
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/pause", name);
    if (tpl_create(c, name) < 0 || tpl_page(c, name) < 0 ||
        call(c, "POST", path, NULL) != 200)
      fprintf(stderr, "wrbench: paused sandbox %s failed\n", name);
  }
  for (int i = 0; i < o->paused; i++) {
    double m;
    snprintf(name, sizeof(name), "bench-tpl-z%d", i);
    if ((m = sandbox_memory(c, name)) > 0) {
      sum += m;
      n++;
    }
    destroy(c, name);
  }
  if (n == 0)
    return;
  avail = (double)mem_total_kib() * 1024 - o->reserve_gib * (1u << 30);
  printf("%-34s mean %8.1f MiB (cgroup memory of %d paused Vite dev "
         "servers)\n",
         "paused template sandbox, memory", sum / n / (1 << 20), n);
  printf("%-34s %8.0f         (MemTotal %.1f GiB minus %.1f GiB reserve, "
         "divided by the mean; extrapolated from %d)\n",
         "paused Vite sandboxes this host holds", avail / (sum / n),
         (double)mem_total_kib() / (1 << 20), o->reserve_gib, n);
}

/*
 * Templates (issue 13): the Vite fixture's template built cold (new
 * layer keys, npm install from the registry) and again with nothing
 * changed; a create from it until the page answers against a plain create
 * + first exec; and --paused K paused dev servers' memory.
 */
static int template_main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"socket", required_argument, NULL, 's'},
      {"cli", required_argument, NULL, 'c'},
      {"fixture", required_argument, NULL, 'f'},
      {"runs", required_argument, NULL, 'r'},
      {"paused", required_argument, NULL, 'p'},
      {"reserve-gib", required_argument, NULL, 'g'},
      {NULL, 0, NULL, 0},
  };
  struct tpl_opts o = {"/run/warren/warrend.sock",
                       "warren",
                       "tests/fixtures/vite-app",
                       10,
                       8,
                       2.0};
  char dir[] = "/tmp/wrbench-tpl-XXXXXX";
  double cold, warm;
  wr_http_client_t *c;
  int ch;

  optind = 1;
  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (ch == 's')
      o.socket = optarg;
    else if (ch == 'c')
      o.cli = optarg;
    else if (ch == 'f')
      o.fixture = optarg;
    else if (ch == 'r')
      o.runs = atoi(optarg);
    else if (ch == 'p')
      o.paused = atoi(optarg);
    else if (ch == 'g')
      o.reserve_gib = atof(optarg);
    else
      return 2;
  }
  if (o.runs < 1 || o.paused < 0)
    return 2;
  if (wr_http_client_open(o.socket, NULL, &c, NULL) < 0) {
    fprintf(stderr, "wrbench: cannot reach %s\n", o.socket);
    return 1;
  }
  call_q(c, "DELETE", "/v1/templates/bench-vite", NULL, 404);
  if (tpl_context(&o, dir) < 0) {
    fprintf(stderr, "wrbench: cannot copy the fixture %s\n", o.fixture);
    return 1;
  }
  printf("warren bench template: the Vite + React fixture (%s)\n", o.fixture);
  cold = tpl_build(&o, "bench-vite", dir);
  warm = cold < 0 ? -1 : tpl_build(&o, "bench-vite", dir);
  if (cold < 0 || warm < 0) {
    fprintf(stderr,
            "wrbench: the template build failed (try `%s image "
            "build bench-vite -f %s/Dockerfile %s`)\n",
            o.cli, dir, dir);
    return 1;
  }
  printf("%-34s %8.1f s   (cold: new layer keys, npm install from the "
         "registry)\n",
         "template build, first", cold / 1000);
  printf("%-34s %8.1f ms  (every layer cached; target <= 1 s)\n",
         "template rebuild, nothing changed", warm);
  tpl_creates(&o, c);
  tpl_paused(&o, c);
  call_q(c, "DELETE", "/v1/templates/bench-vite", NULL, 404);
  {
    char *rm[] = {"rm", "-rf", dir, NULL};
    run(rm);
  }
  wr_http_client_close(c);
  return 0;
}

/* ---- wrbench projects ---------------------------------------------------- */

/*
 * A project of a Vite template opened from each tier, for real: the time
 * of `POST /v1/projects/NAME/open` until it returns (the dev server then
 * answers: a cool open waits for the template's port, a cold one for the
 * restarted start command), p50 over the runs; the memory a warm one
 * holds, and so how many this host keeps warm; a cool snapshot's size.
 * Beside them the targets and the seed's own figures (Runtime: a wake
 * 76 ms, a start from a snapshot 440 ms; the tutorial's naive start
 * 33.4 s).
 */
struct prj_opts {
  const char *socket, *template_name;
  int runs;
};

static int prj_post(wr_http_client_t *c, const char *name, const char *verb,
                    const char *body, double *ms) {
  char path[160];
  uint64_t t0 = wr_mono_ns();
  int st;

  snprintf(path, sizeof(path), "/v1/projects/%s/%s", name, verb);
  st = call(c, "POST", path, body ? body : "{}");
  if (ms != NULL)
    *ms = ms_since(t0);
  return st == 200 ? 0 : -1;
}

static int prj_pause(wr_http_client_t *c, const char *name) {
  char path[160];

  snprintf(path, sizeof(path), "/v1/sandboxes/project-%s/pause", name);
  return call(c, "POST", path, NULL) == 200 ? 0 : -1;
}

static long prj_number(wr_http_client_t *c, const char *path,
                       const char *field) {
  _cleanup_json_ json_t *j = call_json(c, "GET", path, NULL, 200);

  return j ? (long)json_integer_value(json_object_get(j, field)) : -1;
}

/* One project through every tier: its open times in w, o, d, and what
 * it holds warm (bytes) and cool (snapshot bytes). */
static int prj_round(const struct prj_opts *o, wr_http_client_t *c, int i,
                     double *first, double *warm, double *cool, double *cold,
                     long *mem, long *snap) {
  char name[64], body[256], path[160];
  _cleanup_json_ json_t *p = NULL;

  snprintf(name, sizeof(name), "bench-p%d", i);
  snprintf(body, sizeof(body), "{\"name\":\"%s\",\"template\":\"%s\"}", name,
           o->template_name);
  if (call(c, "POST", "/v1/projects", body) != 201 ||
      prj_post(c, name, "open", NULL, first) < 0)
    return -1;
  snprintf(path, sizeof(path), "project-%s", name);
  if (exec_ok(c, path,
              "cd /app && sed -i 's|<title>|<title>edited |' index.html") < 0 ||
      prj_post(c, name, "commit", "{\"message\":\"edit\"}", NULL) < 0 ||
      prj_pause(c, name) < 0)
    return -1;
  snprintf(path, sizeof(path), "/v1/sandboxes/project-%s", name);
  *mem = prj_number(c, path, "memory_bytes");
  if (prj_post(c, name, "open", NULL, warm) < 0 || prj_pause(c, name) < 0 ||
      prj_post(c, name, "demote", NULL, NULL) < 0)
    return -1;
  snprintf(path, sizeof(path), "/v1/snapshots/project-%s-1", name);
  *snap = prj_number(c, path, "size_bytes");
  if (prj_post(c, name, "open", NULL, cool) < 0 ||
      prj_post(c, name, "demote", "{\"to\":\"cold\"}", NULL) < 0 ||
      prj_post(c, name, "open", NULL, cold) < 0)
    return -1;
  snprintf(path, sizeof(path), "project-%s", name);
  return tpl_page(c, path);
}

static int projects_main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"socket", required_argument, NULL, 's'},
      {"template", required_argument, NULL, 't'},
      {"runs", required_argument, NULL, 'r'},
      {NULL, 0, NULL, 0},
  };
  struct prj_opts o = {"/run/warren/warrend.sock", "bench-vite", 5};
  struct opts co = {0};
  double *first, *warm, *cool, *cold;
  long mem = 0, snap = 0, m, sn;
  wr_http_client_t *c;
  int ch, n = 0;

  optind = 1;
  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (ch == 's')
      o.socket = optarg;
    else if (ch == 't')
      o.template_name = optarg;
    else if (ch == 'r')
      o.runs = atoi(optarg) > 0 ? atoi(optarg) : 1;
    else
      return 2;
  }
  co.socket = o.socket;
  c = connect_daemon(&co);
  first = xcalloc((size_t)o.runs, sizeof(double));
  warm = xcalloc((size_t)o.runs, sizeof(double));
  cool = xcalloc((size_t)o.runs, sizeof(double));
  cold = xcalloc((size_t)o.runs, sizeof(double));
  for (int i = 0; i < o.runs; i++) {
    char path[96];
    if (prj_round(&o, c, i, &first[n], &warm[n], &cool[n], &cold[n], &m, &sn) ==
        0) {
      mem += m;
      snap += sn;
      n++;
    } else {
      fprintf(stderr, "wrbench: project round %d failed\n", i);
    }
    snprintf(path, sizeof(path), "/v1/projects/bench-p%d", i);
    call_q(c, "DELETE", path, NULL, 404);
  }
  if (n == 0)
    return 1;
  printf("projects of template %s, %d runs, open until it answers (p50):\n",
         o.template_name, n);
  printf("  %-30s %9.1f ms  (Runtime wakes in 76 ms; target <= 20 ms)\n",
         "open from warm", pct(warm, n, 50));
  printf("  %-30s %9.1f ms  (Runtime starts from a snapshot in 440 ms; "
         "target <= 1 s)\n",
         "open from cool", pct(cool, n, 50));
  printf("  %-30s %9.1f ms  (the tutorial's naive start 33.4 s, %.0fx; "
         "target <= 15 s)\n",
         "open from cold", pct(cold, n, 50), 33400 / pct(cold, n, 50));
  printf("  %-30s %9.1f ms  (template + first commit)\n",
         "new project's "
         "first open",
         pct(first, n, 50));
  printf("  %-30s %9.1f MiB (the seed assumes 1.5 GB held)\n",
         "a warm project holds", mem / (double)n / 1048576);
  printf("  %-30s %9ld     (MemAvailable %.1f GiB / that, 2 GiB kept)\n",
         "warm projects this host holds",
         mem > 0 ? (long)((mem_available_kib() / 1048576.0 - 2) * 1073741824.0 /
                          (mem / (double)n))
                 : 0,
         mem_available_kib() / 1048576.0);
  printf("  %-30s %9.1f MiB (the seed assumes 0.6 GB)\n",
         "a cool project's snapshot", snap / (double)n / 1048576);
  free(first);
  free(warm);
  free(cool);
  free(cold);
  wr_http_client_close(c);
  return 0;
}

int main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"socket", required_argument, NULL, 's'},
      {"image", required_argument, NULL, 'i'},
      {"runs", required_argument, NULL, 'r'},
      {"mass", required_argument, NULL, 'm'},
      {"ws-files", required_argument, NULL, 'w'},
      {"cli", required_argument, NULL, 'c'},
      {NULL, 0, NULL, 0},
  };
  struct opts o = {"/run/warren/warrend.sock",
                   "/var/lib/warren/images/base/rootfs",
                   NULL,
                   30,
                   200,
                   5000};
  wr_http_client_t *c;
  int ch;

  if (argc > 1 && strcmp(argv[1], "net") == 0)
    return net_main(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "snapshot") == 0)
    return snapshot_main(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "wake") == 0)
    return wake_main(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "pool") == 0)
    return pool_main(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "evict") == 0)
    return evict_main(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "template") == 0)
    return template_main(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "projects") == 0)
    return projects_main(argc - 1, argv + 1);

  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    switch (ch) {
    case 's':
      o.socket = optarg;
      break;
    case 'i':
      o.image = optarg;
      break;
    case 'r':
      o.runs = atoi(optarg);
      break;
    case 'm':
      o.mass = atoi(optarg);
      break;
    case 'w':
      o.ws_files = atoi(optarg);
      break;
    case 'c':
      o.cli = optarg;
      break;
    default:
      return 2;
    }
  }
  if (o.runs < 1 || o.mass < 1 || o.ws_files < 0)
    return 2;
  c = connect_daemon(&o);
  printf("warren bench: %d runs, %d sandboxes for the mass test\n", o.runs,
         o.mass);
  bench_first_exec(&o, c, "create + first exec of true", "bench-ce",
                   api_create_exec);
  if (o.cli != NULL)
    bench_first_exec(&o, c, "CLI create + exec true", "bench-cli",
                     cli_create_exec);
  bench_workspace(&o, c);
  bench_exec(&o, c);
  bench_memory(&o, c);
  bench_mass(&o, c);
  wr_http_client_close(c);
  return 0;
}
