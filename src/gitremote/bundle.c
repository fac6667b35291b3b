/*
 * The header of a git bundle, read from bytes a sandbox made.
 *
 * The format is git's (Documentation/gitformat-bundle.txt):
 *
 *   "# v2 git bundle\n" | "# v3 git bundle\n" ("@key=value\n")*
 *   ("-" OID [" " comment] "\n")*      prerequisites
 *   (OID " " REFNAME "\n")*            references
 *   "\n"
 *   the pack ("PACK" ...)
 *
 * Each line is bounded, and so are the header and the number of refs.
 */
#include "gitremote/gitremote.h"

/* An OID, a space and the longest ref name. */
#define LINE_MAX_BYTES (64 + 1 + 1024)

struct parser {
  const char *p, *end;
  struct wr_bundle_header *h;
  size_t cap; /* refs allocated */
};

/* The next line without its '\n'; fails when there is no '\n' in time. */
static int next_line(struct parser *ps, const char **line, size_t *len,
                     wr_error_t *err) {
  size_t avail = (size_t)(ps->end - ps->p);
  const char *nl = memchr(ps->p, '\n', WR_MIN(avail, LINE_MAX_BYTES + 1));

  if (nl == NULL)
    return wr_error_set(err, 0,
                        avail > LINE_MAX_BYTES
                            ? "a line of the bundle's header is too long"
                            : "the bundle's header is cut short");
  *line = ps->p;
  *len = (size_t)(nl - ps->p);
  ps->p = nl + 1;
  if (memchr(*line, '\0', *len) != NULL)
    return wr_error_set(err, 0, "the bundle's header holds a NUL byte");
  return 0;
}

static bool is_lower_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

/* "@object-format=sha1|sha256"; anything else (a filter: a partial
 * bundle) is refused. */
static int capability(struct parser *ps, const char *line, size_t len,
                      wr_error_t *err) {
  if (len == 19 && memcmp(line, "@object-format=sha1", 19) == 0) {
    ps->h->oid_len = 40;
    return 0;
  }
  if (len == 21 && memcmp(line, "@object-format=sha256", 21) == 0) {
    ps->h->oid_len = 64;
    return 0;
  }
  return wr_error_set(err, 0, "the bundle asks for an unsupported capability");
}

/* Branches, tags and HEAD: what `--branches --tags HEAD` makes. */
static bool name_wanted(const char *name) {
  if (strcmp(name, "HEAD") == 0)
    return true;
  return (wr_str_has_prefix(name, "refs/heads/") ||
          wr_str_has_prefix(name, "refs/tags/")) &&
         wr_cli_git_refname_valid(name);
}

static int ref_line(struct parser *ps, const char *line, size_t len,
                    wr_error_t *err) {
  struct wr_bundle_header *h = ps->h;
  size_t n = h->oid_len;
  _cleanup_free_ char *name = NULL;
  struct wr_bundle_ref *r;

  if (len < n + 2 || line[n] != ' ' || !is_lower_hex(line, n))
    return wr_error_set(err, 0, "the bundle's header has a malformed line");
  if (strspn(line, "0") >= n)
    return wr_error_set(err, 0, "the bundle lists a null object id");
  name = xstrndup(line + n + 1, len - n - 1);
  if (!name_wanted(name))
    return wr_error_set(err, 0,
                        "the bundle lists a ref that is not a valid branch "
                        "or tag name");
  if (h->nrefs == WR_BUNDLE_REFS_MAX)
    return wr_error_set(err, 0, "the bundle lists more than %d refs",
                        WR_BUNDLE_REFS_MAX);
  if (h->nrefs == ps->cap) {
    ps->cap = ps->cap ? ps->cap * 2 : 16;
    h->refs = xrealloc(h->refs, ps->cap * sizeof(*h->refs));
  }
  r = &h->refs[h->nrefs++];
  memcpy(r->oid, line, n);
  r->oid[n] = '\0';
  r->name = steal_ptr(&name);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const struct wr_bundle_ref *)a)->name,
                ((const struct wr_bundle_ref *)b)->name);
}

/* Sorted by name, so that a name listed twice is found (and lookups are
 * a binary search). */
static int sort_refs(struct wr_bundle_header *h, wr_error_t *err) {
  if (h->nrefs == 0)
    return wr_error_set(err, 0, "the bundle lists no refs");
  qsort(h->refs, h->nrefs, sizeof(*h->refs), by_name);
  for (size_t i = 1; i < h->nrefs; i++)
    if (strcmp(h->refs[i - 1].name, h->refs[i].name) == 0)
      return wr_error_set(err, 0, "the bundle lists a ref twice");
  return 0;
}

/* The signature line, then capabilities (v3 only). */
static int preamble(struct parser *ps, const char **line, size_t *len,
                    wr_error_t *err) {
  if (next_line(ps, line, len, err) < 0)
    return -1;
  if (*len == 15 && memcmp(*line, "# v2 git bundle", 15) == 0)
    ps->h->version = 2;
  else if (*len == 15 && memcmp(*line, "# v3 git bundle", 15) == 0)
    ps->h->version = 3;
  else
    return wr_error_set(err, 0, "not a git bundle (v2 or v3)");
  ps->h->oid_len = 40;
  for (;;) {
    if (next_line(ps, line, len, err) < 0)
      return -1;
    if (ps->h->version != 3 || *len == 0 || (*line)[0] != '@')
      return 0;
    if (capability(ps, *line, *len, err) < 0)
      return -1;
  }
}

int wr_bundle_header_parse(const char *data, size_t len,
                           struct wr_bundle_header *h, wr_error_t *err) {
  struct parser ps = {
      .p = data, .end = data + WR_MIN(len, WR_BUNDLE_HEADER_MAX), .h = h};
  const char *line;
  size_t n;

  memset(h, 0, sizeof(*h));
  if (preamble(&ps, &line, &n, err) < 0)
    goto fail;
  while (n > 0) {
    if (line[0] == '-') {
      wr_error_set(err, 0,
                   "the bundle needs commits that it does not hold (an "
                   "incremental bundle): it was not made by warren");
      goto fail;
    }
    if (ref_line(&ps, line, n, err) < 0 || next_line(&ps, &line, &n, err) < 0)
      goto fail;
  }
  h->pack_offset = (size_t)(ps.p - data);
  if (len - h->pack_offset < 4 || memcmp(ps.p, "PACK", 4) != 0) {
    wr_error_set(err, 0, "no pack follows the bundle's header");
    goto fail;
  }
  if (sort_refs(h, err) < 0)
    goto fail;
  return 0;
fail:
  wr_bundle_header_free(h);
  return -1;
}

void wr_bundle_header_free(struct wr_bundle_header *h) {
  for (size_t i = 0; i < h->nrefs; i++)
    free(h->refs[i].name);
  free(h->refs);
  memset(h, 0, sizeof(*h));
}

const struct wr_bundle_ref *wr_bundle_find(const struct wr_bundle_header *h,
                                           const char *name) {
  struct wr_bundle_ref key = {.name = (char *)name};

  if (h->nrefs == 0)
    return NULL;
  return bsearch(&key, h->refs, h->nrefs, sizeof(*h->refs), by_name);
}
