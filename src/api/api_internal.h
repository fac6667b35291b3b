/*
 * api internals shared by the files of the module: the server, its
 * connections and requests. Nothing outside src/api includes this.
 *
 * Ownership in one paragraph: the server owns its listeners and
 * connections (libuv handles embedded in them, freed in close callbacks).
 * A connection points at the request it is parsing or serving; the request
 * points back while the client is there. When the connection goes first,
 * the request is detached (conn = NULL, aborted) and lives on until the
 * handler's final call. A request is freed once it is finished and no
 * callback of ours is running on it (`holds`), so a handler may make its
 * final call from inside any callback.
 */
#ifndef WR_API_INTERNAL_H
#define WR_API_INTERNAL_H

#include <http_parser.h>

#include "api/api.h"

#define WR_HTTP_MAX_HEADERS 128
#define WR_HTTP_READ_SIZE 65536

struct wr_http_kv {
  char *name;
  char *value;
};

struct wr_http_kv_list {
  struct wr_http_kv *items;
  size_t n;
  size_t cap;
};

union wr_http_stream {
  uv_handle_t handle;
  uv_stream_t stream;
  uv_tcp_t tcp;
  uv_pipe_t pipe;
};

struct wr_http_listener {
  union wr_http_stream io;
  wr_http_server_t *srv;
  bool trusted;
  struct wr_http_listener *next;
  /* A unix socket this listener put at `path` (NULL for TCP): its file
   * is removed at close only while it is still this inode. */
  char *path;
  dev_t dev;
  ino_t ino;
};

struct wr_http_server {
  uv_loop_t *loop;
  const struct wr_http_route *routes;
  size_t nroutes;
  void *ctx;
  struct wr_http_limits limits;
  unsigned char key_digest[32]; /* SHA-256 of the API key */
  bool has_key;
  struct wr_http_listener *listeners;
  struct wr_http_conn *conns;
  unsigned nactive;      /* connections served, not refused or closing */
  unsigned nuntrusted;   /* of those, untrusted (TCP) ones */
  unsigned open_handles; /* listeners + connections not yet freed */
  bool closing;
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* What the parser reported during one http_parser_execute() call; the
 * parser is paused on each, and the connection acts on it afterwards, out
 * of the parser's callbacks. */
enum wr_http_event {
  WR_EV_NONE,
  WR_EV_HEAD, /* headers complete */
  WR_EV_BODY, /* a piece of a streamed body (conn->chunk) */
  WR_EV_DONE, /* message complete */
};

enum wr_http_timer {
  WR_TIMER_NONE,
  WR_TIMER_HEAD,   /* the whole head must arrive */
  WR_TIMER_IDLE,   /* keep-alive between requests */
  WR_TIMER_BODY,   /* a buffered body must keep arriving */
  WR_TIMER_KICK,   /* run the input loop on the next turn */
  WR_TIMER_LINGER, /* after our shutdown, wait for the client's EOF */
};

struct wr_http_conn {
  union wr_http_stream io;
  uv_timer_t timer;
  uv_shutdown_t shutdown;
  wr_http_server_t *srv;
  struct wr_http_conn *prev, *next;
  http_parser parser;
  wr_buf_t in;        /* bytes read and not yet parsed (or raw) */
  wr_http_req_t *req; /* being parsed or served */
  size_t queued;      /* bytes given to uv_write, not yet written */
  size_t head_bytes;  /* bytes of the current head parsed so far */
  size_t trailer_bytes;
  const char *feed_start, *feed_end; /* input of the current execute */
  bool field_at_end, value_at_end;   /* last callback hit feed_end */
  unsigned long feed_no;             /* counts execute calls */
  unsigned long field_feed;          /* feed_no of field_end */
  const char *field_end;             /* end of the last field name */
  bool gap_newline;  /* a line break between a name and its value */
  const char *chunk; /* WR_EV_BODY data */
  size_t chunk_len;
  enum wr_http_event event;
  enum wr_http_timer timer_mode;
  int fail_status; /* set by a parser callback that refuses the input */
  const char *fail_code;
  const char *fail_msg;
  unsigned open_handles;
  bool trusted;
  bool counted; /* included in srv->nactive (and nuntrusted) */
  bool reading; /* uv_read_start is on */
  bool eof;     /* the client sent EOF or the read failed */
  bool closing; /* uv_close called */
  bool shutting_down;
  bool lingering;
  bool in_process;   /* wr_api_conn_process is on the stack */
  bool skip_message; /* rest of a refused message without a body */
  bool must_close;   /* close after the current response */
  bool broken;       /* the input is unparseable; no more requests */
  bool upgrade_done; /* the parser stopped at an upgrade */
  bool upgraded;     /* raw mode */
};

enum wr_http_hstate { WR_H_NONE, WR_H_FIELD, WR_H_VALUE };

struct wr_http_req {
  struct wr_http_conn *conn; /* NULL once the client has gone */
  const struct wr_http_route *route;
  const char *method;
  wr_buf_t url;
  char *path; /* decoded */
  struct wr_http_kv_list headers, params, query;
  wr_buf_t field, value; /* header being parsed */
  enum wr_http_hstate hstate;
  struct wr_http_framing framing; /* framing headers seen so far */
  wr_buf_t body;
  void *data;
  uint64_t start_ns;
  uint64_t bytes_out;
  int status;
  unsigned holds;

