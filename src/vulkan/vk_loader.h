/* The Vulkan loader, opened with dlopen at first use: a backplane binary built with Vulkan
 * still starts (and runs on the CPU) on a machine without libvulkan.so.1. Every entry point we
 * call is listed once below and reached through bp_vk.<name>.
 */
#ifndef BP_VK_LOADER_H
#define BP_VK_LOADER_H

#define VK_NO_PROTOTYPES
#include <stdbool.h>
#include <stddef.h>
#include <vulkan/vulkan.h>

/* Instance-level entry points (resolved with vkGetInstanceProcAddr(instance, ...)). */
#define BP_VK_INSTANCE_FNS(X)                   \
    X(vkDestroyInstance)                        \
    X(vkEnumeratePhysicalDevices)               \
    X(vkGetPhysicalDeviceProperties)            \
    X(vkGetPhysicalDeviceProperties2)           \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkGetPhysicalDeviceMemoryProperties)      \
    X(vkCreateDevice)                           \
    X(vkGetDeviceProcAddr)

/* Device-level entry points (resolved with vkGetDeviceProcAddr(device, ...)). */
#define BP_VK_DEVICE_FNS(X)          \
    X(vkDestroyDevice)               \
    X(vkGetDeviceQueue)              \
    X(vkDeviceWaitIdle)              \
    X(vkCreateBuffer)                \
    X(vkDestroyBuffer)               \
    X(vkGetBufferMemoryRequirements) \
    X(vkAllocateMemory)              \
    X(vkFreeMemory)                  \
    X(vkBindBufferMemory)            \
    X(vkMapMemory)                   \
    X(vkUnmapMemory)                 \
    X(vkCreateShaderModule)          \
    X(vkDestroyShaderModule)         \
    X(vkCreateDescriptorSetLayout)   \
    X(vkDestroyDescriptorSetLayout)  \
    X(vkCreatePipelineLayout)        \
    X(vkDestroyPipelineLayout)       \
    X(vkCreateComputePipelines)      \
    X(vkDestroyPipeline)             \
    X(vkCreateDescriptorPool)        \
    X(vkDestroyDescriptorPool)       \
    X(vkAllocateDescriptorSets)      \
    X(vkFreeDescriptorSets)          \
    X(vkUpdateDescriptorSets)        \
    X(vkCreateCommandPool)           \
    X(vkDestroyCommandPool)          \
    X(vkAllocateCommandBuffers)      \
    X(vkFreeCommandBuffers)          \
    X(vkBeginCommandBuffer)          \
    X(vkEndCommandBuffer)            \
    X(vkResetCommandBuffer)          \
    X(vkCmdBindPipeline)             \
    X(vkCmdBindDescriptorSets)       \
    X(vkCmdPushConstants)            \
    X(vkCmdDispatch)                 \
    X(vkCmdCopyBuffer)               \
    X(vkCmdFillBuffer)               \
    X(vkCmdPipelineBarrier)          \
    X(vkQueueSubmit)                 \
    X(vkQueueWaitIdle)               \
    X(vkCreateFence)                 \
    X(vkDestroyFence)                \
    X(vkWaitForFences)               \
    X(vkResetFences)                 \
    X(vkGetFenceStatus)

typedef struct bp_vk_fns {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkCreateInstance vkCreateInstance;
#define BP_VK_FN_MEMBER(name) PFN_##name name;
    BP_VK_INSTANCE_FNS(BP_VK_FN_MEMBER)
    BP_VK_DEVICE_FNS(BP_VK_FN_MEMBER)
#undef BP_VK_FN_MEMBER
} bp_vk_fns;

extern bp_vk_fns bp_vk;

/* Open libvulkan.so.1 (once) and resolve the global entry points. False (reason in why) when
 * the loader is missing. Not thread-safe: called under the context's init lock. */
bool bp_vk_load_global(char *why, size_t why_len);
bool bp_vk_load_instance(VkInstance inst, char *why, size_t why_len);
bool bp_vk_load_device(VkDevice dev, char *why, size_t why_len);
/* "VK_ERROR_OUT_OF_DEVICE_MEMORY" for a VkResult. */
const char *bp_vk_result_name(VkResult r);

#endif
