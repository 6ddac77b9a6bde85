/* The device interface (include/backplane_device.h) over Vulkan: buffers with one descriptor set
 * each, blocking copies (mapped memcpy on UMA devices, a staging buffer otherwise), pipelines
 * as kernels, command-buffer streams, fences as events.
 *
 * Every method takes the context lock: VkQueue, command pools and descriptor pools must be
 * externally synchronised. Helpers named *_locked expect it held.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "vulkan/vk_internal.h"
#include "vulkan/vk_spirv.h"

enum { VK_STREAMS_MAX = 32, VK_POOL_SETS = 256 };
#define VK_WAIT_NS (120ull * 1000 * 1000 * 1000) /* a dispatch this long is a hung device */
#define VK_STAGING_CHUNK ((size_t)64 << 20)

static bp_stream *vk_streams[VK_STREAMS_MAX]; /* live streams besides the default one */

static bp_vk_ctx *ctx(bp_device *dev) { return (bp_vk_ctx *)dev->impl; }

static bp_status check_lost(bp_vk_ctx *c) {
    if (c->lost) return bp_fail(BP_E_DEVICE_LOST, "Vulkan device %s was lost earlier (%s)", c->name, c->lost_why);
    return BP_OK;
}

/* ---- streams ------------------------------------------------------------------------------ */

static bp_status sub_wait_locked(bp_vk_ctx *c, bp_vk_sub *s) {
    if (!s->in_flight) return BP_OK;
    VkResult r = bp_vk.vkWaitForFences(c->device, 1, &s->fence, VK_TRUE, VK_WAIT_NS);
    if (r != VK_SUCCESS) return bp_vk_fail(c, r == VK_TIMEOUT ? "vkWaitForFences (timed out after 120 s)" : "vkWaitForFences", r == VK_TIMEOUT ? VK_ERROR_DEVICE_LOST : r);
    bp_vk.vkResetFences(c->device, 1, &s->fence);
    s->in_flight = false;
    return BP_OK;
}

/* The command buffer being recorded on s, begun on first use, after a full memory barrier so
 * every command sees the results of all earlier ones (in this and earlier submissions). */
static bp_status stream_cb_locked(bp_vk_ctx *c, bp_stream *s, VkCommandBuffer *out) {
    bp_status st = check_lost(c);
    if (st) return st;
    if (s->cap) {
        /* recording a graph: no ring slot, no wait */
    } else if (s->cur < 0) {
        bp_vk_sub *slot = &s->ring[s->next];
        if (!slot->cb) {
            VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                              .commandPool = c->cmd_pool,
                                              .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                              .commandBufferCount = 1};
            VkResult r = bp_vk.vkAllocateCommandBuffers(c->device, &ai, &slot->cb);
            if (r != VK_SUCCESS) return bp_vk_fail(c, "vkAllocateCommandBuffers", r);
            VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
            r = bp_vk.vkCreateFence(c->device, &fi, NULL, &slot->fence);
            if (r != VK_SUCCESS) return bp_vk_fail(c, "vkCreateFence", r);
        }
        if ((st = sub_wait_locked(c, slot))) return st;
        slot->gen++;
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        VkResult r = bp_vk.vkBeginCommandBuffer(slot->cb, &bi);
        if (r != VK_SUCCESS) return bp_vk_fail(c, "vkBeginCommandBuffer", r);
        s->cur = s->next;
        s->next = (s->next + 1) % BP_VK_RING;
    }
    VkCommandBuffer cb = s->cap ? s->cap->cb : s->ring[s->cur].cb;
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                                           VK_ACCESS_HOST_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    bp_vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                               VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    *out = cb;
    return BP_OK;
}

static bp_vk_sub *last_sub;

/* Submit what s has recorded (nothing to do when nothing is). */
static bp_status stream_flush_locked(bp_vk_ctx *c, bp_stream *s) {
    if (s->cur < 0) return BP_OK;
    bp_vk_sub *slot = &s->ring[s->cur];
    s->cur = -1;
    /* A barrier making the shaders' writes visible to the host reads after the fence. */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    bp_vk.vkCmdPipelineBarrier(slot->cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                               0, 1, &mb, 0, NULL, 0, NULL);
    VkResult r = bp_vk.vkEndCommandBuffer(slot->cb);
    if (r != VK_SUCCESS) return bp_vk_fail(c, "vkEndCommandBuffer", r);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &slot->cb};
    r = bp_vk.vkQueueSubmit(c->queue, 1, &si, slot->fence);
    if (r != VK_SUCCESS) return bp_vk_fail(c, "vkQueueSubmit", r);
    c->submits++;
    slot->in_flight = true;
    last_sub = slot;
    return BP_OK;
}

