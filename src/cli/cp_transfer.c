/*
 * The transfers behind `warren cp`, with docker cp's rules for where a
 * copy lands.
 *
 * Everything streams. Files go up as chunked PUT bodies read straight from
 * the file; trees, and files with holes, go up as tar streams. Everything
 * comes down as a tar stream (files/archive), which keeps holes, announces
 * how much data it carries, and lets the extractor bound what it writes:
 * the host pays for a copy out of a sandbox only up to the destination's
 * free space or --max-size. A download is extracted into a fresh directory
 * beside its destination, which is also the extraction's root (nothing in
 * the archive can resolve outside it), and moved into place only once
 * complete, so a failed copy leaves nothing behind. The tar code reads or
 * writes an fd while the HTTP client wants a callback or hands out chunks,
 * so a thread runs the tar side over a pipe.
 */
#include "cli/cli.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "common/tar.h"

/* ---- paths --------------------------------------------------------------- */

/* The last component ("dir/" -> "dir", "a/." -> "."); caller frees. */
static char *base_name(const char *path) {
  size_t n = strlen(path);
  const char *p;

  while (n > 1 && path[n - 1] == '/')
    n--;
  p = memrchr(path, '/', n);
  if (p == NULL || n == 1)
    return xstrndup(path, n);
  return xstrndup(p + 1, n - (size_t)(p + 1 - path));
}

/* A path in the sandbox: absolute and clean. */
static char *join(const char *dir, const char *name) {
  _cleanup_free_ char *joined = xasprintf("%s/%s", dir, name);

  return wr_path_normalize(joined);
}

/* A host path, left relative when it was ("out" + "a" -> "out/a"). */
static char *join_local(const char *dir, const char *name) {
  size_t n = strlen(dir);

  while (n > 0 && dir[n - 1] == '/')
    n--;
  return xasprintf("%.*s/%s", (int)n, dir, name);
}

/* An absolute, clean host path for the tar code, which resolves in "/". */
static char *host_path(const char *path) {
  _cleanup_free_ char *cwd = NULL;
  _cleanup_free_ char *joined = NULL;

  if (path[0] == '/')
    return wr_path_normalize(path);
  cwd = getcwd(NULL, 0);
  joined = xasprintf("%s/%s", cwd ? cwd : ".", path);
  return wr_path_normalize(joined);
}

static bool ends_with_slash(const char *path) {
  return *path != '\0' && path[strlen(path) - 1] == '/';
}

/* ---- the daemon's side --------------------------------------------------- */

/* "/v1/sandboxes/N/files<what>?path=P<extra>" (caller frees). */
static char *files_path(const char *sandbox, const char *what, const char *path,
                        const char *extra) {
  _cleanup_free_ char *esc = wr_cli_escape(path);
  _cleanup_free_ char *suffix =
      xasprintf("/files%s?path=%s%s", what, esc, extra ? extra : "");

  return wr_cli_sandbox_path(sandbox, suffix);
}

/* FileInfo of a sandbox path; *info is NULL when it does not exist. */
static int remote_stat(const struct wr_cli_ctx *ctx, const char *sandbox,
                       const char *path, json_t **info, wr_error_t *err) {
  _cleanup_free_ char *url = files_path(sandbox, "/stat", path, NULL);
  int status = 0;

  *info = NULL;
  if (wr_cli_call(ctx, "GET", url, NULL, info, &status, err) == 0)
    return 0;
  return status == 404 ? 0 : -1;
}

static bool is_dir(const json_t *info) {
  return strcmp(wr_cli_jstr(info, "type"), "dir") == 0;
}

static ssize_t fd_producer(void *arg, char *buf, size_t size) {
  const int *fd = arg;
  ssize_t n;

  do
    n = read(*fd, buf, size);
  while (n < 0 && errno == EINTR);
  return n;
}

/* PUT a body read from fd; 2xx is success. */
static int put_from_fd(const struct wr_cli_ctx *ctx, const char *url,
                       const char *type, int fd, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};

  if (wr_cli_connect(ctx, &c, err) < 0)
    return -1;
  if (wr_http_request_upload(c, "PUT", url, type, fd_producer, &fd, &resp,
                             err) < 0)
    return -1;
  if (resp.status < 200 || resp.status > 299)
    return wr_cli_stream_error(c, &resp, err);
  return 0;
}

/* No total announced (a daemon from before X-Warren-Data-Bytes). */
#define UNKNOWN_SIZE UINT64_MAX

