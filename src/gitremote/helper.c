/*
 * The remote helper protocol (gitremote-helpers(7)) for `warren::NAME`:
 * `capabilities`, `option`, `list` and batches of `fetch`.
 *
 * `list` has the sandbox write a bundle of its clone's branches, tags and
 * HEAD into a fresh directory under its /tmp, downloads it through the
 * files API into an unnamed file on the host (O_TMPFILE, so nothing is
 * left behind whatever happens), removes it inside, and prints the refs
 * its header lists. `fetch` feeds the pack part to the host's
 * `git index-pack --strict` with its memory and time bounded (bounded.c),
 * in a quarantine object directory (quarantine.c), has git list the sizes
 * of the objects it took there, refuses them over the limits of the
 * repository's git config (limits.c), and only then moves the pack's
 * files into the repository; it reports the pack's .keep file so that
 * git drops it once the refs are updated. warren.fetchTimeout bounds all
 * of it, the sandbox's side (making the bundle, the download) too. Then
 * it marks, inside the sandbox, each fetched branch as
 * refs/warren/fetched/BRANCH, which `warren rm` reads to warn about
 * commits that never left. That bookkeeping lives in the sandbox, so a
 * program there could forge it: it only ever drives a
 * warning.
 */
#include "gitremote/gitremote.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

/* What the sandbox's answer to the bundle script may be. */
#define BUNDLE_ANSWER_MAX 4096
#define COMMAND_MAX 4096

struct helper {
  struct wr_cli_ctx ctx;
  char *name; /* the sandbox */
  struct wr_cli_clone_info info;
  char *head;   /* the branch HEAD names ("refs/heads/x"), or NULL */
  int bundle;   /* the downloaded bundle (unnamed file), or -1 */
  bool started; /* we started the sandbox: stop it again at the end */
  struct wr_bundle_header header;
  int verbosity;
  struct wr_fetch_limits limits; /* read at `list` */
  uint64_t deadline;             /* wr_mono_ns(): the fetch's end */
};

/* Recording the fetch inside may take this long, even past the deadline
 * (an honest sandbox takes milliseconds; it only drives a warning). */
#define MARK_TIMEOUT_MS 10000

/* ---- limits, and what to say when one is passed -------------------------- */

/* A limit that stopped the fetch: what passed it, the limit and how to
 * raise it, should the user trust the sandbox with more. */
static int over_limit(wr_error_t *err, const char *what, const char *key,
                      const char *limit, const char *raise_key,
                      const char *example) {
  return wr_error_set(err, 0,
                      "%s %s (%s); nothing was fetched. To allow more: "
                      "git config %s %s",
                      what, key, limit, raise_key, example);
}

/* A value for `git config` of at least `bytes`: a power of two. */
static void suggest_size(uint64_t bytes, char *out, size_t size) {
  uint64_t v = 1ull << 20;

  while (v < bytes && v < (1ull << 50))
    v *= 2;
  if (v >= (1ull << 30))
    snprintf(out, size, "%llug", (unsigned long long)(v >> 30));
  else
    snprintf(out, size, "%llum", (unsigned long long)(v >> 20));
}

static void format_secs(uint64_t ms, char *out, size_t size) {
  snprintf(out, size, "%llu s", (unsigned long long)(ms / 1000));
}

/* `what` went on past warren.fetchTimeout: suggest four times as long. */
static int over_time(const struct helper *h, const char *what,
                     wr_error_t *err) {
  char limit[32], example[32];
  uint64_t mins = (4 * h->limits.timeout_ms + 59999) / 60000;

  format_secs(h->limits.timeout_ms, limit, sizeof(limit));
  snprintf(example, sizeof(example), "%llum", (unsigned long long)mins);
  return over_limit(err, what, "warren.fetchTimeout", limit,
                    "warren.fetchTimeout", example);
}

