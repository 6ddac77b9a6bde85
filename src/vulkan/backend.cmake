# Vulkan backend: included by the top-level CMakeLists.txt after the `backplane` target exists.
# BP_VULKAN=AUTO builds it when the Vulkan headers and a GLSL compiler are found, ON requires
# them, OFF leaves it out (vulkan_caps.c is compiled either way).
#
# The loader is dlopen'ed at run time (vk_loader.c), so only the headers are needed here and
# the binaries start on machines without libvulkan.so.1.
# Debian: apt-get install libvulkan-dev glslc (or glslang-tools) mesa-vulkan-drivers.
if(BP_VULKAN STREQUAL "OFF")
  return()
endif()

find_path(BP_VULKAN_INCLUDE_DIR vulkan/vulkan.h)
find_program(BP_GLSLC glslc)
find_program(BP_GLSLANG glslangValidator)
if(NOT BP_VULKAN_INCLUDE_DIR OR (NOT BP_GLSLC AND NOT BP_GLSLANG))
  if(BP_VULKAN STREQUAL "ON")
    message(FATAL_ERROR "BP_VULKAN=ON but the Vulkan headers (libvulkan-dev) or a GLSL compiler "
                        "(glslc / glslang-tools) is missing")
  endif()
  message(STATUS "Vulkan backend: off (headers: ${BP_VULKAN_INCLUDE_DIR}, glslc: ${BP_GLSLC})")
  return()
endif()
if(BP_GLSLC)
  message(STATUS "Vulkan backend: on (shaders compiled with ${BP_GLSLC})")
else()
  message(STATUS "Vulkan backend: on (shaders compiled with ${BP_GLSLANG})")
endif()

set(BP_VK_SRC ${CMAKE_SOURCE_DIR}/src/vulkan)
set(BP_VK_OUT ${CMAKE_BINARY_DIR}/vulkan)
file(MAKE_DIRECTORY ${BP_VK_OUT})

# The kinds with shaders: THE list in vk_kinds.def (vulkan_caps.c claims the same rows).
file(STRINGS ${BP_VK_SRC}/vk_kinds.def BP_VK_KIND_LINES REGEX "^BP_VK_KIND\\(")
set(BP_VK_KINDS "")
foreach(line ${BP_VK_KIND_LINES})
  string(REGEX REPLACE "^BP_VK_KIND\\(([A-Z0-9_]+)\\).*" "\\1" kind "${line}")
  list(APPEND BP_VK_KINDS ${kind})
endforeach()