/* GET an archive as a stream; the caller reads it with wr_http_read_body.
 * *data_bytes: the file data it carries, as the daemon counted it. */
static int get_archive(const struct wr_cli_ctx *ctx, const char *sandbox,
                       const char *path, wr_http_client_t **c,
                       uint64_t *data_bytes, wr_error_t *err) {
  _cleanup_free_ char *url = files_path(sandbox, "/archive", path, NULL);
  _cleanup_response_ struct wr_http_response resp = {0};
  const char *total;

  if (wr_cli_connect(ctx, c, err) < 0)
    return -1;
  if (wr_http_request_stream(*c, "GET", url, NULL, NULL, 0, &resp, err) < 0)
    return -1;
  if (resp.status != 200)
    return wr_cli_stream_error(*c, &resp, err);
  total = wr_http_response_header(&resp, "X-Warren-Data-Bytes");
  if (total == NULL ||
      wr_parse_u64(total, 0, UINT64_MAX - 1, data_bytes, NULL) < 0)
    *data_bytes = UNKNOWN_SIZE;
  return 0;
}

/* Copy a response body to fd. */
static int body_to_fd(wr_http_client_t *c, int fd, wr_error_t *err) {
  char buf[65536];
  ssize_t n;

  while ((n = wr_http_read_body(c, buf, sizeof(buf), err)) > 0)
    if (wr_write_all(fd, buf, (size_t)n, err) < 0)
      return -1;
  return n < 0 ? wr_error_wrap(err, "read from warrend") : 0;
}

/* ---- tar over a pipe ----------------------------------------------------- */

struct tar_job {
  struct wr_tar_ctx tar;
  const char *root;   /* the tar code's root ("/" when NULL) */
  const char *path;   /* inside root */
  const char *as;     /* create: the top entry's name, or NULL */
  bool contents_only; /* create */
  int fd;             /* the thread's end of the pipe, closed by it */
  int status;
  wr_error_t err;
};

static void *create_thread(void *arg) {
  struct tar_job *j = arg;

  if (j->as != NULL)
    j->status = wr_tar_create_as(&j->tar, j->path, j->as, j->fd, &j->err);
  else
    j->status =
        wr_tar_create(&j->tar, j->path, j->contents_only, j->fd, &j->err);
  close(j->fd);
  return NULL;
}

static void *extract_thread(void *arg) {
  struct tar_job *j = arg;

  j->status = wr_tar_extract(&j->tar, j->path, false, j->fd, NULL, &j->err);
  close(j->fd);
  return NULL;
}

/*
 * Start fn on one end of a pipe; *ours gets the other end. For a create
 * the thread writes (pipe[1]); for an extract it reads (pipe[0]).
 */