static bp_status graph_wait_locked(bp_vk_ctx *c, struct bp_graph *g) {
    if (!g || !g->in_flight) return BP_OK;
    VkResult r = bp_vk.vkWaitForFences(c->device, 1, &g->fence, VK_TRUE, VK_WAIT_NS);
    if (r != VK_SUCCESS) return bp_vk_fail(c, r == VK_TIMEOUT ? "vkWaitForFences (a replay, timed out after 120 s)" : "vkWaitForFences", r == VK_TIMEOUT ? VK_ERROR_DEVICE_LOST : r);
    bp_vk.vkResetFences(c->device, 1, &g->fence);
    g->in_flight = false;
    return BP_OK;
}

static bp_status stream_wait_locked(bp_vk_ctx *c, bp_stream *s) {
    bp_status st = s->cap ? BP_OK : stream_flush_locked(c, s);
    if (!st) st = graph_wait_locked(c, s->replay);
    for (int i = 0; i < BP_VK_RING && !st; i++) st = sub_wait_locked(c, &s->ring[i]);
    /* The stream has drained: finish its device-to-host copies and recycle its staging. */
    for (int i = 0; i < s->npost && !st; i++) memcpy(s->post[i].dst, (char *)s->stg->map + s->post[i].off, s->post[i].n);
    s->npost = 0;
    s->stg_used = 0;
    return st;
}

static bp_status device_sync_locked(bp_vk_ctx *c) {
    bp_status st = stream_wait_locked(c, &c->defstream);
    for (int i = 0; i < VK_STREAMS_MAX && !st; i++) {
        if (vk_streams[i]) st = stream_wait_locked(c, vk_streams[i]);
    }
    return st;
}

static void buffer_destroy_locked(bp_vk_ctx *c, bp_vk_buffer *b);

static void stream_release_locked(bp_vk_ctx *c, bp_stream *s) {
    stream_wait_locked(c, s);
    bp_vk_buffer *stg = s->stg;
    s->stg = NULL;
    buffer_destroy_locked(c, stg);
    for (int i = 0; i < BP_VK_RING; i++) {
        if (s->ring[i].cb) bp_vk.vkFreeCommandBuffers(c->device, c->cmd_pool, 1, &s->ring[i].cb);
        if (s->ring[i].fence) bp_vk.vkDestroyFence(c->device, s->ring[i].fence, NULL);
        s->ring[i].cb = VK_NULL_HANDLE;
        s->ring[i].fence = VK_NULL_HANDLE;
    }
}

/* ---- memory ------------------------------------------------------------------------------- */

