/*
 * Agent kits: what `warren run` starts in a sandbox, as small JSON files.
 *
 * A kit names the agent's command, the npm package that provides it (when
 * it is not in the image), the variables it needs, the secret service
 * whose placeholder it uses and the hosts its policy must allow. The
 * user's own kits (ROOT/kits/NAME.json) come first, then warren's
 * (DATA/kits/NAME.json), so a user can replace a built-in kit. Kit files
 * are read when a sandbox is created and when `warren run` asks; a broken
 * file is an error that names the file and the field, never a kit with
 * parts silently missing.
 *
 * The files are small and local, so they are read on the loop thread, as
 * the policy preset is.
 */
#include "daemon/kits.h"
#include "daemon/network_internal.h"

#include <dirent.h>
#include <fcntl.h>

#define KIT_FILE_MAX (64u << 10)
#define DESCRIPTION_MAX 200
#define ARGS_MAX 64
#define ARG_MAX_LEN 4096
#define ENV_MAX 64
#define ENV_NAME_MAX 128
#define ENV_VALUE_MAX 4096
#define ALLOW_MAX 32
#define NPM_MAX 214 /* npm's own limit on a package name */

void wr_kit_free(struct wr_kit *k) {
  free(k->name);
  free(k->description);
  free(k->npm);
  free(k->secret);
  free(k->source);
  wr_strv_free(k->command);
  wr_strv_free(k->env);
  wr_strv_free(k->allow);
  memset(k, 0, sizeof(*k));
}

/* ---- validation ---------------------------------------------------------- */

/* One line of text for people: no control characters. */
static int check_description(const char *s, wr_error_t *err) {
  if (strlen(s) > DESCRIPTION_MAX)
    return wr_error_setx(err, EINVAL, "`description` is longer than %d bytes",
                         DESCRIPTION_MAX);
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
    if (*p < 0x20 || *p == 0x7f)
      return wr_error_setx(err, EINVAL,
                           "`description` may not hold control characters");
  return 0;
}

static int check_command(const json_t *arr, char ***out, wr_error_t *err) {
  size_t n = json_array_size(arr);

  if (n == 0)
    return wr_error_setx(err, EINVAL,
                         "`command` must name a program: [\"PROGRAM\", "
                         "\"ARG\", ...]");
  if (wr_json_strv(arr, "command", ARGS_MAX, out, err) < 0)
    return -1;
  if ((*out)[0][0] == '\0')
    return wr_error_setx(err, EINVAL, "`command[0]` is empty");
  for (size_t i = 0; i < n; i++)
    if (strlen((*out)[i]) > ARG_MAX_LEN)
      return wr_error_setx(err, EINVAL,
                           "`command[%zu]` is longer than %d bytes", i,
                           ARG_MAX_LEN);
  return 0;
}

/* npm's name rules for new packages: lower case letters, digits and
 * - . _ ~, not starting with . or _, optionally scoped (@scope/name);
 * then optionally @VERSION or @TAG. A leading - is refused too, so that
 * the name can never read as an option of `npm install`. */
static bool npm_part_valid(const char *s, size_t len) {
  if (len == 0 || s[0] == '.' || s[0] == '_' || s[0] == '-')
    return false;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
          strchr("-._~", c) != NULL))
      return false;
  }
  return true;
}

static bool npm_version_valid(const char *s) {
  if (*s == '\0')
    return false;
  for (; *s != '\0'; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || strchr("-._+", *s) != NULL))
      return false;
  return true;
}

bool wr_kit_npm_valid(const char *spec) {
  const char *name = spec, *slash, *at;
  size_t len = strlen(spec);

  if (len == 0 || len > NPM_MAX)
    return false;
  if (*spec == '@') {
    slash = strchr(spec, '/');
    if (slash == NULL || !npm_part_valid(spec + 1, (size_t)(slash - spec - 1)))
      return false;
    name = slash + 1;
  }
  at = strchr(name, '@');
  if (at != NULL && !npm_version_valid(at + 1))
    return false;
  return npm_part_valid(name, at ? (size_t)(at - name) : strlen(name));
}

static int cmp_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, so that a kit's variables always come out in the same order. */
static int check_env(const json_t *obj, char ***out, wr_error_t *err) {
  const char *key;
  json_t *v;

  if (json_object_size(obj) > ENV_MAX)
    return wr_error_setx(err, EINVAL, "`env` has more than %d variables",
                         ENV_MAX);
  json_object_foreach ((json_t *)obj, key, v) {
    if (strlen(key) > ENV_NAME_MAX)
      return wr_error_setx(err, EINVAL,
                           "`env`: the name `%.32s...` is longer "
                           "than %d bytes",
                           key, ENV_NAME_MAX);
    /* A kit may not point the agent past the proxy or hide warren's CA. */
    if (wr_network_sets_env(key))
      return wr_error_setx(err, EINVAL,
                           "`env.%s`: warren sets this variable itself", key);
    if (json_is_string(v) && json_string_length(v) > ENV_VALUE_MAX)
      return wr_error_setx(err, EINVAL, "`env.%s` is longer than %d bytes", key,
                           ENV_VALUE_MAX);
  }
  if (wr_json_env(obj, "env", out, err) < 0)
    return -1;
  qsort(*out, wr_strv_len(*out), sizeof(char *), cmp_strings);
  return 0;
}

