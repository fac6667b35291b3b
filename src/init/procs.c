/*
 * The processes warren-init tracks: one record per spawned process, from
 * SPAWNED until its EXIT was sent (or, for background processes, until
 * FORGET). At most WR_INIT_MAX_PROCS records exist, so a plain array in
 * spawn order with linear search is both simplest and fast enough.
 */
#include "init/initd.h"

void wr_init_table_free(struct wr_init_table *t) {
  while (t->n > 0)
    wr_init_table_remove(t, &t->recs[t->n - 1]);
  free(t->recs);
  t->recs = NULL;
  t->cap = 0;
}

/* The next proc_id: growing, never 0, and never one still in use even
 * after 2^32 spawns wrap the counter. */
static uint32_t next_id(struct wr_init_table *t) {
  do
    t->last_id++;
  while (t->last_id == 0 || wr_init_table_find(t, t->last_id) != NULL);
  return t->last_id;
}

/* argv joined with spaces and cut to WR_INIT_CMD_MAX bytes, never inside a
 * UTF-8 sequence, so the daemon can put it in JSON as it is. */
static void summarize(const struct wr_init_spawn *req, char *out, size_t size) {
  wr_buf_t b;
  size_t len;

  wr_buf_init(&b);
  for (uint32_t i = 0; i < req->argc && b.len < size; i++) {
    if (i > 0)
      wr_buf_append(&b, " ", 1);
    wr_buf_puts(&b, req->argv[i]);
  }
  len = b.len;
  if (len >= size) {
    len = size - 1;
    while (len > 0 && ((unsigned char)b.data[len] & 0xc0) == 0x80)
      len--;
  }
  memcpy(out, b.data, len);
  out[len] = '\0';
  wr_buf_free(&b);
}

struct wr_init_rec *wr_init_table_add(struct wr_init_table *t, pid_t pid,
                                      const struct wr_init_spawn *req) {
  struct wr_init_rec *r;

  if (t->n == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 16;
    t->recs = xrealloc(t->recs, t->cap * sizeof(*t->recs));
  }
  r = &t->recs[t->n];
  *r = (struct wr_init_rec){
      .proc_id = next_id(t),
      .pid = pid,
      .flags = req->flags,
      .running = true,
      .started_ms = wr_now_ms(),
      .kept = {-1, -1},
  };
  wr_strlcpy(r->tag, req->tag, sizeof(r->tag));
  summarize(req, r->cmd, sizeof(r->cmd));
  t->n++;
  return r;
}

struct wr_init_rec *wr_init_table_find(struct wr_init_table *t,
                                       uint32_t proc_id) {
  for (size_t i = 0; i < t->n; i++)
    if (t->recs[i].proc_id == proc_id)
      return &t->recs[i];
  return NULL;
}

struct wr_init_rec *wr_init_table_find_running(struct wr_init_table *t,
                                               pid_t pid) {
  for (size_t i = 0; i < t->n; i++)
    if (t->recs[i].running && t->recs[i].pid == pid)
      return &t->recs[i];
  return NULL;
}

void wr_init_table_remove(struct wr_init_table *t, struct wr_init_rec *r) {
  size_t i = (size_t)(r - t->recs);

  for (unsigned k = 0; k < r->nkept; k++)
    close(r->kept[k]);
  memmove(&t->recs[i], &t->recs[i + 1], (t->n - i - 1) * sizeof(*r));
  t->n--;
}

void wr_init_rec_to_proc(const struct wr_init_rec *r, struct wr_init_proc *p) {
  memset(p, 0, sizeof(*p));
  p->proc_id = r->proc_id;
  p->pid = r->pid;
  p->flags = r->flags;
  p->running = r->running;
  p->has_fds = r->nkept > 0;
  p->status = r->status;
  p->started_ms = r->started_ms;
  memcpy(p->tag, r->tag, sizeof(p->tag));
  memcpy(p->cmd, r->cmd, sizeof(p->cmd));
}
