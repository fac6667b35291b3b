/*
 * common: the small toolkit every other module builds on.
 *
 * Errors (wr_error_t), cleanup attributes, allocation that aborts on
 * failure, logging, a growable byte buffer, strict JSON helpers, path-safe
 * file helpers (openat2), and parsers for sizes, durations and names.
 *
 * Nothing here keeps global state except the log level, which is set once
 * by a binary's main before any thread starts.
 */
#ifndef WR_COMMON_H
#define WR_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define WR_VERSION "0.1.0"

#define WR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define WR_UNUSED __attribute__((unused))
#define WR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define WR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define WR_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- errors ----------------------------------------------------------- */

/*
 * An error carries the errno that caused it (0 when none applies) and a
 * message built where the failure happened, with context prepended by
 * callers on the way up ("create sandbox `a`: mount overlay: ...").
 */
typedef struct wr_error {
  int code; /* errno value, or 0 */
  char msg[512];
} wr_error_t;

/* Fill err (may be NULL) and return -1. When code != 0, ": strerror" is
 * appended. Always returns -1 so callers can `return wr_error_set(...)`. */
int wr_error_set(wr_error_t *err, int code, const char *fmt, ...)
    WR_PRINTF(3, 4);
/* Like wr_error_set, but the code only classifies the error (for an HTTP
 * status, say): no ": strerror" is appended. */
int wr_error_setx(wr_error_t *err, int code, const char *fmt, ...)
    WR_PRINTF(3, 4);
/* Prepend "context: " to an existing message. Returns -1. */
int wr_error_wrap(wr_error_t *err, const char *fmt, ...) WR_PRINTF(2, 3);
void wr_error_clear(wr_error_t *err);

/* ---- memory ----------------------------------------------------------- */

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) WR_PRINTF(1, 2);
void *xmemdup(const void *p, size_t n);

/* ---- cleanup ---------------------------------------------------------- */

void wr_freep(void *p);
void wr_closep(int *fd);
void wr_fclosep(FILE **f);
void wr_strvfreep(char ***v);

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(wr_freep)
#define _cleanup_close_ _cleanup_(wr_closep)
#define _cleanup_fclose_ _cleanup_(wr_fclosep)
#define _cleanup_strv_ _cleanup_(wr_strvfreep)

/* Hand ownership out of a cleanup variable. */
static inline void *wr_steal_ptr(void *pp) {
  void **p = (void **)pp;
  void *r = *p;
  *p = NULL;
  return r;
}
#define steal_ptr(pp) wr_steal_ptr(pp)
static inline int steal_fd(int *fd) {
  int r = *fd;
  *fd = -1;
  return r;
}

/* ---- logging ---------------------------------------------------------- */

enum wr_log_level {
  WR_LOG_ERROR = 0,
  WR_LOG_WARN = 1,
  WR_LOG_INFO = 2,
  WR_LOG_DEBUG = 3,
};

/* Set once from main before threads start. */
void wr_log_init(const char *prog, enum wr_log_level level, bool json);
void wr_log(enum wr_log_level level, const char *fmt, ...) WR_PRINTF(2, 3);
#define wr_err(...) wr_log(WR_LOG_ERROR, __VA_ARGS__)
#define wr_warn(...) wr_log(WR_LOG_WARN, __VA_ARGS__)
#define wr_info(...) wr_log(WR_LOG_INFO, __VA_ARGS__)
#define wr_debug(...) wr_log(WR_LOG_DEBUG, __VA_ARGS__)

/* ---- byte buffer ------------------------------------------------------ */

typedef struct wr_buf {
  char *data; /* always NUL-terminated when non-NULL */
  size_t len;
  size_t cap;
} wr_buf_t;

void wr_buf_init(wr_buf_t *b);
void wr_buf_free(wr_buf_t *b);
void wr_buf_reset(wr_buf_t *b);
void wr_buf_reserve(wr_buf_t *b, size_t extra);
void wr_buf_append(wr_buf_t *b, const void *data, size_t len);
void wr_buf_puts(wr_buf_t *b, const char *s);
void wr_buf_printf(wr_buf_t *b, const char *fmt, ...) WR_PRINTF(2, 3);
/* Drop the first n bytes. */
void wr_buf_consume(wr_buf_t *b, size_t n);
/* Take the data out; the buffer becomes empty. */
char *wr_buf_steal(wr_buf_t *b, size_t *len);

