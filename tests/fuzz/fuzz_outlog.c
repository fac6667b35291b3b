/*
 * Fuzz the reader of kept-output segments (src/daemon/outlog.c) with any
 * bytes, as a segment left by a killed daemon (or damaged on disk) could
 * hold. The first 8 input bytes are the offset the previous segment
 * ended at.
 *
 * Besides "no crash, no overread": every record taken lies inside the
 * input, its offset never goes back, and writing the records taken again
 * gives back exactly the bytes taken, so the reader accepts only what the
 * writer makes.
 */
#include "daemon/outlog.h"
#include "daemon/procs.h"

struct seen {
  const uint8_t *buf;
  size_t len;
  uint64_t last_end;
  wr_buf_t again;
};

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_outlog: %s\n", what);
    abort();
  }
}

static void on_record(void *arg, int stream, uint64_t offset, const char *data,
                      size_t len) {
  struct seen *s = arg;
  const uint8_t *p = (const uint8_t *)data;

  check(stream == 1 || stream == 2, "stream");
  check(len > 0, "empty record");
  check(p >= s->buf && p + len <= s->buf + s->len, "record outside input");
  check(offset >= s->last_end, "offset went back");
  s->last_end = offset + len;
  wr_outlog_put(&s->again, stream, offset, data, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct seen s = {.buf = data + 8, .len = size >= 8 ? size - 8 : 0};
  uint64_t end = 0;
  size_t taken;

  if (size < 8)
    return 0;
  for (int i = 0; i < 8; i++)
    end = (end << 8) | data[i];
  s.last_end = end;
  wr_buf_init(&s.again);
  taken = wr_outlog_parse(s.buf, s.len, &end, on_record, &s);
  check(taken <= s.len, "took more than given");
  check(s.again.len == taken, "re-encoding differs in length");
  check(taken == 0 || memcmp(s.again.data, s.buf, taken) == 0,
        "re-encoding differs");
  check(taken == 0 || end == s.last_end, "end is not the last record's");
  wr_buf_free(&s.again);
  return 0;
}