/* "DOING ... sandbox `NAME` took longer than", for over_time. */
static int over_time_doing(const struct helper *h, const char *doing,
                           const char *from, wr_error_t *err) {
  char what[256];

  snprintf(what, sizeof(what), "%s %s sandbox `%s` took longer than", doing,
           from, h->name);
  return over_time(h, what, err);
}

/* The time left of the fetch, in ms: at least 1 (0 is "no limit"). */
static uint64_t time_left_ms(const struct helper *h) {
  uint64_t now = wr_mono_ns();

  return h->deadline > now ? (h->deadline - now) / 1000000 + 1 : 1;
}

/* ---- the sandbox --------------------------------------------------------- */

/* A clone-mode sandbox that runs, or a message that says what to do. A
 * stopped one is started for the fetch (it takes milliseconds) and
 * stopped again when git is done with us, as `warren rm` does; a paused
 * one is woken by the fetch's first request, as any request wakes it
 * (docs/lifecycle.md), and then runs on. */
/*
 * A project's sandbox (src/projects/) is not in clone mode: its
 * repository is where its label warren.repo says, an absolute path
 * inside. The label is the sandbox owner's to set, and says only where
 * to make the bundle: what comes out is checked as any bundle is.
 */
static int project_repo(struct helper *h, wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(h->name, NULL);
  _cleanup_json_ json_t *sb = NULL;
  const char *repo;

  if (wr_cli_call(&h->ctx, "GET", path, NULL, &sb, NULL, err) < 0)
    return -1;
  repo = wr_cli_jstr(json_object_get(sb, "labels"), "warren.repo");
  if (repo[0] != '/' || wr_path_check(repo, NULL) < 0)
    return wr_error_set(err, 0,
                        "sandbox `%s` is not in clone mode and is no "
                        "project's: there is no repository to fetch from",
                        h->name);
  h->info.state = xstrdup(wr_cli_jstr(sb, "state"));
  h->info.mount = xstrdup(repo);
  return 0;
}

static int check_sandbox(struct helper *h, wr_error_t *err) {
  const char *n = h->name;
  bool clone;

  if (wr_cli_clone_info(&h->ctx, n, &h->info, &clone, err) < 0)
    return -1;
  if (!clone && project_repo(h, err) < 0)
    return -1;
  if (strcmp(h->info.state, "stopped") == 0) {
    if (wr_cli_sandbox_post(&h->ctx, h->name, "/start", NULL, err) < 0)
      return wr_error_wrap(err, "start sandbox `%s` for the fetch", n);
    h->started = true;
    return 0;
  }
  if (strcmp(h->info.state, "running") != 0 &&
      strcmp(h->info.state, "paused") != 0)
    return wr_error_set(err, 0, "sandbox `%s` is %s, not running", n,
                        h->info.state);
  return 0;
}

/*
 * Inside: a full bundle of the clone's branches and tags, and HEAD when it
 * names a commit, in a directory of its own. Prints the bundle's path and
 * the branch HEAD names (empty when detached).
 */
static const char bundle_script[] = WR_CLI_GIT_ENV_SH
    "cd \"$1\" 2>/dev/null || exit 3\n"
    "git rev-parse --git-dir >/dev/null 2>&1 || exit 3\n"
    "[ -n \"$(git for-each-ref --count=1 --format=x refs/heads/ refs/tags/)\" ]"
    " || exit 4\n"
    "set -- --branches --tags\n"
    "git rev-parse -q --verify 'HEAD^{commit}' >/dev/null && set -- \"$@\" "
    "HEAD\n"
    "d=$(mktemp -d /tmp/warren-bundle.XXXXXXXX) || exit 1\n"
    "git bundle create -q \"$d/bundle\" \"$@\" || { rm -rf \"$d\"; exit 1; }\n"
    "printf '%s\\n' \"$d/bundle\"\n"
    "git symbolic-ref -q HEAD || echo\n";

