/*
 * The local terminal: raw mode for interactive sessions, and its size.
 * The caller keeps the saved settings in a struct wr_cli_tty and restores
 * them on every way out; signals that would end the program are turned
 * into events of the stream loop (signalfd), so no handler needs them.
 */
#include "cli/cli.h"

#include <sys/ioctl.h>

/* cfmakeraw: no echo, no line editing, no signals from keys, so every
 * byte typed reaches the remote program. */
int wr_cli_tty_raw(struct wr_cli_tty *t, int fd, wr_error_t *err) {
  struct termios raw;

  t->raw = false;
  t->fd = fd;
  if (tcgetattr(fd, &t->saved) < 0)
    return wr_error_set(err, errno, "read terminal settings");
  raw = t->saved;
  cfmakeraw(&raw);
  if (tcsetattr(fd, TCSADRAIN, &raw) < 0)
    return wr_error_set(err, errno, "set the terminal to raw mode");
  t->raw = true;
  return 0;
}

void wr_cli_tty_restore(struct wr_cli_tty *t) {
  if (!t->raw)
    return;
  tcsetattr(t->fd, TCSADRAIN, &t->saved);
  t->raw = false;
}

/* stdout is the terminal that shows the output; stdin when stdout is
 * redirected. */
void wr_cli_tty_size(unsigned *rows, unsigned *cols) {
  struct winsize ws = {0};

  *rows = *cols = 0;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0)
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
      return;
  *rows = ws.ws_row;
  *cols = ws.ws_col;
}
