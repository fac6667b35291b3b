/*
 * The sandbox's network namespace: loopback only, and no way out but
 * warrend's proxy.
 *
 * A namespace is prepared ahead of the sandbox that will live in it: a
 * thread of warrend, host root, unshares a new network namespace, sets it
 * up and returns to its own. The namespace therefore belongs to the
 * host's user namespace, and root inside the sandbox cannot change its
 * routes or filter rules. Setting it up:
 *
 *  - lo up, and default routes for IPv4 and IPv6 through lo. Without
 *    them, connect() to an outside address fails with ENETUNREACH before
 *    any filter rule sees it; with them, the packet reaches the nat hook.
 *  - Filter rules, loaded in-process by libnftables (a context made in
 *    the new namespace and freed before the thread leaves it, so its
 *    netlink socket and cache never serve another): every outgoing TCP
 *    connection to a non-loopback address is redirected to
 *    127.0.0.1:3128 / [::1]:3128, where warrend's proxy reads the
 *    original destination with SO_ORIGINAL_DST; UDP to port 53 goes to
 *    warrend's DNS server on 127.0.0.1:53; everything else that is not
 *    loopback (other UDP, ICMP, raw) is dropped. Loopback traffic is
 *    untouched.
 *  - The proxy's and DNS server's listening sockets, bound before any
 *    sandbox process exists. warren-init holds them (fds 6-9) for as long
 *    as the sandbox runs: warrend takes copies with pidfd_getfd, after a
 *    start and again after a restart of its own, so a sandbox process can
 *    never bind those ports first, not even while warrend is down.
 *
 * A pool thread keeps a few namespaces ready and a start only takes one
 * (spawn.c: the child setns()es into it). When the pool is empty, the
 * start prepares one itself. Loading the rules takes 0.5-0.9 ms
 * in-process (exec'ing `nft -f -` took 7-15 ms) and the unshare 0.7-1.6
 * ms on a quiet host; on a busy one (load 6 on 2 CPUs) a whole prepare
 * took 5-7 ms p50 when starts came 20 ms apart and 12-17 ms back to back,
 * against 0.02 ms for a take from the pool (a burst larger than the pool
 * pays for its own). So the pool stays.
 *
 * No packet ever leaves: the namespace has no device but lo.
 */
#include "runtime/runtime_internal.h"

#if !__has_include(<nftables/libnftables.h>)
#error "libnftables is missing: apt-get install libnftables-dev (make deps)"
#endif

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <pthread.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <nftables/libnftables.h>

/* The rule set of every sandbox. Priorities: -100 is nat's dstnat, 0 is
 * filter; the filter chain sees redirected packets with their new
 * (loopback) destination. */
static const char ruleset[] =
    "table inet warren {\n"
    "  chain redirect_out {\n"
    "    type nat hook output priority -100; policy accept;\n"
    "    ip daddr 127.0.0.0/8 return\n"
    "    ip6 daddr ::1 return\n"
    "    meta l4proto tcp redirect to :3128\n"
    "    udp dport 53 redirect to :53\n"
    "  }\n"
    "  chain filter_out {\n"
    "    type filter hook output priority 0; policy drop;\n"
    "    ip daddr 127.0.0.0/8 accept\n"
    "    ip6 daddr ::1 accept\n"
    "  }\n"
    "}\n";

/* ---- routes ------------------------------------------------------------- */

struct route_req {
  struct nlmsghdr nh;
  struct rtmsg rt;
  char attrs[64];
};

static void add_attr(struct route_req *r, unsigned short type, const void *data,
                     size_t len) {
  struct rtattr *a =
      (struct rtattr *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

  a->rta_type = type;
  a->rta_len = (unsigned short)RTA_LENGTH(len);
  memcpy(RTA_DATA(a), data, len);
  r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Send one RTM_NEWROUTE and read its acknowledgement. */
static int send_route(int nl, struct route_req *r) {
  char buf[512];
  struct nlmsghdr *h = (struct nlmsghdr *)buf;
  ssize_t n;

  if (send(nl, r, r->nh.nlmsg_len, 0) < 0)
    return -1;
  n = recv(nl, buf, sizeof(buf), 0);
  if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) ||
      h->nlmsg_type != NLMSG_ERROR) {
    errno = EPROTO;
    return -1;
  }
  if (((struct nlmsgerr *)NLMSG_DATA(h))->error != 0) {
    errno = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
    return -1;
  }
  return 0;
}

