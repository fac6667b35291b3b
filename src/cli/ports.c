/*
 * `warren ports NAME [--publish SPEC | --unpublish HOSTPORT]`: a port
 * inside a sandbox (on its own loopback) reachable from the host.
 */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren ports NAME [--json]\n"
    "       warren ports NAME --publish [ADDR:]HOSTPORT:PORT\n"
    "       warren ports NAME --unpublish HOSTPORT\n"
    "\n"
    "List, add or remove a sandbox's published ports. A published port\n"
    "makes 127.0.0.1:PORT inside the sandbox reachable at ADDR:HOSTPORT on\n"
    "the host (ADDR defaults to 127.0.0.1: this host only; 0.0.0.0 is\n"
    "every interface). Publications survive stops and daemon restarts;\n"
    "connections are refused while the sandbox is not running. They go\n"
    "away with the sandbox.\n"
    "\n"
    "Options:\n"
    "  --publish SPEC       publish [ADDR:]HOSTPORT:PORT; an IPv6 ADDR is\n"
    "                       written in brackets, like [::1]:8080:8000\n"
    "  --unpublish HOSTPORT remove the publication on HOSTPORT\n"
    "  --json               print JSON: {\"ports\":[...]}, or the new\n"
    "                       publication\n"
    "  -h, --help           show this help\n"
    "\n"
    "Examples:\n"
    "  warren exec -d web -- python3 -m http.server 8000\n"
    "  warren ports web --publish 8080:8000\n"
    "  curl http://127.0.0.1:8080/\n"
    "  warren ports web --unpublish 8080\n";

enum { OPT_PUBLISH = 256, OPT_UNPUBLISH, OPT_JSON };

static int parse_port(const char *s, const char *what, uint16_t *out,
                      wr_error_t *err) {
  uint64_t v;

  if (wr_parse_u64(s, 1, 65535, &v, NULL) < 0)
    return wr_error_set(err, 0, "invalid %s `%s` (1 to 65535)", what, s);
  *out = (uint16_t)v;
  return 0;
}

/* ADDR as typed, without the brackets of an IPv6 address; one with
 * colons but no brackets would be ambiguous. */
static int parse_addr(const char *s, size_t len, char **out, wr_error_t *err) {
  if (len == 0)
    return wr_error_set(err, 0, "the address before the host port is empty");
  if (s[0] == '[' && len > 2 && s[len - 1] == ']') {
    *out = xstrndup(s + 1, len - 2);
    return 0;
  }
  if (memchr(s, ':', len) != NULL || memchr(s, '[', len) != NULL)
    return wr_error_set(err, 0,
                        "write an IPv6 address in brackets, like "
                        "[::1]:8080:8000");
  *out = xstrndup(s, len);
  return 0;
}

int wr_cli_parse_publish(const char *spec, struct wr_cli_publish *out,
                         wr_error_t *err) {
  const char *last = strrchr(spec, ':');
  _cleanup_free_ char *head = NULL;
  char *mid;

  memset(out, 0, sizeof(*out));
  if (last == NULL)
    return wr_error_set(err, 0,
                        "invalid --publish `%s`: expected "
                        "[ADDR:]HOSTPORT:PORT",
                        spec);
  if (parse_port(last + 1, "port", &out->port, err) < 0)
    return -1;
  head = xstrndup(spec, (size_t)(last - spec));
  mid = strrchr(head, ':');
  if (mid != NULL && (strchr(head, ']') == NULL || mid > strchr(head, ']'))) {
    *mid = '\0';
    if (parse_addr(head, strlen(head), &out->addr, err) < 0)
      return -1;
    return parse_port(mid + 1, "host port", &out->host_port, err);
  }
  return parse_port(head, "host port", &out->host_port, err);
}

