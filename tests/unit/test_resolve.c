/*
 * Unit tests for the resolver (src/net/resolve.c) against a real DNS
 * server: a thread of this test on 127.0.0.1 that counts the queries it
 * gets, answers names beginning with "hole" never, "half" only for A,
 * "nx" with NXDOMAIN, and others with A 10.9.8.7 (TTL 1, below the clamp)
 * and no AAAA. The
 * engine is told to ask only it (wr_net_config.resolvers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>

#include "net/net_internal.h"

struct dns_server {
  int fd;
  uint16_t port;
  volatile bool stop;
  int queries_a, queries_aaaa; /* atomic */
  pthread_t th;
};

static struct dns_server S;

/* The question's end and type; false for what is not a one-question
 * query. */
static bool question(const uint8_t *m, size_t len, size_t *end, int *type,
                     bool *hole, bool *nx) {
  size_t i = 12;

  if (len < 17 || m[5] != 1)
    return false;
  *hole = len > 17 &&
          (memcmp(m + 13, "hole", 4) == 0 || memcmp(m + 13, "half", 4) == 0);
  *nx = len > 15 && memcmp(m + 13, "nx", 2) == 0;
  while (i < len && m[i] != 0)
    i += 1 + m[i];
  if (i + 5 > len)
    return false;
  *type = m[i + 1] << 8 | m[i + 2];
  *end = i + 5;
  return true;
}

static void *serve(void *arg) {
  (void)arg;
  while (!S.stop) {
    uint8_t m[512], out[600];
    struct sockaddr_storage peer;
    socklen_t plen = sizeof(peer);
    struct pollfd p = {.fd = S.fd, .events = POLLIN};
    size_t end;
    int type;
    bool hole, nx;
    ssize_t n;

    if (poll(&p, 1, 50) <= 0)
      continue;
    n = recvfrom(S.fd, m, sizeof(m), 0, (struct sockaddr *)&peer, &plen);
    if (n <= 0 || !question(m, (size_t)n, &end, &type, &hole, &nx))
      continue;
    __atomic_add_fetch(type == 1 ? &S.queries_a : &S.queries_aaaa, 1,
                       __ATOMIC_SEQ_CST);
    if (hole && (type != 1 || memcmp(m + 13, "half", 4) != 0))
      continue;
    memcpy(out, m, end);
    out[2] = 0x81;
    out[3] = nx ? 0x83 : 0x80;
    out[7] = !nx && type == 1;
    out[9] = out[11] = 0;
    if (out[7])
      memcpy(out + end,
             "\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x0a\x09\x08\x07",
             16);
    sendto(S.fd, out, end + (out[7] ? 16 : 0), 0, (struct sockaddr *)&peer,
           plen);
  }
  return NULL;
}

static int group_setup(void **state) {
  struct sockaddr_in in = {.sin_family = AF_INET};
  socklen_t len = sizeof(in);

  (void)state;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  S.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (S.fd < 0 || bind(S.fd, (struct sockaddr *)&in, sizeof(in)) < 0 ||
      getsockname(S.fd, (struct sockaddr *)&in, &len) < 0)
    return -1;
  S.port = ntohs(in.sin_port);
  return pthread_create(&S.th, NULL, serve, NULL);
}

static int group_teardown(void **state) {
  (void)state;
  S.stop = true;
  pthread_join(S.th, NULL);
  close(S.fd);
  return 0;
}

struct fx {
  uv_loop_t loop;
  struct wr_net *n;
  struct wr_net_sb sb1, sb2; /* two sandboxes, as the resolver sees them */
};

static int setup(void **state) {
  struct fx *fx = xcalloc(1, sizeof(*fx));
  char server[64];
  char *servers[] = {server, NULL};
  struct wr_net_config cfg = {0};
  wr_error_t err = {0};

  snprintf(server, sizeof(server), "127.0.0.1:%u", S.port);
  uv_loop_init(&fx->loop);
  cfg.loop = &fx->loop;
  cfg.resolvers = servers;
  if (wr_net_new(&cfg, &fx->n, &err) < 0)
    fail_msg("wr_net_new: %s", err.msg);
  fx->sb1.refs = fx->sb2.refs = 1;
  fx->sb1.n = fx->sb2.n = fx->n;
  __atomic_store_n(&S.queries_a, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&S.queries_aaaa, 0, __ATOMIC_SEQ_CST);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  struct fx *fx = *state;

  wr_net_shutdown(fx->n);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  wr_net_free(fx->n);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  /* Every request gave its sandbox reference back. */
  assert_int_equal(fx->sb1.refs, 1);
  assert_int_equal(fx->sb2.refs, 1);
  assert_int_equal(fx->sb1.resolving, 0);
  free(fx);
  return 0;
}

