/*
 * Fuzz clone mode's repository check (src/common/gitrepo.c), which reads
 * a directory that a sandbox may have written: the input is a .git file,
 * then (after a NUL) a packed-refs file, put in a small working tree
 * beside a real repository outside it, with symlinks out of the tree and
 * FIFOs in it. Aborts if a git directory outside the tree is ever
 * accepted; a FIFO opened would hang, which libFuzzer reports as a
 * timeout.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "common/common.h"

struct world {
  char base[64];
  char tree[128], store[128], outside[128];
  int top;
};

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_gitrepo: %s\n", what);
    abort();
  }
}

static void put(const char *dir, const char *name, const void *data,
                size_t len) {
  _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  check(fd >= 0 && wr_write_all(fd, data, len, NULL) == 0, "write a file");
  close(fd);
}

/* What `git init` makes, in dir. */
static void skeleton(const char *dir) {
  static const char *const dirs[] = {"objects", "refs", "refs/heads"};

  check(mkdir(dir, 0755) == 0, "mkdir");
  for (size_t i = 0; i < WR_ARRAY_SIZE(dirs); i++) {
    _cleanup_free_ char *p = xasprintf("%s/%s", dir, dirs[i]);
    check(mkdir(p, 0755) == 0, "mkdir");
  }
  put(dir, "HEAD", "ref: refs/heads/main\n", 21);
  put(dir, "config", "[core]\n", 7);
}

static struct world the_world;

static void remove_world(void) {
  wr_rm_rf(the_world.base, NULL);
}

static struct world *world(void) {
  struct world *w = &the_world;
  _cleanup_free_ char *p = NULL;

  if (w->base[0] != '\0')
    return w;
  snprintf(w->base, sizeof(w->base), "/tmp/wr-fuzz-gitrepo-XXXXXX");
  check(mkdtemp(w->base) != NULL, "mkdtemp");
  snprintf(w->tree, sizeof(w->tree), "%s/tree", w->base);
  snprintf(w->store, sizeof(w->store), "%s/store", w->tree);
  snprintf(w->outside, sizeof(w->outside), "%s/outside", w->base);
  check(mkdir(w->tree, 0755) == 0, "mkdir tree");
  skeleton(w->store);
  skeleton(w->outside);
  put(w->outside, "refs/heads/main", "x\n", 2);
  p = xasprintf("%s/fifo", w->tree);
  check(mkfifo(p, 0644) == 0, "mkfifo");
  free(p);
  p = xasprintf("%s/refs/heads/fifo", w->store);
  check(mkfifo(p, 0644) == 0, "mkfifo");
  free(p);
  p = xasprintf("%s/out", w->tree);
  check(symlink("../outside", p) == 0, "symlink");
  free(p);
  p = xasprintf("%s/abs", w->tree);
  check(symlink(w->outside, p) == 0, "symlink");
  w->top = open(w->tree, O_PATH | O_DIRECTORY | O_CLOEXEC);
  check(w->top >= 0, "open the tree");
  atexit(remove_world);
  return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct world *w = world();
  const uint8_t *nul = memchr(data, 0, size);
  size_t first = nul ? (size_t)(nul - data) : size;
  char *gd = NULL;

  put(w->tree, ".git", data, first);
  if (nul != NULL)
    put(w->store, "packed-refs", nul + 1, size - first - 1);
  if (wr_gitrepo_check(w->top, "tree", &gd, NULL) == 0) {
    size_t n = strlen(w->tree);
    check(strncmp(gd, w->tree, n) == 0 && gd[n] == '/',
          "a git directory outside the tree was accepted");
    free(gd);
  }
  return 0;
}
