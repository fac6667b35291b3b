/*
 * The host's apt sources, filtered to one Debian release and rewritten in
 * deb822 form for mmdebstrap.
 *
 * warren names no package archive of its own: an image is built from the
 * archives the host installs its own packages from, so a host that uses a
 * mirror, a proxy or a snapshot builds its images through it too.
 *
 * The parsers are lenient where apt would be strict: an entry they cannot
 * read is skipped rather than failing the build, since the host's apt
 * already refuses broken files and a build only needs one good source.
 */
#include "daemon/images_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <strings.h>

#define SOURCES_FILE_MAX (1u << 20)
#define OS_RELEASE_MAX (64u << 10)
#define WORD_SEPS " \t\n"

/* One source entry: a deb822 stanza or a one-line entry. */
struct apt_entry {
  char **uris;
  char **suites;
  char **components;
  wr_buf_t fields; /* other deb822 fields, "Name: value\n" lines */
};

struct collect {
  const char *codename;
  wr_buf_t *out;
  int found;
};

/* A deb822 stanza being read, line by line. */
struct stanza {
  struct apt_entry e;
  bool deb;       /* Types lists "deb" */
  bool disabled;  /* Enabled: no */
  char *name;     /* the field being read */
  wr_buf_t value; /* its raw value, continuation lines included */
};

/* One-line options and the deb822 fields they stand for (sources.list(5)).
 * `list` options take several values, comma-separated in one-line form. */
static const struct {
  const char *option;
  const char *field;
  bool list;
} option_fields[] = {
    {"arch", "Architectures", true},
    {"lang", "Languages", true},
    {"target", "Targets", true},
    {"signed-by", "Signed-By", true},
    {"trusted", "Trusted", false},
    {"pdiffs", "PDiffs", false},
    {"by-hash", "By-Hash", false},
    {"check-valid-until", "Check-Valid-Until", false},
    {"valid-until-min", "Valid-Until-Min", false},
    {"valid-until-max", "Valid-Until-Max", false},
    {"check-date", "Check-Date", false},
    {"date-max-future", "Date-Max-Future", false},
    {"allow-insecure", "Allow-Insecure", false},
    {"allow-weak", "Allow-Weak", false},
    {"allow-downgrade-to-insecure", "Allow-Downgrade-To-Insecure", false},
    {"inrelease-path", "InRelease-Path", false},
    {"snapshot", "Snapshot", false},
};

bool wr_deb_package_valid(const char *name) {
  size_t n = strlen(name);

  if (n < 2 || n > 128)
    return false;
  if (!islower((unsigned char)name[0]) && !isdigit((unsigned char)name[0]))
    return false;
  for (size_t i = 1; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!islower(c) && !isdigit(c) && c != '+' && c != '-' && c != '.')
      return false;
  }
  return true;
}

/* ---- os-release ---------------------------------------------------------- */

/* Strip one level of shell quoting, as os-release(5) allows. */
static char *unquote(const char *v) {
  size_t n = strlen(v);

  if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0])
    return xstrndup(v + 1, n - 2);
  return xstrdup(v);
}

/*
 * The codename becomes a suite argument and a filter, so it must look
 * like one: the same alphabet as package names, which also keeps it from
 * ever reading as an option.
 */
int wr_os_codename(const char *os_release, char **out, wr_error_t *err) {
  _cleanup_free_ char *text = NULL;
  size_t len = 0;
  char *line, *next;

  if (wr_read_file(os_release, OS_RELEASE_MAX, &text, &len, err) < 0)
    return -1;
  for (line = text; line != NULL; line = next) {
    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    if (!wr_str_has_prefix(line, "VERSION_CODENAME="))
      continue;
    *out = unquote(line + strlen("VERSION_CODENAME="));
    if (wr_deb_package_valid(*out))
      return 0;
    free(*out);
    *out = NULL;
    return wr_error_set(err, 0, "`%s`: VERSION_CODENAME is not a codename",
                        os_release);
  }
  return wr_error_set(err, 0, "`%s` has no VERSION_CODENAME", os_release);
}

/* ---- entries ------------------------------------------------------------- */

static void entry_free(struct apt_entry *e) {
  wr_strv_free(e->uris);
  wr_strv_free(e->suites);
  wr_strv_free(e->components);
  wr_buf_free(&e->fields);
  memset(e, 0, sizeof(*e));
}

/* Append the whitespace-separated words of s to v (which may be NULL). */
static char **push_words(char **v, const char *s) {
  while (*(s += strspn(s, WORD_SEPS)) != '\0') {
    size_t n = strcspn(s, WORD_SEPS);
    _cleanup_free_ char *word = xstrndup(s, n);
    v = wr_strv_push(v, word);
    s += n;
  }
  return v;
}

