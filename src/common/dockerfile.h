/*
 * dockerfile: the subset of the Dockerfile format that templates are
 * built from (docs/templates.md).
 *
 * FROM (an image or another template; once, first), RUN and CMD (shell
 * form or JSON exec form), COPY and ADD (sources from the build context
 * only, no flags), ENV (`K=V ...` or `K value`), WORKDIR, USER, EXPOSE
 * (one TCP port), comments and line continuations. Parser directives
 * (`# syntax=...`) are comments. Anything else is an error naming its
 * line. The text is outside input (a client sends it): bounded, never
 * trusted, fuzzed (tests/fuzz/fuzz_dockerfile.c).
 */
#ifndef WR_DOCKERFILE_H
#define WR_DOCKERFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define WR_DF_TEXT_MAX (1u << 20)  /* the Dockerfile itself */
#define WR_DF_LINE_MAX (64u << 10) /* one instruction, continuations joined */
#define WR_DF_STEPS_MAX 256

enum wr_df_kind {
  WR_DF_FROM,
  WR_DF_RUN,
  WR_DF_COPY, /* ADD is a COPY (no URLs, archives are not unpacked) */
  WR_DF_ENV,
  WR_DF_WORKDIR,
  WR_DF_USER,
  WR_DF_EXPOSE,
  WR_DF_CMD,
};

/*
 * One instruction. args by kind:
 *   FROM     [name]
 *   RUN, CMD the command (shell form: ["/bin/sh", "-c", text])
 *   COPY     the sources, then the destination (at least two)
 *   ENV      "K=V" for each variable
 *   WORKDIR  [absolute path] (a relative one is resolved against the
 *            WORKDIR before it, "/" at first)
 *   USER     [user]
 *   EXPOSE   [port] (and port holds it)
 */
struct wr_df_step {
  enum wr_df_kind kind;
  unsigned line;
  char *text; /* "RUN npm install", continuations joined with spaces */
  char **args;
  bool shell; /* RUN and CMD in shell form */
  uint16_t port;
};

struct wr_dockerfile {
  struct wr_df_step *steps;
  size_t n;
};

/* Parse text (len bytes, need not end in NUL). On failure err says
 * which line and why, and out is empty. */
int wr_dockerfile_parse(const char *text, size_t len, struct wr_dockerfile *out,
                        wr_error_t *err);
void wr_dockerfile_free(struct wr_dockerfile *df);
/* "FROM", "RUN", ... */
const char *wr_df_kind_name(enum wr_df_kind kind);

#endif
