/*
 * Fuzz the Dockerfile subset's parser (a client sends the text). Every
 * accepted file must be self-consistent: FROM first and only there, each
 * step with the arguments its kind promises.
 */
#include "common/dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct wr_dockerfile df;
  wr_error_t err;

  if (wr_dockerfile_parse((const char *)data, size, &df, &err) < 0) {
    if (df.n != 0 || strstr(err.msg, "Dockerfile") == NULL)
      abort();
    return 0;
  }
  if (df.n == 0 || df.steps[0].kind != WR_DF_FROM)
    abort();
  for (size_t i = 0; i < df.n; i++) {
    const struct wr_df_step *st = &df.steps[i];
    size_t n = wr_strv_len(st->args);
    if ((st->kind == WR_DF_FROM) != (i == 0) || n == 0 || st->line == 0)
      abort();
    if (st->kind == WR_DF_COPY && n < 2)
      abort();
    if (st->kind == WR_DF_WORKDIR && st->args[0][0] != '/')
      abort();
    if (st->kind == WR_DF_EXPOSE && st->port == 0)
      abort();
  }
  wr_dockerfile_free(&df);
  return 0;
}
