/* Helpers shared by several subcommands; see cli_common.h. */
#include "cli_common.h"

#include <stdio.h>
#include <stdlib.h>
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

void bp_cli_backend_on(const char *name) {
    char env[48];
    snprintf(env, sizeof env, "BACKPLANE_");
    for (size_t j = 0; name[j] && j < 30; j++) {
        char ch = name[j];
        env[10 + j] = (char)(ch >= 'a' && ch <= 'z' ? ch - 32 : ch), env[11 + j] = '\0';
    }
    if (strcmp(name, "cpu") && !getenv(env)) setenv(env, "1", 0);
}

int bp_cli_take_backend(int *argc, char **argv, const char *cmd) {
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--backend")) continue;
        if (i + 1 >= *argc) {
            fprintf(stderr, "backplane %s: --backend needs a name (see `backplane probe`), or cpu\n", cmd);
            return -1;
        }
        const char *name = argv[i + 1];
        bp_cli_backend_on(name);
        bp_status s = bp_set_backend_preference(name, BP_FORCE);
        if (s) {
            fprintf(stderr, "backplane %s: --backend %s: %s\n", cmd, name, bp_last_error());
            return -1;
        }
        for (int j = i; j + 2 < *argc; j++) argv[j] = argv[j + 2];
        *argc -= 2;
        argv[*argc] = NULL;
        return 1;
    }
    return 0;
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
