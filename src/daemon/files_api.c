/*
 * The files API: /v1/sandboxes/{id}/files...
 *
 * Every operation resolves its path inside the sandbox's merged root (see
 * src/runtime/files.h), so it works whether the sandbox runs, is paused or
 * is stopped, and nothing a sandbox plants can lead it outside. The
 * operations block on the filesystem, so they run as threadpool jobs, and
 * so does opening the root when it is not open yet (after a reboot that
 * mounts it: wr_sandbox_root_ready); file contents stream through uv_fs
 * calls and tar archives through a pipe to a job that writes or reads the
 * archive.
 */
#include "daemon/files.h"
#include "daemon/jobs.h"
#include "daemon/request.h"
#include "daemon/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>

#define LIST_DEFAULT_LIMIT 10000
#define LIST_MAX_LIMIT 100000
#define READ_CHUNK 65536
#define STREAM_HIGH_WATER (1u << 20)

/* ---- common ------------------------------------------------------------- */

static const char *type_name(char t) {
  switch (t) {
  case 'f':
    return "file";
  case 'd':
    return "dir";
  case 'l':
    return "symlink";
  case 'c':
    return "char";
  case 'b':
    return "block";
  case 'p':
    return "fifo";
  case 's':
    return "socket";
  }
  return "unknown";
}

static json_t *info_json(const struct wr_file_info *fi) {
  char mode[8], mtime[40];
  json_t *j;

  snprintf(mode, sizeof(mode), "%04o", fi->mode & 07777);
  wr_format_time(fi->mtime_ms, mtime, sizeof(mtime));
  j = json_pack("{s:o,s:o,s:s,s:I,s:I,s:s,s:i,s:i,s:s}", "name",
                wr_json_string_lossy(fi->name), "path",
                wr_json_string_lossy(fi->path), "type", type_name(fi->type),
                "size", (json_int_t)fi->size, "allocated",
                (json_int_t)fi->allocated, "mode", mode, "uid", (int)fi->uid,
                "gid", (int)fi->gid, "mtime", mtime);
  if (fi->link_target != NULL)
    json_object_set_new(j, "link_target",
                        wr_json_string_lossy(fi->link_target));
  return j;
}

/* "0755", "755" or an integer: permission bits and the sticky bit. */
static int parse_mode_str(const char *s, uint32_t *out, wr_error_t *err) {
  char *end = NULL;
  unsigned long v;

  if (s == NULL || *s == '\0' || strspn(s, "01234567") != strlen(s))
    return wr_error_setx(err, EINVAL, "mode must be octal, like 0644");
  v = strtoul(s, &end, 8);
  if (v & ~01777UL)
    return wr_error_setx(err, EINVAL,
                         "mode %s is not allowed (permission bits and "
                         "sticky only)",
                         s);
  *out = (uint32_t)v;
  return 0;
}

static int parse_mode_json(json_t *v, uint32_t *out, wr_error_t *err) {
  char buf[24];

  if (json_is_string(v))
    return parse_mode_str(json_string_value(v), out, err);
  if (json_is_integer(v) && json_integer_value(v) >= 0 &&
      json_integer_value(v) <= 07777) {
    snprintf(buf, sizeof(buf), "%o", (unsigned)json_integer_value(v));
    return parse_mode_str(buf, out, err);
  }
  return wr_error_setx(err, EINVAL, "mode must be a string like \"0644\"");
}

/* A files request: the sandbox, its root and the paths from the query or
 * the body; owned by the job that serves it. */
struct fjob {
  struct wr_job job;
  struct wr_sandbox *sb;
  wr_http_req_t *req;
  struct wr_files_ctx fc;
  char *path, *to;
  uint32_t mode;
  bool flag; /* recursive / parents / overwrite */
  unsigned depth;
  size_t limit;
  /* results */
  struct wr_file_info info;
  struct wr_file_info *list;
  size_t nlist;
  bool truncated;
  char *text;          /* a serialised reply */
  uint64_t data_bytes; /* archives: file data the archive will carry */
  int fd;
  struct upload *upload; /* PUT files: the upload being prepared */
};

static void fjob_free(struct fjob *j) {
  wr_file_info_free(&j->info);
  wr_file_infos_free(j->list, j->nlist);
  if (j->fd >= 0)
    close(j->fd);
  free(j->path);
  free(j->to);
  free(j->text);
  wr_sandbox_unref(j->sb);
  free(j);
}

/* Start a files request: find the sandbox and its root, check the path.
 * NULL when the request was answered, or when the root is being opened
 * on the threadpool: then `self`, the handler, runs again once it is. */
