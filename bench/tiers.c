/*
 * bench/tiers: a month of 10,000 projects on the real tier planner.
 *
 * The planner is src/projects/planner.c's wr_plan and the projects are
 * rows of a real SQLite store (src/store/project.c), read back for every
 * planning round and written for every move; only the sandboxes are
 * simulated, since no host holds 10,000 (time is injected: the clock is
 * the now_ms given to the planner). Every figure it prices is printed
 * with where it comes from, and the month's bill at Runtime's prices is
 * set beside the seed's own (004_aa1b6ca395d9e54a.txt: $439.50).
 *
 *   build/bench/tiers [--projects N] [--days D] [--edits-per-day E]
 *                     [--slots S] [--free F] [--snapshot-days D]
 *                     [--plan-interval S] [--warm-mb M] [--snapshot-mb M]
 *                     [--seed N] [--json]
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "common/common.h"
#include "projects/planner.h"
#include "store/store.h"

/* Runtime's prices (the seed). */
#define PRICE_VCPU_H 0.025
#define PRICE_GIB_H 0.0075
#define PRICE_GB_MONTH 0.08
/* The seed's fleet: an edit is an hour on 2 vCPU / 4 GiB at 0.3 vCPU. */
#define HOT_GIB 4.0
#define HOT_VCPU 0.3
#define EDIT_MS (3600 * 1000LL)
/* warrend's idle pause: an edit's sandbox pauses 5 minutes after it. */
#define IDLE_PAUSE_MS (300 * 1000LL)
/* 2026-10-05T12:00:00Z, the seed's "now", is day 0. */
#define DAY0_MS 1791201600000LL
#define MONTH_H (30.0 * 24)

struct sim_opts {
  unsigned projects, days, edits, slots, free, snapshot_days, plan_s;
  double warm_mb, snapshot_mb;
  unsigned long seed;
  bool json;
};

struct proj {
  int64_t edit_start_ms, edit_end_ms; /* the edit in progress (end 0: none) */
  int64_t pause_at_ms;                /* its idle pause fires (0: none) */
  int64_t hot_since_ms;               /* hot from then (0: not hot) */
};

struct day {
  unsigned hot, warm, cool, cold;
  unsigned from[4]; /* opens by tier */
  double resident_gib, snapshot_gb;
};

/* xorshift64*: reproducible across hosts and libcs. */
static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ULL;
}
static double rnd01(void) {
  return (double)(rnd() >> 11) / 9007199254740992.0;
}

static void die_err(const wr_error_t *err) {
  fprintf(stderr, "tiers: %s\n", err->msg);
  exit(1);
}

static const char *const tier_names[] = {"hot", "warm", "cool", "cold"};

/* Move project i (its row in recs) to tier t and write it. */
static void move(wr_store_t *st, struct wr_project_rec *r, enum wr_tier t) {
  wr_error_t err;

  free(r->tier);
  r->tier = xstrdup(tier_names[t]);
  if (wr_store_project_update(st, r, &err) < 0)
    die_err(&err);
}

static void seed_fleet(wr_store_t *st, const struct sim_opts *o) {
  wr_error_t err;

  if (wr_store_begin(st, &err) < 0)
    die_err(&err);
  for (unsigned i = 0; i < o->projects; i++) {
    char name[32];
    /* the rest: last edits spread evenly over the six months before */
    double ago_days = rnd01() * 180;
    struct wr_project_rec r = {
        .name = name,
        .template_name = "vite",
        .tier = ago_days <= o->snapshot_days ? "cool" : "cold",
        .last_edit_ms = DAY0_MS - (int64_t)(ago_days * WR_DAY_MS),
        .created_ms = DAY0_MS - 200LL * WR_DAY_MS,
    };
    snprintf(name, sizeof(name), "p-%05u", i);
    if (wr_store_project_insert(st, &r, &err) < 0)
      die_err(&err);
  }
  if (wr_store_commit(st, &err) < 0)
    die_err(&err);
}

