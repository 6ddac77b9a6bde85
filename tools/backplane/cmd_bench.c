/* PLACEHOLDER: replaced by the issue that builds 'bench'. */
#include <stdio.h>

#include "cli.h"

int bp_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "backplane: 'bench' is not built yet\n");
    return 1;
}