static struct fjob *fjob_new(void *ctx, wr_http_req_t *req,
                             wr_http_handler_fn self, const char *path,
                             wr_job_fn fn, wr_job_fn done) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  struct fjob *j;
  wr_error_t err;
  int rootfd;

  if (sb == NULL)
    return NULL;
  if (path == NULL) {
    wr_http_reply_error(req, 400, "bad_request", "missing query `path`");
    return NULL;
  }
  if (path[0] != '/') {
    wr_http_reply_error(req, 400, "bad_request",
                        "path `%s` must be absolute (inside the sandbox)",
                        path);
    return NULL;
  }
  if (wr_path_check(path, &err) < 0) {
    wr_reply_err(req, &err);
    return NULL;
  }
  /* A paused sandbox wakes for its files too: a request for one is work
   * in it, and its processes see the change at once. */
  if (!wr_sandbox_awake(sb, req, WR_WAKE_FILES, self) ||
      !wr_sandbox_root_ready(sb, req, self, &rootfd))
    return NULL;
  j = xcalloc(1, sizeof(*j));
  j->sb = sb;
  j->req = req;
  j->fd = -1;
  j->fc = (struct wr_files_ctx){rootfd, wr_rt_id_base(sb->slot), WR_ID_COUNT};
  j->path = xstrdup(path);
  j->job.fn = fn;
  j->job.done = done;
  j->job.arg = j;
  wr_sandbox_ref(sb);
  return j;
}

/* Replies with the stat of j->path (or j->to) after a change. */
static void done_info(struct wr_job *job) {
  struct fjob *j = job->arg;

  if (job->result < 0)
    wr_reply_err(j->req, &job->err);
  else
    wr_http_reply_json(j->req, j->limit ? 201 : 200, info_json(&j->info));
  fjob_free(j);
}

static void done_empty(struct wr_job *job) {
  struct fjob *j = job->arg;

  if (job->result < 0)
    wr_reply_err(j->req, &job->err);
  else
    wr_http_reply_empty(j->req, 204);
  fjob_free(j);
}

/* ---- stat, list -----------------------------------------------------------
 */

static void stat_work(struct wr_job *job) {
  struct fjob *j = job->arg;

  job->result = wr_files_stat(&j->fc, j->path, &j->info, &job->err);
}

void wr_api_files_stat(wr_http_req_t *req, void *ctx) {
  struct fjob *j = fjob_new(ctx, req, wr_api_files_stat,
                            wr_http_query(req, "path"), stat_work, done_info);

  if (j != NULL)
    wr_job_queue(j->sb->d, &j->job);
}

/*
 * A listing may hold 100000 entries, several megabytes of JSON: it is
 * built and serialised here, on the worker thread, because doing that on
 * the loop stalls every other client for a good part of a second.
 */
static void list_work(struct wr_job *job) {
  struct fjob *j = job->arg;
  _cleanup_free_ char *norm = NULL, *text = NULL;
  _cleanup_json_ json_t *body = NULL;
  json_t *arr;

  job->result = wr_files_list(&j->fc, j->path, j->depth, j->limit, &j->list,
                              &j->nlist, &j->truncated, &job->err);
  if (job->result < 0)
    return;
  norm = wr_path_normalize(j->path);
  arr = json_array();
  for (size_t i = 0; i < j->nlist; i++)
    json_array_append_new(arr, info_json(&j->list[i]));
  body = json_pack("{s:o,s:o,s:b}", "path", wr_json_string_lossy(norm),
                   "entries", arr, "truncated", j->truncated);
  text = wr_json_dumps(body);
  j->text = xasprintf("%s\n", text);
}

static void list_done(struct wr_job *job) {
  struct fjob *j = job->arg;

  if (job->result < 0)
    wr_reply_err(j->req, &job->err);
  else
    wr_http_reply_json_text(j->req, 200, j->text, strlen(j->text));
  fjob_free(j);
}

void wr_api_files_list(wr_http_req_t *req, void *ctx) {
  uint64_t depth, limit;
  struct fjob *j;

  if (wr_req_u64(req, "depth", 1, 1, 64, &depth) < 0 ||
      wr_req_u64(req, "limit", LIST_DEFAULT_LIMIT, 1, LIST_MAX_LIMIT, &limit) <
          0)
    return;
  j = fjob_new(ctx, req, wr_api_files_list, wr_http_query(req, "path"),
               list_work, list_done);
  if (j == NULL)
    return;
  j->depth = (unsigned)depth;
  j->limit = (size_t)limit;
  wr_job_queue(j->sb->d, &j->job);
}

