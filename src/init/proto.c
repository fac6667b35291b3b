/*
 * The control protocol between warrend and warren-init: pure encoders and
 * decoders, and the two transport calls. Both ends link this file and each
 * treats what the other sends as untrusted, so every decoder checks each
 * length and count against the bytes that really arrived, copies fields out
 * with memcpy (payloads need not be aligned) and finds every NUL itself.
 * Encoders apply the same rules as decoders, so a message one end builds
 * is always one the other end accepts.
 */
#include "init/init.h"

#include <limits.h>
#include <sys/socket.h>

#define HDR_SIZE sizeof(struct wr_init_hdr)
#define LISTED_HEAD 8 /* count, more, three zero bytes */
#define SPAWN_FLAGS (WR_SPAWN_TTY | WR_SPAWN_BACKGROUND)

_Static_assert(sizeof(struct wr_init_hdr) == 16, "header has no padding");

/* SPAWN's fixed part as it travels. */
struct spawn_wire {
  uint32_t flags, uid, gid, ngroups;
  uint16_t rows, cols;
  uint32_t argc, envc;
};
_Static_assert(sizeof(struct spawn_wire) == 28, "spawn wire has no padding");
_Static_assert(HDR_SIZE + sizeof(struct spawn_wire) +
                       WR_INIT_MAX_GROUPS * sizeof(uint32_t) <=
                   WR_INIT_MAX_MSG - WR_INIT_SPAWN_STR_MAX,
               "the strings of a SPAWN within WR_INIT_SPAWN_STR_MAX fit");

/* A read position in an untrusted payload. */
struct cursor {
  const char *p;
  size_t left;
};

/* Roles of the strings in a SPAWN, each with its own rule. */
enum str_role { STR_TAG, STR_CWD, STR_ARG, STR_ENV };

static const char *const role_names[] = {"tag", "cwd", "argv", "env"};

static bool take(struct cursor *c, void *out, size_t n) {
  if (c->left < n)
    return false;
  memcpy(out, c->p, n);
  c->p += n;
  c->left -= n;
  return true;
}

/* Take one NUL-terminated string; NULL when no NUL is left in the payload,
 * so a string can never run past the bytes that arrived. */
static const char *take_str(struct cursor *c, size_t *len) {
  const char *s = c->p;
  const char *nul;

  if (c->left == 0)
    return NULL;
  nul = memchr(s, '\0', c->left);
  if (nul == NULL)
    return NULL;
  *len = (size_t)(nul - s);
  c->p += *len + 1;
  c->left -= *len + 1;
  return s;
}

static bool type_known(uint16_t type) {
  switch (type) {
  case WR_INIT_HELLO:
  case WR_INIT_SPAWN:
  case WR_INIT_SIGNAL:
  case WR_INIT_LIST:
  case WR_INIT_FORGET:
  case WR_INIT_HELLO_OK:
  case WR_INIT_SPAWNED:
  case WR_INIT_RESULT:
  case WR_INIT_LISTED:
  case WR_INIT_EXIT:
    return true;
  default:
    return false;
  }
}

/* Only the messages that hand processes' stdio around carry fds. */
static unsigned max_fds(uint16_t type) {
  switch (type) {
  case WR_INIT_SPAWN:
  case WR_INIT_LISTED:
    return WR_INIT_MAX_FDS;
  case WR_INIT_SPAWNED:
    return 1;
  default:
    return 0;
  }
}

static void put_hdr(wr_buf_t *out, uint16_t type, uint32_t id, size_t len,
                    uint16_t nfds) {
  struct wr_init_hdr h = {
      .magic = WR_INIT_MAGIC,
      .type = type,
      .nfds = nfds,
      .id = id,
      .len = (uint32_t)len,
  };

  wr_buf_append(out, &h, sizeof(h));
}

unsigned wr_init_spawn_nfds(uint32_t flags) {
  if (flags & WR_SPAWN_TTY)
    return 0;
  return (flags & WR_SPAWN_BACKGROUND) ? 5 : 3;
}