static bool strv_has(char *const *v, const char *s) {
  for (; v != NULL && *v != NULL; v++)
    if (strcmp(*v, s) == 0)
      return true;
  return false;
}

/* The release itself and its companions: "bookworm", "bookworm-updates",
 * "bookworm-security", "bookworm-backports"; not "cloud-sdk-bookworm". */
static bool suite_matches(const char *suite, const char *codename) {
  size_t n = strlen(codename);

  if (strncmp(suite, codename, n) != 0)
    return false;
  return suite[n] == '\0' || (suite[n] == '-' && suite[n + 1] != '\0');
}

static void put_list(wr_buf_t *out, const char *field, char *const *v) {
  wr_buf_puts(out, field);
  wr_buf_puts(out, ":");
  for (; *v != NULL; v++) {
    wr_buf_puts(out, " ");
    wr_buf_puts(out, *v);
  }
  wr_buf_puts(out, "\n");
}

/* Write e as one deb822 stanza, with only the suites of our release; an
 * entry without such a suite, a URI or a component is left out. */
static void emit_entry(struct collect *c, const struct apt_entry *e) {
  _cleanup_strv_ char **suites = xcalloc(1, sizeof(char *));

  for (char **s = e->suites; s != NULL && *s != NULL; s++)
    if (suite_matches(*s, c->codename))
      suites = wr_strv_push(suites, *s);
  if (suites[0] == NULL || wr_strv_len(e->uris) == 0 ||
      wr_strv_len(e->components) == 0)
    return;
  if (c->found > 0)
    wr_buf_puts(c->out, "\n");
  wr_buf_puts(c->out, "Types: deb\n");
  put_list(c->out, "URIs", e->uris);
  put_list(c->out, "Suites", suites);
  put_list(c->out, "Components", e->components);
  if (e->fields.len > 0)
    wr_buf_append(c->out, e->fields.data, e->fields.len);
  c->found++;
}

/* ---- one-line format ----------------------------------------------------- */

/* "arch=amd64,arm64" -> "Architectures: amd64 arm64"; "arch+=i386" ->
 * "Architectures-Add: i386". Options apt does not know are dropped, as
 * apt ignores them too. */
static void add_option(wr_buf_t *fields, const char *opt) {
  const char *eq = strchr(opt, '=');
  const char *suffix = "";
  _cleanup_free_ char *value = NULL;
  size_t klen;

  if (eq == NULL || eq == opt)
    return;
  klen = (size_t)(eq - opt);
  if (opt[klen - 1] == '+' || opt[klen - 1] == '-')
    suffix = opt[--klen] == '+' ? "-Add" : "-Remove";
  for (size_t i = 0; i < WR_ARRAY_SIZE(option_fields); i++) {
    if (strlen(option_fields[i].option) != klen ||
        strncmp(option_fields[i].option, opt, klen) != 0)
      continue;
    if (*suffix != '\0' && !option_fields[i].list)
      return;
    value = xstrdup(eq + 1);
    for (char *p = value; option_fields[i].list && *p != '\0'; p++)
      if (*p == ',')
        *p = ' ';
    wr_buf_printf(fields, "%s%s: %s\n", option_fields[i].field, suffix, value);
    return;
  }
}

/* Split off a leading "[ options ]" into e->fields; returns the rest of
 * the line, or NULL when the bracket is never closed. */
static char *take_options(struct apt_entry *e, char *p) {
  _cleanup_strv_ char **opts = NULL;
  char *end;

  p += strspn(p, WORD_SEPS);
  if (*p != '[')
    return p;
  end = strchr(p, ']');
  if (end == NULL)
    return NULL;
  *end = '\0';
  opts = push_words(NULL, p + 1);
  for (char **o = opts; o != NULL && *o != NULL; o++)
    add_option(&e->fields, *o);
  return end + 1;
}

/* "deb [options] URI SUITE COMPONENT..." (comments already cut). */
static void one_line_entry(struct collect *c, char *line) {
  struct apt_entry e = {0};
  _cleanup_strv_ char **words = NULL;
  size_t type_len;

  line += strspn(line, WORD_SEPS);
  type_len = strcspn(line, WORD_SEPS "[");
  if (type_len != 3 || strncmp(line, "deb", 3) != 0)
    return;
  line = take_options(&e, line + 3);
  if (line != NULL)
    words = push_words(NULL, line);
  if (wr_strv_len(words) >= 3) {
    e.uris = wr_strv_push(NULL, words[0]);
    e.suites = wr_strv_push(NULL, words[1]);
    for (char **w = words + 2; *w != NULL; w++)
      e.components = wr_strv_push(e.components, *w);
    emit_entry(c, &e);
  }
  entry_free(&e);
}

