/* Helpers shared by several subcommands; see cli_common.h. */
#include "cli_common.h"

#include <string.h>

#include "backplane.h"

static bool want_fallbacks;
bool bp_cli_dry_run;

/* Remove every `flag` from argv; true when there was one. */
static bool take_flag(int *argc, char **argv, const char *flag) {
    int out = 0;
    bool found = false;
    for (int i = 0; i < *argc; i++) {
        if (i > 0 && !strcmp(argv[i], flag)) {
            found = true;
            continue;
        }
        argv[out++] = argv[i];
    }
    *argc = out;
    if (out >= 0) argv[out] = NULL; /* argv[argc] is NULL, as main's is */
    return found;
}

bool bp_cli_take_fallbacks(int *argc, char **argv) {
    bool found = take_flag(argc, argv, "--fallbacks");
    if (found) want_fallbacks = true;
    return found;
}

bool bp_cli_take_strict(int *argc, char **argv) {
    bool found = take_flag(argc, argv, "--strict");
    if (found) bp_set_strict(true);
    return found;
}

static bool want_profile;

bool bp_cli_take_profile(int *argc, char **argv) {
    bool found = take_flag(argc, argv, "--profile");
    if (found) want_profile = true;
    return found;
}

void bp_cli_print_profile(void) {
    fflush(stdout); /* the report follows the command's own output */
    if (want_profile) bp_stats_report(stderr);
}

bool bp_cli_take_no_memory_check(int *argc, char **argv) {
    bool found = take_flag(argc, argv, "--no-memory-check");
    if (found) bp_set_memory_check(false);
    return found;
}

void bp_cli_print_fallbacks(void) {
    if (want_fallbacks) bp_fallback_report(stderr);
}