/* "ip route add default dev lo [src 127.0.0.1]" for one family. */
static int default_route(int nl, int family, int ifindex) {
  static const uint8_t lo4[4] = {127, 0, 0, 1};
  struct route_req r;

  memset(&r, 0, sizeof(r));
  r.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
  r.nh.nlmsg_type = RTM_NEWROUTE;
  r.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
  r.rt.rtm_family = (unsigned char)family;
  r.rt.rtm_table = RT_TABLE_MAIN;
  r.rt.rtm_protocol = RTPROT_BOOT;
  r.rt.rtm_scope = RT_SCOPE_LINK;
  r.rt.rtm_type = RTN_UNICAST;
  add_attr(&r, RTA_OIF, &ifindex, sizeof(ifindex));
  if (family == AF_INET)
    add_attr(&r, RTA_PREFSRC, lo4, sizeof(lo4));
  return send_route(nl, &r);
}

static int default_routes(void) {
  struct ifreq ifr = {0};
  int s, nl, r = -1;

  s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return -1;
  memcpy(ifr.ifr_name, "lo", 3);
  if (ioctl(s, SIOCGIFINDEX, &ifr) < 0) {
    close(s);
    return -1;
  }
  close(s);
  nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (nl < 0)
    return -1;
  if (default_route(nl, AF_INET, ifr.ifr_ifindex) == 0 &&
      default_route(nl, AF_INET6, ifr.ifr_ifindex) == 0)
    r = 0;
  close(nl);
  return r;
}

/* ---- warrend's listeners ------------------------------------------------ */

/* One listener on loopback. IPv6 may be off on the host: then -1 and
 * errno EAFNOSUPPORT. */
static int listen_on(int family, int type, uint16_t port) {
  struct sockaddr_storage ss = {0};
  socklen_t len;
  int one = 1, s;

  if (family == AF_INET) {
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*in);
  } else {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    in6->sin6_addr = in6addr_loopback;
    len = sizeof(*in6);
  }
  s = socket(family, type | SOCK_CLOEXEC, 0);
  if (s < 0)
    return -1;
  /* SO_REUSEADDR on a UDP socket would let a second one, a sandbox
   * process's, bind the same port beside it; TCP listeners need it only
   * to rebind over connections in TIME_WAIT and admit no one beside. */
  if ((family == AF_INET6 &&
       setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
      (type == SOCK_STREAM &&
       setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) ||
      bind(s, (struct sockaddr *)&ss, len) < 0 ||
      (type == SOCK_STREAM && listen(s, 1024) < 0)) {
    close(s);
    return -1;
  }
  return s;
}

static int listen_all(int fds[WR_NET_NFDS], const char **step) {
  static const struct {
    int family, type;
    uint16_t port;
    const char *what;
  } socks[WR_NET_NFDS] = {
      [WR_NET_PROXY4] = {AF_INET, SOCK_STREAM, WR_NET_PROXY_PORT,
                         "listen on 127.0.0.1:3128"},
      [WR_NET_PROXY6] = {AF_INET6, SOCK_STREAM, WR_NET_PROXY_PORT,
                         "listen on [::1]:3128"},
      [WR_NET_DNS4] = {AF_INET, SOCK_DGRAM, WR_NET_DNS_PORT,
                       "listen on 127.0.0.1:53"},
      [WR_NET_DNS4_TCP] = {AF_INET, SOCK_STREAM, WR_NET_DNS_PORT,
                           "listen on 127.0.0.1:53 (TCP)"},
  };

  for (int i = 0; i < WR_NET_NFDS; i++) {
    fds[i] = listen_on(socks[i].family, socks[i].type, socks[i].port);
    if (fds[i] < 0 && !(i == WR_NET_PROXY6 &&
                        (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))) {
      *step = socks[i].what;
      return -1;
    }
  }
  return 0;
}

