/*
 * init: the control protocol between warrend and warren-init.
 *
 * warren-init is PID 1 inside every sandbox. It listens on a unix
 * SOCK_SEQPACKET socket (sandboxes/ID/ctl.sock on the host, bound before
 * the sandbox's root was pivoted, so only host root can reach it). The
 * daemon connects, sends requests and receives replies and events. Each
 * message is one datagram: a fixed header followed by a payload, with file
 * descriptors attached as SCM_RIGHTS when the message type says so.
 *
 * Both ends treat what they receive as untrusted: every length and count is
 * checked against the datagram's real size and the limits below. Decoders
 * never read past the payload and never trust a NUL that is not there.
 *
 * This header is shared by warren-init (static, no other dependency) and
 * by the daemon's runtime module.
 */
#ifndef WR_INIT_H
#define WR_INIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define WR_INIT_MAGIC 0x57524e49u /* "WRNI" */
#define WR_INIT_VERSION 1
#define WR_INIT_MAX_MSG 65536  /* largest datagram, header included */
#define WR_INIT_MAX_FDS 8      /* most fds attached to one message */
#define WR_INIT_MAX_ARGS 4096  /* argv or env entries in SPAWN */
#define WR_INIT_MAX_PROCS 1024 /* processes init tracks at once */
#define WR_INIT_TAG_MAX 64     /* tag bytes, NUL excluded */
#define WR_INIT_CMD_MAX 256    /* command summary kept for LIST */
#define WR_INIT_MAX_GROUPS 64
/* The most bytes the strings of one SPAWN may take (tag, cwd, argv and
 * env, each with its NUL): the datagram less its fixed parts, rounded
 * down. The daemon checks requests against it before sending. */
#define WR_INIT_SPAWN_STR_MAX (WR_INIT_MAX_MSG - 512)

enum wr_init_type {
  /* daemon -> init */
  WR_INIT_HELLO = 1,  /* no payload; reply HELLO_OK */
  WR_INIT_SPAWN = 2,  /* struct wr_init_spawn; reply SPAWNED */
  WR_INIT_SIGNAL = 3, /* struct wr_init_signal; reply RESULT */
  WR_INIT_LIST = 4,   /* no payload; reply LISTED */
  WR_INIT_FORGET = 5, /* struct wr_init_forget; reply RESULT */
  /* init -> daemon */
  WR_INIT_HELLO_OK = 101, /* struct wr_init_hello_ok */
  WR_INIT_SPAWNED = 102,  /* struct wr_init_spawned (+ pty master fd) */
  WR_INIT_RESULT = 103,   /* struct wr_init_result */
  WR_INIT_LISTED = 104,   /* struct wr_init_listed (+ kept fds) */
  WR_INIT_EXIT = 105,     /* struct wr_init_exit: an event, id = 0 */
};

/* Every datagram starts with this header (host byte order: both ends run
 * on the same machine). `id` pairs a reply with its request; events use 0.
 * `len` is the payload length and must equal the datagram size minus the
 * header. */
struct wr_init_hdr {
  uint32_t magic;
  uint16_t type;
  uint16_t nfds; /* descriptors attached */
  uint32_t id;
  uint32_t len;
};

enum wr_init_spawn_flags {
  WR_SPAWN_TTY = 1u << 0,        /* init allocates a pty; no stdio fds sent */
  WR_SPAWN_BACKGROUND = 1u << 1, /* init keeps output fds across daemons */
};

/*
 * SPAWN: run a process.
 *
 * Attached fds, in order:
 *  - without TTY: stdin, stdout, stderr (the child's ends);
 *    with BACKGROUND also the daemon's read ends of stdout and stderr, which
 *    init keeps (never reads) and hands back in LISTED.
 *  - with TTY: none. init opens a pty in the sandbox's devpts, gives the
 *    child the slave as its controlling terminal and returns the master in
 *    SPAWNED; with BACKGROUND it keeps a duplicate of the master.
 *
 * Decoded form. The wire form is a fixed part of 28 bytes (uint32 flags,
 * uid, gid, ngroups, uint16 rows, cols, uint32 argc, envc), then
 * ngroups uint32 group ids, then NUL-terminated strings: tag, cwd, argc
 * argv entries, envc env entries ("K=V"), and nothing after them. argv[0]
 * and cwd are non-empty; tag is at most WR_INIT_TAG_MAX bytes; cwd is
 * shorter than PATH_MAX.
 */