static bp_status buffer_create_locked(bp_vk_ctx *c, size_t bytes, bool host, bp_vk_buffer **out) {
    bp_status st = check_lost(c);
    if (st) return st;
    bp_vk_buffer *b = bp_calloc(1, sizeof *b);
    if (!b) return bp_fail(BP_E_NOMEM, "Vulkan buffer: out of host memory");
    /* Rounded to whole words: the shaders read 32-bit words, and vkCmdFillBuffer wants them. */
    b->bytes = bytes;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = (bytes + 3) & ~(size_t)3,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = bp_vk.vkCreateBuffer(c->device, &bi, NULL, &b->buf);
    if (r != VK_SUCCESS) {
        bp_free(b);
        return bp_vk_fail(c, "vkCreateBuffer", r);
    }
    VkMemoryRequirements req;
    bp_vk.vkGetBufferMemoryRequirements(c->device, b->buf, &req);
    uint32_t type = host ? c->mem_host : c->mem_device;
    if (!(req.memoryTypeBits & (1u << type))) {
        bp_vk.vkDestroyBuffer(c->device, b->buf, NULL);
        bp_free(b);
        return bp_fail(BP_E_DEVICE, "Vulkan buffer of %zu bytes cannot live in memory type %u", bytes, type);
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size, .memoryTypeIndex = type};
    r = bp_vk.vkAllocateMemory(c->device, &ai, NULL, &b->mem);
    if (r != VK_SUCCESS) {
        bp_vk.vkDestroyBuffer(c->device, b->buf, NULL);
        bp_free(b);
        st = bp_vk_fail(c, "vkAllocateMemory", r);
        return bp_fail(st, "Vulkan vkAllocateMemory(%zu bytes) on %s: %s", bytes, c->name, bp_vk_result_name(r));
    }
    bp_vk.vkBindBufferMemory(c->device, b->buf, b->mem, 0);
    if (host || c->device_mappable) {
        r = bp_vk.vkMapMemory(c->device, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
        if (r != VK_SUCCESS) b->map = NULL;
    }
    /* Its descriptor set: from the newest pool, a new pool when that one is full. */
    for (int attempt = 0; attempt < 2 && !b->set; attempt++) {
        if (c->npools > 0) {
            VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                               .descriptorPool = c->pools[c->npools - 1],
                                               .descriptorSetCount = 1, .pSetLayouts = &c->set_layout};
            if (bp_vk.vkAllocateDescriptorSets(c->device, &dai, &b->set) == VK_SUCCESS) {
                b->pool = c->pools[c->npools - 1];
                break;
            }
            b->set = VK_NULL_HANDLE;
        }
        if (c->npools == (int)(sizeof c->pools / sizeof c->pools[0])) break;
        VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = VK_POOL_SETS};
        VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                         .flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
                                         .maxSets = VK_POOL_SETS, .poolSizeCount = 1, .pPoolSizes = &ps};
        r = bp_vk.vkCreateDescriptorPool(c->device, &pi, NULL, &c->pools[c->npools]);
        if (r != VK_SUCCESS) break;
        c->npools++;
    }
    if (!b->set) {
        if (b->map) bp_vk.vkUnmapMemory(c->device, b->mem);
        bp_vk.vkDestroyBuffer(c->device, b->buf, NULL);
        bp_vk.vkFreeMemory(c->device, b->mem, NULL);
        bp_free(b);
        return bp_fail(BP_E_NOMEM, "Vulkan: out of descriptor sets (%d pools)", c->npools);
    }
    size_t range = bi.size < c->props.limits.maxStorageBufferRange ? bi.size : c->props.limits.maxStorageBufferRange;
    VkDescriptorBufferInfo dbi = {.buffer = b->buf, .offset = 0, .range = range};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = b->set,
                              .dstBinding = 0, .descriptorCount = 1,
                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &dbi};
    bp_vk.vkUpdateDescriptorSets(c->device, 1, &w, 0, NULL);
    *out = b;
    return BP_OK;
}

static void buffer_destroy_locked(bp_vk_ctx *c, bp_vk_buffer *b) {
    if (!b) return;
    device_sync_locked(c); /* never destroy what a queued command may still read */
    bp_vk.vkFreeDescriptorSets(c->device, b->pool, 1, &b->set);
    if (b->map) bp_vk.vkUnmapMemory(c->device, b->mem);
    bp_vk.vkDestroyBuffer(c->device, b->buf, NULL);
    bp_vk.vkFreeMemory(c->device, b->mem, NULL);
    bp_free(b);
}

static bp_status vk_alloc(bp_device *dev, size_t bytes, void **buf) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_vk_buffer *b = NULL;
    bp_status st = buffer_create_locked(c, bytes, false, &b);
    pthread_mutex_unlock(&c->lock);
    *buf = b;
    return st;
}

static bp_status vk_alloc_managed(bp_device *dev, size_t bytes, void **buf) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_vk_buffer *b = NULL;
    bp_status st = buffer_create_locked(c, bytes, true, &b);
    pthread_mutex_unlock(&c->lock);
    *buf = b;
    return st;
}

static void vk_free(bp_device *dev, void *buf) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    buffer_destroy_locked(c, buf);
    pthread_mutex_unlock(&c->lock);
}

static bp_status staging_locked(bp_vk_ctx *c, size_t bytes) {
    if (c->staging && c->staging->bytes >= bytes) return BP_OK;
    if (c->staging) buffer_destroy_locked(c, c->staging);
    c->staging = NULL;
    return buffer_create_locked(c, bytes, true, &c->staging);
}

static bp_status copy_locked(bp_vk_ctx *c, VkBuffer dst, size_t dst_off, VkBuffer src, size_t src_off, size_t n) {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    bp_status st = stream_cb_locked(c, &c->defstream, &cb);
    if (st) return st;
    VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = n};
    bp_vk.vkCmdCopyBuffer(cb, src, dst, 1, &region);
    return stream_wait_locked(c, &c->defstream);
}

