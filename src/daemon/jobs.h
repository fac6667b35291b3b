/*
 * Internal to the daemon module: blocking work on the threadpool with
 * its result back on the loop (jobs.c), which handlers and lifecycle
 * operations share.
 */
#ifndef WR_DAEMON_JOBS_H
#define WR_DAEMON_JOBS_H

#include "daemon/daemon.h"

/* Run fn on the threadpool, then done on the loop. */
struct wr_job;
typedef void (*wr_job_fn)(struct wr_job *job);
struct wr_job {
  uv_work_t work;
  struct wr_daemon *d;
  wr_job_fn fn;   /* worker thread */
  wr_job_fn done; /* loop thread; frees the job */
  void *arg;
  wr_error_t err;
  int result;
};
void wr_job_queue(struct wr_daemon *d, struct wr_job *job);

#endif
