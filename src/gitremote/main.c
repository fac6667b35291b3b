/* git-remote-warren: git's remote helper for `warren::NAME` (gitremote.h). */
#include <signal.h>

#include "gitremote/gitremote.h"

int main(int argc, char **argv) {
  /* git closing our stdout early is an error to report, not a signal. */
  signal(SIGPIPE, SIG_IGN);
  return wr_gitremote_main(argc, argv);
}