/* Blocking copies wait for all queued work first: a kernel may still read or write the range. */
static bp_status vk_h2d(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t bytes) {
    bp_vk_ctx *c = ctx(dev);
    bp_vk_buffer *b = dst;
    pthread_mutex_lock(&c->lock);
    bp_status st = device_sync_locked(c);
    if (!st && b->map) {
        memcpy((char *)b->map + dst_off, src, bytes);
    } else {
        for (size_t done = 0; !st && done < bytes;) {
            size_t n = bytes - done < VK_STAGING_CHUNK ? bytes - done : VK_STAGING_CHUNK;
            if ((st = staging_locked(c, n))) break;
            memcpy(c->staging->map, (const char *)src + done, n);
            st = copy_locked(c, b->buf, dst_off + done, c->staging->buf, 0, n);
            done += n;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

static bp_status vk_d2h(bp_device *dev, void *dst, const void *src, size_t src_off, size_t bytes) {
    bp_vk_ctx *c = ctx(dev);
    const bp_vk_buffer *b = src;
    pthread_mutex_lock(&c->lock);
    bp_status st = device_sync_locked(c);
    if (!st && b->map) {
        memcpy(dst, (const char *)b->map + src_off, bytes);
    } else {
        for (size_t done = 0; !st && done < bytes;) {
            size_t n = bytes - done < VK_STAGING_CHUNK ? bytes - done : VK_STAGING_CHUNK;
            if ((st = staging_locked(c, n))) break;
            if (!(st = copy_locked(c, c->staging->buf, 0, b->buf, src_off + done, n)))
                memcpy((char *)dst + done, c->staging->map, n);
            done += n;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

static bp_status vk_d2d(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t src_off, size_t bytes) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_status st = copy_locked(c, ((bp_vk_buffer *)dst)->buf, dst_off, ((const bp_vk_buffer *)src)->buf, src_off, bytes);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static bp_status buffer_create_locked(bp_vk_ctx *c, size_t bytes, bool host, bp_vk_buffer **out);

/* n bytes of s's staging at *off (16-byte aligned), draining the stream first when full. */
static bp_status stage_reserve_locked(bp_vk_ctx *c, bp_stream *s, size_t n, size_t *off) {
    size_t need = (n + 15) & ~(size_t)15;
    bp_status st = BP_OK;
    if (s->stg && s->stg_used + need > s->stg->bytes) st = stream_wait_locked(c, s);
    if (!st && (!s->stg || need > s->stg->bytes)) {
        size_t size = need < ((size_t)1 << 20) ? ((size_t)1 << 20) : need;
        bp_vk_buffer *old = s->stg;
        s->stg = NULL;
        buffer_destroy_locked(c, old); /* drained above (or never used) */
        st = buffer_create_locked(c, size, true, &s->stg);
    }
    if (st) return st;
    *off = s->stg_used;
    s->stg_used += need;
    return BP_OK;
}

static bp_status vk_h2d_async(bp_device *dev, bp_stream *s, void *dst, size_t dst_off, const void *src, size_t bytes) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_stream *q = s ? s : &c->defstream;
    bp_status st = BP_OK;
    for (size_t done = 0; !st && done < bytes;) {
        size_t n = bytes - done < VK_STAGING_CHUNK ? bytes - done : VK_STAGING_CHUNK, off = 0;
        VkCommandBuffer cb;
        if ((st = stage_reserve_locked(c, q, n, &off))) break;
        memcpy((char *)q->stg->map + off, (const char *)src + done, n);
        if ((st = stream_cb_locked(c, q, &cb))) break;
        VkBufferCopy region = {.srcOffset = off, .dstOffset = dst_off + done, .size = n};
        bp_vk.vkCmdCopyBuffer(cb, q->stg->buf, ((bp_vk_buffer *)dst)->buf, 1, &region);
        done += n;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

static bp_status vk_d2h_async(bp_device *dev, bp_stream *s, void *dst, const void *src, size_t src_off, size_t bytes) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_stream *q = s ? s : &c->defstream;
    bp_status st = BP_OK;
    for (size_t done = 0; !st && done < bytes;) {
        size_t n = bytes - done < VK_STAGING_CHUNK ? bytes - done : VK_STAGING_CHUNK, off = 0;
        VkCommandBuffer cb;
        if (q->npost == BP_VK_POSTS && (st = stream_wait_locked(c, q))) break;
        if ((st = stage_reserve_locked(c, q, n, &off))) break;
        if ((st = stream_cb_locked(c, q, &cb))) break;
        VkBufferCopy region = {.srcOffset = src_off + done, .dstOffset = off, .size = n};
        bp_vk.vkCmdCopyBuffer(cb, ((const bp_vk_buffer *)src)->buf, q->stg->buf, 1, &region);
        q->post[q->npost].dst = (char *)dst + done;
        q->post[q->npost].off = off;
        q->post[q->npost].n = n;
        q->npost++;
        done += n;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* name: "matvec_<KIND>" or "gemm_<KIND>", e.g. "matvec_Q4_K", or a step kernel ("rms_norm"). */
/* The embedded SPIR-V of the kernel called name; NULL when the build has none. */
static const uint32_t *vk_find_code(const char *name, size_t *code_bytes) {
    int op = strncmp(name, "matvec_", 7) == 0 ? BP_VK_OP_MATVEC : strncmp(name, "gemm_", 5) == 0 ? BP_VK_OP_GEMM : -1;
    const char *kind = op < 0 ? "" : name + (op == BP_VK_OP_MATVEC ? 7 : 5);
    const uint32_t *code = NULL;
    *code_bytes = 0;
    for (int i = 0; op >= 0 && i < bp_vk_spirv_count; i++) {
        if (strcmp(bp_vk_spirv_table[i].name, kind) == 0)
            code = bp_vk_spirv_table[i].code[op], *code_bytes = bp_vk_spirv_table[i].bytes[op];
    }
    for (int i = 0; op < 0 && i < bp_vk_spirv_named_count; i++)
        if (!strcmp(bp_vk_spirv_named_table[i].name, name))
            code = bp_vk_spirv_named_table[i].code, *code_bytes = bp_vk_spirv_named_table[i].bytes;
    return code;
}

/* Device-free: whether the build embeds the kernel, without building a pipeline. */
static bool vk_has_module(bp_device *dev, const char *name) {
    (void)dev;
    size_t n;
    return vk_find_code(name, &n) != NULL;
}

static bp_status vk_kernel_lookup(bp_device *dev, const char *name, bp_kernel **out) {
    bp_vk_ctx *c = ctx(dev);
    size_t code_bytes = 0;
    const uint32_t *code = vk_find_code(name, &code_bytes);
    if (!code) return bp_fail(BP_E_NOT_FOUND, "Vulkan: no kernel named %s", name);
    bp_kernel *k = bp_calloc(1, sizeof *k);
    if (!k) return bp_fail(BP_E_NOMEM, "Vulkan kernel %s: out of host memory", name);
    snprintf(k->name, sizeof k->name, "%s", name);
    pthread_mutex_lock(&c->lock);
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = code_bytes, .pCode = code};
    VkShaderModule mod;
    VkResult r = bp_vk.vkCreateShaderModule(c->device, &mi, NULL, &mod);
    bp_status st = BP_OK;
    if (r != VK_SUCCESS) {
        st = bp_vk_fail(c, "vkCreateShaderModule", r);
    } else {
        /* Specialisation constant 0: the matvec's workgroup size, one subgroup (shaders
         * without the constant ignore it). */
        VkSpecializationMapEntry me = {.constantID = 0, .offset = 0, .size = sizeof(uint32_t)};
        VkSpecializationInfo spec = {.mapEntryCount = 1, .pMapEntries = &me, .dataSize = sizeof(uint32_t),
                                     .pData = &c->subgroup};
        VkComputePipelineCreateInfo pi = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mod, .pName = "main",
                      .pSpecializationInfo = &spec},
            .layout = c->pipe_layout,
        };
        r = bp_vk.vkCreateComputePipelines(c->device, VK_NULL_HANDLE, 1, &pi, NULL, &k->pipe);
        if (r != VK_SUCCESS) st = bp_vk_fail(c, "vkCreateComputePipelines", r);
        bp_vk.vkDestroyShaderModule(c->device, mod, NULL);
    }
    pthread_mutex_unlock(&c->lock);
    if (st) {
        bp_free(k);
        return bp_fail(st, "Vulkan pipeline %s: %s", name, bp_last_error());
    }
    *out = k;
    return BP_OK;
}

static void vk_kernel_release(bp_device *dev, bp_kernel *k) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    device_sync_locked(c);
    bp_vk.vkDestroyPipeline(c->device, k->pipe, NULL);
    pthread_mutex_unlock(&c->lock);
    bp_free(k);
}

/* Buffer arguments bind sets 0, 1, ... in order (whole buffers: a nonzero offset is refused,
 * since binding offsets must be aligned to minStorageBufferOffsetAlignment and our kernels take
 * their offsets in push constants instead); scalars and byte blobs fill the push constants in
 * order, each aligned to its size. */
static bp_status vk_launch(bp_device *dev, bp_stream *s, bp_kernel *k, const bp_launch_dims *dims,
                           const bp_kernel_arg *args, int nargs) {
    bp_vk_ctx *c = ctx(dev);
    VkDescriptorSet sets[BP_VK_MAX_SETS];
    uint32_t nsets = 0;
    unsigned char push[BP_VK_PUSH_BYTES];
    size_t np = 0;
    for (int i = 0; i < nargs; i++) {
        const bp_kernel_arg *a = &args[i];
        const void *p = NULL;
        size_t n = 0, align = 4;
        switch (a->type) {
        case BP_ARG_BUF:
            if (nsets == BP_VK_MAX_SETS) return bp_fail(BP_E_INVAL, "Vulkan %s: more than %d buffer arguments", k->name, BP_VK_MAX_SETS);
            if (!a->v.buf.buf || a->v.buf.offset) return bp_fail(BP_E_INVAL, "Vulkan %s: buffer argument %d is NULL or has an offset", k->name, i);
            sets[nsets++] = ((bp_vk_buffer *)a->v.buf.buf)->set;
            continue;
        case BP_ARG_I32: p = &a->v.i32; n = 4; break;
        case BP_ARG_U32: p = &a->v.u32; n = 4; break;
        case BP_ARG_F32: p = &a->v.f32; n = 4; break;
        case BP_ARG_I64: p = &a->v.i64; n = 8; align = 8; break;
        case BP_ARG_BYTES: p = a->v.bytes.p; n = a->v.bytes.n; break;
        default: return bp_fail(BP_E_INVAL, "Vulkan %s: argument %d has an unknown type", k->name, i);
        }
        np = (np + align - 1) & ~(align - 1);
        if (np + n > BP_VK_PUSH_BYTES) return bp_fail(BP_E_INVAL, "Vulkan %s: more than %d bytes of push constants", k->name, BP_VK_PUSH_BYTES);
        memcpy(push + np, p, n);
        np += n;
    }
    uint32_t g[3];
    for (int d = 0; d < 3; d++) {
        g[d] = dims->grid[d] ? dims->grid[d] : 1;
        if (g[d] > c->props.limits.maxComputeWorkGroupCount[d])
            return bp_fail(BP_E_SHAPE, "Vulkan %s: grid[%d] = %u exceeds the device's %u", k->name, d, g[d], c->props.limits.maxComputeWorkGroupCount[d]);
    }
    pthread_mutex_lock(&c->lock);
    bp_stream *st_ = s ? s : &c->defstream;
    VkCommandBuffer cb;
    bp_status st = stream_cb_locked(c, st_, &cb);
    if (!st) {
        bp_vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipe);
        if (nsets) bp_vk.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipe_layout, 0, nsets, sets, 0, NULL);
        if (np) bp_vk.vkCmdPushConstants(cb, c->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)((np + 3) & ~(size_t)3), push);
        bp_vk.vkCmdDispatch(cb, g[0], g[1], g[2]);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- streams and events --------------------------------------------------------------------- */

static bp_status vk_stream_create(bp_device *dev, bp_stream **out) {
    bp_vk_ctx *c = ctx(dev);
    bp_stream *s = bp_calloc(1, sizeof *s);
    if (!s) return bp_fail(BP_E_NOMEM, "Vulkan stream: out of host memory");
    s->cur = -1;
    pthread_mutex_lock(&c->lock);
    int i = 0;
    while (i < VK_STREAMS_MAX && vk_streams[i]) i++;
    if (i < VK_STREAMS_MAX) vk_streams[i] = s;
    pthread_mutex_unlock(&c->lock);
    if (i == VK_STREAMS_MAX) {
        bp_free(s);
        return bp_fail(BP_E_NOMEM, "Vulkan: more than %d streams", VK_STREAMS_MAX);
    }
    *out = s;
    return BP_OK;
}

static void vk_stream_destroy(bp_device *dev, bp_stream *s) {
    bp_vk_ctx *c = ctx(dev);
    if (!s) return;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < VK_STREAMS_MAX; i++) {
        if (vk_streams[i] == s) vk_streams[i] = NULL;
    }
    stream_release_locked(c, s);
    pthread_mutex_unlock(&c->lock);
    bp_free(s);
}

static bp_status vk_stream_sync(bp_device *dev, bp_stream *s) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_status st = stream_wait_locked(c, s ? s : &c->defstream);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static bp_status vk_device_sync(bp_device *dev) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_status st = device_sync_locked(c);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static bp_status vk_event_create(bp_device *dev, bp_event **out) {
    (void)dev;
    *out = bp_calloc(1, sizeof **out);
    return *out ? BP_OK : bp_fail(BP_E_NOMEM, "Vulkan event: out of host memory");
}

static void vk_event_destroy(bp_device *dev, bp_event *e) {
    (void)dev;
    bp_free(e);
}

/* Recording submits what the stream has queued; the event completes with that submission's
 * fence. (With no work queued it completes with the stream's latest submission, if any.) */
static bp_status vk_event_record(bp_device *dev, bp_event *e, bp_stream *s) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_stream *st_ = s ? s : &c->defstream;
    last_sub = NULL;
    bp_status st = stream_flush_locked(c, st_);
    bp_vk_sub *sub = last_sub;
    if (!sub) { /* nothing new: the newest submission still in flight, if any */
        int prev = (st_->next + BP_VK_RING - 1) % BP_VK_RING;
        if (st_->ring[prev].in_flight) sub = &st_->ring[prev];
    }
    e->sub = sub;
    e->gen = sub ? sub->gen : 0;
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* One queue, and every command buffer starts with a full barrier: work submitted after the
 * event's submission already waits for it. */
static bp_status vk_event_wait(bp_device *dev, bp_stream *s, bp_event *e) {
    (void)dev, (void)s, (void)e;
    return BP_OK;
}

static bp_status vk_event_sync(bp_device *dev, bp_event *e) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_status st = BP_OK;
    if (e->sub && e->sub->gen == e->gen) st = sub_wait_locked(c, e->sub);
    e->sub = NULL;
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- graphs: a command buffer recorded once and submitted per replay ----------------------- */

static bp_status vk_graph_begin(bp_device *dev, bp_stream *s) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_stream *q = s ? s : &c->defstream;
    bp_status st = check_lost(c);
    if (!st) st = stream_flush_locked(c, q); /* what was queued before runs first, on its own */
    struct bp_graph *g = NULL;
    if (!st && !(g = bp_calloc(1, sizeof *g))) st = bp_fail(BP_E_NOMEM, "Vulkan graph: out of host memory");
    if (!st) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = c->cmd_pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        VkResult r = bp_vk.vkAllocateCommandBuffers(c->device, &ai, &g->cb);
        if (r != VK_SUCCESS) st = bp_vk_fail(c, "vkAllocateCommandBuffers", r);
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        if (!st && (r = bp_vk.vkCreateFence(c->device, &fi, NULL, &g->fence)) != VK_SUCCESS)
            st = bp_vk_fail(c, "vkCreateFence", r);
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        if (!st && (r = bp_vk.vkBeginCommandBuffer(g->cb, &bi)) != VK_SUCCESS) st = bp_vk_fail(c, "vkBeginCommandBuffer", r);
    }
    if (st && g) {
        if (g->cb) bp_vk.vkFreeCommandBuffers(c->device, c->cmd_pool, 1, &g->cb);
        if (g->fence) bp_vk.vkDestroyFence(c->device, g->fence, NULL);
        bp_free(g);
    } else if (!st) {
        q->cap = g;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

static void graph_free_locked(bp_vk_ctx *c, struct bp_graph *g) {
    if (!g) return;
    graph_wait_locked(c, g);
    for (int i = 0; i < VK_STREAMS_MAX; i++)
        if (vk_streams[i] && vk_streams[i]->replay == g) vk_streams[i]->replay = NULL;
    if (c->defstream.replay == g) c->defstream.replay = NULL;
    if (g->cb) bp_vk.vkFreeCommandBuffers(c->device, c->cmd_pool, 1, &g->cb);
    if (g->fence) bp_vk.vkDestroyFence(c->device, g->fence, NULL);
    bp_free(g);
}

static bp_status vk_graph_end(bp_device *dev, bp_stream *s, bp_graph **out) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_stream *q = s ? s : &c->defstream;
    struct bp_graph *g = q->cap;
    q->cap = NULL;
    *out = NULL;
    bp_status st = g ? BP_OK : bp_fail(BP_E_INVAL, "Vulkan: graph_end without graph_begin");
    if (g) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        bp_vk.vkCmdPipelineBarrier(g->cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                                   0, NULL, 0, NULL);
        VkResult r = bp_vk.vkEndCommandBuffer(g->cb);
        if (r != VK_SUCCESS) st = bp_vk_fail(c, "vkEndCommandBuffer", r);
    }
    if (st) graph_free_locked(c, g);
    else *out = g;
    pthread_mutex_unlock(&c->lock);
    return st;
}

