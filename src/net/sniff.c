/*
 * The first bytes of a redirected connection: a TLS ClientHello (and the
 * server name in it), the start of an HTTP/1.x request, or something else.
 *
 * These bytes come from the sandbox, so every length read from them is
 * checked against the span that contains it before anything is read.
 * Only a ClientHello that fits in the first TLS record is understood;
 * one fragmented over several records (legal, but no client does that
 * for a hello below 16 KiB) is OTHER.
 */
#include "common/common.h"
#include "net/net_internal.h"

#define TLS_HANDSHAKE 22
#define TLS_CLIENT_HELLO 1
#define TLS_EXT_SERVER_NAME 0
#define SNI_HOST_NAME 0
#define TLS_RECORD_HEADER 5
#define TLS_RECORD_MAX 16384
/* An HTTP method is a short upper-case token; we look this far for the
 * space after it. */
#define HTTP_METHOD_MAX 16

/* A bounded view of bytes; readers advance it and fail when it is short. */
struct span {
  const uint8_t *p;
  size_t len;
};

static bool take(struct span *s, size_t n, struct span *out) {
  if (n > s->len)
    return false;
  if (out != NULL)
    *out = (struct span){s->p, n};
  s->p += n;
  s->len -= n;
  return true;
}

/* A big-endian integer of n bytes (n <= 3). */
static bool uint_be(struct span *s, size_t n, size_t *v) {
  struct span b;

  if (!take(s, n, &b))
    return false;
  *v = 0;
  for (size_t i = 0; i < n; i++)
    *v = *v << 8 | b.p[i];
  return true;
}

/* A vector with a length prefix of n bytes. */
static bool vec(struct span *s, size_t n, struct span *out) {
  size_t len;

  return uint_be(s, n, &len) && take(s, len, out);
}

/* The host_name entry of a server_name extension (RFC 6066, 3): a list
 * filling the extension, with at most one host_name, of 1-255 bytes and
 * no NUL, returned as sent. */
static bool server_name(struct span ext, char sni[WR_HOST_MAX]) {
  struct span list, name;
  size_t type;
  bool seen = false;

  if (!vec(&ext, 2, &list) || ext.len != 0 || list.len == 0)
    return false;
  while (list.len > 0) {
    if (!uint_be(&list, 1, &type) || !vec(&list, 2, &name))
      return false;
    if (type != SNI_HOST_NAME)
      continue;
    if (seen || name.len == 0 || name.len >= WR_HOST_MAX ||
        memchr(name.p, '\0', name.len) != NULL)
      return false;
    memcpy(sni, name.p, name.len);
    sni[name.len] = '\0';
    seen = true;
  }
  return true;
}

/* Walk the extensions; a repeated server_name is malformed. */
static bool extensions(struct span exts, char sni[WR_HOST_MAX]) {
  struct span data;
  size_t type;
  bool seen = false;

  while (exts.len > 0) {
    if (!uint_be(&exts, 2, &type) || !vec(&exts, 2, &data))
      return false;
    if (type != TLS_EXT_SERVER_NAME)
      continue;
    if (seen || !server_name(data, sni))
      return false;
    seen = true;
  }
  return true;
}

/* The handshake message in a record: a ClientHello (RFC 8446, 4.1.2)
 * whose fields exactly fill it. */
static bool client_hello(struct span rec, char sni[WR_HOST_MAX]) {
  struct span body, session, suites, compression, exts;
  size_t type, len;

  if (!uint_be(&rec, 1, &type) || type != TLS_CLIENT_HELLO ||
      !uint_be(&rec, 3, &len) || !take(&rec, len, &body))
    return false;
  if (!take(&body, 2 + 32, NULL) || !vec(&body, 1, &session) ||
      session.len > 32 || !vec(&body, 2, &suites) || suites.len < 2 ||
      suites.len % 2 != 0 || !vec(&body, 1, &compression) ||
      compression.len == 0)
    return false;
  if (body.len == 0)
    return true;
  if (!vec(&body, 2, &exts) || body.len != 0)
    return false;
  return extensions(exts, sni);
}

/* Decide as early as the bytes allow: the record header and the start of
 * the handshake header already tell a non-hello from a hello. */
static enum wr_sniff sniff_tls(const uint8_t *data, size_t len,
                               char sni[WR_HOST_MAX]) {
  size_t rec_len;

  if (len >= 2 && data[1] != 3)
    return WR_SNIFF_OTHER;
  if (len < TLS_RECORD_HEADER)
    return WR_SNIFF_MORE;
  rec_len = (size_t)data[3] << 8 | data[4];
  if (rec_len == 0 || rec_len > TLS_RECORD_MAX)
    return WR_SNIFF_OTHER;
  if (len > TLS_RECORD_HEADER && data[TLS_RECORD_HEADER] != TLS_CLIENT_HELLO)
    return WR_SNIFF_OTHER;
  if (len < TLS_RECORD_HEADER + rec_len)
    return WR_SNIFF_MORE;
  if (!client_hello((struct span){data + TLS_RECORD_HEADER, rec_len}, sni)) {
    sni[0] = '\0';
    return WR_SNIFF_OTHER;
  }
  return WR_SNIFF_TLS;
}

/* A request line starts with a method token of A-Z and a space. */
static enum wr_sniff sniff_http(const uint8_t *data, size_t len) {
  size_t n = WR_MIN(len, HTTP_METHOD_MAX);

  for (size_t i = 0; i < n; i++) {
    if (data[i] == ' ')
      return i > 0 ? WR_SNIFF_HTTP : WR_SNIFF_OTHER;
    if (data[i] < 'A' || data[i] > 'Z')
      return WR_SNIFF_OTHER;
  }
  return len < HTTP_METHOD_MAX ? WR_SNIFF_MORE : WR_SNIFF_OTHER;
}

enum wr_sniff wr_sniff_client(const uint8_t *data, size_t len,
                              char sni[WR_HOST_MAX]) {
  sni[0] = '\0';
  if (len == 0)
    return WR_SNIFF_MORE;
  if (data[0] == TLS_HANDSHAKE)
    return sniff_tls(data, len, sni);
  if (data[0] >= 'A' && data[0] <= 'Z')
    return sniff_http(data, len);
  return WR_SNIFF_OTHER;
}
