/*
 * The tier planner's decision (planner.h): which projects move down a
 * tier now. Pure, so that a unit test can feed it the source document's
 * nine projects and bench/tiers a month of ten thousand.
 */
#include "projects/planner.h"

#include <stdlib.h>
#include <string.h>

#include "common/common.h"

static const char *const tier_names[] = {"hot", "warm", "cool", "cold"};

const char *wr_tier_name(enum wr_tier t) {
  return (size_t)t < sizeof tier_names / sizeof *tier_names ? tier_names[t]
                                                            : "unknown";
}

int wr_tier_from_name(const char *name) {
  for (size_t i = 0; i < sizeof tier_names / sizeof *tier_names; i++)
    if (strcmp(name, tier_names[i]) == 0)
      return (int)i;
  return -1;
}

/* A warm project that may be demoted, ordered by last edit. */
struct candidate {
  int64_t last_edit_ms;
  size_t index;
};

static int oldest_first(const void *a, const void *b) {
  const struct candidate *x = a, *y = b;

  if (x->last_edit_ms != y->last_edit_ms)
    return x->last_edit_ms < y->last_edit_ms ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* How many live places are over what may be live: slots - free. */
static size_t places_over(const struct wr_plan_project *p, size_t n,
                          const struct wr_plan_settings *s) {
  size_t live = s->other_live, allowed;

  if (s->slots == 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (p[i].tier == WR_TIER_HOT || p[i].tier == WR_TIER_WARM)
      live++;
  allowed = s->free < s->slots ? s->slots - s->free : 0;
  return live > allowed ? live - allowed : 0;
}

static size_t warm_candidates(const struct wr_plan_project *p, size_t n,
                              struct candidate *out) {
  size_t k = 0;

  for (size_t i = 0; i < n; i++)
    if (p[i].tier == WR_TIER_WARM && !p[i].busy)
      out[k++] = (struct candidate){p[i].last_edit_ms, i};
  qsort(out, k, sizeof *out, oldest_first);
  return k;
}

static uint64_t take(uint64_t left, uint64_t freed) {
  return freed < left ? left - freed : 0;
}

/* Warm -> cool, oldest first: first for the slots, then for memory. */
static size_t demotions(const struct wr_plan_project *p, size_t n,
                        const struct wr_plan_settings *s,
                        struct wr_plan_step *out) {
  _cleanup_free_ struct candidate *c = NULL;
  size_t over = places_over(p, n, s), k, steps = 0;
  uint64_t short_of = 0;

  if (s->memory_reserve > s->memory_free)
    short_of = s->memory_reserve - s->memory_free;
  c = xmalloc((n ? n : 1) * sizeof *c);
  k = warm_candidates(p, n, c);
  for (size_t i = 0; i < k && (over > 0 || short_of > 0); i++) {
    const char *why = over > 0 ? "slots" : "memory";

    if (over > 0)
      over--;
    short_of = take(short_of, p[c[i].index].memory_bytes);
    out[steps++] =
        (struct wr_plan_step){c[i].index, WR_TIER_WARM, WR_TIER_COOL, why};
  }
  return steps;
}

size_t wr_plan(const struct wr_plan_project *p, size_t n,
               const struct wr_plan_settings *s, int64_t now_ms,
               struct wr_plan_step *out) {
  size_t steps = demotions(p, n, s, out);

  if (s->snapshot_days <= 0)
    return steps;
  for (size_t i = 0; i < n; i++) {
    if (p[i].tier != WR_TIER_COOL || p[i].busy)
      continue;
    if (now_ms - p[i].last_edit_ms > s->snapshot_days * WR_DAY_MS)
      out[steps++] =
          (struct wr_plan_step){i, WR_TIER_COOL, WR_TIER_COLD, "retention"};
  }
  return steps;
}

char *wr_plan_step_text(const struct wr_plan_project *p,
                        const struct wr_plan_step *step) {
  const char *what = step->to == WR_TIER_COOL
                         ? "snapshot the disk, delete the sandbox"
                         : "snapshot expired, reopen from git";

  return xasprintf("%s: %s -> %s (%s)", p[step->project].name,
                   wr_tier_name(step->from), wr_tier_name(step->to), what);
}
