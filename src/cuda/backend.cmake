# CUDA backend: built when nvcc is found (BP_CUDA=AUTO), required with BP_CUDA=ON, left out with
# OFF. The capability table (cuda_caps.c) is compiled on every build by the top-level glob.
#
# The .cu files go through nvcc directly (add_custom_command) rather than enable_language(CUDA):
# the project stays a C project whose executables link with the C compiler, and a machine
# without nvcc never runs CMake's CUDA compiler detection.
#
# Targets (BP_CUDA_ARCHS, BP_CUDA_PTX): SASS for sm_80 and sm_90, PTX for compute_75. That runs on
#   sm_75 (T4, RTX 20): the compute_75 PTX, JIT-compiled by the driver at first load;
#   sm_80 / sm_86 / sm_87 / sm_89 (A100, A10/A40/RTX 30, Orin, L4/L40/RTX 40): the sm_80 SASS
#     (SASS runs on any later minor version of its major);
#   sm_90 (H100, H200, GH200): the sm_90 SASS;
#   anything newer (sm_100 B200, sm_120 RTX 50): the compute_75 PTX, JIT.
# So the probe accepts compute capability >= 7.5 (BP_CUDA_MIN_CC) and names these targets when
# it refuses a device. nvcc 13 targets sm_75 and newer only; the kernels need wmma (sm_70) and
# dp4a (sm_61). BP_CUDA_ARCHS=none builds PTX only (fast: `make sanitize` uses it).
# Host compiler: CMAKE_CUDA_HOST_COMPILER (or the CUDAHOSTCXX environment variable) is passed to
# nvcc as -ccbin; default: nvcc's own choice (g++ on PATH).
# Link: static cudart (-lcudart_static; it dlopens libcuda.so.1 at the first call), so the
# binary starts on machines without a driver and the probe reports "CUDA unavailable". Never
# the driver stub (stubs/libcuda.so): with it the binary fails to start without a driver.
set(BP_CUDA_ARCHS "80;90" CACHE STRING "CUDA SASS targets (sm_XX), ';'-separated, or 'none' for PTX only")
set(BP_CUDA_PTX "75" CACHE STRING "CUDA PTX target (compute_XX): the oldest GPU the build runs on, by JIT")
set(CMAKE_CUDA_HOST_COMPILER "$ENV{CUDAHOSTCXX}" CACHE FILEPATH "C++ compiler nvcc uses for host code (-ccbin); empty: nvcc's default")
set(BP_NVCC_MIN_VERSION 12.0)

set(BP_CUDA_GENCODE -gencode arch=compute_${BP_CUDA_PTX},code=compute_${BP_CUDA_PTX})
set(BP_CUDA_TARGETS "compute_${BP_CUDA_PTX} PTX")
set(BP_CUDA_MIN_CC ${BP_CUDA_PTX})
if(NOT BP_CUDA_ARCHS STREQUAL "none")
  foreach(a ${BP_CUDA_ARCHS})
    list(APPEND BP_CUDA_GENCODE -gencode arch=compute_${a},code=sm_${a})
    string(APPEND BP_CUDA_TARGETS " + sm_${a} SASS")
    if(a LESS BP_CUDA_MIN_CC)
      set(BP_CUDA_MIN_CC ${a})
    endif()
  endforeach()
endif()
set(BP_CUDA_CCBIN)
if(CMAKE_CUDA_HOST_COMPILER)
  set(BP_CUDA_CCBIN -ccbin ${CMAKE_CUDA_HOST_COMPILER})
endif()