/* Names and wildcards, as `warren policy allow network` takes them. An
 * address or a block would open private networks to every sandbox made
 * with the kit, so that is left to an explicit per-sandbox rule. */
static int check_allow_entry(const char *spec, size_t i, wr_error_t *err) {
  struct wr_rule r;
  bool address;

  if (wr_rule_parse(spec, true, &r, err) < 0)
    return wr_error_wrap(err, "`allow[%zu]`", i);
  address = r.kind == WR_RULE_IP || r.kind == WR_RULE_CIDR;
  wr_rule_clear(&r);
  if (address)
    return wr_error_setx(err, EINVAL,
                         "`allow[%zu]`: `%s` is an address; a kit may only "
                         "name hosts (allow addresses for one sandbox with "
                         "`warren policy allow network --sandbox N %s`)",
                         i, spec, spec);
  return 0;
}

static int check_allow(const json_t *arr, char ***out, wr_error_t *err) {
  if (wr_json_strv(arr, "allow", ALLOW_MAX, out, err) < 0)
    return -1;
  for (size_t i = 0; (*out)[i] != NULL; i++)
    if (check_allow_entry((*out)[i], i, err) < 0)
      return -1;
  return 0;
}

/* The fields, each checked; optional ones may be absent or null. */
static int parse_fields(const json_t *j, struct wr_kit *k, wr_error_t *err) {
  const char *description = NULL, *npm = NULL, *secret = NULL;
  json_t *command = NULL, *env = NULL, *allow = NULL;
  struct wr_json_field f[] = {
      {"description", WR_JSON_STRING, &description, false, NULL},
      {"command", WR_JSON_ARRAY, &command, true, NULL},
      {"npm", WR_JSON_STRING, &npm, false, NULL},
      {"env", WR_JSON_OBJECT, &env, false, NULL},
      {"secret", WR_JSON_STRING, &secret, false, NULL},
      {"allow", WR_JSON_ARRAY, &allow, false, NULL},
  };

  if (wr_json_unpack(j, f, WR_ARRAY_SIZE(f), err) < 0 ||
      (description != NULL && check_description(description, err) < 0) ||
      check_command(command, &k->command, err) < 0 ||
      (env != NULL && check_env(env, &k->env, err) < 0) ||
      (allow != NULL && check_allow(allow, &k->allow, err) < 0))
    return -1;
  if (npm != NULL && !wr_kit_npm_valid(npm))
    return wr_error_setx(err, EINVAL,
                         "`npm`: `%s` is not an npm package name "
                         "(\"name\", \"@scope/name\", optionally "
                         "\"@VERSION\")",
                         npm);
  if (secret != NULL && !wr_store_secret_name_valid(secret))
    return wr_error_setx(err, EINVAL,
                         "`secret`: `%s` is not a secret service name (1 to "
                         "64 of a-z, 0-9, _ and -)",
                         secret);
  k->description = xstrdup(description ? description : "");
  k->npm = npm ? xstrdup(npm) : NULL;
  k->secret = secret ? xstrdup(secret) : NULL;
  if (k->env == NULL)
    k->env = xcalloc(1, sizeof(char *));
  if (k->allow == NULL)
    k->allow = xcalloc(1, sizeof(char *));
  return 0;
}

int wr_kit_parse(const char *name, const char *source, const char *text,
                 size_t len, struct wr_kit *out, wr_error_t *err) {
  _cleanup_json_ json_t *j = NULL;
  struct wr_kit k = {0};

  if (wr_json_parse_object(text, len, false, &j, err) < 0 ||
      parse_fields(j, &k, err) < 0) {
    wr_kit_free(&k);
    err->code = EINVAL;
    return wr_error_wrap(err, "kit file `%s`", source);
  }
  k.name = xstrdup(name);
  k.source = xstrdup(source);
  *out = k;
  return 0;
}

/* ---- finding kits -------------------------------------------------------- */

/* ROOT/kits, then DATA/kits (when warren's data files were found). */
static char **kit_dirs(struct wr_daemon *d) {
  char **dirs = NULL;
  _cleanup_free_ char *user = xasprintf("%s/kits", d->cfg.root);

  dirs = wr_strv_push(dirs, user);
  if (d->network != NULL && d->network->data_dir != NULL) {
    _cleanup_free_ char *data = xasprintf("%s/kits", d->network->data_dir);
    dirs = wr_strv_push(dirs, data);
  }
  return dirs;
}

/* "NAME.json" with a valid kit name: NAME (caller frees), else NULL. */
static char *kit_file_name(const char *file) {
  size_t len = strlen(file);
  _cleanup_free_ char *name = NULL;

  if (!wr_str_has_suffix(file, ".json") || len <= 5)
    return NULL;
  name = xstrndup(file, len - 5);
  return wr_kit_name_valid(name) ? steal_ptr(&name) : NULL;
}

