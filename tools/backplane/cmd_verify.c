/* PLACEHOLDER: replaced by the issue that builds 'verify'. */
#include <stdio.h>

#include "cli.h"

int bp_cmd_verify(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "backplane: 'verify' is not built yet\n");
    return 1;
}
