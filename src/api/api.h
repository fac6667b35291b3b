/*
 * api: warren's HTTP/1.1 server on libuv, and a small blocking client.
 *
 * The server parses requests with http-parser, routes them by method and
 * path pattern ("/v1/sandboxes/{id}/exec"), enforces limits (header and
 * body sizes, connection count, timeouts), authenticates TCP clients with a
 * bearer key, and offers three ways to answer: a whole JSON reply, a
 * chunked stream, or an upgrade to a raw bidirectional byte stream.
 *
 * Ownership: the server owns every request. A handler must finish each
 * request with exactly one final call: wr_http_reply_*(), wr_http_stream_end()
 * or wr_http_raw_close(). It may make that call later, from the loop thread
 * (never from another thread). If the client goes away first, the abort
 * callback runs and later output is discarded, but the handler must still
 * make its final call; the request is freed by that call.
 *
 * Everything here runs on the loop thread.
 */
#ifndef WR_API_H
#define WR_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/common.h"

typedef struct wr_http_server wr_http_server_t;
typedef struct wr_http_req wr_http_req_t;

struct wr_http_limits {
  size_t max_header_bytes; /* request line + headers; default 16 KiB */
  size_t max_body_bytes;   /* buffered bodies; default 1 MiB */
  unsigned max_conns;      /* default 1024; more are refused at accept */
  /* Of those, how many may be untrusted (TCP) clients; default max_conns
   * less an eighth, so that clients without the key cannot take every slot
   * and lock out the local (root) socket. */
  unsigned max_untrusted_conns;
  uint64_t header_timeout_ms; /* whole head must arrive; default 10 s */
  uint64_t idle_timeout_ms;   /* keep-alive idle; default 60 s */
};

typedef void (*wr_http_handler_fn)(wr_http_req_t *req, void *ctx);

enum wr_route_flags {
  /* The body is not buffered: the handler runs once the head is complete
   * and reads the body with wr_http_body_read(). For uploads. */
  WR_ROUTE_STREAM_BODY = 1u << 0,
};

struct wr_http_route {
  const char *method;  /* "GET", "POST", "PUT", "DELETE" */
  const char *pattern; /* "/v1/sandboxes/{id}"; {x} matches one segment */
  wr_http_handler_fn fn;
  unsigned flags;
};

/* Create a server on `loop`. Routes are borrowed and must outlive it.
 * limits may be NULL for the defaults. ctx is passed to every handler. */
int wr_http_server_new(uv_loop_t *loop, const struct wr_http_route *routes,
                       size_t nroutes, void *ctx,
                       const struct wr_http_limits *limits,
                       wr_http_server_t **out, wr_error_t *err);
/* Listen on a unix socket: a stale socket file is replaced, but one that
 * a live process listens on is not (EADDRINUSE); the socket gets `mode`
 * (0600: root only). Clients there are trusted. Closing the server
 * removes the socket file unless another has replaced it since. */
int wr_http_listen_unix(wr_http_server_t *srv, const char *path, int mode,
                        wr_error_t *err);
/* Whether a process listens on the unix socket at `path`: 1 (and *pid,
 * from SO_PEERCRED, 0 when unknown), 0 when nothing does (no file, not a
 * socket, or a stale one), -1 with err when that cannot be told. */
int wr_http_unix_listener(const char *path, pid_t *pid, wr_error_t *err);
/* Listen on TCP "HOST:PORT" ("127.0.0.1:7070", "[::1]:7070"). Every
 * request there must carry "Authorization: Bearer <api_key>"; others get
 * 401 before routing, so they learn nothing about what exists, and the
 * connection is closed after that answer. */
int wr_http_listen_tcp(wr_http_server_t *srv, const char *addr,
                       const char *api_key, wr_error_t *err);
/* The port of the first TCP listener (useful after listening on port 0),
 * or -1 when there is none. */
int wr_http_server_tcp_port(const wr_http_server_t *srv);
/* Serve an already connected stream socket (tests, fuzzing, socket
 * activation). `trusted` says whether it counts as the unix socket (no API
 * key needed) or as TCP (key required). The server takes the fd. */
int wr_http_server_adopt(wr_http_server_t *srv, int fd, bool trusted,
                         wr_error_t *err);
/* Stop listening, close every connection (aborting their requests),
 * remove the unix socket files it made (those still in place) and free
 * the server once everything is closed. cb may be NULL. */
void wr_http_server_close(wr_http_server_t *srv, void (*cb)(void *arg),
                          void *arg);

/* ---- the request ------------------------------------------------------ */

