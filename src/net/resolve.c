/*
 * Name resolution for the proxy and the DNS server: the static hosts file
 * first (re-read when it changes), then the host's resolver through
 * uv_getaddrinfo on the threadpool, both families.
 *
 * A callback never runs inside the call that asked for it: answers known at
 * once (the hosts file, an IP literal, an early failure) wait on a queue
 * that a zero timer empties on the next loop iteration. A caller that goes
 * away cancels its request; the request then frees itself when
 * getaddrinfo returns, without touching the engine, which may be gone.
 */
#include "net/net_internal.h"

#include <netdb.h>
#include <sys/stat.h>

#define HOSTS_FILE_MAX (1u << 20)

struct wr_hosts_entry {
  struct wr_net_addr addr;
  char *name;
};

struct wr_resolve_req {
  struct wr_net *n; /* NULL once cancelled */
  uv_getaddrinfo_t gai;
  wr_net_resolve_fn cb;
  void *arg;
  bool cancelled;
  bool in_pool; /* getaddrinfo was started */
  struct wr_net_addr addrs[WR_RESOLVE_ADDRS];
  size_t naddrs;
  wr_error_t err;
  bool failed;
  struct wr_resolve_req *next; /* in the engine's ready queue */
};

/* ---- the hosts file ----------------------------------------------------- */

static void hosts_clear(struct wr_net *n) {
  for (size_t i = 0; i < n->nhosts; i++)
    free(n->hosts[i].name);
  free(n->hosts);
  n->hosts = NULL;
  n->nhosts = 0;
}

static void hosts_add(struct wr_net *n, const struct wr_net_addr *a,
                      const char *name) {
  char norm[WR_HOST_MAX];
  bool is_ip = false;

  if (wr_net_normalize_host(name, norm, &is_ip, NULL, NULL) < 0 || is_ip)
    return;
  n->hosts = xrealloc(n->hosts, (n->nhosts + 1) * sizeof(*n->hosts));
  n->hosts[n->nhosts].addr = *a;
  n->hosts[n->nhosts].name = xstrdup(norm);
  n->nhosts++;
}

/* "ADDR NAME..." per line; "#" starts a comment. */
static void hosts_parse(struct wr_net *n, char *text) {
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
      hosts_add(n, &a, tok);
  }
}

static bool same_stamp(const struct wr_net *n, const struct stat *st) {
  return n->hosts_known && n->hosts_ino == st->st_ino &&
         n->hosts_size == st->st_size &&
         n->hosts_mtime.tv_sec == st->st_mtim.tv_sec &&
         n->hosts_mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Re-read the file when its inode, size or mtime changed. It is small and
 * local; a stat per lookup is cheaper than a stale answer. */
static void hosts_refresh(struct wr_net *n) {
  _cleanup_free_ char *text = NULL;
  wr_error_t err = {0};
  struct stat st;
  size_t len;

  if (n->hosts_file == NULL)
    return;
  if (stat(n->hosts_file, &st) < 0) {
    hosts_clear(n);
    n->hosts_known = false;
    return;
  }
  if (same_stamp(n, &st))
    return;
  hosts_clear(n);
  n->hosts_known = true;
  n->hosts_ino = st.st_ino;
  n->hosts_size = st.st_size;
  n->hosts_mtime = st.st_mtim;
  if (wr_read_file(n->hosts_file, HOSTS_FILE_MAX, &text, &len, &err) < 0) {
    wr_warn("net: hosts file: %s", err.msg);
    return;
  }
  hosts_parse(n, text);
}

static void add_addr(struct wr_resolve_req *r, const struct wr_net_addr *a) {
  for (size_t i = 0; i < r->naddrs; i++)
    if (memcmp(&r->addrs[i], a, sizeof(*a)) == 0)
      return;
  if (r->naddrs < WR_RESOLVE_ADDRS)
    r->addrs[r->naddrs++] = *a;
}

/* Every address the hosts file gives the name (both families). */
static bool hosts_lookup(struct wr_net *n, const char *host,
                         struct wr_resolve_req *r) {
  hosts_refresh(n);
  for (size_t i = 0; i < n->nhosts; i++)
    if (strcmp(n->hosts[i].name, host) == 0)
      add_addr(r, &n->hosts[i].addr);
  return r->naddrs > 0;
}

/* ---- delivering --------------------------------------------------------- */

static void deliver(struct wr_resolve_req *r) {
  if (!r->cancelled) {
    if (r->failed)
      r->cb(r->arg, NULL, 0, &r->err);
    else
      r->cb(r->arg, r->addrs, r->naddrs, NULL);
  }
  free(r);
}

static void on_deliver(uv_timer_t *t) {
  struct wr_net *n = t->data;
  struct wr_resolve_req *r = n->ready;

  n->ready = n->ready_tail = NULL;
  while (r != NULL) {
    struct wr_resolve_req *next = r->next;
    deliver(r);
    r = next;
  }
}

static void queue_ready(struct wr_net *n, struct wr_resolve_req *r) {
  r->next = NULL;
  if (n->ready_tail != NULL)
    n->ready_tail->next = r;
  else
    n->ready = r;
  n->ready_tail = r;
  if (n->deliver_open)
    uv_timer_start(&n->deliver, on_deliver, 0, 0);
}

/* getaddrinfo's errors, as the DNS server answers them. */
static int gai_errno(int status) {
  switch (status) {
  case UV_EAI_NONAME:
    return ENOENT;
  case UV_EAI_NODATA:
  case UV_EAI_ADDRFAMILY:
    return ENODATA;
  case UV_EAI_AGAIN:
    return EAGAIN;
  case UV_EAI_CANCELED:
    return ECANCELED;
  case UV_EAI_MEMORY:
    return ENOMEM;
  default:
    return EIO;
  }
}

/* From the threadpool, on the loop. A cancelled request no longer knows
 * the engine and only frees itself. */
static void on_gai(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  struct wr_resolve_req *r = req->data;

  if (r->n != NULL)
    r->n->resolving--;
  if (r->cancelled) {
    uv_freeaddrinfo(res);
    free(r);
    return;
  }
  if (status < 0) {
    r->failed = true;
    wr_error_setx(&r->err, gai_errno(status), "resolve: %s",
                  uv_strerror(status));
  }
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    struct wr_net_addr a;
    if (wr_net_addr_from_sockaddr(ai->ai_addr, &a, NULL))
      add_addr(r, &a);
  }
  uv_freeaddrinfo(res);
  if (!r->failed && r->naddrs == 0) {
    r->failed = true;
    wr_error_setx(&r->err, ENODATA, "resolve: no address");
  }
  deliver(r);
}

