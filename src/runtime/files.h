/*
 * files: the files API operations on a sandbox's root, seen from the host.
 *
 * Everything inside the root is hostile: a sandbox may plant symlinks to
 * "/" or use ".." and swap directories for symlinks while we work. So
 * every client path is resolved with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS) against rootfd, and every change is made with an
 * *at() call relative to the directory fd that gave, on one final
 * component, without following it. No host path is ever built.
 *
 * Paths are taken as seen inside the sandbox and normalised lexically
 * first (wr_path_normalize: "a/./b/../c" is "/a/c", ".." stops at "/"),
 * so the final component is never "." or "..". Symlinks in the middle of a
 * path are followed, inside the root; the final component is not, except
 * where a function says so.
 *
 * Entries created through the API get uid and gid id_base (the sandbox's
 * root) with fchown on the new fd, and exactly the mode asked for (the
 * daemon's umask does not apply). Modes are permission bits plus the
 * sticky bit (01777); setuid and setgid are refused.
 *
 * The functions block; run them on a worker thread.
 */
#ifndef WR_RUNTIME_FILES_H
#define WR_RUNTIME_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

struct wr_file_info {
  char *name; /* final component ("/" for the root) */
  char *path; /* path inside the root, absolute, normalised */
  char type;  /* 'f' file, 'd' dir, 'l' symlink, 'c','b','p','s' */
  uint64_t size;
  uint64_t allocated; /* bytes of disk it takes (st_blocks * 512): much less
                         than size for a sparse file */
  uint32_t mode;      /* permission bits (07777) */
  uint32_t uid, gid;  /* inside the sandbox: host id - id_base, or 65534
                         when the host id is outside the range */
  int64_t mtime_ms;
  char *link_target; /* symlinks only: the target text (not followed) */
};

/* rootfd: the merged root (an O_PATH directory fd is enough). Host ids
 * [id_base, id_base + id_count) are ids 0.. inside the sandbox. */
struct wr_files_ctx {
  int rootfd;
  uint32_t id_base;
  uint32_t id_count;
};

/* lstat: a final symlink is described, not followed. */
int wr_files_stat(const struct wr_files_ctx *c, const char *path,
                  struct wr_file_info *out, wr_error_t *err);

/*
 * The entries below directory `path`, `depth` levels deep (1: children
 * only), breadth first and sorted by name within each directory; `path`
 * itself is resolved in the root like a read (a final symlink is
 * followed), entries below it never are, and neither are mount points.
 * At most max_entries (>= 1) are returned; *truncated says whether more
 * were left out. Entries that vanish or change while being listed are
 * skipped. *out (may be NULL when *n is 0) is freed with
 * wr_file_infos_free.
 */
int wr_files_list(const struct wr_files_ctx *c, const char *path,
                  unsigned depth, size_t max_entries, struct wr_file_info **out,
                  size_t *n, bool *truncated, wr_error_t *err);

/* mkdir, or mkdir -p with parents (an existing directory is then fine).
 * Each new directory is owned by id_base and has exactly `mode`. */
int wr_files_mkdir(const struct wr_files_ctx *c, const char *path,
                   uint32_t mode, bool parents, wr_error_t *err);

/*
 * Remove a file, a symlink (never what it points to), an empty directory,
 * or with `recursive` a whole tree. "/" is refused. Trees of any depth are
 * removed holding one directory fd: the walk descends with O_NOFOLLOW into
 * directories of the same filesystem and climbs back through "..", checking
 * each time that it reached the very directory it came from (a stack of
 * dev/inode pairs on the heap). If the sandbox moves part of the tree
 * meanwhile, the removal stops with an error instead of continuing
 * wherever ".." leads, so it never acts outside the directories it
 * descended into, let alone outside the root.
 */
int wr_files_remove(const struct wr_files_ctx *c, const char *path,
                    bool recursive, wr_error_t *err);

/* rename; an existing `to` is an error (EEXIST) unless overwrite. Symlinks
 * are moved as links. Neither path may be "/". */
int wr_files_move(const struct wr_files_ctx *c, const char *from,
                  const char *to, bool overwrite, wr_error_t *err);

/* chmod. A final symlink is refused (ELOOP), never followed. */
int wr_files_chmod(const struct wr_files_ctx *c, const char *path,
                   uint32_t mode, wr_error_t *err);

/*
 * Open a regular file for reading. Symlinks, the final one included, are
 * followed inside the root (openat2 keeps them there); a directory is
 * EISDIR, anything else but a regular file EINVAL, and no other kind of
 * file is ever opened (the file is reached O_PATH, checked, then
 * reopened). info (may be NULL) describes the opened file under the name
 * asked for; free it with wr_file_info_free.
 */
int wr_files_open_read(const struct wr_files_ctx *c, const char *path, int *fd,
                       struct wr_file_info *info, wr_error_t *err);

/*
 * An atomic write: data goes to a temporary file in the target's directory
 * (owned by id_base, with `mode`), and commit renames it into place, so a
 * reader sees the old file or the new one, never half of it. An existing
 * directory at `path` is EISDIR; an existing symlink is replaced, not
 * written through. With parents, missing directories are made as by
 * wr_files_mkdir.
 */
struct wr_files_writer;

int wr_files_write_begin(const struct wr_files_ctx *c, const char *path,
                         uint32_t mode, bool parents,
                         struct wr_files_writer **out, wr_error_t *err);
/* The fd to write the data to (owned by the writer). */
int wr_files_writer_fd(const struct wr_files_writer *w);
/* Rename into place and free w, whatever the outcome. */
int wr_files_write_commit(struct wr_files_writer *w, wr_error_t *err);
/* Remove the temporary file and free w. */
void wr_files_write_abort(struct wr_files_writer *w);

void wr_file_info_free(struct wr_file_info *info);
void wr_file_infos_free(struct wr_file_info *v, size_t n);

#endif
