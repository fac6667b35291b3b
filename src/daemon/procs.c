/*
 * Processes spawned through warren-init, and the clients that follow them.
 *
 * Output is read by the daemon straight from the process's pipes (or pty
 * master); init never relays it. Each piece goes to every watcher as it
 * arrives: an NDJSON line with base64 data, or a frame on an upgraded
 * stream. Background processes also keep their recent output (1 MiB) so a
 * client can attach later and see it, and outlog.c writes it to disk, so
 * that a restarted daemon has it too. A foreground exec has one watcher and
 * nothing retained; when its only client is slow, reading pauses, so the
 * process blocks on a full pipe rather than the daemon buffering without
 * bound.
 *
 * When init reports the exit, whatever the process wrote is already in the
 * pipe: it is drained without waiting for EOF (a grandchild may hold the
 * pipe open for ever), then every watcher gets the exit and its request
 * ends.
 */
#include "daemon/initconn.h"
#include "daemon/outlog.h"
#include "daemon/procs.h"
#include "daemon/request.h"
#include "daemon/sandbox.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#define READ_CHUNK 65536
#define WATCHER_QUEUE_MAX (4u << 20)
#define FOREGROUND_HIGH_WATER (1u << 20)
#define STDIN_HIGH_WATER (1u << 20)
#define PROBE_INTERVAL_MS 1000

static void proc_free(struct wr_proc *p) {
  while (p->chunks != NULL) {
    struct wr_chunk *c = p->chunks;
    p->chunks = c->next;
    free(c);
  }
  wr_buf_free(&p->in.queue);
  wr_strv_free(p->argv);
  free(p->tag);
  wr_sandbox_unref(p->sb);
  free(p);
}

void wr_proc_unref(struct wr_proc *p) {
  if (--p->refs == 0)
    proc_free(p);
}

static void handle_closed(uv_handle_t *h) {
  wr_proc_unref(h->data);
}

static void close_handle(struct wr_proc *p, uv_handle_t *h) {
  h->data = p;
  uv_close(h, handle_closed);
}

struct wr_proc *wr_proc_new(struct wr_sandbox *sb) {
  struct wr_proc *p = xcalloc(1, sizeof(*p));

  p->sb = sb;
  p->refs = 1; /* the sandbox's list */
  p->running = true;
  p->started_ms = wr_now_ms();
  p->in.fd = -1;
  p->in.p = p;
  wr_buf_init(&p->in.queue);
  for (int i = 0; i < 2; i++) {
    p->out[i].p = p;
    p->out[i].fd = -1;
    p->out[i].stream = i + 1;
  }
  wr_sandbox_ref(sb);
  wr_outlog_proc_init(p);
  p->next = sb->procs;
  sb->procs = p;
  return p;
}

struct wr_proc *wr_proc_find_tag(struct wr_sandbox *sb, const char *tag) {
  for (struct wr_proc *p = sb->procs; p != NULL; p = p->next)
    if (p->tag != NULL && strcmp(p->tag, tag) == 0)
      return p;
  return NULL;
}

static struct wr_proc *find_id(struct wr_sandbox *sb, uint32_t proc_id) {
  for (struct wr_proc *p = sb->procs; p != NULL; p = p->next)
    if (p->proc_id == proc_id && proc_id != 0)
      return p;
  return NULL;
}

/* ---- output to watchers ---------------------------------------------------
 */

void wr_frame_send(wr_http_req_t *req, int type, const void *data, size_t len) {
  wr_buf_t b;

  wr_buf_init(&b);
  wr_frame_encode(&b, (uint8_t)type, data, len);
  wr_http_raw_write(req, b.data, b.len);
  wr_buf_free(&b);
}

static void send_json_line(wr_http_req_t *req, json_t *j) {
  _cleanup_free_ char *s = wr_json_dumps(j);
  size_t n = strlen(s);

  s[n] = '\n';
  wr_http_stream_write(req, s, n + 1);
  json_decref(j);
}