/*
 * A bounded ring of bytes: keeps the last `cap` bytes written and counts
 * how many were dropped, for the output of background processes.
 */
typedef struct wr_ring {
  char *data;
  size_t cap;
  size_t start;   /* index of the oldest byte */
  size_t len;     /* bytes held */
  uint64_t total; /* bytes ever written */
} wr_ring_t;

void wr_ring_init(wr_ring_t *r, size_t cap);
void wr_ring_free(wr_ring_t *r);
void wr_ring_write(wr_ring_t *r, const void *data, size_t len);
/* Copy out up to `max` bytes starting at absolute offset `from` (clamped to
 * the oldest byte held). Returns bytes copied; *next is the offset after. */
size_t wr_ring_read(const wr_ring_t *r, uint64_t from, void *out, size_t max,
                    uint64_t *next);

/* ---- string vectors --------------------------------------------------- */

size_t wr_strv_len(char *const *v);
/* The bytes of the strings of v, each with its NUL (as exec carries them). */
size_t wr_strv_bytes(char *const *v);
void wr_strv_free(char **v);
char **wr_strv_dup(char *const *v);
/* Append a copy of s; v may be NULL. Returns the new vector. */
char **wr_strv_push(char **v, const char *s);
/* An environment: "K=V" replaces the entry for K, or is appended. */
char **wr_strv_setenv(char **env, const char *kv);

/* ---- strings and parsing ---------------------------------------------- */

bool wr_str_has_prefix(const char *s, const char *prefix);
bool wr_str_has_suffix(const char *s, const char *suffix);
/* Copy at most size-1 bytes and NUL-terminate; returns -1 if truncated. */
int wr_strlcpy(char *dst, const char *src, size_t size);

/* "512", "64k", "1g", "1.5G", "2MiB" -> bytes (binary units). */
int wr_parse_size(const char *s, uint64_t *out, wr_error_t *err);
/* "30", "30s", "500ms", "2m", "1h" -> milliseconds. */
int wr_parse_duration_ms(const char *s, uint64_t *out, wr_error_t *err);
/* Decimal, no sign, no junk, within [min, max]. */
int wr_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out,
                 wr_error_t *err);
/* Sandbox and image names: [a-z0-9][a-z0-9_.-]{0,62}, not all dots. */
bool wr_name_valid(const char *s);
/* Environment entries K=V with K a portable name. */
bool wr_env_key_valid(const char *key);
/* Signal name ("TERM", "SIGKILL", "9") -> number; -1 if unknown. */
int wr_signal_from_name(const char *s);
/* Signal number -> name without "SIG" ("KILL"); "UNKNOWN" for others. */
const char *wr_signal_name(int sig);
/* Format bytes as "1.5 GiB". */
void wr_format_size(uint64_t bytes, char *out, size_t size);

/* n random bytes from getrandom(); aborts if the kernel cannot give them. */
void wr_random_bytes(void *out, size_t n);
/* "PREFIX" + n lowercase base-36 characters. */
char *wr_random_id(const char *prefix, size_t n);

/* Wall clock in milliseconds since the epoch; monotonic clock in ns. */
int64_t wr_now_ms(void);
uint64_t wr_mono_ns(void);
/* RFC 3339 UTC ("2026-11-30T02:50:41Z") into out (>= 32 bytes). */
void wr_format_time(int64_t ms, char *out, size_t size);

/* ---- text for terminals (text.c) --------------------------------------- */

/* Length of the valid UTF-8 sequence at s (1-4, at most `left` bytes), or
 * 0 when it is not one. */
size_t wr_utf8_seq(const char *s, size_t left);
/* The length of the next unit of s (a character, or one byte that is not
 * UTF-8), and whether a terminal could obey it instead of showing it: C0
 * controls (newline and tab included), DEL, C1 controls, bytes that are
 * not UTF-8, and the bidi marks that reorder text. */
size_t wr_text_unit(const char *s, size_t left, bool *unsafe);
/* Whether every unit of s is safe to print as it is. */
bool wr_text_is_safe(const char *s);

/* ---- base64 ------------------------------------------------------------ */

/* Standard alphabet with padding (caller frees). */
char *wr_base64_encode(const void *data, size_t len);
/* Append the decoded bytes to out; malformed input is an error. */
int wr_base64_decode(const char *in, size_t len, wr_buf_t *out,
                     wr_error_t *err);

