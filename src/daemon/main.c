/*
 * warrend: the warren daemon. Parses its options, then hands over to the
 * daemon module and runs the loop until SIGTERM or SIGINT.
 *
 * The one singleton, `daemon_state`, lives here; only the loop thread
 * touches it (worker jobs get copies of what they need).
 */
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>

#include "daemon/daemon.h"
#include "daemon/projects_api.h"
#include "daemon/events.h" /* events.c: the journal bounds */

static struct wr_daemon daemon_state;

static const char usage[] =
    "Usage: warrend [OPTIONS]\n"
    "\n"
    "Run the warren daemon in the foreground. It serves the API on a unix\n"
    "socket (root only) and, with --listen, on TCP with an API key.\n"
    "Sandboxes keep running when warrend stops or restarts.\n"
    "\n"
    "Options:\n"
    "  --root DIR         state root (default /var/lib/warren)\n"
    "  --socket PATH      unix socket (default /run/warren/warrend.sock)\n"
    "  --socket-group G   also let group G use the socket (mode 0660): its\n"
    "                     members can run warren and git fetch warren-N\n"
    "                     without sudo, and are as powerful as root (a\n"
    "                     workspace can be any host directory)\n"
    "  --listen ADDR      also listen on TCP HOST:PORT; clients need the key\n"
    "                     in ROOT/api.key (made on first use)\n"
    "  --init PATH        warren-init binary (default: next to warrend)\n"
    "  --cgroup V         cgroup layout: auto, v1 or v2 (default auto)\n"
    "  --cgroup-parent P  cgroup below which sandboxes live (default: the\n"
    "                     root's, recorded in it at its first start; warren\n"
    "                     for /var/lib/warren, warren-ID for another root);\n"
    "                     one another daemon's root uses is refused\n"
    "  --default-disk SIZE  disk limit of sandboxes created without one,\n"
    "                     like 10g (default: none); clients cannot opt out\n"
    "  --data-dir DIR     warren's data files, such as the balanced preset's\n"
    "                     domains (default: $WARREN_DATA_DIR, else\n"
    "                     ../share/warren next to warrend)\n"
    "  --upstream-ca FILE also trust these CA certificates (PEM) when the\n"
    "                     proxy connects to hosts it sets secrets for\n"
    "  --hosts-file FILE  \"ADDR NAME...\" lines the proxy's resolver reads\n"
    "                     before the host's own\n"
    "  --sandbox-ca FILE  also trust these CA certificates (PEM) inside every\n"
    "                     sandbox (repeatable)\n"
    "  --host-ca-dir DIR  the CAs this host's administrator added, trusted\n"
    "                     inside every sandbox: each .crt file below DIR\n"
    "                     (default /usr/local/share/ca-certificates, read\n"
    "                     again at each sandbox start)\n"
    "  --no-host-cas      do not trust the host's added CAs inside sandboxes\n"
    "  --npm-registry URL the npm registry that `@npm-registry` allows and\n"
    "                     images take Node.js from (default: the one npm on\n"
    "                     the host is configured with)\n"
    "  --resolver ADDR[:PORT]\n"
    "                     a DNS server that the proxy's resolver asks, in\n"
    "                     place of those in /etc/resolv.conf (repeatable;\n"
    "                     IPv6 as [ADDR]:PORT; default port 53)\n"
    "  --idle-pause SECONDS\n"
    "                     pause a sandbox after this long without activity\n"
    "                     (requests, attached clients, connections, CPU use),\n"
    "                     unless it was created with its own; any request\n"
    "                     wakes it (default 300; 0: never)\n"
    "  --max-running N    at most N sandboxes running: a create, start,\n"
    "                     resume or wake past it pauses the least recently\n"
    "                     active idle one, or waits in line (default 0: no\n"
    "                     limit)\n"
    "  --max-resident N   at most N sandboxes running or paused: past it the\n"
    "                     least recently active paused one is stopped\n"
    "                     (default 0: no limit)\n"
    "  --queue-timeout SECONDS\n"
    "                     the longest a request waits in line for a slot; a\n"
    "                     request may ask for less (default 300; 0: never\n"
    "                     wait)\n"
    "  --plan-interval SECONDS\n"
    "                     how often the tier planner demotes projects on its\n"
    "                     own (default 300; 0: only on `warren plan --apply`)\n"
    "  --plan-slots N     the live places (running or paused sandboxes) the\n"
    "                     planner counts (default: --max-resident; 0 there\n"
    "                     too: no slot rule)\n"
    "  --plan-free N      of them, kept open for new and returning projects\n"
    "                     (default 2)\n"
    "  --snapshot-days D  a cool project's snapshot is kept D days, then the\n"
    "                     project goes cold (default 30; 0: kept)\n"
    "  --plan-memory-reserve SIZE\n"
    "                     demote warm projects while the host has less memory\n"
    "                     available than this (\"2g\"; default 0: no memory\n"
    "                     rule)\n"
    "  --netns-pool N     network namespaces kept ready for new sandboxes\n"
    "                     (default 4; 0: each start makes its own)\n"
    "  --cgroup-favor-dynmods\n"
    "                     cgroup v1: mount a hierarchy with favordynmods\n"
    "                     (ROOT/cgroup-dynmods) so that a start does not\n"
    "                     wait ~15 ms to enter its cgroups; forks and exits\n"
    "                     cost the whole host a little more, and newer\n"
    "                     kernels keep it so until reboot\n"
    "  --policy-log-max N the connection log keeps at most N entries in\n"
    "                     all, taking from the sandbox that holds most\n"
    "                     first (default 100000)\n"
    "  --policy-log-sandbox-max N\n"
    "                     and at most N of each sandbox (default 10000)\n"
    "  --events-journal N the lifecycle events kept for replay, in memory\n"
    "                     and in the database (16 to 1048576; default "
    "4096)\n"
    "  --log-level L      error, warn, info or debug (default info)\n"
    "  --log-json         log one JSON object per line\n"
    "  -h, --help         show this help\n";

