/* warren: the command line client of warrend. All of it is in libcli. */
#include "cli/cli.h"

int main(int argc, char **argv) {
  return wr_cli_main(argc, argv);
}