struct wr_init_spawn {
  uint32_t flags;
  uint32_t uid, gid;
  uint32_t ngroups;
  uint32_t groups[WR_INIT_MAX_GROUPS];
  uint16_t rows, cols; /* initial window size with TTY */
  const char *tag;     /* "" when none */
  const char *cwd;
  uint32_t argc, envc;
  const char **argv; /* argc entries + NULL; decoded: points into payload */
  const char **env;  /* envc entries + NULL */
};

/* SPAWNED: err = 0 and pid > 0 on success; otherwise err is an errno and
 * `stage` names the step that failed: in init "limit" (EAGAIN: already
 * WR_INIT_MAX_PROCS tracked), "pty", "pipe", "fork"; in the child
 * "setsid", "pty" (TIOCSCTTY), "stdio", "fds", "setgroups", "setgid",
 * "setuid", "chdir", "exec". proc_id (never 0) names the process in later
 * SIGNAL/FORGET/EXIT messages. A SPAWN that cannot be decoded, or whose fd
 * count is wrong, is answered with RESULT EINVAL instead, like any other
 * malformed request. */
struct wr_init_spawned {
  int32_t err;
  int32_t pid; /* pid inside the sandbox */
  uint32_t proc_id;
  char stage[16];
};

enum wr_init_signal_flags {
  WR_SIGNAL_GROUP = 1u << 0, /* signal the process group */
  WR_SIGNAL_ALL = 1u << 1,   /* every process in the sandbox but init */
};

/* SIGNAL: sig in 1..64. RESULT is ESRCH for an unknown, forgotten or
 * already reaped proc_id. WR_SIGNAL_ALL is kill(-1) when init is PID 1;
 * outside a pid namespace (tests) init signals the process group of each
 * running tracked process instead, so it never signals the whole host. */
struct wr_init_signal {
  uint32_t proc_id; /* ignored with WR_SIGNAL_ALL */
  int32_t sig;
  uint32_t flags;
};

/* FORGET: stop tracking a process (background or not) and close the fds
 * init keeps for it. A running process keeps running, untracked: no EXIT
 * will be sent for it. RESULT is ESRCH for an unknown proc_id. */
struct wr_init_forget {
  uint32_t proc_id;
};

struct wr_init_result {
  int32_t err; /* 0 or errno */
};

struct wr_init_hello_ok {
  uint32_t version;
  uint32_t nprocs; /* processes init tracks */
};

/* EXIT: a tracked process ended; status is the raw wait status. */
struct wr_init_exit {
  uint32_t proc_id;
  int32_t pid;
  int32_t status;
};

/* One LISTED entry. Background entries that are still kept bring their
 * fds: with TTY one (the pty master), otherwise two (stdout, stderr read
 * ends), attached in entry order. */
struct wr_init_proc {
  uint32_t proc_id;
  int32_t pid;
  uint32_t flags;  /* the spawn flags */
  uint8_t running; /* 1 while not yet reaped */
  uint8_t has_fds; /* fds for this entry are attached */
  int32_t status;  /* wait status once reaped */
  int64_t started_ms;
  char tag[WR_INIT_TAG_MAX + 1];
  char cmd[WR_INIT_CMD_MAX + 1];
};

/* LISTED: a count followed by that many entries. Large lists are split
 * over several LISTED datagrams with the same id; `more` is 1 on every
 * one but the last. On the wire: count (uint32), more (uint8), three zero
 * bytes, then WR_INIT_PROC_WIRE bytes per entry: proc_id, pid, flags,
 * status (4 bytes each), started_ms (8), running, has_fds (1 each), tag
 * (WR_INIT_TAG_MAX + 1) and cmd (WR_INIT_CMD_MAX + 1), NUL-padded. */
