/* PLACEHOLDER: replaced by the issue that builds 'probe'. */
#include <stdio.h>

#include "cli.h"

int bp_cmd_probe(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "backplane: 'probe' is not built yet\n");
    return 1;
}
