/*
 * The interactive side of `exec` and `attach`: one poll loop over the
 * upgraded socket, the local stdin and a signalfd.
 *
 * Output frames are written to fd 1 and 2 as soon as they are decoded.
 * Frames for the daemon are queued and written without blocking: the loop
 * must keep reading the socket while the daemon is slow to read, or both
 * sides could wait on each other with full buffers. Stdin is read only
 * while the queue is short, which is our backpressure.
 *
 * Signals that would end the program (INT, TERM, HUP, QUIT) and SIGWINCH
 * are blocked and read from a signalfd, so they become events here: sent
 * to the process, or a detach, and never a death with the terminal left
 * in raw mode.
 */
#include "cli/cli.h"

#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>

#define QUEUE_HIGH (256u << 10)
#define GIVE_UP_SIGNALS 3

struct stream {
  const struct wr_cli_stream_opts *o;
  struct wr_cli_stream_result *res;
  int sock;
  int in_fd; /* -1 when stdin is not (or no longer) forwarded */
  int sig_fd;
  wr_buf_t queue; /* encoded frames waiting for the socket */
  struct wr_frame_decoder dec;
  struct wr_cli_detach detach;
  unsigned nsignals;
  bool done;
};

/* A JSON payload of STARTED, EXIT or ERROR; garbage becomes {}. */
static json_t *payload_json(const struct wr_frame *f) {
  json_t *j = json_loadb(f->data, f->len, 0, NULL);

  if (!json_is_object(j)) {
    json_decref(j);
    j = json_object();
  }
  return j;
}

/* Write output locally; a closed stdout ends the stream like SIGPIPE. */
static int output(struct stream *s, int fd, const struct wr_frame *f,
                  wr_error_t *err) {
  if (wr_write_all(fd, f->data, f->len, err) == 0)
    return 0;
  if (err->code != EPIPE)
    return wr_error_wrap(err, "write output");
  s->res->signal = SIGPIPE;
  s->done = true;
  return 0;
}

/* One frame from the daemon: output is written at once; EXIT and ERROR
 * end the stream. */
static int handle_frame(struct stream *s, const struct wr_frame *f,
                        wr_error_t *err) {
  switch (f->type) {
  case WR_FRAME_STARTED:
    s->res->started = true;
    return 0;
  case WR_FRAME_STDOUT:
    return output(s, STDOUT_FILENO, f, err);
  case WR_FRAME_STDERR:
    return output(s, STDERR_FILENO, f, err);
  case WR_FRAME_EXIT:
    json_decref(s->res->exit);
    s->res->exit = payload_json(f);
    s->done = true;
    return 0;
  case WR_FRAME_ERROR:
    json_decref(s->res->error);
    s->res->error = payload_json(f);
    s->done = true;
    return 0;
  default:
    return 0; /* unknown frames are for newer clients */
  }
}

/* Every complete frame buffered so far, stopping at the end of the stream. */
static int drain_frames(struct stream *s, wr_error_t *err) {
  struct wr_frame f;
  int r;

  while (!s->done && (r = wr_frame_next(&s->dec, &f, err)) != 0) {
    if (r < 0 || handle_frame(s, &f, err) < 0)
      return -1;
  }
  return 0;
}

/* Reads what is there (the socket is non-blocking) and decodes it. */
static int read_socket(struct stream *s, wr_error_t *err) {
  char buf[65536];
  ssize_t n = read(s->sock, buf, sizeof(buf));

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return 0;
  if (n <= 0) {
    s->done = true; /* closed or reset: the caller sees no EXIT */
    return 0;
  }
  wr_frame_feed(&s->dec, buf, (size_t)n);
  return drain_frames(s, err);
}

/* Write what the socket takes now; on a write error stop sending and let
 * the read side see the end of the connection. */
static void flush_queue(struct stream *s) {
  ssize_t n = write(s->sock, s->queue.data, s->queue.len);

  if (n > 0) {
    wr_buf_consume(&s->queue, (size_t)n);
  } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
    wr_buf_reset(&s->queue);
    s->in_fd = -1;
  }
}

static void stdin_eof(struct stream *s) {
  s->in_fd = -1;
  if (s->o->send_eof)
    wr_frame_encode(&s->queue, WR_FRAME_STDIN_EOF, NULL, 0);
}

/* Forward typed bytes, watching for the detach keys when asked to. */
static void read_stdin(struct stream *s) {
  char buf[32768];
  _cleanup_(wr_buf_free) wr_buf_t keep = {0};
  ssize_t n = read(s->in_fd, buf, sizeof(buf));

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0) {
    stdin_eof(s);
    return;
  }
  if (!s->o->detach_keys) {
    wr_frame_encode(&s->queue, WR_FRAME_STDIN, buf, (size_t)n);
    return;
  }
  if (wr_cli_detach_feed(&s->detach, buf, (size_t)n, &keep)) {
    s->res->detached = true;
    s->done = true;
  }
  if (keep.len > 0)
    wr_frame_encode(&s->queue, WR_FRAME_STDIN, keep.data, keep.len);
}

/* rows_less: first one row less, so that the size changes and the
 * program gets SIGWINCH (and redraws) even when it had our size. */
static void send_resize(struct stream *s, bool rows_less) {
  unsigned rows, cols;

  wr_cli_tty_size(&rows, &cols);
  rows = WR_MIN(rows, 65535u);
  cols = WR_MIN(cols, 65535u);
  if (rows == 0 || cols == 0)
    return;
  if (rows_less && rows > 1)
    wr_frame_encode_resize(&s->queue, (uint16_t)(rows - 1), (uint16_t)cols);
  wr_frame_encode_resize(&s->queue, (uint16_t)rows, (uint16_t)cols);
}