/* ---- mkdir, delete, move, chmod ------------------------------------------ */

static void mkdir_work(struct wr_job *job) {
  struct fjob *j = job->arg;

  job->result = wr_files_mkdir(&j->fc, j->path, j->mode, j->flag, &job->err);
  if (job->result == 0)
    job->result = wr_files_stat(&j->fc, j->path, &j->info, &job->err);
}

/* Decode {"path", "mode"?, flag?} bodies shared by mkdir and chmod. */
static struct fjob *path_mode_body(wr_http_req_t *req, void *ctx,
                                   wr_http_handler_fn self,
                                   const char *flag_name, bool flag_def,
                                   uint32_t mode_def, bool mode_required,
                                   wr_job_fn fn, wr_job_fn done) {
  const char *path = NULL;
  json_t *mode = NULL;
  bool flag = flag_def;
  struct wr_json_field f[] = {
      {"path", WR_JSON_STRING, &path, true, NULL},
      {"mode", WR_JSON_ANY, &mode, mode_required, NULL},
      {flag_name ? flag_name : "-", WR_JSON_BOOL, &flag, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, flag_name ? 3 : 2);
  uint32_t m = mode_def;
  wr_error_t err;
  struct fjob *j;

  if (body == NULL)
    return NULL;
  if (mode != NULL && parse_mode_json(mode, &m, &err) < 0) {
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return NULL;
  }
  j = fjob_new(ctx, req, self, path, fn, done);
  if (j != NULL) {
    j->mode = m;
    j->flag = flag;
  }
  return j;
}

void wr_api_files_mkdir(wr_http_req_t *req, void *ctx) {
  struct fjob *j = path_mode_body(req, ctx, wr_api_files_mkdir, "parents", true,
                                  0755, false, mkdir_work, done_info);

  if (j != NULL) {
    j->limit = 1; /* 201 */
    wr_job_queue(j->sb->d, &j->job);
  }
}

static void chmod_work(struct wr_job *job) {
  struct fjob *j = job->arg;

  job->result = wr_files_chmod(&j->fc, j->path, j->mode, &job->err);
  if (job->result == 0)
    job->result = wr_files_stat(&j->fc, j->path, &j->info, &job->err);
}

void wr_api_files_chmod(wr_http_req_t *req, void *ctx) {
  struct fjob *j = path_mode_body(req, ctx, wr_api_files_chmod, NULL, false, 0,
                                  true, chmod_work, done_info);

  if (j != NULL)
    wr_job_queue(j->sb->d, &j->job);
}

static void delete_work(struct wr_job *job) {
  struct fjob *j = job->arg;

  job->result = wr_files_remove(&j->fc, j->path, j->flag, &job->err);
}

void wr_api_files_delete(wr_http_req_t *req, void *ctx) {
  bool recursive;
  struct fjob *j;

  if (wr_req_bool(req, "recursive", false, &recursive) < 0)
    return;
  j = fjob_new(ctx, req, wr_api_files_delete, wr_http_query(req, "path"),
               delete_work, done_empty);
  if (j != NULL) {
    j->flag = recursive;
    wr_job_queue(j->sb->d, &j->job);
  }
}

static void move_work(struct wr_job *job) {
  struct fjob *j = job->arg;

  job->result = wr_files_move(&j->fc, j->path, j->to, j->flag, &job->err);
  if (job->result == 0)
    job->result = wr_files_stat(&j->fc, j->to, &j->info, &job->err);
}

void wr_api_files_move(wr_http_req_t *req, void *ctx) {
  const char *from = NULL, *to = NULL;
  bool overwrite = false;
  struct wr_json_field f[] = {
      {"from", WR_JSON_STRING, &from, true, NULL},
      {"to", WR_JSON_STRING, &to, true, NULL},
      {"overwrite", WR_JSON_BOOL, &overwrite, false, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  struct fjob *j;
  wr_error_t err;

  if (body == NULL)
    return;
  if (to[0] != '/') {
    wr_http_reply_error(req, 400, "bad_request", "`to` must be absolute");
    return;
  }
  if (wr_path_check(to, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  j = fjob_new(ctx, req, wr_api_files_move, from, move_work, done_info);
  if (j != NULL) {
    j->to = xstrdup(to);
    j->flag = overwrite;
    wr_job_queue(j->sb->d, &j->job);
  }
}

/* ---- read a file ----------------------------------------------------------
 */

/*
 * A streamed download: one chunk at a time, read on a worker thread and
 * paced by the client. Holes are found with SEEK_DATA and sent as zeros
 * without being read; files/archive is the route that keeps them out of
 * the stream altogether.
 */
struct download {
  struct fjob *j;
  uv_work_t work;
  char buf[READ_CHUNK];
  uint64_t off;
  ssize_t n; /* the chunk read: bytes, 0 at the end, -errno */
  bool hole; /* the n bytes at off are a hole */
  bool reading;
  bool waiting_drain;
  bool aborted;
};

static const char zero_chunk[READ_CHUNK];

static void download_next(struct download *dl);

/* A read that failed half way aborts the reply: a file cut short must not
 * look complete to the client. */
static void download_finish(struct download *dl, bool failed) {
  if (failed)
    wr_http_stream_abort(dl->j->req);
  else
    wr_http_stream_end(dl->j->req);
  fjob_free(dl->j);
  free(dl);
}

/* Where the data at or after off starts: the file's size when only a hole
 * is left, off itself when the filesystem cannot tell. */
static int64_t data_at(int fd, uint64_t off) {
  off_t d = lseek(fd, (off_t)off, SEEK_DATA);
  struct stat st;

  if (d >= 0)
    return d;
  if (errno != ENXIO)
    return (int64_t)off;
  if (fstat(fd, &st) < 0)
    return -errno;
  return WR_MAX((int64_t)st.st_size, (int64_t)off);
}

/* On a worker: the next chunk, a hole (counted, not read) or data (read
 * up to the next hole). */
static void download_read_work(uv_work_t *w) {
  struct download *dl = w->data;
  int fd = dl->j->fd;
  int64_t data = data_at(fd, dl->off);
  size_t want = READ_CHUNK;
  off_t hole;
  ssize_t n;

  dl->hole = false;
  if (data < 0) {
    dl->n = (ssize_t)data;
    return;
  }
  if ((uint64_t)data > dl->off) {
    dl->hole = true;
    dl->n = (ssize_t)WR_MIN((uint64_t)data - dl->off, (uint64_t)READ_CHUNK);
    return;
  }
  hole = lseek(fd, (off_t)dl->off, SEEK_HOLE);
  if (hole > (off_t)dl->off)
    want = (size_t)WR_MIN((uint64_t)hole - dl->off, (uint64_t)want);
  do
    n = pread(fd, dl->buf, want, (off_t)dl->off);
  while (n < 0 && errno == EINTR);
  dl->n = n < 0 ? -errno : n;
}

static void on_download_read(uv_work_t *w, int status) {
  struct download *dl = w->data;
  ssize_t n = status < 0 ? status : dl->n;

  dl->reading = false;
  if (n <= 0 || dl->aborted) {
    if (n < 0)
      wr_warn("read %s: %s", dl->j->path, strerror((int)-n));
    download_finish(dl, n < 0);
    return;
  }
  dl->off += (uint64_t)n;
  if (wr_http_stream_write(dl->j->req, dl->hole ? zero_chunk : dl->buf,
                           (size_t)n) > STREAM_HIGH_WATER) {
    dl->waiting_drain = true;
    return;
  }
  download_next(dl);
}

static void download_next(struct download *dl) {
  dl->reading = true;
  dl->work.data = dl;
  if (uv_queue_work(dl->j->sb->d->loop, &dl->work, download_read_work,
                    on_download_read) < 0) {
    dl->reading = false;
    download_finish(dl, true);
  }
}

static void on_download_drain(wr_http_req_t *req, void *arg) {
  struct download *dl = arg;

  (void)req;
  if (dl->waiting_drain) {
    dl->waiting_drain = false;
    download_next(dl);
  }
}

static void on_download_abort(wr_http_req_t *req, void *arg) {
  struct download *dl = arg;

  (void)req;
  dl->aborted = true;
  if (dl->waiting_drain) {
    dl->waiting_drain = false;
    download_finish(dl, true);
  }
}

static void open_read_work(struct wr_job *job) {
  struct fjob *j = job->arg;

  job->result =
      wr_files_open_read(&j->fc, j->path, &j->fd, &j->info, &job->err);
}

static void open_read_done(struct wr_job *job) {
  struct fjob *j = job->arg;
  struct download *dl;
  char extra[64];

  if (job->result < 0) {
    if (job->err.code == EISDIR)
      wr_http_reply_error(j->req, 400, "is_directory",
                          "`%s` is a directory (use files/list or "
                          "files/archive)",
                          j->path);
    else
      wr_reply_err(j->req, &job->err);
    fjob_free(j);
    return;
  }
  dl = xcalloc(1, sizeof(*dl));
  dl->j = j;
  snprintf(extra, sizeof(extra), "X-Warren-Size: %llu\r\n",
           (unsigned long long)j->info.size);
  wr_http_stream_begin(j->req, 200, "application/octet-stream", extra);
  wr_http_on_drain(j->req, on_download_drain, dl);
  wr_http_on_abort(j->req, on_download_abort, dl);
  download_next(dl);
}

void wr_api_files_read(wr_http_req_t *req, void *ctx) {
  struct fjob *j =
      fjob_new(ctx, req, wr_api_files_read, wr_http_query(req, "path"),
               open_read_work, open_read_done);

  if (j != NULL)
    wr_job_queue(j->sb->d, &j->job);
}

/* ---- write a file ----------------------------------------------------------
 */

/* A streamed upload: each body chunk is written with uv_fs_write while the
 * body is paused, then the temporary file is renamed into place. */
struct upload {
  struct fjob *j;
  struct wr_files_writer *w;
  uv_fs_t fs;
  wr_buf_t pending; /* body bytes not yet written */
  bool writing;
  bool body_done;
  int body_status;
  bool failed;
  wr_error_t err;
};

static void commit_work(struct wr_job *job);
static void commit_done(struct wr_job *job);

static void upload_end(struct upload *up) {
  struct fjob *j = up->j;

  if (up->failed || up->body_status < 0) {
    wr_files_write_abort(up->w);
    if (up->failed)
      wr_reply_err(j->req, &up->err);
    else
      wr_http_reply_error(j->req, 400, "bad_request",
                          "the upload was cut short");
    wr_buf_free(&up->pending);
    free(up);
    fjob_free(j);
    return;
  }
  j->job.fn = commit_work;
  j->job.done = commit_done;
  j->job.arg = up;
  wr_job_queue(j->sb->d, &j->job);
}

static void upload_flush(struct upload *up);

static void on_upload_written(uv_fs_t *fs) {
  struct upload *up = fs->data;
  ssize_t n = fs->result;

  uv_fs_req_cleanup(fs);
  up->writing = false;
  if (n < 0) {
    up->failed = true;
    wr_error_set(&up->err, (int)-n, "write `%s`", up->j->path);
  } else {
    wr_buf_consume(&up->pending, (size_t)n);
  }
  upload_flush(up);
}

/* Write what is pending; resume the body when all is written. */
static void upload_flush(struct upload *up) {
  uv_buf_t b;

  if (up->writing)
    return;
  if (!up->failed && up->pending.len > 0) {
    b = uv_buf_init(up->pending.data,
                    (unsigned)WR_MIN(up->pending.len, 1u << 20));
    up->writing = true;
    up->fs.data = up;
    if (uv_fs_write(up->j->sb->d->loop, &up->fs, wr_files_writer_fd(up->w), &b,
                    1, -1, on_upload_written) == 0)
      return;
    up->writing = false;
    up->failed = true;
    wr_error_set(&up->err, EIO, "write `%s`", up->j->path);
  }
  if (up->body_done) {
    upload_end(up);
    return;
  }
  wr_http_body_pause(up->j->req, false);
}

static void on_upload_data(wr_http_req_t *req, const char *data, size_t len,
                           void *arg) {
  struct upload *up = arg;

  if (up->failed)
    return; /* discard the rest; the error is sent at the end */
  wr_buf_append(&up->pending, data, len);
  if (up->pending.len >= (256u << 10)) {
    wr_http_body_pause(req, true);
    upload_flush(up);
  }
}

static void on_upload_end(wr_http_req_t *req, int status, void *arg) {
  struct upload *up = arg;

  (void)req;
  up->body_done = true;
  up->body_status = status;
  upload_flush(up);
}

static void write_begin_work(struct wr_job *job) {
  struct fjob *j = job->arg;
  struct upload *up = j->upload;

  job->result = wr_files_write_begin(&j->fc, j->path, j->mode, j->flag, &up->w,
                                     &job->err);
}

static void write_begin_done(struct wr_job *job) {
  struct fjob *j = job->arg;
  struct upload *up = j->upload;

  j->upload = NULL;
  if (job->result < 0) {
    wr_reply_err(j->req, &job->err);
    wr_buf_free(&up->pending);
    free(up);
    fjob_free(j);
    return;
  }
  wr_http_body_read(j->req, on_upload_data, on_upload_end, up);
}

static void commit_work(struct wr_job *job) {
  struct upload *up = job->arg;
  struct fjob *j = up->j;

  job->result = wr_files_write_commit(up->w, &job->err);
  up->w = NULL;
  if (job->result == 0)
    job->result = wr_files_stat(&j->fc, j->path, &j->info, &job->err);
}

static void commit_done(struct wr_job *job) {
  struct upload *up = job->arg;
  struct fjob *j = up->j;

  if (job->result < 0)
    wr_reply_err(j->req, &job->err);
  else
    wr_http_reply_json(j->req, 201, info_json(&j->info));
  wr_buf_free(&up->pending);
  free(up);
  fjob_free(j);
}

void wr_api_files_write(wr_http_req_t *req, void *ctx) {
  const char *mode_s = wr_http_query(req, "mode");
  uint32_t mode = 0644;
  bool parents;
  struct upload *up;
  struct fjob *j;
  wr_error_t err;

  if (wr_req_bool(req, "parents", true, &parents) < 0)
    return;
  if (mode_s != NULL && parse_mode_str(mode_s, &mode, &err) < 0) {
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return;
  }
  j = fjob_new(ctx, req, wr_api_files_write, wr_http_query(req, "path"),
               write_begin_work, write_begin_done);
  if (j == NULL)
    return;
  j->mode = mode;
  j->flag = parents;
  up = xcalloc(1, sizeof(*up));
  up->j = j;
  wr_buf_init(&up->pending);
  j->upload = up;
  wr_job_queue(j->sb->d, &j->job);
}

/* ---- archives --------------------------------------------------------------
 */

/*
 * A tar stream between a job and the client goes through a pipe: for a
 * download the job writes the archive into it and the loop forwards what
 * it reads; for an upload the loop writes the body into it and the job
 * extracts. The request ends once both the pipe and the job are done.
 */
struct tarpipe {
  struct fjob *j;
  uv_poll_t poll;
  int fd; /* our end */
  bool polling, poll_init, poll_closing, poll_closed, freed;
  bool job_done, pipe_done;
  bool aborted, waiting_drain;
  int job_result;
  wr_error_t err;
  struct wr_tar_stats stats;
  int job_fd;       /* the job's end */
  wr_buf_t pending; /* upload bytes not yet in the pipe */
  bool body_done;
  int body_status;
};

static void tarpipe_poll_closed(uv_handle_t *h) {
  struct tarpipe *tp = h->data;

  tp->poll_closed = true;
  if (tp->freed) {
    wr_buf_free(&tp->pending);
    free(tp);
  }
}

/* Stop watching our end of the pipe and close it: the handle first (uv_close
 * takes the fd out of epoll), then the fd. Closing the fd first would let
 * libuv later remove whatever reused its number, such as another sandbox's
 * control socket. */
static void tarpipe_stop(struct tarpipe *tp) {
  tp->polling = false;
  if (tp->poll_init && !tp->poll_closing) {
    tp->poll_closing = true;
    uv_close((uv_handle_t *)&tp->poll, tarpipe_poll_closed);
  }
  if (tp->fd >= 0) {
    close(tp->fd);
    tp->fd = -1;
  }
}

/* The request is over; tp goes once its handle is closed. */
static void tarpipe_free(struct tarpipe *tp) {
  tarpipe_stop(tp);
  fjob_free(tp->j);
  tp->j = NULL;
  tp->freed = true;
  if (!tp->poll_init || tp->poll_closed) {
    wr_buf_free(&tp->pending);
    free(tp);
  }
}

static void download_tar_maybe_end(struct tarpipe *tp) {
  if (!tp->job_done || !tp->pipe_done)
    return;
  if (tp->job_result < 0) {
    wr_warn("archive of %s: %s", tp->j->path, tp->err.msg);
    wr_http_stream_abort(tp->j->req);
  } else {
    wr_http_stream_end(tp->j->req);
  }
  tarpipe_free(tp);
}

static void on_tar_readable(uv_poll_t *h, int status, int events) {
  struct tarpipe *tp = h->data;
  char buf[READ_CHUNK];
  ssize_t n;

  (void)events;
  n = status < 0 ? -1 : read(tp->fd, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    tarpipe_stop(tp);
    tp->pipe_done = true;
    download_tar_maybe_end(tp);
    return;
  }
  if (!tp->aborted &&
      wr_http_stream_write(tp->j->req, buf, (size_t)n) > STREAM_HIGH_WATER) {
    tp->waiting_drain = true;
    tp->polling = false;
    uv_poll_stop(&tp->poll);
  }
}

static void on_tar_drain(wr_http_req_t *req, void *arg) {
  struct tarpipe *tp = arg;

  (void)req;
  if (tp->waiting_drain && tp->fd >= 0) {
    tp->waiting_drain = false;
    tp->polling = true;
    uv_poll_start(&tp->poll, UV_READABLE, on_tar_readable);
  }
}

static void on_tar_abort(wr_http_req_t *req, void *arg) {
  struct tarpipe *tp = arg;

  (void)req;
  tp->aborted = true;
  /* Closing our end makes the job's writes fail, so it finishes soon. */
  tarpipe_stop(tp);
  tp->pipe_done = true;
  download_tar_maybe_end(tp);
}

/* The sandbox's root, its ids mapped, for the tar code. */
static struct wr_tar_ctx tar_ctx(const struct fjob *j) {
  return (struct wr_tar_ctx){.rootfd = j->fc.rootfd,
                             .id_base = j->fc.id_base,
                             .id_count = j->fc.id_count,
                             .map_ids = true};
}

static void tar_create_work(struct wr_job *job) {
  struct tarpipe *tp = job->arg;
  struct fjob *j = tp->j;
  struct wr_tar_ctx tc = tar_ctx(j);

  tp->job_result = wr_tar_create(&tc, j->path, false, tp->job_fd, &tp->err);
  close(tp->job_fd);
  tp->job_fd = -1;
}

static void tar_create_done(struct wr_job *job) {
  struct tarpipe *tp = job->arg;

  free(job);
  tp->job_done = true;
  download_tar_maybe_end(tp);
}

static int tarpipe_open(struct tarpipe *tp, bool download, wr_error_t *err) {
  int p[2];

  if (pipe2(p, O_CLOEXEC) < 0)
    return wr_error_set(err, errno, "pipe");
  tp->fd = download ? p[0] : p[1];
  tp->job_fd = download ? p[1] : p[0];
  wr_set_nonblock(tp->fd, true);
  if (uv_poll_init(tp->j->sb->d->loop, &tp->poll, tp->fd) < 0) {
    close(p[0]);
    close(p[1]);
    tp->fd = tp->job_fd = -1;
    return wr_error_set(err, EIO, "poll pipe");
  }
  tp->poll.data = tp;
  tp->poll_init = true;
  return 0;
}

static struct wr_job *tar_job(struct tarpipe *tp, wr_job_fn fn,
                              wr_job_fn done) {
  struct wr_job *job = xcalloc(1, sizeof(*job));

  job->fn = fn;
  job->done = done;
  job->arg = tp;
  return job;
}

static bool archivable(char type) {
  return type != 's' && type != 'c' && type != 'b';
}

/*
 * Before the stream: the path's type, and how many bytes of file data the
 * archive will carry (holes excluded), counted by the same walk that makes
 * it. The client learns the total from X-Warren-Data-Bytes and can refuse
 * before it writes anything; it must still bound what it writes, since the
 * sandbox can grow its files in the meantime.
 */
static void archive_stat_work(struct wr_job *job) {
  struct fjob *j = job->arg;
  struct wr_tar_ctx tc = tar_ctx(j);
  struct wr_tar_stats stats;

  job->result = wr_files_stat(&j->fc, j->path, &j->info, &job->err);
  if (job->result < 0 || !archivable(j->info.type))
    return;
  job->result = wr_tar_measure(&tc, j->path, false, &stats, &job->err);
  j->data_bytes = stats.bytes;
}

static void archive_stat_done(struct wr_job *job) {
  struct fjob *j = job->arg;
  struct tarpipe *tp;
  char extra[64];
  wr_error_t err;

  if (job->result < 0) {
    wr_reply_err(j->req, &job->err);
    fjob_free(j);
    return;
  }
  /* Known before the first byte: once the stream has begun, an error can
   * only cut it off. */
  if (!archivable(j->info.type)) {
    wr_http_reply_error(j->req, 400, "bad_request",
                        "`%s` is a socket or a device node: not archived",
                        j->path);
    fjob_free(j);
    return;
  }
  tp = xcalloc(1, sizeof(*tp));
  tp->j = j;
  tp->fd = tp->job_fd = -1;
  wr_buf_init(&tp->pending);
  if (tarpipe_open(tp, true, &err) < 0) {
    wr_reply_err(j->req, &err);
    tarpipe_free(tp);
    return;
  }
  snprintf(extra, sizeof(extra), "X-Warren-Data-Bytes: %llu\r\n",
           (unsigned long long)j->data_bytes);
  wr_http_stream_begin(j->req, 200, "application/x-tar", extra);
  wr_http_on_drain(j->req, on_tar_drain, tp);
  wr_http_on_abort(j->req, on_tar_abort, tp);
  tp->polling = true;
  uv_poll_start(&tp->poll, UV_READABLE, on_tar_readable);
  wr_job_queue(j->sb->d, tar_job(tp, tar_create_work, tar_create_done));
}

void wr_api_files_archive_get(wr_http_req_t *req, void *ctx) {
  struct fjob *j =
      fjob_new(ctx, req, wr_api_files_archive_get, wr_http_query(req, "path"),
               archive_stat_work, archive_stat_done);

  if (j != NULL)
    wr_job_queue(j->sb->d, &j->job);
}

static void upload_tar_maybe_end(struct tarpipe *tp) {
  struct fjob *j = tp->j;

  if (!tp->job_done || !tp->body_done)
    return;
  if (tp->job_result < 0)
    wr_reply_err(j->req, &tp->err);
  else if (tp->body_status < 0)
    wr_http_reply_error(j->req, 400, "bad_request", "the upload was cut short");
  else
    wr_http_reply_json(j->req, 200,
                       json_pack("{s:I,s:I,s:I,s:I}", "files",
                                 (json_int_t)tp->stats.files, "dirs",
                                 (json_int_t)tp->stats.dirs, "links",
                                 (json_int_t)tp->stats.links, "bytes",
                                 (json_int_t)tp->stats.bytes));
  tarpipe_free(tp);
}

static void tar_flush(struct tarpipe *tp);

static void on_tar_writable(uv_poll_t *h, int status, int events) {
  struct tarpipe *tp = h->data;

  (void)events;
  if (status < 0) {
    tarpipe_stop(tp);
    wr_buf_reset(&tp->pending);
  }
  tar_flush(tp);
}

/* Move pending body bytes into the pipe; pause the body while it is full.
 * Once the extractor has stopped (done or failed), bytes are dropped. */
static void tar_flush(struct tarpipe *tp) {
  while (tp->fd >= 0 && tp->pending.len > 0) {
    ssize_t n = write(tp->fd, tp->pending.data, tp->pending.len);
    if (n > 0) {
      wr_buf_consume(&tp->pending, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      if (!tp->polling) {
        tp->polling = true;
        uv_poll_start(&tp->poll, UV_WRITABLE, on_tar_writable);
      }
      wr_http_body_pause(tp->j->req, true);
      return;
    }
    tarpipe_stop(tp); /* EPIPE: the extractor stopped reading */
  }
  if (tp->fd < 0)
    wr_buf_reset(&tp->pending);
  if (tp->polling) {
    tp->polling = false;
    uv_poll_stop(&tp->poll);
  }
  if (tp->body_done) {
    tarpipe_stop(tp); /* EOF for the extractor */
    upload_tar_maybe_end(tp);
  } else {
    wr_http_body_pause(tp->j->req, false);
  }
}

static void on_tar_body(wr_http_req_t *req, const char *data, size_t len,
                        void *arg) {
  struct tarpipe *tp = arg;

  (void)req;
  if (tp->fd < 0)
    return;
  wr_buf_append(&tp->pending, data, len);
  tar_flush(tp);
}

static void on_tar_body_end(wr_http_req_t *req, int status, void *arg) {
  struct tarpipe *tp = arg;

  (void)req;
  tp->body_done = true;
  tp->body_status = status;
  tar_flush(tp);
}

static void tar_extract_work(struct wr_job *job) {
  struct tarpipe *tp = job->arg;
  struct fjob *j = tp->j;
  struct wr_tar_ctx tc = tar_ctx(j);

  tp->job_result =
      wr_tar_extract(&tc, j->path, true, tp->job_fd, &tp->stats, &tp->err);
  close(tp->job_fd);
  tp->job_fd = -1;
}

static void tar_extract_done(struct wr_job *job) {
  struct tarpipe *tp = job->arg;

  free(job);
  tp->job_done = true;
  upload_tar_maybe_end(tp);
}

void wr_api_files_archive_put(wr_http_req_t *req, void *ctx) {
  struct fjob *j = fjob_new(ctx, req, wr_api_files_archive_put,
                            wr_http_query(req, "path"), NULL, NULL);
  struct tarpipe *tp;
  wr_error_t err;

  if (j == NULL)
    return;
  tp = xcalloc(1, sizeof(*tp));
  tp->j = j;
  tp->fd = tp->job_fd = -1;
  wr_buf_init(&tp->pending);
  if (tarpipe_open(tp, false, &err) < 0) {
    wr_reply_err(req, &err);
    tarpipe_free(tp);
    return;
  }
  wr_job_queue(j->sb->d, tar_job(tp, tar_extract_work, tar_extract_done));
  wr_http_body_read(req, on_tar_body, on_tar_body_end, tp);
}
