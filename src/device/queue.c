/* The common device code for queues: streams, events, graphs, the capture bookkeeping and the
 * rule that no blocking call runs while a capture is active, with the defaults of the optional
 * members (include/backplane_device.h). */
#include <string.h>

#include "core/error.h"
#include "device/device_internal.h"

#define DEV_CHECK(what) \
    do { if (!dev) return bp_fail(BP_E_INVAL, "%s: device is NULL", what); } while (0)
#define TRY(expr) \
    do { bp_status s_ = (expr); if (s_) return s_; } while (0)
#define COUNT(field, n)                                                                   \
    (__atomic_fetch_add(&dev->common->traffic.field, (uint64_t)(n), __ATOMIC_RELAXED), \
     bp_dev_thread_counts.field += (uint64_t)(n))

/* ---- capture bookkeeping ------------------------------------------------------------------ */

static bool any_capturing(bp_device *dev) {
    struct bp_device_common *c = dev->common;
    pthread_mutex_lock(&c->lock);
    bool yes = c->capturing_default;
    for (int i = 0; i < BP_DEV_CAPTURE && !yes; i++) yes = c->capturing[i] != NULL;
    pthread_mutex_unlock(&c->lock);
    return yes;
}

static void set_capturing(bp_device *dev, bp_stream *s, bool on) {
    struct bp_device_common *c = dev->common;
    pthread_mutex_lock(&c->lock);
    if (!s) c->capturing_default = on;
    else {
        int slot = -1;
        for (int i = 0; i < BP_DEV_CAPTURE; i++) {
            if (c->capturing[i] == s) { slot = i; break; }
            if (slot < 0 && !c->capturing[i] && on) slot = i;
        }
        if (slot >= 0) c->capturing[slot] = on ? s : NULL;
    }
    pthread_mutex_unlock(&c->lock);
}

static bool flag_capturing(bp_device *dev, bp_stream *s) {
    struct bp_device_common *c = dev->common;
    pthread_mutex_lock(&c->lock);
    bool yes = !s ? c->capturing_default : false;
    for (int i = 0; s && i < BP_DEV_CAPTURE; i++) yes = yes || c->capturing[i] == s;
    pthread_mutex_unlock(&c->lock);
    return yes;
}

/* A blocking call while a stream captures would invalidate the capture (CUDA) or deadlock
 * waiting for work that is only being recorded: refuse it with a message that says so. */
bp_status bp_dev_blocking_ok(bp_device *dev, const char *what) {
    if (any_capturing(dev))
        return bp_fail(BP_E_INVAL, "%s on %s: a blocking call while a graph capture is active", what, dev->name);
    return BP_OK;
}

/* ---- streams, events, graphs ------------------------------------------------------------- */

bp_status bp_dev_stream_create(bp_device *dev, bp_stream **out) {
    DEV_CHECK("bp_dev_stream_create");
    if (!out) return bp_fail(BP_E_INVAL, "bp_dev_stream_create: out is NULL");
    *out = NULL;
    return dev->m->stream_create ? dev->m->stream_create(dev, out) : BP_OK;
}

void bp_dev_stream_destroy(bp_device *dev, bp_stream *s) {
    if (dev && s && dev->m->stream_destroy) dev->m->stream_destroy(dev, s);
}

bp_status bp_dev_sync(bp_device *dev) {
    DEV_CHECK("bp_dev_sync");
    TRY(bp_dev_blocking_ok(dev, "device sync"));
    COUNT(submits, 1);
    return dev->m->device_sync ? dev->m->device_sync(dev) : BP_OK;
}

bp_status bp_dev_stream_sync(bp_device *dev, bp_stream *s) {
    DEV_CHECK("bp_dev_stream_sync");
    if (bp_dev_stream_is_capturing(dev, s))
        return bp_fail(BP_E_INVAL, "stream sync on %s: the stream is capturing a graph", dev->name);
    COUNT(submits, 1);
    if (dev->m->stream_sync) return dev->m->stream_sync(dev, s);
    return dev->m->device_sync ? dev->m->device_sync(dev) : BP_OK;
}

static char dummy_event; /* the default event: record syncs, so there is nothing to hold */

bp_status bp_dev_event_create(bp_device *dev, bp_event **out) {
    DEV_CHECK("bp_dev_event_create");
    if (!out) return bp_fail(BP_E_INVAL, "bp_dev_event_create: out is NULL");
    if (dev->m->event_create) return dev->m->event_create(dev, out);
    *out = (bp_event *)(void *)&dummy_event;
    return BP_OK;
}

void bp_dev_event_destroy(bp_device *dev, bp_event *e) {
    if (dev && e && e != (bp_event *)(void *)&dummy_event && dev->m->event_destroy) dev->m->event_destroy(dev, e);
}

bp_status bp_dev_event_record(bp_device *dev, bp_event *e, bp_stream *s) {
    DEV_CHECK("bp_dev_event_record");
    if (dev->m->event_record) return dev->m->event_record(dev, e, s);
    return bp_dev_stream_sync(dev, s);
}

bp_status bp_dev_event_wait(bp_device *dev, bp_stream *s, bp_event *e) {
    DEV_CHECK("bp_dev_event_wait");
    return dev->m->event_wait ? dev->m->event_wait(dev, s, e) : BP_OK;
}