const char *wr_http_method(const wr_http_req_t *req);
/* The path without the query, percent-decoded. */
const char *wr_http_path(const wr_http_req_t *req);
/* Value of a {name} segment of the route's pattern, decoded. */
const char *wr_http_param(const wr_http_req_t *req, const char *name);
/* Decoded query value; NULL when absent, "" when given without a value.
 * A query value that decodes to contain a NUL is refused with 400 before
 * the handler runs. */
const char *wr_http_query(const wr_http_req_t *req, const char *name);
/* Header value (case-insensitive name); NULL when absent. */
const char *wr_http_header(const wr_http_req_t *req, const char *name);
/* The buffered body (routes without WR_ROUTE_STREAM_BODY). */
const char *wr_http_body(const wr_http_req_t *req, size_t *len);
/* Opaque per-request slot for the handler's state. */
void wr_http_set_data(wr_http_req_t *req, void *data);
void *wr_http_get_data(const wr_http_req_t *req);
/* True once the client has gone. */
bool wr_http_aborted(const wr_http_req_t *req);
/* Called once if the client goes away before the final call. */
void wr_http_on_abort(wr_http_req_t *req,
                      void (*cb)(wr_http_req_t *req, void *arg), void *arg);

/* ---- streamed request bodies (WR_ROUTE_STREAM_BODY) --------------------- */

/* on_data gets each decoded chunk (dechunked if the body is chunked);
 * on_end gets 0 at the end of the body or a negative errno if the client
 * went away or sent a malformed body. Starts reading. */
void wr_http_body_read(wr_http_req_t *req,
                       void (*on_data)(wr_http_req_t *req, const char *data,
                                       size_t len, void *arg),
                       void (*on_end)(wr_http_req_t *req, int status,
                                      void *arg),
                       void *arg);
/* Stop or resume delivery of body chunks (backpressure). */
void wr_http_body_pause(wr_http_req_t *req, bool pause);
/* Notes: on a route without WR_ROUTE_STREAM_BODY, wr_http_body_read()
 * hands over the buffered body at once. A final call made before a
 * streamed body was read to its end closes the connection once the
 * response is out (the rest of the body is not read). An upgrade request
 * is always dispatched at the end of its message, its body buffered. */

/* ---- whole replies (final calls) ----------------------------------------- */

/* Send `body` (reference stolen; NULL sends no body) as application/json. */
void wr_http_reply_json(wr_http_req_t *req, int status, struct json_t *body);
/* {"error":{"code":code,"message":...}} */
void wr_http_reply_error(wr_http_req_t *req, int status, const char *code,
                         const char *fmt, ...) WR_PRINTF(4, 5);
/* The same with extra headers ("Name: value\r\n" lines; may be NULL):
 * a 503's Retry-After. */
void wr_http_reply_error_headers(wr_http_req_t *req, int status,
                                 const char *code, const char *extra_headers,
                                 const char *fmt, ...) WR_PRINTF(5, 6);
/* Status with an empty body (204, or others). */
void wr_http_reply_empty(wr_http_req_t *req, int status);
/* Send `len` bytes of already serialised JSON (borrowed) as
 * application/json. For large bodies built on a worker thread, so that the
 * loop does not stall while it serialises them. */
void wr_http_reply_json_text(wr_http_req_t *req, int status, const char *text,
                             size_t len);

/* ---- streamed replies -------------------------------------------------- */

/* Send the head of a chunked reply. Extra headers may be NULL or
 * "Name: value\r\n" lines. */
void wr_http_stream_begin(wr_http_req_t *req, int status,
                          const char *content_type, const char *extra_headers);
/* Queue one chunk. Returns the bytes queued and not yet written, so the
 * caller can stop producing above a threshold and resume in on_drain. */
size_t wr_http_stream_write(wr_http_req_t *req, const void *data, size_t len);
/* Called when the write queue drops to empty. */
void wr_http_on_drain(wr_http_req_t *req,
                      void (*cb)(wr_http_req_t *req, void *arg), void *arg);
/* Final call: send the last chunk. */
void wr_http_stream_end(wr_http_req_t *req);
/* Final call for a streamed reply that failed half way: the connection is
 * closed after what is queued, without the last chunk, so the client sees
 * a body cut off instead of a complete but truncated one. Before
 * wr_http_stream_begin() it answers 500. */
void wr_http_stream_abort(wr_http_req_t *req);

/* ---- upgrade to a raw stream -------------------------------------------- */

/* True if the request asked for "Upgrade: <protocol>" with
 * "Connection: Upgrade". */
