/* PLACEHOLDER: replaced by the issue that builds 'info'. */
#include <stdio.h>

#include "cli.h"

int bp_cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "backplane: 'info' is not built yet\n");
    return 1;
}
