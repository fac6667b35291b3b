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

/* The URL's address part ("NAME" or "warren://NAME") to a sandbox name;
 * NULL when it is not one (caller frees). */
char *wr_gitremote_sandbox_name(const char *address);

/* The whole helper: argv is git's (REMOTE ADDRESS); returns the exit
 * code. */
int wr_gitremote_main(int argc, char **argv);

#endif
