/*
 * Unit tests for lifecycle events (src/daemon/events.c) and the SSE format
 * (src/api/sse.c): the ring keeps the newest events in id order and says
 * which one left; lookups by id find the first newer one; filters match
 * by sandbox id or name and by type, and refuse bad type lists; the
 * encoder writes what the decoder reads back, whatever the line endings,
 * and the decoder refuses oversized lines and ids that are not numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "daemon/events.h"

static struct wr_event make(uint64_t id, const char *type, const char *sb) {
  struct wr_event e = {0};

  e.id = id;
  e.time_ms = (int64_t)id * 10;
  e.type = xstrdup(type);
  e.sandbox_id = sb ? xasprintf("sb-%s", sb) : NULL;
  e.sandbox_name = sb ? xstrdup(sb) : NULL;
  e.json = xasprintf("{\"id\":%llu}", (unsigned long long)id);
  return e;
}

static void test_ring_keeps_newest(void **state) {
  struct wr_event_ring r;
  uint64_t evicted = 99;

  (void)state;
  wr_event_ring_init(&r, 4);
  for (uint64_t id = 1; id <= 4; id++) {
    struct wr_event e = make(id * 2, "started", "web");
    wr_event_ring_push(&r, &e, &evicted);
    assert_int_equal(evicted, 0);
    assert_null(e.type); /* taken */
  }
  for (uint64_t id = 5; id <= 7; id++) {
    struct wr_event e = make(id * 2, "stopped", "web");
    wr_event_ring_push(&r, &e, &evicted);
    assert_int_equal(evicted, (id - 4) * 2);
  }
  assert_int_equal(r.len, 4);
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(wr_event_ring_at(&r, i)->id, 8 + 2 * i);
  assert_string_equal(wr_event_ring_at(&r, 3)->type, "stopped");
  wr_event_ring_free(&r);
}

static void test_ring_after(void **state) {
  struct wr_event_ring r;

  (void)state;
  wr_event_ring_init(&r, 8);
  assert_int_equal(wr_event_ring_after(&r, 0), 0);
  for (uint64_t id = 1; id <= 12; id++) {
    struct wr_event e = make(id * 10, "paused", NULL);
    wr_event_ring_push(&r, &e, NULL);
  }
  /* Held: 50..120. */
  assert_int_equal(wr_event_ring_after(&r, 0), 0);
  assert_int_equal(wr_event_ring_after(&r, 49), 0);
  assert_int_equal(wr_event_ring_after(&r, 50), 1);
  assert_int_equal(wr_event_ring_after(&r, 55), 1);
  assert_int_equal(wr_event_ring_after(&r, 119), 7);
  assert_int_equal(wr_event_ring_after(&r, 120), 8);
  assert_int_equal(wr_event_ring_after(&r, 1000), 8);
  wr_event_ring_free(&r);
}

static void test_filters(void **state) {
  struct wr_event a = make(1, "created", "web");
  struct wr_event b = make(2, "paused", "db");
  struct wr_event c = make(3, "snapshot-progress", NULL);
  struct wr_event_filter f = {0};
  wr_error_t err;

  (void)state;
  assert_true(wr_event_filter_match(&f, &a));
  assert_true(wr_event_filter_match(&f, &c));
  f.sandbox = xstrdup("web");
  assert_true(wr_event_filter_match(&f, &a));
  assert_false(wr_event_filter_match(&f, &b));
  assert_false(wr_event_filter_match(&f, &c));
  free(f.sandbox);
  f.sandbox = xstrdup("sb-db");
  assert_true(wr_event_filter_match(&f, &b));
  free(f.sandbox);
  f.sandbox = NULL;
  assert_int_equal(
      wr_event_filter_types("paused,snapshot-progress", &f.types, &err), 0);
  assert_false(wr_event_filter_match(&f, &a));
  assert_true(wr_event_filter_match(&f, &b));
  assert_true(wr_event_filter_match(&f, &c));
  wr_event_filter_clear(&f);
  free(a.type), free(a.sandbox_id), free(a.sandbox_name), free(a.json);
  free(b.type), free(b.sandbox_id), free(b.sandbox_name), free(b.json);
  free(c.type), free(c.json);
}

static void test_bad_type_lists(void **state) {
  static const char *const bad[] = {"",
                                    ",",
                                    "paused,",
                                    "Paused",
                                    "a b",
                                    "x;y",
                                    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  char **types = NULL;
  wr_error_t err;
  _cleanup_(wr_buf_free) wr_buf_t many = {0};

  (void)state;
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    assert_int_equal(wr_event_filter_types(bad[i], &types, &err), -1);
    assert_null(types);
    assert_int_equal(err.code, EINVAL);
  }
  for (int i = 0; i < 33; i++)
    wr_buf_printf(&many, "%st%d", i ? "," : "", i);
  assert_int_equal(wr_event_filter_types(many.data, &types, &err), -1);
  assert_non_null(strstr(err.msg, "at most 32"));
}

