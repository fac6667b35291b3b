/*
 * Resolving a user inside a sandbox: /etc/passwd and /etc/group are read
 * from the sandbox's root and parsed field by field. They are the
 * sandbox's own, untrusted files: read confined, never opened unless they
 * are regular files (a FIFO there would block the open for ever), bounded
 * in size, and on a worker thread (see wr_user_resolve's callers).
 */
#include "daemon/files.h"

#include <fcntl.h>

#define MAX_DB_BYTES (4u << 20)

/* A missing file is fine (only numeric users work); one that is not a
 * regular file, or too large, is the sandbox's doing: a 400 that says so. */
static int read_db(int rootfd, const char *path, char **out, wr_error_t *err) {
  wr_error_t rerr;

  *out = NULL;
  if (wr_read_in_root(rootfd, "in the sandbox", path, MAX_DB_BYTES, out, NULL,
                      &rerr) == 0)
    return 0;
  if (rerr.code == ENOENT)
    return 0;
  return wr_error_setx(err, EINVAL, "%s", rerr.msg);
}

/* Split a line into at most `max` colon-separated fields in place. */
static size_t split_fields(char *line, char **f, size_t max) {
  size_t n = 0;

  f[n++] = line;
  for (char *p = line; *p != '\0' && n < max; p++) {
    if (*p == ':') {
      *p = '\0';
      f[n++] = p + 1;
    }
  }
  return n;
}

static bool parse_id(const char *s, uint32_t *out) {
  uint64_t v;

  if (wr_parse_u64(s, 0, WR_ID_COUNT - 1, &v, NULL) < 0)
    return false;
  *out = (uint32_t)v;
  return true;
}

/* Find a passwd entry by name (or by uid when name is NULL). */
static bool find_passwd(char *db, const char *name, uint32_t uid,
                        struct wr_user *u) {
  for (char *save = NULL, *line = strtok_r(db, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    char *f[7];
    uint32_t id, gid;
    if (split_fields(line, f, 7) < 7 || !parse_id(f[2], &id) ||
        !parse_id(f[3], &gid))
      continue;
    if (name != NULL ? strcmp(f[0], name) != 0 : id != uid)
      continue;
    u->uid = id;
    u->gid = gid;
    wr_strlcpy(u->name, f[0], sizeof(u->name));
    wr_strlcpy(u->home, *f[5] ? f[5] : "/", sizeof(u->home));
    return true;
  }
  return false;
}

static bool member_of(char *list, const char *name) {
  for (char *save = NULL, *m = strtok_r(list, ",", &save); m != NULL;
       m = strtok_r(NULL, ",", &save))
    if (strcmp(m, name) == 0)
      return true;
  return false;
}

/* Supplementary groups that list the user as a member. */
static void find_groups(char *db, struct wr_user *u) {
  u->ngroups = 0;
  for (char *save = NULL, *line = strtok_r(db, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    char *f[4];
    uint32_t gid;
    if (split_fields(line, f, 4) < 4 || !parse_id(f[2], &gid))
      continue;
    if (gid != u->gid && member_of(f[3], u->name) &&
        u->ngroups < WR_INIT_MAX_GROUPS)
      u->groups[u->ngroups++] = gid;
  }
}

/* A uid without a passwd entry: a bare identity, its gid the same number. */
static void numeric_user(uint32_t uid, struct wr_user *u) {
  u->uid = uid;
  u->gid = uid;
  snprintf(u->name, sizeof(u->name), "%u", uid);
  wr_strlcpy(u->home, "/", sizeof(u->home));
}

/* "root" is the default user of every exec, so it must not depend on the
 * sandbox's /etc/passwd: a sandbox that deleted or mangled that file
 * would otherwise lock every client out, the one that could repair it
 * included. Without an entry, root is uid 0 with home /root. */
static void root_user(struct wr_user *u) {
  u->uid = 0;
  u->gid = 0;
  wr_strlcpy(u->name, "root", sizeof(u->name));
  wr_strlcpy(u->home, "/root", sizeof(u->home));
}

/* A group given by name is looked up in /etc/group (a copy: the caller's
 * text is parsed again for the memberships). */
static bool find_group_gid(const char *db, const char *name, uint32_t *gid) {
  _cleanup_free_ char *copy = db ? xstrdup(db) : NULL;

  for (char *save = NULL, *line = copy ? strtok_r(copy, "\n", &save) : NULL;
       line != NULL; line = strtok_r(NULL, "\n", &save)) {
    char *f[4];
    if (split_fields(line, f, 4) >= 3 && strcmp(f[0], name) == 0)
      return parse_id(f[2], gid);
  }
  return false;
}

/* The ":GROUP" part of a user spec, a gid or a group name (as docker's
 * --user takes it). */
static int apply_group(const char *group_db, const char *group,
                       const char *spec, struct wr_user *u, wr_error_t *err) {
  if (parse_id(group, &u->gid) || find_group_gid(group_db, group, &u->gid))
    return 0;
  return wr_error_setx(err, EINVAL, "no group `%s` in the sandbox (in `%s`)",
                       group, spec);
}

/* The user part: a passwd entry by name or uid, else root or a bare uid. */
static int find_user(char *passwd, const char *name, const char *spec,
                     struct wr_user *u, wr_error_t *err) {
  uint32_t uid = 0;
  bool numeric = parse_id(name, &uid);

  if (passwd != NULL && find_passwd(passwd, numeric ? NULL : name, uid, u))
    return 0;
  if (strcmp(name, "root") == 0)
    root_user(u);
  else if (numeric)
    numeric_user(uid, u);
  else
    return wr_error_setx(err, EINVAL, "no user `%s` in the sandbox", spec);
  return 0;
}

/* Both files. For the default user, "root", a broken one counts as
 * missing (see root_user): root is uid 0 whatever the sandbox did to
 * them, with its passwd entry when that file can be read. */
static int read_dbs(int rootfd, const char *spec, char **passwd, char **group,
                    wr_error_t *err) {
  bool root = strcmp(spec, "root") == 0;
  wr_error_t ignored;
  wr_error_t *e = root ? &ignored : err;

  if (read_db(rootfd, "/etc/passwd", passwd, e) < 0 && !root)
    return -1;
  if (read_db(rootfd, "/etc/group", group, e) < 0 && !root)
    return -1;
  return 0;
}

int wr_user_resolve(int rootfd, const char *spec, struct wr_user *out,
                    wr_error_t *err) {
  _cleanup_free_ char *passwd = NULL;
  _cleanup_free_ char *group = NULL;
  _cleanup_free_ char *user_part = xstrdup(spec);
  char *colon = strchr(user_part, ':');

  memset(out, 0, sizeof(*out));
  if (*spec == '\0' || strlen(spec) > 64 || user_part[0] == ':' ||
      spec[strlen(spec) - 1] == ':')
    return wr_error_setx(err, EINVAL, "invalid user `%s`", spec);
  if (colon != NULL)
    *colon++ = '\0';
  if (read_dbs(rootfd, spec, &passwd, &group, err) < 0 ||
      find_user(passwd, user_part, spec, out, err) < 0)
    return -1;
  if (colon != NULL && apply_group(group, colon, spec, out, err) < 0)
    return -1;
  if (group != NULL)
    find_groups(group, out);
  return 0;
}
