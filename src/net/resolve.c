/*
 * Name resolution for the proxy and the DNS server: the static hosts file
 * first (re-read when it changes), then c-ares on the loop (the system's
 * hosts file, then the servers of resolv.conf or --resolver), one family
 * at a time, through a cache.
 *
 * Why a cache and shared lookups: a package manager opens hundreds of
 * connections to one registry at once, and a per-connection getaddrinfo
 * turned that into hundreds of parallel queries that the host's resolver
 * refused. Here an answer is kept per (name, family) for its TTL, clamped
 * to [WR_RESOLVE_TTL_MIN_S, WR_RESOLVE_TTL_MAX_S]; "no address of this
 * family" for WR_RESOLVE_NODATA_TTL_S; a failure (no such name, a server
 * failure, a timeout) for WR_RESOLVE_FAIL_TTL_MS; and a lookup in flight (a
 * "flight") is shared by everyone who asks for the same name and family
 * meanwhile, so 500 connections make one query per family.
 *
 * Why c-ares: getaddrinfo holds a slot of libuv's shared threadpool for as
 * long as the resolver takes, so one sandbox asking for names whose
 * servers never answer made every other sandbox wait. c-ares runs on the
 * loop (its sockets watched by uv_poll, its timeouts by a uv_timer), holds
 * nothing shared while it waits, retries a slow server, and goes to TCP
 * when an answer is truncated. Each sandbox may wait on at most
 * WR_RESOLVE_PER_SANDBOX distinct (name, family) flights; a sandbox's
 * waiters on one flight count once, however many there are.
 *
 * A flight ends by c-ares's answer or by its deadline (WR_RESOLVE_WAIT_MS,
 * below the proxy's connect timeout), whichever is first; c-ares may go on
 * retrying after the deadline, and its late answer only frees the flight.
 *
 * A callback never runs inside the call that asked for it: answers known at
 * once (the hosts file, the cache, an IP literal, an early failure) and
 * finished flights put the request on a queue that a zero timer empties on
 * the next loop iteration. A cancelled request leaves its flights at once
 * and is freed when it would have been delivered.
 */
#include "net/net_internal.h"

#include <ares.h>
#include <assert.h>
#include <arpa/inet.h>
#include <sys/stat.h>

#define HOSTS_FILE_MAX (1u << 20)
#define CACHE_BUCKETS 1024 /* power of two */
#define FAMILIES 2         /* 0: AF_INET (A), 1: AF_INET6 (AAAA) */

struct wr_hosts_entry {
  struct wr_net_addr addr;
  char *name;
};

struct flight;

/* One (name, family) in the cache. An entry with a flight is never
 * evicted; its answer (if any) is the previous one. */
struct entry {
  char *name;
  int fam;       /* 0 or 1 */
  bool answered; /* addrs or error hold an answer */
  bool failed;
  struct wr_net_addr addrs[WR_RESOLVE_NAME_ADDRS];
  size_t naddrs;
  uint32_t ttl_s;      /* as clamped */
  uint64_t fetched_ms; /* uv_now() of the answer */
  uint64_t expires_ms;
  int err_code;
  char err_msg[96];
  uint64_t queries; /* upstream lookups made for it */
  struct flight *flight;
  struct entry *hnext;
  struct entry *lru_prev, *lru_next; /* most recent first */
};

struct waiter {
  struct wr_resolve_req *r;
  int fam;
  struct flight *f; /* NULL when not waiting */
  bool counted;     /* holds the sandbox's slot for this flight */
  struct waiter *prev, *next;
};

/* A lookup in flight: its entry (NULL once ended or detached), who waits,
 * and its place in the deadline queue (flights start in deadline order). */
struct flight {
  struct wr_resolver *res; /* NULL once c-ares owns only the memory */
  struct entry *e;
  struct waiter *waiters;
  uint64_t deadline_ms;
  bool in_ares; /* c-ares still has the query (it frees the flight) */
  struct flight *qprev, *qnext;
};

/* c-ares's sockets, each watched by a uv_poll. */
struct ares_sock {
  uv_poll_t poll;
  ares_socket_t fd;
  struct wr_resolver *res;
  struct ares_sock *next;
};

struct fam_result {
  bool want, done;
  int code;
  char msg[96];
  struct wr_net_addr addrs[WR_RESOLVE_NAME_ADDRS];
  size_t naddrs;
};

struct wr_resolve_req {
  struct wr_resolver *res;
  struct wr_net_sb *sb; /* a reference, or NULL */
  wr_net_resolve_fn cb;
  void *arg;
  bool cancelled, queued;
  bool shut;   /* delivered as cancelled: the engine shut down */
  int pending; /* families not done */
  struct waiter w[FAMILIES];
  struct fam_result fam[FAMILIES];
  struct wr_resolve_req *next; /* in the ready queue */
  /* One family answered, the other is awaited until other_by_ms. */
  uint64_t other_by_ms;
  struct wr_resolve_req *gprev, *gnext; /* in the resolver's grace list */
  bool in_grace;
};

