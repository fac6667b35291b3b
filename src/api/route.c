/*
 * Routing: a pattern is a path whose segments are either literal or
 * "{name}", which matches exactly one non-empty segment of the decoded
 * path. The path is decoded before it is split, so an encoded "%2F" is a
 * separator and a parameter can never contain '/'.
 */
#include "api/api_internal.h"

#include <strings.h>

/* Next segment of a path after a '/': [*seg, *seg + *len). Returns false at
 * the end. */
static bool next_segment(const char **p, const char **seg, size_t *len) {
  const char *slash;

  if (**p != '/')
    return false;
  *seg = *p + 1;
  slash = strchr(*seg, '/');
  *len = slash ? (size_t)(slash - *seg) : strlen(*seg);
  *p = *seg + *len;
  return true;
}

static bool is_param(const char *seg, size_t len) {
  return len > 2 && seg[0] == '{' && seg[len - 1] == '}';
}

/* Match path against pattern; on success params holds the {name} values
 * (it is left with partial entries on failure, so callers pass a scratch
 * list). */
static bool match(const char *pattern, const char *path,
                  struct wr_http_kv_list *params) {
  const char *pseg, *sseg;
  size_t plen, slen;

  for (;;) {
    bool more_p = next_segment(&pattern, &pseg, &plen);
    bool more_s = next_segment(&path, &sseg, &slen);
    if (!more_p || !more_s)
      return !more_p && !more_s && *pattern == '\0' && *path == '\0';
    if (is_param(pseg, plen)) {
      if (slen == 0)
        return false;
      wr_api_kv_add(params, pseg + 1, plen - 2, sseg, slen);
    } else if (plen != slen || memcmp(pseg, sseg, plen) != 0) {
      return false;
    }
  }
}

static void allow_add(wr_buf_t *allow, const char *method) {
  size_t mlen = strlen(method);

  for (const char *p = allow->data; p != NULL && *p != '\0';) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == mlen && memcmp(p, method, mlen) == 0)
      return;
    p = end ? end + 2 : p + len;
  }
  if (allow->len > 0)
    wr_buf_puts(allow, ", ");
  wr_buf_puts(allow, method);
}

/*
 * The first route whose pattern and method match wins. When only the
 * pattern matches, the caller answers 405 and lists the methods that would
 * have worked, as RFC 9110 asks.
 */
int wr_api_route_find(const struct wr_http_route *routes, size_t n,
                      const char *method, const char *path,
                      const struct wr_http_route **out,
                      struct wr_http_kv_list *params, wr_buf_t *allow) {
  for (size_t i = 0; i < n; i++) {
    struct wr_http_kv_list scratch = {0};
    bool ok = match(routes[i].pattern, path, &scratch);
    if (ok && strcmp(routes[i].method, method) == 0) {
      wr_api_kv_free(params);
      *params = scratch;
      *out = &routes[i];
      return 0;
    }
    wr_api_kv_free(&scratch);
    if (ok)
      allow_add(allow, routes[i].method);
  }
  return allow->len > 0 ? 405 : 404;
}