static unsigned proc_nfds(const struct wr_init_proc *p) {
  if (!p->has_fds)
    return 0;
  return (p->flags & WR_SPAWN_TTY) ? 1 : 2;
}

unsigned wr_init_listed_nfds(const struct wr_init_listed *l) {
  unsigned n = 0;

  for (uint32_t i = 0; i < l->count; i++)
    n += proc_nfds(&l->procs[i]);
  return n;
}

/* ---- SPAWN ------------------------------------------------------------ */

/* The counts a SPAWN may carry; shared by both directions. */
static int check_spawn_counts(uint32_t flags, uint32_t ngroups, uint32_t argc,
                              uint32_t envc, wr_error_t *err) {
  if (flags & ~(uint32_t)SPAWN_FLAGS)
    return wr_error_set(err, EINVAL, "SPAWN: unknown flags %#x", flags);
  if (ngroups > WR_INIT_MAX_GROUPS)
    return wr_error_set(err, EINVAL, "SPAWN: %u groups (at most %d)", ngroups,
                        WR_INIT_MAX_GROUPS);
  if (argc < 1 || argc > WR_INIT_MAX_ARGS)
    return wr_error_set(err, EINVAL, "SPAWN: argc %u not in 1..%d", argc,
                        WR_INIT_MAX_ARGS);
  if (envc > WR_INIT_MAX_ARGS)
    return wr_error_set(err, EINVAL, "SPAWN: envc %u (at most %d)", envc,
                        WR_INIT_MAX_ARGS);
  return 0;
}

/* The rule for one SPAWN string of length len (NUL excluded). */
static int check_str(enum str_role role, const char *s, size_t len,
                     uint32_t index, wr_error_t *err) {
  bool ok = true;

  switch (role) {
  case STR_TAG:
    ok = len <= WR_INIT_TAG_MAX;
    break;
  case STR_CWD:
    ok = len > 0 && len < PATH_MAX;
    break;
  case STR_ARG:
    ok = index > 0 || len > 0;
    break;
  case STR_ENV:
    ok = len > 0 && s[0] != '=' && memchr(s, '=', len) != NULL;
    break;
  }
  if (!ok)
    return wr_error_set(err, EINVAL, "SPAWN: invalid %s[%u]", role_names[role],
                        index);
  return 0;
}

/* Check one string the encoder will write and add it to the payload size,
 * so that nothing is appended unless the whole message is valid. */
static int add_str(enum str_role role, const char *str, uint32_t index,
                   size_t *total, wr_error_t *err) {
  size_t len;

  if (str == NULL)
    return wr_error_set(err, EINVAL, "SPAWN: missing %s[%u]", role_names[role],
                        index);
  len = strnlen(str, WR_INIT_MAX_MSG);
  if (check_str(role, str, len, index, err) < 0)
    return -1;
  *total += len + 1;
  if (*total > WR_INIT_MAX_MSG - HDR_SIZE)
    return wr_error_set(err, EMSGSIZE, "SPAWN: larger than %d bytes",
                        WR_INIT_MAX_MSG);
  return 0;
}

static int spawn_size(const struct wr_init_spawn *s, size_t *size,
                      wr_error_t *err) {
  size_t total = sizeof(struct spawn_wire) + s->ngroups * sizeof(uint32_t);

  if (add_str(STR_TAG, s->tag, 0, &total, err) < 0 ||
      add_str(STR_CWD, s->cwd, 0, &total, err) < 0)
    return -1;
  for (uint32_t i = 0; i < s->argc; i++)
    if (add_str(STR_ARG, s->argv[i], i, &total, err) < 0)
      return -1;
  for (uint32_t i = 0; i < s->envc; i++)
    if (add_str(STR_ENV, s->env[i], i, &total, err) < 0)
      return -1;
  *size = total;
  return 0;
}

