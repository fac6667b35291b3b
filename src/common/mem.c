/* Allocation that aborts on failure, and the cleanup helpers. */
#include "common.h"

static void *check(void *p) {
  if (p == NULL) {
    fputs("out of memory\n", stderr);
    abort();
  }
  return p;
}

void *xmalloc(size_t n) {
  return check(malloc(n ? n : 1));
}

void *xcalloc(size_t n, size_t m) {
  return check(calloc(n ? n : 1, m ? m : 1));
}

void *xrealloc(void *p, size_t n) {
  return check(realloc(p, n ? n : 1));
}

char *xstrdup(const char *s) {
  return check(strdup(s));
}

char *xstrndup(const char *s, size_t n) {
  return check(strndup(s, n));
}

void *xmemdup(const void *p, size_t n) {
  void *r = xmalloc(n);
  memcpy(r, p, n);
  return r;
}

char *xasprintf(const char *fmt, ...) {
  va_list ap;
  char *s = NULL;
  int n;

  va_start(ap, fmt);
  n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0)
    check(NULL);
  return s;
}

void wr_freep(void *p) {
  free(*(void **)p);
}

void wr_closep(int *fd) {
  if (*fd >= 0) {
    int saved = errno;
    close(*fd);
    errno = saved;
    *fd = -1; /* a second call must not close a reused number */
  }
}

void wr_fclosep(FILE **f) {
  if (*f != NULL)
    fclose(*f);
}

void wr_strvfreep(char ***v) {
  wr_strv_free(*v);
}
