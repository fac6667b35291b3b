/*
 * Internal to the daemon module: a sandbox's writer of its background
 * processes' kept output to disk (outlog.c), and the files' format.
 * Loop thread.
 */
#ifndef WR_DAEMON_OUTLOG_H
#define WR_DAEMON_OUTLOG_H

#include "daemon/daemon.h"

struct wr_proc;
struct wr_sandbox;
struct wr_outlog_op;
struct wr_outlog_loaded;

/* A sandbox's writer of kept output to disk: one job at a time on the
 * threadpool, ops first, then turns at the processes' new output
 * (outlog.c). */
struct wr_outlog {
  struct wr_outlog_op *ops, *ops_last; /* queued ops, oldest first */
  bool busy;                           /* a job is running */
  bool closed;   /* the sandbox is going away: no more jobs */
  bool clearing; /* every file goes: processes need not forget theirs */
  bool warned;   /* a failure was logged at warn level once */
  uint64_t turns;
  /* After the last job once closed (removal waits for this). */
  void (*then)(struct wr_sandbox *sb, void *arg);
  void *then_arg;
  /* Recovery: output read back, until init lists its processes. */
  struct wr_outlog_loaded *loaded;
};

/* ---- kept output on disk (outlog.c) ------------------------------------ */

/*
 * Loop thread. Every call is a no-op once the sandbox's writer is closed,
 * and the ones that remove files are no-ops while the daemon stops (the
 * next daemon takes the files over).
 */
/* Note which init spawns the process (at wr_proc_new). */
void wr_outlog_proc_init(struct wr_proc *p);
/* The process has new output to write (background processes). */
void wr_outlog_kick(struct wr_sandbox *sb);
/* The process's record goes: remove its files. */
void wr_outlog_forget(struct wr_proc *p);
/* Every process of the sandbox goes (a new start): remove every file. */
void wr_outlog_clear(struct wr_sandbox *sb);
/* The daemon stops: queue what is not written yet, so that it is, before
 * the loop ends. */
void wr_outlog_flush(struct wr_sandbox *sb);
/* The sandbox is being removed: no more jobs; `then` runs once the one
 * running (if any) is done, before the directory goes. */
void wr_outlog_close(struct wr_sandbox *sb,
                     void (*then)(struct wr_sandbox *sb, void *arg), void *arg);
/* After a daemon restart: read back what the running init's processes
 * kept, then call `then` (which asks init for its processes). */
void wr_outlog_recover(struct wr_sandbox *sb,
                       void (*then)(struct wr_sandbox *sb));
/* A process init handed back: give it the output read back for it. */
void wr_outlog_adopt(struct wr_proc *p);
/* Init listed all its processes (or could not): drop what no process
 * took and, when `listed`, remove its files. */
void wr_outlog_recovered(struct wr_sandbox *sb, bool listed);

/*
 * The file format (pure, for tests and fuzzing): a segment is a run of
 * records, each a WR_OUTLOG_HDR-byte header ("wo", the stream, 0, the
 * length and the output offset, little endian) and that many bytes.
 */
#define WR_OUTLOG_HDR 16
typedef void (*wr_outlog_record_fn)(void *arg, int stream, uint64_t offset,
                                    const char *data, size_t len);
/* Append one record. */
void wr_outlog_put(wr_buf_t *b, int stream, uint64_t offset, const void *data,
                   size_t len);
/* Call fn for each well-formed record from the start of buf, whose offsets
 * must not go back below *end (nor each other); stop at the first that is
 * not. *end gets the offset after the last record taken. Returns how many
 * bytes were taken. */
size_t wr_outlog_parse(const void *buf, size_t len, uint64_t *end,
                       wr_outlog_record_fn fn, void *arg);

#endif
