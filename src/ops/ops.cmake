# Op kernels: per-file instruction-set flags, as src/cpu/backend.cmake does for the matmul
# kernels. op_kern_avx2.c / op_kern_avx512.c are entered only after CPUID (through the CPU
# backend's ISA choice), so one binary runs on any x86-64.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$" AND
   CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/ops/op_kern_avx2.c TARGET_DIRECTORY backplane
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/ops/op_kern_avx512.c TARGET_DIRECTORY backplane
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")
endif()
