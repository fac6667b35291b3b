/*
 * Fuzz wr_tar_extract: each input is a tar stream extracted (map_ids on)
 * into a fresh root that holds hostile symlinks. Besides crashes and leaks,
 * it aborts if anything outside the root changed: BASE/sentinel (a
 * directory holding "canary"), BASE/victim (a file), or BASE itself; or if
 * a temporary file of the extractor was left in the root. The seeds
 * include sparse entries (GNU PAX 1.0, old GNU 'S' with extension blocks,
 * the refused 0.1 format) and hostile sparse maps; inputs of odd length are
 * extracted under a 4 KiB byte budget, so that path is fuzzed too.
 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common/common.h"
#include "common/tar.h"

struct world {
  char base[64];
  char root[128], sentinel[128], victim[128];
  struct stat victim_st, canary_st;
};

/* The one process-wide fixture (libFuzzer calls us many times). */
static struct world *world(void) {
  static struct world w;
  return &w;
}

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_tar: %s\n", what);
    abort();
  }
}

static void write_file(const char *path, const char *data) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  check(fd >= 0 && wr_write_all(fd, data, strlen(data), NULL) == 0,
        "write fixture file");
  close(fd);
}

/* Only these names may exist in dir. */
static void check_only(const char *dir, const char *const *names, size_t n) {
  DIR *d = opendir(dir);
  struct dirent *de;

  check(d != NULL, "open a directory outside the root");
  while ((de = readdir(d)) != NULL) {
    bool known = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    for (size_t i = 0; i < n; i++)
      known = known || strcmp(de->d_name, names[i]) == 0;
    if (!known)
      fprintf(stderr, "fuzz_tar: `%s/%s` appeared\n", dir, de->d_name);
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
}

/* The input being extracted: an archive may name a file ".warren-tar-..."
 * itself, and that one is meant to be there. */
static const uint8_t *cur_data;
static size_t cur_size;

static int no_temp_file(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw) {
  const char *name = path + ftw->base;

  (void)st;
  (void)flag;
  if (strncmp(name, ".warren-tar-", 12) == 0 &&
      memmem(cur_data, cur_size, name, strlen(name)) == NULL) {
    fprintf(stderr, "fuzz_tar: `%s` was left behind\n", path);
    abort();
  }
  return 0;
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

  snprintf(w->base, sizeof(w->base), "%s/wr-fuzz-tar-XXXXXX",
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
  return 0;
}

/* A fresh root with links out of it for the archive to build on. */
static int fresh_root(const struct world *w) {
  char path[256];
  int fd;

  check(wr_rm_rf(w->root, NULL) == 0 && mkdir(w->root, 0755) == 0,
        "reset the root");
  snprintf(path, sizeof(path), "%s/out", w->root);
  check(symlink(w->sentinel, path) == 0, "symlink");
  snprintf(path, sizeof(path), "%s/victim", w->root);
  check(symlink(w->victim, path) == 0, "symlink");
  snprintf(path, sizeof(path), "%s/up", w->root);
  check(symlink("../..", path) == 0, "symlink");
  snprintf(path, sizeof(path), "%s/abs", w->root);
  check(symlink("/", path) == 0, "symlink");
  fd = open(w->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  check(fd >= 0, "open root");
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const struct world *w = world();
  struct wr_tar_ctx c = {.id_base = 100000, .id_count = 65536, .map_ids = true};
  struct wr_tar_stats stats;
  wr_error_t err = {0};
  int in = memfd_create("fuzz-tar", MFD_CLOEXEC);

  check(in >= 0 && wr_write_all(in, data, size, NULL) == 0 &&
            lseek(in, 0, SEEK_SET) == 0,
        "memfd");
  c.rootfd = fresh_root(w);
  c.max_bytes = size % 2 ? 4096 : 0;
  if (wr_tar_extract(&c, "/", false, in, &stats, &err) < 0)
    check(err.msg[0] != '\0', "an error without a message");
  check(c.max_bytes == 0 || stats.bytes <= c.max_bytes, "over the budget");
  close(in);
  close(c.rootfd);
  check_outside(w);
  cur_data = data;
  cur_size = size;
  nftw(w->root, no_temp_file, 16, FTW_PHYS);
  return 0;
}