/* Who edits today: most edits come back to a project edited in the last
 * two weeks (an owner at work), the others to any project. */
static unsigned pick(const struct wr_project_rec *recs, unsigned n,
                     int64_t now) {
  for (int tries = 0; tries < 64 && rnd01() < 0.7; tries++) {
    unsigned i = (unsigned)(rnd() % n);
    if (now - recs[i].last_edit_ms < 14 * WR_DAY_MS)
      return i;
  }
  return (unsigned)(rnd() % n);
}

struct month {
  double hot_h, edit_h, warm_gb_h, cool_gb_h; /* tier-hours */
  unsigned opens[4], cold_recent;             /* cold opens of projects edited
                                                 within snapshot_days */
  struct day *days;
};

static void plan_round(wr_store_t *st, const struct sim_opts *o,
                       struct wr_project_rec *recs, size_t n, int64_t now) {
  struct wr_plan_project *in = xcalloc(n, sizeof(*in));
  struct wr_plan_step *steps = xcalloc(n, sizeof(*steps));
  struct wr_plan_settings s = {
      .slots = o->slots, .free = o->free, .snapshot_days = o->snapshot_days};
  size_t k;
  wr_error_t err;

  for (size_t i = 0; i < n; i++)
    in[i] = (struct wr_plan_project){.name = recs[i].name,
                                     .tier = wr_tier_from_name(recs[i].tier),
                                     .last_edit_ms = recs[i].last_edit_ms};
  k = wr_plan(in, n, &s, now, steps);
  if (k > 0 && wr_store_begin(st, &err) < 0)
    die_err(&err);
  for (size_t i = 0; i < k; i++)
    move(st, &recs[steps[i].project], steps[i].to);
  if (k > 0 && wr_store_commit(st, &err) < 0)
    die_err(&err);
  free(in);
  free(steps);
}

static void count_day(const struct wr_project_rec *recs, size_t n,
                      const struct sim_opts *o, struct day *d) {
  d->hot = d->warm = d->cool = d->cold = 0;
  for (size_t i = 0; i < n; i++) {
    int t = wr_tier_from_name(recs[i].tier);
    d->hot += t == WR_TIER_HOT;
    d->warm += t == WR_TIER_WARM;
    d->cool += t == WR_TIER_COOL;
    d->cold += t == WR_TIER_COLD;
  }
  d->resident_gib = d->hot * HOT_GIB + d->warm * o->warm_mb / 1024;
  d->snapshot_gb = d->cool * o->snapshot_mb / 1000;
}