/* "/tmp/warren-bundle.XXXXXXXX/bundle", exactly what mktemp makes. */
static bool bundle_path_valid(const char *p) {
  static const char prefix[] = "/tmp/warren-bundle.";
  const char *x = p + sizeof(prefix) - 1;

  if (strncmp(p, prefix, sizeof(prefix) - 1) != 0 || strlen(x) != 8 + 7)
    return false;
  for (int i = 0; i < 8; i++)
    if (!((x[i] >= 'a' && x[i] <= 'z') || (x[i] >= 'A' && x[i] <= 'Z') ||
          (x[i] >= '0' && x[i] <= '9')))
      return false;
  return strcmp(x + 8, "/bundle") == 0;
}

/* The script's two lines: the bundle's path and HEAD's branch. */
static int parse_answer(struct helper *h, wr_buf_t *out, char **path,
                        wr_error_t *err) {
  char *nl = out->data ? memchr(out->data, '\n', out->len) : NULL;
  char *head;

  if (nl == NULL || memchr(out->data, '\0', out->len) != NULL)
    return wr_error_set(err, 0, "unexpected answer from sandbox `%s`", h->name);
  *nl = '\0';
  if (!bundle_path_valid(out->data))
    return wr_error_set(err, 0, "unexpected bundle path from sandbox `%s`",
                        h->name);
  *path = xstrdup(out->data);
  head = nl + 1;
  head[strcspn(head, "\n")] = '\0';
  if (wr_str_has_prefix(head, "refs/heads/") && wr_cli_git_refname_valid(head))
    h->head = xstrdup(head);
  return 0;
}

static int make_bundle(struct helper *h, char **path, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  _cleanup_free_ char *text = NULL;
  char *argv[] = {"sh", "-c", (char *)bundle_script, "sh", h->info.mount, NULL};
  struct wr_cli_run_in r = {.argv = argv,
                            .cwd = "/",
                            .timeout_ms = time_left_ms(h),
                            .out = &out,
                            .max_out = BUNDLE_ANSWER_MAX,
                            .errout = &errout};

  if (wr_cli_run_in(&h->ctx, h->name, &r, err) < 0)
    return -1;
  if (r.timed_out)
    return over_time_doing(h, "making the bundle", "in", err);
  if (r.exit_code == 3)
    return wr_error_set(err, 0, "%s in sandbox `%s` is not a git repository",
                        h->info.mount, h->name);
  if (r.exit_code == 4)
    return wr_error_set(err, 0, "%s in sandbox `%s` has no branch or tag",
                        h->info.mount, h->name);
  if (r.exit_code != 0) {
    text = wr_cli_said(&errout);
    return wr_error_set(err, 0,
                        "making a bundle in sandbox `%s` failed (exit %d)%s%s",
                        h->name, r.exit_code, text[0] ? ": " : "", text);
  }
  return parse_answer(h, &out, path, err);
}

/* ---- the download -------------------------------------------------------- */

/* An unnamed file in $TMPDIR (else /tmp), readable only by us. */
static int temp_file(wr_error_t *err) {
  const char *dir = getenv("TMPDIR");
  _cleanup_free_ char *tmpl = NULL;
  int fd;

  if (dir == NULL || dir[0] != '/')
    dir = "/tmp";
  fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0)
    return fd;
  tmpl = xasprintf("%s/warren-bundle-XXXXXX", dir);
  fd = mkostemp(tmpl, O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "create a file in `%s`", dir);
  unlink(tmpl);
  return fd;
}

/* Copy the body to fd, refusing more than WR_BUNDLE_MAX bytes. */
static int body_to_file(wr_http_client_t *c, int fd, wr_error_t *err) {
  char buf[65536];
  uint64_t total = 0;
  ssize_t n;

  while ((n = wr_http_read_body(c, buf, sizeof(buf), err)) > 0) {
    total += (uint64_t)n;
    if (total > WR_BUNDLE_MAX)
      return wr_error_set(err, 0,
                          "the bundle is larger than %llu MiB, the most "
                          "warren fetches",
                          WR_BUNDLE_MAX >> 20);
    if (wr_write_all(fd, buf, (size_t)n, err) < 0)
      return wr_error_wrap(err, "write the bundle");
  }
  return n < 0 ? wr_error_wrap(err, "read the bundle from warrend") : 0;
}

