/*
 * The detach keys of `warren attach` (the frame codec itself is in the api
 * module, shared with the daemon).
 */
#include "cli/cli.h"

#include <strings.h>

#define CTRL_P 0x10
#define CTRL_Q 0x11

/*
 * docker's detach keys: a byte that may start the sequence is held back
 * until the next ones arrive (possibly in a later read), so that the
 * sequence is never forwarded and a lone Ctrl-P still reaches the program.
 * On a mismatch the held bytes that can no longer start the sequence are
 * forwarded and the rest is matched again (Ctrl-P Ctrl-P Ctrl-Q forwards
 * one Ctrl-P and detaches).
 */
bool wr_cli_detach_feed(struct wr_cli_detach *d, const char *in, size_t len,
                        wr_buf_t *out) {
  static const char def[] = {CTRL_P, CTRL_Q};
  const char *keys = d->nkeys > 0 ? d->keys : def;
  size_t n = d->nkeys > 0 ? d->nkeys : sizeof(def);

  for (size_t i = 0; i < len; i++) {
    for (;;) {
      size_t m = d->matched, k;
      if (in[i] == keys[m]) {
        if (++d->matched < n)
          break;
        d->matched = 0;
        return true;
      }
      if (m == 0) {
        wr_buf_append(out, &in[i], 1);
        break;
      }
      /* The longest held suffix that still starts the sequence. */
      for (k = m - 1; k > 0 && memcmp(keys + m - k, keys, k) != 0; k--)
        ;
      wr_buf_append(out, keys, m - k);
      d->matched = k;
    }
  }
  return false;
}

/* One key: a printable character, or ctrl-X. */
static int parse_key(const char *s, size_t len, char *out, wr_error_t *err) {
  if (len == 1 && s[0] > 0x20 && s[0] < 0x7f) {
    *out = s[0];
    return 0;
  }
  if (len == 6 && strncasecmp(s, "ctrl-", 5) == 0) {
    char c = s[5];
    if (c >= 'a' && c <= 'z')
      c = (char)(c - 'a' + 'A');
    if ((c >= 'A' && c <= 'Z') || strchr("@[\\]^_", c) != NULL) {
      *out = (char)(c & 0x1f);
      return 0;
    }
  }
  return wr_error_setx(err, EINVAL,
                       "invalid detach key `%.*s` (a character, or ctrl-X "
                       "with X one of a-z @ [ \\ ] ^ _)",
                       (int)WR_MIN(len, 32), s);
}

int wr_cli_parse_detach_keys(const char *spec, struct wr_cli_detach *out,
                             wr_error_t *err) {
  const char *p = spec;

  memset(out, 0, sizeof(*out));
  for (;;) {
    size_t len = strcspn(p, ",");
    if (out->nkeys == WR_CLI_DETACH_MAX)
      return wr_error_setx(err, EINVAL, "at most %d detach keys",
                           WR_CLI_DETACH_MAX);
    if (parse_key(p, len, &out->keys[out->nkeys], err) < 0)
      return -1;
    out->nkeys++;
    if (p[len] == '\0')
      return 0;
    p += len + 1;
  }
}
