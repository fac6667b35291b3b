/*
 * layers: read-only overlay layers made from a sandbox's own layer (its
 * overlay upper directory), for snapshots and the sandboxes made from
 * them. See docs/lifecycle.md ("Snapshots and forks").
 *
 * A layer is a plain directory tree that overlayfs reads as a lower
 * layer: whiteouts (character devices 0/0) hide what the layers below
 * have, and directories marked opaque (trusted.overlay.opaque) hide
 * everything below them. Its files are owned by ids 0..WR_ID_COUNT-1 on
 * the host, like an image's, so that every sandbox mounts it id-mapped
 * into its own range. The state root's snapshots directory is 0700: a
 * layer may hold setuid files owned by host root.
 *
 * The functions block and run on worker threads; they touch only the
 * directories they are given.
 */
#ifndef WR_RUNTIME_LAYERS_H
#define WR_RUNTIME_LAYERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/common.h"

/* The deepest stack of snapshot layers a sandbox gets below its own: a
 * snapshot of a sandbox whose stack is this deep is flattened into one
 * layer when it is taken. */
#define WR_LAYERS_MAX_DEPTH 8
/* The most layers a template's steps make (templates.c), and so the most
 * a sandbox mounts below its own: a snapshot stack over a template's. */
#define WR_TEMPLATE_MAX_LAYERS 16
#define WR_LAYERS_MAX_MOUNT (WR_LAYERS_MAX_DEPTH + WR_TEMPLATE_MAX_LAYERS)
/* Directories nested deeper than this in a layer are refused (the walks
 * hold one fd per level). */
#define WR_LAYERS_MAX_NEST 256

struct wr_layer_stats {
  uint64_t files;     /* regular files, FIFOs and symlinks */
  uint64_t dirs;      /* directories */
  uint64_t links;     /* hard links made instead of copies */
  uint64_t whiteouts; /* whiteouts */
  uint64_t bytes;     /* bytes of regular files (all of them, copied or
                         matched) */
  uint64_t copied;    /* entries written by this walk (the rest matched) */
  uint64_t skipped;   /* sockets and devices other than whiteouts */
};

struct wr_layer_opts {
  /* Ids [id_base, id_base + WR_ID_COUNT) in the source are 0.. in the
   * layer, others 65534; 0: the source is a layer already. */
  uint32_t id_base;
  /* false: make the destination an exact copy of the source (a capture),
   * keeping what already matches. true: apply the source on top of the
   * destination as overlayfs would stack it (flattening): a whiteout
   * removes what the destination has at its name, an opaque directory
   * replaces the destination's, other directories merge. */
  bool merge;
  /* A capture keeps a destination entry that matches its source entry
   * (type, size, mode, owner, mtime) when the source's ctime is before
   * this (CLOCK_REALTIME ns): it did not change since an earlier pass
   * copied it. 0: nothing is kept unless it matches by those fields and
   * the earlier pass is not known. */
  int64_t since_ns;
};

/* Make dst (a directory fd) hold src (a directory fd) as opts say. The
 * source may change while it is walked: an entry that vanishes is
 * skipped, and a later pass with since_ns catches up. */
int wr_layer_sync(int src, int dst, const struct wr_layer_opts *opts,
                  struct wr_layer_stats *stats, wr_error_t *err);

/* Stack layers (oldest first) into one at dst (made if missing), as
 * overlayfs would show them, keeping the whiteouts and opaque marks that
 * hide what lies below all of them (the image). */
int wr_layer_flatten(const char *const *layers, size_t n, const char *dst,
                     struct wr_layer_stats *stats, wr_error_t *err);

/* Whether st describes an overlay whiteout. */
bool wr_layer_is_whiteout(const struct stat *st);

/* The total size of a layer's regular files and its entries (du-like,
 * apparent sizes). */
int wr_layer_measure(const char *dir, struct wr_layer_stats *stats,
                     wr_error_t *err);

#endif
