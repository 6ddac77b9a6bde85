# The two libraries, built from one set of objects.
#
# backplane         STATIC, libbackplane.a: what the CLI, the tests and the fuzzers link. They call
#                   internal functions (seam slots, the mock device, alloc failure injection),
#                   which a static link resolves whatever their visibility.
# backplane_shared  SHARED, libbackplane.so.<BP_ABI_VERSION>: the same archive linked whole into
#                   a shared object, for programs and the Python binding.
#
# Only the public API is exported from the shared object. The objects are compiled with
# -fvisibility=hidden, and every public header wraps its declarations in
# `#pragma GCC visibility push(default)` ... `pop` (gcc and clang), so a function declared in a
# public header is exported without anyone marking it, and one declared anywhere else is not.
# tests/install/exports.sh checks both directions against the declarations in include/*.h: a
# public declaration that is not exported (a header without the pragma, a function never
# defined) fails, and so does an exported symbol no public header declares.

# The number in the SONAME (libbackplane.so.N). Bump it with any change that breaks programs
# linked against the previous library: a function removed or changed, a public struct or enum
# layout changed. Adding functions does not break them.
set(BP_ABI_VERSION 0)

# -fPIC because the same objects go into the shared library (no measurable cost on x86-64).
set_target_properties(backplane PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
set_source_files_properties(${CMAKE_SOURCE_DIR}/src/core/version.c PROPERTIES
  COMPILE_DEFINITIONS "BP_VERSION_STRING=\"${PROJECT_VERSION}\"")

add_library(backplane_shared SHARED ${CMAKE_SOURCE_DIR}/cmake/shared.c)
set_target_properties(backplane_shared PROPERTIES
  OUTPUT_NAME backplane
  VERSION ${PROJECT_VERSION}
  SOVERSION ${BP_ABI_VERSION}
  C_VISIBILITY_PRESET hidden)
target_include_directories(backplane_shared PUBLIC ${CMAKE_SOURCE_DIR}/include)
# Backend SDKs stay private: the archive's own dependencies (libm, pthread, the static CUDA
# runtime, the OpenCL ICD loader) are linked into the shared object, and nothing of them reaches
# a program's link line or headers. The static CUDA runtime's symbols are hidden (--exclude-libs),
# or every cuda* function would be exported from libbackplane.so.
target_link_libraries(backplane_shared PRIVATE -Wl,--whole-archive backplane -Wl,--no-whole-archive)
target_link_options(backplane_shared PRIVATE -Wl,--exclude-libs,libcudart_static.a)
if(NOT BP_SANITIZE AND NOT BP_FUZZ)
  # Every symbol resolved at link time: a dependency missing here would otherwise surface only
  # when a user's program loads the library. (With the sanitizers the runtime resolves them.)
  target_link_options(backplane_shared PRIVATE -Wl,--no-undefined)
endif()
