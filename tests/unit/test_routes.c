/*
 * The daemon's route table and docs/api.yaml describe the same API: every
 * route is documented and every documented operation is served.
 *
 * The OpenAPI document is read line by line: path keys at two spaces of
 * indentation under `paths:`, operations at four. That is the layout the
 * document keeps (see its header); a reformatted file fails here loudly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <ctype.h>

#include "daemon/daemon.h"

#define MAX_OPS 256

struct op {
  char method[16];
  char path[256];
};

static const char *doc_path(void) {
  static char path[4096];
  const char *top = getenv("WR_TOP");
  char *slash;

  if (top != NULL) {
    snprintf(path, sizeof(path), "%s/docs/api.yaml", top);
    return path;
  }
  if (access("docs/api.yaml", R_OK) == 0)
    return "docs/api.yaml";
  /* tests/unit/test_routes.c -> docs/api.yaml */
  snprintf(path, sizeof(path), "%s", __FILE__);
  slash = strstr(path, "tests/unit/");
  if (slash != NULL)
    strcpy(slash, "docs/api.yaml");
  return path;
}

static size_t read_doc_ops(struct op *ops) {
  FILE *f = fopen(doc_path(), "re");
  char line[512], current[256] = "";
  bool in_paths = false;
  size_t n = 0;

  assert_non_null(f);
  while (fgets(line, sizeof(line), f) != NULL) {
    line[strcspn(line, "\r\n")] = '\0';
    if (strcmp(line, "paths:") == 0) {
      in_paths = true;
      continue;
    }
    if (in_paths && line[0] != ' ' && line[0] != '\0')
      in_paths = false;
    if (!in_paths)
      continue;
    if (strncmp(line, "  /", 3) == 0 && line[strlen(line) - 1] == ':') {
      snprintf(current, sizeof(current), "%.*s", (int)strlen(line) - 3,
               line + 2);
    } else if (strncmp(line, "    ", 4) == 0 &&
               islower((unsigned char)line[4]) &&
               line[strlen(line) - 1] == ':' && current[0] != '\0') {
      char m[16];
      snprintf(m, sizeof(m), "%.*s", (int)strlen(line) - 5, line + 4);
      if (strcmp(m, "get") && strcmp(m, "post") && strcmp(m, "put") &&
          strcmp(m, "delete") && strcmp(m, "patch"))
        continue; /* parameters:, summary: ... */
      assert_true(n < MAX_OPS);
      for (char *p = m; *p; p++)
        *p = (char)toupper((unsigned char)*p);
      snprintf(ops[n].method, sizeof(ops[n].method), "%s", m);
      snprintf(ops[n].path, sizeof(ops[n].path), "%s", current);
      n++;
    }
  }
  fclose(f);
  return n;
}

static bool has_op(const struct op *ops, size_t n, const char *method,
                   const char *path) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(ops[i].method, method) == 0 && strcmp(ops[i].path, path) == 0)
      return true;
  return false;
}

static void test_every_route_is_documented(void **state) {
  struct op ops[MAX_OPS];
  size_t n = read_doc_ops(ops), nroutes;
  const struct wr_http_route *routes = wr_daemon_routes(&nroutes);
  (void)state;

  assert_true(n > 0);
  for (size_t i = 0; i < nroutes; i++) {
    if (!has_op(ops, n, routes[i].method, routes[i].pattern))
      fail_msg("%s %s is served but not in docs/api.yaml", routes[i].method,
               routes[i].pattern);
  }
}

static void test_every_documented_route_is_served(void **state) {
  struct op ops[MAX_OPS];
  size_t n = read_doc_ops(ops), nroutes;
  const struct wr_http_route *routes = wr_daemon_routes(&nroutes);
  (void)state;

  for (size_t i = 0; i < n; i++) {
    bool found = false;
    for (size_t k = 0; k < nroutes && !found; k++)
      found = strcmp(routes[k].method, ops[i].method) == 0 &&
              strcmp(routes[k].pattern, ops[i].path) == 0;
    if (!found)
      fail_msg("%s %s is in docs/api.yaml but not served", ops[i].method,
               ops[i].path);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_route_is_documented),
      cmocka_unit_test(test_every_documented_route_is_served),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
