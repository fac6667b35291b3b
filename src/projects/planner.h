/*
 * The tier planner's decision, pure: given the projects (their tier, last
 * edit, memory), the limiter's slots and the host's free memory, which
 * projects move down a tier now. warrend runs it every --plan-interval and
 * `warren plan` prints it; the projects code carries the steps out
 * (demote never wakes a sandbox). No I/O and no clock: `now_ms` is an
 * argument, so tests and the month-long simulation inject time.
 *
 * The rules (docs/projects.md):
 *   - keep `free` of `slots` live places open: when more than
 *     slots - free are live (hot or warm projects, plus the resident
 *     sandboxes that are no project's), demote the least recently edited
 *     warm projects to cool, oldest first, until the count fits;
 *   - keep `memory_reserve` bytes free: while the host has less, demote
 *     further warm projects, oldest first, counting what each frees;
 *   - cool projects whose last edit is older than `snapshot_days` go cold
 *     (their snapshot is past its retention);
 *   - hot projects and busy ones (leased, or with work in flight) are
 *     never moved.
 */
#ifndef WR_PROJECTS_PLANNER_H
#define WR_PROJECTS_PLANNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum wr_tier {
  WR_TIER_HOT,  /* running */
  WR_TIER_WARM, /* paused */
  WR_TIER_COOL, /* a disk snapshot; no sandbox */
  WR_TIER_COLD, /* only git */
};

#define WR_DAY_MS (86400LL * 1000)

struct wr_plan_project {
  const char *name;
  enum wr_tier tier;
  int64_t last_edit_ms;
  uint64_t memory_bytes; /* what its sandbox holds (warm: frees on demote) */
  bool busy;
};

struct wr_plan_settings {
  unsigned slots;          /* live places in all (0: no slot rule) */
  unsigned free;           /* of them, kept open */
  unsigned other_live;     /* resident sandboxes that are no project */
  int64_t snapshot_days;   /* cool -> cold past this age (0: never) */
  uint64_t memory_reserve; /* bytes kept free (0: no memory rule) */
  uint64_t memory_free;    /* bytes the host has free now */
};

struct wr_plan_step {
  size_t project; /* index into the input */
  enum wr_tier from, to;
  const char *why; /* "slots", "memory" or "retention" */
};

/* The steps, demotions to cool oldest first, then the moves to cold in
 * input order; at most n, written to out (room for n). Returns how many. */
size_t wr_plan(const struct wr_plan_project *projects, size_t n,
               const struct wr_plan_settings *s, int64_t now_ms,
               struct wr_plan_step *out);
const char *wr_tier_name(enum wr_tier t);
/* -1 for a name that is not a tier. */
int wr_tier_from_name(const char *name);
/* "p-07: warm -> cool (snapshot the disk, delete the sandbox)". */
char *wr_plan_step_text(const struct wr_plan_project *projects,
                        const struct wr_plan_step *step);

#endif