bool wr_http_wants_upgrade(const wr_http_req_t *req, const char *protocol);
/* Send "101 Switching Protocols" and switch the connection to raw bytes.
 * on_data gets every byte that follows (including any the client sent
 * right after the head); on_close runs once when the client closes or the
 * connection fails. Returns -1 if the request did not ask to upgrade. */
int wr_http_upgrade(wr_http_req_t *req, const char *protocol,
                    void (*on_data)(wr_http_req_t *req, const char *data,
                                    size_t len, void *arg),
                    void (*on_close)(wr_http_req_t *req, void *arg), void *arg);
/* Queue raw bytes; returns bytes pending (see wr_http_stream_write). */
size_t wr_http_raw_write(wr_http_req_t *req, const void *data, size_t len);
/* Stop or resume delivery of raw bytes (backpressure). */
void wr_http_raw_pause(wr_http_req_t *req, bool pause);
/* Final call for upgraded requests: flush and close the connection. */
void wr_http_raw_close(wr_http_req_t *req);
/* Notes: wr_http_upgrade() also returns -1 once the client has gone. When
 * the client only shuts down its sending side, on_close runs but output
 * can still be written until wr_http_raw_close(). If the client goes away,
 * the abort callback runs first, then on_close. A request that asked to
 * upgrade and is answered otherwise closes the connection after it. */

/* ---- the "warren-exec" frame protocol (frames.c) ------------------------ */

enum wr_frame_type {
  WR_FRAME_STDIN = 0,     /* client -> server: bytes for stdin */
  WR_FRAME_STDIN_EOF = 1, /* client -> server: close stdin */
  WR_FRAME_RESIZE = 2,    /* client -> server: rows, cols (2+2 bytes BE) */
  WR_FRAME_SIGNAL = 3,    /* client -> server: a signal name */
  WR_FRAME_STARTED = 10,  /* server -> client: {"pid":N} */
  WR_FRAME_STDOUT = 11,
  WR_FRAME_STDERR = 12,
  WR_FRAME_EXIT = 13,  /* server -> client: the exit object */
  WR_FRAME_ERROR = 14, /* server -> client: {"code","message"}; the end */
};

#define WR_FRAME_HDR 5

struct wr_frame {
  uint8_t type;
  const char *data; /* valid until the next feed/next call */
  uint32_t len;
};

struct wr_frame_decoder {
  wr_buf_t buf;
  size_t pos;   /* start of the first undecoded byte in buf */
  uint32_t max; /* largest payload accepted from the peer */
};

/* Append one frame to out. */
void wr_frame_encode(wr_buf_t *out, uint8_t type, const void *payload,
                     size_t len);
void wr_frame_encode_resize(wr_buf_t *out, uint16_t rows, uint16_t cols);
void wr_frame_decoder_init(struct wr_frame_decoder *d, uint32_t max);
void wr_frame_decoder_free(struct wr_frame_decoder *d);
void wr_frame_feed(struct wr_frame_decoder *d, const void *data, size_t len);
/* 1 with *f filled, 0 when more bytes are needed, -1 for an oversized
 * frame (err filled). */
int wr_frame_next(struct wr_frame_decoder *d, struct wr_frame *f,
                  wr_error_t *err);

/* ---- the blocking client (CLI, tests, benchmarks) ---------------------- */

/*
 * A client connection to warrend, on a unix socket ("unix:/path" or a
 * plain path) or TCP ("tcp://host:port", with an API key). Responses are
 * parsed with http-parser. Not thread-safe; one request at a time.
 */
typedef struct wr_http_client wr_http_client_t;

struct wr_http_response {
  int status;
  char *content_type; /* may be NULL */
  wr_buf_t body;      /* whole body for wr_http_request() */
  wr_buf_t headers;   /* every header, as NUL-terminated name, value pairs */
};

int wr_http_client_open(const char *address, const char *api_key,
                        wr_http_client_t **out, wr_error_t *err);
void wr_http_client_close(wr_http_client_t *c);
/* Send a request and read the whole response. body may be NULL. */
int wr_http_request(wr_http_client_t *c, const char *method,
                    const char *path_and_query, const char *content_type,
                    const void *body, size_t body_len,
                    struct wr_http_response *resp, wr_error_t *err);
void wr_http_response_free(struct wr_http_response *resp);
/* The value of response header `name` (any case), or NULL. */
const char *wr_http_response_header(const struct wr_http_response *resp,
                                    const char *name);

/*
 * Streaming: send the head (and a body of known length, or none), then
 * read the response head; the body is then read chunk by chunk with
 * wr_http_read_body() until it returns 0.
 */
int wr_http_request_stream(wr_http_client_t *c, const char *method,
                           const char *path_and_query, const char *content_type,
                           const void *body, size_t body_len,
                           struct wr_http_response *resp, wr_error_t *err);
