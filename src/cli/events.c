/*
 * `warren events`: the daemon's lifecycle events, as the journal holds
 * them or followed as they happen (GET /v1/events).
 *
 * Following reads the Server-Sent Events stream with the decoder in
 * src/api/sse.c. When the stream ends (the daemon restarts, or cut this
 * client off for reading too slowly) it connects again and asks for what
 * came after the last id it printed, so that nothing is printed twice and
 * nothing the journal still holds is missed.
 */
#include "cli/cli.h"

#include <jansson.h>
#include <time.h>

/* The largest event line or data the CLI accepts from the daemon. */
#define EVENT_MAX (1u << 20)
/* Between attempts to reach a daemon that went away. */
#define RECONNECT_MS 200

static const char help[] =
    "Usage: warren events [--follow] [--json] [--since ID] [--sandbox NAME]\n"
    "                     [--type T[,T...]]\n"
    "\n"
    "Print what happened to sandboxes (created, started, paused, resumed,\n"
    "stopped, removed, error, ...), oldest first, from the daemon's\n"
    "journal of recent events. With --follow, keep printing events as\n"
    "they happen; when the daemon restarts, reconnect and go on from the\n"
    "last event printed (a line on stderr says so).\n"
    "\n"
    "Options:\n"
    "  -f, --follow          keep printing new events\n"
    "      --json            one JSON object per line\n"
    "      --since ID        only events after this id\n"
    "      --sandbox NAME    only this sandbox's events (name or id)\n"
    "      --type T[,T...]   only these types\n"
    "  -h, --help            show this help\n"
    "\n"
    "Example:\n"
    "  warren events --follow --sandbox web --type paused,resumed\n";

static const struct option longopts[] = {
    {"follow", no_argument, NULL, 'f'},
    {"json", no_argument, NULL, 'j'},
    {"since", required_argument, NULL, 's'},
    {"sandbox", required_argument, NULL, 'S'},
    {"type", required_argument, NULL, 't'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int wr_cli_events_parse(int argc, char **argv, struct wr_cli_events_opts *o,
                        wr_error_t *err) {
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":fh", longopts, err)) != -1) {
    switch (c) {
    case 'f':
      o->follow = true;
      break;
    case 'j':
      o->json = true;
      break;
    case 's':
      if (wr_parse_u64(optarg, 0, INT64_MAX, &o->since, err) < 0)
        return wr_error_wrap(err, "--since");
      break;
    case 'S':
      o->sandbox = optarg;
      break;
    case 't':
      o->types = optarg;
      break;
    case 'h':
      o->help = true;
      return 0;
    default:
      return -1;
    }
  }
  if (optind != argc)
    return wr_error_setx(err, 0, "unexpected argument `%s`", argv[optind]);
  if ((o->sandbox && wr_cli_check_text(o->sandbox, "--sandbox", err) < 0) ||
      (o->types && wr_cli_check_text(o->types, "--type", err) < 0))
    return -1;
  return 0;
}

char *wr_cli_events_path(const struct wr_cli_events_opts *o, uint64_t since) {
  wr_buf_t b = {0};

  wr_buf_printf(&b, "/v1/events?follow=%s", o->follow ? "true" : "false");
  if (since > 0)
    wr_buf_printf(&b, "&since=%llu", (unsigned long long)since);
  if (o->sandbox != NULL) {
    _cleanup_free_ char *esc = wr_cli_escape(o->sandbox);
    wr_buf_printf(&b, "&sandbox=%s", esc);
  }
  if (o->types != NULL) {
    _cleanup_free_ char *esc = wr_cli_escape(o->types);
    wr_buf_printf(&b, "&type=%s", esc);
  }
  return wr_buf_steal(&b, NULL);
}

/* What an event says beyond its id, time, type and sandbox. */
static void put_details(wr_buf_t *b, const json_t *ev) {
  const char *key;
  json_t *value;

  json_object_foreach ((json_t *)ev, key, value) {
    _cleanup_free_ char *text = NULL;
    _cleanup_free_ char *quoted = NULL;

    if (strcmp(key, "id") == 0 || strcmp(key, "time") == 0 ||
        strcmp(key, "type") == 0 || strcmp(key, "sandbox") == 0)
      continue;
    text = json_is_string(value) ? xstrdup(json_string_value(value))
                                 : wr_json_dumps(value);
    quoted = wr_cli_quote(text);
    wr_buf_printf(b, "  %s=%s", key, quoted);
  }
}

char *wr_cli_event_line(const json_t *ev) {
  wr_buf_t b = {0};
  int64_t ms = wr_cli_jint(ev, "time");
  time_t t = (time_t)(ms / 1000);
  const json_t *sb = json_object_get(ev, "sandbox");
  _cleanup_free_ char *type = wr_cli_quote(wr_cli_jstr(ev, "type"));
  struct tm tm;
  char clock[16] = "--:--:--";

  if (ms >= 0 && localtime_r(&t, &tm) != NULL)
    strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
  wr_buf_printf(&b, "%s.%03d  %-8s", clock, (int)(ms >= 0 ? ms % 1000 : 0),
                type);
  if (json_is_object(sb)) {
    _cleanup_free_ char *name = wr_cli_quote(wr_cli_jstr(sb, "name"));
    _cleanup_free_ char *id = wr_cli_quote(wr_cli_jstr(sb, "id"));
    wr_buf_printf(&b, " %s (%s)", name, id);
  }
  put_details(&b, ev);
  return wr_buf_steal(&b, NULL);
}