struct seen {
  int n;
  uint64_t id[8];
  char event[8][32];
  char data[8][64];
};

static int collect(void *arg, const struct wr_sse_event *ev, wr_error_t *err) {
  struct seen *s = arg;

  (void)err;
  assert_true(s->n < 8);
  s->id[s->n] = ev->has_id ? ev->id : 0;
  snprintf(s->event[s->n], 32, "%s", ev->event);
  snprintf(s->data[s->n], 64, "%s", ev->data);
  s->n++;
  return 0;
}

static void test_sse_round_trip(void **state) {
  _cleanup_(wr_buf_free) wr_buf_t b = {0};
  struct wr_event e = make(42, "stopped", "web");
  struct wr_sse_decoder d;
  struct seen s = {0};
  wr_error_t err;

  (void)state;
  wr_event_sse(&b, &e);
  assert_string_equal(b.data, "id: 42\nevent: stopped\ndata: {\"id\":42}\n\n");
  wr_sse_comment(&b, "keep-alive");
  wr_sse_encode(&b, 0, "cutoff", "line one\nline two\r\nthree");
  wr_sse_decoder_init(&d, 1024);
  /* Byte by byte: nothing depends on how the stream is cut. */
  for (size_t i = 0; i < b.len; i++)
    assert_int_equal(wr_sse_feed(&d, b.data + i, 1, collect, &s, &err), 0);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.id[0], 42);
  assert_string_equal(s.event[0], "stopped");
  assert_string_equal(s.data[0], "{\"id\":42}");
  assert_int_equal(s.id[1], 42); /* the last id persists */
  assert_string_equal(s.event[1], "cutoff");
  assert_string_equal(s.data[1], "line one\nline two\nthree");
  wr_sse_decoder_free(&d);
  free(e.type), free(e.sandbox_id), free(e.sandbox_name), free(e.json);
}

static void test_sse_line_endings(void **state) {
  static const char in[] = "id:7\r\nevent:x\rdata:a\r\ndata\r\n\r"
                           ": comment\n\ndata: no name\n\n"
                           "event: nodata\n\n";
  struct wr_sse_decoder d;
  struct seen s = {0};
  wr_error_t err;

  (void)state;
  wr_sse_decoder_init(&d, 1024);
  assert_int_equal(wr_sse_feed(&d, in, sizeof(in) - 1, collect, &s, &err), 0);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.id[0], 7);
  assert_string_equal(s.event[0], "x");
  assert_string_equal(s.data[0], "a\n");
  assert_string_equal(s.event[1], "message");
  assert_string_equal(s.data[1], "no name");
  wr_sse_decoder_free(&d);
}

static void test_sse_refusals(void **state) {
  struct wr_sse_decoder d;
  struct seen s = {0};
  char big[100];
  wr_error_t err;

  (void)state;
  wr_sse_decoder_init(&d, 64);
  assert_int_equal(wr_sse_feed(&d, "id: 12a\n", 8, collect, &s, &err), -1);
  assert_int_equal(err.code, EPROTO);
  wr_sse_decoder_free(&d);
  wr_sse_decoder_init(&d, 64);
  assert_int_equal(
      wr_sse_feed(&d, "id: 123456789012345678901\n", 26, collect, &s, &err),
      -1);
  wr_sse_decoder_free(&d);
  wr_sse_decoder_init(&d, 64);
  memset(big, 'a', sizeof(big));
  assert_int_equal(wr_sse_feed(&d, big, sizeof(big), collect, &s, &err), -1);
  assert_int_equal(err.code, E2BIG);
  wr_sse_decoder_free(&d);
  /* Many short data lines add up to one event's data. */
  wr_sse_decoder_init(&d, 64);
  for (int i = 0; i < 20; i++) {
    int rc = wr_sse_feed(&d, "data: abcd\n", 11, collect, &s, &err);
    if (rc < 0) {
      assert_int_equal(err.code, E2BIG);
      break;
    }
    assert_true(i < 15);
  }
  wr_sse_decoder_free(&d);
  assert_int_equal(s.n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_keeps_newest),
      cmocka_unit_test(test_ring_after),
      cmocka_unit_test(test_filters),
      cmocka_unit_test(test_bad_type_lists),
      cmocka_unit_test(test_sse_round_trip),
      cmocka_unit_test(test_sse_line_endings),
      cmocka_unit_test(test_sse_refusals),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