static void simulate(wr_store_t *st, const struct sim_opts *o,
                     struct month *m) {
  struct proj *p = xcalloc(o->projects, sizeof(*p));
  int64_t step = (int64_t)o->plan_s * 1000,
          end = DAY0_MS + (int64_t)o->days * WR_DAY_MS;
  struct wr_project_rec *recs = NULL;
  size_t n = 0;
  wr_error_t err;

  m->days = xcalloc(o->days, sizeof(*m->days));
  for (int64_t now = DAY0_MS; now < end; now += step) {
    unsigned day = (unsigned)((now - DAY0_MS) / WR_DAY_MS);
    struct day *d = &m->days[day];
    double h = (double)step / 3600000.0;
    if (wr_store_project_list(st, &recs, &n, &err) < 0)
      die_err(&err);
    if (wr_store_begin(st, &err) < 0)
      die_err(&err);
    /* edits that start in this step: the day's count spread evenly */
    unsigned starts = (unsigned)(o->edits * (double)step / WR_DAY_MS + rnd01());
    for (unsigned e = 0; e < starts; e++) {
      unsigned i = pick(recs, (unsigned)n, now);
      int t = wr_tier_from_name(recs[i].tier);
      if (t == WR_TIER_COLD &&
          now - recs[i].last_edit_ms < (int64_t)o->snapshot_days * WR_DAY_MS)
        m->cold_recent++;
      d->from[t]++;
      m->opens[t]++;
      recs[i].last_edit_ms = now;
      /* Times are exact, not the step's: an edit that starts before the
       * last one ended extends it. */
      if (p[i].edit_end_ms)
        m->edit_h += (double)(now - p[i].edit_start_ms) / 3600000.0;
      if (p[i].hot_since_ms == 0)
        p[i].hot_since_ms = now;
      p[i].edit_start_ms = now;
      p[i].edit_end_ms = now + EDIT_MS;
      p[i].pause_at_ms = 0;
      move(st, &recs[i], WR_TIER_HOT);
    }
    for (size_t i = 0; i < n; i++) {
      if (p[i].edit_end_ms && now >= p[i].edit_end_ms) {
        m->edit_h += (double)EDIT_MS / 3600000.0;
        p[i].pause_at_ms = p[i].edit_end_ms + IDLE_PAUSE_MS;
        p[i].edit_end_ms = 0;
      }
      if (p[i].pause_at_ms && now >= p[i].pause_at_ms) {
        m->hot_h += (double)(p[i].pause_at_ms - p[i].hot_since_ms) / 3600000.0;
        p[i].pause_at_ms = 0;
        p[i].hot_since_ms = 0;
        if (wr_tier_from_name(recs[i].tier) == WR_TIER_HOT)
          move(st, &recs[i], WR_TIER_WARM);
      }
    }
    if (wr_store_commit(st, &err) < 0)
      die_err(&err);
    plan_round(st, o, recs, n, now);
    count_day(recs, n, o, d);
    m->warm_gb_h += d->warm * o->warm_mb / 1000 * h;
    m->cool_gb_h += d->cool * o->snapshot_mb / 1000 * h;
    wr_project_recs_free(recs, n);
  }
  free(p);
}

struct bill {
  double hot_cpu, hot_mem, warm, cool, total;
};

/* At Runtime's prices: the edits' CPU (while edited) and memory (while
 * hot, the idle pause's last minutes included), scaled to a 30-day month;
 * warm and cool as held bytes, averaged over the days, per GB-month. */
static struct bill price(const struct month *m, const struct sim_opts *o) {
  double scale = 30.0 / o->days, hours = o->days * 24.0;
  struct bill b = {
      .hot_cpu = m->edit_h * HOT_VCPU * PRICE_VCPU_H * scale,
      .hot_mem = m->hot_h * HOT_GIB * PRICE_GIB_H * scale,
      .warm = m->warm_gb_h / hours * PRICE_GB_MONTH,
      .cool = m->cool_gb_h / hours * PRICE_GB_MONTH,
  };

  b.total = b.hot_cpu + b.hot_mem + b.warm + b.cool;
  return b;
}

static int usage(void) {
  fputs("usage: tiers [--projects N] [--days D] [--edits-per-day E] [--slots "
        "S] [--free F] [--snapshot-days D] [--plan-interval S] [--warm-mb M] "
        "[--snapshot-mb M] [--seed N] [--json]\n",
        stderr);
  return 2;
}

static int parse(int argc, char **argv, struct sim_opts *o) {
  static const struct option lo[] = {
      {"projects", 1, NULL, 'n'},      {"days", 1, NULL, 'd'},
      {"edits-per-day", 1, NULL, 'e'}, {"slots", 1, NULL, 's'},
      {"free", 1, NULL, 'f'},          {"snapshot-days", 1, NULL, 'r'},
      {"plan-interval", 1, NULL, 'i'}, {"warm-mb", 1, NULL, 'w'},
      {"snapshot-mb", 1, NULL, 'm'},   {"seed", 1, NULL, 'x'},
      {"json", 0, NULL, 'j'},          {NULL, 0, NULL, 0},
  };
  int c;

  while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (c) {
    case 'n':
      o->projects = (unsigned)atoi(optarg);
      break;
    case 'd':
      o->days = (unsigned)atoi(optarg);
      break;
    case 'e':
      o->edits = (unsigned)atoi(optarg);
      break;
    case 's':
      o->slots = (unsigned)atoi(optarg);
      break;
    case 'f':
      o->free = (unsigned)atoi(optarg);
      break;
    case 'r':
      o->snapshot_days = (unsigned)atoi(optarg);
      break;
    case 'i':
      o->plan_s = (unsigned)atoi(optarg);
      break;
    case 'w':
      o->warm_mb = atof(optarg);
      break;
    case 'm':
      o->snapshot_mb = atof(optarg);
      break;
    case 'x':
      o->seed = strtoul(optarg, NULL, 10);
      break;
    case 'j':
      o->json = true;
      break;
    default:
      return -1;
    }
  }
  if (o->projects < 10 || o->days < 1 || o->days > 366 || o->plan_s < 60 ||
      o->plan_s > 86400 || o->free > o->slots)
    return -1;
  return 0;
}

