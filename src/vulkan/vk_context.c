/* Vulkan instance and device selection, queue, pipeline layout and descriptor pools.
 *
 * Selection: BACKPLANE_VULKAN_DEVICE picks a device by index ("1") or by a case-insensitive
 * substring of its name ("llvmpipe", "H200"); otherwise the best type wins: discrete GPU, then
 * integrated, virtual, and CPU devices (lavapipe) last, so a machine with both a GPU and Mesa's
 * software driver never computes on the CPU by accident.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "vulkan/vk_internal.h"

bp_status bp_vk_fail(bp_vk_ctx *c, const char *what, VkResult r) {
    if (r == VK_ERROR_DEVICE_LOST && c && !c->lost) {
        c->lost = true;
        snprintf(c->lost_why, sizeof c->lost_why, "%s: VK_ERROR_DEVICE_LOST", what);
    }
    bp_status s = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) ? BP_E_NOMEM
                  : r == VK_ERROR_DEVICE_LOST                                                ? BP_E_DEVICE_LOST
                                                                                             : BP_E_DEVICE;
    return bp_fail(s, "Vulkan %s: %s", what, bp_vk_result_name(r));
}

static int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
    }
}

static bool compute_family(VkPhysicalDevice pd, uint32_t *family) {
    uint32_t n = 0;
    bp_vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[16];
    if (n > 16) n = 16;
    bp_vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    for (uint32_t i = 0; i < n; i++) {
        if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            *family = i;
            return true;
        }
    }
    return false;
}

/* A memory type in `bits` with all `want` flags; prefers one that also has `prefer`. */
static int find_memory(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                       VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) {
    int found = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        if (!(bits & (1u << i))) continue;
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((f & want) != want) continue;
        if ((f & prefer) == prefer) return (int)i;
        if (found < 0) found = (int)i;
    }
    return found;
}

static bool pick_device(bp_vk_ctx *c, char *why, size_t why_len) {
    uint32_t n = 0;
    VkResult r = bp_vk.vkEnumeratePhysicalDevices(c->instance, &n, NULL);
    if (r != VK_SUCCESS || n == 0) {
        snprintf(why, why_len, "no Vulkan device (vkEnumeratePhysicalDevices: %s, %u devices)",
                 bp_vk_result_name(r), n);
        return false;
    }
    VkPhysicalDevice devs[16];
    if (n > 16) n = 16;
    bp_vk.vkEnumeratePhysicalDevices(c->instance, &n, devs);
    const char *sel = getenv("BACKPLANE_VULKAN_DEVICE");
    if (sel && !*sel) sel = NULL;
    int best = -1, best_rank = -1;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        bp_vk.vkGetPhysicalDeviceProperties(devs[i], &p);
        uint32_t fam;
        /* The shaders are SPIR-V 1.5 (--target-env=vulkan1.2). */
        bool usable = compute_family(devs[i], &fam) && p.apiVersion >= VK_API_VERSION_1_2;
        if (sel) {
            char *end;
            long idx = strtol(sel, &end, 10);
            bool match = (*end == 0) ? idx == (long)i : bp_dev_name_contains(p.deviceName, sel);
            if (match) {
                if (!usable) {
                    snprintf(why, why_len, "BACKPLANE_VULKAN_DEVICE=%s selects \"%s\", which lacks "
                             "a compute queue or Vulkan 1.2", sel, p.deviceName);
                    return false;
                }
                best = (int)i;
                break;
            }
            continue;
        }
        if (usable && type_rank(p.deviceType) > best_rank) {
            best = (int)i;
            best_rank = type_rank(p.deviceType);
        }
    }
    if (best < 0) {
        if (sel) snprintf(why, why_len, "BACKPLANE_VULKAN_DEVICE=%s matches none of the %u Vulkan devices", sel, n);
        else snprintf(why, why_len, "none of the %u Vulkan devices has a compute queue and Vulkan 1.2", n);
        return false;
    }
    c->phys = devs[best];
    bp_vk.vkGetPhysicalDeviceProperties(c->phys, &c->props);
    bp_vk.vkGetPhysicalDeviceMemoryProperties(c->phys, &c->memprops);
    compute_family(c->phys, &c->queue_family);
    snprintf(c->name, sizeof c->name, "%s", c->props.deviceName);
    return true;
}

static bool create_layouts(bp_vk_ctx *c, char *why, size_t why_len) {
    VkDescriptorSetLayoutBinding b = {
        .binding = 0,
        .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        .descriptorCount = 1,
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
    };
    VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = 1,
        .pBindings = &b,
    };
    VkResult r = bp_vk.vkCreateDescriptorSetLayout(c->device, &li, NULL, &c->set_layout);
    if (r != VK_SUCCESS) {
        snprintf(why, why_len, "vkCreateDescriptorSetLayout: %s", bp_vk_result_name(r));
        return false;
    }
    /* Every kernel sees the same layout: set i holds argument buffer i at binding 0, so each
     * buffer needs exactly one descriptor set, written once when it is allocated. */
    VkDescriptorSetLayout sets[BP_VK_MAX_SETS];
    for (int i = 0; i < BP_VK_MAX_SETS; i++) sets[i] = c->set_layout;
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0,
                              .size = BP_VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = BP_VK_MAX_SETS,
        .pSetLayouts = sets,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &pr,
    };
    r = bp_vk.vkCreatePipelineLayout(c->device, &pi, NULL, &c->pipe_layout);
    if (r != VK_SUCCESS) {
        snprintf(why, why_len, "vkCreatePipelineLayout: %s", bp_vk_result_name(r));
        return false;
    }
    return true;
}

