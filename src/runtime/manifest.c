/*
 * The workspace manifest: what `warren diff` compares a direct-mode
 * workspace with. Before a sandbox's first process starts, every entry
 * under its workspace is recorded; later the tree is walked again and the
 * two are merged in order, so that every added, deleted or changed path
 * shows, whoever changed it and whether or not git tracks it.
 *
 * The tree is written by untrusted code, maybe while we walk it. So the
 * walk never follows a symlink (every step is an *at() call relative to an
 * open directory, with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW), never opens
 * anything but directories, does not enter other filesystems, and is
 * bounded: entries, depth (one open fd per level, no recursion), path
 * length and the size of one directory's listing. What a limit leaves out
 * makes the result "truncated" instead of failing. A change is told by
 * what the sandbox cannot forge: ctime is set by the kernel on every
 * change of content or inode and cannot be set from userspace, so an edit
 * whose mtime was put back (`touch -r`) still shows.
 *
 * Order: a directory's entries are sorted by name (bytes) and each
 * directory is followed by its contents, which is the order of paths
 * compared with '/' below every other byte (tree_cmp). Both walks and the
 * file use that order, so the diff is one streaming merge.
 *
 * File format (text, one record per line, fields separated by a space):
 *
 *   warren-manifest 1
 *   TF MODE UID GID SIZE MTIME CTIME INO PATH [TARGET]
 *   ...
 *   end COUNT TRUNCATED CUT
 *
 * T is the type (f file, d directory, l symlink, o other), F is '-' for an
 * entry walked normally, 'x' for a directory on another filesystem and
 * 't' for a directory too deep or too large to walk (their contents are
 * not recorded). MODE is octal permission bits; times are SEC.NSEC; PATH
 * is relative to the root and TARGET is a symlink's target, both with the
 * bytes 0x00-0x20, 0x7f and '\' written as \xHH. The trailer counts the
 * records and says whether a limit left something out (TRUNCATED) and
 * whether the walk stopped at the entry limit (CUT): entries after the
 * last record were not seen.
 */
#include "runtime/manifest.h"
#include "common/common.h"
#include "runtime/runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <sys/stat.h>

#define MAGIC "warren-manifest 1"
/* A record: 8 short fields and two escaped paths (4 bytes per byte). */
#define LINE_MAX_LEN (256 + 8 * WR_MANIFEST_PATH_MAX + 8 * PATH_MAX)

/* One entry of the tree, as walked or as read back. */
struct entry {
  const char *path; /* relative, never empty */
  const char *target;
  char type; /* 'f', 'd', 'l', 'o' */
  char flag; /* '-', 'x', 't' */
  uint32_t mode, uid, gid;
  uint64_t size, ino;
  struct timespec mtime, ctime;
};

/* ---- order and escaping ------------------------------------------------- */

/* A byte's rank in tree order: the end first, then '/', then the rest. */
static unsigned tree_rank(char c) {
  return c == '\0' ? 0 : c == '/' ? 1 : (unsigned char)c + 2u;
}

/* Paths in tree order: a directory is followed by its contents. */
static int tree_cmp(const char *a, const char *b) {
  while (*a != '\0' && *a == *b) {
    a++;
    b++;
  }
  return (int)tree_rank(*a) - (int)tree_rank(*b);
}

/* Whether path is below dir ("dir/..."). */
static bool is_below(const char *path, const char *dir, size_t dir_len) {
  return dir_len > 0 && strncmp(path, dir, dir_len) == 0 &&
         path[dir_len] == '/';
}

static bool needs_escape(unsigned char c) {
  return c <= 0x20 || c == 0x7f || c == '\\';
}

static void put_escaped(wr_buf_t *b, const char *s) {
  static const char hex[] = "0123456789abcdef";
  const char *run = s;

  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (!needs_escape(c))
      continue;
    wr_buf_append(b, run, (size_t)(s - run));
    wr_buf_append(b, (char[]){'\\', 'x', hex[c >> 4], hex[c & 15]}, 4);
    run = s + 1;
  }
  wr_buf_append(b, run, (size_t)(s - run));
}