int wr_init_encode_spawn(wr_buf_t *out, uint32_t id,
                         const struct wr_init_spawn *s, uint16_t nfds,
                         wr_error_t *err) {
  struct spawn_wire w = {s->flags, s->uid,  s->gid,  s->ngroups,
                         s->rows,  s->cols, s->argc, s->envc};
  size_t size;

  if (check_spawn_counts(s->flags, s->ngroups, s->argc, s->envc, err) < 0)
    return -1;
  if (nfds != wr_init_spawn_nfds(s->flags))
    return wr_error_set(err, EINVAL, "SPAWN: %u fds where the flags need %u",
                        nfds, wr_init_spawn_nfds(s->flags));
  if (s->argv == NULL || (s->envc > 0 && s->env == NULL))
    return wr_error_set(err, EINVAL, "SPAWN: missing argv or env");
  if (spawn_size(s, &size, err) < 0)
    return -1;
  put_hdr(out, WR_INIT_SPAWN, id, size, nfds);
  wr_buf_append(out, &w, sizeof(w));
  wr_buf_append(out, s->groups, s->ngroups * sizeof(uint32_t));
  wr_buf_append(out, s->tag, strlen(s->tag) + 1);
  wr_buf_append(out, s->cwd, strlen(s->cwd) + 1);
  for (uint32_t i = 0; i < s->argc; i++)
    wr_buf_append(out, s->argv[i], strlen(s->argv[i]) + 1);
  for (uint32_t i = 0; i < s->envc; i++)
    wr_buf_append(out, s->env[i], strlen(s->env[i]) + 1);
  return 0;
}

/* Decode one string and check it against the rule for its role. */
static int take_one(struct cursor *c, enum str_role role, uint32_t index,
                    const char **out, wr_error_t *err) {
  size_t len;
  const char *s = take_str(c, &len);

  if (s == NULL)
    return wr_error_set(err, EINVAL,
                        "SPAWN: %s[%u] missing or not NUL-terminated",
                        role_names[role], index);
  if (check_str(role, s, len, index, err) < 0)
    return -1;
  *out = s;
  return 0;
}

/* Decode `count` strings of one role into vec (count + 1 slots). */
static int take_strv(struct cursor *c, enum str_role role, uint32_t count,
                     const char **vec, wr_error_t *err) {
  for (uint32_t i = 0; i < count; i++)
    if (take_one(c, role, i, &vec[i], err) < 0)
      return -1;
  vec[count] = NULL;
  return 0;
}

static int take_spawn_fixed(struct cursor *c, struct wr_init_spawn *s,
                            wr_error_t *err) {
  struct spawn_wire w;

  if (!take(c, &w, sizeof(w)))
    return wr_error_set(
        err, EINVAL,
        "SPAWN: payload of %zu bytes is shorter than its fixed part", c->left);
  if (check_spawn_counts(w.flags, w.ngroups, w.argc, w.envc, err) < 0)
    return -1;
  /* Every string takes at least its NUL: refuse counts the payload cannot
   * hold before allocating for them. */
  if ((size_t)w.ngroups * sizeof(uint32_t) + 2 + w.argc + w.envc > c->left)
    return wr_error_set(err, EINVAL, "SPAWN: counts exceed the payload");
  s->flags = w.flags;
  s->uid = w.uid;
  s->gid = w.gid;
  s->ngroups = w.ngroups;
  s->rows = w.rows;
  s->cols = w.cols;
  s->argc = w.argc;
  s->envc = w.envc;
  if (w.ngroups > 0)
    take(c, s->groups, w.ngroups * sizeof(uint32_t));
  return 0;
}

