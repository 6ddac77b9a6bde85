/* Paths that are not regular files (issue 36): bp_gguf_open and bp_model_load refuse a FIFO, a
 * directory, a character device and a missing file at once, naming the path and what it is.
 * Before the fix a FIFO hung the open (it waited for a writer); an alarm turns a hang into a
 * failure here. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_gguf_paths: an open hung (5 s)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void refused(const char *path, const char *what) {
    bp_gguf *f = (bp_gguf *)1;
    alarm(5);
    bp_status s = bp_gguf_open(path, &f);
    alarm(0);
    CHECK(s == BP_E_IO && f == NULL, "bp_gguf_open(%s) -> %s", path, bp_status_name(s));
    CHECK(strstr(bp_last_error(), path) && strstr(bp_last_error(), what), "open %s: message '%s' lacks '%s'", path,
          bp_last_error(), what);
    bp_model *m = (bp_model *)1;
    alarm(5);
    s = bp_model_load(path, NULL, &m);
    alarm(0);
    CHECK(s == BP_E_IO && m == NULL, "bp_model_load(%s) -> %s", path, bp_status_name(s));
    CHECK(strstr(bp_last_error(), what), "load %s: message '%s' lacks '%s'", path, bp_last_error(), what);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    char dir[] = "/tmp/bp_paths_XXXXXX";
    if (!mkdtemp(dir)) {
        BP_SKIP("cannot make a temporary directory");
        return bp_test_finish();
    }
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/fifo.gguf", dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    refused(fifo, "FIFO");
    refused(dir, "directory");
    refused("/dev/null", "character device");
    char missing[80];
    snprintf(missing, sizeof missing, "%s/missing.gguf", dir);
    refused(missing, "No such file");
    unlink(fifo);
    rmdir(dir);
    return bp_test_finish();
}