/* Print one event; -1 (EPIPE) once stdout is gone, which ends quietly. */
static int print_event(const json_t *ev, bool as_json, wr_error_t *err) {
  _cleanup_free_ char *line =
      as_json ? json_dumps(ev, JSON_COMPACT | wr_cli_json_flags())
              : wr_cli_event_line(ev);

  if (line == NULL || printf("%s\n", line) < 0 || fflush(stdout) != 0)
    return wr_error_set(err, EPIPE, "write to stdout");
  return 0;
}

/* ---- the journal --------------------------------------------------------- */

static int print_journal(const struct wr_cli_ctx *ctx,
                         const struct wr_cli_events_opts *o, wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_events_path(o, o->since);
  _cleanup_json_ json_t *reply = NULL;
  json_t *events, *ev;
  size_t i;

  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, err) < 0)
    return -1;
  events = json_object_get(reply, "events");
  if (!json_is_array(events))
    return wr_error_setx(err, EPROTO, "the daemon's reply has no events");
  if (wr_cli_jbool(reply, "truncated"))
    fprintf(stderr, "warren: older events have left the journal\n");
  json_array_foreach (events, i, ev) {
    if (print_event(ev, o->json, err) < 0)
      return -1;
  }
  return 0;
}

/* ---- following ----------------------------------------------------------- */

struct follower {
  const struct wr_cli_events_opts *o;
  uint64_t last; /* the id of the last event printed (or --since) */
};

/* "gap" and "cutoff" are about the stream, not sandboxes: notes on
 * stderr. Every other event is printed. */
static int on_sse(void *arg, const struct wr_sse_event *sse, wr_error_t *err) {
  struct follower *f = arg;
  _cleanup_json_ json_t *ev = NULL;

  if (strcmp(sse->event, "gap") == 0) {
    fprintf(stderr, "warren: some events after %llu have left the journal\n",
            (unsigned long long)f->last);
    return 0;
  }
  if (strcmp(sse->event, "cutoff") == 0) {
    fprintf(stderr, "warren: the daemon cut this reader off as too slow; "
                    "reconnecting\n");
    return 0;
  }
  if (wr_json_parse_object(sse->data, sse->data_len, false, &ev, err) < 0)
    return wr_error_wrap(err, "event %llu", (unsigned long long)sse->id);
  if (sse->has_id && sse->id > f->last)
    f->last = sse->id;
  return print_event(ev, f->o->json, err);
}

enum { STREAM_ENDED = 1 };

/*
 * One connection: 1 (STREAM_ENDED) when it could not be made or ended
 * (the caller reconnects), -1 for an error that reconnecting would not
 * mend (a refusal, bad data, stdout gone).
 */
static int follow_once(const struct wr_cli_ctx *ctx, struct follower *f,
                       wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *path = wr_cli_events_path(f->o, f->last);
  struct wr_sse_decoder d;
  char buf[16384];
  ssize_t n;
  int rc = 0;
  wr_error_t io;

  if (wr_cli_connect(ctx, &c, &io) < 0 ||
      wr_http_request_stream(c, "GET", path, NULL, NULL, 0, &resp, &io) < 0)
    return STREAM_ENDED;
  if (resp.status == 503)
    return STREAM_ENDED; /* a daemon on its way down */
  if (resp.status != 200)
    return wr_cli_stream_error(c, &resp, err);
  wr_sse_decoder_init(&d, EVENT_MAX);
  while (rc == 0 && (n = wr_http_read_body(c, buf, sizeof(buf), &io)) > 0)
    rc = wr_sse_feed(&d, buf, (size_t)n, on_sse, f, err);
  wr_sse_decoder_free(&d);
  return rc < 0 ? -1 : STREAM_ENDED;
}

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

  nanosleep(&ts, NULL);
}

/* The first connection must work (like any command); after that a daemon
 * that goes away is waited for, with one line on stderr. */
static int follow(const struct wr_cli_ctx *ctx,
                  const struct wr_cli_events_opts *o, wr_error_t *err) {
  struct follower f = {.o = o, .last = o->since};
  _cleanup_client_ wr_http_client_t *probe = NULL;
  bool waiting = false;

  if (wr_cli_connect(ctx, &probe, err) < 0)
    return -1;
  for (;;) {
    uint64_t before = f.last;
    int rc = follow_once(ctx, &f, err);

    if (rc < 0)
      return err->code == EPIPE ? 0 : -1;
    if (f.last != before)
      waiting = false;
    if (!waiting)
      fprintf(stderr,
              "warren: lost the event stream; reconnecting from "
              "event %llu\n",
              (unsigned long long)f.last);
    waiting = true;
    sleep_ms(RECONNECT_MS);
  }
}

/* `warren events`. */
int wr_cli_cmd_events(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_events_opts o;
  wr_error_t err = {0};
  int rc;

  if (wr_cli_events_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("events", &err);
  if (o.help)
    return wr_cli_help(help);
  rc = o.follow ? follow(ctx, &o, &err) : print_journal(ctx, &o, &err);
  if (rc < 0 && err.code != EPIPE)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  return WR_CLI_EXIT_OK;
}