static void die_usage(const char *msg, const char *arg) {
  fprintf(stderr, "warrend: %s `%s`\nTry `warrend --help`.\n", msg, arg);
  exit(2);
}

static enum wr_log_level parse_level(const char *s) {
  static const char *const names[] = {"error", "warn", "info", "debug"};

  for (size_t i = 0; i < WR_ARRAY_SIZE(names); i++)
    if (strcmp(s, names[i]) == 0)
      return (enum wr_log_level)i;
  die_usage("unknown log level", s);
  return WR_LOG_INFO;
}

static enum wr_cgroup_mode parse_cgroup(const char *s) {
  if (strcmp(s, "auto") == 0)
    return WR_CGROUP_AUTO;
  if (strcmp(s, "v1") == 0)
    return WR_CGROUP_V1;
  if (strcmp(s, "v2") == 0)
    return WR_CGROUP_V2;
  die_usage("unknown cgroup layout", s);
  return WR_CGROUP_AUTO;
}

static uint64_t parse_disk(const char *s) {
  uint64_t bytes;
  wr_error_t err;

  if (wr_parse_size(s, &bytes, &err) < 0)
    die_usage("invalid size for --default-disk", s);
  if (bytes < WR_DISK_MIN)
    die_usage("--default-disk must be at least 16m, not", s);
  return bytes;
}

/* A default disk limit the host cannot enforce is a configuration error,
 * not something to find out at the first create. */
static int check_default_disk(const struct wr_daemon *d, wr_error_t *err) {
  if (d->cfg.default_disk == 0 || wr_rt_can_limit(d->rt, "disk"))
    return 0;
  return wr_error_setx(err, ENOTSUP,
                       "--default-disk: this host cannot limit disk (it "
                       "needs mkfs.ext4 from e2fsprogs and /dev/loop-control)");
}

