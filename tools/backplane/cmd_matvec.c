/* PLACEHOLDER: replaced by the issue that builds 'matvec'. */
#include <stdio.h>

#include "cli.h"

int bp_cmd_matvec(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "backplane: 'matvec' is not built yet\n");
    return 1;
}
