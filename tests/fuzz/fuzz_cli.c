/* libFuzzer target over the CLI's argument parsing: the input is split at NUL bytes into up to
 * 24 arguments after "backplane", and the CLI's own main runs on them (main.c compiled here
 * under another name). Commands that write files or run for seconds (matvec, verify, bench)
 * stop after parsing (bp_cli_dry_run); kinds, info and probe run whole (info reads any file a
 * fuzzed argument names, which is the point: no argument may crash it). stdout goes to
 * /dev/null; run with -close_fd_mask=3 (tests/fuzz/run.sh) to silence stderr as well, which
 * keeps libFuzzer's and the sanitizers' reports.
 *
 * Build: cmake -S . -B build-fuzz -DBP_FUZZ=ON -DCMAKE_C_COMPILER=clang ...; target fuzz_cli.
 * Run:   build-fuzz/fuzz_cli -max_total_time=60 -close_fd_mask=3 -dict=tests/fuzz/cli.dict tests/fuzz/corpus-cli-work
 *        (from the repository root, so the tests/gguf files named in the dictionary are found). */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"

#define main bp_cli_main
#include "../../tools/backplane/main.c"
#undef main

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    bp_cli_dry_run = true;
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) dup2(fd, 1);
    setenv("BACKPLANE_VULKAN", "0", 1);
    setenv("BACKPLANE_OPENCL", "0", 1);
    setenv("BACKPLANE_CUDA", "0", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { MAX_ARGS = 24 };
    if (size > 4096) return 0;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "backplane";
    for (size_t i = 0; i <= size && argc <= MAX_ARGS;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    bp_cli_main(argc, argv);
    fflush(NULL);
    free(buf);
    return 0;
}
