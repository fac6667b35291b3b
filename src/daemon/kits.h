/*
 * Internal to the daemon module: agent kits (kits.c).
 */
#ifndef WR_DAEMON_KITS_H
#define WR_DAEMON_KITS_H

#include <jansson.h>

#include "daemon/daemon.h"

/* What `warren run` starts: data/kits/NAME.json or ROOT/kits/NAME.json
 * (docs/agents.md has the format). Every field is validated. */
struct wr_kit {
  char *name, *description; /* description: "" when the file has none */
  char *npm;                /* package providing command[0], or NULL */
  char *secret;             /* secret service the agent uses, or NULL */
  char *source;             /* the file it came from */
  char **command;           /* argv, at least one entry */
  char **env;               /* "K=V", sorted, never NULL */
  char **allow;             /* policy host patterns, never NULL */
};

/* ROOT/kits/NAME.json, else DATA/kits/NAME.json. err->code ENOENT: no
 * such kit (the message lists the kits there are); EINVAL: a bad name
 * or a broken file (the message names the file and the field). */
int wr_kit_load(struct wr_daemon *d, const char *name, struct wr_kit *out,
                wr_error_t *err);
void wr_kit_free(struct wr_kit *k);
json_t *wr_kit_json(const struct wr_kit *k);
/* The same search over the given directories (NULL-ended), in order. */
int wr_kit_find(char *const *dirs, const char *name, struct wr_kit *out,
                wr_error_t *err);
/* Parse one kit file's text; source names the file in messages. */
int wr_kit_parse(const char *name, const char *source, const char *text,
                 size_t len, struct wr_kit *out, wr_error_t *err);
/* Kit names: [a-z0-9][a-z0-9._-]{0,62}, as sandbox names. */
bool wr_kit_name_valid(const char *name);
/* An npm package spec: "name", "@scope/name", optionally "@VERSION". */
bool wr_kit_npm_valid(const char *spec);
/* The kit names found in dirs, sorted, without duplicates. */
char **wr_kit_names(char *const *dirs);

void wr_api_kit_list(wr_http_req_t *req, void *ctx); /* GET /v1/kits */
void wr_api_kit_get(wr_http_req_t *req, void *ctx);  /* GET /v1/kits/{name} */

#endif
