/*
 * The "warren-exec" frame protocol of upgraded exec and attach
 * connections (docs/api.yaml), shared by the daemon and its clients: each
 * frame is a 1-byte type, a 4-byte big-endian payload length and the
 * payload. The decoder is incremental because frames arrive split across
 * reads at any byte.
 */
#include "api/api.h"

static void put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

void wr_frame_encode(wr_buf_t *out, uint8_t type, const void *payload,
                     size_t len) {
  unsigned char head[WR_FRAME_HDR];

  head[0] = type;
  put_be32(head + 1, (uint32_t)len);
  wr_buf_append(out, head, sizeof(head));
  wr_buf_append(out, payload, len);
}

void wr_frame_encode_resize(wr_buf_t *out, uint16_t rows, uint16_t cols) {
  unsigned char p[4] = {(unsigned char)(rows >> 8), (unsigned char)rows,
                        (unsigned char)(cols >> 8), (unsigned char)cols};

  wr_frame_encode(out, WR_FRAME_RESIZE, p, sizeof(p));
}

void wr_frame_decoder_init(struct wr_frame_decoder *d, uint32_t max) {
  wr_buf_init(&d->buf);
  d->pos = 0;
  d->max = max;
}

void wr_frame_decoder_free(struct wr_frame_decoder *d) {
  wr_buf_free(&d->buf);
  d->pos = 0;
}

/*
 * Frames handed out point into the buffer, so consumed bytes are only
 * dropped here, when new bytes come in and no frame is borrowed any more.
 */
void wr_frame_feed(struct wr_frame_decoder *d, const void *data, size_t len) {
  if (d->pos > 0) {
    wr_buf_consume(&d->buf, d->pos);
    d->pos = 0;
  }
  wr_buf_append(&d->buf, data, len);
}

/* The length comes from the peer, so it is bounded before any byte of
 * the payload is waited for. */
int wr_frame_next(struct wr_frame_decoder *d, struct wr_frame *f,
                  wr_error_t *err) {
  const unsigned char *p = (const unsigned char *)d->buf.data + d->pos;
  size_t avail = d->buf.len - d->pos;
  uint32_t len;

  if (avail < WR_FRAME_HDR)
    return 0;
  len = get_be32(p + 1);
  if (len > d->max)
    return wr_error_set(err, EMSGSIZE, "a frame of %u bytes is too large", len);
  if (avail - WR_FRAME_HDR < len)
    return 0;
  f->type = p[0];
  f->data = (const char *)p + WR_FRAME_HDR;
  f->len = len;
  d->pos += WR_FRAME_HDR + len;
  return 1;
}