static int start_job(struct tar_job *j, bool writer, void *(*fn)(void *),
                     pthread_t *thread, int *ours, wr_error_t *err) {
  int p[2];

  if (pipe2(p, O_CLOEXEC) < 0)
    return wr_error_set(err, errno, "pipe");
  j->tar.rootfd =
      open(j->root ? j->root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  j->fd = writer ? p[1] : p[0];
  *ours = writer ? p[0] : p[1];
  if (j->tar.rootfd < 0 || pthread_create(thread, NULL, fn, j) != 0) {
    if (j->tar.rootfd >= 0)
      close(j->tar.rootfd);
    close(p[0]);
    close(p[1]);
    return wr_error_set(err, 0, "cannot start the tar thread");
  }
  return 0;
}

/* Close our end (which unblocks the thread if we stopped early), join it,
 * and prefer its error, which says more than a broken pipe. */
static int finish_job(struct tar_job *j, pthread_t thread, int ours, int r,
                      wr_error_t *err) {
  close(ours);
  pthread_join(thread, NULL);
  close(j->tar.rootfd);
  if (j->status < 0) {
    *err = j->err;
    return -1;
  }
  return r;
}

/* ---- limits ---------------------------------------------------------------
 */

/* "20.0 MiB (20971520 bytes)" */
static void size_text(uint64_t bytes, char *out, size_t size) {
  char human[32];

  wr_format_size(bytes, human, sizeof(human));
  snprintf(out, size, "%s (%llu bytes)", human, (unsigned long long)bytes);
}

/*
 * What a download may write: the smaller of --max-size and the free space
 * of the filesystem it lands on, in bytes of file data (holes are free).
 */
struct budget {
  uint64_t bytes;
  bool by_max_size; /* else by the free space */
  const char *dest; /* the destination, as the user named it */
};

static int make_budget(const char *dir, const char *dest, uint64_t max_size,
                       struct budget *b, wr_error_t *err) {
  struct statvfs vfs;
  uint64_t avail;

  if (statvfs(dir, &vfs) < 0)
    return wr_error_set(err, errno, "free space at `%s`", dest);
  avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
  b->dest = dest;
  b->by_max_size = max_size != 0 && max_size <= avail;
  b->bytes = b->by_max_size ? max_size : avail;
  return 0;
}

/* The refusal, naming both sizes; `grew` when the sandbox's files grew
 * past the limit after the daemon counted them. */
static int refuse(const char *what, uint64_t data, const struct budget *b,
                  bool grew, wr_error_t *err) {
  char have[64], limit[96], max[64];

  size_text(data, have, sizeof(have));
  size_text(b->bytes, max, sizeof(max));
  if (b->by_max_size)
    snprintf(limit, sizeof(limit), "--max-size %s", max);
  else
    snprintf(limit, sizeof(limit), "the %s free on its filesystem", max);
  if (grew)
    return wr_error_setx(err, EDQUOT,
                         "`%s` grew past %s while it was copied: nothing was "
                         "written to `%s`",
                         what, limit, b->dest);
  return wr_error_setx(err, EDQUOT,
                       "`%s` holds %s of data, more than %s: nothing was "
                       "written to `%s`",
                       what, have, limit, b->dest);
}

/* ---- upload -------------------------------------------------------------- */

/* --max-size for an upload: the local data, counted as the archive would
 * carry it (holes are free). */
static int check_upload_size(const char *src, const char *path,
                             bool contents_only, uint64_t max_size,
                             const struct wr_cli_cp_loc *dst, wr_error_t *err) {
  struct wr_tar_ctx tc = {.rootfd = -1};
  struct wr_tar_stats stats;
  struct budget b = {.bytes = max_size, .by_max_size = true};
  _cleanup_free_ char *where = xasprintf("%s:%s", dst->sandbox, dst->path);
  int r;

  if (max_size == 0)
    return 0;
  tc.rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (tc.rootfd < 0)
    return wr_error_set(err, errno, "open /");
  r = wr_tar_measure(&tc, path, contents_only, &stats, err);
  close(tc.rootfd);
  if (r < 0)
    return -1;
  b.dest = where;
  return stats.bytes > max_size ? refuse(src, stats.bytes, &b, false, err) : 0;
}

/* A tar made on the fly (of `path`, or its contents, or it renamed `as`)
 * extracted into the sandbox directory `target`. */
static int upload_tar(const struct wr_cli_ctx *ctx, struct tar_job *j,
                      const char *sandbox, const char *target,
                      wr_error_t *err) {
  _cleanup_free_ char *url = files_path(sandbox, "/archive", target, NULL);
  pthread_t thread;
  int ours, r;

  if (start_job(j, true, create_thread, &thread, &ours, err) < 0)
    return -1;
  r = put_from_fd(ctx, url, "application/x-tar", ours, err);
  return finish_job(j, thread, ours, r, err);
}

/* A directory's contents into `target`. */
static int upload_tree(const struct wr_cli_ctx *ctx, const char *path,
                       const char *sandbox, const char *target,
                       wr_error_t *err) {
  struct tar_job j = {.path = path, .contents_only = true};

  return upload_tar(ctx, &j, sandbox, target, err);
}

/* The last component of a clean absolute sandbox path, and its parent. */
static void split_target(const char *target, char **dir, char **name) {
  _cleanup_free_ char *norm = wr_path_normalize(target);
  char *slash = strrchr(norm, '/');

  *name = xstrdup(slash + 1);
  slash[slash == norm ? 1 : 0] = '\0';
  *dir = steal_ptr(&norm);
}

/*
 * A file with holes goes up as a one-entry tar named after the target, so
 * the daemon keeps the holes (PUT /files would write them as zeros). The
 * extractor replaces the target atomically, as PUT /files does; like it,
 * this needs the target's directory to exist.
 */
static int upload_sparse_file(const struct wr_cli_ctx *ctx, const char *path,
                              const char *sandbox, const char *target,
                              wr_error_t *err) {
  _cleanup_free_ char *dir = NULL, *name = NULL;
  _cleanup_json_ json_t *info = NULL;
  struct tar_job j = {.path = path};

  split_target(target, &dir, &name);
  if (remote_stat(ctx, sandbox, dir, &info, err) < 0)
    return -1;
  if (info == NULL || !is_dir(info))
    return wr_error_set(err, 0, "no directory `%s:%s` in the sandbox", sandbox,
                        dir);
  j.as = name;
  return upload_tar(ctx, &j, sandbox, dir, err);
}

/* A regular file goes up as it is, with its permission bits. */
static int upload_file(const struct wr_cli_ctx *ctx, const char *src,
                       const struct stat *st, const char *sandbox,
                       const char *target, wr_error_t *err) {
  _cleanup_free_ char *extra =
      xasprintf("&mode=%04o&parents=false", (unsigned)(st->st_mode & 07777));
  _cleanup_free_ char *url = files_path(sandbox, "", target, extra);
  _cleanup_close_ int fd = open(src, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", src);
  return put_from_fd(ctx, url, "application/octet-stream", fd, err);
}

/* Fewer blocks than bytes: holes, which the plain upload would fill. */
static bool has_holes(const struct stat *st) {
  return (uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size;
}

/* Where a copy of a file or directory called `name` lands at dst. */
static int upload_target(const struct wr_cli_cp_loc *dst, const json_t *info,
                         const char *name, char **target, wr_error_t *err) {
  if (info != NULL && is_dir(info)) {
    *target = join(dst->path, name);
    return 0;
  }
  if (info == NULL && ends_with_slash(dst->path))
    return wr_error_set(err, 0, "no directory `%s:%s` in the sandbox",
                        dst->sandbox, dst->path);
  *target = xstrdup(dst->path);
  return 0;
}

/* Stat both sides first: where the copy lands depends on whether the
 * destination exists and is a directory. */
int wr_cli_cp_upload(const struct wr_cli_ctx *ctx, const char *src,
                     const struct wr_cli_cp_loc *dst,
                     const struct wr_cli_cp_opts *opts, wr_error_t *err) {
  _cleanup_json_ json_t *info = NULL;
  _cleanup_free_ char *name = base_name(src);
  _cleanup_free_ char *target = NULL, *path = NULL;
  struct stat st;

  if (strcmp(src, "-") == 0) {
    _cleanup_free_ char *url =
        files_path(dst->sandbox, "/archive", dst->path, NULL);
    return put_from_fd(ctx, url, "application/x-tar", STDIN_FILENO, err);
  }
  if (stat(src, &st) < 0)
    return wr_error_set(err, errno, "`%s`", src);
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return wr_error_set(err, 0, "`%s` is not a file or a directory", src);
  path = host_path(src);
  if (check_upload_size(src, path, S_ISDIR(st.st_mode), opts->max_size, dst,
                        err) < 0 ||
      remote_stat(ctx, dst->sandbox, dst->path, &info, err) < 0)
    return -1;
  if (S_ISDIR(st.st_mode) && info != NULL && !is_dir(info))
    return wr_error_set(err, 0, "cannot copy directory `%s` onto file `%s:%s`",
                        src, dst->sandbox, dst->path);
  if (upload_target(dst, info, name, &target, err) < 0)
    return -1;
  if (S_ISDIR(st.st_mode))
    return upload_tree(ctx, path, dst->sandbox, target, err);
  if (has_holes(&st))
    return upload_sparse_file(ctx, path, dst->sandbox, target, err);
  return upload_file(ctx, src, &st, dst->sandbox, target, err);
}

/* ---- download ------------------------------------------------------------ */

/* One download: the archive of `path` in the sandbox, whose top entry is
 * `name`, becomes the host path `target`. */
struct fetch {
  const struct wr_cli_ctx *ctx;
  const char *sandbox, *path;
  const char *name;
  const char *target;
  const char *dest;  /* the destination as given, for messages */
  bool want_file;    /* the source was a regular file */
  uint64_t max_size; /* --max-size, or 0 */
};

/* Stream the archive into tmp, which is also the extraction's root, within
 * the budget: refused before anything is written when the daemon's count
 * is over it, stopped (EDQUOT) if the files grow past it meanwhile. */
static int fetch_into(const struct fetch *f, const char *tmp, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_free_ char *what = xasprintf("%s:%s", f->sandbox, f->path);
  struct tar_job j = {.root = tmp, .path = "/"};
  struct budget b;
  uint64_t data;
  pthread_t thread;
  int ours, r;

  if (make_budget(tmp, f->dest, f->max_size, &b, err) < 0 ||
      get_archive(f->ctx, f->sandbox, f->path, &c, &data, err) < 0)
    return -1;
  if (data != UNKNOWN_SIZE && data > b.bytes)
    return refuse(what, data, &b, false, err);
  /* At least 1: 0 would mean no limit, and a full disk fails the write. */
  j.tar.max_bytes = WR_MAX(b.bytes, 1);
  if (start_job(&j, false, extract_thread, &thread, &ours, err) < 0)
    return -1;
  r = body_to_fd(c, ours, err);
  r = finish_job(&j, thread, ours, r, err);
  if (r < 0 && err->code == EDQUOT)
    return refuse(what, data, &b, true, err);
  return r;
}

static int rename_entry(int sdir, int ddir, const char *name, wr_error_t *err) {
  if (renameat(sdir, name, ddir, name) == 0)
    return 0;
  if (errno != ENOTDIR && errno != EISDIR)
    return wr_error_set(err, errno, "move `%s` into place", name);
  if (unlinkat(ddir, name, 0) < 0 || renameat(sdir, name, ddir, name) < 0)
    return wr_error_set(err, errno, "replace `%s`", name);
  return 0;
}

static int merge_into(int sdir, int ddir, int depth, wr_error_t *err);

/* One entry of the new tree into the old: directories merge, anything else
 * replaces what is in its way (a directory only if it is empty). */
static int merge_entry(int sdir, int ddir, const char *name, int depth,
                       wr_error_t *err) {
  struct stat ss, ds;
  int r;

  if (fstatat(sdir, name, &ss, AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(err, errno, "stat `%s`", name);
  if (fstatat(ddir, name, &ds, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISDIR(ds.st_mode)) {
    if (S_ISDIR(ss.st_mode)) {
      _cleanup_close_ int s = -1, d = -1;

      s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (s < 0 || d < 0)
        return wr_error_set(err, errno, "open `%s`", name);
      r = merge_into(s, d, depth + 1, err);
      return r < 0 ? wr_error_wrap(err, "%s", name) : 0;
    }
    if (unlinkat(ddir, name, AT_REMOVEDIR) < 0)
      return wr_error_set(err, errno, "replace directory `%s`", name);
  }
  return rename_entry(sdir, ddir, name, err);
}

/*
 * Move the new tree sdir into the existing directory ddir, as extracting
 * the archive there would have, then give ddir sdir's mode and mtime.
 * Both are this user's host directories (sdir the fresh extraction), so
 * names are trusted; the depth is bounded to keep fds and stack bounded.
 */
static int merge_into(int sdir, int ddir, int depth, wr_error_t *err) {
  struct timespec ts[2];
  struct dirent *de;
  struct stat st;
  DIR *d;
  int r = 0, fd;

  if (depth > 256)
    return wr_error_set(err, ELOOP, "too deep to merge");
  fd = fcntl(sdir, F_DUPFD_CLOEXEC, 0);
  if (fd < 0 || (d = fdopendir(fd)) == NULL) {
    if (fd >= 0)
      close(fd);
    return wr_error_set(err, errno, "read a directory");
  }
  while (r == 0 && (de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      r = merge_entry(sdir, ddir, de->d_name, depth, err);
  closedir(d);
  if (r < 0 || fstat(sdir, &st) < 0)
    return r < 0 ? -1 : wr_error_set(err, errno, "stat");
  ts[0] = st.st_atim;
  ts[1] = st.st_mtim;
  if (fchmod(ddir, st.st_mode & 07777) < 0 || futimens(ddir, ts) < 0)
    return wr_error_set(err, errno, "set mode and mtime");
  return 0;
}

/* Put the extracted entry tmp/NAME at the target: renamed over it, or
 * merged into it when both are directories. */
static int place(const struct fetch *f, const char *tmp, wr_error_t *err) {
  _cleanup_free_ char *top = join_local(tmp, f->name);
  _cleanup_close_ int s = -1, d = -1;
  struct stat st, tst;

  if (lstat(top, &st) < 0)
    return wr_error_set(err, errno, "`%s:%s` is not in its archive", f->sandbox,
                        f->path);
  if (f->want_file && !S_ISREG(st.st_mode))
    return wr_error_set(err, 0,
                        "`%s:%s` changed while it was copied (not a file "
                        "any more)",
                        f->sandbox, f->path);
  if (!S_ISDIR(st.st_mode) || lstat(f->target, &tst) < 0 ||
      !S_ISDIR(tst.st_mode)) {
    if (rename(top, f->target) == 0)
      return 0;
    if (errno != ENOTDIR && errno != EISDIR)
      return wr_error_set(err, errno, "rename to `%s`", f->target);
    if (unlink(f->target) < 0 || rename(top, f->target) < 0)
      return wr_error_set(err, errno, "replace `%s`", f->target);
    return 0;
  }
  s = open(top, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  d = open(f->target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (s < 0 || d < 0)
    return wr_error_set(err, errno, "open `%s`", f->target);
  if (merge_into(s, d, 0, err) < 0)
    return wr_error_wrap(err, "merge into `%s`", f->target);
  return 0;
}

/*
 * The download, through a fresh directory that is removed whatever
 * happens: beside the target, or inside it when a directory is merged
 * into it (which may be a filesystem of its own), so that the copy is
 * counted against, and renamed within, the filesystem it lands on.
 */
static int fetch(const struct fetch *f, wr_error_t *err) {
  _cleanup_free_ char *parent = host_path(f->target);
  _cleanup_free_ char *tmp = NULL;
  struct stat st;
  int r;

  if (f->want_file || lstat(f->target, &st) < 0 || !S_ISDIR(st.st_mode)) {
    char *slash = strrchr(parent, '/');
    slash[slash == parent ? 1 : 0] = '\0';
  }
  tmp = xasprintf("%s/.warren-cp-XXXXXX", strcmp(parent, "/") ? parent : "");
  if (mkdtemp(tmp) == NULL)
    return wr_error_set(err, errno, "create a directory in `%s`", parent);
  r = fetch_into(f, tmp, err);
  if (r == 0)
    r = place(f, tmp, err);
  if (wr_rm_rf(tmp, r == 0 ? err : NULL) < 0)
    r = -1;
  return r;
}

/* `-` as DST: the archive as it comes; only --max-size applies, checked
 * against the daemon's count before anything is written. */
static int download_stream(const struct wr_cli_ctx *ctx,
                           const struct wr_cli_cp_loc *src, uint64_t max_size,
                           wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  struct budget b = {.bytes = max_size, .by_max_size = true, .dest = "-"};
  uint64_t data;

  if (get_archive(ctx, src->sandbox, src->path, &c, &data, err) < 0)
    return -1;
  if (max_size != 0 && data != UNKNOWN_SIZE && data > max_size) {
    _cleanup_free_ char *what = xasprintf("%s:%s", src->sandbox, src->path);
    return refuse(what, data, &b, false, err);
  }
  return body_to_fd(c, STDOUT_FILENO, err);
}

/* Where a download lands: a file into an existing directory keeps its
 * name, a directory into one becomes DIR/NAME; otherwise the destination
 * is the copy's own name. */
static int download_target(const struct wr_cli_cp_loc *src, bool want_file,
                           const char *name, const char *dst, char **target,
                           wr_error_t *err) {
  struct stat st;

  if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
    *target = join_local(dst, name);
    return 0;
  }
  if (want_file && ends_with_slash(dst))
    return wr_error_set(err, 0, "no directory `%s`", dst);
  if (!want_file && stat(dst, &st) == 0)
    return wr_error_set(err, 0, "cannot copy directory `%s:%s` onto file `%s`",
                        src->sandbox, src->path, dst);
  *target = xstrdup(dst);
  return 0;
}

int wr_cli_cp_download(const struct wr_cli_ctx *ctx,
                       const struct wr_cli_cp_loc *src, const char *dst,
                       const struct wr_cli_cp_opts *opts, wr_error_t *err) {
  _cleanup_json_ json_t *info = NULL;
  _cleanup_free_ char *name = NULL, *target = NULL;
  struct fetch f = {.ctx = ctx,
                    .sandbox = src->sandbox,
                    .path = src->path,
                    .dest = dst,
                    .max_size = opts->max_size};

  if (strcmp(dst, "-") == 0)
    return download_stream(ctx, src, opts->max_size, err);
  if (remote_stat(ctx, src->sandbox, src->path, &info, err) < 0)
    return -1;
  if (info == NULL)
    return wr_error_set(err, 0, "no such file or directory `%s:%s`",
                        src->sandbox, src->path);
  name = base_name(wr_cli_jstr(info, "path")[0] ? wr_cli_jstr(info, "path")
                                                : src->path);
  if (strcmp(name, "/") == 0 || strcmp(name, ".") == 0)
    return wr_error_set(err, 0,
                        "copy a directory below `/` (or use `-` for a tar)");
  f.want_file = strcmp(wr_cli_jstr(info, "type"), "file") == 0;
  if (download_target(src, f.want_file, name, dst, &target, err) < 0)
    return -1;
  f.name = name;
  f.target = target;
  return fetch(&f, err);
}
