/* backplane CLI: one subcommand per row of commands.def. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name, *summary;
    int (*run)(int argc, char **argv);
} commands[] = {
#define BP_COMMAND(name, summary) {#name, summary, bp_cmd_##name},
#include "commands.def"
#undef BP_COMMAND
};

static void usage(FILE *f) {
    fprintf(f, "usage: backplane <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'backplane <command> --help' for a command's options.\n");
}

int bp_cli_error(const char *what, bp_status s) {
    fprintf(stderr, "backplane: %s: %s (%s)\n", what, bp_last_error(), bp_status_name(s));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "backplane: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
