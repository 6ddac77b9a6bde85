# OpenCL backend: built when the OpenCL headers and library are found (BP_OPENCL=AUTO),
# required with BP_OPENCL=ON, left out with OFF. The capability table (opencl_caps.c) is
# compiled on every build by the top-level glob.
#
# The kernels ship as OpenCL C source embedded in the library (built by the driver at the first
# launch): cl_prelude.cl + include/backplane_kinds.def + cl_kinds_end.cl + src/kinds/iq_tables.h +
# src/cuda/cuda_kind_math.h + src/gpu/step_args.h + src/cuda/cuda_step_math.h + cl_kernels.cl +
# cl_step.cl, concatenated into a byte array by embed_cl.cmake
# at build time (CMake only: no python or xxd on the build machine). Editing any re-embeds.
set(BP_OPENCL_BUILT OFF)
if(NOT BP_OPENCL STREQUAL "OFF")
  find_path(BP_OPENCL_INCLUDE CL/cl.h)
  find_library(BP_OPENCL_LIBRARY NAMES OpenCL)
  if(BP_OPENCL_INCLUDE AND BP_OPENCL_LIBRARY)
    set(BP_OPENCL_BUILT ON)
  elseif(BP_OPENCL STREQUAL "ON")
    message(FATAL_ERROR "BP_OPENCL=ON but the OpenCL headers (${BP_OPENCL_INCLUDE}) or library (${BP_OPENCL_LIBRARY}) "
                        "were not found (Debian: ocl-icd-opencl-dev; a device: pocl-opencl-icd)")
  else()
    message(STATUS "OpenCL backend: CL/cl.h or libOpenCL not found -- not built")
  endif()
endif()

if(BP_OPENCL_BUILT)
  message(STATUS "OpenCL backend: ${BP_OPENCL_LIBRARY}")
  set(BP_CL_PARTS
    ${CMAKE_SOURCE_DIR}/src/opencl/cl_prelude.cl
    ${CMAKE_SOURCE_DIR}/include/backplane_kinds.def
    ${CMAKE_SOURCE_DIR}/src/opencl/cl_kinds_end.cl
    ${CMAKE_SOURCE_DIR}/src/kinds/iq_tables.h
    ${CMAKE_SOURCE_DIR}/src/cuda/cuda_kind_math.h
    ${CMAKE_SOURCE_DIR}/src/gpu/step_args.h
    ${CMAKE_SOURCE_DIR}/src/cuda/cuda_step_math.h
    ${CMAKE_SOURCE_DIR}/src/opencl/cl_kernels.cl
    ${CMAKE_SOURCE_DIR}/src/opencl/cl_step.cl)
  string(REPLACE ";" "," BP_CL_PARTS_ARG "${BP_CL_PARTS}")
  set(BP_CL_EMBED ${CMAKE_BINARY_DIR}/opencl/cl_program_src.c)
  add_custom_command(
    OUTPUT ${BP_CL_EMBED}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/opencl
    COMMAND ${CMAKE_COMMAND} -DOUT=${BP_CL_EMBED} -DSOURCES=${BP_CL_PARTS_ARG}
            -P ${CMAKE_SOURCE_DIR}/src/opencl/embed_cl.cmake
    BYPRODUCTS ${BP_CL_EMBED}.txt
    DEPENDS ${BP_CL_PARTS} ${CMAKE_SOURCE_DIR}/src/opencl/embed_cl.cmake
    COMMENT "Embedding the OpenCL program source"
    VERBATIM)
  # The kernel names the program defines (after preprocessing), for the launch table.
  set(BP_CL_NAMES ${CMAKE_BINARY_DIR}/opencl/cl_kernel_names.h)
  add_custom_command(
    OUTPUT ${BP_CL_NAMES}
    COMMAND ${CMAKE_COMMAND} -DTEXT=${BP_CL_EMBED}.txt -DCC=${CMAKE_C_COMPILER} -DOUT=${BP_CL_NAMES}
            -P ${CMAKE_SOURCE_DIR}/src/opencl/cl_kernel_names.cmake
    DEPENDS ${BP_CL_EMBED} ${CMAKE_SOURCE_DIR}/src/opencl/cl_kernel_names.cmake
    COMMENT "Listing the OpenCL program's kernels"
    VERBATIM)
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/opencl/cl_dispatch.c TARGET_DIRECTORY backplane
    PROPERTIES OBJECT_DEPENDS ${BP_CL_NAMES})
  target_sources(backplane PRIVATE ${BP_CL_EMBED} ${BP_CL_NAMES}
    ${CMAKE_SOURCE_DIR}/src/opencl/cl_device.c ${CMAKE_SOURCE_DIR}/src/opencl/cl_dispatch.c)
  target_include_directories(backplane SYSTEM PUBLIC ${BP_OPENCL_INCLUDE})
  target_include_directories(backplane PRIVATE ${CMAKE_BINARY_DIR}/opencl)
  target_compile_definitions(backplane PUBLIC BP_HAVE_OPENCL=1)
  target_link_libraries(backplane PUBLIC ${BP_OPENCL_LIBRARY})
endif()
