/* backplane serve in a build without libmicrohttpd or cJSON (CMake found either missing): the
 * command exists and says how to get it, so a missing library is never a silent absence
 * (--help answers, as every command's does, with the same note). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int bp_cmd_serve(int argc, char **argv) {
    static const char note[] = "backplane serve: not built: this build found no libmicrohttpd or cJSON. Install them "
                               "(Debian: apt-get install libmicrohttpd-dev libcjson-dev; scripts/install-deps.sh "
                               "does) and configure the build again\n";
    if (argc >= 2 && !strcmp(argv[1], "--help")) {
        printf("usage: backplane serve MODEL.gguf [options]\n%s", note);
        return 0;
    }
    fputs(note, stderr);
    return 2;
}