/* A listening TCP socket on port 53. */
static bool is_dns_listener(int fd) {
  struct sockaddr_in in;
  socklen_t len = sizeof(in);
  int listening = 0;
  socklen_t llen = sizeof(listening);

  return fd >= 0 &&
         getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &llen) == 0 &&
         listening && getsockname(fd, (struct sockaddr *)&in, &len) == 0 &&
         in.sin_family == AF_INET && ntohs(in.sin_port) == WR_NET_DNS_PORT;
}

int wr_rt_net_fds(const struct wr_rt_instance *inst, int fds[WR_NET_NFDS],
                  wr_error_t *err) {
  for (int i = 0; i < WR_NET_NFDS; i++)
    fds[i] = -1;
  for (int i = 0; i < WR_NET_NFDS; i++) {
    int type = 0;
    socklen_t len = sizeof(type);

    fds[i] = (int)syscall(SYS_pidfd_getfd, inst->pidfd, WR_NET_FD_BASE + i, 0);
    /* IPv6 off on the host: init holds /dev/null in that place. */
    if (fds[i] >= 0 &&
        getsockopt(fds[i], SOL_SOCKET, SO_TYPE, &type, &len) < 0) {
      wr_closep(&fds[i]);
      if (i == WR_NET_PROXY6)
        continue;
      errno = ENOTSOCK;
    }
    /* An init an older warrend started holds no DNS TCP listener, and
     * may hold something else in its place. */
    if (i == WR_NET_DNS4_TCP && !is_dns_listener(fds[i])) {
      wr_closep(&fds[i]);
      continue;
    }
    if (fds[i] < 0) {
      int e = errno;
      for (int j = 0; j < i; j++)
        wr_closep(&fds[j]);
      return wr_error_set(err, e, "take the sandbox's listener %d from init",
                          WR_NET_FD_BASE + i);
    }
  }
  return 0;
}

/* ---- filter rules ------------------------------------------------------- */

/*
 * libnftables keeps process-wide state: a one-time initialisation in
 * nft_ctx_new and an interface cache that every nft_run_cmd_from_buffer
 * releases. The pool thread and a start that prepares its own namespace
 * may load at the same time, so one thread at a time uses the library.
 */
static pthread_mutex_t nft_lock = PTHREAD_MUTEX_INITIALIZER;

/* nft_ctx_new exit()s the process when it cannot open its netlink socket
 * (nft_mnl_socket_open calls netlink_init_error), so ask the kernel first,
 * in this thread's namespace. */
static int probe_nfnetlink(wr_error_t *err) {
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

  if (s < 0)
    return wr_error_set(err, errno,
                        "load the sandbox's network filter: this kernel has "
                        "no netfilter netlink (nf_tables), which sandboxes "
                        "need");
  close(s);
  return 0;
}

/* The error libnftables wrote, first line only, with a hint when the
 * kernel lacks nf_tables itself (the socket opens, the batch fails). */
static int filter_error(struct nft_ctx *nft, int e, wr_error_t *err) {
  const char *buf = nft_ctx_get_error_buffer(nft);
  size_t n = buf != NULL ? strcspn(buf, "\n") : 0;
  bool no_kernel = e == EOPNOTSUPP || e == EPROTONOSUPPORT;

  if (n == 0) {
    buf = "libnftables failed";
    n = strlen(buf);
  }
  return wr_error_setx(err, e != 0 ? e : EIO,
                       "load the sandbox's network filter: %.*s%s", (int)n, buf,
                       no_kernel ? " (does this kernel have nf_tables? "
                                   "modprobe nf_tables)"
                                 : "");
}

/* Load the rule set into the namespace nsfd. The context is made here and
 * freed before the thread goes home: its netlink socket is opened in the
 * namespace it is made in, and its cache describes that namespace, so a
 * context never serves a second one. */
