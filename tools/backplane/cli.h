#ifndef BP_CLI_H
#define BP_CLI_H

#include "backplane.h"

#define BP_COMMAND(name, summary) int bp_cmd_##name(int argc, char **argv);
#include "commands.def"
#undef BP_COMMAND

/* Print "backplane: <what>: <bp_last_error()>" to stderr and return exit status 1. */
int bp_cli_error(const char *what, bp_status s);

#endif