int wr_cli_ports_parse(int argc, char **argv, struct wr_cli_ports_opts *o,
                       wr_error_t *err) {
  static const struct option opts[] = {
      {"publish", required_argument, NULL, OPT_PUBLISH},
      {"unpublish", required_argument, NULL, OPT_UNPUBLISH},
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, err)) != -1) {
    if (c == '?')
      return -1;
    if ((c == OPT_PUBLISH || c == OPT_UNPUBLISH) &&
        (o->has_publish || o->unpublish != 0))
      return wr_error_set(err, 0, "one --publish or --unpublish at a time");
    if (c == OPT_PUBLISH && wr_cli_parse_publish(optarg, &o->publish, err) < 0)
      return -1;
    if (c == OPT_UNPUBLISH &&
        parse_port(optarg, "--unpublish", &o->unpublish, err) < 0)
      return -1;
    o->has_publish |= c == OPT_PUBLISH;
    o->json |= c == OPT_JSON;
    o->help |= c == 'h';
  }
  if (o->help)
    return 0;
  if (argc - optind != 1)
    return wr_error_set(err, 0, "expected one sandbox name");
  o->sandbox = argv[optind];
  return 0;
}

void wr_cli_ports_opts_free(struct wr_cli_ports_opts *o) {
  free(o->publish.addr);
  o->publish.addr = NULL;
}

/* "127.0.0.1:8080", "[::1]:8080". */
static char *published(const json_t *p) {
  const char *addr = wr_cli_jstr(p, "addr");

  return xasprintf(strchr(addr, ':') ? "[%s]:%lld" : "%s:%lld", addr,
                   (long long)wr_cli_jint(p, "host_port"));
}

static int list_ports(const struct wr_cli_ctx *ctx,
                      const struct wr_cli_ports_opts *o, wr_error_t *err) {
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  _cleanup_free_ char *path = wr_cli_sandbox_path(o->sandbox, "/ports");
  _cleanup_json_ json_t *reply = NULL;
  json_t *list, *p;
  size_t i;

  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, err) < 0)
    return -1;
  if (o->json)
    return wr_cli_print_json(reply);
  list = json_object_get(reply, "ports");
  wr_cli_table_init(&t, 2);
  wr_cli_table_add(&t, (const char *const[]){"PUBLISHED", "PORT"});
  json_array_foreach (list, i, p) {
    _cleanup_free_ char *host = published(p);
    char port[16];
    snprintf(port, sizeof(port), "%lld", (long long)wr_cli_jint(p, "port"));
    wr_cli_table_add(&t, (const char *const[]){host, port});
  }
  wr_cli_table_print(&t, stdout);
  return 0;
}

static int publish(const struct wr_cli_ctx *ctx,
                   const struct wr_cli_ports_opts *o, wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(o->sandbox, "/ports");
  _cleanup_json_ json_t *body =
      json_pack("{s:i,s:i}", "host_port", (int)o->publish.host_port, "port",
                (int)o->publish.port);
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *host = NULL;

  if (o->publish.addr != NULL)
    json_object_set_new(body, "addr", json_string(o->publish.addr));
  if (wr_cli_call(ctx, "POST", path, body, &reply, NULL, err) < 0)
    return -1;
  if (o->json)
    return wr_cli_print_json(reply);
  host = published(reply);
  printf("%s -> %s:%lld\n", host, o->sandbox,
         (long long)wr_cli_jint(reply, "port"));
  return 0;
}

static int unpublish(const struct wr_cli_ctx *ctx,
                     const struct wr_cli_ports_opts *o, wr_error_t *err) {
  _cleanup_free_ char *suffix = xasprintf("/ports/%u", (unsigned)o->unpublish);
  _cleanup_free_ char *path = wr_cli_sandbox_path(o->sandbox, suffix);

  if (wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, err) < 0)
    return -1;
  printf("unpublished %u\n", (unsigned)o->unpublish);
  return 0;
}

int wr_cli_cmd_ports(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_ports_opts o _cleanup_(wr_cli_ports_opts_free) = {0};
  wr_error_t err = {0};
  int r;

  if (wr_cli_ports_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("ports", &err);
  if (o.help)
    return wr_cli_help(help);
  if (o.has_publish)
    r = publish(ctx, &o, &err);
  else if (o.unpublish != 0)
    r = unpublish(ctx, &o, &err);
  else
    r = list_ports(ctx, &o, &err);
  if (r < 0 && err.msg[0] != '\0')
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  return r < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
}