struct wr_resolver {
  struct wr_net *n;
  ares_channel channel;
  bool channel_ok;
  uv_timer_t ares_timer, deadline, deliver, grace;
  bool open;
  struct ares_sock *socks;
  struct entry *buckets[CACHE_BUCKETS];
  struct entry *lru_head, *lru_tail;
  size_t nentries;
  struct flight *fq_head, *fq_tail; /* flights in deadline order */
  size_t nflights;
  struct wr_resolve_req *ready, *ready_tail;
  struct wr_resolve_req *grace_head, *grace_tail; /* by other_by_ms */
  struct wr_net_resolver_stats stats;
  /* the static hosts file */
  struct wr_hosts_entry *hosts;
  size_t nhosts;
  bool hosts_known;
  struct timespec hosts_mtime;
  ino_t hosts_ino;
  off_t hosts_size;
};

static int fam_af(int fam) {
  return fam == 0 ? AF_INET : AF_INET6;
}

/* ---- the hosts file ----------------------------------------------------- */

static void hosts_clear(struct wr_resolver *res) {
  for (size_t i = 0; i < res->nhosts; i++)
    free(res->hosts[i].name);
  free(res->hosts);
  res->hosts = NULL;
  res->nhosts = 0;
}

static void hosts_add(struct wr_resolver *res, const struct wr_net_addr *a,
                      const char *name) {
  char norm[WR_HOST_MAX];
  bool is_ip = false;

  if (wr_net_normalize_host(name, norm, &is_ip, NULL, NULL) < 0 || is_ip)
    return;
  res->hosts = xrealloc(res->hosts, (res->nhosts + 1) * sizeof(*res->hosts));
  res->hosts[res->nhosts].addr = *a;
  res->hosts[res->nhosts].name = xstrdup(norm);
  res->nhosts++;
}