static int run_filter(int nsfd, wr_error_t *err) {
  struct nft_ctx *nft;
  int r = 0;

  if (setns(nsfd, CLONE_NEWNET) < 0)
    return wr_error_set(err, errno, "enter the new network namespace");
  if (probe_nfnetlink(err) < 0)
    return -1;
  nft = nft_ctx_new(NFT_CTX_DEFAULT);
  if (nft == NULL)
    return wr_error_setx(err, ENOMEM,
                         "load the sandbox's network filter: "
                         "nft_ctx_new failed");
  /* Nothing the library says may reach warrend's stdout or stderr. */
  if (nft_ctx_buffer_output(nft) != 0 || nft_ctx_buffer_error(nft) != 0)
    r = wr_error_setx(err, ENOMEM,
                      "load the sandbox's network filter: "
                      "buffer libnftables' output");
  else if (nft_run_cmd_from_buffer(nft, ruleset) != 0)
    r = filter_error(nft, errno, err);
  nft_ctx_free(nft);
  return r;
}

struct filter_job {
  int nsfd;
  int result;
  wr_error_t err;
};

/*
 * libnftables waits for the kernel's answers with select(2), whose fd_set
 * holds descriptors below FD_SETSIZE (1024) only; glibc aborts the process
 * on a larger one. warrend holds a dozen descriptors per running sandbox,
 * so from about 90 sandboxes on, the netlink socket the library opens
 * would be numbered 1024 or more. The load therefore runs in a thread of
 * its own with a private file table (unshare(CLONE_FILES)) from which
 * everything but stdio and the namespace is closed: its socket is fd 3 or
 * 4 however many warrend holds, and the table goes away with the thread.
 */
static void *filter_main(void *arg) {
  struct filter_job *job = arg;

  if (unshare(CLONE_FILES) < 0) {
    job->result = wr_error_set(&job->err, errno, "unshare the file table");
    return NULL;
  }
  if (job->nsfd > 3)
    close_range(3, (unsigned)job->nsfd - 1, 0);
  close_range((unsigned)job->nsfd + 1, ~0U, 0);
  job->result = run_filter(job->nsfd, &job->err);
  return NULL;
}

static int load_filter(int nsfd, wr_error_t *err) {
  struct filter_job job = {.nsfd = nsfd, .result = -1};
  pthread_t t;
  int e;

  pthread_mutex_lock(&nft_lock);
  e = pthread_create(&t, NULL, filter_main, &job);
  if (e == 0)
    pthread_join(t, NULL);
  pthread_mutex_unlock(&nft_lock);
  if (e != 0)
    return wr_error_set(err, e, "start the thread that loads the filter");
  if (job.result < 0)
    *err = job.err;
  return job.result;
}

/* ---- the daemon's handle on a running sandbox's namespace -------------- */

int wr_rt_open_ns(const struct wr_rt_instance *inst, const char *ns,
                  wr_error_t *err) {
  char path[64];
  int fd;

  snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)inst->pid, ns);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  /* The pid could have been reused between init's exit and the open: the
   * pidfd says whether init is still the process we opened. */
  if (syscall(SYS_pidfd_send_signal, inst->pidfd, 0, NULL, 0) < 0) {
    close(fd);
    return wr_error_set(err, ESRCH, "the sandbox's init has exited");
  }
  return fd;
}

int wr_rt_open_netns(const struct wr_rt_instance *inst, wr_error_t *err) {
  return wr_rt_open_ns(inst, "net", err);
}

/* ---- preparing a namespace (a thread of warrend) ------------------------ */

