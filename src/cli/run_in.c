/*
 * Running a command in a sandbox and capturing what it prints: the
 * building block of clone mode's scripts, the git remote helper and
 * `warren rm`'s check, which must read a command's output rather than
 * show it.
 *
 * It uses the plain (not upgraded) exec route: an NDJSON stream of
 * `started`, `stdout`/`stderr` (base64) and one `exit` or `error`. What
 * the sandbox prints is untrusted: stdout is bounded, stderr is either
 * kept (its last bytes) or shown with its control characters defused.
 */
#include "cli/cli.h"

#include <jansson.h>

/* The most stderr kept for a caller; older bytes are dropped. */
#define ERR_KEEP (16u << 10)

struct capture {
  struct wr_cli_run_in *r;
  const char *what; /* the command, for messages */
  bool exited;
};

/*
 * Text from a sandbox made safe for a terminal: C0 controls other than
 * newline and tab, DEL, and the C1 controls in their UTF-8 form (U+0080 to
 * U+009F, which some terminals obey) become '?'.
 */
void wr_cli_defuse(const char *data, size_t len, wr_buf_t *out) {
  const unsigned char *p = (const unsigned char *)data;

  for (size_t i = 0; i < len; i++) {
    unsigned char c = p[i];
    if (c == 0xc2 && i + 1 < len && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f) {
      wr_buf_puts(out, "?");
      i++;
    } else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      wr_buf_puts(out, "?");
    } else {
      wr_buf_append(out, &c, 1);
    }
  }
}

char *wr_cli_said(const wr_buf_t *errout) {
  _cleanup_(wr_buf_free) wr_buf_t safe = {0};
  size_t start = errout->len > 600 ? errout->len - 600 : 0;

  if (errout->data != NULL)
    wr_cli_defuse(errout->data + start, errout->len - start, &safe);
  while (safe.len > 0 && safe.data[safe.len - 1] == '\n')
    safe.data[--safe.len] = '\0';
  return wr_buf_steal(&safe, NULL);
}

/* Forward stderr bytes to ours, defused. */
static void forward_stderr(const wr_buf_t *data) {
  _cleanup_(wr_buf_free) wr_buf_t safe = {0};

  wr_cli_defuse(data->data, data->len, &safe);
  if (safe.len > 0)
    fwrite(safe.data, 1, safe.len, stderr);
  fflush(stderr);
}

/* Keep only the last ERR_KEEP bytes of stderr. */
static void keep_stderr(wr_buf_t *errout, const wr_buf_t *data) {
  wr_buf_append(errout, data->data, data->len);
  if (errout->len > ERR_KEEP)
    wr_buf_consume(errout, errout->len - ERR_KEEP);
}

/* One output event: stdout is bounded, stderr kept or forwarded. */
static int on_output(struct capture *c, bool is_stdout, const json_t *ev,
                     wr_error_t *err) {
  const char *b64 = wr_cli_jstr(ev, "data");
  _cleanup_(wr_buf_free) wr_buf_t data = {0};

  if (wr_base64_decode(b64, strlen(b64), &data, err) < 0)
    return wr_error_wrap(err, "output of `%s`", c->what);
  if (data.len == 0)
    return 0;
  if (!is_stdout) {
    if (c->r->errout != NULL)
      keep_stderr(c->r->errout, &data);
    else
      forward_stderr(&data);
    return 0;
  }
  if (c->r->out == NULL)
    return 0;
  if (c->r->out->len + data.len > c->r->max_out)
    return wr_error_set(err, 0,
                        "`%s` in the sandbox printed more than %zu bytes, "
                        "more than it should",
                        c->what, c->r->max_out);
  wr_buf_append(c->r->out, data.data, data.len);
  return 0;
}

/* The last event: how the process ended, or why it could not run. */
static int on_end(struct capture *c, const char *type, const json_t *ev,
                  wr_error_t *err) {
  if (strcmp(type, "error") == 0) {
    const json_t *e = json_object_get(ev, "error");
    return wr_error_set(err, 0, "`%s` in the sandbox failed: %s", c->what,
                        wr_cli_jstr(e, "message"));
  }
  c->exited = true;
  c->r->exit_code = (int)wr_cli_jint(ev, "exit_code");
  c->r->timed_out = wr_cli_jbool(ev, "timed_out");
  return 1;
}

static int on_event(json_t *ev, void *arg, wr_error_t *err) {
  struct capture *c = arg;
  const char *type = wr_cli_jstr(ev, "type");

  if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0)
    return on_output(c, type[3] == 'o', ev, err) < 0 ? -1 : 0;
  if (strcmp(type, "exit") == 0 || strcmp(type, "error") == 0)
    return on_end(c, type, ev, err);
  return 0;
}

/* {"cmd": [...], "cwd": ..., "stdin": ..., "timeout": ...} */
static char *run_body(const struct wr_cli_run_in *r) {
  _cleanup_json_ json_t *body = json_object();
  json_t *cmd = json_array();

  for (size_t i = 0; r->argv[i] != NULL; i++)
    json_array_append_new(cmd, json_string(r->argv[i]));
  json_object_set_new(body, "cmd", cmd);
  if (r->cwd != NULL)
    json_object_set_new(body, "cwd", json_string(r->cwd));
  if (r->stdin_text != NULL)
    json_object_set_new(body, "stdin", json_string(r->stdin_text));
  if (r->timeout_ms > 0)
    json_object_set_new(body, "timeout", wr_cli_seconds_json(r->timeout_ms));
  return wr_json_dumps(body);
}

/*
 * Every argument must be JSON text. The request is streamed so that a
 * long command (a clone, a bundle) never hits a whole-reply limit; an
 * answer other than 200 is the API's error, with its code for callers
 * that tell "not running" from the rest.
 */
int wr_cli_run_in(const struct wr_cli_ctx *ctx, const char *name,
                  struct wr_cli_run_in *r, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, "/exec");
  _cleanup_free_ char *body = NULL;
  struct capture cap = {.r = r, .what = r->argv[0]};

  r->exit_code = -1;
  r->timed_out = false;
  r->api_code[0] = '\0';
  for (size_t i = 0; r->argv[i] != NULL; i++)
    if (wr_cli_check_text(r->argv[i], "a command's argument", err) < 0)
      return -1;
  body = run_body(r);
  if (wr_cli_connect(ctx, &c, err) < 0 ||
      wr_http_request_stream(c, "POST", path, "application/json", body,
                             strlen(body), &resp, err) < 0)
    return -1;
  if (resp.status != 200) {
    wr_cli_stream_error(c, &resp, err);
    _cleanup_free_ char *code = wr_cli_error_code(&resp);
    wr_strlcpy(r->api_code, code, sizeof(r->api_code));
    return -1;
  }
  if (wr_cli_ndjson_read(c, on_event, &cap, err) < 0)
    return -1;
  if (!cap.exited)
    return wr_error_set(
        err, 0, "the connection to warrend ended before `%s` exited", cap.what);
  return 0;
}