/* warren-init next to this binary, or in ../lib/warren when installed. */
static char *default_init_path(void) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  char *dir, *path;

  if (n <= 0)
    return xstrdup("/usr/local/lib/warren/warren-init");
  self[n] = '\0';
  dir = dirname(self);
  path = xasprintf("%s/warren-init", dir);
  if (access(path, X_OK) == 0)
    return path;
  free(path);
  return xasprintf("%s/../lib/warren/warren-init", dir);
}

static uint64_t parse_entries(const char *opt, const char *s) {
  uint64_t n;
  wr_error_t err;

  if (wr_parse_u64(s, 1, 1000000000, &n, &err) < 0) {
    fprintf(stderr, "warrend: %s takes 1 to 1000000000 entries, not `%s`\n",
            opt, s);
    exit(2);
  }
  return n;
}

/* Seconds, at most 30 days; 0: never. */
static unsigned parse_idle(const char *s) {
  uint64_t n;
  wr_error_t err;

  if (wr_parse_u64(s, 0, 30 * 86400, &n, &err) < 0)
    die_usage("--idle-pause takes seconds, 0 (never) to 2592000, not", s);
  return (unsigned)n;
}

/* The limiter's options (limiter.c): a count, or seconds up to an hour. */
static unsigned parse_limit(const char *opt, const char *s, uint64_t max) {
  uint64_t n;
  wr_error_t err;

  if (wr_parse_u64(s, 0, max, &n, &err) < 0) {
    fprintf(stderr, "warrend: %s takes 0 to %llu, not `%s`\n", opt,
            (unsigned long long)max, s);
    exit(2);
  }
  return (unsigned)n;
}

static unsigned parse_pool(const char *s) {
  uint64_t n;
  wr_error_t err;

  if (wr_parse_u64(s, 0, 64, &n, &err) < 0)
    die_usage("--netns-pool takes 0 to 64, not", s);
  return (unsigned)n;
}

/* events.c's journal size. */
static size_t parse_journal(const char *s) {
  uint64_t n;
  wr_error_t err;

  if (wr_parse_u64(s, WR_EVENTS_JOURNAL_MIN, WR_EVENTS_JOURNAL_MAX, &n, &err) <
      0)
    die_usage("--events-journal takes 16 to 1048576 events, not", s);
  return (size_t)n;
}

/* A group name or number. */
static gid_t parse_group(const char *s) {
  struct group *g = getgrnam(s);
  uint64_t n;

  if (g != NULL)
    return g->gr_gid;
  if (wr_parse_u64(s, 0, UINT32_MAX - 1, &n, NULL) < 0)
    die_usage("no such group", s);
  return (gid_t)n;
}

/* A smaller log without a word on sandboxes lets each fill all of it. */
static void check_policy_log(struct wr_netlog_limits *l, bool sandbox_given) {
  if (!sandbox_given)
    l->sandbox_max = WR_MIN(l->sandbox_max, l->max);
  if (l->sandbox_max <= l->max)
    return;
  fprintf(stderr,
          "warrend: --policy-log-sandbox-max (%llu) cannot be more than "
          "--policy-log-max (%llu)\n",
          (unsigned long long)l->sandbox_max, (unsigned long long)l->max);
  exit(2);
}

