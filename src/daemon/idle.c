/*
 * The idle pause: a running sandbox in which nothing has happened for its
 * idle_pause seconds is paused (the cgroup freezer, as `warren pause`
 * does), and any request wakes it again (lifecycle.c's wr_sandbox_wake).
 *
 * "Nothing happened" is read once a tick from what the daemon knows
 * already, so that a sandbox doing real work never pauses:
 *
 * - a request for it that would wake it (exec, the files API, attach and
 *   logs, a published port's connection): wr_idle_touch, from
 *   wr_sandbox_wake;
 * - a client attached to one of its processes (an exec stream, attach,
 *   logs --follow);
 * - a connection of its through the proxy or a published port that is
 *   open, or that moved bytes (network.c counts them): an agent waiting
 *   for its model holds one;
 * - CPU time above WR_IDLE_CPU_PERMILLE of one CPU since the last tick
 *   (the cgroup's counter): a build, an install, a test run;
 * - becoming running at all (a create, a start, a resume): the clock
 *   starts again from there.
 *
 * A dev server waiting for requests does none of these, and pauses. The
 * tick costs one read of a cgroup file per running sandbox that has an
 * idle pause; a sandbox with 0 ("never") costs nothing.
 *
 * Loop thread only.
 */
#include "daemon/idle.h"

#include "daemon/procs.h"
#include "daemon/sandbox.h"

#define WR_IDLE_TICK_MS 1000
/* 2% of one CPU: an idle Node dev server or shell stays far below it. */
#define WR_IDLE_CPU_PERMILLE 20

struct wr_idle {
  struct wr_daemon *d;
  uv_timer_t tick;
  uint64_t paused; /* by the idle pause, since the daemon started */
};

const char *wr_idle_kind_name(enum wr_idle_kind k) {
  static const char *const names[] = {
      [WR_IDLE_STARTED] = "started", [WR_IDLE_REQUEST] = "request",
      [WR_IDLE_STREAM] = "stream",   [WR_IDLE_NETWORK] = "network",
      [WR_IDLE_CPU] = "cpu",
  };

  return k < WR_ARRAY_SIZE(names) && names[k] ? names[k] : "unknown";
}

void wr_idle_touch(struct wr_sandbox *sb, enum wr_idle_kind kind) {
  sb->idle.active_ms = wr_now_ms();
  sb->idle.kind = kind;
}

void wr_idle_touch_at(struct wr_sandbox *sb, enum wr_idle_kind kind,
                      int64_t at_ms) {
  if (at_ms > sb->idle.active_ms) {
    sb->idle.active_ms = at_ms;
    sb->idle.kind = kind;
  }
}

int64_t wr_idle_pause_after(const struct wr_sandbox *sb) {
  return sb->spec.idle_pause_s >= 0 ? sb->spec.idle_pause_s
                                    : (int64_t)sb->d->cfg.idle_pause_s;
}

static bool has_watchers(const struct wr_sandbox *sb) {
  for (const struct wr_proc *p = sb->procs; p != NULL; p = p->next)
    if (!p->gone && p->watchers != NULL)
      return true;
  return false;
}

/* CPU use counts only while it runs: a paused one's last sample is
 * from before it froze. */
bool wr_idle_busy(const struct wr_sandbox *sb) {
  return sb->op != WR_OP_NONE || sb->removed || has_watchers(sb) ||
         sb->net_conns > 0 ||
         (sb->state == WR_SB_RUNNING && sb->idle.kind == WR_IDLE_CPU &&
          wr_now_ms() - sb->idle.active_ms < 2 * WR_IDLE_TICK_MS);
}

/* CPU use since the last sample, in thousandths of one CPU over the wall
 * time between them; -1 when unknown (the first sample, or a host that
 * does not say). */
static int64_t cpu_permille(struct wr_sandbox *sb, int64_t now) {
  uint64_t ns = wr_rt_cpu_usage(sb->d->rt, sb->id);
  int64_t dt = now - sb->idle.cpu_at_ms, r = -1;

  if (ns != UINT64_MAX && sb->idle.cpu_at_ms > 0 && dt > 0 &&
      ns >= sb->idle.cpu_ns)
    r = (int64_t)((ns - sb->idle.cpu_ns) / 1000) / dt;
  sb->idle.cpu_ns = ns;
  sb->idle.cpu_at_ms = ns != UINT64_MAX ? now : 0;
  return r;
}