struct answer {
  int calls;
  int code;
  size_t naddrs;
  char first[64];
};

static void on_answer(void *arg, const struct wr_net_addr *addrs, size_t naddrs,
                      const wr_error_t *err) {
  struct answer *a = arg;

  a->calls++;
  a->code = err != NULL ? err->code : 0;
  a->naddrs = naddrs;
  if (naddrs > 0)
    wr_net_addr_format(&addrs[0], a->first, sizeof(a->first));
}

static void on_stop(uv_timer_t *t) {
  uv_stop(t->loop);
}

/* Run the loop until every answer came, or ms passed. */
static void wait_answers(struct fx *fx, struct answer *a, size_t n,
                         uint64_t ms) {
  uv_timer_t t;
  uint64_t until = uv_now(&fx->loop) + ms;

  uv_timer_init(&fx->loop, &t);
  for (;;) {
    size_t done = 0;
    for (size_t i = 0; i < n; i++)
      done += a[i].calls > 0;
    if (done == n || uv_now(&fx->loop) >= until)
      break;
    uv_timer_start(&t, on_stop, 10, 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
  }
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&fx->loop, UV_RUN_NOWAIT);
}

static int queries_a(void) {
  return __atomic_load_n(&S.queries_a, __ATOMIC_SEQ_CST);
}

/* 200 lookups of one name at once: one query per family, every caller
 * answered (never inside the call), then the cache answers. */
static void test_shared_lookup_and_cache(void **state) {
  struct fx *fx = *state;
  struct answer a[200] = {{0}}, again = {0};
  struct wr_net_resolver_stats st;
  struct wr_net_cached c;
  wr_error_t err = {0};

  for (size_t i = 0; i < WR_ARRAY_SIZE(a); i++)
    assert_int_equal(wr_resolve_start(fx->n, i % 2 ? &fx->sb1 : &fx->sb2,
                                      "burst.test", AF_UNSPEC, on_answer, &a[i],
                                      NULL, &err),
                     0);
  assert_int_equal(a[0].calls, 0);
  wait_answers(fx, a, WR_ARRAY_SIZE(a), 5000);
  for (size_t i = 0; i < WR_ARRAY_SIZE(a); i++) {
    assert_int_equal(a[i].calls, 1);
    assert_string_equal(a[i].first, "10.9.8.7");
  }
  assert_int_equal(queries_a(), 1);
  assert_int_equal(__atomic_load_n(&S.queries_aaaa, __ATOMIC_SEQ_CST), 1);
  assert_int_equal(
      wr_net_resolve(fx->n, "BURST.test.", on_answer, &again, &err), 0);
  wait_answers(fx, &again, 1, 2000);
  assert_string_equal(again.first, "10.9.8.7");
  assert_int_equal(queries_a(), 1);
  wr_net_resolver_stats(fx->n, &st);
  assert_int_equal(st.queries[0], 1);
  assert_int_equal(st.coalesced[0] + st.hits[0], WR_ARRAY_SIZE(a));
  /* TTL 1 is kept for the floor; the one query is counted on the name. */
  assert_true(wr_net_resolver_peek(fx->n, "burst.test", AF_INET, &c));
  assert_int_equal(c.ttl_s, WR_RESOLVE_TTL_MIN_S);
  assert_true(c.fresh);
  assert_int_equal(c.queries, 1);
  assert_true(wr_net_resolver_peek(fx->n, "burst.test", AF_INET6, &c));
  assert_int_equal(c.naddrs, 0);
  assert_int_equal(c.ttl_s, WR_RESOLVE_NODATA_TTL_S);
}

/* A server that never answers AAAA holds a lookup of both families only
 * WR_RESOLVE_FAMILY_WAIT_MS past the A answer, not until its deadline. */