/* Send a request whose body is produced by `producer` (chunked transfer):
 * it is called repeatedly and returns bytes written into buf, 0 at the end,
 * -1 on error. Then reads the response head as above. */
int wr_http_request_upload(wr_http_client_t *c, const char *method,
                           const char *path_and_query, const char *content_type,
                           ssize_t (*producer)(void *arg, char *buf,
                                               size_t size),
                           void *arg, struct wr_http_response *resp,
                           wr_error_t *err);
/* Next piece of the body: > 0 bytes, 0 at the end, -1 on error. */
ssize_t wr_http_read_body(wr_http_client_t *c, char *buf, size_t size,
                          wr_error_t *err);
/* From now on, a read that would wait past deadline_ns (wr_mono_ns())
 * fails with ETIMEDOUT instead; 0 waits as long as it takes. */
void wr_http_client_set_deadline(wr_http_client_t *c, uint64_t deadline_ns);
/* Ask for an upgrade; on 101 returns 0 and the raw socket fd (owned by the
 * client; valid until close). Any other status fills resp (whole body). */
int wr_http_request_upgrade(wr_http_client_t *c, const char *method,
                            const char *path_and_query, const char *protocol,
                            const void *body, size_t body_len,
                            struct wr_http_response *resp, int *raw_fd,
                            wr_error_t *err);
/* Bytes received after the 101 head that belong to the raw stream. */
size_t wr_http_client_leftover(wr_http_client_t *c, char *buf, size_t size);
/* Note: when the answer to wr_http_request_upgrade() is not 101, it
 * returns 0 with *raw_fd = -1 and resp filled; check resp->status. */

/* Turn an error body {"error":{"code","message"}} into "message" (or the
 * status line when the body is not that shape). Caller frees. */
char *wr_http_error_message(const struct wr_http_response *resp);

/* ---- message framing (framing.c) ----------------------------------------
 * The headers that decide where a request ends, judged the same way by
 * every parser in warren (the API server, the egress proxy, TLS
 * interception), so that no two hops can disagree about a body's length.
 */
struct wr_http_framing {
  unsigned content_length, transfer_encoding, host;
};
/* Account for one header of a request head (name and value as sent,
 * without surrounding whitespace). NULL, or why the head must be refused
 * with 400: a second or non-numeric (or over 18 digits) Content-Length, a
 * second Transfer-Encoding or one other than exactly "chunked", a second
 * Host. */
const char *wr_http_framing_header(struct wr_http_framing *f, const char *name,
                                   size_t name_len, const char *value,
                                   size_t value_len);
/* When the head is complete: NULL, or why it must be refused with 400
 * (Content-Length together with Transfer-Encoding, Transfer-Encoding in
 * HTTP/1.0). */
const char *wr_http_framing_end(const struct wr_http_framing *f, bool http10);

/* ---- Server-Sent Events (sse.c) ----------------------------------------
 * The text/event-stream format: an encoder for the server and a bounded,
 * incremental decoder for clients.
 */

/* Append one event: "id: N" (unless id is 0), "event: NAME" (unless
 * NULL), one "data:" line per line of data, and the blank line. */
void wr_sse_encode(wr_buf_t *out, uint64_t id, const char *event,
                   const char *data);
/* Append a comment (": text"), which readers ignore: a heartbeat. */
void wr_sse_comment(wr_buf_t *out, const char *text);

struct wr_sse_event {
  uint64_t id;       /* the last event id seen (it persists across events) */
  bool has_id;       /* whether any id was seen yet */
  const char *event; /* "message" when the event named none */
  const char *data;  /* NUL-terminated; lines joined with LF */
  size_t data_len;
};

/* Called for each event: 0 goes on, any other value stops wr_sse_feed,
 * which returns it (negative: err is filled). Strings valid for the call. */
typedef int (*wr_sse_event_fn)(void *arg, const struct wr_sse_event *ev,
                               wr_error_t *err);

struct wr_sse_decoder {
  wr_buf_t line, data, event;
  uint64_t last_id;
  bool has_id, has_data, after_cr;
  size_t max; /* longest line, and most data in one event */
};

void wr_sse_decoder_init(struct wr_sse_decoder *d, size_t max);
void wr_sse_decoder_free(struct wr_sse_decoder *d);
/* Feed bytes as they come. Returns 0, what fn returned, or -1 with err
 * (E2BIG past the bound, EPROTO for an id that is not a number). */
int wr_sse_feed(struct wr_sse_decoder *d, const char *data, size_t len,
                wr_sse_event_fn fn, void *arg, wr_error_t *err);

#endif
