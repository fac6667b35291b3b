/*
 * A running sandbox made into another: what a warm pool's claim changes
 * in a started, paused sandbox so that it is the new one (see
 * docs/templates.md, "The warm pool"). No copy: limits are cgroup
 * writes, the names a few small files and one sethostname.
 *
 * The hostname lives in the sandbox's UTS namespace, which belongs to the
 * host's user namespace (as its network namespace does): root inside
 * cannot change it, and warren-init cannot either. So a thread of warrend
 * joins it, sets the name and ends; a thread that ends takes its
 * namespaces with it, so no worker thread is ever left in a sandbox's.
 */
#include "runtime/cgroup.h"
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

int wr_rt_set_limits(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                     wr_error_t *err) {
  struct wr_cgroup_limits lim = {spec->memory_bytes, spec->cpus, spec->pids};

  if (rt->cg.ops->set_limits(&rt->cg, spec->id, &lim, err) < 0)
    return wr_error_wrap(err, "set the limits of sandbox `%s`", spec->id);
  return 0;
}

struct uts_arg {
  int nsfd;
  const char *hostname;
  int error; /* errno, 0 when done */
  const char *what;
};

static void *uts_thread(void *p) {
  struct uts_arg *a = p;

  if (setns(a->nsfd, CLONE_NEWUTS) < 0) {
    a->error = errno;
    a->what = "join the sandbox's UTS namespace";
  } else if (sethostname(a->hostname, strlen(a->hostname)) < 0) {
    a->error = errno;
    a->what = "sethostname";
  }
  return NULL;
}

static int set_hostname(const struct wr_rt_instance *inst, const char *hostname,
                        wr_error_t *err) {
  _cleanup_close_ int nsfd = wr_rt_open_ns(inst, "uts", err);
  struct uts_arg a = {.nsfd = nsfd, .hostname = hostname};
  pthread_t t;
  int rc;

  if (nsfd < 0)
    return -1;
  if ((rc = pthread_create(&t, NULL, uts_thread, &a)) != 0)
    return wr_error_set(err, rc, "start a thread to set the hostname");
  pthread_join(t, NULL);
  if (a.error != 0)
    return wr_error_set(err, a.error, "%s", a.what);
  return 0;
}

int wr_rt_renew_identity(const struct wr_rt_spec *spec,
                         const struct wr_rt_instance *inst, int rootfd,
                         wr_error_t *err) {
  if (set_hostname(inst, spec->hostname, err) < 0 ||
      wr_rt_seed_names(rootfd, spec->hostname, spec->slot, err) < 0 ||
      wr_rt_seed_machine(rootfd, spec->slot, err) < 0)
    return wr_error_wrap(err, "rename sandbox `%s` to `%s`", spec->id,
                         spec->hostname);
  return 0;
}
