/*
 * Fuzz the Server-Sent Events decoder (src/api/sse.c), which `warren
 * events --follow` runs on whatever answers on the daemon's socket. The
 * first input byte chooses where the rest is cut into two feeds, so that
 * state carried across feeds is exercised.
 *
 * Besides "no crash, no overread": no event's data exceeds the bound, the
 * data is NUL-terminated at its length, and an event's data re-encoded and
 * decoded again gives back the same data and name.
 */
#include "api/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SSE_MAX 4096

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_sse: %s\n", what);
    abort();
  }
}

struct again {
  const char *event, *data;
  int n;
};

static int same(void *arg, const struct wr_sse_event *ev, wr_error_t *err) {
  struct again *a = arg;

  (void)err;
  check(strcmp(ev->event, a->event) == 0, "event name changed");
  check(strcmp(ev->data, a->data) == 0, "data changed");
  a->n++;
  return 0;
}

static int on_event(void *arg, const struct wr_sse_event *ev, wr_error_t *err) {
  struct wr_sse_decoder d2;
  struct again a = {ev->event, ev->data, 0};
  wr_buf_t b = {0};
  wr_error_t e2;

  (void)arg;
  (void)err;
  check(ev->data_len <= SSE_MAX, "data over the bound");
  check(ev->data[ev->data_len] == '\0', "data not terminated");
  check(strlen(ev->data) <= ev->data_len, "data length");
  /* Names and data without CR, LF or NUL survive a round trip. */
  if (strpbrk(ev->event, "\r\n") != NULL || strlen(ev->data) != ev->data_len ||
      strchr(ev->data, '\r') != NULL)
    return 0;
  wr_sse_encode(&b, 0, ev->event, ev->data);
  wr_sse_decoder_init(&d2, SSE_MAX + 64);
  check(wr_sse_feed(&d2, b.data, b.len, same, &a, &e2) == 0, "re-decode");
  check(a.n == 1, "re-decoded event count");
  wr_sse_decoder_free(&d2);
  wr_buf_free(&b);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct wr_sse_decoder d;
  size_t cut;
  wr_error_t err;

  if (size == 0)
    return 0;
  cut = size > 1 ? data[0] % size : 0;
  data++;
  size--;
  if (cut > size)
    cut = size;
  wr_sse_decoder_init(&d, SSE_MAX);
  if (wr_sse_feed(&d, (const char *)data, cut, on_event, NULL, &err) == 0)
    wr_sse_feed(&d, (const char *)data + cut, size - cut, on_event, NULL, &err);
  wr_sse_decoder_free(&d);
  return 0;
}
