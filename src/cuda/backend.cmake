# CUDA backend: built when nvcc is found (BP_CUDA=AUTO), required with BP_CUDA=ON, left out with
# OFF. The capability table (cuda_caps.c) is compiled on every build by the top-level glob.
#
# The .cu files go through nvcc directly (add_custom_command) rather than enable_language(CUDA):
# the project stays a C project whose executables link with the C compiler, and a machine
# without nvcc never runs CMake's CUDA compiler detection.
#
# Targets: sm_90 SASS (H100/H200) plus compute_90 PTX (driver JIT on newer GPUs).
# Link: static cudart (-lcudart_static; it dlopens libcuda.so.1 at the first call), so the
# binary starts on machines without a driver and the probe reports "CUDA unavailable". Never
# the driver stub (stubs/libcuda.so): with it the binary fails to start without a driver.
set(BP_CUDA_GENCODE
  -gencode arch=compute_90,code=sm_90
  -gencode arch=compute_90,code=compute_90)

set(BP_CUDA_BUILT OFF)
if(NOT BP_CUDA STREQUAL "OFF")
  find_program(BP_NVCC nvcc HINTS ENV CUDA_PATH PATHS /usr/local/cuda/bin PATH_SUFFIXES bin)
  if(BP_NVCC)
    get_filename_component(BP_CUDA_BIN ${BP_NVCC} DIRECTORY)
    get_filename_component(BP_CUDA_ROOT ${BP_CUDA_BIN} DIRECTORY)
    find_library(BP_CUDART_STATIC cudart_static
      PATHS ${BP_CUDA_ROOT}/lib64 ${BP_CUDA_ROOT}/lib ${BP_CUDA_ROOT}/targets/x86_64-linux/lib NO_DEFAULT_PATH)
  endif()
  if(BP_NVCC AND BP_CUDART_STATIC)
    set(BP_CUDA_BUILT ON)
  elseif(BP_CUDA STREQUAL "ON")
    message(FATAL_ERROR "BP_CUDA=ON but nvcc (${BP_NVCC}) or libcudart_static (${BP_CUDART_STATIC}) was not found")
  else()
    message(STATUS "CUDA backend: nvcc or libcudart_static not found -- not built")
  endif()
endif()

if(BP_CUDA_BUILT)
  message(STATUS "CUDA backend: ${BP_NVCC}, ${BP_CUDART_STATIC}")
  set(BP_CUDA_OBJECTS)
  file(GLOB BP_CUDA_CU CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cuda/*.cu)
  foreach(cu ${BP_CUDA_CU})
    get_filename_component(stem ${cu} NAME_WE)
    set(obj ${CMAKE_BINARY_DIR}/cuda/${stem}.o)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/cuda
      COMMAND ${BP_NVCC} -std=c++17 -O3 ${BP_CUDA_GENCODE} -Xcompiler=-fPIC,-fvisibility=hidden
              -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/src -I${CMAKE_SOURCE_DIR}/src/kinds
              -MD -MF ${obj}.d -c ${cu} -o ${obj}
      DEPFILE ${obj}.d
      MAIN_DEPENDENCY ${cu}
      COMMENT "nvcc ${stem}.cu (sm_90 + compute_90 PTX)"
      VERBATIM)
    list(APPEND BP_CUDA_OBJECTS ${obj})
  endforeach()
  set_source_files_properties(${BP_CUDA_OBJECTS} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(backplane PRIVATE ${BP_CUDA_OBJECTS}
    ${CMAKE_SOURCE_DIR}/src/cuda/cuda_device.c ${CMAKE_SOURCE_DIR}/src/cuda/cuda_dispatch.c)
  # SYSTEM: cudart's headers are not -Wall -Wextra -Werror clean under gcc/clang.
  target_include_directories(backplane SYSTEM PUBLIC ${BP_CUDA_ROOT}/include)
  target_compile_definitions(backplane PUBLIC BP_HAVE_CUDA=1)
  target_link_libraries(backplane PUBLIC ${BP_CUDART_STATIC} stdc++ dl rt pthread)
endif()
