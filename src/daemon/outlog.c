/*
 * The kept output of background processes, on disk, so that a restarted
 * warrend (even one that was killed) shows `warren logs` and the `warren
 * run` screen as they were, and carries their offsets on.
 *
 * Layout: BASE/output/INC/PROC.SEQ. BASE is the sandbox's directory, or,
 * when the sandbox has a disk limit, its own filesystem mounted at
 * BASE/disk (outside its overlay's upper layer, so the sandbox cannot
 * reach the files, but they count against its limit). INC names the
 * warren-init that spawned the process ("PID-STARTTIME": proc ids are
 * unique only within one init), PROC is the process's proc id and SEQ
 * counts its segments. A segment is a run of records (wr_outlog_put) and
 * never grows past SEG_BYTES; a process keeps its newest SEG_KEEP, so its
 * files hold at most 1.25 MiB, enough for the 1 MiB it keeps in memory,
 * and a sandbox has at most MAX_PROCS_PER_SANDBOX (exec.c) processes.
 *
 * Every file operation is a job on the threadpool, one at a time per
 * sandbox, so the loop never waits for a disk and a sandbox's jobs never
 * race each other or its removal (which waits for the job in flight). A
 * write copies from the output kept in memory, which is also the queue:
 * output that arrives faster than the disk takes it moves the start of
 * what is still to be written, leaving a gap in the file, never a growing
 * buffer. A write that fails is undone (the file truncated back) and its
 * bytes are skipped. Queued ops (forgetting, clearing, reading back) go
 * before the next write.
 *
 * What is lost when warrend is killed: output it had read but not yet
 * written, a moment's worth. A graceful stop writes everything first.
 */
#include "daemon/jobs.h"
#include "daemon/outlog.h"
#include "daemon/procs.h"
#include "daemon/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>

#define SEG_BYTES (256u << 10)
#define SEG_KEEP 5
/* Directory entries looked at when reading back: SEG_KEEP (+1 while a
 * segment is being replaced) for each of 256 processes, with room. */
#define LOAD_MAX_FILES 4096
#define MAGIC0 'w'
#define MAGIC1 'o'

enum op_kind { OP_WRITE, OP_FORGET, OP_CLEAR, OP_CLEAN, OP_LOAD };

/* A process whose files a clean keeps, from segment min_seq on. */
struct keep {
  uint32_t proc_id;
  uint64_t min_seq;
};

/* One file operation, self-contained: the worker reads nothing else. */
struct wr_outlog_op {
  struct wr_outlog_op *next;
  enum op_kind kind;
  char *sbdir; /* ROOT/sandboxes/ID */
  bool disk;   /* the files are on the sandbox's disk, BASE/disk */
  char inc[sizeof(((struct wr_outfile *)0)->inc)];
  uint32_t proc_id;
  uint64_t seq;      /* OP_WRITE: the segment */
  bool fresh;        /* OP_WRITE: it starts here (older ones may go) */
  wr_buf_t data;     /* OP_WRITE: records */
  struct keep *keep; /* OP_CLEAN: what stays in inc */
  size_t nkeep;      /* OP_CLEAN */
  struct wr_outlog_loaded *loaded;   /* OP_LOAD: what was read */
  void (*then)(struct wr_sandbox *); /* OP_LOAD: called after */
};

/* Output read back for one process. */
struct wr_outlog_loaded {
  struct wr_outlog_loaded *next;
  uint32_t proc_id;
  uint64_t seq; /* its newest segment */
  struct wr_chunk *chunks, *last;
  size_t held;
  uint64_t end; /* the offset after its last byte */
};

struct outlog_job {
  struct wr_job job;
  struct wr_sandbox *sb;
  struct wr_outlog_op *op;
};

/* ---- the format ------------------------------------------------------------
 */

