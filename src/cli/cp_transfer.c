/*
 * The transfers behind `warren cp`, with docker cp's rules for where a
 * copy lands.
 *
 * Everything streams: files go up as chunked PUT bodies read straight
 * from the file, and down into a temporary file renamed into place.
 * Directories travel as tar streams made and read by the project's tar
 * code; since that code reads or writes an fd while the HTTP client wants
 * a callback or hands out chunks, a thread runs the tar side over a pipe.
 */
#include "cli/cli.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>

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

/* GET a body as a stream; the caller reads it with wr_http_read_body. */
static int get_stream(const struct wr_cli_ctx *ctx, const char *url,
                      wr_http_client_t **c, wr_error_t *err) {
  _cleanup_response_ struct wr_http_response resp = {0};

  if (wr_cli_connect(ctx, c, err) < 0)
    return -1;
  if (wr_http_request_stream(*c, "GET", url, NULL, NULL, 0, &resp, err) < 0)
    return -1;
  if (resp.status != 200)
    return wr_cli_stream_error(*c, &resp, err);
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
  const char *path;
  bool contents_only; /* create */
  int fd;             /* the thread's end of the pipe, closed by it */
  int status;
  wr_error_t err;
};

static void *create_thread(void *arg) {
  struct tar_job *j = arg;

  j->status = wr_tar_create(&j->tar, j->path, j->contents_only, j->fd, &j->err);
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
  j->tar.rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
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

/* ---- upload -------------------------------------------------------------- */

/* A directory as a tar made on the fly, extracted into `target`. */
static int upload_tree(const struct wr_cli_ctx *ctx, const char *src,
                       const char *sandbox, const char *target,
                       wr_error_t *err) {
  _cleanup_free_ char *url = files_path(sandbox, "/archive", target, NULL);
  _cleanup_free_ char *path = host_path(src);
  struct tar_job j = {.path = path, .contents_only = true};
  pthread_t thread;
  int ours, r;

  if (start_job(&j, true, create_thread, &thread, &ours, err) < 0)
    return -1;
  r = put_from_fd(ctx, url, "application/x-tar", ours, err);
  return finish_job(&j, thread, ours, r, err);
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
                     const struct wr_cli_cp_loc *dst, wr_error_t *err) {
  _cleanup_json_ json_t *info = NULL;
  _cleanup_free_ char *name = base_name(src);
  _cleanup_free_ char *target = NULL;
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
  if (remote_stat(ctx, dst->sandbox, dst->path, &info, err) < 0)
    return -1;
  if (S_ISDIR(st.st_mode) && info != NULL && !is_dir(info))
    return wr_error_set(err, 0, "cannot copy directory `%s` onto file `%s:%s`",
                        src, dst->sandbox, dst->path);
  if (upload_target(dst, info, name, &target, err) < 0)
    return -1;
  if (S_ISDIR(st.st_mode))
    return upload_tree(ctx, src, dst->sandbox, target, err);
  return upload_file(ctx, src, &st, dst->sandbox, target, err);
}

/* ---- download ------------------------------------------------------------ */

/* Give the finished temporary file its mode and its name. */
static int place_file(int fd, const char *tmp, mode_t mode, const char *target,
                      wr_error_t *err) {
  if (fchmod(fd, mode) < 0)
    return wr_error_set(err, errno, "chmod `%s`", tmp);
  if (rename(tmp, target) < 0)
    return wr_error_set(err, errno, "rename to `%s`", target);
  return 0;
}

/* A temporary file next to target, renamed over it once complete, so a
 * failed copy never leaves half a file behind. */
static int download_file(const struct wr_cli_ctx *ctx, const char *sandbox,
                         const char *path, mode_t mode, const char *target,
                         wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_free_ char *url = files_path(sandbox, "", path, NULL);
  _cleanup_free_ char *tmp = xasprintf("%s.warren-XXXXXX", target);
  _cleanup_close_ int fd = -1;
  int r;

  if (get_stream(ctx, url, &c, err) < 0)
    return -1;
  fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "create a file next to `%s`", target);
  r = body_to_fd(c, fd, err);
  if (r == 0)
    r = place_file(fd, tmp, mode, target, err);
  if (r < 0)
    unlink(tmp);
  return r;
}