static int start_gai(struct wr_net *n, struct wr_resolve_req *r,
                     const char *host) {
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC,
      .ai_socktype = SOCK_STREAM,
  };
  int rc;

  if (n->resolving >= WR_RESOLVE_INFLIGHT)
    return wr_error_setx(&r->err, EAGAIN, "resolve: too many lookups");
  r->gai.data = r;
  rc = uv_getaddrinfo(n->loop, &r->gai, on_gai, host, NULL, &hints);
  if (rc < 0)
    return wr_error_setx(&r->err, EIO, "resolve: %s", uv_strerror(rc));
  n->resolving++;
  r->in_pool = true;
  return 0;
}

/* ---- the interface ------------------------------------------------------ */

/* A request of the engine's, or NULL with err once it is shut down. */
static struct wr_resolve_req *req_new(struct wr_net *n, wr_net_resolve_fn cb,
                                      void *arg, wr_error_t *err) {
  struct wr_resolve_req *r;

  if (n->shut) {
    wr_error_setx(err, ECANCELED, "the network engine is shut down");
    return NULL;
  }
  r = xcalloc(1, sizeof(*r));
  r->n = n;
  r->cb = cb;
  r->arg = arg;
  return r;
}

int wr_resolve_start(struct wr_net *n, const char *host, wr_net_resolve_fn cb,
                     void *arg, struct wr_resolve_req **out, wr_error_t *err) {
  struct wr_resolve_req *r = req_new(n, cb, arg, err);

  if (r == NULL)
    return -1;
  if (out != NULL)
    *out = r;
  if (hosts_lookup(n, host, r))
    queue_ready(n, r);
  else if (start_gai(n, r, host) < 0) {
    r->failed = true;
    queue_ready(n, r);
  }
  return 0;
}

void wr_resolve_cancel(struct wr_resolve_req *r) {
  if (r == NULL || r->cancelled)
    return;
  r->cancelled = true;
  if (!r->in_pool || r->n == NULL)
    return; /* queued: on_deliver frees it */
  r->n->resolving--;
  r->n = NULL;
  /* Whether it was still waiting (then on_gai runs with UV_EAI_CANCELED)
   * or is running, on_gai frees it. */
  uv_cancel((uv_req_t *)&r->gai);
}

void wr_resolve_init(struct wr_net *n) {
  uv_timer_init(n->loop, &n->deliver);
  n->deliver.data = n;
  n->deliver_open = true;
}

void wr_resolve_shutdown(struct wr_net *n) {
  struct wr_resolve_req *r = n->ready;

  n->ready = n->ready_tail = NULL;
  if (n->deliver_open) {
    n->deliver_open = false;
    uv_close((uv_handle_t *)&n->deliver, NULL);
  }
  while (r != NULL) {
    struct wr_resolve_req *next = r->next;
    if (!r->failed)
      wr_error_setx(&r->err, ECANCELED, "the network engine is shut down");
    r->failed = true;
    r->naddrs = 0;
    deliver(r);
    r = next;
  }
}

void wr_resolve_free(struct wr_net *n) {
  hosts_clear(n);
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
    return wr_resolve_start(n, norm, cb, arg, NULL, err);
  r = req_new(n, cb, arg, err);
  if (r == NULL)
    return -1;
  add_addr(r, &a);
  queue_ready(n, r);
  return 0;
}