/* apt cuts a one-line entry at the first '#'. */
static void parse_one_line(struct collect *c, char *text) {
  char *line, *next;

  for (line = text; line != NULL; line = next) {
    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    line[strcspn(line, "#")] = '\0';
    one_line_entry(c, line);
  }
}

/* ---- deb822 -------------------------------------------------------------- */

/* Finish the field being read: the fields that select sources are parsed,
 * the others kept verbatim, multi-line values (an inline Signed-By key)
 * included. */
static void field_end(struct stanza *s) {
  const char *v = s->value.data != NULL ? s->value.data : "";
  struct apt_entry *e = &s->e;

  if (s->name == NULL)
    return;
  if (strcasecmp(s->name, "Types") == 0) {
    _cleanup_strv_ char **types = push_words(NULL, v);
    s->deb = s->deb || strv_has(types, "deb");
  } else if (strcasecmp(s->name, "URIs") == 0) {
    e->uris = push_words(e->uris, v);
  } else if (strcasecmp(s->name, "Suites") == 0) {
    e->suites = push_words(e->suites, v);
  } else if (strcasecmp(s->name, "Components") == 0) {
    e->components = push_words(e->components, v);
  } else if (strcasecmp(s->name, "Enabled") == 0) {
    s->disabled = strcasecmp(v + strspn(v, WORD_SEPS), "no") == 0;
  } else {
    wr_buf_printf(&e->fields, "%s:%s\n", s->name, v);
  }
  free(s->name);
  s->name = NULL;
  wr_buf_reset(&s->value);
}

static void stanza_end(struct collect *c, struct stanza *s) {
  field_end(s);
  if (s->deb && !s->disabled)
    emit_entry(c, &s->e);
  entry_free(&s->e);
  s->deb = false;
  s->disabled = false;
}

/* Comments start at the beginning of a line; a line that starts with
 * white space continues the previous field; a blank line ends a stanza. */
static void deb822_line(struct collect *c, struct stanza *s, char *line) {
  char *colon;

  if (line[0] == '#')
    return;
  if (line[strspn(line, " \t")] == '\0') {
    stanza_end(c, s);
    return;
  }
  if (line[0] == ' ' || line[0] == '\t') {
    if (s->name != NULL) {
      wr_buf_puts(&s->value, "\n");
      wr_buf_puts(&s->value, line);
    }
    return;
  }
  colon = strchr(line, ':');
  if (colon == NULL || colon == line)
    return;
  field_end(s);
  s->name = xstrndup(line, (size_t)(colon - line));
  wr_buf_puts(&s->value, colon + 1);
}

static void parse_deb822(struct collect *c, char *text) {
  struct stanza s = {0};
  char *line, *next;

  wr_buf_init(&s.value);
  for (line = text; line != NULL; line = next) {
    size_t n;
    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    n = strlen(line);
    while (n > 0 && isspace((unsigned char)line[n - 1]))
      line[--n] = '\0';
    deb822_line(c, &s, line);
  }
  stanza_end(c, &s);
  wr_buf_free(&s.value);
}

/* ---- files --------------------------------------------------------------- */

/* apt reads sources.list.d entries named [A-Za-z0-9_.-]+ that end in
 * ".list" or ".sources" and ignores the rest (".disabled", ".save"...). */
static bool source_name(const char *name, bool *deb822) {
  if (strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                   "0123456789_.-") != strlen(name))
    return false;
  *deb822 = wr_str_has_suffix(name, ".sources");
  return *deb822 || wr_str_has_suffix(name, ".list");
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The usable file names in dir, sorted as apt sorts them. A missing
 * directory has none. */
static int list_sources_dir(const char *dir, char ***out, wr_error_t *err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char **names = xcalloc(1, sizeof(char *));
  struct dirent *de;
  DIR *dh;
  bool deb822;

  *out = names;
  if (fd < 0)
    return errno == ENOENT ? 0 : wr_error_set(err, errno, "open `%s`", dir);
  dh = fdopendir(fd);
  if (dh == NULL) {
    close(fd);
    return wr_error_set(err, errno, "open `%s`", dir);
  }
  while ((de = readdir(dh)) != NULL)
    if (source_name(de->d_name, &deb822))
      names = wr_strv_push(names, de->d_name);
  closedir(dh);
  qsort(names, wr_strv_len(names), sizeof(char *), cmp_names);
  *out = names;
  return 0;
}