# The IQ grids: a GLSL include of accessors and the C array of words the host uploads, both
# printed by a small host program from src/kinds/iq_tables.h (the numbers the CPU reference
# uses).
add_executable(bp_vk_gen_iq ${BP_VK_SRC}/gen_iq_glsl.c)
target_include_directories(bp_vk_gen_iq PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
# A build tool: keep sanitizers out of it (its output is all that matters).
target_compile_options(bp_vk_gen_iq PRIVATE -fno-sanitize=all)
target_link_options(bp_vk_gen_iq PRIVATE -fno-sanitize=all)
add_custom_command(
  OUTPUT ${BP_VK_OUT}/iq_tables.glsl ${BP_VK_OUT}/vk_iq_data.c
  COMMAND bp_vk_gen_iq glsl > ${BP_VK_OUT}/iq_tables.glsl.tmp
  COMMAND bp_vk_gen_iq c > ${BP_VK_OUT}/vk_iq_data.c.tmp
  COMMAND ${CMAKE_COMMAND} -E rename ${BP_VK_OUT}/iq_tables.glsl.tmp ${BP_VK_OUT}/iq_tables.glsl
  COMMAND ${CMAKE_COMMAND} -E rename ${BP_VK_OUT}/vk_iq_data.c.tmp ${BP_VK_OUT}/vk_iq_data.c
  DEPENDS bp_vk_gen_iq ${CMAKE_SOURCE_DIR}/src/kinds/iq_tables.h
  COMMENT "Generating the IQ grid tables for the Vulkan shaders")

file(GLOB BP_VK_SHADER_DEPS ${BP_VK_SRC}/shaders/*.glsl ${BP_VK_SRC}/shaders/*.comp)
set(BP_VK_SPVS "")
foreach(kind ${BP_VK_KINDS})
  foreach(op matvec gemm)
    set(spv ${BP_VK_OUT}/${kind}_${op}.spv)
    # --target-env=vulkan1.2: vulkan1.3 emits LocalSizeId, which needs maintenance4 enabled
    # (a lavapipe pitfall, see TOOLCHAINS.md).
    if(BP_GLSLC)
      set(cmd ${BP_GLSLC} --target-env=vulkan1.2 -O -DKIND_${kind}
              -I${BP_VK_SRC}/shaders -I${BP_VK_OUT} ${BP_VK_SRC}/shaders/${op}.comp -o ${spv})
    else()
      set(cmd ${BP_GLSLANG} --target-env vulkan1.2 -DKIND_${kind}
              -I${BP_VK_SRC}/shaders -I${BP_VK_OUT} -o ${spv} ${BP_VK_SRC}/shaders/${op}.comp)
    endif()
    add_custom_command(OUTPUT ${spv} COMMAND ${cmd}
      DEPENDS ${BP_VK_SHADER_DEPS} ${BP_VK_OUT}/iq_tables.glsl
      COMMENT "Compiling the Vulkan ${op} shader for ${kind}")
    list(APPEND BP_VK_SPVS ${spv})
  endforeach()
endforeach()

# The step's kernels (src/gpu/gpu_step.c names them): one SPIR-V per NAME=source[:defines]; the
# embedding per weight kind.
set(BP_VK_STEP_KERNELS rms_norm=rms_norm eltwise=eltwise glu=glu rope=rope)
# The KV cache kinds (src/gpu/gpu_step.c bp_gpu_step_kv_kind: the same list).
foreach(kv F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1)
  list(APPEND BP_VK_STEP_KERNELS kv_append_${kv}=kv_append:KV_${kv} attention_${kv}=attention:KV_${kv})
endforeach()
foreach(kind ${BP_VK_KINDS})
  list(APPEND BP_VK_STEP_KERNELS embed_${kind}=embed:KIND_${kind})
endforeach()
set(BP_VK_NAMED "")
foreach(entry ${BP_VK_STEP_KERNELS})
  string(REGEX REPLACE "^([A-Za-z0-9_]+)=.*" "\\1" kname "${entry}")
  string(REGEX REPLACE "^[A-Za-z0-9_]+=([a-z_]+).*" "\\1" src "${entry}")
  set(defs "")
  if(entry MATCHES ":")
    string(REGEX REPLACE "^[^:]+:(.*)" "\\1" def "${entry}")
    set(defs -D${def})
  endif()
  set(spv ${BP_VK_OUT}/step_${kname}.spv)
  if(BP_GLSLC)
    set(cmd ${BP_GLSLC} --target-env=vulkan1.2 -O ${defs} -I${BP_VK_SRC}/shaders -I${BP_VK_OUT}
            ${BP_VK_SRC}/shaders/${src}.comp -o ${spv})
  else()
    set(cmd ${BP_GLSLANG} --target-env vulkan1.2 ${defs} -I${BP_VK_SRC}/shaders -I${BP_VK_OUT} -o ${spv}
            ${BP_VK_SRC}/shaders/${src}.comp)
  endif()
  add_custom_command(OUTPUT ${spv} COMMAND ${cmd}
    DEPENDS ${BP_VK_SHADER_DEPS} ${BP_VK_OUT}/iq_tables.glsl
    COMMENT "Compiling the Vulkan step kernel ${kname}")
  list(APPEND BP_VK_SPVS ${spv})
  list(APPEND BP_VK_NAMED ${kname})
endforeach()

string(REPLACE ";" "," BP_VK_KINDS_CSV "${BP_VK_KINDS}")
string(REPLACE ";" "," BP_VK_NAMED_CSV "${BP_VK_NAMED}")
add_custom_command(
  OUTPUT ${BP_VK_OUT}/vk_spirv_data.c
  COMMAND ${CMAKE_COMMAND} -DOUT=${BP_VK_OUT}/vk_spirv_data.c -DSPV_DIR=${BP_VK_OUT}
          -DKINDS=${BP_VK_KINDS_CSV} -DNAMED=${BP_VK_NAMED_CSV} -P ${BP_VK_SRC}/embed_spirv.cmake
  DEPENDS ${BP_VK_SPVS} ${BP_VK_SRC}/embed_spirv.cmake ${BP_VK_SRC}/vk_kinds.def
  COMMENT "Embedding ${CMAKE_CURRENT_LIST_DIR} SPIR-V")

target_sources(backplane PRIVATE
  ${BP_VK_SRC}/vk_loader.c ${BP_VK_SRC}/vk_context.c ${BP_VK_SRC}/vk_device.c
  ${BP_VK_SRC}/vk_dispatch.c ${BP_VK_OUT}/vk_spirv_data.c ${BP_VK_OUT}/vk_iq_data.c)
target_include_directories(backplane PRIVATE ${BP_VULKAN_INCLUDE_DIR})
target_compile_definitions(backplane PUBLIC BP_HAVE_VULKAN=1)
target_link_libraries(backplane PUBLIC ${CMAKE_DL_LIBS})