static void test_one_family_is_enough(void **state) {
  struct fx *fx = *state;
  struct answer a = {0};
  wr_error_t err = {0};

  wr_resolve_start(fx->n, &fx->sb1, "half.test", AF_UNSPEC, on_answer, &a, NULL,
                   &err);
  wait_answers(fx, &a, 1, WR_RESOLVE_WAIT_MS / 2);
  assert_int_equal(a.calls, 1);
  assert_string_equal(a.first, "10.9.8.7");
  assert_int_equal(a.naddrs, 1);
  /* The AAAA lookup goes on, and no longer holds the sandbox's place. */
  assert_int_equal(fx->sb1.resolving, 0);
}

/* NXDOMAIN is ENOENT and cached briefly: a second lookup asks nobody. */
static void test_nxdomain_cached(void **state) {
  struct fx *fx = *state;
  struct answer a = {0}, b = {0};
  wr_error_t err = {0};

  wr_resolve_start(fx->n, NULL, "nx1.test", AF_INET, on_answer, &a, NULL, &err);
  wait_answers(fx, &a, 1, 5000);
  assert_int_equal(a.code, ENOENT);
  wr_resolve_start(fx->n, NULL, "nx1.test", AF_INET, on_answer, &b, NULL, &err);
  wait_answers(fx, &b, 1, 2000);
  assert_int_equal(b.code, ENOENT);
  assert_int_equal(queries_a(), 1);
}

/* A sandbox waits on at most WR_RESOLVE_PER_SANDBOX lookups; the rest
 * fail at once with EAGAIN; its many waiters on one lookup count once;
 * another sandbox is answered meanwhile. Cancelled requests never call
 * back, and the shutdown ends the rest as cancelled. */
static void test_per_sandbox_cap(void **state) {
  struct fx *fx = *state;
  struct answer hole[WR_RESOLVE_PER_SANDBOX + 8] = {{0}}, same[50] = {{0}};
  struct answer other = {0}, cancelled = {0};
  struct wr_resolve_req *r = NULL;
  wr_error_t err = {0};
  char name[64];

  for (size_t i = 0; i < WR_ARRAY_SIZE(same); i++)
    wr_resolve_start(fx->n, &fx->sb1, "hole-same.test", AF_INET, on_answer,
                     &same[i], NULL, &err);
  for (size_t i = 0; i < WR_ARRAY_SIZE(hole); i++) {
    snprintf(name, sizeof(name), "hole%zu.test", i);
    wr_resolve_start(fx->n, &fx->sb1, name, AF_INET, on_answer, &hole[i], NULL,
                     &err);
  }
  assert_int_equal(fx->sb1.resolving, WR_RESOLVE_PER_SANDBOX);
  wr_resolve_start(fx->n, &fx->sb2, "fine.test", AF_INET, on_answer, &other,
                   NULL, &err);
  wr_resolve_start(fx->n, &fx->sb2, "hole-cancel.test", AF_INET, on_answer,
                   &cancelled, &r, &err);
  wr_resolve_cancel(r);
  wait_answers(fx, &other, 1, 3000);
  assert_string_equal(other.first, "10.9.8.7");
  /* The 50 on one name took one place: 31 distinct names got the rest. */
  for (size_t i = 0; i < WR_ARRAY_SIZE(hole); i++)
    assert_int_equal(hole[i].calls, i < WR_RESOLVE_PER_SANDBOX - 1 ? 0 : 1);
  assert_int_equal(hole[WR_RESOLVE_PER_SANDBOX].code, EAGAIN);
  assert_int_equal(same[0].calls, 0);
  assert_int_equal(cancelled.calls, 0);
  wr_net_shutdown(fx->n);
  uv_run(&fx->loop, UV_RUN_NOWAIT);
  assert_int_equal(same[49].calls, 1);
  assert_int_equal(same[49].code, ECANCELED);
  assert_int_equal(hole[0].code, ECANCELED);
  assert_int_equal(cancelled.calls, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_shared_lookup_and_cache, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_nxdomain_cached, setup, teardown),
      cmocka_unit_test_setup_teardown(test_one_family_is_enough, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_per_sandbox_cap, setup, teardown),
  };

  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