int wr_init_decode_spawn(const void *payload, size_t len,
                         struct wr_init_spawn *s, wr_error_t *err) {
  struct cursor c = {payload, len};
  _cleanup_free_ const char **argv = NULL;
  _cleanup_free_ const char **env = NULL;

  memset(s, 0, sizeof(*s));
  if (take_spawn_fixed(&c, s, err) < 0 ||
      take_one(&c, STR_TAG, 0, &s->tag, err) < 0 ||
      take_one(&c, STR_CWD, 0, &s->cwd, err) < 0)
    return -1;
  argv = xcalloc((size_t)s->argc + 1, sizeof(char *));
  env = xcalloc((size_t)s->envc + 1, sizeof(char *));
  if (take_strv(&c, STR_ARG, s->argc, argv, err) < 0 ||
      take_strv(&c, STR_ENV, s->envc, env, err) < 0)
    return -1;
  if (c.left != 0)
    return wr_error_set(err, EINVAL, "SPAWN: %zu bytes after the last string",
                        c.left);
  s->argv = steal_ptr(&argv);
  s->env = steal_ptr(&env);
  return 0;
}

/* ---- fixed-size payloads ---------------------------------------------- */

int wr_init_encode_simple(wr_buf_t *out, uint16_t type, uint32_t id,
                          const void *payload, uint32_t len, uint16_t nfds) {
  if (!type_known(type) || nfds > max_fds(type) ||
      (len > 0 && payload == NULL)) {
    errno = EINVAL;
    return -1;
  }
  if (len > WR_INIT_MAX_MSG - HDR_SIZE) {
    errno = EMSGSIZE;
    return -1;
  }
  put_hdr(out, type, id, len, nfds);
  wr_buf_append(out, payload, len);
  return 0;
}

int wr_init_decode_fixed(const void *payload, size_t len, void *out,
                         size_t size, wr_error_t *err) {
  if (len != size)
    return wr_error_set(
        err, EINVAL, "payload of %zu bytes where %zu are expected", len, size);
  if (size > 0)
    memcpy(out, payload, size);
  return 0;
}

int wr_init_decode_spawned(const void *payload, size_t len,
                           struct wr_init_spawned *s, wr_error_t *err) {
  if (wr_init_decode_fixed(payload, len, s, sizeof(*s), err) < 0)
    return wr_error_wrap(err, "SPAWNED");
  if (memchr(s->stage, '\0', sizeof(s->stage)) == NULL)
    return wr_error_set(err, EINVAL, "SPAWNED: stage not NUL-terminated");
  if (s->err < 0)
    return wr_error_set(err, EINVAL, "SPAWNED: negative err %d", s->err);
  if (s->err == 0 && (s->pid <= 0 || s->proc_id == 0))
    return wr_error_set(err, EINVAL, "SPAWNED: success without pid or id");
  return 0;
}

/* ---- LISTED ----------------------------------------------------------- */

/* The rules a LISTED entry follows; shared by both directions. */
static int check_proc(const struct wr_init_proc *p, uint32_t i,
                      wr_error_t *err) {
  if (p->proc_id == 0 || p->pid <= 0)
    return wr_error_set(err, EINVAL, "LISTED: entry %u has no id or pid", i);
  if ((p->flags & ~(uint32_t)SPAWN_FLAGS) || p->running > 1 || p->has_fds > 1)
    return wr_error_set(err, EINVAL, "LISTED: entry %u has bad flags", i);
  if (p->has_fds && !(p->flags & WR_SPAWN_BACKGROUND))
    return wr_error_set(err, EINVAL,
                        "LISTED: entry %u has fds but is not background", i);
  if (memchr(p->tag, '\0', sizeof(p->tag)) == NULL ||
      memchr(p->cmd, '\0', sizeof(p->cmd)) == NULL)
    return wr_error_set(err, EINVAL,
                        "LISTED: entry %u has an unterminated string", i);
  return 0;
}

