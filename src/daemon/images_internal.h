/*
 * Internal to the daemon's image code (images.c, sources.c): the build
 * entry point the API handler uses, and the parsers of host files that
 * decide what a build asks mmdebstrap for. The parsers touch nothing but
 * the files they are pointed at, so unit tests run them on a temp dir.
 */
#ifndef WR_IMAGES_INTERNAL_H
#define WR_IMAGES_INTERNAL_H

#include "daemon/daemon.h"

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
                         char *const *include, bool force,
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

#endif