static int hex_val(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* Undo put_escaped in place; false for anything put_escaped never makes. */
static bool unescape(char *s) {
  char *out = s;

  for (; *s != '\0'; s++) {
    int hi, lo;
    if ((unsigned char)*s <= 0x20 || *s == 0x7f)
      return false;
    if (*s != '\\') {
      *out++ = *s;
      continue;
    }
    if (s[1] != 'x' || (hi = hex_val(s[2])) < 0 || (lo = hex_val(s[3])) < 0 ||
        (hi | lo) == 0)
      return false;
    *out++ = (char)(hi << 4 | lo);
    s += 3;
  }
  *out = '\0';
  return true;
}

/* ---- the walk ------------------------------------------------------------ */

struct walk;
/* Called for each entry in tree order: 0 goes on, 1 stops, -1 fails. */
typedef int (*emit_fn)(struct walk *w, const struct entry *e, wr_error_t *err);

/* One open directory of the walk: its sorted listing and where we are. */
struct frame {
  DIR *dir;
  char *names; /* NUL-separated */
  size_t *offs;
  size_t n, next;
  size_t path_len; /* of this directory's path in walk.path */
};

struct walk {
  const struct wr_manifest_limits *lim;
  dev_t dev;
  struct frame *frames;
  unsigned depth; /* frames in use */
  size_t count;   /* entries emitted */
  bool truncated; /* a limit left something out */
  bool cut;       /* stopped at the entry limit */
  emit_fn emit;
  void *arg;
  char path[WR_MANIFEST_PATH_MAX + 1];
  char target[PATH_MAX + 1];
};

static void frame_free(struct frame *f) {
  if (f->dir != NULL)
    closedir(f->dir);
  free(f->names);
  free(f->offs);
  memset(f, 0, sizeof(*f));
}

static int name_cmp(const void *a, const void *b, void *names) {
  return strcmp((const char *)names + *(const size_t *)a,
                (const char *)names + *(const size_t *)b);
}

/*
 * Read a directory's whole listing and sort it. Returns 1 when it is too
 * large to walk (more names than the walk may record, or more bytes than
 * WR_MANIFEST_DIR_BYTES), 0 when read, -1 on error.
 */
static int read_listing(struct walk *w, struct frame *f, wr_error_t *err) {
  size_t max = w->lim->max_entries + 1, cap = 0;
  wr_buf_t names;
  struct dirent *de;

  wr_buf_init(&names);
  errno = 0;
  while ((de = readdir(f->dir)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (f->n == max || names.len > WR_MANIFEST_DIR_BYTES) {
      wr_buf_free(&names);
      return 1;
    }
    if (f->n == cap) {
      cap = cap ? cap * 2 : 64;
      f->offs = xrealloc(f->offs, cap * sizeof(*f->offs));
    }
    f->offs[f->n++] = names.len;
    wr_buf_append(&names, de->d_name, strlen(de->d_name) + 1);
    errno = 0;
  }
  if (errno != 0) {
    wr_buf_free(&names);
    return wr_error_set(err, errno, "read directory `%s`",
                        w->path[0] ? w->path : ".");
  }
  f->names = wr_buf_steal(&names, NULL);
  if (f->n > 1)
    qsort_r(f->offs, f->n, sizeof(*f->offs), name_cmp, f->names);
  return 0;
}

static void entry_from_stat(struct entry *e, const struct stat *st) {
  e->type = S_ISREG(st->st_mode)   ? 'f'
            : S_ISDIR(st->st_mode) ? 'd'
            : S_ISLNK(st->st_mode) ? 'l'
                                   : 'o';
  e->flag = '-';
  e->mode = st->st_mode & 07777;
  e->uid = st->st_uid;
  e->gid = st->st_gid;
  e->size = (uint64_t)st->st_size;
  e->ino = st->st_ino;
  e->mtime = st->st_mtim;
  e->ctime = st->st_ctim;
}

/* Count an entry against the limit and hand it to emit. */
static int emit(struct walk *w, const struct entry *e, wr_error_t *err) {
  if (w->count == w->lim->max_entries) {
    w->truncated = w->cut = true;
    return 1;
  }
  w->count++;
  return w->emit(w, e, err);
}

/*
 * A directory below the root: open it without following anything, stat
 * what was opened (the name may have been swapped since the listing), and
 * walk it unless it is on another filesystem, too deep or too large.
 * Returns like emit; a directory that vanished is skipped.
 */
static int visit_dir(struct walk *w, struct frame *parent, const char *name,
                     wr_error_t *err) {
  struct frame child = {.path_len = strlen(w->path)};
  struct entry e = {.path = w->path};
  struct stat st;
  int fd, r;

  fd = openat(dirfd(parent->dir), name,
              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP))
    return 0;
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", w->path);
  if (fstat(fd, &st) < 0) {
    r = errno;
    close(fd);
    return wr_error_set(err, r, "stat `%s`", w->path);
  }
  entry_from_stat(&e, &st);
  if (st.st_dev != w->dev || w->depth > w->lim->max_depth) {
    close(fd);
    e.flag = st.st_dev != w->dev ? 'x' : 't';
    w->truncated |= e.flag == 't';
    return emit(w, &e, err);
  }
  child.dir = fdopendir(fd);
  if (child.dir == NULL) {
    close(fd);
    return wr_error_set(err, errno, "open `%s`", w->path);
  }
  r = read_listing(w, &child, err);
  if (r != 0) {
    frame_free(&child);
    if (r < 0)
      return -1;
    e.flag = 't';
    w->truncated = true;
    return emit(w, &e, err);
  }
  r = emit(w, &e, err);
  if (r != 0) {
    frame_free(&child);
    return r;
  }
  w->frames[w->depth++] = child;
  return 0;
}

/* The next name of the innermost directory: build its path, stat it and
 * emit it (directories through visit_dir). */
static int visit(struct walk *w, struct frame *f, wr_error_t *err) {
  const char *name = f->names + f->offs[f->next++];
  size_t len = strlen(name);
  struct entry e = {.path = w->path};
  struct stat st;
  ssize_t n;

  if (f->path_len + 1 + len > WR_MANIFEST_PATH_MAX) {
    w->truncated = true;
    return 0;
  }
  w->path[f->path_len] = '/';
  memcpy(w->path + f->path_len + (f->path_len > 0), name, len + 1);
  if (fstatat(dirfd(f->dir), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : wr_error_set(err, errno, "stat `%s`", w->path);
  if (S_ISDIR(st.st_mode))
    return visit_dir(w, f, name, err);
  entry_from_stat(&e, &st);
  if (e.type == 'l') {
    n = readlinkat(dirfd(f->dir), name, w->target, sizeof(w->target) - 1);
    if (n < 0) /* swapped for something else, or gone: seen next time */
      return errno == ENOENT || errno == EINVAL
                 ? 0
                 : wr_error_set(err, errno, "read link `%s`", w->path);
    w->target[n] = '\0';
    e.target = w->target;
  }
  return emit(w, &e, err);
}

/* Walk the tree under the directory dirfd (borrowed) in tree order,
 * calling w->emit for each entry. Returns 0 when done or stopped by emit,
 * -1 on error. */
static int walk_tree(struct walk *w, int dirfd, wr_error_t *err) {
  struct stat st;
  int fd, r;

  /* A fresh open of the same directory: its own offset, from the start. */
  fd = wr_fd_reopen(dirfd, O_RDONLY | O_DIRECTORY, NULL);
  if (fd < 0 || fstat(fd, &st) < 0 ||
      (w->frames = xcalloc(w->lim->max_depth + 1, sizeof(*w->frames)),
       w->frames[0].dir = fdopendir(fd)) == NULL) {
    r = errno;
    if (fd >= 0)
      close(fd);
    free(w->frames);
    return wr_error_set(err, r, "open the workspace");
  }
  w->dev = st.st_dev;
  w->depth = 1;
  r = read_listing(w, &w->frames[0], err);
  if (r > 0) { /* the root alone holds more than the limit */
    w->truncated = w->cut = true;
    r = 0;
    frame_free(&w->frames[0]);
    w->depth = 0;
  }
  while (r == 0 && w->depth > 0) {
    struct frame *f = &w->frames[w->depth - 1];
    if (f->next < f->n) {
      r = visit(w, f, err);
      continue;
    }
    frame_free(f);
    w->depth--;
  }
  while (w->depth > 0)
    frame_free(&w->frames[--w->depth]);
  free(w->frames);
  w->frames = NULL;
  return r < 0 ? wr_error_wrap(err, "the workspace") : 0;
}

static const struct wr_manifest_limits default_limits = {
    WR_MANIFEST_MAX_ENTRIES, WR_MANIFEST_MAX_DEPTH};

/* ---- saving -------------------------------------------------------------- */

struct saver {
  FILE *out;
  wr_buf_t line;
};

static void format_entry(wr_buf_t *b, const struct entry *e) {
  wr_buf_reset(b);
  wr_buf_printf(b,
                "%c%c %04o %" PRIu32 " %" PRIu32 " %" PRIu64
                " %lld.%09ld %lld.%09ld %" PRIu64 " ",
                e->type, e->flag, e->mode, e->uid, e->gid, e->size,
                (long long)e->mtime.tv_sec, e->mtime.tv_nsec,
                (long long)e->ctime.tv_sec, e->ctime.tv_nsec, e->ino);
  put_escaped(b, e->path);
  if (e->target != NULL) {
    wr_buf_puts(b, " ");
    put_escaped(b, e->target);
  }
  wr_buf_puts(b, "\n");
}

static int save_entry(struct walk *w, const struct entry *e, wr_error_t *err) {
  struct saver *s = w->arg;

  format_entry(&s->line, e);
  if (fwrite(s->line.data, 1, s->line.len, s->out) != s->line.len)
    return wr_error_set(err, errno, "write manifest");
  return 0;
}

/* Walk dirfd's tree into an open temporary file and make it durable. */
static int save_to(int dirfd, FILE *out, const struct wr_manifest_limits *lim,
                   wr_error_t *err) {
  struct saver s = {.out = out};
  _cleanup_free_ struct walk *w = xcalloc(1, sizeof(*w));
  int r;

  w->lim = lim;
  w->emit = save_entry;
  w->arg = &s;
  wr_buf_init(&s.line);
  fputs(MAGIC "\n", out);
  r = walk_tree(w, dirfd, err);
  wr_buf_free(&s.line);
  if (r < 0)
    return -1;
  fprintf(out, "end %zu %d %d\n", w->count, w->truncated, w->cut);
  if (fflush(out) != 0 || fsync(fileno(out)) < 0)
    return wr_error_set(err, errno, "write manifest");
  return 0;
}

int wr_manifest_save_limits(int dirfd, const char *file,
                            const struct wr_manifest_limits *lim,
                            wr_error_t *err) {
  _cleanup_free_ char *tmp = xasprintf("%s.XXXXXX", file);
  _cleanup_fclose_ FILE *out = NULL;
  int fd;

  fd = mkostemp(tmp, O_CLOEXEC); /* 0600 */
  if (fd < 0)
    return wr_error_set(err, errno, "record workspace: create `%s`", tmp);
  out = fdopen(fd, "w");
  if (out == NULL) {
    close(fd);
    unlink(tmp);
    return wr_error_set(err, errno, "record workspace: open `%s`", tmp);
  }
  setvbuf(out, NULL, _IOFBF, 1 << 20);
  if (save_to(dirfd, out, lim, err) < 0) {
    unlink(tmp);
    return wr_error_wrap(err, "record workspace");
  }
  if (rename(tmp, file) < 0) {
    wr_error_set(err, errno, "record workspace: rename to `%s`", file);
    unlink(tmp);
    return -1;
  }
  return 0;
}

int wr_manifest_save(int dirfd, const char *file, wr_error_t *err) {
  return wr_manifest_save_limits(dirfd, file, &default_limits, err);
}

/* ---- reading ------------------------------------------------------------- */

struct reader {
  FILE *in;
  const char *file;
  char *line;
  size_t cap;
  char *prev; /* the previous record's path, to check the order */
  size_t records;
  struct entry e; /* the current record; points into line */
  bool have;      /* e is a record not yet consumed */
  bool done;      /* the trailer was read */
  bool truncated, cut;
};

static int corrupt(struct reader *r, wr_error_t *err) {
  return wr_error_setx(err, EINVAL,
                       "manifest `%s` is damaged (record %zu); remove it "
                       "to stop comparing with it",
                       r->file, r->records + 1);
}

static bool parse_u64(char *s, int base, uint64_t *out) {
  char *end;

  if (*s == '-' || *s == '\0')
    return false;
  errno = 0;
  *out = strtoull(s, &end, base);
  return errno == 0 && *end == '\0';
}

static bool parse_time(char *s, struct timespec *ts) {
  char *dot = strchr(s, '.'), *end;
  uint64_t ns;

  if (dot == NULL)
    return false;
  *dot = '\0';
  errno = 0;
  ts->tv_sec = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || end == s || strlen(dot + 1) != 9 ||
      !parse_u64(dot + 1, 10, &ns))
    return false;
  ts->tv_nsec = (long)ns;
  return true;
}

/* Split a line into at most max space-separated fields. */
static size_t split(char *line, char **fields, size_t max) {
  size_t n = 0;
  char *save = NULL;

  for (char *t = strtok_r(line, " ", &save); t != NULL;
       t = strtok_r(NULL, " ", &save)) {
    if (n == max)
      return max + 1;
    fields[n++] = t;
  }
  return n;
}

static bool parse_ids(struct entry *e, char **f) {
  uint64_t mode, uid, gid;

  if (!parse_u64(f[1], 8, &mode) || mode > 07777 ||
      !parse_u64(f[2], 10, &uid) || uid > UINT32_MAX ||
      !parse_u64(f[3], 10, &gid) || gid > UINT32_MAX)
    return false;
  e->mode = (uint32_t)mode;
  e->uid = (uint32_t)uid;
  e->gid = (uint32_t)gid;
  return true;
}

static bool parse_record(struct entry *e, char *line) {
  char *f[11];
  size_t n = split(line, f, 10);

  memset(e, 0, sizeof(*e));
  if (n < 9 || n > 10 || strlen(f[0]) != 2 || !strchr("fdlo", f[0][0]) ||
      !strchr("-xt", f[0][1]) || (n == 10) != (f[0][0] == 'l'))
    return false;
  e->type = f[0][0];
  e->flag = f[0][1];
  if (!parse_ids(e, f) || !parse_u64(f[4], 10, &e->size) ||
      !parse_time(f[5], &e->mtime) || !parse_time(f[6], &e->ctime) ||
      !parse_u64(f[7], 10, &e->ino) || !unescape(f[8]))
    return false;
  e->path = f[8];
  if (n == 10) {
    if (!unescape(f[9]))
      return false;
    e->target = f[9];
  }
  return *e->path != '\0' && strlen(e->path) <= WR_MANIFEST_PATH_MAX;
}

/* The trailer: the count must match, and nothing may follow it. */
static int read_trailer(struct reader *r, wr_error_t *err) {
  char *f[5];
  uint64_t count, trunc, cut;

  if (split(r->line, f, 4) != 4 || strcmp(f[0], "end") != 0 ||
      !parse_u64(f[1], 10, &count) || count != r->records ||
      !parse_u64(f[2], 10, &trunc) || trunc > 1 || !parse_u64(f[3], 10, &cut) ||
      cut > 1 || getc(r->in) != EOF)
    return corrupt(r, err);
  r->done = true;
  r->truncated = trunc != 0;
  r->cut = cut != 0;
  return 0;
}

/* Read the next record into r->e (r->have), or the trailer (r->done). */
static int reader_next(struct reader *r, wr_error_t *err) {
  ssize_t n;

  r->have = false;
  if (r->done)
    return 0;
  n = getline(&r->line, &r->cap, r->in);
  if (n <= 0 || n > LINE_MAX_LEN || r->line[n - 1] != '\n' ||
      memchr(r->line, '\0', (size_t)n) != NULL)
    return ferror(r->in) ? wr_error_set(err, errno, "read `%s`", r->file)
                         : corrupt(r, err);
  r->line[n - 1] = '\0';
  if (strncmp(r->line, "end ", 4) == 0)
    return read_trailer(r, err);
  if (!parse_record(&r->e, r->line) ||
      (r->prev != NULL && tree_cmp(r->prev, r->e.path) >= 0))
    return corrupt(r, err);
  free(r->prev);
  r->prev = xstrdup(r->e.path);
  r->records++;
  r->have = true;
  return 0;
}

static int reader_open(struct reader *r, const char *file, wr_error_t *err) {
  ssize_t n;

  r->file = file;
  r->in = fopen(file, "re");
  if (r->in == NULL)
    return wr_error_set(err, errno, "open manifest `%s`", file);
  n = getline(&r->line, &r->cap, r->in);
  if (n != (ssize_t)strlen(MAGIC "\n") || strcmp(r->line, MAGIC "\n") != 0)
    return wr_error_setx(err, EINVAL, "`%s` is not a workspace manifest", file);
  return reader_next(r, err);
}

static void reader_close(struct reader *r) {
  if (r->in != NULL)
    fclose(r->in);
  free(r->line);
  free(r->prev);
}

/* ---- comparing ----------------------------------------------------------- */

struct merge {
  struct reader base;
  json_t *changes;
  size_t max;
  bool truncated;
  char skip[WR_MANIFEST_PATH_MAX + 1]; /* a directory whose contents one
                                          side did not walk; "" if none */
  size_t skip_len;
};

static const char *type_name(char t) {
  switch (t) {
  case 'f':
    return "file";
  case 'd':
    return "dir";
  case 'l':
    return "symlink";
  }
  return "other";
}

static bool ts_equal(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/*
 * How entry c differs from its baseline b: NULL when it does not. The
 * content may have changed when the inode, size, mtime or target did, or
 * when ctime moved with no change of mode or owner to explain it (an
 * edit whose mtime was put back). A directory's size and times follow
 * its entries, which are compared on their own.
 */
static const char *classify(const struct entry *b, const struct entry *c) {
  bool meta = b->mode != c->mode || b->uid != c->uid || b->gid != c->gid;

  if (b->type != c->type || b->ino != c->ino)
    return "modified";
  if (c->type != 'd' &&
      (b->size != c->size || !ts_equal(&b->mtime, &c->mtime) ||
       (c->type == 'l' && strcmp(b->target, c->target) != 0)))
    return "modified";
  if (meta)
    return "metadata";
  if (c->type != 'd' && !ts_equal(&b->ctime, &c->ctime))
    return "modified";
  return NULL;
}

/* Add a change; 1 (stop) when the list is full. `mode` is the entry's
 * now (0 for a deleted one): a file with a set-user-ID or set-group-ID
 * bit is marked, since it runs as its owner for whoever runs it. */
static int add_change(struct merge *m, const char *path, const char *change,
                      char type, char was, uint32_t mode) {
  json_t *j;

  if (json_array_size(m->changes) == m->max) {
    m->truncated = true;
    return 1;
  }
  j = json_pack("{s:o,s:s,s:s}", "path", wr_json_string_lossy(path), "change",
                change, "type", type_name(type));
  if (was != type)
    json_object_set_new(j, "was", json_string(type_name(was)));
  if (type == 'f' && (mode & (S_ISUID | S_ISGID)) != 0)
    json_object_set_new(j, "setuid", json_true());
  json_array_append_new(m->changes, j);
  return 0;
}

/* Baseline records before `upto` (all when NULL) are gone now, except
 * below a directory one side did not walk. */
static int drain_base(struct merge *m, const char *upto, wr_error_t *err) {
  struct reader *r = &m->base;

  while (r->have && (upto == NULL || tree_cmp(r->e.path, upto) < 0)) {
    if (!is_below(r->e.path, m->skip, m->skip_len) &&
        add_change(m, r->e.path, "deleted", r->e.type, r->e.type, 0) != 0)
      return 1;
    if (reader_next(r, err) < 0)
      return -1;
  }
  return 0;
}

static void set_skip(struct merge *m, const char *path) {
  m->skip_len = strlen(path);
  memcpy(m->skip, path, m->skip_len + 1);
}

/* The walk's next entry, merged with the baseline. */
static int merge_entry(struct walk *w, const struct entry *c, wr_error_t *err) {
  struct merge *m = w->arg;
  struct reader *r = &m->base;
  bool same_path;
  const char *change;
  int ret = drain_base(m, c->path, err);

  if (ret != 0)
    return ret;
  same_path = r->have && strcmp(r->e.path, c->path) == 0;
  if (is_below(c->path, m->skip, m->skip_len))
    return same_path ? reader_next(r, err) : 0;
  m->skip_len = 0;
  if (!same_path) {
    if (r->done && r->cut) { /* past what the baseline saw */
      m->truncated = true;
      return 1;
    }
    return add_change(m, c->path, "added", c->type, c->type, c->mode);
  }
  if (r->e.flag != '-' || c->flag != '-')
    set_skip(m, c->path);
  change = classify(&r->e, c);
  if (change != NULL &&
      add_change(m, c->path, change, c->type, r->e.type, c->mode))
    return 1;
  return reader_next(r, err);
}

json_t *wr_manifest_diff_limits(int dirfd, const char *file, size_t max,
                                const struct wr_manifest_limits *lim,
                                wr_error_t *err) {
  _cleanup_free_ struct merge *m = xcalloc(1, sizeof(*m));
  _cleanup_free_ struct walk *w = xcalloc(1, sizeof(*w));
  _cleanup_json_ json_t *changes = json_array();
  int r;

  m->changes = changes;
  m->max = max;
  w->lim = lim;
  w->emit = merge_entry;
  w->arg = m;
  r = reader_open(&m->base, file, err);
  if (r == 0)
    r = walk_tree(w, dirfd, err);
  /* After a complete walk, what is left of the baseline is gone. */
  if (r == 0 && !m->truncated && !w->cut && drain_base(m, NULL, err) < 0)
    r = -1;
  reader_close(&m->base);
  if (r < 0) {
    wr_error_wrap(err, "compare workspace");
    return NULL;
  }
  return json_pack("{s:O,s:b}", "changes", changes, "truncated",
                   m->truncated || w->truncated || m->base.truncated);
}

json_t *wr_manifest_diff(int dirfd, const char *file, size_t max,
                         wr_error_t *err) {
  return wr_manifest_diff_limits(dirfd, file, max, &default_limits, err);
}
