/*
 * warren-init: PID 1 of every sandbox. A thin main: parse the options the
 * runtime wrote (exit 2 if they are wrong), run the setup pipeline on
 * itself (exit 1 with one line on stderr if a step fails), then serve the
 * daemon until the host asks it to stop and no child is left (exit 0).
 *
 * The program's one state struct, the loop, lives on main's stack and is
 * only ever touched by this single thread.
 */
#include "init/initd.h"

int main(int argc, char **argv) {
  struct wr_init_opts opts;
  struct wr_init_loop loop;
  wr_error_t err = {0};
  int sig_fd = -1, rc;

  wr_log_init("warren-init", WR_LOG_INFO, false);
  if (wr_init_parse_args(argc, argv, &opts, &err) < 0) {
    fprintf(stderr, "warren-init: %s\n", err.msg);
    return 2;
  }
  if (wr_init_setup(&opts, &sig_fd, &err) < 0) {
    fprintf(stderr, "warren-init: setup: %s\n", err.msg);
    return 1;
  }
  wr_init_loop_init(&loop, opts.ctl_fd, sig_fd);
  rc = wr_init_loop_run(&loop, &err);
  if (rc < 0)
    fprintf(stderr, "warren-init: %s\n", err.msg);
  wr_init_loop_free(&loop);
  return rc < 0 ? 1 : 0;
}
