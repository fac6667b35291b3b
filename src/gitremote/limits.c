/*
 * The limits of a fetch, from git's configuration of the host repository.
 *
 * They are the user's to raise (the defaults fit source code, not a
 * repository of disk images), and git's configuration is where a user
 * sets things per repository or for all of them (`git config --global`).
 * git reads it for us, so the files, includes and conditions are git's;
 * we only parse the values.
 */
#include "gitremote/gitremote.h"

enum kind { SIZE, DURATION };

static const struct key {
  const char *name; /* as documented; git gives keys in lower case */
  enum kind kind;
  size_t offset;
  uint64_t min;
} keys[] = {
    {"warren.maxObjectSize", SIZE, offsetof(struct wr_fetch_limits, max_object),
     1},
    {"warren.maxTotalSize", SIZE, offsetof(struct wr_fetch_limits, max_total),
     1},
    {"warren.maxMemory", SIZE, offsetof(struct wr_fetch_limits, max_memory),
     WR_FETCH_MEMORY_MIN},
    {"warren.fetchTimeout", DURATION,
     offsetof(struct wr_fetch_limits, timeout_ms), 1000},
};

void wr_fetch_limits_default(struct wr_fetch_limits *l) {
  l->max_object = WR_FETCH_MAX_OBJECT;
  l->max_total = WR_FETCH_MAX_TOTAL;
  l->max_memory = WR_FETCH_MEMORY(WR_FETCH_MAX_OBJECT);
  l->timeout_ms = WR_FETCH_TIMEOUT_MS;
  l->memory_set = false;
}

static const struct key *find_key(const char *name, size_t len) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(keys); i++)
    if (strlen(keys[i].name) == len &&
        strncasecmp(keys[i].name, name, len) == 0)
      return &keys[i];
  return NULL;
}

static int set_value(struct wr_fetch_limits *l, const struct key *k,
                     const char *value, wr_error_t *err) {
  uint64_t v;
  int r;

  if (value == NULL)
    return wr_error_set(err, 0, "%s needs a value", k->name);
  r = k->kind == SIZE ? wr_parse_size(value, &v, err)
                      : wr_parse_duration_ms(value, &v, err);
  if (r < 0)
    return wr_error_wrap(err, "%s", k->name);
  if (v < k->min) {
    char min[32];
    if (k->kind == SIZE)
      wr_format_size(k->min, min, sizeof(min));
    else
      snprintf(min, sizeof(min), "%llu s", (unsigned long long)k->min / 1000);
    return wr_error_set(err, 0, "%s is `%s`: it must be at least %s", k->name,
                        value, min);
  }
  *(uint64_t *)((char *)l + k->offset) = v;
  return 0;
}

int wr_fetch_limits_parse(const char *text, size_t len,
                          struct wr_fetch_limits *l, wr_error_t *err) {
  const char *p = text, *end = text + len;

  while (p < end) {
    const char *z = memchr(p, '\0', (size_t)(end - p));
    const char *nl;
    const struct key *k;
    _cleanup_free_ char *value = NULL;

    if (z == NULL)
      return wr_error_set(err, 0, "unexpected output from git config");
    nl = memchr(p, '\n', (size_t)(z - p));
    k = find_key(p, (size_t)((nl ? nl : z) - p));
    if (k != NULL) {
      if (nl != NULL)
        value = xstrndup(nl + 1, (size_t)(z - nl - 1));
      if (set_value(l, k, value, err) < 0)
        return -1;
      l->memory_set |=
          k->offset == offsetof(struct wr_fetch_limits, max_memory);
    }
    p = z + 1;
  }
  if (!l->memory_set)
    l->max_memory = WR_FETCH_MEMORY(l->max_object);
  return 0;
}

int wr_fetch_limits_read(struct wr_fetch_limits *l, wr_error_t *err) {
  char *argv[] = {"git", "config", "-z", "--get-regexp", "^warren\\.", NULL};
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  struct wr_cli_host_cmd cmd = {
      .argv = argv, .stdin_fd = -1, .out = &out, .max_out = 1u << 16};
  int status;

  wr_fetch_limits_default(l);
  if (wr_cli_host_run(&cmd, &status, err) < 0)
    return wr_error_wrap(err, "read warren's limits from git config");
  if (status != 0 && status != 1)
    return wr_error_set(
        err, 0, "git config failed (exit %d) reading warren's limits", status);
  if (wr_fetch_limits_parse(out.data ? out.data : "", out.len, l, err) < 0)
    return wr_error_wrap(err, "git config");
  return 0;
}
