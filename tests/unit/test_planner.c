/*
 * Unit tests for the tier planner (src/projects/planner.c): the source
 * document's nine projects give exactly its three demotions, oldest first,
 * and p-09 cold; memory short of the reserve demotes further warm
 * projects, counting what each frees; hot and busy projects never move;
 * settings at their edges (no slots, more free than slots) stay sane.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "common/common.h"
#include "projects/planner.h"

/* 2026-10-05T12:00:00Z, the seed's "now". */
#define NOW_MS 1791201600000LL
#define AGO(days) (NOW_MS - (int64_t)((days) * (double)WR_DAY_MS))
#define GIB (1024ULL * 1024 * 1024)

static struct wr_plan_project seed[] = {
    {"p-01", WR_TIER_HOT, AGO(0), GIB, false},
    {"p-02", WR_TIER_WARM, AGO(0.2), GIB, false},
    {"p-03", WR_TIER_WARM, AGO(1), GIB, false},
    {"p-04", WR_TIER_WARM, AGO(3), GIB, false},
    {"p-05", WR_TIER_WARM, AGO(6), GIB, false},
    {"p-06", WR_TIER_WARM, AGO(9), GIB, false},
    {"p-07", WR_TIER_WARM, AGO(12), GIB, false},
    {"p-08", WR_TIER_COOL, AGO(20), 0, false},
    {"p-09", WR_TIER_COOL, AGO(31), 0, false},
};
#define NSEED (sizeof seed / sizeof *seed)

static const struct wr_plan_settings seed_settings = {
    .slots = 6, .free = 2, .snapshot_days = 30};

static void assert_steps(const struct wr_plan_project *p,
                         const struct wr_plan_step *steps, size_t n,
                         const char *const *want) {
  size_t i = 0;

  for (; i < n; i++) {
    _cleanup_free_ char *text = wr_plan_step_text(p, &steps[i]);

    assert_non_null(want[i]);
    assert_string_equal(text, want[i]);
  }
  assert_null(want[i]);
}

static void test_seed_projects(void **state) {
  struct wr_plan_step steps[NSEED];
  static const char *const want[] = {
      "p-07: warm -> cool (snapshot the disk, delete the sandbox)",
      "p-06: warm -> cool (snapshot the disk, delete the sandbox)",
      "p-05: warm -> cool (snapshot the disk, delete the sandbox)",
      "p-09: cool -> cold (snapshot expired, reopen from git)",
      NULL,
  };
  size_t n;

  (void)state;
  n = wr_plan(seed, NSEED, &seed_settings, NOW_MS, steps);
  assert_steps(seed, steps, n, want);
  assert_string_equal(steps[0].why, "slots");
  assert_string_equal(steps[3].why, "retention");
}

/* The seed's projects in another order plan the same demotions. */
static void test_order_of_input_does_not_matter(void **state) {
  struct wr_plan_project p[NSEED];
  struct wr_plan_step steps[NSEED];
  size_t n;

  (void)state;
  for (size_t i = 0; i < NSEED; i++)
    p[i] = seed[NSEED - 1 - i];
  n = wr_plan(p, NSEED, &seed_settings, NOW_MS, steps);
  assert_int_equal(n, 4);
  assert_string_equal(p[steps[0].project].name, "p-07");
  assert_string_equal(p[steps[1].project].name, "p-06");
  assert_string_equal(p[steps[2].project].name, "p-05");
  assert_string_equal(p[steps[3].project].name, "p-09");
}

/* Short of memory by 2.5 GiB with the slots satisfied: the three oldest
 * warm projects go (the third covers the last half GiB), no more. */
static void test_memory_reserve(void **state) {
  struct wr_plan_settings s = {
      .slots = 0, .memory_reserve = 4 * GIB, .memory_free = 3 * GIB / 2};
  struct wr_plan_step steps[NSEED];
  size_t n;

  (void)state;
  n = wr_plan(seed, NSEED, &s, NOW_MS, steps);
  assert_int_equal(n, 3);
  assert_string_equal(seed[steps[0].project].name, "p-07");
  assert_string_equal(seed[steps[2].project].name, "p-05");
  assert_string_equal(steps[2].why, "memory");
  s.memory_free = 5 * GIB;
  assert_int_equal(wr_plan(seed, NSEED, &s, NOW_MS, steps), 0);
}

/* The slots first, then memory: with both short, the count is the larger
 * need, and the first steps say slots. */
static void test_slots_then_memory(void **state) {
  struct wr_plan_settings s = seed_settings;
  struct wr_plan_step steps[NSEED];
  size_t n;

  (void)state;
  s.snapshot_days = 0;
  s.memory_reserve = 6 * GIB;
  s.memory_free = 1 * GIB;
  n = wr_plan(seed, NSEED, &s, NOW_MS, steps);
  assert_int_equal(n, 5);
  assert_string_equal(steps[2].why, "slots");
  assert_string_equal(steps[3].why, "memory");
  assert_string_equal(seed[steps[4].project].name, "p-03");
}

/* Busy warm projects are skipped (the next oldest goes instead); hot ones
 * never move, even when the slots cannot be met; the sandboxes that are no
 * project's count as live. */
static void test_busy_hot_and_others(void **state) {
  struct wr_plan_project p[NSEED];
  struct wr_plan_settings s = seed_settings;
  struct wr_plan_step steps[NSEED];
  size_t n;

  (void)state;
  memcpy(p, seed, sizeof p);
  p[6].busy = true; /* p-07 */
  p[8].busy = true; /* p-09 */
  s.other_live = 1;
  n = wr_plan(p, NSEED, &s, NOW_MS, steps);
  assert_int_equal(n, 4);
  assert_string_equal(p[steps[0].project].name, "p-06");
  assert_string_equal(p[steps[3].project].name, "p-03");
  for (size_t i = 0; i < NSEED; i++)
    p[i].tier = WR_TIER_HOT;
  assert_int_equal(wr_plan(p, NSEED, &s, NOW_MS, steps), 0);
}

static void test_edges(void **state) {
  struct wr_plan_settings s = {.slots = 2, .free = 5};
  struct wr_plan_step steps[NSEED];

  (void)state;
  /* More free than slots: nothing may be live; every warm one goes. */
  assert_int_equal(wr_plan(seed, NSEED, &s, NOW_MS, steps), 6);
  assert_int_equal(wr_plan(seed, 0, &s, NOW_MS, steps), 0);
  s = (struct wr_plan_settings){0};
  assert_int_equal(wr_plan(seed, NSEED, &s, NOW_MS, steps), 0);
  assert_int_equal(wr_tier_from_name("cool"), WR_TIER_COOL);
  assert_int_equal(wr_tier_from_name("lukewarm"), -1);
  assert_string_equal(wr_tier_name(WR_TIER_COLD), "cold");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed_projects),
      cmocka_unit_test(test_order_of_input_does_not_matter),
      cmocka_unit_test(test_memory_reserve),
      cmocka_unit_test(test_slots_then_memory),
      cmocka_unit_test(test_busy_hot_and_others),
      cmocka_unit_test(test_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
