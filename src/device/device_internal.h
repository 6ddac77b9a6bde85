/* Common per-device state shared by device.c (wrappers, op cache) and ledger.c (ledger,
 * redzones). Backends never include this. */
#ifndef BP_DEVICE_INTERNAL_H
#define BP_DEVICE_INTERNAL_H

#include <pthread.h>

#include "backplane_device.h"

/* The op cache grows on demand (it held a fixed 64 kernels while CUDA's registry has 85: every
 * lookup from the 65th on failed with "op cache full"); BP_DEV_KCACHE is its first size. */
enum { BP_DEV_KCACHE = 64, BP_DEV_SCRATCH = 8, BP_DEV_CAPTURE = 8 };

typedef struct bp_dev_kentry {
    char name[64];
    bp_kernel *k;
} bp_dev_kentry;

struct bp_device_common {
    bp_device_methods methods; /* the table's members its version covers; the rest NULL */
    pthread_mutex_t lock;    /* op cache, scratch, capture flags */
    size_t redzone;          /* guard bytes after each new allocation (0: off) */
    bool poison;             /* fill new allocations with BP_POISON_BYTE */
    size_t rz_faults;        /* damaged guard bands found so far */
    bp_dev_kentry *kcache;   /* nk used of cap_k, grown by doubling */
    int nk, cap_k;
    void *scratch[BP_DEV_SCRATCH];
    size_t scratch_bytes[BP_DEV_SCRATCH];
    bp_stream *capturing[BP_DEV_CAPTURE];
    bool capturing_default;  /* the NULL stream is capturing */
    bp_dev_traffic traffic;  /* counted by the wrappers (atomics: any thread may copy) */
};

/* Ledger hooks used by device.c. */
/* Record a live allocation (bytes requested, rz the guard band after it). */
bp_status bp_ledger_add(bp_device *dev, void *buf, size_t bytes, size_t rz, const char *file, int line);
/* What a ledger entry is, so bp_dev_free releases it the way it was made. */
enum { BP_LEDGER_PLAIN = 0, BP_LEDGER_ARENA = 1 /* arena_create: arena_destroy */,
       BP_LEDGER_MAPPED = 2 /* host_ptr_to_device: host_ptr_release; never poisoned */ };
void bp_ledger_mark(bp_device *dev, void *buf, int what);
/* Remove it; false when unknown. *bytes, *rz, *what receive what was recorded. */
bool bp_ledger_remove(bp_device *dev, void *buf, size_t *bytes, size_t *rz, int *what, const char **file,
                      int *line);
/* The recorded size of a live buffer; false when unknown. */
/* device.c: the calling thread's device traffic over every device (bp_dev_thread_traffic). */
extern _Thread_local bp_dev_traffic bp_dev_thread_counts;

/* The most bytes live at once over every device since the last reset (reset: start again from
 * what is live now). */
uint64_t bp_ledger_peak_bytes(bool reset);
bool bp_ledger_size_of(const bp_device *dev, const void *buf, size_t *bytes, const char **file, int *line);
/* Check one guard band; returns the first damaged offset into the band, or -1 when intact
 * (or on a read error, which is reported to `out`). */
long bp_ledger_check_band(bp_device *dev, void *buf, size_t bytes, size_t rz);

/* BP_E_INVAL naming `what` while any stream of dev captures (queue.c). */
bp_status bp_dev_blocking_ok(bp_device *dev, const char *what);
/* Blocking member calls with defaults applied and no ledger checks (for the ledger itself). */
bp_status bp_dev_raw_d2h(bp_device *dev, void *dst, const void *src, size_t off, size_t n);
bp_status bp_dev_raw_memset(bp_device *dev, void *dst, size_t off, int v, size_t n);

#endif
