# CPU backend: per-file instruction-set flags. Each kern_<isa>*.c is compiled for its ISA only,
# and cpu.c calls into it only after CPUID says the machine has it, so one binary runs on any
# x86-64 (no -march=native anywhere: that would make the scalar files SIGILL on older CPUs).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$" AND
   CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  set(BP_CPU_AVX2_FLAGS -mavx2 -mfma -mf16c)
  file(GLOB BP_CPU_AVX2_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kern_avx2*.c)
  file(GLOB BP_CPU_AVX512_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kern_avx512*.c)
  set_source_files_properties(${BP_CPU_AVX2_SOURCES} TARGET_DIRECTORY backplane PROPERTIES
    COMPILE_OPTIONS "${BP_CPU_AVX2_FLAGS}")
  set_source_files_properties(${BP_CPU_AVX512_SOURCES} TARGET_DIRECTORY backplane PROPERTIES
    COMPILE_OPTIONS "${BP_CPU_AVX2_FLAGS};-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mbmi2")
  # vdpbf16ps / vcvtne2ps2bf16: cpu.c calls into this file only where CPUID says AVX512_BF16.
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/cpu/kern_avx512bf.c TARGET_DIRECTORY backplane PROPERTIES
    COMPILE_OPTIONS "${BP_CPU_AVX2_FLAGS};-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mbmi2;-mavx512bf16")
endif()
