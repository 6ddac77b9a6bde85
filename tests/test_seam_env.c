/* The env grammar, the same for every backend: 0|false|off|cpu force off, 1|true|on|<own name>
 * force on, anything else (another backend's name included) or unset defers to the device
 * probe -- which is never called when the environment decided. The decision is made once per
 * process and cached, also under concurrent first use. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "seam/mock_install.h"

static int probe_calls;
static bool probe_answer;
static bool counting_probe(char *why, size_t len) {
    probe_calls++;
    snprintf(why, len, "%s", probe_answer ? "test device" : "no test device");
    return probe_answer;
}

static void test_parse(void) {
    static const char *const off[] = {"0", "false", "off", "cpu", "FALSE", "Off", "CPU"};
    static const char *const on[] = {"1", "true", "on", "TRUE", "On"};
    static const char *const defer[] = {"", "2", "yes", "no", "auto", "gpu", "cpu0", " 1", "1 ", "offf"};
    for (int b = 0; b < BP_BACKEND_CPU; b++) {
        const char *own = bp_backend_name((bp_backend_id)b);
        for (size_t i = 0; i < sizeof off / sizeof *off; i++)
            CHECK(bp_seam_env_parse(off[i], own) == BP_ENV_OFF, "%s: '%s' forces off", own, off[i]);
        for (size_t i = 0; i < sizeof on / sizeof *on; i++)
            CHECK(bp_seam_env_parse(on[i], own) == BP_ENV_ON, "%s: '%s' forces on", own, on[i]);
        for (size_t i = 0; i < sizeof defer / sizeof *defer; i++)
            CHECK(bp_seam_env_parse(defer[i], own) == BP_ENV_DEFER, "%s: '%s' defers", own, defer[i]);
        CHECK(bp_seam_env_parse(NULL, own) == BP_ENV_DEFER, "%s: unset defers", own);
        /* Each alias forces only itself: every other backend's name defers here. */
        for (int o = 0; o < BP_BACKEND_CPU; o++) {
            const char *other = bp_backend_name((bp_backend_id)o);
            bp_env_decision want = o == b ? BP_ENV_ON : BP_ENV_DEFER;
            CHECK(bp_seam_env_parse(other, own) == want, "%s: value '%s' gives %d", own, other, (int)want);
        }
        char upper[16];
        snprintf(upper, sizeof upper, "%s", own);
        for (char *p = upper; *p; p++) *p = (char)(*p - 32 * (*p >= 'a' && *p <= 'z'));
        CHECK(bp_seam_env_parse(upper, own) == BP_ENV_ON, "%s: '%s' (any case) forces on", own, upper);
    }
}

static void test_decide(void) {
    char reason[200];
    struct { const char *value; bool probe_says; bool want; int want_probes; } cases[] = {
        {"0", true, false, 0},   {"off", true, false, 0},   {"cpu", true, false, 0},
        {"1", false, true, 0},   {"on", false, true, 0},    {"testdev", false, true, 0},
        {NULL, true, true, 1},   {NULL, false, false, 1},   {"vulkan", true, true, 1},
        {"maybe", false, false, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].value) setenv("BACKPLANE_TESTDEV", cases[i].value, 1);
        else unsetenv("BACKPLANE_TESTDEV");
        probe_calls = 0;
        probe_answer = cases[i].probe_says;
        bool got = bp_seam_decide("BACKPLANE_TESTDEV", "testdev", counting_probe, reason, sizeof reason);
        CHECK(got == cases[i].want, "BACKPLANE_TESTDEV=%s: enabled %d, want %d", cases[i].value ? cases[i].value : "(unset)",
              got, cases[i].want);
        CHECK(probe_calls == cases[i].want_probes, "BACKPLANE_TESTDEV=%s: probe called %d times, want %d",
              cases[i].value ? cases[i].value : "(unset)", probe_calls, cases[i].want_probes);
        if (cases[i].want_probes == 0)
            CHECK(strstr(reason, "BACKPLANE_TESTDEV=") && strstr(reason, got ? "forces it on" : "forces it off"),
                  "reason names the variable: %s", reason);
        else
            CHECK(strstr(reason, cases[i].probe_says ? "probe found test device" : "probe: no test device"),
                  "reason gives the probe's words: %s", reason);
    }
    unsetenv("BACKPLANE_TESTDEV");
}

/* Through the registry, with the mock installed: cached once, forced values skip the probe. */
static void *ask(void *arg) {
    (void)arg;
    return (void *)(intptr_t)bp_seam_slot_enabled(bp_seam_slot_find("mock"), NULL);
}

static void test_cached(void) {
    bp_mock_backend_config cfg;
    const bp_kind k = BP_KIND_F32;
    bp_mock_backend_config_for(&cfg, &k, 1, false);
    CHECK_OK(bp_mock_backend_install(&cfg, 99));
    int slot = bp_seam_slot_find("mock");
    CHECK(slot == BP_BACKEND_CPU, "installed past the end: just before the CPU (slot %d)", slot);
    const char *reason;

    setenv("BACKPLANE_MOCK", "off", 1);
    CHECK(!bp_seam_slot_enabled(slot, &reason), "BACKPLANE_MOCK=off disables");
    CHECK(bp_mock_backend_probe_calls() == 0, "probe not called when forced off");
    CHECK(strstr(reason, "BACKPLANE_MOCK=off forces it off") != NULL, "reason: %s", reason);

    bp_seam_test_reset_enabled();
    setenv("BACKPLANE_MOCK", "mock", 1);
    CHECK(bp_seam_slot_enabled(slot, NULL), "BACKPLANE_MOCK=mock enables");
    CHECK(bp_mock_backend_probe_calls() == 0, "probe not called when forced on");

    bp_seam_test_reset_enabled();
    setenv("BACKPLANE_MOCK", "vulkan", 1); /* another backend's alias: defers */
    pthread_t th[8];
    for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, ask, NULL);
    int on = 0;
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(th[i], &r);
        on += (int)(intptr_t)r;
    }
    CHECK(on == 8, "all threads see it enabled (%d)", on);
    CHECK(bp_mock_backend_probe_calls() == 1, "probe called exactly once by 8 racing threads (%d)",
          bp_mock_backend_probe_calls());
    setenv("BACKPLANE_MOCK", "0", 1);
    CHECK(bp_seam_slot_enabled(slot, NULL), "decided once: a later env change does not flip it");
    CHECK(bp_mock_backend_probe_calls() == 1, "and the probe is not asked again");
    unsetenv("BACKPLANE_MOCK");
    bp_mock_backend_uninstall();

    /* A real row that is not compiled: disabled with a reason, whatever the env says. */
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        if (bp_backend_dispatch_of((bp_backend_id)i)) continue;
        char var[40];
        snprintf(var, sizeof var, "%s", bp_seam_slot_at(i)->env_name);
        setenv(var, "1", 1);
        bp_seam_test_reset_enabled();
        CHECK(!bp_backend_enabled((bp_backend_id)i, &reason) && strstr(reason, "not compiled"),
              "%s forced on but not compiled: off, '%s'", bp_backend_name((bp_backend_id)i), reason);
        unsetenv(var);
    }
    CHECK(bp_backend_enabled(BP_BACKEND_CPU, &reason), "the CPU is always enabled");
}

int main(void) {
    test_parse();
    test_decide();
    test_cached();
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty at the end");
    return bp_test_finish();
}
