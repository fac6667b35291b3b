/*
 * tar: archives of trees inside a sandbox's root, and the in-root path
 * helpers that both the tar code and the files API build on.
 *
 * The tar code is ours (no libarchive): POSIX ustar with pax extended
 * headers on output; ustar, pax ('x', 'g') and GNU long names ('L', 'K')
 * on input. Sparse files keep their holes both ways: a file with holes is
 * written in GNU tar's PAX sparse format 1.0, which GNU tar, bsdtar and
 * Python read, and extraction reads that and GNU's old 'S' headers (what
 * `tar --sparse` makes in the gnu format); GNU's PAX formats 0.0 and 0.1
 * are refused with an error saying so. Extraction seeks over holes and
 * sets the size at the end, so holes take no disk there either. Every file is
 * reached through a directory fd that was resolved with
 * openat2(RESOLVE_IN_ROOT), then with *at() calls on one final component, so
 * neither direction can touch anything outside the root however hostile the
 * tree or the archive is.
 *
 * Include at the end of common.h (it uses wr_error_t).
 */
#ifndef WR_TAR_H
#define WR_TAR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

/* ---- in-root paths ---------------------------------------------------- */

/*
 * A client path as an absolute, lexically clean path inside the root:
 * empty and "." components dropped, ".." removes the previous component
 * and stops at "/". "" and "/" give "/". The caller frees it. Resolution
 * still goes through openat2, so this is for naming, not for safety.
 */
char *wr_path_normalize(const char *path);

/*
 * mkdir -p inside the root. Existing components are resolved in the root
 * (symlinks are followed, but never out of it); each missing one is made
 * with mkdirat() in its resolved parent and given exactly `mode` and
 * uid/gid ((uid_t)-1 / (gid_t)-1: leave the owner alone). Returns a
 * directory fd (O_CLOEXEC) of `path`, or -1.
 */
int wr_mkdir_p_in_root(int rootfd, const char *path, mode_t mode, uid_t uid,
                       gid_t gid, wr_error_t *err);

/* ---- tar -------------------------------------------------------------- */

/*
 * rootfd: the root every path is resolved in. With map_ids, host ids
 * [id_base, id_base + id_count) are ids 0.. in the archive: out of range
 * host ids are written as 65534, and archive ids at or above id_count are
 * extracted as id_base + 65534 (or the last id of a smaller range). Without
 * map_ids (the CLI on the host) host ids are written as they are and
 * extraction does not chown.
 *
 * max_bytes (extraction only; 0: none) bounds the bytes of file data
 * written, holes not counted: an entry that would pass it fails with
 * EDQUOT before any of its data is written.
 */
struct wr_tar_ctx {
  int rootfd;
  uint32_t id_base;
  uint32_t id_count;
  bool map_ids;
  uint64_t max_bytes;
};

struct wr_tar_stats {
  uint64_t files; /* regular files and FIFOs */
  uint64_t dirs;
  uint64_t links; /* symlinks and hardlinks */
  uint64_t bytes; /* bytes of file data (holes are not data) */
};

/*
 * Write a tar stream of `path` (a file or a directory tree inside the
 * root) to outfd. Entry names are relative to the parent of `path`, as
 * `tar -C dirname -cf - basename` would write them, or to `path` itself
 * when contents_only (which then must be a directory; "/" is always
 * archived as contents). The final component of `path` is not followed
 * unless contents_only. Symlinks are stored, never followed; hardlinks
 * become separate files; sockets and device nodes are skipped; mount
 * points are stored but not descended. The walk holds one directory fd at
 * a time and returns to a parent through "..", checking it is the
 * directory it came from, so a tree of any depth works and a tree moved
 * under it is an error rather than a walk elsewhere.
 */
int wr_tar_create(const struct wr_tar_ctx *c, const char *path,
                  bool contents_only, int outfd, wr_error_t *err);

/* The same as wr_tar_create(c, path, false, ...), with the top entry
 * named `name` (one component) instead of basename(path). */
int wr_tar_create_as(const struct wr_tar_ctx *c, const char *path,
                     const char *name, int outfd, wr_error_t *err);

/*
 * Walk `path` as wr_tar_create would and count what the archive would
 * hold, without reading any data: stats->bytes is the file data it would
 * carry (holes excluded), as the tree is now. The tree may change before
 * it is archived, so an extractor still needs its own bound (max_bytes).
 */
int wr_tar_measure(const struct wr_tar_ctx *c, const char *path,
                   bool contents_only, struct wr_tar_stats *stats,
                   wr_error_t *err);

/*
 * Read a tar stream from infd (any fd: it is read sequentially, never
 * seeked) and extract it into the directory `path` inside the root, which
 * is created first when `parents` (mkdir -p). stats may be NULL.
 *
 * Names: leading "/" and "." components are dropped; a name with a ".."
 * component is an error. Each entry is made by an *at() call in its parent,
 * resolved in the root (so a symlink from the archive may point anywhere,
 * but later entries through it still land inside the root); missing
 * parents are created. Existing entries are replaced (unlinked, never
 * written through); a non-empty directory in the way is an error.
 * Hardlinks must name a regular file already inside the extraction
 * directory. Device nodes and unknown entry types are errors; GNU volume
 * labels and pax global headers are read and ignored. Modes keep the
 * permission bits and the sticky bit (setuid/setgid are dropped); mtimes
 * are restored; directory modes and mtimes are applied at the end.
 * A regular file is written under a temporary name beside its own and
 * renamed over it once complete, so a reader never sees half of it and a
 * failed entry leaves nothing. Sparse entries are refused unless their map
 * is sane: at most 65536 segments, in order, not overlapping, inside the
 * declared size (at most 2^63 - 1), and accounting for exactly the data
 * the entry carries. Stops at the end-of-archive marker; a stream that
 * ends before it is an error.
 */
int wr_tar_extract(const struct wr_tar_ctx *c, const char *path, bool parents,
                   int infd, struct wr_tar_stats *stats, wr_error_t *err);

#endif