/* Send a piece of output to one watcher; returns the bytes it has queued. */
static size_t watcher_output(struct wr_watcher *w, int stream, const char *data,
                             size_t len, uint64_t offset) {
  if (w->frames) {
    wr_frame_send(w->req, stream == 2 ? WR_FRAME_STDERR : WR_FRAME_STDOUT, data,
                  len);
    return wr_http_raw_write(w->req, NULL, 0);
  }
  {
    _cleanup_free_ char *b64 = wr_base64_encode(data, len);
    json_t *j = json_pack("{s:s,s:s}", "type",
                          stream == 2 ? "stderr" : "stdout", "data", b64);
    if (w->p->background)
      json_object_set_new(j, "offset", json_integer((json_int_t)offset));
    send_json_line(w->req, j);
  }
  return wr_http_stream_write(w->req, NULL, 0);
}

/* Drop up to `excess` bytes from the front of the kept output: the whole
 * oldest chunk when it is no longer than that, else its first bytes, so
 * that exactly the last WR_PROC_RETAIN_BYTES stay (what `warren logs`
 * promises). */
static void forget_oldest(struct wr_proc *p, size_t excess) {
  struct wr_chunk *old = p->chunks;

  if (old->len <= excess && old->next != NULL) {
    p->chunks = old->next;
    p->held -= old->len;
    free(old);
    return;
  }
  excess = WR_MIN(excess, old->len);
  memmove(old->data, old->data + excess, old->len - excess);
  old->len -= excess;
  old->offset += excess;
  p->held -= excess;
}

static void retain(struct wr_proc *p, int stream, const char *data,
                   size_t len) {
  struct wr_chunk *c = xmalloc(sizeof(*c) + len);

  c->next = NULL;
  c->offset = p->total;
  c->stream = stream;
  c->len = len;
  memcpy(c->data, data, len);
  if (p->last_chunk != NULL)
    p->last_chunk->next = c;
  else
    p->chunks = c;
  p->last_chunk = c;
  p->held += len;
  while (p->held > WR_PROC_RETAIN_BYTES)
    forget_oldest(p, p->held - WR_PROC_RETAIN_BYTES);
}

static void watcher_end(struct wr_watcher *w, json_t *exit_json);
static void out_pause(struct wr_proc *p, bool pause);

static void proc_output(struct wr_proc *p, int stream, const char *data,
                        size_t len) {
  uint64_t offset = p->total;
  struct wr_watcher *next;

  if (p->background)
    retain(p, stream, data, len);
  p->total += len;
  if (p->observer != NULL)
    p->observer(p, stream, data, len, p->observer_arg);
  if (p->background)
    wr_outlog_kick(p->sb);
  for (struct wr_watcher *w = p->watchers; w != NULL; w = next) {
    size_t queued;
    next = w->next;
    if (wr_http_aborted(w->req))
      continue;
    queued = watcher_output(w, stream, data, len, offset);
    if (!p->background && queued > FOREGROUND_HIGH_WATER)
      out_pause(p, true);
    else if (p->background && queued > WATCHER_QUEUE_MAX)
      watcher_end(w, NULL); /* too slow to follow; it can re-attach */
  }
}

/* ---- reading the outputs ------------------------------------------------ */

static void out_close(struct wr_outsrc *o) {
  if (!o->open)
    return;
  o->open = false;
  /* The handle first: uv_close takes the fd out of epoll. Closing the fd
   * first would let libuv later remove whatever reused its number. */
  close_handle(o->p, (uv_handle_t *)&o->poll);
  close(o->fd);
  o->fd = -1;
}

