/*
 * Warm pools' pure parts: the wait between fills that fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "daemon/pool.h"

/* No wait before any failure; then 1 s, doubling, never over a minute,
 * however many failures (no overflow on a pool that fails for days). */
static void test_backoff_grows_and_stops(void **state) {
  (void)state;
  assert_int_equal(wr_pool_backoff_ms(0), 0);
  assert_int_equal(wr_pool_backoff_ms(1), 1000);
  assert_int_equal(wr_pool_backoff_ms(2), 2000);
  assert_int_equal(wr_pool_backoff_ms(3), 4000);
  assert_int_equal(wr_pool_backoff_ms(6), 32000);
  assert_int_equal(wr_pool_backoff_ms(7), 60000);
  assert_int_equal(wr_pool_backoff_ms(100), 60000);
  assert_int_equal(wr_pool_backoff_ms(4000000000u), 60000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backoff_grows_and_stops),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
