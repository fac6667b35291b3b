/*
 * flood_dns: sends many cheap DNS questions to the sandbox's DNS server,
 * each a distinct name under a suffix, for the audit tests. Every question
 * is a decision of the policy, and so an entry of the connection log.
 *
 *   flood_dns COUNT SUFFIX   ask "q<i>.SUFFIX" (A) for i in 0..COUNT-1,
 *                            one at a time, each waiting up to 2 s for its
 *                            answer. Prints "answered: N of COUNT".
 *
 * One question at a time keeps the server's in-flight bound out of the
 * way: each answer is seen before the next question goes.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A query: header, then the name as labels, then type A, class IN. */
static size_t build_query(uint8_t *buf, size_t size, uint16_t id,
                          const char *name) {
  size_t len = 12;
  const char *label = name;

  memset(buf, 0, 12);
  buf[0] = (uint8_t)(id >> 8);
  buf[1] = (uint8_t)id;
  buf[2] = 0x01; /* recursion desired */
  buf[5] = 1;    /* one question */
  while (*label != '\0') {
    const char *dot = strchr(label, '.');
    size_t n = dot ? (size_t)(dot - label) : strlen(label);
    if (n == 0 || n > 63 || len + n + 6 > size)
      return 0;
    buf[len++] = (uint8_t)n;
    memcpy(buf + len, label, n);
    len += n;
    label += n + (dot != NULL);
  }
  buf[len++] = 0;
  buf[len++] = 0;
  buf[len++] = 1; /* A */
  buf[len++] = 0;
  buf[len++] = 1; /* IN */
  return len;
}

/* Wait for the answer with this id; 1 when it came. */
static int await_answer(int fd, uint16_t id) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  uint8_t buf[512];

  while (poll(&p, 1, 2000) == 1) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n >= 2 && ((buf[0] << 8) | buf[1]) == id)
      return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  struct sockaddr_in dns = {.sin_family = AF_INET, .sin_port = htons(53)};
  long count, answered = 0;
  int fd;

  if (argc != 3 || (count = strtol(argv[1], NULL, 10)) <= 0) {
    fprintf(stderr, "usage: flood_dns COUNT SUFFIX\n");
    return 2;
  }
  inet_pton(AF_INET, "127.0.0.1", &dns.sin_addr);
  fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&dns, sizeof(dns)) < 0) {
    perror("flood_dns: socket");
    return 1;
  }
  for (long i = 0; i < count; i++) {
    char name[256];
    uint8_t q[512];
    uint16_t id = (uint16_t)(i + 1);
    size_t len;

    snprintf(name, sizeof(name), "q%ld.%s", i, argv[2]);
    len = build_query(q, sizeof(q), id, name);
    if (len == 0 || send(fd, q, len, 0) != (ssize_t)len) {
      perror("flood_dns: send");
      return 1;
    }
    answered += await_answer(fd, id);
  }
  printf("answered: %ld of %ld\n", answered, count);
  return 0;
}