/* Stream an archive of path into the host directory dir. */
static int extract_archive(const struct wr_cli_ctx *ctx, const char *sandbox,
                           const char *path, const char *dir, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_free_ char *url = files_path(sandbox, "/archive", path, NULL);
  _cleanup_free_ char *abs = host_path(dir);
  struct tar_job j = {.path = abs};
  pthread_t thread;
  int ours, r;

  if (get_stream(ctx, url, &c, err) < 0)
    return -1;
  if (start_job(&j, false, extract_thread, &thread, &ours, err) < 0)
    return -1;
  r = body_to_fd(c, ours, err);
  return finish_job(&j, thread, ours, r, err);
}

/*
 * A directory copied to a path that does not exist becomes that path. The
 * archive's entries start with the source's name, so it is extracted into
 * a fresh directory beside the target and its one top entry renamed.
 */
static int download_as(const struct wr_cli_ctx *ctx, const char *sandbox,
                       const char *path, const char *name, const char *target,
                       wr_error_t *err) {
  _cleanup_free_ char *parent = NULL;
  _cleanup_free_ char *tmp = NULL;
  _cleanup_free_ char *top = NULL;
  char *slash;
  int r;

  parent = host_path(target);
  slash = strrchr(parent, '/');
  slash[slash == parent ? 1 : 0] = '\0';
  tmp = xasprintf("%s/.warren-cp-XXXXXX", parent);
  if (mkdtemp(tmp) == NULL)
    return wr_error_set(err, errno, "create a directory in `%s`", parent);
  top = join_local(tmp, name);
  r = extract_archive(ctx, sandbox, path, tmp, err);
  if (r == 0 && rename(top, target) < 0)
    r = wr_error_set(err, errno, "rename into `%s`", target);
  if (wr_rm_rf(tmp, r == 0 ? err : NULL) < 0)
    r = -1;
  return r;
}

/* Mode bits of a FileInfo ("0644"). */
static mode_t info_mode(const json_t *info) {
  return (mode_t)(strtoul(wr_cli_jstr(info, "mode"), NULL, 8) & 07777);
}

/* A file into an existing directory keeps its name; otherwise the
 * destination is the new file's name. */
static int download_file_to(const struct wr_cli_ctx *ctx,
                            const struct wr_cli_cp_loc *src, const json_t *info,
                            const char *name, const char *dst,
                            wr_error_t *err) {
  _cleanup_free_ char *target = NULL;
  struct stat st;

  if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
    target = join_local(dst, name);
  else if (ends_with_slash(dst))
    return wr_error_set(err, 0, "no directory `%s`", dst);
  else
    target = xstrdup(dst);
  return download_file(ctx, src->sandbox, src->path, info_mode(info), target,
                       err);
}

/* Regular files come down as bytes; directories, symlinks and the rest
 * as a tar, so links and modes survive. */
int wr_cli_cp_download(const struct wr_cli_ctx *ctx,
                       const struct wr_cli_cp_loc *src, const char *dst,
                       wr_error_t *err) {
  _cleanup_json_ json_t *info = NULL;
  _cleanup_free_ char *name = NULL;
  struct stat st;

  if (strcmp(dst, "-") == 0) {
    _cleanup_client_ wr_http_client_t *c = NULL;
    _cleanup_free_ char *url =
        files_path(src->sandbox, "/archive", src->path, NULL);
    if (get_stream(ctx, url, &c, err) < 0)
      return -1;
    return body_to_fd(c, STDOUT_FILENO, err);
  }
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
  if (strcmp(wr_cli_jstr(info, "type"), "file") == 0)
    return download_file_to(ctx, src, info, name, dst, err);
  if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
    return extract_archive(ctx, src->sandbox, src->path, dst, err);
  if (stat(dst, &st) == 0)
    return wr_error_set(err, 0, "cannot copy directory `%s:%s` onto file `%s`",
                        src->sandbox, src->path, dst);
  return download_as(ctx, src->sandbox, src->path, name, dst, err);
}