bool wr_kit_name_valid(const char *name) {
  return wr_name_valid(name);
}

char **wr_kit_names(char *const *dirs) {
  char **names = xcalloc(1, sizeof(char *));

  for (size_t i = 0; dirs != NULL && dirs[i] != NULL; i++) {
    DIR *dh = opendir(dirs[i]);
    struct dirent *de;
    if (dh == NULL)
      continue;
    while ((de = readdir(dh)) != NULL) {
      _cleanup_free_ char *name = kit_file_name(de->d_name);
      bool seen = false;
      for (size_t k = 0; name != NULL && names[k] != NULL; k++)
        seen = seen || strcmp(names[k], name) == 0;
      if (name != NULL && !seen)
        names = wr_strv_push(names, name);
    }
    closedir(dh);
  }
  qsort(names, wr_strv_len(names), sizeof(char *), cmp_strings);
  return names;
}

/* "claude, codex, shell" or "none". */
static char *names_text(char *const *dirs) {
  _cleanup_strv_ char **names = wr_kit_names(dirs);
  wr_buf_t b;

  wr_buf_init(&b);
  for (size_t i = 0; names[i] != NULL; i++)
    wr_buf_printf(&b, "%s%s", i > 0 ? ", " : "", names[i]);
  if (names[0] == NULL)
    wr_buf_puts(&b, "none");
  return wr_buf_steal(&b, NULL);
}

/* The first directory that has the file decides: a user's broken kit is
 * an error, not a reason to fall back to warren's. */
int wr_kit_find(char *const *dirs, const char *name, struct wr_kit *out,
                wr_error_t *err) {
  _cleanup_free_ char *avail = NULL;

  if (!wr_kit_name_valid(name))
    return wr_error_setx(
        err, EINVAL, "invalid kit name `%s` ([a-z0-9][a-z0-9._-]{0,62})", name);
  for (size_t i = 0; dirs != NULL && dirs[i] != NULL; i++) {
    _cleanup_free_ char *path = xasprintf("%s/%s.json", dirs[i], name);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    wr_error_t rerr = {0};

    if (wr_read_file(path, KIT_FILE_MAX, &text, &len, &rerr) == 0)
      return wr_kit_parse(name, path, text, len, out, err);
    if (rerr.code != ENOENT) {
      *err = rerr;
      err->code = EINVAL;
      return wr_error_wrap(err, "kit `%s`", name);
    }
  }
  avail = names_text(dirs);
  return wr_error_setx(err, ENOENT, "no agent kit `%s` (kits: %s)", name,
                       avail);
}

int wr_kit_load(struct wr_daemon *d, const char *name, struct wr_kit *out,
                wr_error_t *err) {
  _cleanup_strv_ char **dirs = kit_dirs(d);

  return wr_kit_find(dirs, name, out, err);
}

/* ---- JSON and the API ---------------------------------------------------- */

static json_t *strv_json(char *const *v) {
  json_t *a = json_array();

  for (size_t i = 0; v != NULL && v[i] != NULL; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

static json_t *env_json(char *const *env) {
  json_t *o = json_object();

  for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
    const char *eq = strchr(env[i], '=');
    _cleanup_free_ char *key = xstrndup(env[i], (size_t)(eq - env[i]));
    json_object_set_new(o, key, json_string(eq + 1));
  }
  return o;
}

json_t *wr_kit_json(const struct wr_kit *k) {
  return json_pack("{s:s,s:s,s:o,s:s?,s:o,s:s?,s:o,s:s}", "name", k->name,
                   "description", k->description, "command",
                   strv_json(k->command), "npm", k->npm, "env",
                   env_json(k->env), "secret", k->secret, "allow",
                   strv_json(k->allow), "source", k->source);
}

/* Every kit the daemon can find; one whose file is broken is listed with
 * its error, so that `GET /v1/kits` is where a kit's author looks. */
void wr_api_kit_list(wr_http_req_t *req, void *ctx) {
  _cleanup_strv_ char **dirs = kit_dirs(ctx);
  _cleanup_strv_ char **names = wr_kit_names(dirs);
  json_t *arr = json_array();

  for (size_t i = 0; names[i] != NULL; i++) {
    struct wr_kit k = {0};
    wr_error_t err;
    if (wr_kit_find(dirs, names[i], &k, &err) < 0) {
      json_array_append_new(
          arr, json_pack("{s:s,s:s}", "name", names[i], "error", err.msg));
      continue;
    }
    json_array_append_new(arr, wr_kit_json(&k));
    wr_kit_free(&k);
  }
  wr_http_reply_json(req, 200, json_pack("{s:o}", "kits", arr));
}

void wr_api_kit_get(wr_http_req_t *req, void *ctx) {
  const char *name = wr_http_param(req, "name");
  struct wr_kit k = {0};
  wr_error_t err;

  if (wr_kit_load(ctx, name ? name : "", &k, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  wr_http_reply_json(req, 200, wr_kit_json(&k));
  wr_kit_free(&k);
}
