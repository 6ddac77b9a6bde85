/* backplane serve in a build without libmicrohttpd or cJSON (CMake found either missing): the
 * command exists and says how to get it, so a missing library is never a silent absence. */
#include <stdio.h>

#include "cli.h"

int bp_cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "backplane serve: not built: this build found no libmicrohttpd or cJSON. Install them "
                    "(Debian: apt-get install libmicrohttpd-dev libcjson-dev; scripts/install-deps.sh does) and "
                    "configure the build again\n");
    return 2;
}
