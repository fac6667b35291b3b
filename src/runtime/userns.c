/*
 * User namespaces. A sandbox's user namespace maps 0..WR_ID_COUNT-1 inside
 * to its slot's range on the host. To get one without a sandbox process,
 * a short-lived child unshares CLONE_NEWUSER and waits while we write its
 * maps and open its namespace; the fd keeps the namespace alive after the
 * child is gone. The same mapping is used to id-map the image mount.
 *
 * A workspace mount uses another mapping (see workspace.c), made the same
 * way with wr_userns_create_map.
 *
 * The child shares our memory (CLONE_VM, on a small stack of its own), so
 * starting it costs no page-table copy; it only makes system calls.
 *
 * A sandbox's namespace is owned by the sandbox's own first host uid, not
 * by root. The kernel keeps per-user counts (inotify instances and
 * watches, POSIX message queue bytes, pending signals: "ucounts") at
 * every level of the user namespace tree, and at the host's level it
 * charges a namespace's users to the namespace's owner. Were root the
 * owner, every sandbox and the host's root would share one count: one
 * sandbox taking all 128 inotify instances or all 800 KiB of message
 * queues would leave none for the others, nor for host root. Owned by the
 * sandbox's uid, each sandbox has its own, with the host's per-user
 * limits. The owner has capabilities over the namespace, but no process
 * runs as that uid in the host's namespace, and the namespace owns nothing
 * but itself (the sandbox's other namespaces belong to the host's).
 */
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <linux/securebits.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int write_proc(pid_t pid, const char *file, const char *value,
                      wr_error_t *err) {
  char path[64];
  _cleanup_close_ int fd = -1;
  size_t len = strlen(value);

  snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
  fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  if (write(fd, value, len) != (ssize_t)len)
    return wr_error_set(err, errno, "write `%s`", path);
  return 0;
}

#define HELPER_STACK (64 * 1024)

struct helper {
  int ready[2], go[2];
  uid_t owner; /* 0: root owns the namespace */
};

/*
 * The child starts with a copy of the daemon's fd table, taken while other
 * threads may be in the middle of this too: a copy of another helper's
 * `go` write end kept here would keep that helper from ever seeing EOF,
 * and two helpers holding each other's would hang both threads in
 * waitpid. So the child keeps its own two pipe ends and nothing else.
 */
static void keep_only(int a, int b) {
  int lo = a < b ? a : b, hi = a < b ? b : a;

  if (lo > 0)
    close_range(0, (unsigned)lo - 1, 0);
  if (hi > lo + 1)
    close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
  close_range((unsigned)hi + 1, ~0U, 0);
}

/* The namespace's owner is the creator's effective uid. Only the
 * effective ids change, with SECBIT_NO_SETUID_FIXUP so that the
 * capabilities stay (some kernels let only a capable task create a user
 * namespace). Raw system calls: glibc's setresuid would act on every
 * thread of the daemon, whose memory this child shares. */
static int become_owner(uid_t owner) {
  if (prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0 ||
      syscall(SYS_setresgid, -1, owner, -1) < 0 ||
      syscall(SYS_setresuid, -1, owner, -1) < 0)
    return -1;
  return 0;
}

/* Runs in the child: only system calls (it shares the daemon's memory). */
static int helper_main(void *arg) {
  struct helper *h = arg;
  char c = 0;

  keep_only(h->ready[1], h->go[0]);
  if (h->owner != 0 && become_owner(h->owner) < 0)
    c = 1;
  else if (unshare(CLONE_NEWUSER) < 0)
    c = 1;
  if (write(h->ready[1], &c, 1) != 1 || c != 0)
    _exit(1);
  while (read(h->go[0], &c, 1) < 0 && errno == EINTR)
    ;
  _exit(0);
}

static int map_and_open(pid_t pid, const char *uid_map, const char *gid_map,
                        int *userns_fd, wr_error_t *err) {
  char path[64];

  if (write_proc(pid, "uid_map", uid_map, err) < 0 ||
      write_proc(pid, "gid_map", gid_map, err) < 0)
    return -1;
  snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
  *userns_fd = open(path, O_RDONLY | O_CLOEXEC);
  if (*userns_fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  return 0;
}

static int create_owned(const char *uid_map, const char *gid_map, uid_t owner,
                        int *userns_fd, wr_error_t *err) {
  struct helper h = {.owner = owner};
  char c = 1, *stack;
  int r = -1, status;
  pid_t pid;

  stack = mmap(NULL, HELPER_STACK, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    return wr_error_set(err, errno, "mmap");
  if (pipe2(h.ready, O_CLOEXEC) < 0) {
    munmap(stack, HELPER_STACK);
    return wr_error_set(err, errno, "pipe");
  }
  if (pipe2(h.go, O_CLOEXEC) < 0) {
    wr_error_set(err, errno, "pipe");
    close(h.ready[0]);
    close(h.ready[1]);
    munmap(stack, HELPER_STACK);
    return -1;
  }
  pid = clone(helper_main, stack + HELPER_STACK, CLONE_VM | SIGCHLD, &h);
  close(h.ready[1]);
  close(h.go[0]);
  if (pid < 0)
    wr_error_set(err, errno, "clone");
  else if (read(h.ready[0], &c, 1) != 1 || c != 0)
    wr_error_set(err, EPERM, "create a user namespace");
  else
    r = map_and_open(pid, uid_map, gid_map, userns_fd, err);
  close(h.go[1]);
  close(h.ready[0]);
  if (pid > 0)
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
  munmap(stack, HELPER_STACK);
  return r;
}

/* Namespaces for a mapping only (workspace mounts) run no process: root
 * may own them. */
int wr_userns_create_map(const char *uid_map, const char *gid_map,
                         int *userns_fd, wr_error_t *err) {
  return create_owned(uid_map, gid_map, 0, userns_fd, err);
}

int wr_userns_create(uint32_t slot, int *userns_fd, wr_error_t *err) {
  char map[64];

  if (slot > WR_MAX_SLOT)
    return wr_error_set(err, ERANGE, "uid slot %u is out of range", slot);
  snprintf(map, sizeof(map), "0 %u %u\n", wr_rt_id_base(slot), WR_ID_COUNT);
  return create_owned(map, map, wr_rt_id_base(slot), userns_fd, err);
}