/*
 * A terminating signal goes to the process (docker's sig-proxy), unless
 * this stream detaches on signals. Someone who sends it three times wants
 * out regardless of what the process does with it.
 */
static void handle_signal(struct stream *s, int sig) {
  const char *name = wr_signal_name(sig);

  if (sig == SIGWINCH) {
    if (s->o->tty)
      send_resize(s, false);
    return;
  }
  if (s->o->signal_detach) {
    s->res->detached = true;
    s->done = true;
    return;
  }
  if (++s->nsignals >= GIVE_UP_SIGNALS) {
    s->res->signal = sig;
    s->done = true;
    return;
  }
  wr_frame_encode(&s->queue, WR_FRAME_SIGNAL, name, strlen(name));
}

static void read_signals(struct stream *s) {
  struct signalfd_siginfo si;

  while (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
    handle_signal(s, (int)si.ssi_signo);
}

/* Until the stream ends: signals first (a resize before the typing that
 * follows it), then input, then the socket in both directions. */
static int loop(struct stream *s, wr_error_t *err) {
  while (!s->done) {
    struct pollfd p[3] = {
        {s->sock, (short)(POLLIN | (s->queue.len ? POLLOUT : 0)), 0},
        {s->queue.len < QUEUE_HIGH ? s->in_fd : -1, POLLIN, 0},
        {s->sig_fd, POLLIN, 0},
    };
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      return wr_error_set(err, errno, "poll");
    }
    if (p[2].revents != 0)
      read_signals(s);
    if (p[1].revents != 0 && !s->done)
      read_stdin(s);
    if ((p[0].revents & POLLOUT) && s->queue.len > 0)
      flush_queue(s);
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !s->done &&
        read_socket(s, err) < 0)
      return -1;
  }
  return 0;
}

/* The signals the loop takes over while it runs. */
static void loop_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGHUP);
  sigaddset(set, SIGQUIT);
  sigaddset(set, SIGWINCH);
}

/* Everything between blocking the signals and unblocking them. */
static int run_blocked(struct stream *s, const char *leftover, size_t nleftover,
                       wr_error_t *err) {
  struct wr_cli_tty tty = {.fd = -1, .raw = false};
  int r;

  if (s->o->tty) {
    if (wr_cli_tty_raw(&tty, STDIN_FILENO, err) < 0)
      return -1;
    /* the process's terminal may have another size */
    send_resize(s, s->o->redraw);
  }
  wr_frame_feed(&s->dec, leftover, nleftover);
  r = drain_frames(s, err);
  if (r == 0)
    r = loop(s, err);
  wr_cli_tty_restore(&tty);
  return r;
}

/* Signals are blocked before the terminal goes raw and unblocked after it
 * is restored, so no way out leaves it raw. */
int wr_cli_stream_run(int sock, const char *leftover, size_t nleftover,
                      const struct wr_cli_stream_opts *o,
                      struct wr_cli_stream_result *res, wr_error_t *err) {
  struct stream s = {.o = o, .res = res, .sock = sock, .sig_fd = -1};
  sigset_t set, old;
  int r;

  memset(res, 0, sizeof(*res));
  if (wr_set_nonblock(sock, true) < 0)
    return wr_error_set(err, errno, "set the connection non-blocking");
  s.in_fd = o->forward_stdin ? STDIN_FILENO : -1;
  if (o->keys != NULL)
    s.detach = *o->keys;
  wr_frame_decoder_init(&s.dec, WR_FRAME_MAX_PAYLOAD);
  if (!o->forward_stdin && o->send_eof)
    wr_frame_encode(&s.queue, WR_FRAME_STDIN_EOF, NULL, 0);
  loop_signals(&set);
  sigprocmask(SIG_BLOCK, &set, &old);
  s.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (s.sig_fd < 0)
    r = wr_error_set(err, errno, "signalfd");
  else
    r = run_blocked(&s, leftover, nleftover, err);
  if (s.sig_fd >= 0)
    close(s.sig_fd);
  sigprocmask(SIG_SETMASK, &old, NULL);
  wr_buf_free(&s.queue);
  wr_frame_decoder_free(&s.dec);
  return r;
}

void wr_cli_stream_result_free(struct wr_cli_stream_result *res) {
  json_decref(res->exit);
  json_decref(res->error);
  res->exit = res->error = NULL;
}

int wr_cli_exit_code(const json_t *exit) {
  int64_t code = wr_cli_jint(exit, "exit_code");

  if (wr_cli_jbool(exit, "timed_out"))
    return WR_CLI_EXIT_TIMEOUT;
  if (code < 0 || code > 255)
    return WR_CLI_EXIT_ERROR;
  return (int)code;
}

int wr_cli_stream_request(const struct wr_cli_ctx *ctx, const char *method,
                          const char *path, const char *body,
                          const struct wr_cli_stream_opts *so,
                          struct wr_cli_stream_result *res, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_(wr_buf_free) wr_buf_t leftover = {0};
  char buf[4096];
  size_t n;
  int fd = -1;

  if (wr_cli_connect(ctx, &c, err) < 0 ||
      wr_http_request_upgrade(c, method, path, "warren-exec", body,
                              body ? strlen(body) : 0, &resp, &fd, err) < 0)
    return -1;
  if (resp.status != 101 || fd < 0) {
    _cleanup_free_ char *msg = wr_http_error_message(&resp);
    return wr_error_setx(err, 0, "%s", msg);
  }
  while ((n = wr_http_client_leftover(c, buf, sizeof(buf))) > 0)
    wr_buf_append(&leftover, buf, n);
  return wr_cli_stream_run(fd, leftover.data, leftover.len, so, res, err);
}