static void print_human(const struct sim_opts *o, const struct month *m,
                        const struct bill *b, double secs) {
  const struct bill seed = {67.50, 270.00, 6.00, 96.00, 439.50};
  double all_paused = o->projects * o->warm_mb / 1000 * PRICE_GB_MONTH;
  double all_running = o->projects * MONTH_H *
                       (o->warm_mb / 1024 * PRICE_GIB_H + 0.05 * PRICE_VCPU_H);

  printf("tiers: %u projects, %u days, %u edits a day (1 h each on 2 vCPU / "
         "4 GiB at 0.3 vCPU, then a 5 min idle pause), the rest last edited "
         "evenly over the 6 months before; real planner (SLOTS=%u, FREE=%u, "
         "SNAPSHOT_DAYS=%u, every %u s) on a real SQLite store; %.1f s\n",
         o->projects, o->days, o->edits, o->slots, o->free, o->snapshot_days,
         o->plan_s, secs);
  printf("a warm project holds %.0f MB (a paused Vite project: wrbench "
         "projects), a cool one a %.0f MB snapshot (its own layer: wrbench "
         "projects); the seed assumes 1.5 GB and 0.6 GB\n",
         o->warm_mb, o->snapshot_mb);
  printf("%4s %5s %5s %6s %6s %11s %12s %6s %6s %6s %6s\n", "day", "hot",
         "warm", "cool", "cold", "resident", "snapshots", "open:h", "w", "c",
         "cold");
  for (unsigned i = 0; i < o->days; i++) {
    const struct day *d = &m->days[i];
    printf("%4u %5u %5u %6u %6u %7.1f GiB %9.1f GB %6u %6u %6u %6u\n", i + 1,
           d->hot, d->warm, d->cool, d->cold, d->resident_gib, d->snapshot_gb,
           d->from[0], d->from[1], d->from[2], d->from[3]);
  }
  printf("\nthe month at Runtime's prices ($%.3f/vCPU-h, $%.4f/GiB-h, "
         "$%.2f/GB-month held):\n",
         PRICE_VCPU_H, PRICE_GIB_H, PRICE_GB_MONTH);
  printf("  %-12s %10s %10s\n", "", "warren", "seed");
  printf("  %-12s %10.2f %10.2f\n", "hot CPU", b->hot_cpu, seed.hot_cpu);
  printf("  %-12s %10.2f %10.2f\n", "hot memory", b->hot_mem, seed.hot_mem);
  printf("  %-12s %10.2f %10.2f\n", "warm", b->warm, seed.warm);
  printf("  %-12s %10.2f %10.2f\n", "cool", b->cool, seed.cool);
  printf("  %-12s %10.2f %10.2f\n", "cold", 0.0, 0.0);
  printf("  %-12s %10.2f %10.2f   (%.2fx)\n", "total", b->total, seed.total,
         b->total / seed.total);
  printf("  %-12s %10.4f %10.4f\n", "per project", b->total / o->projects,
         seed.total / 10000);
  printf("  all %u paused at %.0f MB: $%.2f (seed: $1,200.00 at 1.5 GB); all "
         "running idle at %.0f MB and 0.05 vCPU: $%.2f (seed: $225,000.00 at "
         "4 GiB)\n",
         o->projects, o->warm_mb, all_paused, o->warm_mb, all_running);
  printf("  opens this month: %u hot, %u warm, %u cool, %u cold; cold opens "
         "of a project edited within %u days: %u (the reopen promise)\n",
         m->opens[0], m->opens[1], m->opens[2], m->opens[3], o->snapshot_days,
         m->cold_recent);
  printf("\nWhy it differs: the edits themselves (hot CPU and memory, %.0f%% "
         "of the seed's bill) cost about the same, since the fleet is the "
         "same (hot memory a little more: each edit stays hot through its "
         "5 minute idle pause, which the seed does not count). "
         "What warren holds for the projects nobody is editing is far "
         "smaller: a paused sandbox keeps only what its processes use "
         "(%.0f MB, not a 1.5 GB machine), and a cool snapshot is only the "
         "project's own layer over the template's shared ones (%.0f MB, "
         "not 0.6 GB), so warm and cool cost $%.2f where the seed pays "
         "$%.2f, with the same promise: a project edited within %u days "
         "reopens from warm or cool.\n",
         (seed.hot_cpu + seed.hot_mem) / seed.total * 100, o->warm_mb,
         o->snapshot_mb, b->warm + b->cool, seed.warm + seed.cool,
         o->snapshot_days);
}