struct wr_init_listed {
  uint32_t count;
  uint8_t more;
  struct wr_init_proc *procs; /* decoded: caller frees with free() */
};

/* Bytes of one LISTED entry on the wire. */
#define WR_INIT_PROC_WIRE (24 + 2 + WR_INIT_TAG_MAX + 1 + WR_INIT_CMD_MAX + 1)
/* The most entries one LISTED datagram can hold. */
#define WR_INIT_LISTED_MAX                                                     \
  ((WR_INIT_MAX_MSG - sizeof(struct wr_init_hdr) - 8) / WR_INIT_PROC_WIRE)

/* ---- encoding and decoding (pure, no I/O) ----------------------------- */

/* Encoders append a header and payload to `out`. They fail (EINVAL or
 * EMSGSIZE) when the message would break a limit above; nothing is
 * appended then. wr_init_encode_simple has no error argument: it returns
 * -1 with errno set. */
int wr_init_encode_spawn(wr_buf_t *out, uint32_t id,
                         const struct wr_init_spawn *s, uint16_t nfds,
                         wr_error_t *err);
int wr_init_encode_simple(wr_buf_t *out, uint16_t type, uint32_t id,
                          const void *payload, uint32_t len, uint16_t nfds);
int wr_init_encode_listed(wr_buf_t *out, uint32_t id,
                          const struct wr_init_proc *procs, uint32_t count,
                          bool more, uint16_t nfds, wr_error_t *err);

/* Check a datagram's header against its size and the fds that came with
 * it, and return the payload. Only SPAWN, SPAWNED (at most one) and LISTED
 * may carry fds. */
int wr_init_decode_hdr(const void *msg, size_t len, size_t nfds_received,
                       struct wr_init_hdr *hdr, const void **payload,
                       wr_error_t *err);
/* Decode a SPAWN payload. argv/env are allocated (free with free()); the
 * strings point into `payload`, which must outlive the struct. */
int wr_init_decode_spawn(const void *payload, size_t len,
                         struct wr_init_spawn *s, wr_error_t *err);
/* Decode a fixed-size payload of exactly `size` bytes. */
int wr_init_decode_fixed(const void *payload, size_t len, void *out,
                         size_t size, wr_error_t *err);
/* Decode SPAWNED: a fixed payload whose stage must be NUL-terminated,
 * err >= 0, and pid > 0 and proc_id != 0 when err is 0. */
int wr_init_decode_spawned(const void *payload, size_t len,
                           struct wr_init_spawned *s, wr_error_t *err);
/* Decode LISTED. Every entry's strings are NUL-terminated, flags known and
 * has_fds only on background entries. The caller must still check that
 * wr_init_listed_nfds() equals the fds that came with the datagram. */
int wr_init_decode_listed(const void *payload, size_t len,
                          struct wr_init_listed *l, wr_error_t *err);
/* The number of fds a valid SPAWN with these flags must carry. */
unsigned wr_init_spawn_nfds(uint32_t flags);
/* The number of fds LISTED entries announce (sum over has_fds). */
unsigned wr_init_listed_nfds(const struct wr_init_listed *l);

/* ---- transport -------------------------------------------------------- */

/* Send one datagram with fds attached (MSG_NOSIGNAL; retries on EINTR).
 * Blocks on a blocking socket; on a non-blocking one a full socket buffer
 * is an error with err->code == EAGAIN. */
int wr_init_send(int sock, const void *msg, size_t len, const int *fds,
                 size_t nfds, wr_error_t *err);
/* Receive one datagram into buf (WR_INIT_MAX_MSG bytes). Received fds are
 * stored in fds[] (O_CLOEXEC) and counted in *nfds; a truncated datagram or
 * control message is an error and any fds that came are closed.
 * Returns the datagram length, 0 on orderly EOF (or an empty datagram,
 * which no valid message is), -1 on error (errno EAGAIN is reported as an
 * error with err->code == EAGAIN). */
ssize_t wr_init_recv(int sock, void *buf, size_t size, int *fds, size_t *nfds,
                     wr_error_t *err);

#endif
