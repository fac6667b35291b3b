/* Time, randomness and small fd helpers. */
#include "common.h"

#include <fcntl.h>
#include <sys/random.h>
#include <time.h>

void wr_random_bytes(void *out, size_t n) {
  char *p = out;

  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      fputs("getrandom failed\n", stderr);
      abort();
    }
    p += r;
    n -= (size_t)r;
  }
}

char *wr_random_id(const char *prefix, size_t n) {
  static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  size_t plen = strlen(prefix);
  char *s = xmalloc(plen + n + 1);
  unsigned char raw[64];

  if (n > sizeof(raw))
    n = sizeof(raw);
  memcpy(s, prefix, plen);
  for (size_t i = 0; i < n; i++) {
    /* Reject bytes that would bias the distribution. */
    do
      wr_random_bytes(&raw[i], 1);
    while (raw[i] >= 252);
    s[plen + i] = alphabet[raw[i] % 36];
  }
  s[plen + n] = '\0';
  return s;
}

int64_t wr_now_ms(void) {
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t wr_mono_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void wr_format_time(int64_t ms, char *out, size_t size) {
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;

  gmtime_r(&secs, &tm);
  strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int wr_set_cloexec(int fd) {
  int flags = fcntl(fd, F_GETFD);

  if (flags < 0)
    return -1;
  return fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

int wr_set_nonblock(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);

  if (flags < 0)
    return -1;
  flags = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
  return fcntl(fd, F_SETFL, flags);
}