static int download(struct helper *h, const char *path, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *esc = wr_cli_escape(path);
  _cleanup_free_ char *suffix = xasprintf("/files?path=%s", esc);
  _cleanup_free_ char *url = wr_cli_sandbox_path(h->name, suffix);
  _cleanup_close_ int fd = -1;

  if (wr_cli_connect(&h->ctx, &c, err) < 0)
    return -1;
  wr_http_client_set_deadline(c, h->deadline);
  if (wr_http_request_stream(c, "GET", url, NULL, NULL, 0, &resp, err) < 0 ||
      (resp.status != 200 && wr_cli_stream_error(c, &resp, err) < 0) ||
      (fd = temp_file(err)) < 0 || body_to_file(c, fd, err) < 0) {
    if (err->code == ETIMEDOUT && wr_mono_ns() >= h->deadline)
      return over_time_doing(h, "downloading the bundle", "from", err);
    return -1;
  }
  h->bundle = steal_fd(&fd);
  return 0;
}

/* The directory the bundle was made in goes, whatever happened. */
static void remove_inside(struct helper *h, const char *path) {
  _cleanup_free_ char *dir = xstrndup(path, strlen(path) - strlen("/bundle"));
  _cleanup_free_ char *esc = wr_cli_escape(dir);
  _cleanup_free_ char *suffix = xasprintf("/files?path=%s&recursive=true", esc);
  _cleanup_free_ char *url = wr_cli_sandbox_path(h->name, suffix);
  wr_error_t err = {0};

  if (wr_cli_call(&h->ctx, "DELETE", url, NULL, NULL, NULL, &err) < 0)
    wr_cli_fail(0, "could not remove %s in sandbox `%s`: %s", dir, h->name,
                err.msg);
}

/* Read the header: grow the read until its end ("\n\n") is in, up to
 * the most a header may be (and the pack's signature after it). */
static int read_header(struct helper *h, wr_error_t *err) {
  const size_t most = WR_BUNDLE_HEADER_MAX + 4;
  _cleanup_free_ char *buf = NULL;
  size_t want = 65536, have = 0;
  const char *end;
  ssize_t n;

  for (;;) {
    buf = xrealloc(buf, want);
    while (have < want &&
           (n = pread(h->bundle, buf + have, want - have, (off_t)have)) > 0)
      have += (size_t)n;
    end = memmem(buf, have, "\n\n", 2);
    if ((end != NULL && (size_t)(end - buf) + 6 <= have) || have < want ||
        want >= most)
      break;
    want = WR_MIN(want * 4, most);
  }
  if (wr_bundle_header_parse(buf, have, &h->header, err) < 0)
    return wr_error_wrap(err, "bundle from sandbox `%s`", h->name);
  return 0;
}

/* ---- list ---------------------------------------------------------------- */

/* Refs, then HEAD: as a symref when it names a listed branch. */
static void print_refs(const struct helper *h) {
  const struct wr_bundle_ref *head = wr_bundle_find(&h->header, "HEAD");

  for (size_t i = 0; i < h->header.nrefs; i++)
    if (strcmp(h->header.refs[i].name, "HEAD") != 0)
      printf("%s %s\n", h->header.refs[i].oid, h->header.refs[i].name);
  if (h->head != NULL && wr_bundle_find(&h->header, h->head) != NULL)
    printf("@%s HEAD\n", h->head);
  else if (head != NULL)
    printf("%s HEAD\n", head->oid);
  printf("\n");
}

