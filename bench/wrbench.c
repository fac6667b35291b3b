/*
 * wrbench: measures warren against peers in the same run and prints the
 * figures DESIGN.md sets targets for.
 *
 *   wrbench [--socket PATH] [--image DIR] [--runs N] [--mass N]
 *
 * - create + first exec of `true` (API round trips, as a client sees them)
 *   vs `bwrap --unshare-all ... true` on the same image;
 * - exec round trip in a running sandbox vs a host fork+exec of `true`;
 * - host memory per idle sandbox (MemAvailable before and after);
 * - creating N sandboxes one after another, then removing them.
 *
 * It talks to a running warrend over its unix socket with the project's
 * own HTTP client, and runs bwrap itself.
 */
#include <getopt.h>
#include <math.h>
#include <spawn.h>
#include <sys/wait.h>

#include "api/api.h"

extern char **environ;

struct opts {
  const char *socket;
  const char *image;
  int runs;
  int mass;
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

/* Exec `true` and read the NDJSON stream to its end. */
static int exec_true(wr_http_client_t *c, const char *name) {
  static const char body[] = "{\"cmd\":[\"true\"]}";
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

static int call(wr_http_client_t *c, const char *method, const char *path,
                const char *body) {
  return call_q(c, method, path, body, 0);
}

static int create(wr_http_client_t *c, const char *name) {
  char body[256];

  snprintf(body, sizeof(body), "{\"name\":\"%s\"}", name);
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

static void bench_create_exec(const struct opts *o, wr_http_client_t *c) {
  double *v = xcalloc((size_t)o->runs, sizeof(double));
  double *pv = xcalloc((size_t)o->runs, sizeof(double));
  char *bw[] = {"bwrap", "--unshare-all", "--ro-bind", (char *)o->image,
                "/",     "--proc",        "/proc",     "--dev",
                "/dev",  "true",          NULL};
  int n = 0, pn = 0;

  for (int i = 0; i < o->runs; i++) {
    char name[32];
    uint64_t t0;
    snprintf(name, sizeof(name), "bench-ce-%d", i);
    destroy(c, name);
    t0 = wr_mono_ns();
    if (create(c, name) == 0 && exec_true(c, name) == 0)
      v[n++] = ms_since(t0);
    destroy(c, name);
    t0 = wr_mono_ns();
    if (run(bw) == 0)
      pv[pn++] = ms_since(t0);
  }
  if (n > 0)
    report("create + first exec of true", v, n, "bwrap", pn ? pv : NULL, pn);
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

int main(int argc, char **argv) {
  static const struct option lopts[] = {
      {"socket", required_argument, NULL, 's'},
      {"image", required_argument, NULL, 'i'},
      {"runs", required_argument, NULL, 'r'},
      {"mass", required_argument, NULL, 'm'},
      {NULL, 0, NULL, 0},
  };
  struct opts o = {"/run/warren/warrend.sock",
                   "/var/lib/warren/images/base/rootfs", 30, 200};
  wr_http_client_t *c;
  int ch;

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
    default:
      return 2;
    }
  }
  if (o.runs < 1 || o.mass < 1)
    return 2;
  c = connect_daemon(&o);
  printf("warren bench: %d runs, %d sandboxes for the mass test\n", o.runs,
         o.mass);
  bench_create_exec(&o, c);
  bench_exec(&o, c);
  bench_memory(&o, c);
  bench_mass(&o, c);
  wr_http_client_close(c);
  return 0;
}
