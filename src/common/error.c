/* Error values: a code and a message built where the failure happened. */
#include "common.h"

/* A message cut at the buffer's end must not end inside a UTF-8 sequence:
 * messages go into JSON replies. */
static void trim_utf8_tail(char *s) {
  size_t len = strlen(s), i = len, need;
  unsigned char c;

  while (i > 0 && len - i < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
    i--;
  if (i == 0)
    return;
  c = (unsigned char)s[i - 1];
  need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (len - (i - 1) < need)
    s[i - 1] = '\0';
}

int wr_error_set(wr_error_t *err, int code, const char *fmt, ...) {
  va_list ap;
  int n;

  if (err == NULL)
    return -1;
  err->code = code;
  va_start(ap, fmt);
  n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
  va_end(ap);
  if (n < 0)
    err->msg[0] = '\0';
  if (code != 0) {
    size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof(err->msg) - len, ": %s", strerror(code));
  }
  trim_utf8_tail(err->msg);
  return -1;
}

int wr_error_setx(wr_error_t *err, int code, const char *fmt, ...) {
  va_list ap;

  if (err == NULL)
    return -1;
  err->code = code;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
  va_end(ap);
  trim_utf8_tail(err->msg);
  return -1;
}

int wr_error_wrap(wr_error_t *err, const char *fmt, ...) {
  char prefix[256];
  size_t plen, mlen, room;
  va_list ap;
  int n;

  if (err == NULL)
    return -1;
  va_start(ap, fmt);
  n = vsnprintf(prefix, sizeof(prefix) - 2, fmt, ap);
  va_end(ap);
  if (n < 0)
    return -1;
  plen = strlen(prefix);
  memcpy(prefix + plen, ": ", 2);
  plen += 2;
  mlen = strlen(err->msg);
  room = sizeof(err->msg) - 1;
  if (plen > room)
    plen = room;
  if (mlen > room - plen)
    mlen = room - plen;
  memmove(err->msg + plen, err->msg, mlen);
  memcpy(err->msg, prefix, plen);
  err->msg[plen + mlen] = '\0';
  trim_utf8_tail(err->msg);
  return -1;
}

void wr_error_clear(wr_error_t *err) {
  if (err == NULL)
    return;
  err->code = 0;
  err->msg[0] = '\0';
}
