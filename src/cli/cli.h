/*
 * cli: the `warren` command line, a thin client of warrend's HTTP API.
 *
 * One file per subcommand (create.c, exec.c, ...) and a dispatch table in
 * dispatch.c. A subcommand is a `run` function that takes the global
 * context and its own argv and returns the process exit code; it never
 * exits by itself, so the terminal is always restored by the code that
 * changed it. Each subcommand's argument parser is a separate, pure
 * function so that tests can check it without a daemon.
 *
 * The rest of this header is the shared toolkit of the subcommands:
 * option parsing, talking to the daemon, output formatting, the
 * warren-exec frame codec, terminal handling and the interactive stream.
 */
#ifndef WR_CLI_H
#define WR_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <termios.h>

#include "api/api.h"
#include "common/common.h"

/* Exit codes. 125-127 follow docker's convention for `exec`. */
enum {
  WR_CLI_EXIT_OK = 0,
  WR_CLI_EXIT_ERROR = 1,
  WR_CLI_EXIT_USAGE = 2,
  WR_CLI_EXIT_TIMEOUT = 124,
  WR_CLI_EXIT_API = 125,
  WR_CLI_EXIT_CANNOT_EXEC = 126,
  WR_CLI_EXIT_NOT_FOUND = 127,
};

#define WR_CLI_DEFAULT_HOST "unix:/run/warren/warrend.sock"

/* What every subcommand gets: where the daemon is and how to log in. */
struct wr_cli_ctx {
  const char *host;    /* "unix:/path", "/path" or "tcp://host:port" */
  const char *api_key; /* NULL when none */
};

struct wr_cli_command {
  const char *name;
  const char *summary; /* one line for `warren --help` */
  int (*run)(const struct wr_cli_ctx *ctx, int argc, char **argv);
};

/* ---- dispatch (dispatch.c) ----------------------------------------------- */

/* The whole program: global options, then the subcommand. Returns the
 * exit code. */
int wr_cli_main(int argc, char **argv);
/* Parse the global options into ctx (environment as fallback). Returns
 * the index of the subcommand in argv (argc when none), -1 on a usage
 * error, or 0 with *help set for `warren --help`. */
int wr_cli_parse_global(int argc, char **argv, struct wr_cli_ctx *ctx,
                        bool *help, bool *version, wr_error_t *err);
/* Find a command by name in a table; NULL when unknown. */
const struct wr_cli_command *
wr_cli_find_command(const struct wr_cli_command *table, size_t n,
                    const char *name);
/* The top-level table (for help and tests). */
const struct wr_cli_command *wr_cli_commands(size_t *n);
/* `warren --help`: synopsis, global options, the commands. */
void wr_cli_print_usage(FILE *out);
/* Run argv[0] from table; an unknown name is a usage error (2). */
int wr_cli_dispatch(const struct wr_cli_ctx *ctx,
                    const struct wr_cli_command *table, size_t n,
                    const char *prefix, int argc, char **argv);

/* ---- subcommands --------------------------------------------------------- */

