/*
 * The workspace manifest's limits, for tests that need small ones.
 * runtime.h has the two public functions (wr_manifest_save and
 * wr_manifest_diff), which use the defaults below.
 */
#ifndef WR_RUNTIME_MANIFEST_H
#define WR_RUNTIME_MANIFEST_H

#include <stddef.h>

#include "common/common.h"

/* Entries recorded in one walk; past this the walk stops ("cut"). */
#define WR_MANIFEST_MAX_ENTRIES 1000000
/* Directory levels below the root; a deeper directory is recorded but
 * not walked. Each level holds one open directory during the walk. */
#define WR_MANIFEST_MAX_DEPTH 256
/* Longest relative path recorded; longer ones are skipped. */
#define WR_MANIFEST_PATH_MAX 4096
/* Bytes of names read from one directory; a larger directory is
 * recorded but not walked. */
#define WR_MANIFEST_DIR_BYTES (64u << 20)

struct wr_manifest_limits {
  size_t max_entries;
  unsigned max_depth;
};

int wr_manifest_save_limits(int dirfd, const char *file,
                            const struct wr_manifest_limits *lim,
                            wr_error_t *err);
json_t *wr_manifest_diff_limits(int dirfd, const char *file, size_t max,
                                const struct wr_manifest_limits *lim,
                                wr_error_t *err);

#endif