  void (*abort_cb)(wr_http_req_t *req, void *arg);
  void *abort_arg;
  void (*drain_cb)(wr_http_req_t *req, void *arg);
  void *drain_arg;
  void (*body_data)(wr_http_req_t *req, const char *data, size_t len,
                    void *arg);
  void (*body_end)(wr_http_req_t *req, int status, void *arg);
  void *body_arg;
  int end_status;
  void (*raw_data)(wr_http_req_t *req, const char *data, size_t len, void *arg);
  void (*raw_closed)(wr_http_req_t *req, void *arg);
  void *raw_arg;

  bool head_done;
  bool msg_complete;
  bool has_body;
  bool keep_alive;
  bool old_http; /* HTTP/1.0 or older: no chunking, close after */
  bool no_body;  /* HEAD: the response has a head only */
  bool expect_continue;
  bool continue_sent;
  bool parser_upgrade; /* the parser treats what follows as raw */
  bool dispatched;     /* the handler owns it */
  bool finished;       /* the final call happened */
  bool aborted;
  bool close_after; /* the response says Connection: close */
  bool streaming;
  bool chunked;
  bool upgraded;
  bool body_paused;
  bool end_pending; /* body_end not delivered yet */
  bool end_sent;
  bool raw_paused;
  bool raw_close_sent;
};

/* ---- util.c ------------------------------------------------------------ */

void wr_api_kv_add(struct wr_http_kv_list *l, const char *name, size_t nlen,
                   const char *value, size_t vlen);
const char *wr_api_kv_find(const struct wr_http_kv_list *l, const char *name,
                           bool ignore_case);
void wr_api_kv_free(struct wr_http_kv_list *l);
/* Percent-decode s[0..len); fails on a bad escape or a decoded NUL. */
int wr_api_decode(const char *s, size_t len, char **out, wr_error_t *err);
/* Split and decode "a=1&b&c=%20" into l. */
int wr_api_parse_query(const char *s, size_t len, struct wr_http_kv_list *l,
                       wr_error_t *err);
/* Does the comma-separated list contain token (case-insensitive)? */
bool wr_api_has_token(const char *list, const char *token);
bool wr_api_is_token(const char *s, size_t len);
const char *wr_api_reason(int status);
/* {"error":{"code":...,"message":...}} serialised, with "\n". */
char *wr_api_error_body(const char *code, const char *message, size_t *len);

/* ---- route.c ----------------------------------------------------------- */

/* Find the route for method + decoded path. Returns 0, or 404 / 405 with
 * *allow listing the methods that do match the path ("GET, DELETE"). */
int wr_api_route_find(const struct wr_http_route *routes, size_t n,
                      const char *method, const char *path,
                      const struct wr_http_route **out,
                      struct wr_http_kv_list *params, wr_buf_t *allow);

/* ---- server.c ---------------------------------------------------------- */

/* A listener or connection is freed; free the server if it was the last. */
void wr_api_server_handle_closed(wr_http_server_t *srv);
/* Is there room for one more connection of this kind? */
bool wr_api_server_has_room(const wr_http_server_t *srv, bool trusted);

/* ---- parse.c ----------------------------------------------------------- */

extern const http_parser_settings wr_api_parser_settings;

/* After each execute: remember a line break seen between a header name
 * and a value still to come (a fold spanning two reads). */
void wr_api_parse_note_gap(struct wr_http_conn *c);

/* ---- conn.c ------------------------------------------------------------ */

struct wr_http_conn *wr_api_conn_new(wr_http_server_t *srv, bool trusted,
                                     bool tcp);
/* Start serving a connection whose stream handle is initialised. */
void wr_api_conn_start(struct wr_http_conn *c);
/* Close at once, aborting any request. */
void wr_api_conn_close(struct wr_http_conn *c);
/* Queue bytes (ownership of data taken). */
void wr_api_conn_send(struct wr_http_conn *c, char *data, size_t len);
/* The current request made its final call. */
void wr_api_conn_request_done(struct wr_http_conn *c, bool keep,
                              bool msg_complete);
/* Run the input loop now (or soon, when called from inside it). */
void wr_api_conn_process(struct wr_http_conn *c);
void wr_api_conn_kick(struct wr_http_conn *c);
void wr_api_conn_update_reading(struct wr_http_conn *c);
void wr_api_conn_set_timer(struct wr_http_conn *c, enum wr_http_timer mode,
                           uint64_t ms);

/* ---- request.c --------------------------------------------------------- */

wr_http_req_t *wr_api_req_new(struct wr_http_conn *c);
void wr_api_req_hold(wr_http_req_t *req);
void wr_api_req_release(wr_http_req_t *req);
/* Headers are complete: check, authenticate, route, maybe dispatch. */
void wr_api_req_head(wr_http_req_t *req);
/* The message is complete: dispatch or end the streamed body. */
void wr_api_req_message_done(wr_http_req_t *req);
/* Hand a piece of a streamed body to the handler. */
void wr_api_req_body_piece(wr_http_req_t *req, const char *data, size_t len);
/* Report the end of a streamed body (0 or -errno) once. */
void wr_api_req_body_ended(wr_http_req_t *req, int status);
/* Should the parser run for this request now? */
bool wr_api_req_wants_input(const wr_http_req_t *req);
/* The connection is going away: run the abort callback, then end a
 * streamed body with -ECONNRESET or report the raw stream closed, each only
 * while the handler has not made its final call. */
void wr_api_req_set_paused(wr_http_req_t *req, bool *flag, bool pause);
void wr_api_req_detach(wr_http_req_t *req);
/* Refuse the request before the handler runs (server-owned). */
void wr_api_req_refuse(wr_http_req_t *req, int status, const char *code,
                       const char *extra_headers, const char *msg);
/* Mark finished, log, hand the connection back. */
void wr_api_req_finish(wr_http_req_t *req);

/* ---- reply.c ----------------------------------------------------------- */

/* Send a whole response and finish the request. */
void wr_api_reply(wr_http_req_t *req, int status, const char *content_type,
                  const char *extra_headers, const char *body, size_t len);
/* Hand received raw bytes to the upgrade's on_data. */
void wr_api_raw_deliver(wr_http_req_t *req, const char *data, size_t len);
/* The client closed the raw stream: run on_close once. */
void wr_api_raw_closed(wr_http_req_t *req);

#endif
