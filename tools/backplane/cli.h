#ifndef BP_CLI_H
#define BP_CLI_H

#include "backplane.h"

#define BP_COMMAND(name, summary) int bp_cmd_##name(int argc, char **argv);
#include "commands.def"
#undef BP_COMMAND

/* backplane verify MODEL.gguf ... (verify_model.c), which bp_cmd_verify hands a model to. */
int bp_cmd_verify_model(int argc, char **argv);
/* Print "backplane: <what>: <bp_last_error()>" to stderr and return exit status 1. */
int bp_cli_error(const char *what, bp_status s);
/* BACKPLANE_TEST_MOCK=all (test_mock.c): the mock backend first in the order, taking every op.
 * 0, or the exit status for a bad value. */
int bp_cli_test_mock(void);

#endif