bp_status bp_dev_event_sync(bp_device *dev, bp_event *e) {
    DEV_CHECK("bp_dev_event_sync");
    return dev->m->event_sync ? dev->m->event_sync(dev, e) : BP_OK;
}

bp_status bp_dev_event_query(bp_device *dev, bp_event *e, bool *done) {
    DEV_CHECK("bp_dev_event_query");
    if (!done) return bp_fail(BP_E_INVAL, "bp_dev_event_query: done is NULL");
    *done = true;
    if (!e || e == (bp_event *)(void *)&dummy_event || !dev->m->event_query) return BP_OK;
    return dev->m->event_query(dev, e, done);
}

bp_status bp_dev_bind_to_thread(bp_device *dev) {
    DEV_CHECK("bp_dev_bind_to_thread");
    return dev->m->bind_to_thread ? dev->m->bind_to_thread(dev) : BP_OK;
}

int bp_dev_index(bp_device *dev) {
    if (!dev || !dev->m->device_index) return 0;
    int i = dev->m->device_index(dev);
    return i > 0 ? i : 0;
}

bp_status bp_dev_event_elapsed_ms(bp_device *dev, bp_event *start, bp_event *end, float *ms) {
    DEV_CHECK("bp_dev_event_elapsed_ms");
    if (!dev->m->event_elapsed_ms) return bp_fail(BP_E_UNSUPPORTED, "%s has no event timing", dev->name);
    return dev->m->event_elapsed_ms(dev, start, end, ms);
}

/* Without graph members, capture records nothing (the work runs as queued) but the capture flag
 * is still set, so the rules of a capture hold on every device alike. */
bp_status bp_dev_graph_begin(bp_device *dev, bp_stream *s) {
    DEV_CHECK("bp_dev_graph_begin");
    if (bp_dev_stream_is_capturing(dev, s))
        return bp_fail(BP_E_INVAL, "graph capture on %s: the stream is capturing already", dev->name);
    if (dev->m->graph_begin) TRY(dev->m->graph_begin(dev, s));
    set_capturing(dev, s, true);
    return BP_OK;
}

bp_status bp_dev_graph_end(bp_device *dev, bp_stream *s, bp_graph **out) {
    DEV_CHECK("bp_dev_graph_end");
    if (!out) return bp_fail(BP_E_INVAL, "bp_dev_graph_end: out is NULL");
    *out = NULL;
    if (!bp_dev_stream_is_capturing(dev, s))
        return bp_fail(BP_E_INVAL, "graph_end on %s: the stream is not capturing", dev->name);
    set_capturing(dev, s, false);
    if (!dev->m->graph_end) return BP_OK; /* nothing recorded: the work ran */
    TRY(dev->m->graph_end(dev, s, out));
    if (!*out) return bp_fail(BP_E_DEVICE, "graph_end on %s gave no graph", dev->name);
    return BP_OK;
}

bool bp_dev_has_graphs(bp_device *dev) { return dev && dev->m->graph_begin; }

bp_status bp_dev_graph_update(bp_device *dev, bp_stream *s, bp_graph **g, bool *updated) {
    DEV_CHECK("bp_dev_graph_update");
    if (!g || !updated) return bp_fail(BP_E_INVAL, "bp_dev_graph_update: g or updated is NULL");
    *updated = false;
    if (!dev->m->graph_update || !*g || !dev->m->graph_begin) {
        bp_graph *ng = NULL;
        TRY(bp_dev_graph_end(dev, s, &ng));
        bp_dev_graph_destroy(dev, *g);
        *g = ng;
        return BP_OK;
    }
    if (!bp_dev_stream_is_capturing(dev, s))
        return bp_fail(BP_E_INVAL, "graph_update on %s: the stream is not capturing", dev->name);
    set_capturing(dev, s, false);
    return dev->m->graph_update(dev, s, g, updated);
}

bp_status bp_dev_graph_replay(bp_device *dev, bp_graph *g, bp_stream *s) {
    DEV_CHECK("bp_dev_graph_replay");
    if (!g)
        return dev->m->graph_replay ? bp_fail(BP_E_INVAL, "graph replay on %s: the graph is NULL", dev->name)
                                    : BP_OK; /* no graphs: the captured work already ran */
    if (!dev->m->graph_replay) return bp_fail(BP_E_INVAL, "graph replay on %s: the device has no graphs", dev->name);
    COUNT(submits, 1);
    return dev->m->graph_replay(dev, g, s);
}

void bp_dev_graph_destroy(bp_device *dev, bp_graph *g) {
    if (dev && g && dev->m->graph_destroy) dev->m->graph_destroy(dev, g);
}

void bp_dev_graph_abort(bp_device *dev, bp_stream *s) {
    if (!dev || !bp_dev_stream_is_capturing(dev, s)) return;
    if (dev->m->graph_abort) dev->m->graph_abort(dev, s);
    else if (dev->m->graph_end) {
        bp_graph *g = NULL;
        if (dev->m->graph_end(dev, s, &g) == BP_OK) bp_dev_graph_destroy(dev, g);
    }
    set_capturing(dev, s, false);
}

bool bp_dev_stream_is_capturing(bp_device *dev, bp_stream *s) {
    if (!dev) return false;
    if (dev->m->stream_is_capturing) return dev->m->stream_is_capturing(dev, s);
    return flag_capturing(dev, s);
}

