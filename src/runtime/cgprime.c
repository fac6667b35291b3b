/*
 * cgroup v1: starting, ahead of time, the RCU grace period that a
 * sandbox's first move into its cgroups waits for.
 *
 * Writing a pid into a v1 cgroup.procs takes the kernel's threadgroup
 * rwsem for writing, and a writer first waits for a grace period
 * (rcu_sync_enter) unless another writer has been there within about one
 * grace period: measured on the CI host, 6-10 ms for a move after a quiet
 * spell, 0.1 ms for one up to ~10 ms after another move. The start of a
 * sandbox has that much work of its own before it moves warren-init
 * (its user namespace, its root's mounts, its cgroups), so a thread of
 * ours makes a move as the start begins, and the real one finds the
 * grace period passed or half-way.
 *
 * The move is of warrend itself into the cgroup it is already in (in one
 * hierarchy without limits: pids, else freezer, cpuacct, cpu, cpuset), so
 * that nothing changes: the kernel takes the lock before it looks at the
 * pid (a pid that does not exist is refused before the lock on newer
 * kernels, so it cannot be used instead). Readers of the rwsem (every
 * fork and exit on the host) take its slower path only while a grace
 * period of ours is pending, as they do for any cgroup move; favordynmods
 * (--cgroup-favor-dynmods) makes that permanent and this unnecessary.
 * Where warrend is in a cgroup is read again for each move: a write of a
 * stale path would move warrend back where it was. v2 needs none of
 * this: sandboxes are cloned into their cgroup.
 */
#include "runtime/cgroup.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

struct wr_cgroup_primer {
  pthread_mutex_t mu;
  pthread_cond_t wake;
  pthread_t thread;
  char *mount;    /* the hierarchy's mount point */
  char *ctrl;     /* its controller's name in /proc/self/cgroup */
  bool requested; /* a start began since the last move */
  bool stopping, started;
  unsigned moves; /* made so far (for tests) */
};

/* The controllers to move in, best first: none of them has a charge or a
 * setting that a move changes. */
static const struct {
  enum wr_cgroup_ctrl ctrl;
  const char *name;
} order[] = {
    {WR_CG_PIDS, "pids"},       {WR_CG_FREEZER, "freezer"},
    {WR_CG_CPUACCT, "cpuacct"}, {WR_CG_CPU, "cpu"},
    {WR_CG_CPUSET, "cpuset"},
};

/* Whether a /proc/self/cgroup controller list ("cpu,cpuacct") names
 * ctrl. */
static bool lists(const char *list, size_t len, const char *ctrl) {
  size_t n = strlen(ctrl);

  for (const char *p = list, *end = list + len; p < end;) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    size_t k = comma ? (size_t)(comma - p) : (size_t)(end - p);
    if (k == n && memcmp(p, ctrl, n) == 0)
      return true;
    p += k + 1;
  }
  return false;
}

/* Where warrend is now in ctrl's hierarchy ("/system.slice/x"), or
 * NULL. */
static char *own_group(const char *ctrl) {
  _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
  char line[1024];

  if (f == NULL)
    return NULL;
  while (fgets(line, sizeof(line), f) != NULL) {
    char *list = strchr(line, ':'), *path;
    if (list == NULL || (path = strchr(++list, ':')) == NULL)
      continue;
    if (lists(list, (size_t)(path - list), ctrl)) {
      path[1 + strcspn(path + 1, "\n")] = '\0';
      return xstrdup(path + 1);
    }
  }
  return NULL;
}

/* Whether the move was made. */
static bool move_self(const struct wr_cgroup_primer *p) {
  _cleanup_free_ char *group = own_group(p->ctrl);
  _cleanup_free_ char *procs = NULL;
  _cleanup_close_ int fd = -1;

  if (group == NULL)
    return false;
  procs = xasprintf("%s%s/cgroup.procs", p->mount,
                    strcmp(group, "/") == 0 ? "" : group);
  fd = open(procs, O_WRONLY | O_CLOEXEC);
  return fd >= 0 && write(fd, "0", 1) == 1;
}

static void *primer_main(void *arg) {
  struct wr_cgroup_primer *p = arg;

  pthread_mutex_lock(&p->mu);
  while (!p->stopping) {
    bool moved;

    if (!p->requested) {
      pthread_cond_wait(&p->wake, &p->mu);
      continue;
    }
    p->requested = false;
    pthread_mutex_unlock(&p->mu);
    moved = move_self(p);
    pthread_mutex_lock(&p->mu);
    p->moves += moved;
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int wr_cgroup_primer_new(const struct wr_cgroup *cg,
                         struct wr_cgroup_primer **out, wr_error_t *err) {
  struct wr_cgroup_primer *p;
  int r;

  *out = NULL;
  if (cg->version != 1)
    return 0;
  p = xcalloc(1, sizeof(*p));
  for (size_t i = 0; i < WR_ARRAY_SIZE(order) && p->mount == NULL; i++)
    if (cg->v1_mount[order[i].ctrl] != NULL) {
      p->mount = xstrdup(cg->v1_mount[order[i].ctrl]);
      p->ctrl = xstrdup(order[i].name);
    }
  if (p->mount == NULL) {
    free(p);
    return 0;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  if ((r = pthread_create(&p->thread, NULL, primer_main, p)) != 0) {
    wr_cgroup_primer_free(p);
    return wr_error_set(err, r, "start the cgroup primer");
  }
  p->started = true;
  *out = p;
  return 0;
}

void wr_cgroup_prime(struct wr_cgroup_primer *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->mu);
  p->requested = true;
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->mu);
}

unsigned wr_cgroup_primer_moves(struct wr_cgroup_primer *p) {
  unsigned n;

  if (p == NULL)
    return 0;
  pthread_mutex_lock(&p->mu);
  n = p->moves;
  pthread_mutex_unlock(&p->mu);
  return n;
}

void wr_cgroup_primer_free(struct wr_cgroup_primer *p) {
  if (p == NULL)
    return;
  if (p->started) {
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  free(p->mount);
  free(p->ctrl);
  free(p);
}
