/* Strict JSON decoding for client input, on top of jansson. */
#include "common.h"

#include <jansson.h>

void wr_json_decrefp(json_t **j) {
  json_decref(*j);
}

int wr_json_parse_object(const char *data, size_t len, bool allow_empty,
                         json_t **out, wr_error_t *err) {
  json_error_t jerr;
  json_t *j;

  if (len == 0 && allow_empty) {
    *out = json_object();
    return 0;
  }
  j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
  if (j == NULL)
    return wr_error_set(err, 0, "invalid JSON at line %d, column %d: %s",
                        jerr.line, jerr.column, jerr.text);
  if (!json_is_object(j)) {
    json_decref(j);
    return wr_error_set(err, 0, "the body must be a JSON object");
  }
  *out = j;
  return 0;
}

static const char *type_name(enum wr_json_type t) {
  switch (t) {
  case WR_JSON_STRING:
    return "a string";
  case WR_JSON_INT:
    return "an integer";
  case WR_JSON_NUMBER:
    return "a number";
  case WR_JSON_BOOL:
    return "a boolean";
  case WR_JSON_OBJECT:
    return "an object";
  case WR_JSON_ARRAY:
    return "an array";
  case WR_JSON_SIZE:
    return "a size (bytes, or a string like \"1g\")";
  case WR_JSON_ANY:
    break;
  }
  return "a value";
}

static int decode_size(json_t *v, uint64_t *out, const char *name,
                       wr_error_t *err) {
  if (json_is_integer(v)) {
    if (json_integer_value(v) < 0)
      return wr_error_set(err, 0, "field `%s` must not be negative", name);
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (json_is_string(v)) {
    if (strlen(json_string_value(v)) != json_string_length(v))
      return wr_error_set(err, 0, "field `%s` contains a NUL byte", name);
    if (wr_parse_size(json_string_value(v), out, err) < 0)
      return wr_error_wrap(err, "field `%s`", name);
    return 0;
  }
  return wr_error_set(err, 0, "field `%s` must be %s", name,
                      type_name(WR_JSON_SIZE));
}

/* Store v into f->out if it has f->type; otherwise fail naming the field. */
static int decode_field(const struct wr_json_field *f, json_t *v,
                        wr_error_t *err) {
  bool ok = true;

  switch (f->type) {
  case WR_JSON_STRING:
    if ((ok = json_is_string(v))) {
      if (strlen(json_string_value(v)) != json_string_length(v))
        return wr_error_set(err, 0, "field `%s` contains a NUL byte", f->name);
      *(const char **)f->out = json_string_value(v);
    }
    break;
  case WR_JSON_INT:
    if ((ok = json_is_integer(v)))
      *(int64_t *)f->out = json_integer_value(v);
    break;
  case WR_JSON_NUMBER:
    if ((ok = json_is_number(v)))
      *(double *)f->out = json_number_value(v);
    break;
  case WR_JSON_BOOL:
    if ((ok = json_is_boolean(v)))
      *(bool *)f->out = json_is_true(v);
    break;
  case WR_JSON_OBJECT:
    if ((ok = json_is_object(v)))
      *(json_t **)f->out = v;
    break;
  case WR_JSON_ARRAY:
    if ((ok = json_is_array(v)))
      *(json_t **)f->out = v;
    break;
  case WR_JSON_ANY:
    *(json_t **)f->out = v;
    break;
  case WR_JSON_SIZE:
    return decode_size(v, f->out, f->name, err);
  }
  if (!ok)
    return wr_error_set(err, 0, "field `%s` must be %s", f->name,
                        type_name(f->type));
  return 0;
}

int wr_json_unpack(const json_t *obj, const struct wr_json_field *fields,
                   size_t n, wr_error_t *err) {
  const char *key;
  json_t *v;

  if (!json_is_object(obj))
    return wr_error_set(err, 0, "expected a JSON object");
  json_object_foreach ((json_t *)obj, key, v) {
    size_t i;
    for (i = 0; i < n; i++)
      if (strcmp(fields[i].name, key) == 0)
        break;
    if (i == n)
      return wr_error_set(err, 0, "unknown field `%s`", key);
    if (json_is_null(v) && !fields[i].required)
      continue;
    if (decode_field(&fields[i], v, err) < 0)
      return -1;
    if (fields[i].present != NULL)
      *fields[i].present = true;
  }
  for (size_t i = 0; i < n; i++) {
    json_t *f = json_object_get(obj, fields[i].name);
    if (fields[i].required && (f == NULL || json_is_null(f)))
      return wr_error_set(err, 0, "missing field `%s`", fields[i].name);
  }
  return 0;
}

int wr_json_strv(const json_t *arr, const char *what, size_t max, char ***out,
                 wr_error_t *err) {
  size_t n, i;
  char **v;

  if (!json_is_array(arr))
    return wr_error_set(err, 0, "`%s` must be an array of strings", what);
  n = json_array_size(arr);
  if (n > max)
    return wr_error_set(err, 0, "`%s` has more than %zu entries", what, max);
  v = xcalloc(n + 1, sizeof(char *));
  for (i = 0; i < n; i++) {
    json_t *s = json_array_get(arr, i);
    if (!json_is_string(s) ||
        strlen(json_string_value(s)) != json_string_length(s)) {
      wr_strv_free(v);
      return wr_error_set(err, 0, "`%s[%zu]` must be a string without NUL",
                          what, i);
    }
    v[i] = xstrdup(json_string_value(s));
  }
  *out = v;
  return 0;
}

int wr_json_env(const json_t *obj, const char *what, char ***out,
                wr_error_t *err) {
  const char *key;
  json_t *v;
  char **env = xcalloc(1, sizeof(char *));

  if (!json_is_object(obj)) {
    wr_strv_free(env);
    return wr_error_set(err, 0, "`%s` must be an object of strings", what);
  }
  json_object_foreach ((json_t *)obj, key, v) {
    _cleanup_free_ char *kv = NULL;
    if (!wr_env_key_valid(key)) {
      wr_strv_free(env);
      return wr_error_set(err, 0, "`%s`: invalid variable name `%s`", what,
                          key);
    }
    if (!json_is_string(v) ||
        strlen(json_string_value(v)) != json_string_length(v)) {
      wr_strv_free(env);
      return wr_error_set(err, 0, "`%s.%s` must be a string without NUL", what,
                          key);
    }
    kv = xasprintf("%s=%s", key, json_string_value(v));
    env = wr_strv_push(env, kv);
  }
  *out = env;
  return 0;
}

json_t *wr_json_string_lossy(const char *s) {
  json_t *j = json_string(s);
  wr_buf_t b;

  if (j != NULL)
    return j;
  wr_buf_init(&b);
  for (size_t left = strlen(s); left > 0;) {
    size_t n = wr_utf8_seq(s, left);
    if (n == 0) {
      wr_buf_puts(&b, "\xef\xbf\xbd");
      n = 1;
    } else {
      wr_buf_append(&b, s, n);
    }
    s += n;
    left -= n;
  }
  j = json_string(b.data ? b.data : "");
  wr_buf_free(&b);
  return j;
}

char *wr_json_dumps(const json_t *j) {
  char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);

  if (s == NULL)
    abort();
  return s;
}
