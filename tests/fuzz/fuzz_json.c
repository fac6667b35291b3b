/*
 * Fuzz the strict JSON decoding every API request body goes through:
 * wr_json_parse_object, then wr_json_unpack with a field of every type,
 * then wr_json_strv and wr_json_env on the array and object fields. Any
 * input must give either a value or an error, never a crash or a leak.
 */
#include <jansson.h>

#include "common/common.h"

/* The decoded fields, one per enum wr_json_type. */
struct decoded {
  const char *str;
  int64_t integer;
  double number;
  bool boolean;
  json_t *object, *array, *any;
  uint64_t size;
  bool present[8];
};

/* Decode into d; `strict` makes the string and "any" fields required. */
static int unpack(const json_t *obj, struct decoded *d, bool strict) {
  const struct wr_json_field fields[] = {
      {"name", WR_JSON_STRING, &d->str, strict, &d->present[0]},
      {"count", WR_JSON_INT, &d->integer, false, &d->present[1]},
      {"ratio", WR_JSON_NUMBER, &d->number, false, &d->present[2]},
      {"flag", WR_JSON_BOOL, &d->boolean, false, &d->present[3]},
      {"env", WR_JSON_OBJECT, &d->object, false, &d->present[4]},
      {"cmd", WR_JSON_ARRAY, &d->array, false, &d->present[5]},
      {"extra", WR_JSON_ANY, &d->any, strict, &d->present[6]},
      {"memory", WR_JSON_SIZE, &d->size, false, &d->present[7]},
  };
  wr_error_t err = {0};
  int r;

  memset(d, 0, sizeof(*d));
  r = wr_json_unpack(obj, fields, WR_ARRAY_SIZE(fields), &err);
  if (r < 0 && err.msg[0] == '\0')
    abort(); /* every failure must say why */
  return r;
}

/* Turn whatever was decoded into vectors, as request handlers do; values
 * of the wrong type (through "extra") must be refused cleanly. */
static void convert(const struct decoded *d) {
  const json_t *candidates[] = {d->array, d->object, d->any};
  wr_error_t err = {0};

  for (size_t i = 0; i < WR_ARRAY_SIZE(candidates); i++) {
    _cleanup_strv_ char **argv = NULL;
    _cleanup_strv_ char **env = NULL;

    if (candidates[i] == NULL)
      continue;
    /* A success must carry every entry, each entry whole. */
    if (wr_json_strv(candidates[i], "cmd", 16, &argv, &err) == 0 &&
        wr_strv_len(argv) != json_array_size(candidates[i]))
      abort();
    if (wr_json_env(candidates[i], "env", &env, &err) == 0) {
      if (wr_strv_len(env) != json_object_size(candidates[i]))
        abort();
      for (char **p = env; *p != NULL; p++)
        if (strchr(*p, '=') == NULL)
          abort();
    }
  }
}

/* What warren accepted it can write back out and read again unchanged
 * (specs are stored as JSON and re-read after a restart). */
static void check_round_trip(const json_t *obj) {
  _cleanup_free_ char *text = wr_json_dumps(obj);
  _cleanup_json_ json_t *again = NULL;
  wr_error_t err = {0};

  if (wr_json_parse_object(text, strlen(text), false, &again, &err) < 0 ||
      !json_equal(obj, again))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int allow_empty = 0; allow_empty < 2; allow_empty++) {
    _cleanup_json_ json_t *obj = NULL;
    wr_error_t err = {0};
    struct decoded d;

    if (wr_json_parse_object((const char *)data, size, allow_empty, &obj,
                             &err) < 0) {
      if (err.msg[0] == '\0')
        abort();
      continue;
    }
    check_round_trip(obj);
    for (int strict = 0; strict < 2; strict++)
      if (unpack(obj, &d, strict) == 0)
        convert(&d);
  }
  return 0;
}