static void put_proc(wr_buf_t *out, const struct wr_init_proc *p) {
  char tag[sizeof(p->tag)] = {0};
  char cmd[sizeof(p->cmd)] = {0};

  /* Copy up to the NUL only, so no stale bytes after it leave the
   * process. */
  memcpy(tag, p->tag, strlen(p->tag));
  memcpy(cmd, p->cmd, strlen(p->cmd));
  wr_buf_append(out, &p->proc_id, 4);
  wr_buf_append(out, &p->pid, 4);
  wr_buf_append(out, &p->flags, 4);
  wr_buf_append(out, &p->status, 4);
  wr_buf_append(out, &p->started_ms, 8);
  wr_buf_append(out, &p->running, 1);
  wr_buf_append(out, &p->has_fds, 1);
  wr_buf_append(out, tag, sizeof(tag));
  wr_buf_append(out, cmd, sizeof(cmd));
}

static void take_proc(struct cursor *c, struct wr_init_proc *p) {
  /* The caller checked that a whole entry is there. */
  take(c, &p->proc_id, 4);
  take(c, &p->pid, 4);
  take(c, &p->flags, 4);
  take(c, &p->status, 4);
  take(c, &p->started_ms, 8);
  take(c, &p->running, 1);
  take(c, &p->has_fds, 1);
  take(c, p->tag, sizeof(p->tag));
  take(c, p->cmd, sizeof(p->cmd));
}

int wr_init_encode_listed(wr_buf_t *out, uint32_t id,
                          const struct wr_init_proc *procs, uint32_t count,
                          bool more, uint16_t nfds, wr_error_t *err) {
  struct wr_init_listed l = {count, more, (struct wr_init_proc *)procs};
  uint8_t head[LISTED_HEAD] = {0};

  if (count > WR_INIT_LISTED_MAX)
    return wr_error_set(err, EMSGSIZE, "LISTED: %u entries (at most %zu)",
                        count, (size_t)WR_INIT_LISTED_MAX);
  if (count > 0 && procs == NULL)
    return wr_error_set(err, EINVAL, "LISTED: no entries given");
  for (uint32_t i = 0; i < count; i++)
    if (check_proc(&procs[i], i, err) < 0)
      return -1;
  if (nfds != wr_init_listed_nfds(&l) || nfds > WR_INIT_MAX_FDS)
    return wr_error_set(err, EINVAL,
                        "LISTED: %u fds where the entries announce %u", nfds,
                        wr_init_listed_nfds(&l));
  memcpy(head, &count, 4);
  head[4] = more ? 1 : 0;
  put_hdr(out, WR_INIT_LISTED, id,
          LISTED_HEAD + (size_t)count * WR_INIT_PROC_WIRE, nfds);
  wr_buf_append(out, head, sizeof(head));
  for (uint32_t i = 0; i < count; i++)
    put_proc(out, &procs[i]);
  return 0;
}

int wr_init_decode_listed(const void *payload, size_t len,
                          struct wr_init_listed *l, wr_error_t *err) {
  struct cursor c = {payload, len};
  uint8_t head[LISTED_HEAD];
  _cleanup_free_ struct wr_init_proc *procs = NULL;
  uint32_t count;

  memset(l, 0, sizeof(*l));
  if (!take(&c, head, sizeof(head)))
    return wr_error_set(err, EINVAL, "LISTED: payload shorter than its head");
  memcpy(&count, head, 4);
  if (head[4] > 1 || head[5] || head[6] || head[7])
    return wr_error_set(err, EINVAL, "LISTED: bad head");
  if (count > WR_INIT_LISTED_MAX || c.left != (size_t)count * WR_INIT_PROC_WIRE)
    return wr_error_set(err, EINVAL, "LISTED: %u entries do not fill %zu bytes",
                        count, c.left);
  if (count > 0)
    procs = xcalloc(count, sizeof(*procs));
  for (uint32_t i = 0; i < count; i++) {
    take_proc(&c, &procs[i]);
    if (check_proc(&procs[i], i, err) < 0)
      return -1;
  }
  l->count = count;
  l->more = head[4];
  l->procs = steal_ptr(&procs);
  return 0;
}

/* ---- header ----------------------------------------------------------- */

