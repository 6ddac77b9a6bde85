# CPU backend: per-folder instruction-set flags. Each file under avx2/ and avx512/ is compiled for
# its ISA only, and the CPU backend calls into it only after CPUID says the machine has it, so one
# binary runs on any x86-64 (no -march=native anywhere: that would make scalar/ SIGILL on older
# CPUs). The op kernels (avx2/op_kernels.c, avx512/op_kernels.c) follow the same path choice.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$" AND
   CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  set(BP_CPU_AVX2_FLAGS -mavx2 -mfma -mf16c)
  set(BP_CPU_AVX512_FLAGS ${BP_CPU_AVX2_FLAGS} -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mbmi2)
  file(GLOB BP_CPU_AVX2_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/avx2/*.c)
  file(GLOB BP_CPU_AVX512_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/avx512/*.c)
  set_source_files_properties(${BP_CPU_AVX2_SOURCES} TARGET_DIRECTORY backplane PROPERTIES
    COMPILE_OPTIONS "${BP_CPU_AVX2_FLAGS}")
  set_source_files_properties(${BP_CPU_AVX512_SOURCES} TARGET_DIRECTORY backplane PROPERTIES
    COMPILE_OPTIONS "${BP_CPU_AVX512_FLAGS}")
  # vdpbf16ps / vcvtne2ps2bf16: entered only where CPUID says AVX512_BF16.
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/cpu/avx512/bf16_dot.c TARGET_DIRECTORY backplane PROPERTIES
    COMPILE_OPTIONS "${BP_CPU_AVX512_FLAGS};-mavx512bf16")
  # The kernel table (kernels.c) names the AVX2 and AVX-512 kernels only where they are built.
  target_compile_definitions(backplane PRIVATE BP_CPU_X86_KERNELS=1)
endif()
