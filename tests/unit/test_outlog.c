/*
 * Unit tests for the format of kept output on disk (src/daemon/outlog.c):
 * records written are read back as they were, across segments; a torn
 * tail, a bad header or an offset that goes back ends what is taken, and
 * nothing after it is believed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "daemon/outlog.h"
#include "daemon/procs.h"

struct got {
  int n;
  int stream[8];
  uint64_t offset[8];
  char data[8][32];
};

static void collect(void *arg, int stream, uint64_t offset, const char *data,
                    size_t len) {
  struct got *g = arg;

  assert_true(g->n < 8 && len < 32);
  g->stream[g->n] = stream;
  g->offset[g->n] = offset;
  memcpy(g->data[g->n], data, len);
  g->data[g->n][len] = '\0';
  g->n++;
}

static void test_records_read_back(void **state) {
  struct got g = {0};
  uint64_t end = 0;
  wr_buf_t b;

  (void)state;
  wr_buf_init(&b);
  wr_outlog_put(&b, 1, 0, "first-line\n", 11);
  wr_outlog_put(&b, 2, 11, "second-line\n", 12);
  assert_int_equal(b.len, 2 * WR_OUTLOG_HDR + 23);
  assert_int_equal(wr_outlog_parse(b.data, b.len, &end, collect, &g), b.len);
  assert_int_equal(g.n, 2);
  assert_int_equal(g.stream[0], 1);
  assert_string_equal(g.data[0], "first-line\n");
  assert_int_equal(g.stream[1], 2);
  assert_int_equal(g.offset[1], 11);
  assert_string_equal(g.data[1], "second-line\n");
  assert_int_equal(end, 23);
  wr_buf_free(&b);
}

/* A write cut short by a kill leaves a torn record: what precedes it is
 * taken, it is not. */
static void test_torn_tail_is_left_out(void **state) {
  struct got g = {0};
  uint64_t end = 0;
  wr_buf_t b;

  (void)state;
  wr_buf_init(&b);
  wr_outlog_put(&b, 1, 0, "kept", 4);
  wr_outlog_put(&b, 1, 4, "torn", 4);
  assert_int_equal(wr_outlog_parse(b.data, b.len - 1, &end, collect, &g),
                   WR_OUTLOG_HDR + 4);
  assert_int_equal(g.n, 1);
  assert_int_equal(end, 4);
  /* A header alone, or a part of one. */
  g.n = 0;
  end = 0;
  assert_int_equal(
      wr_outlog_parse(b.data, WR_OUTLOG_HDR + 4 + 7, &end, collect, &g),
      WR_OUTLOG_HDR + 4);
  assert_int_equal(g.n, 1);
  wr_buf_free(&b);
}

/* Offsets only grow: a record older than what came before (a stale
 * segment read after a newer one) ends the segment. A gap is fine. */
static void test_offsets_never_go_back(void **state) {
  struct got g = {0};
  uint64_t end = 100;
  wr_buf_t b;

  (void)state;
  wr_buf_init(&b);
  wr_outlog_put(&b, 1, 100, "a", 1);
  wr_outlog_put(&b, 1, 500, "b", 1); /* a gap: output not written */
  wr_outlog_put(&b, 2, 400, "c", 1);
  assert_int_equal(wr_outlog_parse(b.data, b.len, &end, collect, &g),
                   2 * (WR_OUTLOG_HDR + 1));
  assert_int_equal(g.n, 2);
  assert_int_equal(end, 501);
  g.n = 0;
  end = 200;
  assert_int_equal(wr_outlog_parse(b.data, b.len, &end, collect, &g), 0);
  assert_int_equal(g.n, 0);
  wr_buf_free(&b);
}

static void test_bad_headers_are_refused(void **state) {
  static const uint8_t zero[WR_OUTLOG_HDR + 1];
  struct got g = {0};
  uint64_t end = 0;
  wr_buf_t b;

  (void)state;
  wr_buf_init(&b);
  wr_outlog_put(&b, 3, 0, "x", 1); /* no such stream */
  assert_int_equal(wr_outlog_parse(b.data, b.len, &end, collect, &g), 0);
  wr_buf_reset(&b);
  wr_outlog_put(&b, 1, UINT64_MAX, "x", 1); /* the offset would wrap */
  assert_int_equal(wr_outlog_parse(b.data, b.len, &end, collect, &g), 0);
  wr_buf_reset(&b);
  wr_outlog_put(&b, 1, 0, "x", 1);
  ((uint8_t *)b.data)[0] = 'W'; /* not the magic */
  assert_int_equal(wr_outlog_parse(b.data, b.len, &end, collect, &g), 0);
  assert_int_equal(wr_outlog_parse(zero, sizeof(zero), &end, collect, &g), 0);
  assert_int_equal(g.n, 0);
  wr_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_records_read_back),
      cmocka_unit_test(test_torn_tail_is_left_out),
      cmocka_unit_test(test_offsets_never_go_back),
      cmocka_unit_test(test_bad_headers_are_refused),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