int wr_init_decode_hdr(const void *msg, size_t len, size_t nfds_received,
                       struct wr_init_hdr *hdr, const void **payload,
                       wr_error_t *err) {
  if (len < HDR_SIZE || len > WR_INIT_MAX_MSG)
    return wr_error_set(err, EINVAL, "datagram of %zu bytes", len);
  memcpy(hdr, msg, HDR_SIZE);
  if (hdr->magic != WR_INIT_MAGIC)
    return wr_error_set(err, EINVAL, "bad magic %#x", hdr->magic);
  if (!type_known(hdr->type))
    return wr_error_set(err, EINVAL, "unknown type %u", hdr->type);
  if (hdr->len != len - HDR_SIZE)
    return wr_error_set(err, EINVAL, "header says %u payload bytes, %zu came",
                        hdr->len, len - HDR_SIZE);
  if (hdr->nfds != nfds_received)
    return wr_error_set(err, EINVAL, "header says %u fds, %zu came", hdr->nfds,
                        nfds_received);
  if (hdr->nfds > max_fds(hdr->type))
    return wr_error_set(err, EINVAL, "type %u cannot carry %u fds", hdr->type,
                        hdr->nfds);
  *payload = (const char *)msg + HDR_SIZE;
  return 0;
}

/* ---- transport -------------------------------------------------------- */

/* A control buffer for WR_INIT_MAX_FDS descriptors, aligned for cmsghdr. */
union fd_control {
  struct cmsghdr align;
  char buf[CMSG_SPACE(sizeof(int) * WR_INIT_MAX_FDS)];
};

int wr_init_send(int sock, const void *msg, size_t len, const int *fds,
                 size_t nfds, wr_error_t *err) {
  union fd_control ctl;
  struct iovec iov = {(void *)msg, len};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  ssize_t n;

  if (nfds > WR_INIT_MAX_FDS)
    return wr_error_set(err, EINVAL, "send %zu fds (at most %d)", nfds,
                        WR_INIT_MAX_FDS);
  if (nfds > 0) {
    struct cmsghdr *c;

    memset(&ctl, 0, sizeof(ctl));
    mh.msg_control = ctl.buf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  do
    n = sendmsg(sock, &mh, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return wr_error_set(err, errno, "send on control socket");
  if ((size_t)n != len)
    return wr_error_set(err, EMSGSIZE, "short send on control socket");
  return 0;
}

static void close_fds(int *fds, size_t *nfds) {
  for (size_t i = 0; i < *nfds; i++)
    close(fds[i]);
  *nfds = 0;
}

/* Move the fds of every SCM_RIGHTS message into fds[]. Returns false when
 * more came than fit (those are closed), which the caller treats like a
 * truncated control message. */
static bool collect_fds(struct msghdr *mh, int *fds, size_t *nfds) {
  bool fit = true;

  for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL;
       c = CMSG_NXTHDR(mh, c)) {
    size_t n;

    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len < CMSG_LEN(0))
      continue;
    n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; i++) {
      int fd;

      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*nfds < WR_INIT_MAX_FDS) {
        fds[(*nfds)++] = fd;
      } else {
        close(fd);
        fit = false;
      }
    }
  }
  return fit;
}

ssize_t wr_init_recv(int sock, void *buf, size_t size, int *fds, size_t *nfds,
                     wr_error_t *err) {
  union fd_control ctl;
  struct iovec iov = {buf, size};
  struct msghdr mh = {.msg_iov = &iov,
                      .msg_iovlen = 1,
                      .msg_control = ctl.buf,
                      .msg_controllen = sizeof(ctl.buf)};
  ssize_t n;
  bool fit;

  *nfds = 0;
  do
    n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return wr_error_set(err, errno, "receive on control socket");
  fit = collect_fds(&mh, fds, nfds);
  if (!fit || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
    close_fds(fds, nfds);
    return wr_error_set(err, EMSGSIZE, "truncated datagram on control socket");
  }
  if (n == 0)
    close_fds(fds, nfds);
  return n;
}
