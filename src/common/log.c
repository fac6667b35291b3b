/*
 * Logging to stderr: one line per event, plain or JSON. The level and
 * format are set once by main before any thread starts; after that the
 * state is only read, so every thread may log.
 */
#include "common.h"

#include <pthread.h>
#include <time.h>

static struct {
  const char *prog;
  enum wr_log_level level;
  bool json;
} log_conf = {"warren", WR_LOG_INFO, false};

static const char *level_names[] = {"error", "warn", "info", "debug"};

void wr_log_init(const char *prog, enum wr_log_level level, bool json) {
  log_conf.prog = prog;
  log_conf.level = level;
  log_conf.json = json;
}

static void json_escape(const char *s, char *out, size_t size) {
  size_t o = 0;

  for (; *s != '\0' && o + 7 < size; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if (c < 0x20) {
      o += (size_t)snprintf(out + o, size - o, "\\u%04x", c);
    } else {
      out[o++] = (char)c;
    }
  }
  out[o] = '\0';
}

void wr_log(enum wr_log_level level, const char *fmt, ...) {
  char msg[2048];
  char stamp[40];
  va_list ap;

  if (level > log_conf.level)
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  wr_format_time(wr_now_ms(), stamp, sizeof(stamp));
  if (log_conf.json) {
    char esc[sizeof(msg) * 2];
    json_escape(msg, esc, sizeof(esc));
    fprintf(stderr, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n",
            stamp, level_names[level], esc);
  } else {
    fprintf(stderr, "%s %s %s: %s\n", stamp, log_conf.prog, level_names[level],
            msg);
  }
}