static bp_status vk_graph_replay(bp_device *dev, bp_graph *g, bp_stream *s) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bp_stream *q = s ? s : &c->defstream;
    bp_status st = check_lost(c);
    if (!st) st = stream_flush_locked(c, q);
    if (!st) st = graph_wait_locked(c, g); /* one replay of a graph at a time */
    if (!st) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &g->cb};
        VkResult r = bp_vk.vkQueueSubmit(c->queue, 1, &si, g->fence);
        if (r != VK_SUCCESS) st = bp_vk_fail(c, "vkQueueSubmit (graph replay)", r);
        else c->submits++, g->in_flight = true, q->replay = g;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

static void vk_graph_destroy(bp_device *dev, bp_graph *g) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    graph_free_locked(c, g);
    pthread_mutex_unlock(&c->lock);
}

static bool vk_stream_is_capturing(bp_device *dev, bp_stream *s) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    bool cap = (s ? s : &c->defstream)->cap != NULL;
    pthread_mutex_unlock(&c->lock);
    return cap;
}

static uint64_t vk_submits(bp_device *dev) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    uint64_t n = c->submits;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static bp_status vk_mem_info(bp_device *dev, size_t *total, size_t *free_bytes) {
    bp_vk_ctx *c = ctx(dev);
    uint32_t heap = c->memprops.memoryTypes[c->mem_device].heapIndex;
    size_t t = (size_t)c->memprops.memoryHeaps[heap].size;
    size_t used = bp_ledger_live_bytes(dev);
    *total = t;
    *free_bytes = used < t ? t - used : 0; /* an estimate: other processes are not counted */
    return BP_OK;
}

