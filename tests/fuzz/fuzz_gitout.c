/*
 * Fuzz the parsers of what host git prints about a project's mirror
 * (src/projects/mirror.c): the commits are a sandbox's, so their names,
 * subjects and paths are any bytes git allows. A log that parses has at
 * most `total` commits, numbered down from it, each with a hex commit;
 * every name-status entry has a status and a path.
 */
#include "projects/projects.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *out = NULL, *e;
  wr_error_t err;
  size_t i;

  if (wr_mirror_log_parse((const char *)data, size, 8, 0, &out, &err) == 0) {
    if (json_array_size(out) > 8)
      abort();
    json_array_foreach (out, i, e) {
      if (json_integer_value(json_object_get(e, "version")) != 8 - (int)i ||
          strlen(json_string_value(json_object_get(e, "commit"))) < 40 ||
          !json_is_string(json_object_get(e, "subject")))
        abort();
    }
    json_decref(out);
  }
  out = NULL;
  if (wr_mirror_names_parse((const char *)data, size, &out, &err) == 0) {
    json_array_foreach (out, i, e) {
      if (!json_is_string(json_object_get(e, "status")) ||
          !json_is_string(json_object_get(e, "path")))
        abort();
    }
    json_decref(out);
  }
  return 0;
}