static int cmd_list(struct helper *h, wr_error_t *err) {
  _cleanup_free_ char *path = NULL;
  int r;

  if (h->bundle >= 0)
    return wr_error_set(err, 0, "`list` was asked twice");
  if (wr_fetch_limits_read(&h->limits, err) < 0)
    return -1;
  h->deadline = wr_mono_ns() + h->limits.timeout_ms * 1000000ull;
  if (check_sandbox(h, err) < 0 || make_bundle(h, &path, err) < 0)
    return -1;
  r = download(h, path, err);
  remove_inside(h, path);
  if (r < 0 || read_header(h, err) < 0)
    return -1;
  if (h->verbosity > 1)
    fprintf(stderr, "warren: sandbox `%s` offers %zu refs\n", h->name,
            h->header.nrefs);
  print_refs(h);
  return 0;
}

/* ---- fetch --------------------------------------------------------------- */

/* One "fetch OID NAME" line, checked against the list we gave. */
static int fetch_line(const struct helper *h, const char *line,
                      char ***branches, wr_error_t *err) {
  const char *sp = strchr(line, ' ');
  const struct wr_bundle_ref *ref;
  _cleanup_free_ char *oid = NULL;

  if (sp == NULL)
    return wr_error_set(err, 0, "malformed fetch command");
  oid = xstrndup(line, (size_t)(sp - line));
  ref = wr_bundle_find(&h->header, sp + 1);
  if (ref == NULL || strcmp(ref->oid, oid) != 0)
    return wr_error_set(err, 0, "git asked for `%s`, which was not listed",
                        sp + 1);
  if (wr_str_has_prefix(ref->name, "refs/heads/")) {
    *branches = wr_strv_push(*branches, ref->name + strlen("refs/heads/"));
    *branches = wr_strv_push(*branches, ref->oid);
  }
  return 0;
}

/* ---- the pack, bounded --------------------------------------------------- */

/* What git said, defused, on our stderr. */
static void pass_on(const wr_buf_t *errout) {
  _cleanup_(wr_buf_free) wr_buf_t safe = {0};

  if (errout->len == 0)
    return;
  wr_cli_defuse(errout->data, errout->len, &safe);
  fwrite(safe.data, 1, safe.len, stderr);
}

/* `git` (index-pack, cat-file) was stopped at warren.maxMemory. The
 * default follows warren.maxObjectSize, so that is what to raise then. */
static int over_memory(const struct helper *h, const char *git,
                       wr_error_t *err) {
  const struct wr_fetch_limits *l = &h->limits;
  char what[256], limit[96], example[32];
  size_t n;

  snprintf(what, sizeof(what),
           "%s needed more memory for the pack from sandbox `%s` than", git,
           h->name);
  wr_format_size(l->max_memory, limit, sizeof(limit));
  if (l->memory_set) {
    suggest_size(4 * l->max_memory, example, sizeof(example));
    return over_limit(err, what, "warren.maxMemory", limit, "warren.maxMemory",
                      example);
  }
  n = strlen(limit);
  snprintf(limit + n, sizeof(limit) - n,
           ", from warren.maxObjectSize: twice it and 256 MiB");
  suggest_size(4 * l->max_object, example, sizeof(example));
  return over_limit(err, what, "warren.maxMemory", limit,
                    "warren.maxObjectSize", example);
}

/* How a bounded git ended, as an error naming the limit when one
 * stopped it. */
static int git_status(const struct helper *h, const char *git,
                      const struct wr_bounded_exit *ex, const wr_buf_t *errout,
                      wr_error_t *err) {
  _cleanup_free_ char *said = NULL;
  char doing[64];

  if (ex->timed_out) {
    snprintf(doing, sizeof(doing), "%s on the pack", git);
    return over_time_doing(h, doing, "from", err);
  }
  if (ex->out_of_memory)
    return over_memory(h, git, err);
  if (ex->status == 0)
    return 0;
  said = errout != NULL ? wr_cli_said(errout) : xstrdup("");
  return wr_error_set(err, 0,
                      "%s refused the pack from sandbox `%s` (exit %d)%s%s",
                      git, h->name, ex->status, said[0] ? ": " : "", said);
}

