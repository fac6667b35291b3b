/*
 * Unit tests for the limiter's decision (src/daemon/limiter.c), the pure
 * part: from the counts and the candidates, grant a request, make room
 * for it (pause for max-running, stop for max-resident, the lowest rank
 * and then the least recently active first, never a busy one), or make
 * it wait.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "daemon/limiter.h"

static struct wr_limit_counts counts(unsigned running, unsigned resident,
                                     unsigned max_running,
                                     unsigned max_resident) {
  return (struct wr_limit_counts){running, resident, max_running, max_resident};
}

/* No limits, or room under them: granted, whatever runs. */
static void test_grant(void **state) {
  struct wr_limit_counts c = counts(50, 80, 0, 0);
  size_t v = 99;

  (void)state;
  assert_int_equal(wr_limit_decide(&c, true, NULL, 0, &v), WR_LIMIT_GRANT);
  c = counts(1, 2, 2, 3);
  assert_int_equal(wr_limit_decide(&c, true, NULL, 0, &v), WR_LIMIT_GRANT);
  /* A wake needs no resident slot: it is resident already. */
  c = counts(1, 3, 2, 3);
  assert_int_equal(wr_limit_decide(&c, false, NULL, 0, &v), WR_LIMIT_GRANT);
  assert_int_equal(v, 99);
}

/* max-running full: the least recently active idle running one pauses;
 * busy and paused ones are not candidates for it. */
static void test_pause_least_recent_idle(void **state) {
  const struct wr_limit_cand cands[] = {
      {.running = true, .rank = 1, .active_ms = 300},
      {.running = true, .busy = true, .rank = 1, .active_ms = 100},
      {.running = false, .rank = 1, .active_ms = 50},
      {.running = true, .rank = 1, .active_ms = 200},
  };
  struct wr_limit_counts c = counts(3, 4, 3, 0);
  size_t v = 99;

  (void)state;
  assert_int_equal(wr_limit_decide(&c, true, cands, 4, &v), WR_LIMIT_PAUSE);
  assert_int_equal(v, 3);
}

/* The rank goes first: a pool's spare (0) before an older sandbox (1). */
static void test_rank_first(void **state) {
  const struct wr_limit_cand cands[] = {
      {.running = true, .rank = 1, .active_ms = 10},
      {.running = true, .rank = 0, .active_ms = 999},
  };
  struct wr_limit_counts c = counts(2, 2, 2, 0);
  size_t v = 99;

  (void)state;
  assert_int_equal(wr_limit_decide(&c, true, cands, 2, &v), WR_LIMIT_PAUSE);
  assert_int_equal(v, 1);
}

/* max-resident full: the least recent paused one stops; with none, an
 * idle running one stops (both slots free at once). */
static void test_stop_for_resident(void **state) {
  const struct wr_limit_cand cands[] = {
      {.running = true, .rank = 1, .active_ms = 1},
      {.running = false, .rank = 1, .active_ms = 40},
      {.running = false, .rank = 1, .active_ms = 30},
  };
  struct wr_limit_counts c = counts(1, 3, 2, 3);
  size_t v = 99;

  (void)state;
  assert_int_equal(wr_limit_decide(&c, true, cands, 3, &v), WR_LIMIT_STOP);
  assert_int_equal(v, 2);
  assert_int_equal(wr_limit_decide(&c, true, cands, 1, &v), WR_LIMIT_STOP);
  assert_int_equal(v, 0);
  /* Both full: the resident slot first (a stop), a pause the next round. */
  c = counts(2, 3, 2, 3);
  assert_int_equal(wr_limit_decide(&c, true, cands, 3, &v), WR_LIMIT_STOP);
  assert_int_equal(v, 2);
}

/* Everyone busy, or no one at all: wait. */
static void test_wait(void **state) {
  const struct wr_limit_cand cands[] = {
      {.running = true, .busy = true, .rank = 0, .active_ms = 1},
      {.running = true, .busy = true, .rank = 1, .active_ms = 2},
  };
  struct wr_limit_counts c = counts(2, 2, 2, 0);
  size_t v = 99;

  (void)state;
  assert_int_equal(wr_limit_decide(&c, true, cands, 2, &v), WR_LIMIT_WAIT);
  assert_int_equal(wr_limit_decide(&c, false, NULL, 0, &v), WR_LIMIT_WAIT);
  /* Reserved slots count: 0 running but 2 granted is full. */
  c = counts(2, 2, 2, 2);
  assert_int_equal(wr_limit_decide(&c, true, NULL, 0, &v), WR_LIMIT_WAIT);
  assert_int_equal(v, 99);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grant),
      cmocka_unit_test(test_pause_least_recent_idle),
      cmocka_unit_test(test_rank_first),
      cmocka_unit_test(test_stop_for_resident),
      cmocka_unit_test(test_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
