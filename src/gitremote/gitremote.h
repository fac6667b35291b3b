/*
 * gitremote: git-remote-warren, the git remote helper behind the remote
 * `warren-NAME` that clone mode adds to the host repository.
 *
 * `git fetch warren-NAME BRANCH` runs `git-remote-warren warren-NAME NAME`.
 * The helper asks the sandbox (through warrend's exec and files APIs) for
 * a git bundle of its clone's branches and tags, downloads it, reads its
 * header here, and lets the host's git index the pack part with full
 * checks. The host never runs git on the sandbox's repository and nothing
 * of the sandbox (hooks, configuration) runs on the host: only the
 * bundle's bytes cross, and they are treated as hostile.
 */
#ifndef WR_GITREMOTE_H
#define WR_GITREMOTE_H

#include "cli/cli.h"

/* The largest bundle accepted, and the largest header within it. */
#define WR_BUNDLE_MAX (2ull << 30)
#define WR_BUNDLE_HEADER_MAX (16u << 20)
/* The most refs a header may list. */
#define WR_BUNDLE_REFS_MAX 100000

struct wr_bundle_ref {
  char oid[65]; /* lowercase hex */
  char *name;   /* "refs/heads/x", "refs/tags/v1" or "HEAD" */
};

struct wr_bundle_header {
  int version;    /* 2 or 3 */
  size_t oid_len; /* 40 (sha1) or 64 (sha256) */
  struct wr_bundle_ref *refs;
  size_t nrefs;
  size_t pack_offset; /* where the pack ("PACK...") starts */
};

/*
 * Parse a bundle's header from data, which must hold the whole header and
 * at least the pack's 4-byte signature after it. Only what warren asked
 * the sandbox for is accepted: a full bundle (no prerequisites, no
 * filter) of branches, tags and HEAD, with valid and unique ref names.
 */
int wr_bundle_header_parse(const char *data, size_t len,
                           struct wr_bundle_header *h, wr_error_t *err);
void wr_bundle_header_free(struct wr_bundle_header *h);
/* The ref of that name, or NULL. */
const struct wr_bundle_ref *wr_bundle_find(const struct wr_bundle_header *h,
                                           const char *name);

/* ---- the limits of a fetch (limits.c) ------------------------------------ */

#define WR_FETCH_MAX_OBJECT (256ull << 20)
#define WR_FETCH_MAX_TOTAL (4ull << 30)
#define WR_FETCH_TIMEOUT_MS (300ull * 1000)
/* The memory of the host's git, unless set: twice the largest object (a
 * delta's base and result are in memory together) and room for the rest
 * (git's delta base cache is 96 MiB). */
#define WR_FETCH_MEMORY(max_object) (2 * (max_object) + (256ull << 20))
/* Less than this and no git runs at all. */
#define WR_FETCH_MEMORY_MIN (32ull << 20)

struct wr_fetch_limits {
  uint64_t max_object; /* warren.maxObjectSize */
  uint64_t max_total;  /* warren.maxTotalSize */
  uint64_t max_memory; /* warren.maxMemory: of the host's git */
  uint64_t timeout_ms; /* warren.fetchTimeout: the whole fetch */
  bool memory_set;     /* max_memory was set, not derived from max_object */
};

void wr_fetch_limits_default(struct wr_fetch_limits *l);
/*
 * Apply `git config -z --get-regexp '^warren\.'` output (entries of
 * "key\nvalue\0"; the last of a key wins, as in git) over l. Unknown
 * warren.* keys are left to others; a bad value is an error naming the
 * key.
 */
int wr_fetch_limits_parse(const char *text, size_t len,
                          struct wr_fetch_limits *l, wr_error_t *err);
/* The limits for the repository git runs us in (GIT_DIR), from its
 * configuration (and the user's and the system's, as git reads them). */
int wr_fetch_limits_read(struct wr_fetch_limits *l, wr_error_t *err);

/* ---- the host's git, bounded (bounded.c) --------------------------------- */

/* Where wr_bounded_run hands stdout as it comes, when set: -1 (err set)
 * stops the command. */
typedef int (*wr_bounded_out_fn)(void *ctx, const char *data, size_t len,
                                 wr_error_t *err);

