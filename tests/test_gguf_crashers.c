/* Replays every input the fuzzer ever crashed on (tests/gguf/crashers/) and its seed corpus
 * (tests/fuzz/corpus/) through the same walk as fuzz_gguf (tests/fuzz/gguf_walk.h), each from
 * a buffer of exactly the file's size: under ASan+UBSan a regression is a report here. Every
 * refusal must also carry a message naming a byte offset. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/gguf_walk.h"
#include "harness.h"

static int replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".md")) continue; /* README.md */
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        uint8_t *data = bp_test_read_file(path, &len);
        if (!data) continue;
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, data, len);
        bp_clear_error();
        bp_status s = bp_fuzz_gguf_walk(exact, len);
        if (s == BP_E_FORMAT || s == BP_E_KIND)
            CHECK(strstr(bp_last_error(), "offset") != NULL, "%s: refusal without an offset: %s", path,
                  bp_last_error());
        else
            CHECK(s == BP_OK, "%s: unexpected status %s: %s", path, bp_status_name(s), bp_last_error());
        free(exact);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

int main(void) {
    int crashers = replay_dir("tests/gguf/crashers");
    int seeds = replay_dir("tests/fuzz/corpus");
    fprintf(stderr, "replayed %d crasher files and %d seed files\n", crashers, seeds);
    CHECK(seeds > 0, "the seed corpus is missing");
    return bp_test_finish();
}