/*
 * The pack, from after the header, into the quarantine with every object
 * checked (`--strict`: hashes, fsck rules, links, against the
 * repository's objects too), with a .keep file that holds it until git
 * has updated its refs. stdout says "keep\tHASH". An object git cannot
 * allocate within warren.maxMemory stops it here.
 */
static int index_pack(const struct helper *h, const struct wr_quarantine *q,
                      char **hash, wr_error_t *err) {
  _cleanup_free_ char *max = xasprintf("--max-input-size=%llu", WR_BUNDLE_MAX);
  char *argv[] = {
      "git", "index-pack", "--stdin", "--strict", "--keep=git-remote-warren",
      max,   NULL};
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  struct wr_bounded_cmd cmd = {.argv = argv,
                               .env = q->env,
                               .stdin_fd = h->bundle,
                               .out = &out,
                               .max_out = 4096,
                               .errout = &errout,
                               .max_memory = h->limits.max_memory,
                               .deadline_ns = h->deadline};
  struct wr_bounded_exit ex;

  if (lseek(h->bundle, (off_t)h->header.pack_offset, SEEK_SET) < 0)
    return wr_error_set(err, errno, "seek in the bundle");
  if (wr_bounded_run(&cmd, &ex, err) < 0)
    return -1;
  if (h->verbosity > 1)
    fprintf(stderr, "warren: git index-pack ran %s\n",
            ex.cgroup ? "in a memory cgroup of its own"
                      : "under rlimits (no cgroup could be made)");
  if (git_status(h, "git index-pack", &ex, &errout, err) < 0)
    return -1;
  pass_on(&errout);
  if (out.data == NULL || !wr_str_has_prefix(out.data, "keep\t"))
    return wr_error_set(err, 0, "unexpected output from git index-pack");
  out.data[strcspn(out.data, "\n")] = '\0';
  *hash = xstrdup(out.data + 5);
  return 0;
}

/* What the objects index-pack took expand to, as git lists them in the
 * quarantine: refused over warren.maxObjectSize or warren.maxTotalSize. */
static int check_sizes(const struct helper *h, const struct wr_quarantine *q,
                       wr_error_t *err) {
  const struct wr_fetch_limits *l = &h->limits;
  struct wr_object_sizes s;
  struct wr_bounded_exit ex;
  char what[256], size[32], limit[32], example[32];

  if (wr_quarantine_measure(q, l->max_memory, h->deadline, &s, &ex, err) < 0 ||
      git_status(h, "git cat-file", &ex, NULL, err) < 0)
    return -1;
  if (h->verbosity > 1) {
    wr_format_size(s.total, what, sizeof(what));
    wr_format_size(s.largest, size, sizeof(size));
    fprintf(stderr,
            "warren: the pack holds %llu objects, %s expanded, the largest "
            "%s\n",
            (unsigned long long)s.objects, what, size);
  }
  if (s.largest > l->max_object) {
    wr_format_size(s.largest, size, sizeof(size));
    wr_format_size(l->max_object, limit, sizeof(limit));
    suggest_size(s.largest, example, sizeof(example));
    snprintf(what, sizeof(what),
             "the pack from sandbox `%s` holds an object of %s, more than",
             h->name, size);
    return over_limit(err, what, "warren.maxObjectSize", limit,
                      "warren.maxObjectSize", example);
  }
  if (s.total > l->max_total) {
    wr_format_size(s.total, size, sizeof(size));
    wr_format_size(l->max_total, limit, sizeof(limit));
    suggest_size(s.total, example, sizeof(example));
    snprintf(what, sizeof(what),
             "the objects in the pack from sandbox `%s` expand to %s, more "
             "than",
             h->name, size);
    return over_limit(err, what, "warren.maxTotalSize", limit,
                      "warren.maxTotalSize", example);
  }
  return 0;
}

