/*
 * Unit tests for src/daemon/lifecycle.c's state machine, without a
 * daemon: which operation a client may ask for in which state (and the
 * answer when it may not), operation changes through the one transition
 * function, and wakes that join the one in flight instead of starting
 * another.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "daemon/sandbox.h"

static struct wr_sandbox fake(enum wr_sandbox_state s, enum wr_sandbox_op op) {
  return (struct wr_sandbox){.name = "t", .state = s, .op = op};
}

/* The states a client may ask each operation in: the table of
 * docs/lifecycle.md. */
static void test_can(void **state) {
  static const struct {
    enum wr_sandbox_op op;
    unsigned from; /* bit per state */
  } want[] = {
      {WR_OP_STARTING, 1u << WR_SB_STOPPED | 1u << WR_SB_ERROR},
      {WR_OP_STOPPING, 1u << WR_SB_RUNNING | 1u << WR_SB_PAUSED},
      {WR_OP_PAUSING, 1u << WR_SB_RUNNING},
      {WR_OP_RESUMING, 1u << WR_SB_PAUSED},
      {WR_OP_REMOVING, 1u << WR_SB_STOPPED | 1u << WR_SB_ERROR},
      {WR_OP_CREATING, 1u << WR_SB_CREATING},
  };
  (void)state;
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    for (int s = WR_SB_CREATING; s <= WR_SB_ERROR; s++) {
      struct wr_sandbox sb = fake((enum wr_sandbox_state)s, WR_OP_NONE);
      wr_error_t err = {0};
      bool ok = (want[i].from & (1u << s)) != 0;
      assert_int_equal(wr_sandbox_can(&sb, want[i].op, &err), ok ? 0 : -1);
      if (!ok) {
        assert_int_equal(err.code, ESRCH);
        assert_non_null(
            strstr(err.msg, wr_sandbox_state_name((enum wr_sandbox_state)s)));
      }
    }
  }
}

/* Another operation in flight: busy, naming it, whatever the state. */
static void test_busy(void **state) {
  struct wr_sandbox sb = fake(WR_SB_RUNNING, WR_OP_PAUSING);
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(wr_sandbox_can(&sb, WR_OP_STOPPING, &err), -1);
  assert_int_equal(err.code, EBUSY);
  assert_string_equal(err.msg, "sandbox `t` is busy (pausing)");
  sb.op = WR_OP_STOPPING_TO_REMOVE;
  assert_int_equal(wr_sandbox_can(&sb, WR_OP_REMOVING, &err), -1);
  assert_string_equal(err.msg, "sandbox `t` is busy (stopping)");
}

/* Operation changes the table allows; the state (and the store) stay. */
static void test_op_changes(void **state) {
  struct wr_sandbox sb = fake(WR_SB_PAUSED, WR_OP_NONE);

  (void)state;
  wr_sandbox_transition(&sb, WR_SB_PAUSED, WR_OP_RESUMING, false, NULL);
  assert_int_equal(sb.op, WR_OP_RESUMING);
  /* warren-init exited during the resume: it becomes a stop. */
  wr_sandbox_transition(&sb, WR_SB_PAUSED, WR_OP_STOPPING, false, NULL);
  assert_int_equal(sb.op, WR_OP_STOPPING);
  wr_sandbox_transition(&sb, WR_SB_PAUSED, WR_OP_NONE, false, NULL);
  assert_int_equal(sb.op, WR_OP_NONE);
  assert_int_equal(sb.state, WR_SB_PAUSED);
  assert_null(wr_sandbox_op_name(WR_OP_NONE));
  assert_string_equal(wr_sandbox_op_name(WR_OP_STOPPING_TO_REMOVE), "stopping");
}

static int calls;

static void count(struct wr_sandbox *sb, void *arg, const wr_error_t *err) {
  (void)sb;
  (void)arg;
  (void)err;
  calls++;
}

static size_t waiters(const struct wr_sandbox *sb) {
  size_t n = 0;

  for (const struct wr_sandbox_waiter *w = sb->waiters; w != NULL; w = w->next)
    n++;
  return n;
}

static void free_waiters(struct wr_sandbox *sb) {
  while (sb->waiters != NULL) {
    struct wr_sandbox_waiter *w = sb->waiters;
    sb->waiters = w->next;
    free(w->fn == count ? NULL : w->arg); /* a wake's retry record */
    free(w);
  }
}

/* Nothing to wake: running, stopped, stopping. Wakes during a resume
 * join it (one thaw); during a pause they wait for it to end. */
static void test_wake_joins(void **state) {
  struct wr_sandbox sb = fake(WR_SB_RUNNING, WR_OP_NONE);

  (void)state;
  calls = 0;
  assert_int_equal(wr_sandbox_wake(&sb, WR_WAKE_EXEC, count, NULL), 1);
  sb.state = WR_SB_STOPPED;
  assert_int_equal(wr_sandbox_wake(&sb, WR_WAKE_EXEC, count, NULL), 1);
  sb = fake(WR_SB_PAUSED, WR_OP_STOPPING);
  assert_int_equal(wr_sandbox_wake(&sb, WR_WAKE_PORT, count, NULL), 1);
  assert_int_equal(waiters(&sb), 0);

  sb = fake(WR_SB_PAUSED, WR_OP_RESUMING);
  for (int i = 0; i < 5; i++)
    assert_int_equal(wr_sandbox_wake(&sb, WR_WAKE_FILES, count, NULL), 0);
  assert_int_equal(waiters(&sb), 5);
  assert_int_equal(sb.op, WR_OP_RESUMING);
  free_waiters(&sb);

  sb = fake(WR_SB_RUNNING, WR_OP_PAUSING);
  assert_int_equal(wr_sandbox_wake(&sb, WR_WAKE_ATTACH, count, NULL), 0);
  assert_int_equal(waiters(&sb), 1);
  assert_int_equal(sb.op, WR_OP_PAUSING);
  free_waiters(&sb);
  assert_int_equal(calls, 0);
  assert_string_equal(wr_wake_by_name(WR_WAKE_PORT), "port");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_can),
      cmocka_unit_test(test_busy),
      cmocka_unit_test(test_op_changes),
      cmocka_unit_test(test_wake_joins),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