/* Read what is there now (non-blocking); close on EOF or error. */
static void out_drain(struct wr_outsrc *o, bool once) {
  char buf[READ_CHUNK];

  while (o->open) {
    ssize_t n = read(o->fd, buf, sizeof(buf));
    if (n > 0) {
      proc_output(o->p, o->stream, buf, (size_t)n);
      if (once)
        return;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    out_close(o); /* EOF, or EIO from a pty whose slave closed */
  }
}

static void on_out_readable(uv_poll_t *h, int status, int events) {
  struct wr_outsrc *o = h->data;

  (void)events;
  if (status < 0) {
    out_close(o);
    return;
  }
  out_drain(o, true);
}

static void out_pause(struct wr_proc *p, bool pause) {
  for (int i = 0; i < 2; i++) {
    struct wr_outsrc *o = &p->out[i];
    if (!o->open || o->paused == pause)
      continue;
    o->paused = pause;
    if (pause)
      uv_poll_stop(&o->poll);
    else
      uv_poll_start(&o->poll, UV_READABLE, on_out_readable);
  }
}

static void out_open(struct wr_proc *p, int i, int fd) {
  struct wr_outsrc *o = &p->out[i];

  if (fd < 0)
    return;
  wr_set_nonblock(fd, true);
  if (uv_poll_init(p->sb->d->loop, &o->poll, fd) < 0) {
    close(fd);
    return;
  }
  o->fd = fd;
  o->open = true;
  o->poll.data = o;
  p->refs++;
  uv_poll_start(&o->poll, UV_READABLE, on_out_readable);
}

void wr_proc_set_outputs(struct wr_proc *p, int out_fd, int err_fd) {
  out_open(p, 0, out_fd);
  out_open(p, 1, err_fd);
}

/* ---- stdin ------------------------------------------------------------- */

static void in_close(struct wr_inwriter *in) {
  if (!in->open)
    return;
  in->open = false;
  in->polling = false;
  close_handle(in->p,
               (uv_handle_t *)&in->poll); /* before the fd: see out_close */
  close(in->fd);
  in->fd = -1;
}

static void in_flush(struct wr_inwriter *in);

static void on_in_writable(uv_poll_t *h, int status, int events) {
  struct wr_inwriter *in = h->data;

  (void)events;
  if (status < 0) {
    in_close(in);
    return;
  }
  in_flush(in);
}

/* Clients whose input was paused while the process's stdin was full may
 * send again (also when stdin closed: what they send is then dropped). */
static void resume_input(struct wr_proc *p) {
  for (struct wr_watcher *w = p->watchers; w != NULL; w = w->next) {
    if (w->input_paused) {
      w->input_paused = false;
      wr_http_raw_pause(w->req, false);
    }
  }
}

/* Write what the pipe takes; poll for more room when it is full. */
static void in_flush(struct wr_inwriter *in) {
  while (in->open && in->queue.len > 0) {
    ssize_t n = write(in->fd, in->queue.data, in->queue.len);
    if (n > 0) {
      wr_buf_consume(&in->queue, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      if (!in->polling) {
        in->polling = true;
        uv_poll_start(&in->poll, UV_WRITABLE, on_in_writable);
      }
      return;
    }
    in_close(in); /* EPIPE: the process closed its stdin */
    wr_buf_reset(&in->queue);
    resume_input(in->p);
    return;
  }
  if (in->open && in->polling) {
    in->polling = false;
    uv_poll_stop(&in->poll);
  }
  resume_input(in->p);
  if (in->open && in->eof_pending)
    in_close(in);
}

void wr_proc_set_input(struct wr_proc *p, int fd) {
  struct wr_inwriter *in = &p->in;

  if (fd < 0)
    return;
  wr_set_nonblock(fd, true);
  if (uv_poll_init(p->sb->d->loop, &in->poll, fd) < 0) {
    close(fd);
    return;
  }
  in->fd = fd;
  in->open = true;
  in->poll.data = in;
  p->refs++;
}

void wr_proc_write_input(struct wr_proc *p, const void *data, size_t len) {
  if (!p->in.open || p->in.eof_pending)
    return;
  wr_buf_append(&p->in.queue, data, len);
  in_flush(&p->in);
}

/* A pty has no EOF of its own: send ^D instead and keep it open. */
void wr_proc_close_input(struct wr_proc *p) {
  if (!p->in.open)
    return;
  if (p->tty) {
    wr_proc_write_input(p, "\x04", 1);
    return;
  }
  p->in.eof_pending = true;
  in_flush(&p->in);
}

/* ---- signals, JSON ------------------------------------------------------ */

static void signal_reply(void *arg, const struct wr_init_hdr *hdr,
                         const void *payload, int *fds, size_t nfds,
                         const wr_error_t *err) {
  (void)arg;
  (void)hdr;
  (void)payload;
  (void)err;
  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
}

void wr_proc_signal(struct wr_proc *p, int sig) {
  struct wr_init_signal s = {
      .proc_id = p->proc_id, .sig = sig, .flags = WR_SIGNAL_GROUP};
  wr_buf_t msg;

  if (p->proc_id == 0 || !p->running)
    return;
  wr_buf_init(&msg);
  wr_init_encode_simple(&msg, WR_INIT_SIGNAL, 0, &s, sizeof(s), 0);
  wr_initconn_request(p->sb->conn, &msg, NULL, 0, signal_reply, NULL, NULL);
  wr_buf_free(&msg);
}

static json_t *time_or_null(int64_t ms) {
  char buf[40];

  if (ms == 0)
    return json_null();
  wr_format_time(ms, buf, sizeof(buf));
  return json_string(buf);
}

static json_t *argv_json(char **argv) {
  json_t *a = json_array();

  for (size_t i = 0; argv != NULL && argv[i] != NULL; i++)
    json_array_append_new(a, json_string(argv[i]));
  return a;
}

json_t *wr_proc_exit_json(const struct wr_proc *p) {
  int code = 0;
  json_t *sig = json_null();

  if (WIFEXITED(p->status))
    code = WEXITSTATUS(p->status);
  else if (WIFSIGNALED(p->status)) {
    code = 128 + WTERMSIG(p->status);
    sig = json_string(wr_signal_name(WTERMSIG(p->status)));
  }
  return json_pack("{s:s,s:i,s:o,s:b,s:I}", "type", "exit", "exit_code", code,
                   "signal", sig, "timed_out", p->timed_out, "duration_ms",
                   (json_int_t)(p->finished_ms - p->started_ms));
}

json_t *wr_proc_json(const struct wr_proc *p) {
  json_t *j = json_pack(
      "{s:s?,s:i,s:o,s:b,s:b,s:o,s:o,s:I}", "tag", p->tag, "pid", p->pid, "cmd",
      argv_json(p->argv), "tty", p->tty, "running", p->running, "started_at",
      time_or_null(p->started_ms), "finished_at", time_or_null(p->finished_ms),
      "output_bytes", (json_int_t)p->total);

  if (p->have_status) {
    json_t *e = wr_proc_exit_json(p);
    json_object_set(j, "exit_code", json_object_get(e, "exit_code"));
    json_object_set(j, "signal", json_object_get(e, "signal"));
    json_decref(e);
  } else {
    json_object_set_new(j, "exit_code", json_null());
    json_object_set_new(j, "signal", json_null());
  }
  return j;
}

/* ---- watchers ------------------------------------------------------------ */

static void watcher_unlink(struct wr_watcher *w) {
  struct wr_watcher **pp = &w->p->watchers;

  while (*pp != NULL && *pp != w)
    pp = &(*pp)->next;
  if (*pp == w)
    *pp = w->next;
}

static void watcher_free(struct wr_watcher *w) {
  struct wr_proc *p = w->p;

  watcher_unlink(w);
  wr_frame_decoder_free(&w->in);
  free(w);
  wr_proc_unref(p);
}

/* Finish a watcher's request: with the exit when there is one. */
static void watcher_end(struct wr_watcher *w, json_t *exit_json) {
  wr_http_req_t *req = w->req;
  bool frames = w->frames;

  watcher_free(w);
  if (frames) {
    if (exit_json != NULL) {
      _cleanup_free_ char *s = NULL;
      json_object_del(exit_json, "type"); /* the frame type says it */
      s = wr_json_dumps(exit_json);
      wr_frame_send(req, WR_FRAME_EXIT, s, strlen(s));
    }
    wr_http_raw_close(req);
  } else {
    if (exit_json != NULL)
      send_json_line(req, json_incref(exit_json));
    wr_http_stream_end(req);
  }
  json_decref(exit_json);
}

static void on_watcher_drain(wr_http_req_t *req, void *arg) {
  struct wr_watcher *w = arg;

  (void)req;
  if (!w->p->background)
    out_pause(w->p, false);
}

static void on_watcher_abort(wr_http_req_t *req, void *arg) {
  struct wr_watcher *w = arg;
  struct wr_proc *p = w->p;

  (void)req;
  /* A foreground exec dies with its client; a background process stays. */
  if (!p->background && p->running && !p->killed_on_abort) {
    p->killed_on_abort = true;
    wr_proc_signal(p, SIGKILL);
  }
  watcher_end(w, NULL);
}

static void on_watcher_data(wr_http_req_t *req, const char *data, size_t len,
                            void *arg) {
  struct wr_watcher *w = arg;

  if (wr_watcher_input(w, data, len) < 0) {
    const char *e =
        "{\"code\":\"bad_request\",\"message\":\"malformed frame\"}";
    wr_frame_send(req, WR_FRAME_ERROR, e, strlen(e));
    on_watcher_abort(req, w);
  }
}

/*
 * Probing a client that stopped sending. A client that is gone must not
 * leave its foreground process running until that process happens to
 * write (a quiet `sleep`, a server, a long build would run on, unlisted
 * and unkillable), yet EOF alone cannot tell it from one that only shut
 * down its sending side. An empty STDOUT frame can: a half-closed client
 * ignores it, while writing to a closed one fails, which aborts the
 * request and so kills the process. On a unix socket the first probe
 * fails at once; on TCP it draws the peer's reset and a later one fails,
 * hence a probe every PROBE_INTERVAL_MS while the process runs. The timer
 * holds a reference on the process and never keeps the loop alive.
 */
struct probe {
  uv_timer_t timer;
  struct wr_proc *p;
  const struct wr_watcher *w; /* compared, used only while still listed */
};

static bool still_watching(const struct wr_proc *p,
                           const struct wr_watcher *w) {
  for (const struct wr_watcher *x = p->watchers; x != NULL; x = x->next)
    if (x == w)
      return true;
  return false;
}

static void probe_closed(uv_handle_t *h) {
  struct probe *pr = h->data;

  wr_proc_unref(pr->p);
  free(pr);
}

static void on_probe(uv_timer_t *t) {
  struct probe *pr = t->data;

  if (!pr->p->running || !still_watching(pr->p, pr->w) ||
      wr_http_aborted(pr->w->req)) {
    uv_timer_stop(t);
    uv_close((uv_handle_t *)t, probe_closed);
    return;
  }
  wr_frame_send(pr->w->req, WR_FRAME_STDOUT, NULL, 0);
}

static void start_probing(struct wr_watcher *w) {
  struct probe *pr = xcalloc(1, sizeof(*pr));

  pr->p = w->p;
  pr->w = w;
  w->p->refs++;
  uv_timer_init(w->p->sb->d->loop, &pr->timer);
  pr->timer.data = pr;
  uv_timer_start(&pr->timer, on_probe, 0, PROBE_INTERVAL_MS);
  uv_unref((uv_handle_t *)&pr->timer);
}

/*
 * The client stopped sending (EOF on the upgraded connection). It may have
 * shut down only its sending side, or be gone: both look the same here.
 * For a foreground process without a tty this is the end of its input (and
 * the client is probed, above); a pty has no such thing, so a foreground
 * tty session ends as if aborted; from a background process the client
 * just detaches.
 */
static void on_watcher_close(wr_http_req_t *req, void *arg) {
  struct wr_watcher *w = arg;
  struct wr_proc *p = w->p;

  if (p->background) {
    watcher_end(w, NULL);
  } else if (p->tty) {
    on_watcher_abort(req, w);
  } else if (w->interactive) {
    wr_proc_close_input(p);
    if (p->running)
      start_probing(w);
  }
}

static void replay(struct wr_watcher *w, uint64_t from) {
  for (struct wr_chunk *c = w->p->chunks; c != NULL; c = c->next) {
    size_t skip = 0;
    if (c->offset + c->len <= from)
      continue;
    if (from > c->offset)
      skip = (size_t)(from - c->offset);
    watcher_output(w, c->stream, c->data + skip, c->len - skip,
                   c->offset + skip);
  }
}

struct wr_watcher *wr_watch(struct wr_proc *p, wr_http_req_t *req, bool frames,
                            bool interactive, bool follow, uint64_t offset) {
  struct wr_watcher *w = xcalloc(1, sizeof(*w));

  w->p = p;
  w->req = req;
  w->frames = frames;
  w->interactive = interactive;
  w->follow = follow;
  wr_frame_decoder_init(&w->in, WR_FRAME_MAX_IN);
  p->refs++;
  w->next = p->watchers;
  p->watchers = w;
  if (frames) {
    if (wr_http_upgrade(req, "warren-exec", on_watcher_data, on_watcher_close,
                        w) < 0) {
      watcher_unlink(w);
      wr_frame_decoder_free(&w->in);
      free(w);
      wr_proc_unref(p);
      wr_http_reply_error(req, 400, "bad_request", "upgrade failed");
      return NULL;
    }
  } else {
    wr_http_stream_begin(req, 200, "application/x-ndjson", NULL);
  }
  wr_http_on_abort(req, on_watcher_abort, w);
  wr_http_on_drain(req, on_watcher_drain, w);
  replay(w, offset);
  if (!p->running || !follow)
    watcher_end(w, p->have_status ? wr_proc_exit_json(p) : NULL);
  return w;
}

static int handle_frame(struct wr_watcher *w, int type, const char *data,
                        size_t len) {
  struct wr_proc *p = w->p;

  if (!w->interactive)
    return 0;
  switch (type) {
  case WR_FRAME_STDIN:
    wr_proc_write_input(p, data, len);
    if (p->in.queue.len > STDIN_HIGH_WATER && !w->input_paused) {
      w->input_paused = true; /* until the process reads (in_flush) */
      wr_http_raw_pause(w->req, true);
    }
    return 0;
  case WR_FRAME_STDIN_EOF:
    wr_proc_close_input(p);
    return 0;
  case WR_FRAME_RESIZE: {
    struct winsize ws = {0};
    if (len != 4)
      return -1;
    ws.ws_row = (unsigned short)(((unsigned char)data[0] << 8) |
                                 (unsigned char)data[1]);
    ws.ws_col = (unsigned short)(((unsigned char)data[2] << 8) |
                                 (unsigned char)data[3]);
    if (p->tty && p->in.open)
      ioctl(p->in.fd, TIOCSWINSZ, &ws);
    return 0;
  }
  case WR_FRAME_SIGNAL: {
    _cleanup_free_ char *name = xstrndup(data, len);
    int sig = wr_signal_from_name(name);
    if (sig <= 0)
      return -1;
    wr_proc_signal(p, sig);
    return 0;
  }
  default:
    return -1;
  }
}

int wr_watcher_input(struct wr_watcher *w, const char *data, size_t len) {
  struct wr_frame f;
  int r;

  wr_frame_feed(&w->in, data, len);
  while ((r = wr_frame_next(&w->in, &f, NULL)) == 1)
    if (handle_frame(w, f.type, f.data, f.len) < 0)
      return -1;
  return r;
}

/* ---- exit and removal --------------------------------------------------- */

static void stop_timer(struct wr_proc *p) {
  if (p->timer_init) {
    p->timer_init = false;
    uv_timer_stop(&p->timer);
    close_handle(p, (uv_handle_t *)&p->timer);
  }
}

/* The process is gone: drain and close its outputs, tell the watchers. */
static void proc_finish(struct wr_proc *p, bool have_status, int status) {
  p->running = false;
  p->have_status = have_status;
  p->status = status;
  p->finished_ms = wr_now_ms();
  stop_timer(p);
  for (int i = 0; i < 2; i++) {
    out_drain(&p->out[i], false);
    out_close(&p->out[i]);
  }
  in_close(&p->in);
  while (p->watchers != NULL) {
    json_t *e = have_status ? wr_proc_exit_json(p) : NULL;
    struct wr_watcher *w = p->watchers;
    if (!have_status && !wr_http_aborted(w->req) && w->frames) {
      const char *msg = "{\"code\":\"sandbox_gone\",\"message\":"
                        "\"the sandbox stopped\"}";
      wr_frame_send(w->req, WR_FRAME_ERROR, msg, strlen(msg));
    }
    watcher_end(w, e);
  }
  if (p->observer != NULL)
    p->observer(p, 0, NULL, 0, p->observer_arg);
  if (!p->background)
    wr_proc_remove(p);
}

void wr_proc_remove(struct wr_proc *p) {
  struct wr_proc **pp = &p->sb->procs;

  if (p->gone)
    return;
  while (*pp != NULL && *pp != p)
    pp = &(*pp)->next;
  if (*pp == p)
    *pp = p->next;
  p->gone = true;
  stop_timer(p);
  for (int i = 0; i < 2; i++)
    out_close(&p->out[i]);
  in_close(&p->in);
  wr_outlog_forget(p);
  wr_proc_unref(p);
}

void wr_procs_on_exit(struct wr_sandbox *sb, const struct wr_init_exit *ev) {
  struct wr_proc *p = find_id(sb, ev->proc_id);

  if (p == NULL || !p->running)
    return;
  p->refs++;
  proc_finish(p, true, ev->status);
  wr_proc_unref(p);
}

void wr_procs_sandbox_gone(struct wr_sandbox *sb) {
  struct wr_proc *p = sb->procs, *next;

  for (; p != NULL; p = next) {
    next = p->next;
    if (!p->running)
      continue;
    p->refs++;
    proc_finish(p, false, 0);
    wr_proc_unref(p);
  }
}

void wr_procs_free_all(struct wr_sandbox *sb) {
  while (sb->procs != NULL)
    wr_proc_remove(sb->procs);
}

/* Their files go in one sweep, with any left by processes a restarted
 * daemon could not take back. */
void wr_procs_forget_all(struct wr_sandbox *sb) {
  sb->outlog.clearing = true;
  wr_procs_free_all(sb);
  sb->outlog.clearing = false;
  wr_outlog_clear(sb);
}

/* ---- recovery after a daemon restart --------------------------------------
 */

/* Adopt one LISTED entry: a background process comes back with its output
 * fds; any other process had its pipes to the old daemon and is dropped. */
static void adopt_listed(struct wr_sandbox *sb, const struct wr_init_proc *e,
                         int *fds, size_t *used) {
  struct wr_proc *p;
  unsigned nfds = e->has_fds ? ((e->flags & WR_SPAWN_TTY) ? 1 : 2) : 0;

  if (!(e->flags & WR_SPAWN_BACKGROUND) || wr_proc_find_tag(sb, e->tag)) {
    struct wr_init_forget f = {.proc_id = e->proc_id};
    wr_buf_t msg;
    for (unsigned i = 0; i < nfds; i++)
      close(fds[(*used)++]);
    wr_buf_init(&msg);
    wr_init_encode_simple(&msg, WR_INIT_FORGET, 0, &f, sizeof(f), 0);
    wr_initconn_request(sb->conn, &msg, NULL, 0, signal_reply, NULL, NULL);
    wr_buf_free(&msg);
    return;
  }
  p = wr_proc_new(sb);
  p->proc_id = e->proc_id;
  p->pid = e->pid;
  p->tag = xstrdup(e->tag);
  p->argv = wr_strv_push(NULL, e->cmd);
  p->tty = (e->flags & WR_SPAWN_TTY) != 0;
  p->background = true;
  p->started_ms = e->started_ms;
  p->running = e->running;
  if (!e->running) {
    p->have_status = true;
    p->status = e->status;
    p->finished_ms = p->started_ms;
  }
  wr_outlog_adopt(p); /* before its output is read again */
  if (nfds == 1) {
    wr_proc_set_input(p, fcntl(fds[*used], F_DUPFD_CLOEXEC, 3));
    wr_proc_set_outputs(p, fds[*used], -1);
  } else if (nfds == 2) {
    wr_proc_set_outputs(p, fds[*used], fds[*used + 1]);
  }
  *used += nfds;
}

static void on_listed(void *arg, const struct wr_init_hdr *hdr,
                      const void *payload, int *fds, size_t nfds,
                      const wr_error_t *err) {
  struct wr_sandbox *sb = arg;
  struct wr_init_listed l;
  size_t used = 0;

  if (hdr == NULL) {
    wr_warn("sandbox %s: list processes: %s", sb->name, err->msg);
  } else if (hdr->type != WR_INIT_LISTED ||
             wr_init_decode_listed(payload, hdr->len, &l, NULL) < 0 ||
             wr_init_listed_nfds(&l) != nfds) {
    wr_warn("sandbox %s: bad process list from init", sb->name);
  } else {
    for (uint32_t i = 0; i < l.count; i++)
      adopt_listed(sb, &l.procs[i], fds, &used);
    free(l.procs);
    if (!l.more) {
      wr_outlog_recovered(sb, true);
      wr_sandbox_unref(sb);
    }
    return;
  }
  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
  wr_outlog_recovered(sb, false);
  wr_sandbox_unref(sb);
}

static void list_processes(struct wr_sandbox *sb) {
  wr_buf_t msg;
  wr_error_t err;

  if (sb->conn == NULL)
    return;
  wr_buf_init(&msg);
  wr_init_encode_simple(&msg, WR_INIT_LIST, 0, NULL, 0, 0);
  wr_sandbox_ref(sb);
  if (wr_initconn_request(sb->conn, &msg, NULL, 0, on_listed, sb, &err) < 0) {
    wr_warn("sandbox %s: list processes: %s", sb->name, err.msg);
    wr_outlog_recovered(sb, false);
    wr_sandbox_unref(sb);
  }
  wr_buf_free(&msg);
}

/* The kept output is read back first, so that each process comes back
 * with it before its pipes are read again. */
void wr_procs_recover(struct wr_sandbox *sb) {
  wr_outlog_recover(sb, list_processes);
}