/*
 * The whole of a fetch's work on the host, within the limits read at
 * `list` and before its deadline: index-pack into a quarantine, git's
 * list of what the objects there expand to, then the pack's files into
 * the repository. *lock is the .keep git is to remove once it has
 * updated its refs (NULL: none of ours).
 */
static int take_pack(const struct helper *h, char **lock, wr_error_t *err) {
  _cleanup_(wr_quarantine_remove) struct wr_quarantine q = {0};
  _cleanup_free_ char *hash = NULL;

  if (wr_quarantine_make(&q, err) < 0 || index_pack(h, &q, &hash, err) < 0 ||
      check_sizes(h, &q, err) < 0)
    return -1;
  return wr_quarantine_commit(&q, hash, lock, err);
}

/* Inside: refs/warren/fetched/BRANCH for each (BRANCH, OID) pair. */
static const char mark_script[] = WR_CLI_GIT_ENV_SH
    "cd \"$1\" || exit 1\n"
    "shift\n"
    "while [ $# -ge 2 ]; do\n"
    "  git update-ref \"refs/warren/fetched/$1\" \"$2\" || exit 1\n"
    "  shift 2\n"
    "done\n";

/* Only a warning can come of it: the fetch itself has succeeded. */
static void mark_fetched(struct helper *h, char **pairs) {
  _cleanup_strv_ char **argv = NULL;
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  struct wr_cli_run_in r = {.cwd = "/",
                            .timeout_ms =
                                WR_MAX(time_left_ms(h), MARK_TIMEOUT_MS),
                            .errout = &errout};
  wr_error_t err = {0};

  if (pairs == NULL)
    return;
  argv = wr_strv_push(argv, "sh");
  argv = wr_strv_push(argv, "-c");
  argv = wr_strv_push(argv, mark_script);
  argv = wr_strv_push(argv, "sh");
  argv = wr_strv_push(argv, h->info.mount);
  for (size_t i = 0; pairs[i] != NULL; i++)
    argv = wr_strv_push(argv, pairs[i]);
  r.argv = argv;
  if (wr_cli_run_in(&h->ctx, h->name, &r, &err) == 0) {
    _cleanup_free_ char *text = wr_cli_said(&errout);
    if (r.exit_code == 0 && !r.timed_out)
      return;
    if (r.timed_out)
      wr_error_set(&err, 0, "it took longer than warren.fetchTimeout");
    else
      wr_error_set(&err, 0, "exit %d%s%s", r.exit_code, text[0] ? ": " : "",
                   text);
  }
  wr_cli_fail(0,
              "warning: could not record the fetch in sandbox `%s` (%s); "
              "`warren rm` may call these commits unfetched",
              h->name, err.msg);
}

/* A batch of fetch lines (the first one given) up to a blank line. */
static int cmd_fetch(struct helper *h, const char *first, wr_error_t *err) {
  _cleanup_strv_ char **pairs = NULL;
  _cleanup_free_ char *line = NULL;
  _cleanup_free_ char *lock = NULL;
  size_t cap = 0;
  ssize_t n;

  if (h->bundle < 0)
    return wr_error_set(err, 0, "`fetch` before `list`");
  if (fetch_line(h, first, &pairs, err) < 0)
    return -1;
  while ((n = getline(&line, &cap, stdin)) > 0 && line[0] != '\n') {
    line[strcspn(line, "\n")] = '\0';
    if (!wr_str_has_prefix(line, "fetch ") || (size_t)n > COMMAND_MAX)
      return wr_error_set(err, 0, "unexpected command in a fetch batch");
    if (fetch_line(h, line + 6, &pairs, err) < 0)
      return -1;
  }
  if (take_pack(h, &lock, err) < 0)
    return -1;
  mark_fetched(h, pairs);
  if (lock != NULL)
    printf("lock %s\n", lock);
  printf("\n");
  return 0;
}