static void print_json(const struct sim_opts *o, const struct month *m,
                       const struct bill *b) {
  json_t *days = json_array();

  for (unsigned i = 0; i < o->days; i++) {
    const struct day *d = &m->days[i];
    json_array_append_new(
        days, json_pack("{s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:[i,i,i,i]}",
                        "day", i + 1, "hot", d->hot, "warm", d->warm, "cool",
                        d->cool, "cold", d->cold, "resident_gib",
                        d->resident_gib, "snapshot_gb", d->snapshot_gb, "opens",
                        d->from[0], d->from[1], d->from[2], d->from[3]));
  }
  json_t *j = json_pack(
      "{s:o, s:{s:f, s:f, s:f, s:f, s:f, s:f}, s:{s:f}, s:i}", "days", days,
      "bill", "hot_cpu", b->hot_cpu, "hot_memory", b->hot_mem, "warm", b->warm,
      "cool", b->cool, "total", b->total, "per_project", b->total / o->projects,
      "seed", "total", 439.50, "cold_recent_opens", m->cold_recent);
  json_dumpf(j, stdout, JSON_INDENT(2));
  putchar('\n');
  json_decref(j);
}

int main(int argc, char **argv) {
  struct sim_opts o = {.projects = 10000,
                       .days = 30,
                       .edits = 300,
                       .slots = 100,
                       .free = 10,
                       .snapshot_days = 30,
                       .plan_s = 1800,
                       .warm_mb = 121,
                       .snapshot_mb = 3,
                       .seed = 1};
  char dir[] = "/tmp/wr-tiers-XXXXXX";
  _cleanup_free_ char *db = NULL;
  struct month m = {0};
  struct bill b;
  wr_store_t *st;
  wr_error_t err;
  uint64_t t0 = wr_mono_ns();

  if (parse(argc, argv, &o) < 0)
    return usage();
  rng_state = o.seed * 0x9E3779B97F4A7C15ULL + 1;
  if (mkdtemp(dir) == NULL)
    return perror("tiers: mkdtemp"), 1;
  db = xasprintf("%s/warren.db", dir);
  if (wr_store_open(db, &st, &err) < 0)
    die_err(&err);
  seed_fleet(st, &o);
  simulate(st, &o, &m);
  b = price(&m, &o);
  if (o.json)
    print_json(&o, &m, &b);
  else
    print_human(&o, &m, &b, (double)(wr_mono_ns() - t0) / 1e9);
  wr_store_close(st);
  wr_rm_rf(dir, NULL);
  free(m.days);
  return 0;
}
