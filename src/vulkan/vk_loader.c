/* dlopen of the Vulkan loader and resolution of every entry point in vk_loader.h. */
#include "vulkan/vk_loader.h"

#include <dlfcn.h>
#include <stdio.h>

bp_vk_fns bp_vk;
static void *vk_lib;

bool bp_vk_load_global(char *why, size_t why_len) {
    if (bp_vk.vkCreateInstance) return true;
    /* The soname first (what the runtime package installs), then the dev symlink. */
    if (!vk_lib) vk_lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!vk_lib) vk_lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!vk_lib) {
        snprintf(why, why_len, "the Vulkan loader libvulkan.so.1 is not installed (%s)", dlerror());
        return false;
    }
    /* POSIX allows converting dlsym's void * to a function pointer; -Wpedantic is not on. */
    bp_vk.vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(vk_lib, "vkGetInstanceProcAddr");
    if (!bp_vk.vkGetInstanceProcAddr) {
        snprintf(why, why_len, "libvulkan.so.1 has no vkGetInstanceProcAddr");
        return false;
    }
    bp_vk.vkCreateInstance =
        (PFN_vkCreateInstance)bp_vk.vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkCreateInstance");
    if (!bp_vk.vkCreateInstance) {
        snprintf(why, why_len, "the Vulkan loader has no vkCreateInstance");
        return false;
    }
    return true;
}

bool bp_vk_load_instance(VkInstance inst, char *why, size_t why_len) {
#define LOAD_I(name)                                                                     \
    bp_vk.name = (PFN_##name)bp_vk.vkGetInstanceProcAddr(inst, #name);                   \
    if (!bp_vk.name) {                                                                   \
        snprintf(why, why_len, "the Vulkan instance has no %s", #name);                  \
        return false;                                                                    \
    }
    BP_VK_INSTANCE_FNS(LOAD_I)
#undef LOAD_I
    return true;
}

bool bp_vk_load_device(VkDevice dev, char *why, size_t why_len) {
#define LOAD_D(name)                                                                     \
    bp_vk.name = (PFN_##name)bp_vk.vkGetDeviceProcAddr(dev, #name);                      \
    if (!bp_vk.name) {                                                                   \
        snprintf(why, why_len, "the Vulkan device has no %s", #name);                    \
        return false;                                                                    \
    }
    BP_VK_DEVICE_FNS(LOAD_D)
#undef LOAD_D
    return true;
}

const char *bp_vk_result_name(VkResult r) {
    switch (r) {
#define R(x) case x: return #x;
    R(VK_SUCCESS) R(VK_NOT_READY) R(VK_TIMEOUT) R(VK_INCOMPLETE)
    R(VK_ERROR_OUT_OF_HOST_MEMORY) R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    R(VK_ERROR_INITIALIZATION_FAILED) R(VK_ERROR_DEVICE_LOST) R(VK_ERROR_MEMORY_MAP_FAILED)
    R(VK_ERROR_LAYER_NOT_PRESENT) R(VK_ERROR_EXTENSION_NOT_PRESENT)
    R(VK_ERROR_FEATURE_NOT_PRESENT) R(VK_ERROR_INCOMPATIBLE_DRIVER) R(VK_ERROR_TOO_MANY_OBJECTS)
    R(VK_ERROR_FORMAT_NOT_SUPPORTED) R(VK_ERROR_FRAGMENTED_POOL) R(VK_ERROR_OUT_OF_POOL_MEMORY)
    R(VK_ERROR_INVALID_SHADER_NV) R(VK_ERROR_UNKNOWN)
#undef R
    default: return "VK_ERROR_(unnamed)";
    }
}
