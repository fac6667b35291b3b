/*
 * Datagrams waiting for the daemon to read. init never blocks on the
 * daemon: it sends with a non-blocking socket, and when the socket buffer
 * is full (the default holds only about four full-size datagrams, so one
 * large LIST reply fills it while a healthy daemon is still reading) the
 * rest waits here until poll reports POLLOUT. The queue is bounded: a
 * daemon that lets it fill is not reading, and the loop drops it.
 *
 * Queued datagrams hold their own duplicates of the fds they carry: the
 * originals may be closed (a FORGET, a non-background pty master) before
 * the datagram leaves.
 */
#include "init/initd.h"

#include <fcntl.h>

/* Room for a full LIST reply of WR_INIT_MAX_PROCS entries and an EXIT for
 * each, with slack. */
#define OUTQ_MAX_BYTES (1024 * 1024)

struct wr_init_outmsg {
  struct wr_init_outmsg *next;
  size_t nfds;
  int fds[WR_INIT_MAX_FDS];
  size_t len;
  char data[];
};

void wr_init_outq_init(struct wr_init_outq *q) {
  q->head = NULL;
  q->tail = &q->head;
  q->bytes = 0;
}

static void free_msg(struct wr_init_outmsg *m) {
  for (size_t i = 0; i < m->nfds; i++)
    close(m->fds[i]);
  free(m);
}

static void pop(struct wr_init_outq *q) {
  struct wr_init_outmsg *m = q->head;

  q->head = m->next;
  if (q->head == NULL)
    q->tail = &q->head;
  q->bytes -= sizeof(*m) + m->len;
  free_msg(m);
}

void wr_init_outq_clear(struct wr_init_outq *q) {
  while (q->head != NULL)
    pop(q);
}

bool wr_init_outq_empty(const struct wr_init_outq *q) {
  return q->head == NULL;
}

int wr_init_outq_push(struct wr_init_outq *q, const void *msg, size_t len,
                      const int *fds, size_t nfds, wr_error_t *err) {
  struct wr_init_outmsg *m;

  if (nfds > WR_INIT_MAX_FDS)
    return wr_error_set(err, EINVAL, "queue %zu fds", nfds);
  if (q->bytes + sizeof(*m) + len > OUTQ_MAX_BYTES)
    return wr_error_set(err, EMSGSIZE, "%zu bytes already wait for the daemon",
                        q->bytes);
  m = xmalloc(sizeof(*m) + len);
  m->next = NULL;
  m->len = len;
  memcpy(m->data, msg, len);
  for (m->nfds = 0; m->nfds < nfds; m->nfds++) {
    m->fds[m->nfds] = fcntl(fds[m->nfds], F_DUPFD_CLOEXEC, 3);
    if (m->fds[m->nfds] < 0) {
      int saved = errno;
      free_msg(m);
      return wr_error_set(err, saved, "duplicate fd for the daemon");
    }
  }
  *q->tail = m;
  q->tail = &m->next;
  q->bytes += sizeof(*m) + len;
  return 0;
}

int wr_init_outq_flush(struct wr_init_outq *q, int sock, wr_error_t *err) {
  while (q->head != NULL) {
    struct wr_init_outmsg *m = q->head;
    wr_error_t send_err = {0};

    if (wr_init_send(sock, m->data, m->len, m->fds, m->nfds, &send_err) < 0) {
      if (send_err.code == EAGAIN)
        return 0;
      if (err != NULL)
        *err = send_err;
      return -1;
    }
    pop(q);
  }
  return 0;
}