static void parse_args(int argc, char **argv, struct wr_daemon_config *cfg,
                       char ***sandbox_cas, enum wr_log_level *level,
                       bool *json) {
  static const struct option opts[] = {
      {"root", required_argument, NULL, 'r'},
      {"socket", required_argument, NULL, 's'},
      {"socket-group", required_argument, NULL, 'g'},
      {"listen", required_argument, NULL, 'l'},
      {"init", required_argument, NULL, 'i'},
      {"cgroup", required_argument, NULL, 'c'},
      {"cgroup-parent", required_argument, NULL, 'p'},
      {"default-disk", required_argument, NULL, 'D'},
      {"data-dir", required_argument, NULL, 'd'},
      {"upstream-ca", required_argument, NULL, 'u'},
      {"hosts-file", required_argument, NULL, 'H'},
      {"sandbox-ca", required_argument, NULL, 'C'},
      {"host-ca-dir", required_argument, NULL, 'A'},
      {"no-host-cas", no_argument, NULL, 'n'},
      {"resolver", required_argument, NULL, 'R'},
      {"npm-registry", required_argument, NULL, 'P'},
      {"netns-pool", required_argument, NULL, 'N'},
      {"idle-pause", required_argument, NULL, 'I'},
      {"max-running", required_argument, NULL, 'X'},   /* limiter.c */
      {"max-resident", required_argument, NULL, 'Y'},  /* limiter.c */
      {"queue-timeout", required_argument, NULL, 'Q'}, /* limiter.c */
      {"plan-interval", required_argument, NULL, 256}, /* projects_api.c */
      {"plan-slots", required_argument, NULL, 257},
      {"plan-free", required_argument, NULL, 258},
      {"snapshot-days", required_argument, NULL, 259},
      {"plan-memory-reserve", required_argument, NULL, 260},
      {"cgroup-favor-dynmods", no_argument, NULL, 'F'},
      {"policy-log-max", required_argument, NULL, 'M'},
      {"policy-log-sandbox-max", required_argument, NULL, 'S'},
      {"events-journal", required_argument, NULL, 'E'}, /* events.c */
      {"log-level", required_argument, NULL, 'L'},
      {"log-json", no_argument, NULL, 'J'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bool sandbox_max_given = false, no_host_cas = false;
  int c;

  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'r':
      cfg->root = optarg;
      break;
    case 's':
      cfg->socket_path = optarg;
      break;
    case 'g':
      cfg->socket_gid = parse_group(optarg);
      break;
    case 'l':
      cfg->listen_addr = optarg;
      break;
    case 'i':
      cfg->init_path = optarg;
      break;
    case 'c':
      cfg->cgroup_mode = parse_cgroup(optarg);
      break;
    case 'p':
      cfg->cgroup_parent = optarg;
      break;
    case 'D':
      cfg->default_disk = parse_disk(optarg);
      break;
    case 'd':
      cfg->data_dir = optarg;
      break;
    case 'u':
      cfg->upstream_ca = optarg;
      break;
    case 'H':
      cfg->hosts_file = optarg;
      break;
    case 'C':
      *sandbox_cas = wr_strv_push(*sandbox_cas, optarg);
      break;
    case 'A':
      cfg->host_ca_dir = optarg;
      break;
    case 'n':
      no_host_cas = true;
      break;
    case 'R':
      cfg->resolvers = wr_strv_push(cfg->resolvers, optarg);
      break;
    case 'P':
      cfg->npm_registry = optarg;
      break;
    case 'N':
      cfg->netns_pool = parse_pool(optarg);
      break;
    case 'I':
      cfg->idle_pause_s = parse_idle(optarg);
      break;
    case 'X': /* limiter.c */
      cfg->max_running = parse_limit("--max-running", optarg, 1u << 20);
      break;
    case 'Y':
      cfg->max_resident = parse_limit("--max-resident", optarg, 1u << 20);
      break;
    case 'Q':
      cfg->queue_timeout_s = parse_limit("--queue-timeout", optarg, 3600);
      break;
    case 256: /* projects_api.c */
      cfg->plan_interval_s = parse_limit("--plan-interval", optarg, 86400);
      break;
    case 257:
      cfg->plan_slots = parse_limit("--plan-slots", optarg, 1u << 20);
      break;
    case 258:
      cfg->plan_free = parse_limit("--plan-free", optarg, 1u << 20);
      break;
    case 259:
      cfg->snapshot_days = parse_limit("--snapshot-days", optarg, 3650);
      break;
    case 260:
      if (wr_parse_size(optarg, &cfg->plan_memory_reserve, NULL) < 0)
        die_usage("--plan-memory-reserve takes a size, not", optarg);
      break;
    case 'F':
      cfg->cgroup_favor_dynmods = true;
      break;
    case 'M':
      cfg->policy_log.max = parse_entries("--policy-log-max", optarg);
      break;
    case 'S':
      cfg->policy_log.sandbox_max =
          parse_entries("--policy-log-sandbox-max", optarg);
      sandbox_max_given = true;
      break;
    case 'E': /* events.c */
      cfg->events_journal = parse_journal(optarg);
      break;
    case 'L':
      *level = parse_level(optarg);
      break;
    case 'J':
      *json = true;
      break;
    case 'h':
      fputs(usage, stdout);
      exit(0);
    default:
      fputs("Try `warrend --help`.\n", stderr);
      exit(2);
    }
  }
  if (optind < argc)
    die_usage("unexpected argument", argv[optind]);
  check_policy_log(&cfg->policy_log, sandbox_max_given);
  if (no_host_cas)
    cfg->host_ca_dir = NULL;
  cfg->sandbox_cas = *sandbox_cas;
}