int wr_cli_cmd_help(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_version(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_daemon(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_image(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_create(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_ls(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_inspect(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_exec(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_sh(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_ps(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_logs(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_attach(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_kill(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_start(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_stop(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_pause(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_resume(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_rm(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_cp(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_policy(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_secret(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_ports(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_diff(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_events(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_snapshot(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_fork(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_pool(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_project(const struct wr_cli_ctx *ctx, int argc, char **argv);
int wr_cli_cmd_plan(const struct wr_cli_ctx *ctx, int argc, char **argv);
/* `warren project lease` (project_lease.c); argv[0] is "lease". */
int wr_cli_project_lease(const struct wr_cli_ctx *ctx, int argc, char **argv);

/* ---- parsed arguments (pure; each parser fills err on usage errors) ------ */

struct wr_cli_create_opts {
  const char *name, *image, *workdir;
  const char *snapshot; /* --snapshot, or NULL */
  const char *agent;    /* AGENT, or NULL */
  char *path;           /* PATH made absolute (owned), or NULL */
  bool clone;
  bool has_memory, has_cpus, has_pids, has_disk;
  uint64_t memory; /* bytes */
  uint64_t disk;   /* bytes */
  double cpus;
  uint64_t pids;
  char **env;    /* "K=V", validated */
  char **labels; /* "K=V", validated */
  bool no_start, json, help;
  bool reuse; /* --reuse: the sandbox named --name if it exists */
  bool has_idle_pause;
  uint64_t idle_pause_s;    /* --idle-pause, in seconds (0: never) */
  uint64_t queue_timeout_s; /* --queue-timeout (0: the daemon's) */
  bool no_pool;             /* --no-pool: never a warm pool's sandbox */
  bool restart_start;       /* --restart-start */
  bool no_wait;             /* --no-wait: a template's port is not awaited */
  bool has_ready_timeout;
  uint64_t ready_timeout_ms; /* --ready-timeout */
};
int wr_cli_create_parse(int argc, char **argv, struct wr_cli_create_opts *o,
                        wr_error_t *err);
void wr_cli_create_opts_free(struct wr_cli_create_opts *o);
/* The POST /v1/sandboxes body. */
json_t *wr_cli_create_body(const struct wr_cli_create_opts *o);

/* `warren image build NAME -f DOCKERFILE [DIR]` (template_build.c). */
int wr_cli_template_build(const struct wr_cli_ctx *ctx, const char *name,
                          const char *dockerfile, const char *dir, bool json);

struct wr_cli_ls_opts {
  char **labels; /* "K=V" filters */
  const char *state;
  bool json, quiet, help;
  bool all; /* --all: warm pools' sandboxes too */
};
int wr_cli_ls_parse(int argc, char **argv, struct wr_cli_ls_opts *o,
                    wr_error_t *err);
/* "/v1/sandboxes?label=...&state=..." (caller frees). */
char *wr_cli_ls_path(const struct wr_cli_ls_opts *o);

struct wr_cli_exec_opts {
  const char *sandbox;
  const char *tag, *cwd, *user;
  char **env; /* "K=V", validated */
  bool has_timeout;
  uint64_t timeout_ms;
  bool interactive, tty, detach, help;
  char *const *cmd; /* borrowed from argv */
  size_t ncmd;
};
int wr_cli_exec_parse(int argc, char **argv, struct wr_cli_exec_opts *o,
                      wr_error_t *err);
void wr_cli_exec_opts_free(struct wr_cli_exec_opts *o);
/* The exec body; rows/cols are used only with a tty (0 = unknown). */
json_t *wr_cli_exec_body(const struct wr_cli_exec_opts *o, unsigned rows,
                         unsigned cols);
/* Exit code for an API error code met before the process started. */
int wr_cli_exec_error_exit(const char *code);

struct wr_cli_cp_loc {
  char *sandbox; /* NULL for a local path */
  char *path;    /* "-" for stdin/stdout */
};
/* Classify one cp argument: `N:/path` is remote when N is a valid sandbox
 * name or id and nothing before the colon is a slash. */
int wr_cli_cp_parse_loc(const char *arg, struct wr_cli_cp_loc *loc,
                        wr_error_t *err);
void wr_cli_cp_loc_free(struct wr_cli_cp_loc *loc);
/* What bounds a copy: at most max_size bytes of file data (0: no limit;
 * holes do not count). A download is also bounded by the free space where
 * it lands. */
struct wr_cli_cp_opts {
  uint64_t max_size;
};
/* Copy a local path ("-": a tar on stdin) into a sandbox (cp_transfer.c). */
int wr_cli_cp_upload(const struct wr_cli_ctx *ctx, const char *src,
                     const struct wr_cli_cp_loc *dst,
                     const struct wr_cli_cp_opts *opts, wr_error_t *err);
/* Copy from a sandbox to a local path ("-": a tar on stdout). A failed
 * copy leaves nothing at the destination; one over a limit is refused
 * with EDQUOT and a message naming the sizes. */
int wr_cli_cp_download(const struct wr_cli_ctx *ctx,
                       const struct wr_cli_cp_loc *src, const char *dst,
                       const struct wr_cli_cp_opts *opts, wr_error_t *err);

/* `policy allow|deny|check network [--sandbox N] HOST[:PORT]`: argv[0] is
 * the verb; "network" is the only kind of rule there is so far. */
struct wr_cli_policy_rule_opts {
  const char *verb; /* "allow", "deny" or "check" */
  const char *sandbox;
  const char *host; /* HOST[:PORT], checked by the daemon */
  bool json, help;
};
int wr_cli_policy_rule_parse(int argc, char **argv,
                             struct wr_cli_policy_rule_opts *o,
                             wr_error_t *err);

struct wr_cli_policy_log_opts {
  const char *sandbox;
  uint64_t limit; /* 0: the daemon's default */
  bool follow, json, help;
};
int wr_cli_policy_log_parse(int argc, char **argv,
                            struct wr_cli_policy_log_opts *o, wr_error_t *err);
/* "/v1/policy/log?..." (caller frees). */
char *wr_cli_policy_log_path(const struct wr_cli_policy_log_opts *o,
                             int64_t after);

/* `secret set SERVICE [--host H]... [--header NAME] [--prefix P]
 * [--env VAR]...`; the value never comes from argv. */
struct wr_cli_secret_set_opts {
  const char *service;
  char **hosts;
  const char *header, *prefix;
  char **env;
  bool help;
};
int wr_cli_secret_set_parse(int argc, char **argv,
                            struct wr_cli_secret_set_opts *o, wr_error_t *err);
void wr_cli_secret_set_opts_free(struct wr_cli_secret_set_opts *o);
/* The PUT /v1/secrets/SERVICE body; NULL when value is not UTF-8. */
json_t *wr_cli_secret_body(const struct wr_cli_secret_set_opts *o,
                           const char *value, size_t len);
/* A value as read from a pipe: one trailing newline is not part of it. */
void wr_cli_secret_trim(char *value, size_t *len);

struct wr_cli_publish {
  char *addr; /* NULL: the daemon's default (127.0.0.1) */
  uint16_t host_port, port;
};
/* "[ADDR:]HOSTPORT:PORT", ADDR an IPv4 address or a bracketed IPv6 one. */
int wr_cli_parse_publish(const char *spec, struct wr_cli_publish *out,
                         wr_error_t *err);

struct wr_cli_ports_opts {
  const char *sandbox;
  struct wr_cli_publish publish; /* with has_publish */
  uint16_t unpublish;            /* 0: none */
  bool has_publish, json, help;
};
int wr_cli_ports_parse(int argc, char **argv, struct wr_cli_ports_opts *o,
                       wr_error_t *err);
void wr_cli_ports_opts_free(struct wr_cli_ports_opts *o);

struct wr_cli_diff_opts {
  const char *sandbox;
  uint64_t limit; /* changes asked for */
  bool json, help;
};
int wr_cli_diff_parse(int argc, char **argv, struct wr_cli_diff_opts *o,
                      wr_error_t *err);
/* The text form of a GET .../diff reply: one line per change, git's
 * object store and logs counted per directory, hooks and git config
 * pointed out. */
void wr_cli_diff_print(FILE *out, const json_t *diff);

/* `warren events` (events.c). */
struct wr_cli_events_opts {
  uint64_t since;
  const char *sandbox, *types; /* borrowed from argv; NULL: all */
  bool follow, json, help;
};
int wr_cli_events_parse(int argc, char **argv, struct wr_cli_events_opts *o,
                        wr_error_t *err);
/* GET /v1/events?follow=...&since=... with the filters (caller frees). */
char *wr_cli_events_path(const struct wr_cli_events_opts *o, uint64_t since);
/* "12:03:04.512  created  web (sb-abc123)  reason=..." (caller frees). */
char *wr_cli_event_line(const json_t *ev);

/* ---- option helpers (args.c) --------------------------------------------- */

/*
 * getopt_long with house rules: `shortopts` must start with "+:" or ":"
 * (we print our own messages). Returns the option character, -1 when the
 * options end, or '?' after filling err for an unknown option or a
 * missing value. Reset with `optind = 0` before the first call.
 */
int wr_cli_getopt(int argc, char **argv, const char *shortopts,
                  const struct option *longopts, wr_error_t *err);
/* JSON carries only UTF-8: refuse other text with a clear message rather
 * than send something else than the user typed. */
int wr_cli_check_text(const char *s, const char *what, wr_error_t *err);
/* Check "KEY=VALUE" (key non-empty; an environment name when env). */
int wr_cli_check_kv(const char *arg, const char *option, bool env,
                    wr_error_t *err);
/* Append a checked "K=V" to *v. */
int wr_cli_push_kv(char ***v, const char *arg, const char *option, bool env,
                   wr_error_t *err);
/* {"K":"V",...} from checked "K=V" entries (NULL gives {}). */
json_t *wr_cli_kv_object(char *const *kv);
/* A positive, finite number of CPUs ("1", "1.5", "0.25"). */
int wr_cli_parse_cpus(const char *s, double *out, wr_error_t *err);
/* Seconds as a JSON number: an integer when whole. */
json_t *wr_cli_seconds_json(uint64_t ms);
/* "30s", "1.5s", "0.5s" for messages. */
void wr_cli_format_seconds(uint64_t ms, char *out, size_t size);

/* ---- talking to the daemon (client.c) ------------------------------------ */

void wr_cli_client_closep(wr_http_client_t **c);
#define _cleanup_client_ _cleanup_(wr_cli_client_closep)
void wr_cli_responsep(struct wr_http_response *r);
#define _cleanup_response_ _cleanup_(wr_cli_responsep)

/* Connect; a missing or refusing socket gives "cannot reach warrend at
 * ADDR (is `warren daemon` running?)". */
int wr_cli_connect(const struct wr_cli_ctx *ctx, wr_http_client_t **out,
                   wr_error_t *err);
/*
 * One request with an optional JSON body (borrowed). On 2xx *out gets the
 * parsed reply (NULL when empty; out may be NULL). Otherwise err gets the
 * API's message and *status (may be NULL) the HTTP status.
 */
int wr_cli_call(const struct wr_cli_ctx *ctx, const char *method,
                const char *path, const json_t *body, json_t **out, int *status,
                wr_error_t *err);
/* After a streamed request answered with an error: read the rest of the
 * body and turn it into the API's message. */
int wr_cli_stream_error(wr_http_client_t *c, struct wr_http_response *resp,
                        wr_error_t *err);
/* The "code" of an error body; "" when it has none. Caller frees. */
char *wr_cli_error_code(const struct wr_http_response *resp);
/* Percent-encode for a path segment or query value (caller frees). */
char *wr_cli_escape(const char *s);
/* "/v1/sandboxes/<escaped name><suffix>" (caller frees). */
char *wr_cli_sandbox_path(const char *name, const char *suffix);

/* Read an NDJSON body line by line; fn returns 1 to stop, 0 to go on, -1
 * on error (with err filled). Lines are bounded in size. */
typedef int (*wr_cli_ndjson_fn)(json_t *event, void *arg, wr_error_t *err);
int wr_cli_ndjson_read(wr_http_client_t *c, wr_cli_ndjson_fn fn, void *arg,
                       wr_error_t *err);

/*
 * Run fn for each name; print "warren: message" for each failure and go on.
 * Returns 0 when all succeeded, else 1. Used by start/stop/pause/... .
 */
typedef int (*wr_cli_each_fn)(const struct wr_cli_ctx *ctx, const char *name,
                              void *arg, wr_error_t *err);
int wr_cli_each(const struct wr_cli_ctx *ctx, char *const *names, size_t n,
                wr_cli_each_fn fn, void *arg);

/* ---- lifecycle commands (lifecycle.c) ------------------------------------ */

/* POST /v1/sandboxes/{name}<suffix> with body (may be NULL). */
int wr_cli_sandbox_post(const struct wr_cli_ctx *ctx, const char *name,
                        const char *suffix, const json_t *body,
                        wr_error_t *err);
/* The same for each name, printing each name done (see wr_cli_each). */
int wr_cli_post_each(const struct wr_cli_ctx *ctx, char *const *names, size_t n,
                     const char *suffix, const json_t *body);
/* All of start, pause and resume: --help, one or more names, the POST. */
int wr_cli_simple_action(const struct wr_cli_ctx *ctx, int argc, char **argv,
                         const char *cmd, const char *help, const char *suffix);

/* ---- requests that may wait in line (queue.c) ---------------------------- */

/*
 * A create, start or resume that may wait for a free sandbox: streamed,
 * printing "waiting for a free sandbox, #N in line" on stderr while it
 * waits. 0 with *out (the reply); -1 with err: ETIMEDOUT for the daemon's
 * queue_timeout, EAGAIN for a connection lost while waiting (both say
 * that it can be retried). queue_timeout_s 0: the daemon's.
 */
int wr_cli_call_in_line(const struct wr_cli_ctx *ctx, const char *method,
                        const char *path, const json_t *body,
                        uint64_t queue_timeout_s, json_t **out,
                        wr_error_t *err);
/* --queue-timeout: whole seconds, 1 to 3600 ("30", "5m"). */
int wr_cli_parse_queue_timeout(const char *arg, uint64_t *out, wr_error_t *err);
/* start and resume: --help, --queue-timeout, one or more names. */
int wr_cli_limited_action(const struct wr_cli_ctx *ctx, int argc, char **argv,
                          const char *cmd, const char *help,
                          const char *suffix);

/* ---- output (output.c) --------------------------------------------------- */

/* "warren: message" on stderr; returns code. */
int wr_cli_fail(int code, const char *fmt, ...) WR_PRINTF(2, 3);
/* "warren: message" + "See `warren CMD --help`."; returns 2. */
int wr_cli_usage(const char *cmd, const wr_error_t *err);
/* Print help text to stdout; returns 0. */
int wr_cli_help(const char *text);
/* Pretty JSON on stdout. */
int wr_cli_print_json(const json_t *j);
/* Extra jansson flags for JSON printed to stdout (see output.c). */
size_t wr_cli_json_flags(void);
/* A name or value for plain output: s itself when every character is safe
 * for a terminal (see wr_text_unit), else quoted as ls quotes file names
 * ('a'$'\033''b'). Caller frees. Tables quote every cell. */
char *wr_cli_quote(const char *s);
/* A message with its unsafe characters as C escapes in place (newline and
 * tab kept); wr_cli_fail applies it to every error line. Caller frees. */
char *wr_cli_safe_text(const char *s);
/* Print a formatted line (newline added) made safe by wr_cli_safe_text. */
void wr_cli_line(FILE *out, const char *fmt, ...) WR_PRINTF(2, 3);

/* A text table: rows of cells; columns padded to the widest cell. */
struct wr_cli_table {
  size_t ncols;
  size_t nrows;
  char **cells; /* nrows * ncols, owned */
};
void wr_cli_table_init(struct wr_cli_table *t, size_t ncols);
void wr_cli_table_add(struct wr_cli_table *t, const char *const *row);
void wr_cli_table_print(const struct wr_cli_table *t, FILE *out);
void wr_cli_table_free(struct wr_cli_table *t);

/* RFC 3339 ("2026-11-30T02:50:41Z", fractions and offsets allowed) to ms
 * since the epoch. */
int wr_cli_parse_time(const char *s, int64_t *ms, wr_error_t *err);
/* "just now", "1 second ago", "2 minutes ago", ... "3 years ago". */
void wr_cli_format_ago(int64_t now_ms, int64_t then_ms, char *out, size_t size);
/* The age of an RFC 3339 stamp from a JSON object field, or "-". */
void wr_cli_field_ago(const json_t *obj, const char *key, char *out,
                      size_t size);
/* Accessors that tolerate missing fields: "" / -1 / false. */
const char *wr_cli_jstr(const json_t *obj, const char *key);
int64_t wr_cli_jint(const json_t *obj, const char *key);
bool wr_cli_jbool(const json_t *obj, const char *key);

/* The largest frame the CLI accepts from warrend. */
#define WR_FRAME_MAX_PAYLOAD (16u << 20)

/* ---- detach keys (frames.c) ---------------------------------------------- */

/*
 * The detach sequence, Ctrl-P Ctrl-Q unless `keys` says otherwise,
 * recognised in typed input. Bytes that may start the sequence are held
 * back until the next bytes show whether they do; the sequence itself is
 * never forwarded.
 */
#define WR_CLI_DETACH_MAX 8
struct wr_cli_detach {
  char keys[WR_CLI_DETACH_MAX];
  size_t nkeys;   /* 0: Ctrl-P Ctrl-Q */
  size_t matched; /* bytes of the sequence seen and held back */
};
/* "ctrl-p,ctrl-q", "ctrl-a,d", "ctrl-]": comma-separated keys, each one
 * printable character or ctrl-X (X one of a-z @ [ \ ] ^ _), at most
 * WR_CLI_DETACH_MAX of them. */
int wr_cli_parse_detach_keys(const char *spec, struct wr_cli_detach *out,
                             wr_error_t *err);
/* Append the bytes to forward to out; true when the sequence completed
 * (bytes after it are dropped). */
bool wr_cli_detach_feed(struct wr_cli_detach *d, const char *in, size_t len,
                        wr_buf_t *out);

/* ---- terminal (tty.c) ---------------------------------------------------- */

struct wr_cli_tty {
  int fd;
  bool raw;
  struct termios saved;
};
/* Put fd in raw mode, remembering the old settings. */
int wr_cli_tty_raw(struct wr_cli_tty *t, int fd, wr_error_t *err);
/* Put the old settings back (idempotent). */
void wr_cli_tty_restore(struct wr_cli_tty *t);
/* Rows and columns of the terminal on stdout, else stdin; 0 when none. */
void wr_cli_tty_size(unsigned *rows, unsigned *cols);

/* ---- the interactive stream (stream.c) ----------------------------------- */

struct wr_cli_stream_opts {
  bool forward_stdin; /* send STDIN frames from fd 0 */
  bool send_eof;      /* send STDIN_EOF at local EOF (at once if not
                         forwarding stdin) */
  bool tty;           /* raw terminal, RESIZE on SIGWINCH */
  bool detach_keys;   /* Ctrl-P Ctrl-Q detaches */
  bool signal_detach; /* SIGINT/TERM/HUP detach instead of being sent */
  const struct wr_cli_detach *keys; /* other detach keys, or NULL */
  bool redraw; /* with tty: make the program redraw even when the size is
                  unchanged (one row less, then the real size) */
};

struct wr_cli_stream_result {
  bool started;
  bool detached;
  json_t *exit;  /* the EXIT object, or NULL */
  json_t *error; /* the ERROR object, or NULL */
  int signal;    /* a local signal that ended the stream, or 0 */
};

/*
 * Exchange frames on an upgraded connection until the process exits, the
 * server reports an error, the user detaches, or the connection ends.
 * STDOUT goes to fd 1 and STDERR to fd 2 as it arrives. `leftover` holds
 * bytes that came with the 101 response.
 */
int wr_cli_stream_run(int sock, const char *leftover, size_t nleftover,
                      const struct wr_cli_stream_opts *o,
                      struct wr_cli_stream_result *res, wr_error_t *err);
/* METHOD PATH (with BODY, or none) upgraded to a warren-exec stream, then
 * wr_cli_stream_run on it; a refusal is -1 with the API's message. */
int wr_cli_stream_request(const struct wr_cli_ctx *ctx, const char *method,
                          const char *path, const char *body,
                          const struct wr_cli_stream_opts *so,
                          struct wr_cli_stream_result *res, wr_error_t *err);
void wr_cli_stream_result_free(struct wr_cli_stream_result *res);
/* Exit code from an EXIT object: exit_code, 124 when timed out. */
int wr_cli_exit_code(const json_t *exit);

/* clone.c: clone mode's client side (see `warren create --clone`). */
int wr_cli_clone_check(const char *path, char **git_dir, wr_error_t *err);
int wr_cli_clone_setup(const struct wr_cli_ctx *ctx, const char *name,
                       const char *host_path, const char *git_dir,
                       wr_error_t *err);

/* ---- attaching to background processes (attach.c), `warren run` -------- */

/* How `attach` and `run` use the terminal: typed input when stdin is a
 * terminal; raw mode and the detach keys when the process has a tty too;
 * INT, TERM and HUP always detach (the process outlives the terminal). */
void wr_cli_attach_opts(bool proc_tty, struct wr_cli_stream_opts *so);
/* Attach to background process TAG of SANDBOX: its kept output first,
 * then live output, until it exits or the user detaches (res says which).
 * -1 with err when the daemon refuses or the connection fails. */
int wr_cli_attach_stream(const struct wr_cli_ctx *ctx, const char *sandbox,
                         const char *tag, const struct wr_cli_stream_opts *so,
                         struct wr_cli_stream_result *res, wr_error_t *err);

int wr_cli_cmd_run(const struct wr_cli_ctx *ctx, int argc, char **argv);

struct wr_cli_run_opts {
  const char *name;
  struct wr_cli_detach keys; /* nkeys 0: Ctrl-P Ctrl-Q */
  bool help;
  char *const *cmd; /* after `--`, borrowed from argv; NULL: the agent */
  size_t ncmd;
};
int wr_cli_run_parse(int argc, char **argv, struct wr_cli_run_opts *o,
                     wr_error_t *err);

/* ---- commands in a sandbox, captured (run_in.c) -------------------------- */

/*
 * One command run in a sandbox through the exec API, for code that must
 * read its output rather than show it. Everything it prints is the
 * sandbox's, so untrusted: stdout is bounded and stderr kept or defused.
 */
struct wr_cli_run_in {
  char *const *argv;      /* NULL-terminated */
  const char *cwd;        /* NULL: the sandbox's working directory */
  const char *stdin_text; /* NULL: stdin is empty */
  uint64_t timeout_ms;    /* 0: none */
  wr_buf_t *out;          /* stdout; NULL discards it */
  size_t max_out;         /* more stdout than this is an error */
  wr_buf_t *errout;       /* keeps the last 16 KiB of stderr; NULL writes
                             it to ours with control characters defused */
  /* Results. */
  int exit_code;     /* 128+N when killed by signal N */
  bool timed_out;    /* killed by timeout_ms */
  char api_code[32]; /* when the daemon refused to run it: the API's error
                        code ("not_running", "not_found", ...), else "" */
};
/* Run r->argv in sandbox `name` as root and wait for it. 0 once it has
 * exited, whatever its exit code; -1 when it could not run. */
int wr_cli_run_in(const struct wr_cli_ctx *ctx, const char *name,
                  struct wr_cli_run_in *r, wr_error_t *err);
/* Append text from a sandbox to out with the control characters that a
 * terminal would obey (all but newline and tab) replaced by '?'. */
void wr_cli_defuse(const char *data, size_t len, wr_buf_t *out);
/* The last few hundred bytes of a sandbox's stderr kept in errout,
 * defused and without trailing newlines, for an error message ("" when
 * none; caller frees). */
char *wr_cli_said(const wr_buf_t *errout);

/* ---- clone mode: the host side (clone.c) --------------------------------- */

/*
 * The first line of every script warren runs with git inside a sandbox:
 * any owner is trusted (the clone's files may belong to another uid
 * there), and no hook or fsmonitor of the clone runs for warren's own
 * commands, which the agent could otherwise make fail.
 */
#define WR_CLI_GIT_ENV_SH                                                      \
  "export GIT_CONFIG_COUNT=3 GIT_CONFIG_KEY_0=safe.directory "                 \
  "GIT_CONFIG_VALUE_0='*' GIT_CONFIG_KEY_1=core.hooksPath "                    \
  "GIT_CONFIG_VALUE_1=/dev/null GIT_CONFIG_KEY_2=core.fsmonitor "              \
  "GIT_CONFIG_VALUE_2=false\n"

/* Whether a full ref name ("refs/heads/x") follows git check-ref-format's
 * rules, within 1024 bytes. */
bool wr_cli_git_refname_valid(const char *name);
/* The git directory of the working tree at path (absolute, resolved),
 * read without running git; linked worktrees and a .git outside path are
 * refused. wr_cli_clone_check also wants a branch with a commit. */
int wr_cli_clone_git_dir(const char *path, char **git_dir, wr_error_t *err);

/* A program run on the host, never through a shell. */
struct wr_cli_host_cmd {
  char *const *argv; /* argv[0] is looked up in PATH */
  char *const *env;  /* NULL: ours */
  const char *cwd;   /* NULL: ours */
  int stdin_fd;      /* -1: /dev/null */
  bool as_user;      /* become uid/gid (and no groups) first */
  uid_t uid;
  gid_t gid;
  wr_buf_t *out;  /* stdout; NULL: /dev/null */
  size_t max_out; /* more stdout than this is an error */
};
/* Run it and wait; *status is its exit code (128+N for signal N). stderr
 * is ours. */
int wr_cli_host_run(const struct wr_cli_host_cmd *cmd, int *status,
                    wr_error_t *err);

/* Remove the host repository's remote `warren-NAME` if its URL is
 * `warren::NAME`; *removed says whether it did. */
int wr_cli_clone_remote_remove(const char *host_path, const char *name,
                               bool *removed, wr_error_t *err);

/* What the CLI needs to know of a clone-mode sandbox. */
struct wr_cli_clone_info {
  char *state;     /* "running", "stopped", ... */
  char *host_path; /* the original repository on the host */
  char *mount;     /* the clone inside ("/workspace") */
  char *origin;    /* the original inside ("/origin") */
};
void wr_cli_clone_info_free(struct wr_cli_clone_info *i);
/* GET the sandbox; *clone is false (info empty) unless it is in clone
 * mode. */
int wr_cli_clone_info(const struct wr_cli_ctx *ctx, const char *name,
                      struct wr_cli_clone_info *info, bool *clone,
                      wr_error_t *err);

/* A branch of a clone with commits that no fetch has taken. */
struct wr_cli_unfetched {
  char *branch; /* without refs/heads/ */
  uint64_t commits;
};
void wr_cli_unfetched_free(struct wr_cli_unfetched *u, size_t n);
/* Parse the check's answer, lines of "COUNT BRANCH". */
int wr_cli_clone_parse_unfetched(const char *text, size_t len,
                                 struct wr_cli_unfetched **out, size_t *n,
                                 wr_error_t *err);
/* Ask the (running) sandbox which branches of its clone at `mount` have
 * commits reachable from no ref under refs/remotes/origin/ nor under
 * refs/warren/fetched/, the marks git-remote-warren leaves. */
int wr_cli_clone_unfetched(const struct wr_cli_ctx *ctx, const char *name,
                           const char *mount, struct wr_cli_unfetched **out,
                           size_t *n, wr_error_t *err);

#endif
