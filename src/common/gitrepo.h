/*
 * gitrepo: a git repository recognised on disk by reading its files,
 * never by running git (the host never runs git on a directory that a
 * sandbox may have written). Shared by the CLI and the daemon, so that
 * clone mode through the API is refused what `warren create --clone`
 * refuses.
 *
 * `top` is an open directory fd of the working tree (O_PATH is enough)
 * and `name` its path as the user gave it, for messages. What is in the
 * tree is read as files of a sandbox are (see wr_open_confined): nothing
 * but regular files and directories is opened, nothing is followed out of
 * the tree, and what is read is bounded. The calls block on the
 * filesystem: worker threads only, in the daemon.
 *
 * Include at the end of common.h (it uses wr_error_t).
 */
#ifndef WR_GITREPO_H
#define WR_GITREPO_H

#include <stdbool.h>

#include "common/common.h"

/* The git directory of the working tree: its .git directory (or a symlink
 * to one inside the tree), or the directory its .git file names
 * ("gitdir: DIR"), which must be inside the tree too (only the tree is
 * mounted in the sandbox). A linked worktree is refused, and so is a
 * directory without HEAD, objects, refs and config. *git_dir: its
 * canonical path (caller frees); *gd (may be NULL): an O_PATH fd of it. */
int wr_gitrepo_find(int top, const char *name, char **git_dir, int *gd,
                    wr_error_t *err);
/* Whether the git directory has a branch (a loose ref below refs/heads or
 * a refs/heads line in packed-refs), hence a commit. A reftable
 * repository cannot be read this way and counts as having one. */
bool wr_gitrepo_has_branch(int gd);
/* A repository with a commit, as clone mode needs (both of the above). */
int wr_gitrepo_check(int top, const char *name, char **git_dir,
                     wr_error_t *err);

#endif