/* ---- fd and file helpers ---------------------------------------------- */

/* Write/read all bytes, retrying on EINTR and short transfers. */
int wr_write_all(int fd, const void *data, size_t len, wr_error_t *err);
ssize_t wr_read_all(int fd, void *data, size_t len);
/* Read a whole file (at most max bytes; more is an error). */
int wr_read_file(const char *path, size_t max, char **out, size_t *len,
                 wr_error_t *err);
int wr_read_file_at(int dirfd, const char *path, size_t max, char **out,
                    size_t *len, wr_error_t *err);
/* Write a file atomically (temp + rename) with mode. */
int wr_write_file(const char *path, const void *data, size_t len, mode_t mode,
                  wr_error_t *err);
int wr_write_file_at(int dirfd, const char *name, const void *data, size_t len,
                     wr_error_t *err);
/* mkdir -p for a host path (trusted). */
int wr_mkdir_p(const char *path, mode_t mode, wr_error_t *err);
/* rm -rf below dirfd/name without following symlinks or crossing mounts. */
int wr_rm_rf_at(int dirfd, const char *name, wr_error_t *err);
int wr_rm_rf(const char *path, wr_error_t *err);
/* fn(dirfd, name, arg, err) for each entry of the directory dirfd but "."
 * and "..", from its start, until fn returns nonzero, which is then the
 * result. dirfd stays open and the caller's; its offset moves (a dup
 * shares it). -1 with err when the directory cannot be read. */
typedef int (*wr_dir_entry_fn)(int dirfd, const char *name, void *arg,
                               wr_error_t *err);
int wr_dir_each(int dirfd, wr_dir_entry_fn fn, void *arg, wr_error_t *err);
int wr_set_cloexec(int fd);
int wr_set_nonblock(int fd, bool on);

/*
 * openat2 with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS: resolve `path`
 * (absolute or relative, as seen inside the root) under `rootfd`. Symlinks
 * and ".." are resolved as if rootfd were "/", so nothing outside it can
 * be reached. flags are open(2) flags; O_CLOEXEC is always added.
 */
int wr_open_in_root(int rootfd, const char *path, int flags, mode_t mode,
                    wr_error_t *err);
/* Split a path inside the root into its parent (opened O_PATH|O_DIRECTORY
 * in the root) and the final component. "/" has no final component and
 * is refused. *name points into a copy owned by the caller. */
int wr_open_parent_in_root(int rootfd, const char *path, char **name,
                           wr_error_t *err);
/* Validate a path from a client: non-empty, no NUL (by construction), at
 * most PATH_MAX bytes, each component at most NAME_MAX. */
int wr_path_check(const char *path, wr_error_t *err);

/*
 * Files in a root that someone else controls: a sandbox's root (its
 * /etc/passwd, its trust store), or a host directory that a sandbox can
 * change (a workspace, a repository inside one), read or written by the
 * daemon or the CLI on their own behalf. What is there may be a FIFO whose
 * open waits for ever, a socket, a device, a symlink, a directory, or a
 * sparse file of a terabyte. So these helpers:
 *
 *  - resolve with openat2 in the root (RESOLVE_IN_ROOT, or RESOLVE_BENEATH
 *    when leaving it is an error rather than impossible;
 *    RESOLVE_NO_MAGICLINKS; RESOLVE_NO_SYMLINKS on request), never
 *    following the final component;
 *  - look before they open: the final component is reached O_PATH and
 *    fstat'ed, and only a regular file (or a directory, when one is asked
 *    for) is ever opened, O_NONBLOCK, through the daemon's /proc;
 *  - bound what they read by the file's size first, then by what is read;
 *  - write by renaming a new file over the name, so a FIFO or symlink that
 *    stands there is replaced, never opened.
 *
 * No step waits on anything the root's owner controls, so each is bounded
 * in time by the filesystem alone; they do block on it: run them on a
 * worker thread (or in the CLI). Errors name the path, the root
 * (`where`, e.g. "in the sandbox") and what the file is: "/etc/passwd in
 * the sandbox is a fifo, not a regular file" (EINVAL; ENOTDIR when a
 * directory was wanted; ELOOP for a symlink with WR_CONFINED_NO_SYMLINKS;
 * EXDEV for a way out with WR_CONFINED_BENEATH; EFBIG when too large;
 * EISDIR when a write finds a directory; the errno otherwise).
 */
