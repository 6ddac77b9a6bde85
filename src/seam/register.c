/* bp_backend_register (include/backplane_device.h): a program's device as a backend of the
 * dispatch order. The tables come from src/gpu/gpu_extern.c, with every claim proven there;
 * this file checks the names, holds the claim <=> launch guard over the new tables before they
 * go in, and inserts them. */
#include <string.h>

#include "core/error.h"
#include "gpu/gpu_extern.h"
#include "seam/seam_internal.h"

_Static_assert((int)BP_GPU_EXTERN_MAX == (int)BP_SEAM_MAX_REGISTERED, "one table index per registered slot");

/* A name a record, the env switch and the CLI can all carry: [a-z0-9_], 1..15 characters. */
static bool good_name(const char *n) {
    size_t len = n ? strlen(n) : 0;
    if (len < 1 || len > 15) return false;
    for (size_t i = 0; i < len; i++)
        if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= '0' && n[i] <= '9') || n[i] == '_')) return false;
    return true;
}

static bool good_display(const char *d) {
    size_t len = d ? strlen(d) : 0;
    if (len < 1 || len > 15) return false;
    for (size_t i = 0; i < len; i++)
        if (d[i] < 0x20 || d[i] > 0x7e) return false;
    return true;
}

bp_status bp_backend_register(bp_device *dev, const char *name, const char *display_name, int position, int *proven) {
    if (proven) *proven = 0;
    if (!dev) return bp_fail(BP_E_INVAL, "bp_backend_register: device is NULL");
    if (!good_name(name))
        return bp_fail(BP_E_INVAL, "bp_backend_register: name '%s' is not 1..15 of [a-z0-9_]", name ? name : "(null)");
    if (!good_display(display_name))
        return bp_fail(BP_E_INVAL, "bp_backend_register: display name '%s' is not 1..15 printable characters",
                       display_name ? display_name : "(null)");
    if (!strcmp(name, "cpu") || bp_seam_slot_find(name) >= 0)
        return bp_fail(BP_E_INVAL, "bp_backend_register: a backend called '%s' exists already (%s)", name,
                       bp_backend_names_list());
    const int i = bp_gpu_extern_free_index();
    if (i < 0)
        return bp_fail(BP_E_INVAL, "bp_backend_register: %d backends are registered already (the most)",
                       BP_GPU_EXTERN_MAX);
    int n = 0;
    bp_status s = bp_gpu_extern_open(i, dev, name, display_name, &n);
    if (s) return s;
    /* The guard every built-in table passes in the test suite, here at the door. */
    const int bad = bp_seam_check_claims(bp_gpu_extern_caps(i), bp_gpu_extern_dispatch(i), NULL, NULL, 0, NULL);
    if (bad) {
        bp_gpu_extern_close(i);
        return bp_fail(BP_E_INVAL, "bp_backend_register: '%s' breaks the claim <=> launch rule in %d places", name, bad);
    }
    s = bp_seam_slot_insert_registered(bp_gpu_extern_caps(i), bp_gpu_extern_dispatch(i), position);
    if (s) {
        bp_gpu_extern_close(i);
        return s;
    }
    if (proven) *proven = n;
    return BP_OK;
}

bp_status bp_backend_unregister(const char *name) {
    for (int i = 0; name && i < BP_GPU_EXTERN_MAX; i++) {
        const bp_backend_caps *c = bp_gpu_extern_caps(i);
        if (!c || strcmp(c->name, name)) continue;
        bp_seam_slot_remove_registered(name);
        bp_gpu_extern_close(i);
        return BP_OK;
    }
    return bp_fail(BP_E_NOT_FOUND, "bp_backend_unregister: no registered backend called '%s'", name ? name : "(null)");
}