static void put_le(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes) {
  uint64_t v = 0;

  for (int i = bytes - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

void wr_outlog_put(wr_buf_t *b, int stream, uint64_t offset, const void *data,
                   size_t len) {
  uint8_t hdr[WR_OUTLOG_HDR] = {MAGIC0, MAGIC1, (uint8_t)stream, 0};

  put_le(hdr + 4, len, 4);
  put_le(hdr + 8, offset, 8);
  wr_buf_append(b, hdr, sizeof(hdr));
  wr_buf_append(b, data, len);
}

/* A record's header, checked against what may follow it. */
static bool record_ok(const uint8_t *h, size_t avail, uint64_t end,
                      uint64_t *offset, size_t *len) {
  if (avail < WR_OUTLOG_HDR || h[0] != MAGIC0 || h[1] != MAGIC1 ||
      (h[2] != 1 && h[2] != 2) || h[3] != 0)
    return false;
  *len = (size_t)get_le(h + 4, 4);
  *offset = get_le(h + 8, 8);
  return *len > 0 && *len <= avail - WR_OUTLOG_HDR && *offset >= end &&
         *offset <= UINT64_MAX - *len;
}

size_t wr_outlog_parse(const void *buf, size_t len, uint64_t *end,
                       wr_outlog_record_fn fn, void *arg) {
  const uint8_t *p = buf;
  size_t pos = 0;

  while (pos < len) {
    uint64_t offset;
    size_t n;
    if (!record_ok(p + pos, len - pos, *end, &offset, &n))
      break;
    fn(arg, p[pos + 2], offset, (const char *)p + pos + WR_OUTLOG_HDR, n);
    *end = offset + n;
    pos += WR_OUTLOG_HDR + n;
  }
  return pos;
}

/* "PROC.SEQ", digits only, as this file names segments. */
static bool parse_name(const char *name, uint32_t *proc_id, uint64_t *seq) {
  const char *dot = strchr(name, '.');
  _cleanup_free_ char *head = NULL;
  uint64_t id;

  if (dot == NULL || dot == name || dot - name > 10 ||
      strspn(name, "0123456789") != (size_t)(dot - name) ||
      strspn(dot + 1, "0123456789") != strlen(dot + 1))
    return false;
  head = xstrndup(name, (size_t)(dot - name));
  if (wr_parse_u64(head, 1, UINT32_MAX, &id, NULL) < 0 ||
      wr_parse_u64(dot + 1, 0, UINT64_MAX, seq, NULL) < 0)
    return false;
  *proc_id = (uint32_t)id;
  return true;
}

static void chunks_free(struct wr_chunk *c) {
  while (c != NULL) {
    struct wr_chunk *next = c->next;
    free(c);
    c = next;
  }
}

static void loaded_free(struct wr_outlog_loaded *l) {
  while (l != NULL) {
    struct wr_outlog_loaded *next = l->next;
    chunks_free(l->chunks);
    free(l);
    l = next;
  }
}

/* ---- the worker's side: file operations --------------------------------- */

static int open_sub(int dirfd, const char *name, bool create, wr_error_t *err) {
  int fd;

  if (create && mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "make `%s`", name);
  fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  return fd;
}

/*
 * BASE/output. On a sandbox with a disk limit BASE is the mount of its
 * disk, which must be there: writing into the directory under it would
 * put the files on the host's disk, hidden by the next mount.
 */
static int open_output(const struct wr_outlog_op *op, bool create,
                       wr_error_t *err) {
  _cleanup_close_ int sbfd = -1;
  _cleanup_close_ int diskfd = -1;
  struct stat a, b;

  sbfd = open(op->sbdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sbfd < 0)
    return wr_error_set(err, errno, "open `%s`", op->sbdir);
  if (!op->disk)
    return open_sub(sbfd, "output", create, err);
  diskfd = open_sub(sbfd, "disk", false, err);
  if (diskfd < 0 || fstat(sbfd, &a) < 0 || fstat(diskfd, &b) < 0)
    return -1;
  if (a.st_dev == b.st_dev)
    return wr_error_setx(err, ENODEV, "the sandbox's disk is not mounted");
  return open_sub(diskfd, "output", create, err);
}

static int open_inc(const struct wr_outlog_op *op, bool create,
                    wr_error_t *err) {
  _cleanup_close_ int out = open_output(op, create, err);

  return out < 0 ? -1 : open_sub(out, op->inc, create, err);
}

/* Append the records to the segment; a failed write is undone, so that a
 * segment never holds a torn record in its middle. */
static int do_write(struct wr_outlog_op *op, wr_error_t *err) {
  _cleanup_close_ int dirfd = open_inc(op, true, err);
  _cleanup_close_ int fd = -1;
  char name[48];
  struct stat st;

  if (dirfd < 0)
    return -1;
  snprintf(name, sizeof(name), "%u.%llu", op->proc_id,
           (unsigned long long)op->seq);
  fd = openat(dirfd, name,
              O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK |
                  O_CLOEXEC | (op->fresh ? O_TRUNC : 0),
              0600);
  if (fd < 0 || fstat(fd, &st) < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  if (!S_ISREG(st.st_mode))
    return wr_error_setx(err, EINVAL, "`%s` is not a regular file", name);
  if (wr_write_all(fd, op->data.data, op->data.len, err) < 0) {
    if (ftruncate(fd, st.st_size) < 0)
      wr_debug("kept output: undo a write to %s: %s", name, strerror(errno));
    return wr_error_wrap(err, "write `%s`", name);
  }
  if (op->fresh && op->seq >= SEG_KEEP) {
    snprintf(name, sizeof(name), "%u.%llu", op->proc_id,
             (unsigned long long)(op->seq - SEG_KEEP));
    unlinkat(dirfd, name, 0);
  }
  return 0;
}

static int forget_entry(int dirfd, const char *name, void *arg,
                        wr_error_t *err) {
  const struct wr_outlog_op *op = arg;
  uint32_t proc_id;
  uint64_t seq;

  (void)err;
  if (parse_name(name, &proc_id, &seq) && proc_id == op->proc_id)
    unlinkat(dirfd, name, 0);
  return 0;
}

/* Nothing to remove: no such directory, or a disk that is not mounted
 * (after a reboot, before the start mounts it; the files are inside it). */
static bool nothing_there(const wr_error_t *err) {
  return err->code == ENOENT || err->code == ENODEV;
}

static int do_forget(struct wr_outlog_op *op, wr_error_t *err) {
  _cleanup_close_ int dirfd = open_inc(op, false, err);

  if (dirfd < 0)
    return nothing_there(err) ? 0 : -1;
  return wr_dir_each(dirfd, forget_entry, op, err);
}

static int remove_entry(int dirfd, const char *name, void *arg,
                        wr_error_t *err) {
  const struct wr_outlog_op *op = arg;

  if (op != NULL && strcmp(name, op->inc) == 0)
    return 0;
  return wr_rm_rf_at(dirfd, name, err);
}

/* Every incarnation's files go (a new init starts from nothing). */
static int do_clear(struct wr_outlog_op *op, wr_error_t *err) {
  _cleanup_close_ int out = open_output(op, false, err);

  if (out < 0)
    return nothing_there(err) ? 0 : -1;
  return wr_dir_each(out, remove_entry, NULL, err);
}

static bool kept(const struct wr_outlog_op *op, uint32_t proc_id,
                 uint64_t seq) {
  for (size_t i = 0; i < op->nkeep; i++)
    if (op->keep[i].proc_id == proc_id)
      return seq >= op->keep[i].min_seq;
  return false;
}

static int clean_entry(int dirfd, const char *name, void *arg,
                       wr_error_t *err) {
  uint32_t proc_id;
  uint64_t seq;

  (void)err;
  if (!parse_name(name, &proc_id, &seq) || !kept(arg, proc_id, seq))
    unlinkat(dirfd, name, 0);
  return 0;
}

/* After a recovery: only the running init's directory stays, and in it
 * only the files of the processes it handed back. */
static int do_clean(struct wr_outlog_op *op, wr_error_t *err) {
  _cleanup_close_ int out = open_output(op, false, err);
  _cleanup_close_ int inc = -1;

  if (out < 0)
    return err->code == ENOENT ? 0 : -1;
  if (wr_dir_each(out, remove_entry, op, err) < 0)
    return -1;
  inc = open_sub(out, op->inc, false, err);
  if (inc < 0)
    return err->code == ENOENT ? 0 : -1;
  return wr_dir_each(inc, clean_entry, op, err);
}

/* ---- reading back ----------------------------------------------------------
 */

struct segment {
  uint32_t proc_id;
  uint64_t seq;
};

struct listing {
  struct segment *segs;
  size_t n;
};

static int list_entry(int dirfd, const char *name, void *arg, wr_error_t *err) {
  struct listing *l = arg;
  struct segment s;

  (void)dirfd;
  (void)err;
  if (l->n < LOAD_MAX_FILES && parse_name(name, &s.proc_id, &s.seq))
    l->segs[l->n++] = s;
  return 0;
}

static int by_proc_then_seq(const void *a, const void *b) {
  const struct segment *x = a, *y = b;

  if (x->proc_id != y->proc_id)
    return x->proc_id < y->proc_id ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A record read back becomes a chunk of the kept output. */
static void add_chunk(void *arg, int stream, uint64_t offset, const char *data,
                      size_t len) {
  struct wr_outlog_loaded *l = arg;
  struct wr_chunk *c = xmalloc(sizeof(*c) + len);

  c->next = NULL;
  c->offset = offset;
  c->stream = stream;
  c->len = len;
  memcpy(c->data, data, len);
  if (l->last != NULL)
    l->last->next = c;
  else
    l->chunks = c;
  l->last = c;
  l->held += len;
}

/* Keep the newest WR_PROC_RETAIN_BYTES, as the process did in memory. */
static void trim(struct wr_outlog_loaded *l) {
  while (l->chunks != NULL && l->held > WR_PROC_RETAIN_BYTES) {
    struct wr_chunk *c = l->chunks;
    size_t excess = l->held - WR_PROC_RETAIN_BYTES;
    if (c->len <= excess) {
      l->chunks = c->next;
      l->held -= c->len;
      free(c);
      continue;
    }
    memmove(c->data, c->data + excess, c->len - excess);
    c->len -= excess;
    c->offset += excess;
    l->held -= excess;
  }
  if (l->chunks == NULL)
    l->last = NULL;
}

/* One segment's records, after what the earlier ones held. A file that
 * is not what this daemon writes is passed over. */
static void read_segment(int dirfd, const struct segment *s,
                         struct wr_outlog_loaded *l) {
  _cleanup_close_ int fd = -1;
  _cleanup_free_ char *buf = NULL;
  char name[48];
  struct stat st;
  ssize_t n;

  snprintf(name, sizeof(name), "%u.%llu", s->proc_id,
           (unsigned long long)s->seq);
  fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
      st.st_size > (off_t)SEG_BYTES)
    return;
  buf = xmalloc((size_t)st.st_size + 1);
  n = wr_read_all(fd, buf, (size_t)st.st_size);
  if (n > 0)
    wr_outlog_parse(buf, (size_t)n, &l->end, add_chunk, l);
  l->seq = s->seq;
}

/* The newest SEG_KEEP segments of one process, segs[0..n) sorted. */
static struct wr_outlog_loaded *
read_process(int dirfd, const struct segment *segs, size_t n) {
  struct wr_outlog_loaded *l = xcalloc(1, sizeof(*l));
  size_t first = n > SEG_KEEP ? n - SEG_KEEP : 0;

  l->proc_id = segs[0].proc_id;
  for (size_t i = first; i < n; i++)
    read_segment(dirfd, &segs[i], l);
  l->seq = segs[n - 1].seq;
  trim(l);
  return l;
}

static int do_load(struct wr_outlog_op *op, wr_error_t *err) {
  _cleanup_close_ int dirfd = open_inc(op, false, err);
  struct listing list = {0};
  size_t start = 0;

  if (dirfd < 0)
    return err->code == ENOENT ? 0 : -1;
  list.segs = xcalloc(LOAD_MAX_FILES, sizeof(*list.segs));
  if (wr_dir_each(dirfd, list_entry, &list, err) < 0) {
    free(list.segs);
    return -1;
  }
  qsort(list.segs, list.n, sizeof(*list.segs), by_proc_then_seq);
  for (size_t i = 1; i <= list.n; i++) {
    struct wr_outlog_loaded *l;
    if (i < list.n && list.segs[i].proc_id == list.segs[start].proc_id)
      continue;
    l = read_process(dirfd, list.segs + start, i - start);
    l->next = op->loaded;
    op->loaded = l;
    start = i;
  }
  free(list.segs);
  return 0;
}

/* ---- the loop's side: one job at a time ------------------------------------
 */

static void op_free(struct wr_outlog_op *op) {
  free(op->sbdir);
  wr_buf_free(&op->data);
  free(op->keep);
  loaded_free(op->loaded);
  free(op);
}

static struct wr_outlog_op *op_new(struct wr_sandbox *sb, enum op_kind kind,
                                   const char *inc) {
  struct wr_outlog_op *op = xcalloc(1, sizeof(*op));

  op->kind = kind;
  op->sbdir = wr_rt_sandbox_dir(sb->d->rt, sb->id);
  op->disk = sb->spec.disk_bytes != 0;
  snprintf(op->inc, sizeof(op->inc), "%s", inc != NULL ? inc : "");
  wr_buf_init(&op->data);
  return op;
}

static void ops_push(struct wr_outlog *o, struct wr_outlog_op *op) {
  if (o->ops_last != NULL)
    o->ops_last->next = op;
  else
    o->ops = op;
  o->ops_last = op;
}

static struct wr_outlog_op *ops_pop(struct wr_outlog *o) {
  struct wr_outlog_op *op = o->ops;

  if (op != NULL) {
    o->ops = op->next;
    if (o->ops == NULL)
      o->ops_last = NULL;
    op->next = NULL;
  }
  return op;
}

static void ops_drop(struct wr_outlog *o) {
  struct wr_outlog_op *op;

  while ((op = ops_pop(o)) != NULL)
    op_free(op);
}

/* Where the output not yet written starts: what memory still holds of
 * it (older bytes were dropped there before the disk took them). */
static uint64_t unsaved_from(const struct wr_proc *p) {
  uint64_t first = p->chunks != NULL ? p->chunks->offset : p->total;

  return WR_MAX(p->file.saved, first);
}

static bool pending(const struct wr_proc *p) {
  return p->background && p->proc_id != 0 && unsaved_from(p) < p->total;
}

/* Append [from, ...) of a chunk as records while they fit in `room`,
 * growing the last record when it is the same stream and contiguous. */
static uint64_t fill_from(wr_buf_t *b, const struct wr_chunk *c, uint64_t from,
                          size_t *room, size_t *last_hdr) {
  size_t skip = from > c->offset ? (size_t)(from - c->offset) : 0;

  while (skip<c->len && * room> WR_OUTLOG_HDR) {
    uint8_t *h = *last_hdr != SIZE_MAX ? (uint8_t *)b->data + *last_hdr : NULL;
    uint64_t at = c->offset + skip;
    size_t n;
    if (h != NULL && h[2] == c->stream &&
        get_le(h + 8, 8) + get_le(h + 4, 4) == at) {
      n = WR_MIN(c->len - skip, *room);
      put_le(h + 4, get_le(h + 4, 4) + n, 4);
      wr_buf_append(b, c->data + skip, n);
    } else {
      n = WR_MIN(c->len - skip, *room - WR_OUTLOG_HDR);
      *last_hdr = b->len;
      wr_outlog_put(b, c->stream, at, c->data + skip, n);
      *room -= WR_OUTLOG_HDR;
    }
    *room -= n;
    skip += n;
  }
  return c->offset + skip;
}

/*
 * The next write of a process: its unwritten output, as much as fits in
 * the current segment (or a new one). What the file will hold is recorded
 * now, so that the next write (or the flush at a stop) follows on without
 * waiting; a write that fails leaves a gap.
 */
static struct wr_outlog_op *make_write(struct wr_sandbox *sb,
                                       struct wr_proc *p) {
  struct wr_outfile *f = &p->file;
  struct wr_outlog_op *op;
  uint64_t from = unsaved_from(p), end = from;
  size_t room, last_hdr = SIZE_MAX;

  if (f->seg_bytes > 0 && SEG_BYTES - f->seg_bytes <= WR_OUTLOG_HDR) {
    f->seq++;
    f->seg_bytes = 0;
  }
  op = op_new(sb, OP_WRITE, f->inc);
  op->proc_id = p->proc_id;
  op->seq = f->seq;
  op->fresh = f->seg_bytes == 0;
  room = SEG_BYTES - f->seg_bytes;
  for (const struct wr_chunk *c = p->chunks; c != NULL; c = c->next) {
    if (c->offset + c->len <= from)
      continue;
    end = fill_from(&op->data, c, WR_MAX(from, end), &room, &last_hdr);
    if (room <= WR_OUTLOG_HDR)
      break;
  }
  f->saved = end;
  f->seg_bytes += op->data.len;
  f->any = true;
  return op;
}

/* The process whose turn it is: the one served longest ago. */
static struct wr_outlog_op *next_write(struct wr_sandbox *sb) {
  struct wr_proc *best = NULL;

  for (struct wr_proc *p = sb->procs; p != NULL; p = p->next)
    if (pending(p) && (best == NULL || p->file.turn < best->file.turn))
      best = p;
  if (best == NULL)
    return NULL;
  best->file.turn = ++sb->outlog.turns;
  return make_write(sb, best);
}

static void job_work(struct wr_job *job) {
  struct outlog_job *j = job->arg;
  struct wr_outlog_op *op = j->op;

  switch (op->kind) {
  case OP_WRITE:
    job->result = do_write(op, &job->err);
    break;
  case OP_FORGET:
    job->result = do_forget(op, &job->err);
    break;
  case OP_CLEAR:
    job->result = do_clear(op, &job->err);
    break;
  case OP_CLEAN:
    job->result = do_clean(op, &job->err);
    break;
  case OP_LOAD:
    job->result = do_load(op, &job->err);
    break;
  }
}

/* The first failure of a sandbox is a warning; the rest (a full disk
 * fails every write) are for debugging. */
static void report(struct wr_sandbox *sb, const wr_error_t *err) {
  if (!sb->outlog.warned)
    wr_warn("sandbox %s: kept output: %s", sb->name, err->msg);
  else
    wr_debug("sandbox %s: kept output: %s", sb->name, err->msg);
  sb->outlog.warned = true;
}

static void run_next(struct wr_sandbox *sb);

static void job_done(struct wr_job *job) {
  struct outlog_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;
  struct wr_outlog *o = &sb->outlog;
  struct wr_outlog_op *op = j->op;

  o->busy = false;
  if (job->result < 0)
    report(sb, &job->err);
  if (op->kind == OP_LOAD && !o->closed) {
    loaded_free(o->loaded);
    o->loaded = steal_ptr(&op->loaded);
    op->then(sb);
  }
  op_free(op);
  free(j);
  if (o->closed && o->then != NULL) {
    void (*then)(struct wr_sandbox *, void *) = o->then;
    o->then = NULL;
    then(sb, o->then_arg);
  } else {
    run_next(sb);
  }
  wr_sandbox_unref(sb);
}

static void run_next(struct wr_sandbox *sb) {
  struct wr_outlog *o = &sb->outlog;
  struct wr_outlog_op *op;
  struct outlog_job *j;

  if (o->busy || o->closed || sb->removed)
    return;
  op = ops_pop(o);
  if (op == NULL)
    op = next_write(sb);
  if (op == NULL)
    return;
  j = xcalloc(1, sizeof(*j));
  j->sb = sb;
  j->op = op;
  j->job.fn = job_work;
  j->job.done = job_done;
  j->job.arg = j;
  o->busy = true;
  wr_sandbox_ref(sb);
  wr_job_queue(sb->d, &j->job);
}

/* A sandbox out of the table is going or gone: nothing more is queued
 * for it (a job would outlive it). */
static void queue_op(struct wr_sandbox *sb, struct wr_outlog_op *op) {
  if (sb->removed || sb->outlog.closed) {
    op_free(op);
    return;
  }
  ops_push(&sb->outlog, op);
  run_next(sb);
}

/* ---- the calls -------------------------------------------------------------
 */

static void current_inc(const struct wr_sandbox *sb, char *out, size_t size) {
  snprintf(out, size, "%d-%llu", (int)sb->inst.pid,
           (unsigned long long)sb->inst.start_time);
}

void wr_outlog_proc_init(struct wr_proc *p) {
  current_inc(p->sb, p->file.inc, sizeof(p->file.inc));
}

void wr_outlog_kick(struct wr_sandbox *sb) {
  run_next(sb);
}

void wr_outlog_forget(struct wr_proc *p) {
  struct wr_sandbox *sb = p->sb;
  struct wr_outlog_op *op;

  if (!p->file.any || sb->outlog.closed || sb->outlog.clearing ||
      sb->d->stopping)
    return;
  op = op_new(sb, OP_FORGET, p->file.inc);
  op->proc_id = p->proc_id;
  queue_op(sb, op);
}

void wr_outlog_clear(struct wr_sandbox *sb) {
  if (sb->outlog.closed || sb->d->stopping)
    return;
  queue_op(sb, op_new(sb, OP_CLEAR, NULL));
}

void wr_outlog_flush(struct wr_sandbox *sb) {
  if (sb->outlog.closed)
    return;
  for (struct wr_proc *p = sb->procs; p != NULL; p = p->next)
    while (pending(p))
      ops_push(&sb->outlog, make_write(sb, p));
  run_next(sb);
}

void wr_outlog_close(struct wr_sandbox *sb,
                     void (*then)(struct wr_sandbox *sb, void *arg),
                     void *arg) {
  struct wr_outlog *o = &sb->outlog;

  o->closed = true;
  ops_drop(o);
  loaded_free(o->loaded);
  o->loaded = NULL;
  if (!o->busy) {
    if (then != NULL)
      then(sb, arg);
    return;
  }
  o->then = then;
  o->then_arg = arg;
}

void wr_outlog_recover(struct wr_sandbox *sb,
                       void (*then)(struct wr_sandbox *sb)) {
  char inc[sizeof(((struct wr_outfile *)0)->inc)];
  struct wr_outlog_op *op;

  if (sb->outlog.closed)
    return;
  current_inc(sb, inc, sizeof(inc));
  op = op_new(sb, OP_LOAD, inc);
  op->then = then;
  queue_op(sb, op);
}

/* Install what was read back; the next write starts a new segment, so
 * that nothing is appended after a record a kill may have torn. */
void wr_outlog_adopt(struct wr_proc *p) {
  struct wr_outlog_loaded **pp = &p->sb->outlog.loaded, *l;

  while (*pp != NULL && (*pp)->proc_id != p->proc_id)
    pp = &(*pp)->next;
  if ((l = *pp) == NULL)
    return;
  *pp = l->next;
  chunks_free(p->chunks);
  p->chunks = l->chunks;
  p->last_chunk = l->last;
  p->held = l->held;
  p->total = l->end;
  p->file.saved = l->end;
  p->file.seq = l->seq + 1;
  p->file.seg_bytes = 0;
  p->file.any = true;
  free(l);
}

/* The files that stay: each handed-back process's, from the oldest
 * segment its next writes keep. */
static void keep_list(struct wr_sandbox *sb, struct wr_outlog_op *op) {
  size_t n = 0;

  for (struct wr_proc *p = sb->procs; p != NULL; p = p->next)
    n++;
  op->keep = xcalloc(n + 1, sizeof(*op->keep));
  for (struct wr_proc *p = sb->procs; p != NULL; p = p->next) {
    if (!p->file.any || strcmp(p->file.inc, op->inc) != 0)
      continue;
    op->keep[op->nkeep].proc_id = p->proc_id;
    op->keep[op->nkeep].min_seq =
        p->file.seq >= SEG_KEEP ? p->file.seq - SEG_KEEP : 0;
    op->nkeep++;
  }
}

void wr_outlog_recovered(struct wr_sandbox *sb, bool listed) {
  char inc[sizeof(((struct wr_outfile *)0)->inc)];
  struct wr_outlog_op *op;

  loaded_free(sb->outlog.loaded);
  sb->outlog.loaded = NULL;
  if (!listed || sb->outlog.closed || sb->d->stopping)
    return;
  current_inc(sb, inc, sizeof(inc));
  op = op_new(sb, OP_CLEAN, inc);
  keep_list(sb, op);
  queue_op(sb, op);
}