bool bp_vk_ctx_create(bp_vk_ctx *c, char *why, size_t why_len) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    c->defstream.cur = -1;
    if (!bp_vk_load_global(why, why_len)) return false;
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "backplane",
        .pEngineName = "backplane",
        .apiVersion = VK_API_VERSION_1_2,
    };
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult r = bp_vk.vkCreateInstance(&ii, NULL, &c->instance);
    if (r != VK_SUCCESS) {
        /* No ICD installed: VK_ERROR_INCOMPATIBLE_DRIVER. Vulkan is simply unavailable. */
        snprintf(why, why_len, "vkCreateInstance: %s (no Vulkan driver?)", bp_vk_result_name(r));
        c->instance = VK_NULL_HANDLE;
        return false;
    }
    if (!bp_vk_load_instance(c->instance, why, why_len) || !pick_device(c, why, why_len)) {
        bp_vk_ctx_destroy(c);
        return false;
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = c->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo di = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qi,
    };
    r = bp_vk.vkCreateDevice(c->phys, &di, NULL, &c->device);
    if (r != VK_SUCCESS) {
        snprintf(why, why_len, "vkCreateDevice(%s): %s", c->name, bp_vk_result_name(r));
        c->device = VK_NULL_HANDLE;
        bp_vk_ctx_destroy(c);
        return false;
    }
    if (!bp_vk_load_device(c->device, why, why_len)) {
        bp_vk_ctx_destroy(c);
        return false;
    }
    bp_vk.vkGetDeviceQueue(c->device, c->queue_family, 0, &c->queue);
    VkCommandPoolCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = c->queue_family,
    };
    r = bp_vk.vkCreateCommandPool(c->device, &ci, NULL, &c->cmd_pool);
    if (r != VK_SUCCESS) {
        snprintf(why, why_len, "vkCreateCommandPool: %s", bp_vk_result_name(r));
        bp_vk_ctx_destroy(c);
        return false;
    }
    if (!create_layouts(c, why, why_len)) {
        bp_vk_ctx_destroy(c);
        return false;
    }
    /* Memory types: device-local for buffers (mappable too on UMA devices such as lavapipe,
     * which then need no staging), host-visible coherent for staging. Memory type bits are
     * the same for every storage buffer on real drivers; we check them again per allocation. */
    uint32_t all = (1u << c->memprops.memoryTypeCount) - 1u;
    int dev_t = find_memory(&c->memprops, all, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    int host_t = find_memory(&c->memprops, all,
                             VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                             VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (host_t < 0) {
        snprintf(why, why_len, "%s has no host-visible coherent memory", c->name);
        bp_vk_ctx_destroy(c);
        return false;
    }
    if (dev_t < 0) dev_t = host_t;
    c->mem_device = (uint32_t)dev_t;
    c->mem_host = (uint32_t)host_t;
    VkMemoryPropertyFlags df = c->memprops.memoryTypes[dev_t].propertyFlags;
    const char *force = getenv("BACKPLANE_VULKAN_STAGING");
    c->device_mappable = (df & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
                         (df & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) && !(force && *force == '1');
    c->max_range = c->props.limits.maxStorageBufferRange;
    /* The matvec reduces with subgroupAdd (core Vulkan 1.1 subgroups, arithmetic class): one
     * subgroup per row, no shared memory and no barrier. On lavapipe a barrier costs a
     * coroutine switch per 8 lanes, and the 64-thread tree reduction it replaced was most of
     * a small matvec's time. */
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    bp_vk.vkGetPhysicalDeviceProperties2(c->phys, &p2);
    if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        !(sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) || sg.subgroupSize == 0) {
        snprintf(why, why_len, "%s lacks subgroup arithmetic in compute shaders", c->name);
        bp_vk_ctx_destroy(c);
        return false;
    }
    c->subgroup = sg.subgroupSize < 8 ? 8 : sg.subgroupSize > 128 ? 128 : sg.subgroupSize;
    /* The GEMM's tiles (shaders/gemm.comp) take 16.25 KiB of shared memory; Vulkan promises
     * only 16 KiB, though every GPU and lavapipe have 32 KiB or more. */
    if (c->props.limits.maxComputeSharedMemorySize < 16640) {
        snprintf(why, why_len, "%s has %u bytes of compute shared memory, the GEMM needs 16640", c->name,
                 c->props.limits.maxComputeSharedMemorySize);
        bp_vk_ctx_destroy(c);
        return false;
    }
    return true;
}

void bp_vk_ctx_destroy(bp_vk_ctx *c) {
    if (c->device) {
        bp_vk.vkDeviceWaitIdle(c->device);
        for (int i = 0; i < BP_VK_RING; i++) {
            if (c->defstream.ring[i].fence) bp_vk.vkDestroyFence(c->device, c->defstream.ring[i].fence, NULL);
        }
        for (int i = 0; i < c->npools; i++) bp_vk.vkDestroyDescriptorPool(c->device, c->pools[i], NULL);
        if (c->pipe_layout) bp_vk.vkDestroyPipelineLayout(c->device, c->pipe_layout, NULL);
        if (c->set_layout) bp_vk.vkDestroyDescriptorSetLayout(c->device, c->set_layout, NULL);
        if (c->cmd_pool) bp_vk.vkDestroyCommandPool(c->device, c->cmd_pool, NULL);
        bp_vk.vkDestroyDevice(c->device, NULL);
    }
    if (c->instance) bp_vk.vkDestroyInstance(c->instance, NULL);
    c->device = VK_NULL_HANDLE;
    c->instance = VK_NULL_HANDLE;
    pthread_mutex_destroy(&c->lock);
}
