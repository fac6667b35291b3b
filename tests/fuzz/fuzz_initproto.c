/*
 * Fuzz the init control protocol's decoders with arbitrary datagrams, as
 * either end would receive them: the first input byte says how many fds
 * came with the datagram, the rest is the datagram.
 *
 * Besides "no crash, no leak, no overread", whatever decodes must encode
 * back to the very same bytes: both ends apply one set of rules, so a
 * message one end accepts is exactly a message the other could have built.
 */
#include "init/init.h"

#define HDR_SIZE sizeof(struct wr_init_hdr)

static void check_same(const wr_buf_t *b, const void *msg, size_t len) {
  if (b->len != len || memcmp(b->data, msg, len) != 0)
    abort();
}

static void check_spawn(const struct wr_init_hdr *hdr, const void *msg,
                        const void *payload) {
  struct wr_init_spawn s;
  wr_buf_t b;

  if (wr_init_decode_spawn(payload, hdr->len, &s, NULL) < 0)
    return;
  wr_buf_init(&b);
  /* The fd count is the loop's check, not the decoder's. */
  if (hdr->nfds == wr_init_spawn_nfds(s.flags)) {
    if (wr_init_encode_spawn(&b, hdr->id, &s, hdr->nfds, NULL) < 0)
      abort();
    check_same(&b, msg, HDR_SIZE + hdr->len);
  }
  wr_buf_free(&b);
  free(s.argv);
  free(s.env);
}

/* Entries may carry bytes after a string's NUL, which the encoder zeroes;
 * so compare LISTED by decoding the re-encoded message. */
static void check_listed(const struct wr_init_hdr *hdr, const void *payload) {
  struct wr_init_listed l, again = {0};
  wr_buf_t b;
  unsigned nfds;

  if (wr_init_decode_listed(payload, hdr->len, &l, NULL) < 0)
    return;
  nfds = wr_init_listed_nfds(&l);
  wr_buf_init(&b);
  if (nfds == hdr->nfds) {
    if (wr_init_encode_listed(&b, hdr->id, l.procs, l.count, l.more,
                              (uint16_t)nfds, NULL) < 0 ||
        b.len != HDR_SIZE + hdr->len ||
        wr_init_decode_listed(b.data + HDR_SIZE, hdr->len, &again, NULL) < 0)
      abort();
    for (uint32_t i = 0; i < l.count; i++)
      if (again.procs[i].proc_id != l.procs[i].proc_id ||
          again.procs[i].status != l.procs[i].status ||
          again.procs[i].started_ms != l.procs[i].started_ms ||
          strcmp(again.procs[i].tag, l.procs[i].tag) != 0 ||
          strcmp(again.procs[i].cmd, l.procs[i].cmd) != 0)
        abort();
  }
  free(again.procs);
  free(l.procs);
  wr_buf_free(&b);
}

static size_t fixed_size(uint16_t type) {
  switch (type) {
  case WR_INIT_SIGNAL:
    return sizeof(struct wr_init_signal);
  case WR_INIT_FORGET:
    return sizeof(struct wr_init_forget);
  case WR_INIT_RESULT:
    return sizeof(struct wr_init_result);
  case WR_INIT_HELLO_OK:
    return sizeof(struct wr_init_hello_ok);
  case WR_INIT_EXIT:
    return sizeof(struct wr_init_exit);
  default:
    return 0; /* HELLO, LIST */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct wr_init_hdr hdr;
  struct wr_init_spawned spawned;
  const void *payload;
  char fixed[64];
  wr_buf_t b;

  if (size < 1)
    return 0;
  if (wr_init_decode_hdr(data + 1, size - 1, data[0] % 16, &hdr, &payload,
                         NULL) < 0)
    return 0;
  /* Any valid header is one the generic encoder reproduces. */
  wr_buf_init(&b);
  if (wr_init_encode_simple(&b, hdr.type, hdr.id, payload, hdr.len, hdr.nfds) <
      0)
    abort();
  check_same(&b, data + 1, size - 1);
  wr_buf_free(&b);
  switch (hdr.type) {
  case WR_INIT_SPAWN:
    check_spawn(&hdr, data + 1, payload);
    break;
  case WR_INIT_LISTED:
    check_listed(&hdr, payload);
    break;
  case WR_INIT_SPAWNED:
    wr_init_decode_spawned(payload, hdr.len, &spawned, NULL);
    break;
  default:
    wr_init_decode_fixed(payload, hdr.len, fixed, fixed_size(hdr.type), NULL);
    break;
  }
  return 0;
}