static void idle_paused(struct wr_sandbox *sb, void *arg,
                        const wr_error_t *err) {
  struct wr_idle *idle = arg;

  if (err != NULL) {
    wr_warn("sandbox %s: idle pause failed: %s", sb->name, err->msg);
    return;
  }
  idle->paused++;
  wr_info("sandbox %s (%s) paused: idle for %llds", sb->name, sb->id,
          (long long)wr_idle_pause_after(sb));
}

static void check(struct wr_idle *idle, struct wr_sandbox *sb, int64_t now) {
  int64_t after = wr_idle_pause_after(sb), permille;
  wr_error_t err;

  if (sb->state != WR_SB_RUNNING || sb->op != WR_OP_NONE || sb->removed ||
      after <= 0)
    return;
  /* Running since before this daemon started (recovered): the clock
   * starts now, so that a restart never pauses a sandbox early. */
  if (sb->idle.active_ms == 0) {
    wr_idle_touch(sb, WR_IDLE_STARTED);
    return;
  }
  if (has_watchers(sb))
    wr_idle_touch(sb, WR_IDLE_STREAM);
  if (sb->net_conns > 0)
    wr_idle_touch(sb, WR_IDLE_NETWORK);
  else
    wr_idle_touch_at(sb, WR_IDLE_NETWORK, sb->net_active_ms);
  permille = cpu_permille(sb, now);
  if (permille > WR_IDLE_CPU_PERMILLE)
    wr_idle_touch(sb, WR_IDLE_CPU);
  if (now - sb->idle.active_ms < after * 1000)
    return;
  if (wr_sandbox_pause(sb, idle_paused, idle, &err) < 0)
    wr_debug("sandbox %s: no idle pause: %s", sb->name, err.msg);
  else
    sb->idle.by_idle = true;
}

static void on_tick(uv_timer_t *t) {
  struct wr_idle *idle = t->data;
  int64_t now = wr_now_ms();

  for (struct wr_sandbox *sb = idle->d->sandboxes, *next; sb != NULL;
       sb = next) {
    next = sb->next;
    check(idle, sb, now);
  }
}

void wr_idle_on_state(struct wr_sandbox *sb) {
  if (sb->state == WR_SB_RUNNING) {
    wr_idle_touch(sb, WR_IDLE_STARTED);
    sb->idle.cpu_at_ms = 0;
  }
  if (sb->state != WR_SB_PAUSED)
    sb->idle.by_idle = false;
}

json_t *wr_idle_json(const struct wr_sandbox *sb) {
  int64_t after = wr_idle_pause_after(sb), now = wr_now_ms();
  bool running = sb->state == WR_SB_RUNNING;
  json_t *j = json_pack("{s:I,s:b}", "pause_after_s", (json_int_t)after,
                        "paused_by_idle",
                        sb->state == WR_SB_PAUSED && sb->idle.by_idle);

  if (sb->idle.active_ms > 0) {
    json_object_set_new(j, "last_activity",
                        json_pack("{s:s,s:I}", "kind",
                                  wr_idle_kind_name(sb->idle.kind), "at_ms",
                                  (json_int_t)sb->idle.active_ms));
    json_object_set_new(
        j, "idle_s",
        running ? json_integer((json_int_t)((now - sb->idle.active_ms) / 1000))
                : json_null());
  }
  return j;
}

int wr_idle_start(struct wr_daemon *d, wr_error_t *err) {
  struct wr_idle *idle = xcalloc(1, sizeof(*idle));
  int r;

  idle->d = d;
  if ((r = uv_timer_init(d->loop, &idle->tick)) < 0) {
    free(idle);
    return wr_error_set(err, -r, "idle pause timer");
  }
  idle->tick.data = idle;
  uv_timer_start(&idle->tick, on_tick, WR_IDLE_TICK_MS, WR_IDLE_TICK_MS);
  uv_unref((uv_handle_t *)&idle->tick);
  d->idle = idle;
  return 0;
}

static void on_closed(uv_handle_t *h) {
  free(h->data);
}

void wr_idle_stop(struct wr_daemon *d) {
  if (d->idle == NULL)
    return;
  uv_close((uv_handle_t *)&d->idle->tick, on_closed);
  d->idle = NULL;
}

uint64_t wr_idle_paused_count(const struct wr_daemon *d) {
  return d->idle != NULL ? d->idle->paused : 0;
}