static void vk_close(bp_device *dev) {
    bp_vk_ctx *c = ctx(dev);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < VK_STREAMS_MAX; i++) {
        if (vk_streams[i]) stream_release_locked(c, vk_streams[i]);
    }
    stream_release_locked(c, &c->defstream);
    if (c->staging) buffer_destroy_locked(c, c->staging);
    c->staging = NULL;
    pthread_mutex_unlock(&c->lock);
}

const bp_device_methods bp_vk_methods = {
    .version = BP_DEVICE_METHODS_VERSION,
    .name = "vulkan",
    .close = vk_close,
    .alloc = vk_alloc,
    .alloc_managed = vk_alloc_managed,
    .free = vk_free,
    .h2d = vk_h2d,
    .d2h = vk_d2h,
    .d2d = vk_d2d,
    .h2d_async = vk_h2d_async,
    .d2h_async = vk_d2h_async,
    .kernel_lookup = vk_kernel_lookup,
    .kernel_release = vk_kernel_release,
    .has_module = vk_has_module,
    .launch = vk_launch,
    .stream_create = vk_stream_create,
    .stream_destroy = vk_stream_destroy,
    .stream_sync = vk_stream_sync,
    .device_sync = vk_device_sync,
    .event_create = vk_event_create,
    .event_destroy = vk_event_destroy,
    .event_record = vk_event_record,
    .event_wait = vk_event_wait,
    .event_sync = vk_event_sync,
    .graph_begin = vk_graph_begin,
    .graph_end = vk_graph_end,
    .graph_replay = vk_graph_replay,
    .graph_destroy = vk_graph_destroy,
    .stream_is_capturing = vk_stream_is_capturing,
    .mem_info = vk_mem_info,
    .submits = vk_submits,
};
