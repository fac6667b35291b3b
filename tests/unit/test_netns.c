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
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

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
 * dropped at once. NULL when it is so, else what is wrong (no cmocka
 * here: a forked child runs it too). */
static const char *redirect_fails(const struct wr_netns *ns) {
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(8080)};
  struct sockaddr_in orig;
  socklen_t len = sizeof(orig);
  struct pollfd p = {.fd = ns->listen[WR_NET_PROXY4], .events = POLLIN};
  const char *why = NULL;
  int c, a = -1, u;

  inet_pton(AF_INET, "192.0.2.7", &to.sin_addr);
  c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c < 0)
    return "socket";
  if (connect(c, (struct sockaddr *)&to, sizeof(to)) < 0 &&
      errno != EINPROGRESS)
    why = "connect failed";
  else if (poll(&p, 1, 2000) != 1)
    why = "the proxy's listener got no connection";
  else if ((a = accept4(ns->listen[WR_NET_PROXY4], NULL, NULL, SOCK_CLOEXEC)) <
           0)
    why = "accept";
  else if (getsockopt(a, SOL_IP, SO_ORIGINAL_DST, &orig, &len) < 0 ||
           orig.sin_addr.s_addr != to.sin_addr.s_addr ||
           ntohs(orig.sin_port) != 8080)
    why = "SO_ORIGINAL_DST is not where the connection went";
  if (a >= 0)
    close(a);
  close(c);
  if (why != NULL)
    return why;
  u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (u < 0)
    return "socket";
  if (sendto(u, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)) != -1 ||
      errno != EPERM)
    why = "UDP to an outside address was not dropped";
  close(u);
  return why;
}

static void check_redirect(const struct wr_netns *ns) {
  const char *why = redirect_fails(ns);

  if (why != NULL)
    fail_msg("%s", why);
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

/* In a child: a new namespace from a pool of none, entered, with its
 * filter in force. An exit status for the parent (0: all is well). */
static int new_namespace_filters(void) {
  struct wr_netns_pool *pool = NULL;
  struct wr_netns ns;
  wr_error_t err = {0};
  const char *why;

  if (wr_netns_pool_new(0, &pool, &err) < 0 ||
      wr_netns_take(pool, &ns, &err) < 0) {
    fprintf(stderr, "%s\n", err.msg);
    return 4;
  }
  if (setns(ns.fd, CLONE_NEWNET) < 0)
    return 5;
  why = redirect_fails(&ns);
  if (why != NULL)
    fprintf(stderr, "%s\n", why);
  return why != NULL ? 6 : 0;
}

/* Run fn in a child (it changes the process: mounts, descriptors) and
 * expect it to exit 0. */
static void in_child(int (*fn)(void)) {
  int status = 0;
  pid_t pid = fork();

  assert_true(pid >= 0);
  if (pid == 0)
    _exit(fn());
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* The child of test_no_nft_program: nft hidden, a namespace still gets
 * its rules. Exit status 0 when it did. */
static int prepare_without_nft(void) {
  static const char *const nft[] = {"/usr/sbin/nft", "/sbin/nft",
                                    "/usr/local/sbin/nft"};

  if (unshare(CLONE_NEWNS) < 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return 2;
  for (size_t i = 0; i < WR_ARRAY_SIZE(nft); i++)
    if (access(nft[i], F_OK) == 0 &&
        mount("/dev/null", nft[i], NULL, MS_BIND, NULL) < 0)
      return 3;
  return new_namespace_filters();
}

/* The rules are loaded in-process: a host without the nft program (here
 * hidden under /dev/null in a mount namespace of the test's own) still
 * gives sandboxes their filter. */
static void test_no_nft_program(void **state) {
  (void)state;
  need_root();
  in_child(prepare_without_nft);
}

/* A daemon with many sandboxes holds more than FD_SETSIZE descriptors;
 * libnftables' select() on its netlink socket must still work (glibc
 * aborts on an fd_set bit of 1024 or more), in a child so the test's own
 * descriptors stay few. */
static int prepare_with_many_fds(void) {
  struct rlimit rl = {4096, 4096};
  int fd;

  if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
    return 2;
  do {
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  } while (fd >= 0 && fd < 1100);
  if (fd < 0)
    return 3;
  return new_namespace_filters();
}

static void test_many_descriptors(void **state) {
  (void)state;
  need_root();
  in_child(prepare_with_many_fds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_filter_in_force),
      cmocka_unit_test(test_each_namespace_its_own),
      cmocka_unit_test(test_pool),
      cmocka_unit_test(test_no_nft_program),
      cmocka_unit_test(test_many_descriptors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