enum {
  WR_CONFINED_DIR = 1u << 0,         /* a directory, not a regular file */
  WR_CONFINED_NO_SYMLINKS = 1u << 1, /* no symlink in any component */
  WR_CONFINED_BENEATH = 1u << 2,     /* leaving rootfd is an error (EXDEV) */
  WR_CONFINED_PATH = 1u << 3,        /* return the checked O_PATH fd */
};
/* "a fifo", "a regular file", "a directory", ... */
const char *wr_file_kind(mode_t mode);
/* Open the inode behind an O_PATH fd (through /proc/self/fd). */
int wr_fd_reopen(int pathfd, int flags, wr_error_t *err);
/* Open `path` in the root as described above: a regular file O_RDONLY |
 * O_NONBLOCK, or with WR_CONFINED_DIR a directory O_RDONLY | O_DIRECTORY
 * (with WR_CONFINED_PATH the O_PATH fd instead). st (may be NULL) gets its
 * stat. */
int wr_open_confined(int rootfd, const char *where, const char *path,
                     unsigned flags, struct stat *st, wr_error_t *err);
/* Read a regular file of at most max bytes (NUL-terminated; len may be
 * NULL). */
int wr_read_in_root(int rootfd, const char *where, const char *path, size_t max,
                    char **out, size_t *len, wr_error_t *err);
/* Write a file: a new one in the parent (resolved in the root), owned by
 * owner:owner with mode, renamed over the name. */
int wr_write_in_root(int rootfd, const char *where, const char *path,
                     const void *data, size_t len, mode_t mode, uid_t owner,
                     wr_error_t *err);
/* wr_open_confined on a host path (absolute; `where` is "on the host"),
 * for a directory a sandbox may have changed: a workspace, a repository. */
int wr_open_host_confined(const char *path, unsigned flags, struct stat *st,
                          wr_error_t *err);

/* ---- JSON (jansson) --------------------------------------------------- */

typedef struct json_t json_t;
void wr_json_decrefp(json_t **j);
#define _cleanup_json_ _cleanup_(wr_json_decrefp)

/*
 * Strict decoding of an object from a client. Each field is described by a
 * name, a type and a destination; unknown fields, wrong types and missing
 * required fields are errors that name the field.
 */
enum wr_json_type {
  WR_JSON_STRING, /* char ** (borrowed from the json_t) */
  WR_JSON_INT,    /* int64_t * */
  WR_JSON_NUMBER, /* double * (integer or real) */
  WR_JSON_BOOL,   /* bool * */
  WR_JSON_OBJECT, /* json_t ** (borrowed) */
  WR_JSON_ARRAY,  /* json_t ** (borrowed) */
  WR_JSON_ANY,    /* json_t ** (borrowed) */
  WR_JSON_SIZE,   /* uint64_t *: integer bytes or a string like "1g" */
};

struct wr_json_field {
  const char *name;
  enum wr_json_type type;
  void *out;
  bool required;
  bool *present; /* optional: set when the field was given */
};

int wr_json_unpack(const json_t *obj, const struct wr_json_field *fields,
                   size_t n, wr_error_t *err);
/* Parse a client's body: must be a JSON object (empty body = {} when
 * allow_empty). Errors carry line and column. */
int wr_json_parse_object(const char *data, size_t len, bool allow_empty,
                         json_t **out, wr_error_t *err);
/* Array of strings -> NULL-terminated vector (copied). */
int wr_json_strv(const json_t *arr, const char *what, size_t max, char ***out,
                 wr_error_t *err);
/* Object of string values -> "K=V" vector (copied), keys validated. */
int wr_json_env(const json_t *obj, const char *what, char ***out,
                wr_error_t *err);
/* A JSON string for text that may not be UTF-8 (file names, messages that
 * echo input): invalid bytes become U+FFFD instead of failing. */
json_t *wr_json_string_lossy(const char *s);
/* Compact serialisation (caller frees). */
char *wr_json_dumps(const json_t *j);

/* Archives and in-root path helpers. */
#include "common/tar.h"
/* Git repositories recognised on disk (clone mode). */
#include "common/gitrepo.h"

#endif
