/*
 * Blocking work on libuv's threadpool: fn on a worker thread, then done
 * on the loop with the result, cancelled or not.
 */
#include "daemon/jobs.h"

static void job_work(uv_work_t *w) {
  struct wr_job *job = w->data;

  wr_error_clear(&job->err);
  job->fn(job);
}

static void job_after(uv_work_t *w, int status) {
  struct wr_job *job = w->data;

  if (status == UV_ECANCELED) {
    job->result = -1;
    wr_error_set(&job->err, ECANCELED, "cancelled");
  }
  job->done(job);
}

void wr_job_queue(struct wr_daemon *d, struct wr_job *job) {
  job->d = d;
  job->work.data = job;
  uv_queue_work(d->loop, &job->work, job_work, job_after);
}
