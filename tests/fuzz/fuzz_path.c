/*
 * Fuzz the files API's path handling: the input is a path, then (after a
 * NUL) a second path, and every operation runs on them against a small
 * fake root full of hostile symlinks. Aborts if anything outside the root
 * changed: BASE/sentinel (a directory holding "canary"), BASE/victim, or
 * BASE itself.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/common.h"
#include "common/tar.h"
#include "runtime/files.h"

struct world {
  char base[64];
  char root[128], sentinel[128], victim[128];
  struct stat victim_st, canary_st, sentinel_st;
};

/* The one process-wide fixture (libFuzzer calls us many times). */
static struct world *world(void) {
  static struct world w;
  return &w;
}

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_path: %s\n", what);
    abort();
  }
}

static void write_file(const char *path, const char *data) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  check(fd >= 0 && wr_write_all(fd, data, strlen(data), NULL) == 0,
        "write fixture file");
  close(fd);
}

static void check_only(const char *dir, const char *const *names, size_t n) {
  DIR *d = opendir(dir);
  struct dirent *de;

  check(d != NULL, "open a directory outside the root");
  while ((de = readdir(d)) != NULL) {
    bool known = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    for (size_t i = 0; i < n; i++)
      known = known || strcmp(de->d_name, names[i]) == 0;
    if (!known)
      fprintf(stderr, "fuzz_path: `%s/%s` appeared\n", dir, de->d_name);
    check(known, "something appeared outside the root");
  }
  closedir(d);
}

static bool same_stat(const struct stat *a, const struct stat *b) {
  return a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
         a->st_nlink == b->st_nlink && a->st_uid == b->st_uid &&
         a->st_gid == b->st_gid && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
         a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static void check_outside(const struct world *w) {
  static const char *const base_names[] = {"root", "sentinel", "victim"};
  static const char *const sentinel_names[] = {"canary"};
  char canary[160];
  struct stat st;

  check_only(w->base, base_names, 3);
  check_only(w->sentinel, sentinel_names, 1);
  snprintf(canary, sizeof(canary), "%s/canary", w->sentinel);
  check(lstat(canary, &st) == 0 && same_stat(&st, &w->canary_st),
        "the canary changed");
  check(lstat(w->victim, &st) == 0 && same_stat(&st, &w->victim_st),
        "the victim changed");
  check(lstat(w->sentinel, &st) == 0 && st.st_mode == w->sentinel_st.st_mode &&
            st.st_uid == w->sentinel_st.st_uid,
        "the sentinel's mode or owner changed");
}

/* Remove the fixture on a normal exit; after a crash it stays for a look. */
static void remove_world(void) {
  wr_rm_rf(world()->base, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  struct world *w = world();
  char canary[160];
  (void)argc;
  (void)argv;

  snprintf(w->base, sizeof(w->base), "%s/wr-fuzz-path-XXXXXX",
           access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  check(mkdtemp(w->base) != NULL, "mkdtemp");
  atexit(remove_world);
  snprintf(w->root, sizeof(w->root), "%s/root", w->base);
  snprintf(w->sentinel, sizeof(w->sentinel), "%s/sentinel", w->base);
  snprintf(w->victim, sizeof(w->victim), "%s/victim", w->base);
  check(mkdir(w->sentinel, 0755) == 0, "mkdir sentinel");
  snprintf(canary, sizeof(canary), "%s/canary", w->sentinel);
  write_file(canary, "keep");
  write_file(w->victim, "victim");
  check(lstat(canary, &w->canary_st) == 0, "stat canary");
  check(lstat(w->victim, &w->victim_st) == 0, "stat victim");
  check(lstat(w->sentinel, &w->sentinel_st) == 0, "stat sentinel");
  return 0;
}

static void fixture_link(const struct world *w, const char *name,
                         const char *target) {
  char path[256];

  snprintf(path, sizeof(path), "%s/%s", w->root, name);
  check(symlink(target, path) == 0, "symlink");
}

/* The same small hostile root for every input. */
static int fresh_root(const struct world *w) {
  char path[256];
  int fd;

  check(wr_rm_rf(w->root, NULL) == 0 && mkdir(w->root, 0755) == 0,
        "reset the root");
  snprintf(path, sizeof(path), "%s/d", w->root);
  check(mkdir(path, 0755) == 0, "mkdir d");
  snprintf(path, sizeof(path), "%s/d/f", w->root);
  write_file(path, "data");
  snprintf(path, sizeof(path), "%s/d/sub", w->root);
  check(mkdir(path, 0755) == 0, "mkdir d/sub");
  snprintf(path, sizeof(path), "%s/p", w->root);
  check(mkfifo(path, 0644) == 0, "mkfifo");
  fixture_link(w, "out", w->sentinel);
  fixture_link(w, "outrel", "../sentinel");
  fixture_link(w, "victim", w->victim);
  fixture_link(w, "abs", "/");
  fixture_link(w, "up", "../../..");
  fixture_link(w, "self", "/proc/self/root");
  fixture_link(w, "loop", "loop");
  fd = open(w->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  check(fd >= 0, "open root");
  return fd;
}

/* Every operation on the two paths; their outcomes do not matter, only
 * that they stay inside and clean up after themselves. */
static void exercise(const struct wr_files_ctx *c, const char *a,
                     const char *b) {
  struct wr_files_writer *w = NULL;
  struct wr_file_info info, *v = NULL;
  bool truncated;
  size_t n = 0;
  int fd = -1;

  if (wr_files_stat(c, a, &info, NULL) == 0)
    wr_file_info_free(&info);
  if (wr_files_open_read(c, a, &fd, &info, NULL) == 0) {
    char buf[16];
    check(read(fd, buf, sizeof(buf)) >= 0, "read");
    close(fd);
    wr_file_info_free(&info);
  }
  if (wr_files_list(c, a, 3, 64, &v, &n, &truncated, NULL) == 0)
    wr_file_infos_free(v, n);
  wr_files_mkdir(c, a, 0755, true, NULL);
  if (wr_files_write_begin(c, b, 0644, false, &w, NULL) == 0) {
    check(wr_write_all(wr_files_writer_fd(w), "x", 1, NULL) == 0, "write");
    wr_files_write_commit(w, NULL);
  }
  wr_files_chmod(c, a, 0700, NULL);
  wr_files_chmod(c, b, 01777, NULL);
  wr_files_move(c, a, b, false, NULL);
  wr_files_move(c, b, a, true, NULL);
  wr_files_remove(c, b, true, NULL);
  wr_files_remove(c, a, false, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const struct world *w = world();
  struct wr_files_ctx c = {.id_base = 100000, .id_count = 65536};
  const char *end = memchr(data, '\0', size);
  size_t alen = end ? (size_t)(end - (const char *)data) : size;
  char *a = xstrndup((const char *)data, alen);
  char *b = end ? xstrndup(end + 1, size - alen - 1) : xstrdup("/d/new");

  c.rootfd = fresh_root(w);
  exercise(&c, a, b);
  close(c.rootfd);
  check_outside(w);
  free(a);
  free(b);
  return 0;
}