/* "ADDR NAME..." per line; "#" starts a comment. */
static void hosts_parse(struct wr_resolver *res, char *text) {
  char *save = NULL;

  for (char *line = strtok_r(text, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    char *hash = strchr(line, '#'), *tsave = NULL, *tok;
    struct wr_net_addr a;

    if (hash != NULL)
      *hash = '\0';
    tok = strtok_r(line, " \t\r", &tsave);
    if (tok == NULL || !wr_net_parse_ip(tok, &a))
      continue;
    while ((tok = strtok_r(NULL, " \t\r", &tsave)) != NULL)
      hosts_add(res, &a, tok);
  }
}

static bool same_stamp(const struct wr_resolver *res, const struct stat *st) {
  return res->hosts_known && res->hosts_ino == st->st_ino &&
         res->hosts_size == st->st_size &&
         res->hosts_mtime.tv_sec == st->st_mtim.tv_sec &&
         res->hosts_mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Re-read the file when its inode, size or mtime changed. It is small and
 * local; a stat per lookup is cheaper than a stale answer. */
static void hosts_refresh(struct wr_resolver *res) {
  _cleanup_free_ char *text = NULL;
  const char *path = res->n->hosts_file;
  wr_error_t err = {0};
  struct stat st;
  size_t len;

  if (path == NULL)
    return;
  if (stat(path, &st) < 0) {
    hosts_clear(res);
    res->hosts_known = false;
    return;
  }
  if (same_stamp(res, &st))
    return;
  hosts_clear(res);
  res->hosts_known = true;
  res->hosts_ino = st.st_ino;
  res->hosts_size = st.st_size;
  res->hosts_mtime = st.st_mtim;
  if (wr_read_file(path, HOSTS_FILE_MAX, &text, &len, &err) < 0) {
    wr_warn("net: hosts file: %s", err.msg);
    return;
  }
  hosts_parse(res, text);
}

/* Add a to the WR_RESOLVE_NAME_ADDRS-long list addrs, once. */
static void add_to(struct wr_net_addr *addrs, size_t *naddrs,
                   const struct wr_net_addr *a) {
  for (size_t i = 0; i < *naddrs; i++)
    if (memcmp(&addrs[i], a, sizeof(*a)) == 0)
      return;
  if (*naddrs < WR_RESOLVE_NAME_ADDRS)
    addrs[(*naddrs)++] = *a;
}

static void add_addr(struct fam_result *fr, const struct wr_net_addr *a) {
  add_to(fr->addrs, &fr->naddrs, a);
}

/* The addresses of the wanted families that the hosts file gives the
 * name; true when it names it at all (then DNS is not asked). */
static bool hosts_lookup(struct wr_resolver *res, const char *host,
                         struct wr_resolve_req *r) {
  bool named = false;

  hosts_refresh(res);
  for (size_t i = 0; i < res->nhosts; i++) {
    int fam = res->hosts[i].addr.family == AF_INET ? 0 : 1;
    if (strcmp(res->hosts[i].name, host) != 0)
      continue;
    named = true;
    if (r->fam[fam].want)
      add_addr(&r->fam[fam], &res->hosts[i].addr);
  }
  return named;
}

/* ---- the cache ---------------------------------------------------------- */

static size_t bucket_of(const char *name, int fam) {
  uint32_t h = 2166136261u; /* FNV-1a */

  for (const char *p = name; *p != '\0'; p++)
    h = (h ^ (uint8_t)*p) * 16777619u;
  h = (h ^ (uint32_t)fam) * 16777619u;
  return h & (CACHE_BUCKETS - 1);
}

static void lru_unlink(struct wr_resolver *res, struct entry *e) {
  if (e->lru_prev != NULL)
    e->lru_prev->lru_next = e->lru_next;
  else
    res->lru_head = e->lru_next;
  if (e->lru_next != NULL)
    e->lru_next->lru_prev = e->lru_prev;
  else
    res->lru_tail = e->lru_prev;
  e->lru_prev = e->lru_next = NULL;
}

static void lru_front(struct wr_resolver *res, struct entry *e) {
  e->lru_next = res->lru_head;
  if (res->lru_head != NULL)
    res->lru_head->lru_prev = e;
  res->lru_head = e;
  if (res->lru_tail == NULL)
    res->lru_tail = e;
}

static struct entry *cache_find(struct wr_resolver *res, const char *name,
                                int fam) {
  for (struct entry *e = res->buckets[bucket_of(name, fam)]; e != NULL;
       e = e->hnext)
    if (e->fam == fam && strcmp(e->name, name) == 0)
      return e;
  return NULL;
}

static void entry_free(struct wr_resolver *res, struct entry *e) {
  struct entry **pp = &res->buckets[bucket_of(e->name, e->fam)];

  assert(e->flight == NULL);
  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  lru_unlink(res, e);
  res->nentries--;
  free(e->name);
  free(e);
}

/* The least recently used entry that no flight holds goes first. */
static void cache_make_room(struct wr_resolver *res) {
  struct entry *e = res->lru_tail;

  while (res->nentries >= WR_RESOLVE_CACHE_MAX && e != NULL) {
    struct entry *prev = e->lru_prev;
    if (e->flight == NULL)
      entry_free(res, e);
    e = prev;
  }
}

static struct entry *cache_add(struct wr_resolver *res, const char *name,
                               int fam) {
  struct entry *e = xcalloc(1, sizeof(*e));
  size_t b = bucket_of(name, fam);

  cache_make_room(res);
  e->name = xstrdup(name);
  e->fam = fam;
  e->hnext = res->buckets[b];
  res->buckets[b] = e;
  lru_front(res, e);
  res->nentries++;
  return e;
}

static bool entry_fresh(const struct wr_resolver *res, const struct entry *e) {
  return e->answered && uv_now(res->n->loop) < e->expires_ms;
}

static uint32_t clamp_ttl(int ttl) {
  if (ttl < WR_RESOLVE_TTL_MIN_S)
    return WR_RESOLVE_TTL_MIN_S;
  if (ttl > WR_RESOLVE_TTL_MAX_S)
    return WR_RESOLVE_TTL_MAX_S;
  return (uint32_t)ttl;
}

/* ---- requests ----------------------------------------------------------- */

static void on_deliver(uv_timer_t *t);

static void grace_unlink(struct wr_resolver *res, struct wr_resolve_req *r) {
  if (!r->in_grace)
    return;
  r->in_grace = false;
  if (r->gprev != NULL)
    r->gprev->gnext = r->gnext;
  else
    res->grace_head = r->gnext;
  if (r->gnext != NULL)
    r->gnext->gprev = r->gprev;
  else
    res->grace_tail = r->gprev;
  r->gprev = r->gnext = NULL;
}

static void queue_ready(struct wr_resolver *res, struct wr_resolve_req *r) {
  grace_unlink(res, r);
  if (r->queued)
    return;
  r->queued = true;
  r->next = NULL;
  if (res->ready_tail != NULL)
    res->ready_tail->next = r;
  else
    res->ready = r;
  res->ready_tail = r;
  if (res->open)
    uv_timer_start(&res->deliver, on_deliver, 0, 0);
}

static void leave(struct waiter *w);
static void fam_done(struct wr_resolve_req *r, int fam, int code,
                     const char *msg);

/* The families still awaited get up to WR_RESOLVE_FAMILY_WAIT_MS more;
 * then the request goes with the addresses it has. */
static void on_grace(uv_timer_t *t) {
  struct wr_resolver *res = t->data;
  uint64_t now = uv_now(res->n->loop);

  while (res->grace_head != NULL && res->grace_head->other_by_ms <= now) {
    struct wr_resolve_req *r = res->grace_head;
    grace_unlink(res, r);
    for (int fam = 0; fam < FAMILIES; fam++) {
      if (!r->fam[fam].want || r->fam[fam].done)
        continue;
      leave(&r->w[fam]);
      fam_done(r, fam, ETIMEDOUT, "no answer in time");
    }
  }
  if (res->grace_head != NULL)
    uv_timer_start(&res->grace, on_grace, res->grace_head->other_by_ms - now,
                   0);
}

/* One family has addresses: a server that is slow to answer (or never
 * answers) the other holds the request only a moment longer. Every
 * request waits the same time, so the list stays in deadline order. */
static void grace_start(struct wr_resolver *res, struct wr_resolve_req *r) {
  if (r->in_grace || !res->open)
    return;
  r->in_grace = true;
  r->other_by_ms = uv_now(res->n->loop) + WR_RESOLVE_FAMILY_WAIT_MS;
  r->gprev = res->grace_tail;
  if (res->grace_tail != NULL)
    res->grace_tail->gnext = r;
  else
    res->grace_head = r;
  res->grace_tail = r;
  if (res->grace_head == r)
    uv_timer_start(&res->grace, on_grace, WR_RESOLVE_FAMILY_WAIT_MS, 0);
}

static void fam_done(struct wr_resolve_req *r, int fam, int code,
                     const char *msg) {
  struct fam_result *fr = &r->fam[fam];

  if (fr->done)
    return;
  fr->done = true;
  fr->code = code;
  if (msg != NULL)
    wr_strlcpy(fr->msg, msg, sizeof(fr->msg));
  if (--r->pending == 0)
    queue_ready(r->res, r);
  else if (fr->naddrs > 0)
    grace_start(r->res, r);
}

static void fam_from_entry(struct wr_resolve_req *r, int fam,
                           const struct entry *e) {
  for (size_t i = 0; i < e->naddrs; i++)
    add_addr(&r->fam[fam], &e->addrs[i]);
  fam_done(r, fam, e->failed ? e->err_code : 0, e->failed ? e->err_msg : NULL);
}

/* ---- waiting on a flight ------------------------------------------------ */

/* Whether another waiter of the same sandbox already holds its slot. */
static struct waiter *sandbox_waiter(const struct flight *f,
                                     const struct wr_net_sb *sb,
                                     const struct waiter *except) {
  for (struct waiter *w = f->waiters; w != NULL; w = w->next)
    if (w != except && w->r->sb == sb && w->counted)
      return w;
  return NULL;
}

static int join(struct flight *f, struct waiter *w) {
  struct wr_net_sb *sb = w->r->sb;

  if (sb != NULL && sandbox_waiter(f, sb, NULL) == NULL) {
    if (sb->resolving >= WR_RESOLVE_PER_SANDBOX)
      return -1;
    sb->resolving++;
    w->counted = true;
  }
  w->f = f;
  w->prev = NULL;
  w->next = f->waiters;
  if (f->waiters != NULL)
    f->waiters->prev = w;
  f->waiters = w;
  return 0;
}

/* A waiter that leaves hands its sandbox's slot to another waiter of the
 * same sandbox, if there is one. */
static void leave(struct waiter *w) {
  struct flight *f = w->f;
  struct waiter *heir;

  if (f == NULL)
    return;
  if (w->prev != NULL)
    w->prev->next = w->next;
  else
    f->waiters = w->next;
  if (w->next != NULL)
    w->next->prev = w->prev;
  w->f = NULL;
  w->prev = w->next = NULL;
  if (!w->counted)
    return;
  w->counted = false;
  heir = NULL;
  for (struct waiter *o = f->waiters; o != NULL && heir == NULL; o = o->next)
    if (o->r->sb == w->r->sb)
      heir = o;
  if (heir != NULL)
    heir->counted = true;
  else
    w->r->sb->resolving--;
}

/* ---- flights ------------------------------------------------------------ */

static void arm_ares_timer(struct wr_resolver *res);
static void arm_deadline(struct wr_resolver *res);

static void fq_unlink(struct wr_resolver *res, struct flight *f) {
  if (f->qprev != NULL)
    f->qprev->qnext = f->qnext;
  else if (res->fq_head == f)
    res->fq_head = f->qnext;
  if (f->qnext != NULL)
    f->qnext->qprev = f->qprev;
  else if (res->fq_tail == f)
    res->fq_tail = f->qprev;
  f->qprev = f->qnext = NULL;
}

/* Every waiter gets the entry's answer; the flight leaves the entry and
 * the queue, and is freed unless c-ares still holds it. */
static void flight_end(struct flight *f) {
  struct wr_resolver *res = f->res;
  struct entry *e = f->e;

  if (res == NULL)
    return;
  fq_unlink(res, f);
  res->nflights--;
  f->e = NULL;
  f->res = NULL;
  e->flight = NULL;
  while (f->waiters != NULL) {
    struct waiter *w = f->waiters;
    leave(w);
    fam_from_entry(w->r, w->fam, e);
  }
  if (!f->in_ares)
    free(f);
}

static void entry_fail(struct wr_resolver *res, struct entry *e, int code,
                       const char *msg) {
  uint64_t now = uv_now(res->n->loop);

  e->answered = e->failed = true;
  e->naddrs = 0;
  e->err_code = code;
  wr_strlcpy(e->err_msg, msg, sizeof(e->err_msg));
  e->fetched_ms = now;
  /* "No address of this family" is an answer, not a failure: a registry
   * without IPv6 says so for every connection. */
  e->ttl_s =
      code == ENODATA ? WR_RESOLVE_NODATA_TTL_S : WR_RESOLVE_FAIL_TTL_MS / 1000;
  e->expires_ms = now + (code == ENODATA ? WR_RESOLVE_NODATA_TTL_S * 1000ull
                                         : WR_RESOLVE_FAIL_TTL_MS);
  if (code != ENODATA)
    res->stats.failures[e->fam]++;
}

/* c-ares's statuses, as the callers (and the DNS server) tell them. */
static int ares_errno(int status) {
  switch (status) {
  case ARES_ENOTFOUND:
  case ARES_ENONAME:
    return ENOENT;
  case ARES_ENODATA:
    return ENODATA;
  case ARES_ETIMEOUT:
    return ETIMEDOUT;
  case ARES_ECANCELLED:
  case ARES_EDESTRUCTION:
    return ECANCELED;
  case ARES_ENOMEM:
    return ENOMEM;
  default:
    return EIO;
  }
}

static void entry_answer(struct wr_resolver *res, struct entry *e,
                         const struct ares_addrinfo *ai) {
  uint64_t now = uv_now(res->n->loop);
  int ttl = INT32_MAX;

  e->naddrs = 0;
  for (const struct ares_addrinfo_node *nd = ai->nodes; nd != NULL;
       nd = nd->ai_next) {
    struct wr_net_addr a;
    if (!wr_net_addr_from_sockaddr(nd->ai_addr, &a, NULL) ||
        a.family != fam_af(e->fam))
      continue;
    add_to(e->addrs, &e->naddrs, &a);
    ttl = WR_MIN(ttl, nd->ai_ttl);
  }
  if (e->naddrs == 0) {
    entry_fail(res, e, ENODATA, "no address");
    return;
  }
  e->answered = true;
  e->failed = false;
  e->ttl_s = clamp_ttl(ttl);
  e->fetched_ms = now;
  e->expires_ms = now + (uint64_t)e->ttl_s * 1000;
}

static void on_ares(void *arg, int status, int timeouts,
                    struct ares_addrinfo *ai) {
  struct flight *f = arg;
  struct wr_resolver *res = f->res;

  (void)timeouts;
  f->in_ares = false;
  if (res == NULL) { /* ended by its deadline or the shutdown */
    ares_freeaddrinfo(ai);
    free(f);
    return;
  }
  if (status == ARES_SUCCESS && ai != NULL)
    entry_answer(res, f->e, ai);
  else if (ares_errno(status) == ENODATA)
    entry_fail(res, f->e, ENODATA, "no address");
  else
    entry_fail(res, f->e, ares_errno(status), ares_strerror(status));
  ares_freeaddrinfo(ai);
  flight_end(f);
}

/* Start a flight for e. c-ares may answer inside ares_getaddrinfo (its
 * hosts file, an early error), so the caller's waiter joins first and the
 * flight is not touched after the call. */
static void flight_start(struct wr_resolver *res, struct entry *e,
                         struct waiter *first) {
  struct ares_addrinfo_hints hints = {.ai_family = fam_af(e->fam),
                                      .ai_socktype = SOCK_STREAM};
  struct flight *f = xcalloc(1, sizeof(*f));

  f->res = res;
  f->e = e;
  f->deadline_ms = uv_now(res->n->loop) + WR_RESOLVE_WAIT_MS;
  e->flight = f;
  e->queries++;
  res->stats.queries[e->fam]++;
  res->nflights++;
  f->qprev = res->fq_tail;
  if (res->fq_tail != NULL)
    res->fq_tail->qnext = f;
  else
    res->fq_head = f;
  res->fq_tail = f;
  if (join(f, first) < 0)
    assert(!"a new flight always has room for its first waiter");
  if (res->fq_head == f)
    arm_deadline(res);
  f->in_ares = true;
  ares_getaddrinfo(res->channel, e->name, NULL, &hints, on_ares, f);
  arm_ares_timer(res);
}

static void on_deadline(uv_timer_t *t) {
  struct wr_resolver *res = t->data;
  uint64_t now = uv_now(res->n->loop);

  while (res->fq_head != NULL && res->fq_head->deadline_ms <= now) {
    struct flight *f = res->fq_head;
    entry_fail(res, f->e, ETIMEDOUT, "timed out");
    flight_end(f);
  }
  arm_deadline(res);
}

static void arm_deadline(struct wr_resolver *res) {
  uint64_t now;

  if (!res->open)
    return;
  if (res->fq_head == NULL) {
    uv_timer_stop(&res->deadline);
    return;
  }
  now = uv_now(res->n->loop);
  uv_timer_start(
      &res->deadline, on_deadline,
      res->fq_head->deadline_ms > now ? res->fq_head->deadline_ms - now : 0, 0);
}

/* ---- c-ares on the loop ------------------------------------------------- */

static void on_ares_timer(uv_timer_t *t) {
  struct wr_resolver *res = t->data;

  ares_process_fd(res->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
  arm_ares_timer(res);
}

static void arm_ares_timer(struct wr_resolver *res) {
  struct timeval tv, *next;

  if (!res->open || !res->channel_ok)
    return;
  next = ares_timeout(res->channel, NULL, &tv);
  if (next == NULL) {
    uv_timer_stop(&res->ares_timer);
    return;
  }
  uv_timer_start(&res->ares_timer, on_ares_timer,
                 (uint64_t)next->tv_sec * 1000 +
                     (uint64_t)(next->tv_usec + 999) / 1000,
                 0);
}

/* An error on the socket is handed to c-ares as readable and writable, so
 * that it notices and retries elsewhere. */
static void on_poll(uv_poll_t *h, int status, int events) {
  struct ares_sock *s = h->data;
  struct wr_resolver *res = s->res;
  ares_socket_t rfd = ARES_SOCKET_BAD, wfd = ARES_SOCKET_BAD;

  if (status < 0 || (events & UV_READABLE))
    rfd = s->fd;
  if (status < 0 || (events & UV_WRITABLE))
    wfd = s->fd;
  ares_process_fd(res->channel, rfd, wfd);
  arm_ares_timer(res);
}

static void on_sock_closed(uv_handle_t *h) {
  free(h->data);
}

static void sock_close(struct wr_resolver *res, struct ares_sock **pp) {
  struct ares_sock *s = *pp;

  *pp = s->next;
  uv_poll_stop(&s->poll);
  uv_close((uv_handle_t *)&s->poll, on_sock_closed);
  (void)res;
}

static void on_sock_state(void *data, ares_socket_t fd, int readable,
                          int writable) {
  struct wr_resolver *res = data;
  struct ares_sock **pp = &res->socks, *s;
  int events = (readable ? UV_READABLE : 0) | (writable ? UV_WRITABLE : 0);

  while (*pp != NULL && (*pp)->fd != fd)
    pp = &(*pp)->next;
  if (events == 0) {
    if (*pp != NULL)
      sock_close(res, pp);
    return;
  }
  s = *pp;
  if (s == NULL) {
    s = xcalloc(1, sizeof(*s));
    s->fd = fd;
    s->res = res;
    if (uv_poll_init_socket(res->n->loop, &s->poll, fd) < 0) {
      wr_warn("net: resolver: cannot watch socket %d", fd);
      free(s);
      return;
    }
    s->poll.data = s;
    s->next = res->socks;
    res->socks = s;
  }
  uv_poll_start(&s->poll, events, on_poll);
}

/* The servers named by --resolver, as c-ares's "ADDR:PORT,..." list. */
static int set_servers(struct wr_resolver *res, char *const *servers,
                       wr_error_t *err) {
  wr_buf_t csv;
  int rc;

  if (servers == NULL || servers[0] == NULL)
    return 0;
  wr_buf_init(&csv);
  for (char *const *s = servers; *s != NULL; s++)
    wr_buf_printf(&csv, "%s%s", s == servers ? "" : ",", *s);
  wr_buf_append(&csv, "", 1);
  rc = ares_set_servers_ports_csv(res->channel, csv.data);
  if (rc != ARES_SUCCESS)
    wr_error_setx(err, EINVAL, "--resolver `%s`: %s", csv.data,
                  ares_strerror(rc));
  wr_buf_free(&csv);
  return rc == ARES_SUCCESS ? 0 : -1;
}

/* No search domains: the name a sandbox asks for is the name the policy
 * judged, never that name with the host's own domain appended. */
static int channel_init(struct wr_resolver *res, char *const *servers,
                        wr_error_t *err) {
  struct ares_options o = {
      .timeout = WR_RESOLVE_TRY_MS,
      .tries = WR_RESOLVE_TRIES,
      .sock_state_cb = on_sock_state,
      .sock_state_cb_data = res,
      .lookups = (char *)"fb",
      .flags = ARES_FLAG_NOSEARCH,
      .domains = NULL,
      .ndomains = 0,
  };
  int mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_SOCK_STATE_CB |
             ARES_OPT_LOOKUPS | ARES_OPT_FLAGS | ARES_OPT_DOMAINS;
  int rc = ares_library_init(ARES_LIB_INIT_ALL);

  if (rc != ARES_SUCCESS)
    return wr_error_setx(err, EIO, "c-ares: %s", ares_strerror(rc));
  rc = ares_init_options(&res->channel, &o, mask);
  if (rc != ARES_SUCCESS) {
    ares_library_cleanup();
    return wr_error_setx(err, EIO, "c-ares: %s", ares_strerror(rc));
  }
  res->channel_ok = true;
  return set_servers(res, servers, err);
}

/* ---- the interface ------------------------------------------------------ */

/* Answer one family of r: the cache, a flight in progress, or a new one. */
static void ask(struct wr_resolver *res, struct wr_resolve_req *r,
                const char *host, int fam) {
  struct entry *e = cache_find(res, host, fam);

  if (e != NULL && e->flight == NULL && entry_fresh(res, e)) {
    lru_unlink(res, e);
    lru_front(res, e);
    res->stats.hits[fam]++;
    fam_from_entry(r, fam, e);
    return;
  }
  if (e != NULL && e->flight != NULL) {
    if (join(e->flight, &r->w[fam]) < 0) {
      res->stats.limited++;
      fam_done(r, fam, EAGAIN, "too many lookups in flight for the sandbox");
      return;
    }
    res->stats.coalesced[fam]++;
    return;
  }
  if (res->nflights >= WR_RESOLVE_INFLIGHT ||
      (r->sb != NULL && r->sb->resolving >= WR_RESOLVE_PER_SANDBOX)) {
    res->stats.limited++;
    fam_done(r, fam, EAGAIN,
             r->sb != NULL && r->sb->resolving >= WR_RESOLVE_PER_SANDBOX
                 ? "too many lookups in flight for the sandbox"
                 : "too many lookups in flight");
    return;
  }
  if (e == NULL)
    e = cache_add(res, host, fam);
  else {
    lru_unlink(res, e);
    lru_front(res, e);
  }
  flight_start(res, e, &r->w[fam]);
}

static struct wr_resolve_req *req_new(struct wr_net *n, struct wr_net_sb *sb,
                                      int family, wr_net_resolve_fn cb,
                                      void *arg, wr_error_t *err) {
  struct wr_resolve_req *r;

  if (n->shut || n->resolver == NULL) {
    wr_error_setx(err, ECANCELED, "the network engine is shut down");
    return NULL;
  }
  r = xcalloc(1, sizeof(*r));
  r->res = n->resolver;
  r->sb = sb;
  if (sb != NULL)
    wr_net_sb_ref(sb);
  r->cb = cb;
  r->arg = arg;
  for (int fam = 0; fam < FAMILIES; fam++) {
    r->w[fam].r = r;
    r->w[fam].fam = fam;
    r->fam[fam].want = family == AF_UNSPEC || family == fam_af(fam);
    r->pending += r->fam[fam].want;
  }
  return r;
}

int wr_resolve_start(struct wr_net *n, struct wr_net_sb *sb, const char *host,
                     int family, wr_net_resolve_fn cb, void *arg,
                     struct wr_resolve_req **out, wr_error_t *err) {
  struct wr_resolve_req *r = req_new(n, sb, family, cb, arg, err);
  struct wr_resolver *res;

  if (r == NULL)
    return -1;
  res = r->res;
  if (out != NULL)
    *out = r;
  if (hosts_lookup(res, host, r)) {
    res->stats.hosts++;
    for (int fam = 0; fam < FAMILIES; fam++)
      if (r->fam[fam].want)
        fam_done(r, fam, r->fam[fam].naddrs ? 0 : ENODATA, "no address");
    return 0;
  }
  for (int fam = 0; fam < FAMILIES; fam++)
    if (r->fam[fam].want)
      ask(res, r, host, fam);
  return 0;
}

void wr_resolve_cancel(struct wr_resolve_req *r) {
  if (r == NULL || r->cancelled)
    return;
  r->cancelled = true;
  for (int fam = 0; fam < FAMILIES; fam++) {
    if (r->w[fam].f == NULL)
      continue;
    leave(&r->w[fam]);
    fam_done(r, fam, ECANCELED, "cancelled");
  }
}

/* IPv4 first: a host without IPv6 routes fails over slowly otherwise. One
 * family's answer is enough; with none, the most telling error wins (no
 * such name, then a real failure, then "no address"). */
static void deliver(struct wr_resolve_req *r) {
  struct wr_net_addr addrs[FAMILIES * WR_RESOLVE_NAME_ADDRS];
  const struct fam_result *why = NULL;
  size_t naddrs = 0;
  wr_error_t err = {0};

  if (!r->cancelled && r->shut) {
    wr_error_setx(&err, ECANCELED, "the network engine is shut down");
    r->cb(r->arg, NULL, 0, &err);
  } else if (!r->cancelled) {
    for (int fam = 0; fam < FAMILIES; fam++) {
      const struct fam_result *fr = &r->fam[fam];
      if (!fr->want)
        continue;
      memcpy(addrs + naddrs, fr->addrs, fr->naddrs * sizeof(*addrs));
      naddrs += fr->naddrs;
      if (fr->code != 0 && (why == NULL || fr->code == ENOENT ||
                            (why->code == ENODATA && fr->code != ENODATA)))
        why = fr;
    }
    if (naddrs > 0)
      r->cb(r->arg, addrs, naddrs, NULL);
    else {
      wr_error_setx(&err, why ? why->code : ENODATA, "resolve: %s",
                    why ? why->msg : "no address");
      r->cb(r->arg, NULL, 0, &err);
    }
  }
  if (r->sb != NULL)
    wr_net_sb_unref(r->sb);
  free(r);
}

static void on_deliver(uv_timer_t *t) {
  struct wr_resolver *res = t->data;
  struct wr_resolve_req *r = res->ready;

  res->ready = res->ready_tail = NULL;
  while (r != NULL) {
    struct wr_resolve_req *next = r->next;
    deliver(r);
    r = next;
  }
}

static void timer_init(struct wr_resolver *res, uv_timer_t *t) {
  uv_timer_init(res->n->loop, t);
  t->data = res;
}

/* The channel first: failing, it leaves no handle on the loop. */
int wr_resolve_init(struct wr_net *n, char *const *servers, wr_error_t *err) {
  struct wr_resolver *res = xcalloc(1, sizeof(*res));

  res->n = n;
  if (channel_init(res, servers, err) < 0) {
    if (res->channel_ok) {
      ares_destroy(res->channel);
      ares_library_cleanup();
    }
    free(res);
    return -1;
  }
  n->resolver = res;
  timer_init(res, &res->ares_timer);
  timer_init(res, &res->deadline);
  timer_init(res, &res->deliver);
  timer_init(res, &res->grace);
  res->open = true;
  return 0;
}

/* Every flight ends as cancelled, then c-ares gives back its queries (their
 * callbacks find their flights ended and free them) and its sockets. */
void wr_resolve_shutdown(struct wr_net *n) {
  struct wr_resolver *res = n->resolver;

  if (res == NULL || !res->open)
    return;
  while (res->fq_head != NULL) {
    struct flight *f = res->fq_head;
    entry_fail(res, f->e, ECANCELED, "the network engine is shut down");
    flight_end(f);
  }
  for (struct wr_resolve_req *r = res->ready; r != NULL; r = r->next)
    r->shut = true;
  on_deliver(&res->deliver);
  res->open = false;
  if (res->channel_ok) {
    ares_destroy(res->channel);
    ares_library_cleanup();
    res->channel_ok = false;
  }
  while (res->socks != NULL)
    sock_close(res, &res->socks);
  uv_close((uv_handle_t *)&res->ares_timer, NULL);
  uv_close((uv_handle_t *)&res->deadline, NULL);
  uv_close((uv_handle_t *)&res->deliver, NULL);
  uv_close((uv_handle_t *)&res->grace, NULL);
}

void wr_resolve_free(struct wr_net *n) {
  struct wr_resolver *res = n->resolver;

  if (res == NULL)
    return;
  while (res->lru_head != NULL)
    entry_free(res, res->lru_head);
  hosts_clear(res);
  free(res);
  n->resolver = NULL;
}

/* ---- what the cache says ------------------------------------------------ */

void wr_net_resolver_stats(const struct wr_net *n,
                           struct wr_net_resolver_stats *out) {
  memset(out, 0, sizeof(*out));
  if (n->resolver == NULL)
    return;
  *out = n->resolver->stats;
  out->entries = n->resolver->nentries;
  out->inflight = n->resolver->nflights;
}

bool wr_net_resolver_peek(const struct wr_net *n, const char *host, int family,
                          struct wr_net_cached *out) {
  struct wr_resolver *res = n->resolver;
  struct entry *e;
  uint64_t now;

  memset(out, 0, sizeof(*out));
  if (res == NULL || (family != AF_INET && family != AF_INET6))
    return false;
  e = cache_find(res, host, family == AF_INET ? 0 : 1);
  if (e == NULL)
    return false;
  now = uv_now(res->n->loop);
  out->answered = e->answered;
  out->fresh = entry_fresh(res, e);
  out->inflight = e->flight != NULL;
  out->failed = e->failed;
  out->naddrs = e->naddrs;
  memcpy(out->addrs, e->addrs, e->naddrs * sizeof(*e->addrs));
  out->ttl_s = e->ttl_s;
  out->age_ms = e->answered ? now - e->fetched_ms : 0;
  out->ttl_left_ms = out->fresh ? e->expires_ms - now : 0;
  out->queries = e->queries;
  wr_strlcpy(out->error, e->failed ? e->err_msg : "", sizeof(out->error));
  return true;
}

/* ---- wr_net_resolve ----------------------------------------------------- */

int wr_net_resolve(struct wr_net *n, const char *host, wr_net_resolve_fn cb,
                   void *arg, wr_error_t *err) {
  char norm[WR_HOST_MAX];
  struct wr_net_addr a;
  bool is_ip = false;
  struct wr_resolve_req *r;

  if (wr_net_normalize_host(host, norm, &is_ip, &a, err) < 0)
    return -1;
  if (!is_ip)
    return wr_resolve_start(n, NULL, norm, AF_UNSPEC, cb, arg, NULL, err);
  r = req_new(n, NULL, a.family, cb, arg, err);
  if (r == NULL)
    return -1;
  add_addr(&r->fam[a.family == AF_INET ? 0 : 1], &a);
  fam_done(r, a.family == AF_INET ? 0 : 1, 0, NULL);
  return 0;
}
