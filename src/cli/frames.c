/*
 * The detach keys of `warren attach` (the frame codec itself is in the api
 * module, shared with the daemon).
 */
#include "cli/cli.h"

#define CTRL_P 0x10
#define CTRL_Q 0x11

/*
 * docker's detach keys: Ctrl-P alone is held back until the next byte
 * arrives (possibly in a later read), so that the pair is never forwarded
 * and a lone Ctrl-P still reaches the program.
 */
bool wr_cli_detach_feed(struct wr_cli_detach *d, const char *in, size_t len,
                        wr_buf_t *out) {
  const char ctrl_p = CTRL_P;

  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)in[i];
    if (d->pending) {
      if (c == CTRL_Q) {
        d->pending = false;
        return true;
      }
      wr_buf_append(out, &ctrl_p, 1);
      if (c == CTRL_P)
        continue;
      d->pending = false;
    } else if (c == CTRL_P) {
      d->pending = true;
      continue;
    }
    wr_buf_append(out, &in[i], 1);
  }
  return false;
}
