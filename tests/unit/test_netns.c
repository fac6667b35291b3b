/*
 * Unit tests for the sandbox's network namespace (src/runtime/netns.c):
 * the rule set that libnftables loads is in force in each new namespace,
 * in that namespace only, and nothing of the library stays open. Real
 * namespaces, so they need root; they skip without it (and fail under
 * WARREN_MUST_WORK=1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <nftables/libnftables.h>

#include "common/common.h"
#include "runtime/runtime_internal.h"

#define SO_ORIGINAL_DST 80 /* <linux/netfilter_ipv4.h> */

static void need_root(void) {
  if (geteuid() == 0)
    return;
  if (getenv("WARREN_MUST_WORK") != NULL)
    fail_msg("network namespaces need root");
  skip();
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;

  assert_non_null(d);
  while ((e = readdir(d)) != NULL)
    n += e->d_name[0] != '.';
  closedir(d);
  return n - 1; /* the directory's own */
}

/* Run fn in the namespace `netns` on this thread, then come home. */
static void in_netns(int netns, void (*fn)(const struct wr_netns *),
                     const struct wr_netns *ns) {
  int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);

  assert_true(home >= 0);
  assert_int_equal(setns(netns, CLONE_NEWNET), 0);
  fn(ns);
  assert_int_equal(setns(home, CLONE_NEWNET), 0);
  close(home);
}

/* A connect() to an outside address reaches warrend's proxy listener,
 * which reads where it was going; UDP to elsewhere than port 53 is
 * dropped at once. */
static void check_redirect(const struct wr_netns *ns) {
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(8080)};
  struct sockaddr_in orig;
  socklen_t len = sizeof(orig);
  struct pollfd p = {.fd = ns->listen[WR_NET_PROXY4], .events = POLLIN};
  int c, a, u;

  inet_pton(AF_INET, "192.0.2.7", &to.sin_addr);
  c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  assert_true(c >= 0);
  assert_true(connect(c, (struct sockaddr *)&to, sizeof(to)) == 0 ||
              errno == EINPROGRESS);
  assert_int_equal(poll(&p, 1, 2000), 1);
  a = accept4(ns->listen[WR_NET_PROXY4], NULL, NULL, SOCK_CLOEXEC);
  assert_true(a >= 0);
  assert_int_equal(getsockopt(a, SOL_IP, SO_ORIGINAL_DST, &orig, &len), 0);
  assert_int_equal(orig.sin_addr.s_addr, to.sin_addr.s_addr);
  assert_int_equal(ntohs(orig.sin_port), 8080);
  close(a);
  close(c);
  u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  assert_true(u >= 0);
  assert_int_equal(sendto(u, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)),
                   -1);
  assert_int_equal(errno, EPERM);
  close(u);
}

/* The namespace holds warren's table once: a load for a later namespace
 * never lands in an earlier one. */
static void check_one_table(const struct wr_netns *ns) {
  struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
  const char *out, *first;

  (void)ns;
  assert_non_null(nft);
  assert_int_equal(nft_ctx_buffer_output(nft), 0);
  assert_int_equal(nft_run_cmd_from_buffer(nft, "list tables"), 0);
  out = nft_ctx_get_output_buffer(nft);
  first = strstr(out, "table inet warren");
  assert_non_null(first);
  assert_null(strstr(first + 1, "table"));
  nft_ctx_free(nft);
}

static void test_filter_in_force(void **state) {
  struct wr_netns_pool *pool = NULL;
  struct wr_netns ns;
  wr_error_t err = {0};

  (void)state;
  need_root();
  assert_int_equal(wr_netns_pool_new(0, &pool, &err), 0);
  if (wr_netns_take(pool, &ns, &err) < 0)
    fail_msg("%s", err.msg);
  in_netns(ns.fd, check_redirect, &ns);
  wr_netns_close(&ns);
  wr_netns_pool_free(pool);
}

/* Namespaces made one after another each get their own rule set, and
 * each leaves only its own descriptors open (no netlink socket of
 * libnftables' stays behind, in any namespace). */
static void test_each_namespace_its_own(void **state) {
  struct wr_netns_pool *pool = NULL;
  struct wr_netns ns[3];
  wr_error_t err = {0};
  int before, held = 0;

  (void)state;
  need_root();
  assert_int_equal(wr_netns_pool_new(0, &pool, &err), 0);
  before = count_fds();
  for (int i = 0; i < 3; i++) {
    if (wr_netns_take(pool, &ns[i], &err) < 0)
      fail_msg("%s", err.msg);
    held += 1;
    for (int j = 0; j < WR_NET_NFDS; j++)
      held += ns[i].listen[j] >= 0;
  }
  assert_int_equal(count_fds(), before + held);
  for (int i = 0; i < 3; i++) {
    in_netns(ns[i].fd, check_one_table, &ns[i]);
    in_netns(ns[i].fd, check_redirect, &ns[i]);
    wr_netns_close(&ns[i]);
  }
  assert_int_equal(count_fds(), before);
  wr_netns_pool_free(pool);
}

/* With a pool, takes get namespaces its thread prepared (or their own
 * when it is behind), all with the filter in force. */
static void test_pool(void **state) {
  struct wr_netns_pool *pool = NULL;
  struct wr_netns ns;
  wr_error_t err = {0};

  (void)state;
  need_root();
  assert_int_equal(wr_netns_pool_new(2, &pool, &err), 0);
  for (int i = 0; i < 4; i++) {
    if (wr_netns_take(pool, &ns, &err) < 0)
      fail_msg("%s", err.msg);
    in_netns(ns.fd, check_redirect, &ns);
    wr_netns_close(&ns);
  }
  wr_netns_pool_free(pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_filter_in_force),
      cmocka_unit_test(test_each_namespace_its_own),
      cmocka_unit_test(test_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