/* ---- the protocol -------------------------------------------------------- */

/* `option NAME VALUE`: verbosity (-v says how many refs the sandbox
 * offers) and progress (there is none to show); the rest is
 * unsupported. */
static void cmd_option(struct helper *h, const char *arg) {
  if (wr_str_has_prefix(arg, "verbosity ")) {
    h->verbosity = atoi(arg + 10);
    printf("ok\n");
  } else if (wr_str_has_prefix(arg, "progress ")) {
    printf("ok\n");
  } else {
    printf("unsupported\n");
  }
}

/* One command; 1 at the end of the conversation. */
static int command(struct helper *h, const char *line, wr_error_t *err) {
  if (line[0] == '\0')
    return 1;
  if (strcmp(line, "capabilities") == 0)
    printf("fetch\noption\n\n");
  else if (wr_str_has_prefix(line, "option "))
    cmd_option(h, line + 7);
  else if (strcmp(line, "list") == 0)
    return cmd_list(h, err);
  else if (wr_str_has_prefix(line, "fetch "))
    return cmd_fetch(h, line + 6, err);
  else
    return wr_error_set(err, 0, "unknown command `%.64s` from git", line);
  return 0;
}

static int converse(struct helper *h, wr_error_t *err) {
  _cleanup_free_ char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int r;

  while ((n = getline(&line, &cap, stdin)) > 0) {
    if ((size_t)n > COMMAND_MAX)
      return wr_error_set(err, 0, "a command from git is too long");
    line[strcspn(line, "\n")] = '\0';
    r = command(h, line, err);
    if (fflush(stdout) != 0)
      return wr_error_set(err, errno, "write to git");
    if (r != 0)
      return r < 0 ? -1 : 0;
  }
  return 0;
}

char *wr_gitremote_sandbox_name(const char *address) {
  if (wr_str_has_prefix(address, "warren://"))
    address += strlen("warren://");
  return wr_name_valid(address) ? xstrdup(address) : NULL;
}

static const char usage[] =
    "Usage: git-remote-warren REMOTE warren::NAME\n"
    "\n"
    "git's remote helper for clone-mode sandboxes: git runs it for remotes\n"
    "whose URL is warren::NAME, such as the remote warren-NAME that\n"
    "`warren create --clone` adds. Then:\n"
    "  git fetch warren-NAME BRANCH && git diff HEAD FETCH_HEAD\n"
    "warrend is found through WARREN_HOST and WARREN_API_KEY, like warren.\n";

int wr_gitremote_main(int argc, char **argv) {
  struct helper h = {.bundle = -1, .verbosity = 1};
  const char *host = getenv("WARREN_HOST");
  const char *key = getenv("WARREN_API_KEY");
  wr_error_t err = {0};
  int r;

  if (argc != 3 || getenv("GIT_DIR") == NULL) {
    fputs(usage, stderr);
    return WR_CLI_EXIT_USAGE;
  }
  h.name = wr_gitremote_sandbox_name(argv[2]);
  if (h.name == NULL)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "`%s` is not warren::NAME with a sandbox's name",
                       argv[2]);
  h.ctx.host = host && *host ? host : WR_CLI_DEFAULT_HOST;
  h.ctx.api_key = key && *key ? key : NULL;
  r = converse(&h, &err);
  if (r < 0)
    wr_cli_fail(0, "%s", err.msg);
  if (h.started && wr_cli_sandbox_post(&h.ctx, h.name, "/stop", NULL, &err) < 0)
    wr_cli_fail(0, "warning: could not stop sandbox `%s` again: %s", h.name,
                err.msg);
  if (h.bundle >= 0)
    close(h.bundle);
  wr_bundle_header_free(&h.header);
  wr_cli_clone_info_free(&h.info);
  free(h.head);
  free(h.name);
  return r < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
}