/* Parse one file; one that vanished since it was listed is skipped. */
static int read_sources_file(struct collect *c, const char *path, bool deb822,
                             wr_error_t *err) {
  _cleanup_free_ char *text = NULL;
  size_t len = 0;
  wr_error_t rerr = {0};

  if (wr_read_file(path, SOURCES_FILE_MAX, &text, &len, &rerr) < 0) {
    if (rerr.code == ENOENT)
      return 0;
    *err = rerr;
    return -1;
  }
  if (deb822)
    parse_deb822(c, text);
  else
    parse_one_line(c, text);
  return 0;
}

int wr_apt_sources_collect(const char *etc_apt_dir, const char *codename,
                           wr_buf_t *out, wr_error_t *err) {
  struct collect c = {.codename = codename, .out = out};
  _cleanup_free_ char *list = xasprintf("%s/sources.list", etc_apt_dir);
  _cleanup_free_ char *dir = xasprintf("%s/sources.list.d", etc_apt_dir);
  _cleanup_strv_ char **names = NULL;
  bool deb822;

  if (read_sources_file(&c, list, false, err) < 0 ||
      list_sources_dir(dir, &names, err) < 0)
    return wr_error_wrap(err, "read apt sources");
  for (char **n = names; *n != NULL; n++) {
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, *n);
    source_name(*n, &deb822);
    if (read_sources_file(&c, path, deb822, err) < 0)
      return wr_error_wrap(err, "read apt sources");
  }
  if (c.found > 0)
    return c.found;
  wr_error_set(err, 0,
               "no apt source for %s found in %s; warren builds images "
               "from the host's apt sources",
               codename, etc_apt_dir);
  if (err != NULL)
    err->code = ENOENT;
  return -1;
}

/* ---- this host ----------------------------------------------------------- */

int wr_host_codename(char **out, wr_error_t *err) {
  wr_error_t first = {0};

  if (wr_os_codename("/etc/os-release", out, &first) == 0)
    return 0;
  if (first.code != ENOENT) {
    *err = first;
    return -1;
  }
  return wr_os_codename("/usr/lib/os-release", out, err);
}

/* "HOST:PORT" of one "http[s]://host[:port]/path" URI (the scheme's port
 * when it names none); NULL for other schemes (file:, cdrom:,
 * mirror+file:, ...), which reach no server. */
static char *uri_host(const char *uri) {
  const char *p, *end, *port;
  size_t digits;

  if (wr_str_has_prefix(uri, "http://"))
    p = uri + 7;
  else if (wr_str_has_prefix(uri, "https://"))
    p = uri + 8;
  else
    return NULL;
  if (strchr(p, '@') != NULL && strchr(p, '@') < p + strcspn(p, "/"))
    p = strchr(p, '@') + 1;
  if (*p == '[')
    end = strchr(p, ']') != NULL ? strchr(p, ']') + 1 : p + strlen(p);
  else
    end = p + strcspn(p, ":/");
  if (end == p)
    return NULL;
  port = wr_str_has_prefix(uri, "https://") ? "443" : "80";
  digits = *end == ':' ? strspn(end + 1, "0123456789") : 0;
  if (digits > 0 && digits <= 5)
    return xasprintf("%.*s:%.*s", (int)(end - p), p, (int)digits, end + 1);
  return xasprintf("%.*s:%s", (int)(end - p), p, port);
}

int wr_apt_source_hosts(const char *etc_apt_dir, const char *codename,
                        char ***out, wr_error_t *err) {
  char **hosts = xcalloc(1, sizeof(char *));
  wr_buf_t text;
  char *line, *next;

  wr_buf_init(&text);
  if (wr_apt_sources_collect(etc_apt_dir, codename, &text, err) < 0) {
    wr_buf_free(&text);
    free(hosts);
    return -1;
  }
  wr_buf_append(&text, "", 1);
  for (line = text.data; line != NULL; line = next) {
    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    if (!wr_str_has_prefix(line, "URIs:"))
      continue;
    char *save = NULL;
    for (char *tok = strtok_r(line + 5, " \t", &save); tok != NULL;
         tok = strtok_r(NULL, " \t", &save)) {
      _cleanup_free_ char *host = uri_host(tok);
      bool dup = false;
      for (size_t i = 0; host != NULL && hosts[i] != NULL; i++)
        dup = dup || strcmp(hosts[i], host) == 0;
      if (host != NULL && !dup)
        hosts = wr_strv_push(hosts, host);
    }
  }
  wr_buf_free(&text);
  *out = hosts;
  return 0;
}