static void on_signal(uv_signal_t *h, int signum) {
  (void)signum;
  wr_daemon_shutdown(h->data);
}

/* Many sandboxes mean many fds (pidfds, control sockets, pipes). */
static void raise_nofile(void) {
  struct rlimit rl;

  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int main(int argc, char **argv) {
  struct wr_daemon_config cfg = {
      .root = "/var/lib/warren",
      .socket_path = "/run/warren/warrend.sock",
      .socket_gid = (gid_t)-1,
      .roots_db = WR_ROOTS_DB,
      .default_image = "base",
      .netns_pool = 4,
      .idle_pause_s = 300,
      .queue_timeout_s = 300,
      .plan_interval_s = WR_PLAN_INTERVAL_S,
      .plan_free = WR_PLAN_FREE,
      .snapshot_days = WR_SNAPSHOT_DAYS,
      .host_ca_dir = "/usr/local/share/ca-certificates",
      .policy_log = {.max = WR_NETLOG_MAX,
                     .sandbox_max = WR_NETLOG_SANDBOX_MAX},
  };
  _cleanup_free_ char *init_path = NULL;
  _cleanup_strv_ char **sandbox_cas = xcalloc(1, sizeof(char *));
  enum wr_log_level level = WR_LOG_INFO;
  bool json = false;
  wr_error_t err;
  uv_loop_t *loop = uv_default_loop();
  int r;

  parse_args(argc, argv, &cfg, &sandbox_cas, &level, &json);
  wr_log_init("warrend", level, json);
  if (geteuid() != 0) {
    fputs("warrend: must run as root (it creates namespaces, cgroups and "
          "mounts)\n",
          stderr);
    return 1;
  }
  if (cfg.init_path == NULL)
    cfg.init_path = init_path = default_init_path();
  signal(SIGPIPE, SIG_IGN);
  raise_nofile();
  /* Blocking jobs (mounts, clone, tar streams) share the threadpool. */
  setenv("UV_THREADPOOL_SIZE", "16", 0);
  if (wr_daemon_init(&daemon_state, loop, &cfg, &err) < 0 ||
      check_default_disk(&daemon_state, &err) < 0 ||
      wr_daemon_recover(&daemon_state, &err) < 0 ||
      wr_daemon_listen(&daemon_state, &err) < 0) {
    wr_err("%s", err.msg);
    return 1;
  }
  uv_signal_init(loop, &daemon_state.sigterm);
  uv_signal_init(loop, &daemon_state.sigint);
  daemon_state.sigterm.data = daemon_state.sigint.data = &daemon_state;
  uv_signal_start(&daemon_state.sigterm, on_signal, SIGTERM);
  uv_signal_start(&daemon_state.sigint, on_signal, SIGINT);
  wr_info("warrend %s ready (root %s, cgroup %s)", WR_VERSION, cfg.root,
          wr_rt_cgroup_version(daemon_state.rt));
  r = uv_run(loop, UV_RUN_DEFAULT);
  wr_daemon_fini(&daemon_state);
  return r == 0 ? 0 : 1;
}
