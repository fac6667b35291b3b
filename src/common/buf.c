/* Growable byte buffers and bounded rings. */
#include "common.h"

void wr_buf_init(wr_buf_t *b) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

void wr_buf_free(wr_buf_t *b) {
  free(b->data);
  wr_buf_init(b);
}

void wr_buf_reset(wr_buf_t *b) {
  b->len = 0;
  if (b->data != NULL)
    b->data[0] = '\0';
}

void wr_buf_reserve(wr_buf_t *b, size_t extra) {
  size_t need = b->len + extra + 1;
  size_t cap;

  if (need <= b->cap)
    return;
  cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap *= 2;
  b->data = xrealloc(b->data, cap);
  b->cap = cap;
}

void wr_buf_append(wr_buf_t *b, const void *data, size_t len) {
  wr_buf_reserve(b, len);
  if (len > 0)
    memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
}

void wr_buf_puts(wr_buf_t *b, const char *s) {
  wr_buf_append(b, s, strlen(s));
}

void wr_buf_printf(wr_buf_t *b, const char *fmt, ...) {
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  wr_buf_reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void wr_buf_consume(wr_buf_t *b, size_t n) {
  if (n >= b->len) {
    wr_buf_reset(b);
    return;
  }
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
  b->data[b->len] = '\0';
}

char *wr_buf_steal(wr_buf_t *b, size_t *len) {
  char *d;

  if (b->data == NULL) {
    wr_buf_reserve(b, 0);
    b->data[0] = '\0';
  }
  d = b->data;
  if (len != NULL)
    *len = b->len;
  wr_buf_init(b);
  return d;
}

void wr_ring_init(wr_ring_t *r, size_t cap) {
  r->data = xmalloc(cap);
  r->cap = cap;
  r->start = 0;
  r->len = 0;
  r->total = 0;
}

void wr_ring_free(wr_ring_t *r) {
  free(r->data);
  r->data = NULL;
  r->cap = r->len = r->start = 0;
}

void wr_ring_write(wr_ring_t *r, const void *data, size_t len) {
  const char *p = data;

  r->total += len;
  if (len >= r->cap) {
    memcpy(r->data, p + len - r->cap, r->cap);
    r->start = 0;
    r->len = r->cap;
    return;
  }
  for (size_t done = 0; done < len;) {
    size_t end = (r->start + r->len) % r->cap;
    size_t room = r->cap - end;
    size_t n = WR_MIN(room, len - done);
    memcpy(r->data + end, p + done, n);
    done += n;
    r->len += n;
    if (r->len > r->cap) {
      r->start = (r->start + (r->len - r->cap)) % r->cap;
      r->len = r->cap;
    }
  }
}

size_t wr_ring_read(const wr_ring_t *r, uint64_t from, void *out, size_t max,
                    uint64_t *next) {
  uint64_t oldest = r->total - r->len;
  size_t skip, n, copied = 0;
  char *o = out;

  if (from < oldest)
    from = oldest;
  if (from >= r->total) {
    *next = r->total;
    return 0;
  }
  skip = (size_t)(from - oldest);
  n = WR_MIN(max, r->len - skip);
  while (copied < n) {
    size_t idx = (r->start + skip + copied) % r->cap;
    size_t chunk = WR_MIN(n - copied, r->cap - idx);
    memcpy(o + copied, r->data + idx, chunk);
    copied += chunk;
  }
  *next = from + n;
  return n;
}

size_t wr_strv_len(char *const *v) {
  size_t n = 0;

  while (v != NULL && v[n] != NULL)
    n++;
  return n;
}

size_t wr_strv_bytes(char *const *v) {
  size_t n = 0;

  for (size_t i = 0; v != NULL && v[i] != NULL; i++)
    n += strlen(v[i]) + 1;
  return n;
}

void wr_strv_free(char **v) {
  if (v == NULL)
    return;
  for (size_t i = 0; v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

char **wr_strv_dup(char *const *v) {
  size_t n = wr_strv_len(v);
  char **r = xcalloc(n + 1, sizeof(char *));

  for (size_t i = 0; i < n; i++)
    r[i] = xstrdup(v[i]);
  return r;
}

char **wr_strv_push(char **v, const char *s) {
  size_t n = wr_strv_len(v);

  v = xrealloc(v, (n + 2) * sizeof(char *));
  v[n] = xstrdup(s);
  v[n + 1] = NULL;
  return v;
}

char **wr_strv_setenv(char **env, const char *kv) {
  const char *eq = strchr(kv, '=');
  size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);

  for (size_t k = 0; env != NULL && env[k] != NULL; k++) {
    if (strncmp(env[k], kv, klen) == 0 && env[k][klen] == '=') {
      free(env[k]);
      env[k] = xstrdup(kv);
      return env;
    }
  }
  return wr_strv_push(env, kv);
}