struct wr_bounded_cmd {
  char *const *argv;        /* argv[0] is looked up in PATH */
  char *const *env;         /* the whole environment */
  int stdin_fd;             /* -1: /dev/null */
  wr_buf_t *out;            /* stdout, when on_out is not set */
  size_t max_out;           /* more is an error */
  wr_bounded_out_fn on_out; /* or stdout piece by piece, unbounded */
  void *on_out_ctx;
  wr_buf_t *errout;     /* stderr: its last 64 KiB */
  uint64_t max_memory;  /* bytes */
  uint64_t deadline_ns; /* wr_mono_ns() at which it is killed */
};

struct wr_bounded_exit {
  int status;         /* exit code; 128+N for signal N */
  bool timed_out;     /* killed at the deadline */
  bool out_of_memory; /* stopped at max_memory */
  bool cgroup;        /* it ran in a memory cgroup of its own */
};

/*
 * Run a git command with its memory and time bounded, and wait.
 *
 * Memory: git's own per-allocation limit (GIT_ALLOC_LIMIT) and
 * RLIMIT_DATA, both at max_memory, always; and, when we may make one (as
 * root, or in a delegated cgroup), a memory cgroup of its own with that
 * limit, so that what git maps counts too. Time: SIGKILL at the deadline,
 * RLIMIT_CPU behind it, and PR_SET_PDEATHSIG so that it dies with us.
 * *ex says how it ended; -1 when it could not run at all, printed more
 * than max_out, or on_out refused what it printed.
 */
int wr_bounded_run(const struct wr_bounded_cmd *cmd, struct wr_bounded_exit *ex,
                   wr_error_t *err);

/* ---- a quarantine for the pack (quarantine.c) ---------------------------- */

/*
 * A temporary object directory inside the repository's own (so that its
 * files can be moved in with link(2)), named tmp_objdir-warren-XXXXXX as
 * git names its own: if we die before removing it, `git gc` does.
 */
struct wr_quarantine {
  char *objects; /* the repository's object directory, absolute */
  char *dir;     /* the quarantine within it */
  char **env;    /* our environment, git's objects going there */
};

/* Make it for the repository git runs us in. */
int wr_quarantine_make(struct wr_quarantine *q, wr_error_t *err);
/*
 * Move pack-HASH's files into the repository: the .keep first (so that no
 * gc takes the pack before git has updated its refs), the .idx last (git
 * sees a pack once its index is there). A file already there is left as
 * it is. *keep is the .keep's path in the repository, or NULL when one
 * was there before (it is not ours to let go).
 */
int wr_quarantine_commit(struct wr_quarantine *q, const char *hash, char **keep,
                         wr_error_t *err);
/* Remove what is left of it (everything, when not committed). */
void wr_quarantine_remove(struct wr_quarantine *q);

/* What the objects in a quarantine expand to. */
struct wr_object_sizes {
  uint64_t objects;
  uint64_t largest;
  uint64_t total;
  /* the line being read (of one decimal number per line) */
  uint64_t value;
  size_t digits;
};

/* Read sizes as `git cat-file --batch-check='%(objectsize)'` prints
 * them, in pieces split anywhere; wr_object_sizes_end once all are in.
 * Anything but a number of at most 19 digits on a line is an error. */
int wr_object_sizes_feed(struct wr_object_sizes *s, const char *data,
                         size_t len, wr_error_t *err);
int wr_object_sizes_end(const struct wr_object_sizes *s, wr_error_t *err);

/*
 * The sizes of every object in the quarantine, and only there (not the
 * repository's, its alternate), as git knows them from the pack index
 * and each delta's header, without expanding one:
 * `git cat-file --batch-all-objects --batch-check`, run bounded as
 * index-pack was (max_memory, the deadline). 0 with ex->timed_out or
 * ex->out_of_memory when git was stopped at a limit (for the caller to
 * name), else 0 once *s holds every object's size.
 */
int wr_quarantine_measure(const struct wr_quarantine *q, uint64_t max_memory,
                          uint64_t deadline_ns, struct wr_object_sizes *s,
                          struct wr_bounded_exit *ex, wr_error_t *err);

/* The URL's address part ("NAME" or "warren://NAME") to a sandbox name;
 * NULL when it is not one (caller frees). */
char *wr_gitremote_sandbox_name(const char *address);

/* The whole helper: argv is git's (REMOTE ADDRESS); returns the exit
 * code. */
int wr_gitremote_main(int argc, char **argv);

#endif