static int bring_up_lo(void) {
  struct ifreq ifr = {0};
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r;

  if (s < 0)
    return -1;
  memcpy(ifr.ifr_name, "lo", 3);
  r = ioctl(s, SIOCGIFFLAGS, &ifr);
  if (r == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    r = ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  close(s);
  return r;
}

/* Let unprivileged processes bind low ports (dev servers on :80). The
 * /proc/sys/net files show the namespace of the thread that opens them. */
static int open_low_ports(void) {
  int fd = open("/proc/sys/net/ipv4/ip_unprivileged_port_start",
                O_WRONLY | O_CLOEXEC);
  int r = 0;

  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  if (write(fd, "0", 1) != 1)
    r = -1;
  close(fd);
  return r;
}

/* Routes, listeners and the filter, in the calling thread's (new)
 * namespace. */
static int setup_inside(struct wr_netns *ns, wr_error_t *err) {
  const char *step = NULL;

  if (bring_up_lo() < 0)
    return wr_error_set(err, errno, "bring lo up");
  if (default_routes() < 0)
    return wr_error_set(err, errno, "default routes through lo");
  if (open_low_ports() < 0)
    return wr_error_set(err, errno, "ip_unprivileged_port_start");
  if (listen_all(ns->listen, &step) < 0)
    return wr_error_set(err, errno, "%s", step);
  ns->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (ns->fd < 0)
    return wr_error_set(err, errno, "open the new network namespace");
  return load_filter(ns->fd, err);
}

void wr_netns_close(struct wr_netns *ns) {
  wr_closep(&ns->fd);
  for (int i = 0; i < WR_NET_NFDS; i++)
    wr_closep(&ns->listen[i]);
}

/* The thread leaves its namespace for a new one and comes back: a thread
 * of warrend that stayed in a sandbox's namespace would dial from there. */
static int prepare(struct wr_netns *ns, wr_error_t *err) {
  _cleanup_close_ int home =
      open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  int r;

  ns->fd = -1;
  for (int i = 0; i < WR_NET_NFDS; i++)
    ns->listen[i] = -1;
  if (home < 0)
    return wr_error_set(err, errno, "open this thread's network namespace");
  if (unshare(CLONE_NEWNET) < 0)
    return wr_error_set(err, errno, "make a network namespace");
  r = setup_inside(ns, err);
  if (setns(home, CLONE_NEWNET) < 0)
    abort();
  if (r < 0)
    wr_netns_close(ns);
  return r;
}

/* ---- the pool ----------------------------------------------------------- */

struct wr_netns_pool {
  pthread_mutex_t mu;
  pthread_cond_t wake;
  pthread_t thread;
  struct wr_netns ready[WR_NETNS_POOL_MAX];
  unsigned count, size;
  bool stopping;
};

static void *pool_main(void *arg) {
  struct wr_netns_pool *p = arg;

  pthread_mutex_lock(&p->mu);
  while (!p->stopping) {
    struct wr_netns ns;
    wr_error_t err = {0};
    int r;

    if (p->count >= p->size) {
      pthread_cond_wait(&p->wake, &p->mu);
      continue;
    }
    pthread_mutex_unlock(&p->mu);
    r = prepare(&ns, &err);
    pthread_mutex_lock(&p->mu);
    if (r < 0) {
      /* Starts prepare their own and report the error; wait for one. */
      wr_warn("network namespace pool: %s", err.msg);
      pthread_cond_wait(&p->wake, &p->mu);
    } else if (p->stopping) {
      wr_netns_close(&ns);
    } else {
      p->ready[p->count++] = ns;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int wr_netns_pool_new(unsigned size, struct wr_netns_pool **out,
                      wr_error_t *err) {
  struct wr_netns_pool *p = xcalloc(1, sizeof(*p));
  int r;

  p->size = size < WR_NETNS_POOL_MAX ? size : WR_NETNS_POOL_MAX;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  if (p->size > 0 &&
      (r = pthread_create(&p->thread, NULL, pool_main, p)) != 0) {
    free(p);
    return wr_error_set(err, r, "start the network namespace pool");
  }
  *out = p;
  return 0;
}

void wr_netns_pool_free(struct wr_netns_pool *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->mu);
  if (p->size > 0)
    pthread_join(p->thread, NULL);
  for (unsigned i = 0; i < p->count; i++)
    wr_netns_close(&p->ready[i]);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  free(p);
}

int wr_netns_take(struct wr_netns_pool *p, struct wr_netns *ns,
                  wr_error_t *err) {
  bool got = false;

  pthread_mutex_lock(&p->mu);
  if (p->count > 0) {
    *ns = p->ready[--p->count];
    got = true;
  }
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->mu);
  return got ? 0 : prepare(ns, err);
}
