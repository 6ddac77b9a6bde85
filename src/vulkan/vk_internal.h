/* Internal state of the Vulkan backend: one process-wide context (instance, chosen device,
 * queue, pipeline layout) wrapped as a bp_device (include/backplane_device.h), and the objects its
 * methods hand out. */
#ifndef BP_VK_INTERNAL_H
#define BP_VK_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "backplane_device.h"
#include "vulkan/vk_loader.h"

/* Push constants of every backplane shader; must match `Push` in shaders/common.glsl. */
typedef struct bp_vk_push {
    uint32_t rows, cols, row_bytes, nsub, t, y_row0, y_stride, x_off, w_off;
    float fscale;
    uint32_t pad0, pad1;
} bp_vk_push;

/* Kernel arguments bind one descriptor set each (set i = argument i): a buffer handle owns one
 * set describing all of it, made when it is allocated, so a launch never writes descriptors. */
enum { BP_VK_MAX_SETS = 6, BP_VK_PUSH_BYTES = 128, BP_VK_RING = 4 };

/* What alloc hands out as the opaque `void *buf`. */
typedef struct bp_vk_buffer {
    VkBuffer buf;
    VkDeviceMemory mem;
    size_t bytes;
    void *map;               /* persistent mapping, or NULL when copies go through staging */
    VkDescriptorSet set;
    VkDescriptorPool pool;   /* the pool `set` came from */
} bp_vk_buffer;

struct bp_kernel {
    VkPipeline pipe;
    char name[48];
};

/* A stream: command buffers recorded in order; a small ring lets one be recorded while the
 * previous ones run. Every command is preceded by a full memory barrier, so work on one queue
 * is in order across streams and submissions alike (the simple model the seam needs). */
typedef struct bp_vk_sub {
    VkCommandBuffer cb;
    VkFence fence;
    bool in_flight;
    uint64_t gen;            /* bumped when the slot is reused: stale events see it finished */
} bp_vk_sub;

enum { BP_VK_POSTS = 32 };

struct bp_stream {
    bp_vk_sub ring[BP_VK_RING];
    int cur;                 /* slot being recorded, or -1 */
    int next;
    /* Async copies go through this host-visible buffer, bump-allocated and reset once the
     * stream has drained: an h2d copies into it at once and queues a buffer copy; a d2h queues
     * a buffer copy out of the device and a host memcpy (a "post") that runs when the stream is
     * next synced. One submission per matvec instead of one per copy. */
    struct bp_vk_buffer *stg;
    size_t stg_used;
    struct { void *dst; size_t off, n; } post[BP_VK_POSTS];
    int npost;
    struct bp_graph *cap;    /* the graph being recorded on this stream, or NULL */
    struct bp_graph *replay; /* the graph last replayed on it (its fence ends the stream's work) */
};

/* A recorded command buffer, replayed whole: the step's one submission. */
struct bp_graph {
    VkCommandBuffer cb;
    VkFence fence;
    bool in_flight;
};

struct bp_event {
    bp_vk_sub *sub;          /* the submission that completes the event (NULL: complete) */
    uint64_t gen;
};

typedef struct bp_vk_ctx {
    pthread_mutex_t lock;    /* every method takes it: Vulkan queues and pools are not
                                thread-safe */
    VkInstance instance;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memprops;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool cmd_pool;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipe_layout;
    VkDescriptorPool pools[64];
    int npools;
    uint32_t mem_device;     /* memory type for alloc */
    uint32_t mem_host;       /* host-visible coherent type, for staging and alloc_managed */
    bool device_mappable;    /* mem_device is host-visible too (UMA, lavapipe): no staging */
    uint32_t subgroup;       /* subgroup size: the matvec's workgroup size */
    size_t max_range;        /* maxStorageBufferRange (lowered by tests to exercise splitting) */
    bp_vk_buffer *staging;   /* grown on demand, for non-mappable copies */
    struct bp_stream defstream;
    bool lost;               /* VK_ERROR_DEVICE_LOST seen: every later call fails fast */
    uint64_t submits;        /* vkQueueSubmit calls (bp_dev_traffic) */
    char lost_why[160];
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
} bp_vk_ctx;

/* Context life: create per BACKPLANE_VULKAN_DEVICE / best device; false with the reason. */
bool bp_vk_ctx_create(bp_vk_ctx *c, char *why, size_t why_len);
void bp_vk_ctx_destroy(bp_vk_ctx *c);
/* bp_fail(BP_E_DEVICE or BP_E_NOMEM) naming the call and VkResult; marks the context lost on
 * VK_ERROR_DEVICE_LOST. */
bp_status bp_vk_fail(bp_vk_ctx *c, const char *what, VkResult r);

/* The methods table (vk_device.c). */
extern const bp_device_methods bp_vk_methods;

/* The process-wide Vulkan device, created on first call (thread-safe); NULL with the reason
 * in why when Vulkan is unavailable. The answer is cached. */
bp_device *bp_vk_device(char *why, size_t why_len);
bp_vk_ctx *bp_vk_ctx_of(bp_device *dev);

/* Tests only: pretend maxStorageBufferRange is `bytes` (0 restores the device's), so the
 * weight-splitting path runs on small weights. */
void bp_vk_test_set_max_range(size_t bytes);
size_t bp_vk_max_range(void);

#endif
