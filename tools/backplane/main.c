/* backplane CLI: one subcommand per row of commands.def. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"

static const struct {
    const char *name, *summary;
    int (*run)(int argc, char **argv);
} commands[] = {
#define BP_COMMAND(name, summary) {#name, summary, bp_cmd_##name},
#include "commands.def"
#undef BP_COMMAND
};

static void usage(FILE *f) {
    fprintf(f, "usage: backplane <command> [options]\n"
               "       backplane --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'backplane <command> --help' for a command's options.\n");
}

int bp_cli_error(const char *what, bp_status s) {
    fprintf(stderr, "backplane: %s: %s (%s)\n", what, bp_last_error(), bp_status_name(s));
    return 1;
}

/* `backplane CMD ... --help` (anywhere before a `--`) and `backplane help CMD` become
 * `backplane CMD --help`: every command answers --help as its first argument with its usage on
 * stdout and exit 0 (tests/cli_help.sh checks each row of commands.def), so this one rule also
 * covers a --help typed after a file name, for every command, without each parsing it. */
static bool wants_help(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help")) return true;
    return false;
}

int main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
        printf("backplane %s\n", bp_version());
        return bp_cli_finish_output(0);
    }
    bool help = false;
    if (argc >= 3 && !strcmp(argv[1], "help")) { /* backplane help CMD */
        help = true;
        argc--, argv++;
    } else if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return bp_cli_finish_output(argc < 2 ? 2 : 0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        if (help || wants_help(argc - 1, argv + 1)) {
            char *help_argv[] = {argv[1], (char *)"--help", NULL};
            return bp_cli_finish_output(commands[i].run(2, help_argv));
        }
        int rc = bp_cli_test_mock();
        if (rc) return rc;
        /* every command's output is checked once, here: a full disk is an error, not exit 0 */
        return bp_cli_finish_output(commands[i].run(argc - 1, argv + 1));
    }
    fprintf(stderr, "backplane: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