# Why the CUDA backend cannot be built, in words; empty when it can.
set(BP_CUDA_MISSING "")
set(BP_CUDA_BUILT OFF)
if(NOT BP_CUDA STREQUAL "OFF")
  find_program(BP_NVCC nvcc HINTS ENV CUDA_PATH PATHS /usr/local/cuda/bin PATH_SUFFIXES bin)
  if(NOT BP_NVCC)
    set(BP_CUDA_MISSING "nvcc not found (put /usr/local/cuda/bin on PATH or set CUDA_PATH)")
  else()
    get_filename_component(BP_CUDA_BIN ${BP_NVCC} DIRECTORY)
    get_filename_component(BP_CUDA_ROOT ${BP_CUDA_BIN} DIRECTORY)
    find_library(BP_CUDART_STATIC cudart_static
      PATHS ${BP_CUDA_ROOT}/lib64 ${BP_CUDA_ROOT}/lib ${BP_CUDA_ROOT}/targets/x86_64-linux/lib NO_DEFAULT_PATH)
    execute_process(COMMAND ${BP_NVCC} --version OUTPUT_VARIABLE nvcc_out ERROR_VARIABLE nvcc_out RESULT_VARIABLE nvcc_rc)
    string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" _ "${nvcc_out}")
    set(BP_NVCC_VERSION "${CMAKE_MATCH_1}")
    if(NOT nvcc_rc EQUAL 0 OR NOT BP_NVCC_VERSION)
      set(BP_CUDA_MISSING "${BP_NVCC} --version failed: ${nvcc_out}")
    elseif(BP_NVCC_VERSION VERSION_LESS BP_NVCC_MIN_VERSION)
      set(BP_CUDA_MISSING "nvcc ${BP_NVCC_VERSION} is older than ${BP_NVCC_MIN_VERSION} (needed for sm_90 and these kernels)")
    elseif(NOT BP_CUDART_STATIC)
      set(BP_CUDA_MISSING "libcudart_static not found under ${BP_CUDA_ROOT}")
    elseif(CMAKE_CUDA_HOST_COMPILER AND NOT EXISTS "${CMAKE_CUDA_HOST_COMPILER}")
      set(BP_CUDA_MISSING "CMAKE_CUDA_HOST_COMPILER=${CMAKE_CUDA_HOST_COMPILER} does not exist")
    else()
      if(NOT CMAKE_CUDA_HOST_COMPILER)
        find_program(BP_CUDA_GXX g++)
        if(NOT BP_CUDA_GXX)
          set(BP_CUDA_MISSING "nvcc needs a C++ host compiler and no g++ is on PATH: install g++, or set -DCMAKE_CUDA_HOST_COMPILER=/path/to/g++")
        endif()
      endif()
      if(NOT BP_CUDA_MISSING)
        # One tiny compile (PTX only: seconds) proves nvcc accepts this host compiler -- the usual
        # failure on a new machine is "unsupported GNU version" -- before the real build starts.
        set(probe_cu ${CMAKE_BINARY_DIR}/cuda_probe/probe.cu)
        file(WRITE ${probe_cu} "__global__ void bp_probe_kernel(float *p) { p[threadIdx.x] = 1.0f; }\n")
        execute_process(COMMAND ${BP_NVCC} ${BP_CUDA_CCBIN} -std=c++17
                                -gencode arch=compute_${BP_CUDA_PTX},code=compute_${BP_CUDA_PTX} -c ${probe_cu}
                                -o ${CMAKE_BINARY_DIR}/cuda_probe/probe.o
                        OUTPUT_VARIABLE probe_out ERROR_VARIABLE probe_out RESULT_VARIABLE probe_rc)
        if(NOT probe_rc EQUAL 0)
          string(STRIP "${probe_out}" probe_out)
          set(BP_CUDA_MISSING "nvcc ${BP_NVCC_VERSION} cannot compile a test kernel with host compiler '${CMAKE_CUDA_HOST_COMPILER}' (empty: nvcc's default g++): ${probe_out} -- set -DCMAKE_CUDA_HOST_COMPILER to a g++ this nvcc supports")
        endif()
      endif()
    endif()
  endif()
  if(NOT BP_CUDA_MISSING)
    set(BP_CUDA_BUILT ON)
  elseif(BP_CUDA STREQUAL "ON")
    message(FATAL_ERROR "BP_CUDA=ON but the CUDA backend cannot be built: ${BP_CUDA_MISSING}")
  else()
    message(STATUS "CUDA backend: not built: ${BP_CUDA_MISSING}")
  endif()
endif()

if(BP_CUDA_BUILT)
  set(host "${CMAKE_CUDA_HOST_COMPILER}")
  if(NOT host)
    set(host "nvcc's default (${BP_CUDA_GXX})")
  endif()
  message(STATUS "CUDA backend: nvcc ${BP_NVCC_VERSION} (${BP_NVCC}), ${BP_CUDA_TARGETS}, host compiler ${host}")
  set(BP_CUDA_OBJECTS)
  file(GLOB BP_CUDA_CU CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cuda/*.cu)
  foreach(cu ${BP_CUDA_CU})
    get_filename_component(stem ${cu} NAME_WE)
    set(obj ${CMAKE_BINARY_DIR}/cuda/${stem}.o)
    # Exact mode's kernels must repeat the reference's IEEE operations: no fused multiply-add.
    set(extra)
    if(stem STREQUAL "cuda_gemm_exact")
      set(extra --fmad=false)
    endif()
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/cuda
      COMMAND ${BP_NVCC} ${BP_CUDA_CCBIN} -std=c++17 -O3 ${BP_CUDA_GENCODE} ${extra} -Xcompiler=-fPIC
              -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/src -I${CMAKE_SOURCE_DIR}/src/kinds
              -MD -MF ${obj}.d -c ${cu} -o ${obj}
      DEPFILE ${obj}.d
      MAIN_DEPENDENCY ${cu}
      COMMENT "nvcc ${stem}.cu (${BP_CUDA_TARGETS}) ${extra}"
      VERBATIM)
    list(APPEND BP_CUDA_OBJECTS ${obj})
  endforeach()
  set_source_files_properties(${BP_CUDA_OBJECTS} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(backplane PRIVATE ${BP_CUDA_OBJECTS}
    ${CMAKE_SOURCE_DIR}/src/cuda/cuda_device.c ${CMAKE_SOURCE_DIR}/src/cuda/cuda_dispatch.c)
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/cuda/cuda_dispatch.c PROPERTIES COMPILE_DEFINITIONS
    "BP_CUDA_MIN_CC=${BP_CUDA_MIN_CC};BP_CUDA_TARGETS=\"${BP_CUDA_TARGETS}\"")
  # SYSTEM: cudart's headers are not -Wall -Wextra -Werror clean under gcc/clang.
  target_include_directories(backplane SYSTEM PUBLIC ${BP_CUDA_ROOT}/include)
  target_compile_definitions(backplane PUBLIC BP_HAVE_CUDA=1)
  target_link_libraries(backplane PUBLIC ${BP_CUDART_STATIC} stdc++ dl rt pthread)
endif()

# Kernel-only timing for tools/gpu_check.sh step 2 (needs a GPU to run; built so it compiles
# wherever the backend does).
if(BP_CUDA_BUILT)
  add_executable(cuda_bench ${CMAKE_SOURCE_DIR}/tools/cuda_bench.c)
  target_include_directories(cuda_bench PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(cuda_bench PRIVATE backplane)
endif()
