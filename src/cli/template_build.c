/*
 * `warren image build NAME -f Dockerfile [DIR]`: a template. The context
 * (DIR, whole: the daemon applies a .dockerignore) goes up as one tar
 * whose first entry is the Dockerfile, named .warren-Dockerfile; the
 * reply is an NDJSON stream of steps, their output as it comes, and a
 * "done" or "error" event.
 */
#include "cli/cli.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

#define DOCKERFILE_ENTRY ".warren-Dockerfile"
/* As WR_TEMPLATE_CONTEXT_MAX in the daemon. */
#define CONTEXT_MAX (1ull << 30)
#define TAR_TRAILER 1024 /* two zero blocks */

struct tpl_build {
  json_t *done;
  char *error;
  bool json;
};

static int make_abs(const char *path, char **out, wr_error_t *err) {
  *out = realpath(path, NULL);
  if (*out == NULL)
    return wr_error_set(err, errno, "`%s`", path);
  return 0;
}

/* The Dockerfile's archive without its end marker, then the context's:
 * one archive, in an unnamed temporary file. */
static int make_context(const char *dockerfile, const char *dir, int *out,
                        wr_error_t *err) {
  struct wr_tar_ctx tc = {.rootfd = -1};
  _cleanup_free_ char *df = NULL, *ctx = NULL;
  _cleanup_close_ int fd = -1;
  struct wr_tar_stats st;
  struct stat sb;
  off_t end;
  int r = -1;

  if (make_abs(dockerfile, &df, err) < 0 || make_abs(dir, &ctx, err) < 0)
    return -1;
  if (stat(ctx, &sb) < 0 || !S_ISDIR(sb.st_mode))
    return wr_error_set(err, 0, "`%s` is not a directory", dir);
  fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  tc.rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || tc.rootfd < 0)
    return wr_error_set(err, errno, "a temporary file in /tmp");
  if (wr_tar_measure(&tc, ctx, true, &st, err) < 0)
    goto out;
  if (st.bytes > CONTEXT_MAX) {
    wr_error_set(err, 0, "the build context `%s` holds %llu MiB; at most %llu",
                 dir, (unsigned long long)(st.bytes >> 20),
                 (unsigned long long)(CONTEXT_MAX >> 20));
    goto out;
  }
  if (wr_tar_create_as(&tc, df, DOCKERFILE_ENTRY, fd, err) < 0)
    goto out;
  end = lseek(fd, 0, SEEK_CUR);
  if (end < TAR_TRAILER || ftruncate(fd, end - TAR_TRAILER) < 0 ||
      lseek(fd, end - TAR_TRAILER, SEEK_SET) < 0) {
    wr_error_set(err, errno, "the build context's archive");
    goto out;
  }
  if (wr_tar_create(&tc, ctx, true, fd, err) < 0 || lseek(fd, 0, SEEK_SET) < 0)
    goto out;
  *out = steal_fd(&fd);
  r = 0;
out:
  close(tc.rootfd);
  return r;
}

static int on_event(json_t *event, void *arg, wr_error_t *err) {
  struct tpl_build *b = arg;
  const char *type = wr_cli_jstr(event, "type");

  (void)err;
  if (strcmp(type, "step") == 0) {
    wr_cli_line(stderr, "Step %lld/%lld : %s%s",
                (long long)wr_cli_jint(event, "step"),
                (long long)wr_cli_jint(event, "of"), wr_cli_jstr(event, "text"),
                wr_cli_jbool(event, "cached") ? " (cached)" : "");
  } else if (strcmp(type, "note") == 0) {
    wr_cli_line(stderr, "note: %s", wr_cli_jstr(event, "message"));
  } else if (strcmp(type, "output") == 0) {
    _cleanup_free_ char *text = wr_cli_safe_text(wr_cli_jstr(event, "data"));
    fputs(text, stderr);
  } else if (strcmp(type, "done") == 0) {
    b->done = json_incref(event);
    return 1;
  } else if (strcmp(type, "error") == 0) {
    b->error = xstrdup(wr_cli_jstr(json_object_get(event, "error"), "message"));
    return 1;
  }
  return 0;
}

static ssize_t file_producer(void *arg, char *buf, size_t size) {
  const int *fd = arg;
  ssize_t n;

  do
    n = read(*fd, buf, size);
  while (n < 0 && errno == EINTR);
  return n;
}

static int send_build(const struct wr_cli_ctx *ctx, const char *name, int fd,
                      struct tpl_build *b, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *path = xasprintf("/v1/templates/%s/build", name);

  if (wr_cli_connect(ctx, &c, err) < 0)
    return -1;
  if (wr_http_request_upload(c, "POST", path, "application/x-tar",
                             file_producer, &fd, &resp, err) < 0)
    return -1;
  if (resp.status != 200)
    return wr_cli_stream_error(c, &resp, err);
  if (wr_cli_ndjson_read(c, on_event, b, err) < 0)
    return -1;
  if (b->error != NULL)
    return wr_error_set(err, 0, "%s", b->error);
  if (b->done == NULL)
    return wr_error_set(err, 0, "the build ended without a result");
  return 0;
}

static int print_done(const struct tpl_build *b) {
  json_t *t = json_object_get(b->done, "template");
  char size[32];

  if (b->json)
    return wr_cli_print_json(t) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  wr_format_size((uint64_t)WR_MAX(wr_cli_jint(t, "size_bytes"), 0), size,
                 sizeof(size));
  printf("template `%s` ready (%lld step%s run, %lld cached, %.1f s, %s)\n",
         wr_cli_jstr(t, "name"), (long long)wr_cli_jint(b->done, "ran"),
         wr_cli_jint(b->done, "ran") == 1 ? "" : "s",
         (long long)wr_cli_jint(b->done, "cached"),
         json_number_value(json_object_get(b->done, "duration_ms")) / 1000.0,
         size);
  return WR_CLI_EXIT_OK;
}

int wr_cli_template_build(const struct wr_cli_ctx *ctx, const char *name,
                          const char *dockerfile, const char *dir, bool json) {
  struct tpl_build b = {.json = json};
  _cleanup_close_ int fd = -1;
  wr_error_t err = {0};
  int r;

  if (name == NULL)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "a template needs a name: warren image build NAME -f "
                       "Dockerfile [DIR]");
  if (make_context(dockerfile, dir ? dir : ".", &fd, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  r = send_build(ctx, name, fd, &b, &err);
  if (r == 0)
    r = print_done(&b);
  else
    r = wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  json_decref(b.done);
  free(b.error);
  return r;
}
